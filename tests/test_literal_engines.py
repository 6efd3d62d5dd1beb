"""One-pass literal detection: hyperscan, ahocorasick_rs and pure Python give identical results.

The property compares, engine against engine, the lines found per literal and the spans every
protect rule yields; texts are built from the rules' own prefilter literals (in both cases, inside
words, next to non-ASCII text, on dense lines) so that every literal is exercised.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from compactor.detect import Detector
from compactor.engine import load_rules
from compactor.engine.literals import LINE_CAP, LiteralScanner, available_engines, literal_key
from compactor.engine.matchers import TextView, find_all, literal_scanner

DET = Detector(load_rules())
RULES = DET.rules
LITERALS = sorted({lit for cr in RULES for lit in cr.prefilter if lit})
ENGINES = available_engines()


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTOR_CACHE", str(tmp_path / "cache"))


def test_every_engine_is_installed_in_ci():
    # the dev extra installs both wheels on x86-64 Linux (CI): the comparison must not silently shrink
    import platform

    if platform.machine() in ("x86_64", "AMD64"):
        assert ENGINES == ["hyperscan", "ahocorasick", "python"]
    else:
        assert "ahocorasick" in ENGINES


def _spans(text: str, engine: str):
    view = TextView(text)
    found, timeouts = find_all(view, RULES, role="tool", engine=engine)
    return sorted((cr.id, a, b, ls, le) for cr, a, b, ls, le, _ in found), sorted(timeouts)


def _hits(text: str, engine: str):
    view = TextView(text)
    sc = literal_scanner(RULES, engine)
    sc.scan(view)
    return {k: view._hits[k] for k in sc.keys}


_piece = st.one_of(
    st.sampled_from(LITERALS),
    st.sampled_from(LITERALS).map(str.upper),
    st.sampled_from(LITERALS).map(str.title),
    st.text(alphabet="abcXYZ019 .:/_=-\t()[]éİßΣ中文✕", max_size=12),
    st.sampled_from(["\n", "\n", " ", "2022-05-30T09:10:31.1584995Z ", "Traceback (most recent call last):\n",
                     "  File \"a.py\", line 3, in f\n", "\tat a.B.c(B.java:3)\n", "FAILED tests/x.py::t\n",
                     "x.py:3: error: boom\n", "panic: oops\n\ngoroutine 1 [running]:\n"]),
)


@settings(max_examples=150)
@given(st.lists(_piece, max_size=60))
def test_engines_find_the_same_lines_and_spans(pieces):
    text = "".join(pieces)
    ref_hits = _hits(text, "python")
    ref_spans = _spans(text, "python")
    for eng in ENGINES[:-1]:
        assert _hits(text, eng) == ref_hits, eng
        assert _spans(text, eng) == ref_spans, eng


def test_dense_line_is_capped_and_still_exact():
    # one line with thousands of matches of dense literals, then lines with rarer literals
    text = "x " + "0x1f=_ " * 50_000 + " panic: late on the dense line\nerror: next line\nDO NOT skip\n"
    ref = _hits(text, "python")
    for eng in ENGINES[:-1]:
        assert _hits(text, eng) == ref
    assert ref[("panic", True)] == [0] and ref[("error", True)] == [1]
    assert LINE_CAP < 1000


def test_corpus_spans_identical_across_engines(corpus):
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in sorted((corpus / "crash-traces").glob("*.txt"))[:40]]
    texts += [(p / "fail.log").read_text(encoding="utf-8") for p in sorted((corpus / "ci-breakages").iterdir())
              if (p / "fail.log").is_file()][:6]
    for text in texts:
        text = text.replace("\r\n", "\n")
        ref = _spans(text, "python")
        for eng in ENGINES[:-1]:
            assert _spans(text, eng) == ref


def test_hyperscan_database_is_cached_on_disk_and_safe_to_delete(tmp_path, monkeypatch):
    if "hyperscan" not in ENGINES:
        pytest.skip("hyperscan wheel not available on this platform")
    monkeypatch.setenv("COMPACTOR_CACHE", str(tmp_path / "c"))
    lits = [("error", True), ("Traceback", False), ("✕", True)]
    LiteralScanner(lits, "hyperscan")
    files = list((tmp_path / "c").glob("literals-*.hsdb"))
    assert len(files) == 1
    files[0].write_bytes(b"garbage")  # a corrupt cache entry is rebuilt
    sc = LiteralScanner(lits, "hyperscan")
    view = TextView("ok\nERROR x\nTraceback\n")
    sc.scan(view)
    assert view._hits[("error", True)] == [1] and view._hits[("Traceback", False)] == [2]
    files[0].unlink()
    LiteralScanner(lits, "hyperscan")
    assert files[0].is_file()


def test_unknown_engine_is_refused():
    with pytest.raises(ValueError):
        LiteralScanner([("x", False)], "nope")


def test_many_dense_lines_across_chunks_stay_exact():
    lines = []
    for i in range(3000):
        if i % 3 == 0:
            lines.append("0x=_ " * 120 + ("Traceback" if i % 7 == 0 else "x"))
        else:
            lines.append(f"line {i} " + ("ERROR at a.py:3" if i % 11 == 0 else "ok"))
    text = "\n".join(lines)
    ref = _hits(text, "python")
    for eng in ENGINES[:-1]:
        assert _hits(text, eng) == ref
    assert ref[("traceback", True)] == [i for i in range(0, 3000, 3) if i % 7 == 0]


@pytest.mark.parametrize("engine", ENGINES)
def test_only_non_ascii_case_insensitive_literals(engine):
    # nothing for a multi-literal engine to compile: the scanner still finds the lines
    sc = LiteralScanner([("Ошибка", True), ("Ärger", True)], engine)
    view = TextView("ok\nОШИБКА: сбой\näRGER here\n")
    sc.scan(view)
    assert view._hits[literal_key("Ошибка", True)] == [1] and view._hits[literal_key("Ärger", True)] == [2]


def test_spans_built_at_the_edge_equal_validated_ones():
    from compactor.models import Span

    text = "Traceback (most recent call last):\n  File \"a.py\", line 3, in f\nKeyError: 'x'\nerror: boom at b.go:12\n"
    res = DET.detect(text, role="tool")
    assert res.raw_spans
    for s in res.raw_spans:
        again = Span.model_validate(s.model_dump())
        assert again == s and again.model_dump_json() == s.model_dump_json()
        with pytest.raises(Exception):
            s.start = 0  # frozen
        # Level 1 shortens long traces with model_copy: it must work on these spans too
        copy = s.model_copy(update={"text": "x", "elided": True})
        assert copy.text == "x" and copy.elided and s.text != "x" and not s.elided
