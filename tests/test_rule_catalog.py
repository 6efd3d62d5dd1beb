"""The on-disk rule catalog: a cache of the validated rules keyed by every rule file's hash. Safe
to delete, rebuilt when anything differs, never trusted blindly."""

from __future__ import annotations

import json
import shutil

import pytest

from compactor.engine import loader
from compactor.engine.loader import builtin_rules_dir, load_uncached
from compactor.errors import RuleError


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTOR_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "rules"


def _fingerprint(rs) -> list[str]:
    return [r.model_dump_json(by_alias=True) for r in rs]


def _catalogs(cache) -> list:
    return sorted(cache.glob("*.catalog"))


def test_catalog_is_written_then_read_instead_of_the_files(cache, monkeypatch):
    fresh = load_uncached((), True)
    first = load_uncached((), True, catalog=True)
    assert len(_catalogs(cache)) == 1
    assert _fingerprint(first) == _fingerprint(fresh)

    def no_parsing(*a, **k):
        raise AssertionError("rule files parsed although the catalog is valid")

    monkeypatch.setattr(loader, "parse_rule_file", no_parsing)
    again = load_uncached((), True, catalog=True)
    assert _fingerprint(again) == _fingerprint(fresh)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "tamper", "invalid-but-consistent", "missing-field",
                                    "wrong-section", "duplicate-id", "wrong-key", "not-a-list", "old-version"])
def test_a_damaged_catalog_is_never_used(cache, monkeypatch, damage):
    import hashlib
    import marshal

    fresh = load_uncached((), True)
    load_uncached((), True, catalog=True)
    (path,) = _catalogs(cache)
    header, _, body = path.read_bytes().partition(b"\n")
    head, rules = header.split(), marshal.loads(body)
    assert head[0] == b"compactor-rule-catalog" and head[3] == hashlib.sha256(body).hexdigest().encode()

    def write(rules, *, digest: bool) -> None:  # digest=True: a consistent file, only validation can reject it
        data = marshal.dumps(rules)
        if digest:
            head[3] = hashlib.sha256(data).hexdigest().encode()
        path.write_bytes(b" ".join(head) + b"\n" + data)

    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "garbage":
        path.write_bytes(b"\x00\xff not a catalog")
    elif damage == "tamper":  # a rule changed without the digest
        rules[0]["priority"] = 1
        write(rules, digest=False)
    elif damage == "invalid-but-consistent":  # digest recomputed: validation still rejects it
        rules[0]["priority"] = 500
        write(rules, digest=True)
    elif damage == "missing-field":
        del next(r for r in rules if r["kind"] == "regex")["regex_"]["scope"]
        write(rules, digest=True)
    elif damage == "wrong-section":  # a line-block section on a regex rule
        r = next(r for r in rules if r["kind"] == "regex")
        r["line_block"] = next(x for x in rules if x["kind"] == "line-block")["line_block"]
        write(rules, digest=True)
    elif damage == "duplicate-id":
        rules.append(dict(rules[0]))
        write(rules, digest=True)
    elif damage == "wrong-key":
        head[2] = b"0" * 32
        write(rules, digest=False)
    elif damage == "not-a-list":  # consistent, but not rule data
        write({"rules": rules}, digest=True)
    else:
        head[1] = b"1"
        write(rules, digest=False)
    calls = []
    real = loader.parse_rule_file
    monkeypatch.setattr(loader, "parse_rule_file", lambda *a: calls.append(a) or real(*a))
    got = load_uncached((), True, catalog=True)
    assert calls, "the damaged catalog was used"
    assert _fingerprint(got) == _fingerprint(fresh)


def test_catalog_rules_are_scanned_without_the_typed_models(cache):
    """Read from the catalog, the scanning engines get plain records; the typed models are built
    only when asked for, from the same data."""
    load_uncached((), True, catalog=True)
    rs = load_uncached((), True, catalog=True)
    assert rs._rules is None
    recs = rs.records("protect")
    assert recs and rs._rules is None
    typed = {r.id: r for r in rs.stage("protect")}
    assert [r.id for r in recs] == list(typed)
    for rec in recs:
        rule = typed[rec.id]
        assert (rec.family, rec.priority, rec.roles, rec.prefilter) == (rule.family, rule.priority, rule.roles,
                                                                         rule.prefilter)
        if rule.kind == "regex":
            assert rec.regex_.pattern == rule.regex_.pattern and rec.regex_.flags == rule.regex_.flags
        if rule.kind == "line-block":
            assert rec.line_block.continue_ == rule.line_block.continue_


def test_an_edited_rule_file_gets_a_new_catalog(cache, tmp_path):
    rules = tmp_path / "rules"
    shutil.copytree(builtin_rules_dir(), rules)
    target = next(rules.rglob("trace.python.toml"))
    a = load_uncached((str(rules),), False, catalog=True)
    text = target.read_text()
    import re

    edited = re.sub(r"(?m)^priority = \d+", "priority = 77", text) if re.search(r"(?m)^priority = ", text) \
        else text.replace('family = "trace"', 'family = "trace"\npriority = 77', 1)
    assert edited != text and a.by_id["trace.python"].priority != 77
    target.write_text(edited)
    b = load_uncached((str(rules),), False, catalog=True)
    assert len(_catalogs(cache)) == 2
    assert a.by_id["trace.python"].priority != b.by_id["trace.python"].priority
    # a broken rule file is reported as always, whatever the catalog holds
    target.write_text("this is not toml = = =")
    with pytest.raises(RuleError, match="trace.python"):
        load_uncached((str(rules),), False, catalog=True)


def test_the_key_is_remembered_by_stat_and_a_same_size_edit_still_changes_it(cache, tmp_path, monkeypatch):
    """A start does not read and hash every rule file while their stat is unchanged; an edit (even
    one that keeps the size and the modification time) changes the change time, so the key is
    computed again from the contents."""
    import os

    rules = tmp_path / "rules"
    shutil.copytree(builtin_rules_dir(), rules)
    files = [(rules, sorted(rules.rglob("*.toml")))]
    key = loader._known_catalog_key(files)
    assert key == loader._catalog_key(files) and len(list((cache / "keys").iterdir())) == 1
    calls = []
    real = loader._catalog_key
    monkeypatch.setattr(loader, "_catalog_key", lambda f: calls.append(1) or real(f))
    assert loader._known_catalog_key(files) == key and calls == []  # from the memo: no file read
    target = next(rules.rglob("trace.python.toml"))
    st = target.stat()
    text = target.read_text()
    edited = text.replace("trace", "TRACE", 1)
    assert len(edited) == len(text) and edited != text
    target.write_text(edited)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same modification time
    new = loader._known_catalog_key(files)
    assert calls == [1] and new != key and new == real(files)
    # a damaged memo entry is recomputed, not believed
    for memo in (cache / "keys").iterdir():
        memo.write_text("not a key")
    assert loader._known_catalog_key(files) == new and calls == [1, 1]


def test_empty_cache_variable_disables_the_catalog(monkeypatch, tmp_path):
    monkeypatch.setenv("COMPACTOR_CACHE", "")
    assert loader.catalog_dir() is None
    load_uncached((), True, catalog=True)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert not list(tmp_path.rglob("*.catalog"))


def test_unwritable_cache_only_costs_speed(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("COMPACTOR_CACHE", str(blocker))  # a file: the folder cannot be created
    assert len(load_uncached((), True, catalog=True)) == len(load_uncached((), True))


def test_plain_checks_cover_every_schema_field():
    from compactor.engine import schema
    from compactor.engine.records import FIELDS

    models = {"rule": schema.Rule, "regex_": schema.RegexSpec, "line_block": schema.LineBlockSpec,
              "literal": schema.LiteralSpec, "classify": schema.ClassifySpec, "captures": schema.CaptureSpec,
              "examples": schema.Examples}
    assert set(models) == set(FIELDS)
    for name, model in models.items():
        assert set(FIELDS[name]) == set(model.model_fields), name


def _mutations(value):
    """Values a field could be damaged into: out of its range, of another type."""
    if isinstance(value, bool):
        return [0, "yes", None]
    if isinstance(value, int):
        return [value - 1000, value + 100_000_000, -1, 0, str(value), 1.5, None, True]
    if isinstance(value, str):
        return ["", "x", 3, None, ["x"]]
    if isinstance(value, list):
        return [[], [3], "x", None]
    return [None, 3]


def test_plain_checks_agree_with_the_schema():
    """Every field of a sample rule of each kind, damaged: the plain check rejects exactly what the
    typed schema rejects (so a catalog the check lets through always builds its typed rules)."""
    from pydantic import ValidationError

    from compactor.engine.records import check_rule_data
    from compactor.engine.schema import Rule

    data = load_uncached((), True).data()
    samples = [next(d for d in data if d["kind"] == k) for k in ("regex", "line-block", "literal", "classify")]
    checked = 0
    for sample in samples:
        sections = [None] + [s for s in ("regex_", "line_block", "literal", "classify", "examples") if sample[s]]
        for section in sections:
            fields = sample if section is None else sample[section]
            for field, value in fields.items():
                if section is None and field in ("regex_", "line_block", "literal", "classify", "examples"):
                    continue
                for bad in _mutations(value):
                    d = json.loads(json.dumps(sample))
                    (d if section is None else d[section])[field] = bad
                    try:
                        Rule.model_validate(d, context={"patterns_checked": True})
                        typed_ok = True
                    except ValidationError:
                        typed_ok = False
                    plain_ok = check_rule_data(d) is None
                    if plain_ok:  # never more lenient than the schema
                        assert typed_ok, (sample["id"], section, field, bad)
                    checked += 1
    assert checked > 200
