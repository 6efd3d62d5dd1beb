"""Compiled regex programs cached on disk (engine/programs.py): the rebuilt pattern is the same
program as a fresh ``regex.compile``, and a bad file is never trusted."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import regex

from compactor.engine import load_rules
from compactor.engine import programs as P


def _rule_patterns() -> list[tuple[str, int]]:
    from compactor.engine.matchers import _flags

    out = []
    for r in load_rules().records("protect"):
        if r.kind == "regex":
            out.append((r.regex_.pattern, _flags(r.regex_.flags)))
            gate = r.regex_.gate
            if gate:  # one pattern or a list of them
                out += [(g, _flags(r.regex_.flags)) for g in ([gate] if isinstance(gate, str) else gate)]
        elif r.kind == "line-block":
            spec = r.line_block
            out += [(p, 0) for p in (spec.start, *spec.continue_, *(spec.before or ()), spec.end) if p]
    return out


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTOR_CACHE", str(tmp_path))
    monkeypatch.setattr(P, "_programs", None)
    monkeypatch.setattr(P, "_dirty", False)
    monkeypatch.setattr(P, "_registered", True)  # the test saves by hand, not at exit
    return tmp_path


def test_rebuilt_programs_equal_fresh_compiles(fresh):
    pats = _rule_patterns()
    assert len(pats) > 100
    first = [P.compile_pattern(p, f) for p, f in pats]
    P._save()
    path = P.programs_path()
    assert path is not None and path.is_file()
    P._programs = None
    rebuilt = [P.compile_pattern(p, f) for p, f in pats]
    assert P._dirty is False  # every pattern came from the file
    lines = ["  File \"/app/pool.py\", line 142, in acquire", "ERROR: pool.py:12:3 failed (exit code 2)",
             "\tat com.acme.Pool.get(Pool.java:88)", "Tests run: 3, Failures: 1, Errors: 0", "plain text"]
    for (p, f), a, b in zip(pats, first, rebuilt):
        fresh_c = regex.compile(p, f)
        assert b._pickled_data == fresh_c._pickled_data == a._pickled_data, p
        assert b.pattern == p and b.flags == fresh_c.flags and b.groupindex == fresh_c.groupindex
        for line in lines:
            ma, mb = fresh_c.search(line), b.search(line)
            assert (ma and ma.span()) == (mb and mb.span())


def test_bad_files_are_ignored(fresh):
    P.compile_pattern(r"a(b+)c", 0)
    P._save()
    path = P.programs_path()
    data = path.read_bytes()
    header, _, body = data.partition(b"\n")
    for bad in (b"", b"garbage", header + b"\n" + body[:-3] + b"xyz", b"compactor-regex-programs 0 x\n" + body):
        path.write_bytes(bad)
        P._programs = None
        assert P._load() == {}
        assert P.compile_pattern(r"a(b+)c", 0).search("xabbbc").span() == (1, 6)


def test_a_wrong_program_is_not_used(fresh):
    # a program stored under another pattern's key: the rebuilt source differs, so it is compiled afresh
    other = regex.compile(r"zzz")._pickled_data
    P._programs = {f"0\0{'a+'}": other}
    assert P.compile_pattern("a+", 0).search("baa").span() == (1, 3)


def test_no_cache_folder(monkeypatch):
    monkeypatch.setenv("COMPACTOR_CACHE", "")
    assert P.programs_path() is None


def test_trim_is_identical_with_a_cold_and_a_warm_cache(tmp_path):
    log = tmp_path / "x.log"
    lines = []
    for i in range(300):
        lines.append(f"[INFO] step {i} downloading artifact {i % 7}")
        if i % 50 == 0:
            lines += ["Traceback (most recent call last):", f'  File "/app/m{i}.py", line {i + 1}, in run',
                      "ValueError: bad value", f"src/pool.go:{i}:3: undefined: x", "Tests run: 4, Failures: 1"]
    log.write_text("\n".join(lines) + "\n")
    env = dict(os.environ, COMPACTOR_CACHE=str(tmp_path / "cache"))
    outs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-m", "compactor", "trim", str(log)], env=env, capture_output=True,
                           check=True)
        outs.append(r.stdout)
    assert list((tmp_path / "cache").glob("programs-*.bin"))
    assert outs[0] == outs[1]
    assert b"ValueError: bad value" in outs[0]


def test_cached_branches_equal_a_fresh_split(fresh):
    from compactor.engine.branches import _as_data, split_any, split_cached
    from compactor.engine.matchers import _flags

    rules = [r for r in load_rules().records("protect") if r.kind == "regex"]
    first = [_as_data(split_cached(r.regex_.pattern, _flags(r.regex_.flags))) for r in rules]
    P._save()
    P._programs = None
    again = [_as_data(split_cached(r.regex_.pattern, _flags(r.regex_.flags))) for r in rules]
    assert P._dirty is False  # every split came from the file
    fresh_split = [_as_data(split_any(r.regex_.pattern, _flags(r.regex_.flags))) for r in rules]
    assert first == again == fresh_split
    assert sum(x is not None for x in fresh_split) >= 5


def test_a_malformed_cached_split_is_recomputed(fresh):
    import compactor.engine.branches as B
    from compactor.engine.branches import _as_data, split_any, split_cached

    pat = r"FAILED \S|Tests run: \d+"
    P._programs = {f"split {P.source_hash(B.__file__)}\0{0}\0{pat}": ([("x", 5)],)}
    assert _as_data(split_cached(pat, 0)) == _as_data(split_any(pat, 0))
