"""ReDoS: every built-in rule against long adversarial lines, under a time limit per MB."""

from __future__ import annotations

import pytest

from compactor.engine import load_rules
from compactor.engine.pump import pump_rule

RULES = list(load_rules())


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_rule_survives_pump(rule):
    assert pump_rule(rule) is None


def test_pump_catches_a_bad_pattern():
    from compactor.engine.schema import Rule

    bad = Rule.model_validate({
        "id": "error.bad-pattern", "kind": "regex", "family": "error", "description": "nested alternation bait",
        "regex": {"pattern": r"^(a|a)+$"}, "examples": {"match": ["aaa"], "no_match": ["b"]},
    })
    assert pump_rule(bad) is not None


def test_timeout_keeps_region_verbatim():
    """A rule that runs out of time keeps its text verbatim and says so."""
    from compactor.engine.classify import Classifier
    from compactor.collapse.level1 import Level1
    from compactor.collapse.store import MemoryStore
    from compactor.config import CompactorConfig
    from compactor.detect import Detector
    from compactor.engine.loader import RuleSet
    from compactor.engine.schema import Rule
    import compactor.engine.matchers as m

    slow = Rule.model_validate({
        "id": "error.slow-pattern", "kind": "regex", "family": "error", "description": "catastrophic on purpose",
        "regex": {"pattern": r"(x+x+)+y|(a|a)+$"}, "examples": {"match": ["xxy"], "no_match": ["b"]},
    })
    rs = RuleSet([slow] + [r for r in load_rules().stage("classify")])
    lvl = Level1(Detector(rs), Classifier(rs.stage("classify")), MemoryStore(), CompactorConfig())
    text = "\n".join(["Downloading x"] * 50 + ["a" * 40 + "!"])
    old = m.BASE_BUDGET
    m.BASE_BUDGET = 0.01
    try:
        out = lvl.collapse(text, role="tool", command="pip install x")
    finally:
        m.BASE_BUDGET = old
    assert out.text == text and not out.changed
    assert any(d.code == "rule-timeout" and d.rule_id == "error.slow-pattern" for d in out.diagnostics)
