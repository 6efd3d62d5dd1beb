"""Module-level patterns compile on first use and then behave as the compiled pattern."""

from __future__ import annotations

import copy
import pickle
import re
import subprocess
import sys

import regex

from compactor.lazyre import lazy_re, lazy_regex


def test_nothing_is_compiled_until_first_use():
    p = lazy_regex(r"(?P<word>\p{L}+)\s+(\d+)", regex.I)
    assert "_compiled" not in p.__dict__ and p.pattern == r"(?P<word>\p{L}+)\s+(\d+)"
    m = p.search("-- Über 42 --")
    assert m is not None and m.group("word") == "Über" and m.group(2) == "42"
    assert p.__dict__["_compiled"] is p.compiled()
    # from now on the methods are the compiled pattern's own bound methods
    assert p.search.__self__ is p.compiled() and p.sub.__self__ is p.compiled()


def test_every_method_and_attribute_matches_the_compiled_pattern():
    text = "a1 b22\nc333 x"
    for lazy, real in ((lazy_regex(r"^(\w)(\d*)", regex.M), regex.compile(r"^(\w)(\d*)", regex.M)),
                       (lazy_re(r"(\w)(\d+)"), re.compile(r"(\w)(\d+)"))):
        fresh = copy.copy(lazy)  # an uncompiled copy goes through the compiling stand-ins
        assert [m.span() for m in fresh.finditer(text)] == [m.span() for m in real.finditer(text)]
        assert lazy.findall(text) == real.findall(text)
        assert lazy.sub("<\\1>", text) == real.sub("<\\1>", text) and lazy.subn("", text) == real.subn("", text)
        assert lazy.split(text) == real.split(text)
        assert bool(lazy.match(text)) == bool(real.match(text)) and lazy.fullmatch(text) == real.fullmatch(text)
        assert (lazy.groups, lazy.flags, lazy.groupindex) == (real.groups, real.flags, real.groupindex)


def test_copies_and_pickles_compile_on_their_own():
    p = lazy_regex(r"x+")
    q = pickle.loads(pickle.dumps(p))
    assert "_compiled" not in q.__dict__ and q.search("axxb").group() == "xx"
    assert repr(p) == "lazy_regex('x+', 0)"


def test_importing_the_package_compiles_no_regex_pattern():
    """Compiling with ``regex`` costs about a millisecond a pattern: importing the stages compiles
    none (before, some 160 module-level patterns, ~0.2 s)."""
    code = ("import regex._main as m; n = [0]; f = m._compile\n"
            "def count(*a, **k):\n    n[0] += 1\n    return f(*a, **k)\n"
            "m._compile = count\n"
            "import compactor.anchor, compactor.pipeline, compactor.budget, compactor.formats, compactor.codeview\n"
            "import compactor.llm, compactor.tools.triggers, compactor.tools.memory, compactor.tools.fidelity\n"
            "print(n[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert int(out) == 0


def test_a_compactor_has_lazy_patterns_rebuilt_from_the_cached_programs(tmp_path):
    """Once a Compactor is built, a lazy ``regex`` pattern's first use goes through the engine's
    program cache: a pattern compiled in an earlier process is rebuilt from its program, not
    parsed again (``regex``'s own compiler is not called), and it is the same pattern."""
    pattern = r"(?P<head>\bcompactor-lazy-probe\b)\s+(\d+)"
    code = ("import regex._main as m; n = [0]; f = m._compile\n"
            "def count(*a, **k):\n    n[0] += 1\n    return f(*a, **k)\n"
            "m._compile = count\n"
            "import compactor\n"
            "from compactor.lazyre import lazy_regex\n"
            "compactor.Compactor()\n"
            "n[0] = 0\n"
            f"p = lazy_regex({pattern!r})\n"
            "m2 = p.search('x compactor-lazy-probe  42')\n"
            "print(n[0], m2.group('head'), m2.group(2))")
    env = {**__import__("os").environ, "COMPACTOR_CACHE": str(tmp_path)}
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert first.split() == ["1", "compactor-lazy-probe", "42"]  # parsed once, and its program kept on exit
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert again.split() == ["0", "compactor-lazy-probe", "42"]


def test_a_registered_compiler_compiles_the_lazy_patterns_of_its_module():
    from compactor import lazyre

    seen = []

    def compile_(pattern, flags=0):
        seen.append((pattern, flags))
        return regex.compile(pattern, flags)

    old = lazyre._COMPILERS.get("regex")
    lazyre.use_compiler("regex", compile_)
    try:
        p = lazy_regex(r"a(b+)", regex.I)
        assert p.search("xABBy").group(1) == "BB"
        assert seen == [(r"a(b+)", regex.I)]
        assert lazy_re(r"q").search("aq") is not None and len(seen) == 1  # ``re`` patterns: unchanged
    finally:
        if old is None:
            lazyre._COMPILERS.pop("regex", None)
        else:
            lazyre.use_compiler("regex", old)


def test_no_module_keeps_a_compiling_stand_in_as_its_pattern_method():
    # 'NAME = lazy_re(...).search' binds the compiling stand-in for good: every call then goes
    # through a Python function and a lookup (~1 us) instead of the compiled pattern's own method
    import importlib
    import pkgutil

    import compactor
    from compactor.lazyre import LazyPattern

    stand_ins = {getattr(LazyPattern, name) for name in ("search", "match", "fullmatch", "finditer", "findall",
                                                         "sub", "subn", "split", "splititer", "scanner")}
    found = []
    for info in pkgutil.walk_packages(compactor.__path__, "compactor."):
        if info.name.endswith("__main__"):  # runs the command line
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an integration whose optional dependency is absent
            continue
        for name, value in vars(module).items():
            if isinstance(getattr(value, "__self__", None), LazyPattern) and getattr(value, "__func__", None) in stand_ins:
                found.append(f"{info.name}.{name}")
    assert found == []
