"""The rule catalog: one generated test per rule example, plus catalog-wide checks."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from compactor.engine import check_rule, load_rules
from compactor.engine.loader import builtin_rules_dir
from compactor.engine.schema import FAMILIES, RULE_ID
from compactor.errors import RuleError

RULES = load_rules()
CASES = [(r, res) for r in RULES for res in check_rule(r)]


@pytest.mark.parametrize("rule,result", CASES, ids=[res.test_id for _, res in CASES])
def test_rule_example(rule, result):
    assert result.ok, f"{rule.source}: {result.kind}[{result.index}] {result.detail}\n---\n{result.text}"


def test_catalog_is_not_empty_and_covers_families():
    families = {r.family for r in RULES.stage("protect")}
    assert len(RULES) >= 2
    assert families <= set(FAMILIES)


def test_ids_are_file_stems_and_well_formed():
    import re

    for rule in RULES:
        assert Path(rule.source).name == rule.id + ".toml"
        assert re.match(RULE_ID, rule.id)
    assert len({r.id for r in RULES}) == len(RULES)


def test_every_rule_has_match_and_no_match_examples():
    for rule in RULES:
        assert rule.examples.match and rule.examples.no_match, rule.id


def test_every_rule_file_parses_as_toml():
    for path in sorted(builtin_rules_dir().rglob("*.toml")):
        tomllib.loads(path.read_text(encoding="utf-8"))


def test_loader_reports_every_bad_file_at_once(tmp_path):
    (tmp_path / "bad.one.toml").write_text('kind = "regex"\nfamily = "error"\ndescription = "short"\n')
    (tmp_path / "bad.two.toml").write_text("this is = not toml [")
    (tmp_path / "bad.three.toml").write_text(
        'kind = "regex"\nfamily = "error"\ndescription = "a broken pattern here"\n'
        '[regex]\npattern = "(unclosed"\n[examples]\nmatch=["x"]\nno_match=["y"]\n')
    with pytest.raises(RuleError) as exc:
        load_rules([tmp_path])
    problems = "\n".join(exc.value.problems)
    assert "bad.one.toml" in problems and "bad.two.toml" in problems and "bad.three.toml" in problems
    assert "field description" in problems  # names the field
    assert "field examples" in problems
    assert "invalid regular expression" in problems


def test_user_rule_dir_adds_and_overrides(tmp_path):
    (tmp_path / "error.custom-marker.toml").write_text(
        'kind = "regex"\nfamily = "error"\ndescription = "our build prints BOOM on failure"\n'
        'prefilter = ["BOOM"]\n[regex]\npattern = "BOOM: .+"\n'
        '[examples]\nmatch = ["BOOM: disk full"]\nno_match = ["boom box"]\n')
    rs = load_rules([tmp_path])
    assert "error.custom-marker" in rs.by_id
    assert all(res.ok for res in check_rule(rs.by_id["error.custom-marker"]))
