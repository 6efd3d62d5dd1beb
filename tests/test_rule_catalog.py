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
    return sorted(cache.glob("*.json"))


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


@pytest.mark.parametrize("damage", ["truncate", "garbage", "tamper", "invalid-but-consistent", "wrong-key"])
def test_a_damaged_catalog_is_never_used(cache, monkeypatch, damage):
    fresh = load_uncached((), True)
    load_uncached((), True, catalog=True)
    (path,) = _catalogs(cache)
    data = json.loads(path.read_text())
    if damage == "truncate":
        path.write_text(path.read_text()[:100])
    elif damage == "garbage":
        path.write_bytes(b"\x00\xff not json")
    elif damage == "tamper":  # a rule changed without the digest
        data["rules"][0]["priority"] = 1
        path.write_text(json.dumps(data))
    elif damage == "invalid-but-consistent":  # digest recomputed: validation still rejects it
        import hashlib

        data["rules"][0]["priority"] = 500
        data["digest"] = hashlib.sha256(json.dumps(data["rules"], sort_keys=True, ensure_ascii=False)
                                        .encode()).hexdigest()
        path.write_text(json.dumps(data))
    else:
        data["key"] = "0" * 32
        path.write_text(json.dumps(data))
    calls = []
    real = loader.parse_rule_file
    monkeypatch.setattr(loader, "parse_rule_file", lambda *a: calls.append(a) or real(*a))
    got = load_uncached((), True, catalog=True)
    assert calls, "the damaged catalog was used"
    assert _fingerprint(got) == _fingerprint(fresh)


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


def test_empty_cache_variable_disables_the_catalog(monkeypatch, tmp_path):
    monkeypatch.setenv("COMPACTOR_CACHE", "")
    assert loader.catalog_dir() is None
    load_uncached((), True, catalog=True)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert not list(tmp_path.rglob("*.json"))


def test_unwritable_cache_only_costs_speed(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("COMPACTOR_CACHE", str(blocker))  # a file: the folder cannot be created
    assert len(load_uncached((), True, catalog=True)) == len(load_uncached((), True))
