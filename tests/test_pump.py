"""ReDoS: every built-in rule against long adversarial lines, under a time limit per MB."""

from __future__ import annotations

import pytest

from compactor.engine import load_rules
from compactor.engine.pump import derived_searches, pump_derived, pump_rule

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


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_derived_patterns_survive_pump(rule):
    """The patterns derived from a rule (its UTF-8 approximation, its branches, its gate's parts)
    pass the same pump as the rule."""
    assert pump_derived(rule) is None


def _nested_unbounded(items, inside: bool) -> bool:
    """Does a repeat of more than one round hold a repeat without bound (in the parsed ``items``)?"""
    from re import _constants as C  # noqa: N812

    for op, av in items:
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            if inside and av[1] is C.MAXREPEAT:
                return True
            if _nested_unbounded(av[2], inside or av[1] > 1):
                return True
        elif op is C.SUBPATTERN and _nested_unbounded(av[3], inside):
            return True
        elif op is C.BRANCH and any(_nested_unbounded(b, inside) for b in av[1]):
            return True
        elif op is C.ATOMIC_GROUP and _nested_unbounded(av, inside):
            return True
    return False


def test_no_approximation_nests_unbounded_repeats():
    """The approximations the engine derives from the rules (ASCII and UTF-8) nest no unbounded
    repeat inside a repeat: none can backtrack exponentially."""
    from re import _parser as sre

    from compactor.engine.approx import approximate, approximate_utf8
    from compactor.engine.matchers import compile_rule

    seen = 0
    for rule in RULES:
        if rule.stage == "classify":
            continue
        src = compile_rule(rule).approx_source
        if src is None:
            continue
        for expr in (approximate(*src), approximate_utf8(*src)):
            if expr:
                seen += 1
                assert not _nested_unbounded(list(sre.parse(expr)), False), (rule.id, expr[:200])
    assert seen > 60
    # the shape that hung a search on a line of source code with "→" (2^n ways to split n characters)
    assert _nested_unbounded(list(sre.parse(r"(?:[\x00-\x7f]|[\x80-\xff]+)*error")), False)


def test_a_source_view_line_with_arrows_is_searched_in_time():
    """One line of a source view (line numbers joined by "→", deep indentation), as a tool result
    read as plain text holds it, next to a failure word: the rules' UTF-8 approximations answer
    at the rules' pace."""
    from compactor.engine.pump import _stopped_after
    from compactor.engine.matchers import compile_rule

    line = "Error: " + "".join(f"{n:>6}→{' ' * 40}match x {{ Ok(v) => v, Err(e) => None }}\\n" for n in range(60))
    assert len(line) > 4000 and len(line) <= 4096 * 2
    line = line[:4096]
    checks = [(r.id, compile_rule(r).wide_check) for r in RULES if r.stage != "classify" and r.kind == "regex"]
    checks = [(i, c) for i, c in checks if c is not None]
    assert any(i == "number.tool-parameter" for i, _ in checks)
    data = line.encode("utf-8")
    for rule_id, check in checks:
        with _stopped_after(1.0):
            check.search(data)
