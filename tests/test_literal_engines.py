"""One-pass literal detection: hyperscan, ahocorasick_rs and pure Python give identical results.

The property compares, engine against engine, the lines found per literal and the spans every
protect rule yields; texts are built from the rules' own prefilter literals (in both cases, inside
words, next to non-ASCII text, on dense lines) so that every literal is exercised.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings, strategies as st

from compactor.detect import Detector
from compactor.engine import load_rules
from compactor.engine.literals import LINE_CAP, LiteralScanner, available_engines, literal_key, wide_key
from compactor.engine.matchers import TextView, find_all, literal_scanner
from conftest import corpus_files

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


def _hits(text: str, engine: str, skipped: set | None = None):
    """The lines per literal; for the literals ``skipped`` (by default those the engine leaves out of
    its scan, covered by the rules' approximations), only the non-ASCII lines that hold them, which
    is all such an engine looks them up on."""
    view = TextView(text)
    sc = literal_scanner(RULES, engine)
    sc.scan(view)
    if skipped is None:
        skipped = {key for key, _, _ in sc.skipped}
        if skipped:  # (a skipped literal is looked up on the non-ASCII lines only)
            assert all(k not in view._hits for k in skipped)
            return {k: list(view._hits[wide_key(k) if k in skipped else k]) for k in sc.keys}
    return {k: [i for i in view._hits[k] if not view.lines[i].isascii()] if k in skipped else list(view._hits[k])
            for k in sc.keys}  # (a key found nowhere may share one empty tuple)


def _same_hits(text: str, eng: str) -> None:
    """The rules' scanner of ``eng`` against pure Python, and a plain scanner of every literal
    (no approximation covers one: the engine scans them all, dense lines included) likewise."""
    got = _hits(text, eng)
    skipped = {key for key, _, _ in literal_scanner(RULES, eng).skipped}
    assert got == _hits(text, "python", skipped), eng
    assert _plain_hits(text, eng) == _plain_hits(text, "python"), eng


_PLAIN: dict = {}


def _plain_hits(text: str, engine: str) -> dict:
    sc = _PLAIN.get(engine)
    if sc is None:
        keys = sorted({literal_key(lit, cr.ignore_case) for cr in RULES for lit in cr.prefilter if lit})
        sc = _PLAIN[engine] = LiteralScanner(keys, engine)
    view = TextView(text)
    sc.scan(view)
    assert not sc.skipped
    return {k: list(view._hits[k]) for k in sc.keys}


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
        if eng == "ahocorasick":
            assert _hits(text, eng) == ref_hits, eng
        _same_hits(text, eng)
        assert _spans(text, eng) == ref_spans, eng


def test_dense_line_is_capped_and_still_exact():
    # one line with thousands of matches of dense literals, then lines with rarer literals
    text = "x " + "0x1f=_ " * 50_000 + " panic: late on the dense line\nerror: next line\nDO NOT skip\n"
    ref = _hits(text, "python")
    for eng in ENGINES[:-1]:
        _same_hits(text, eng)
        assert _spans(text, eng) == _spans(text, "python"), eng
    assert ref[("panic", True)] == [0] and ref[("error", True)] == [1]
    assert LINE_CAP < 1000


@pytest.mark.parametrize("late", ["PANIC: late", "Segmentation Fault late", "’ Traceback ’", "İ ERR! İ"])
def test_long_dense_lines_are_rechecked_exactly(late):
    # dense lines longer than the one-pass recheck threshold, with non-ASCII characters and
    # literals in other cases that occur only after the cap; short dense lines around them
    from compactor.engine.literals import RECHECK_SCAN

    dense = "0x1f=_ error: " * (RECHECK_SCAN // 4)
    text = "\n".join([dense + late, "’" + dense + late.lower(), ("0x1f " * 100) + late, "Exit code 3 ’", dense])
    assert len(dense) > RECHECK_SCAN
    ref = _hits(text, "python")
    for eng in ENGINES[:-1]:
        _same_hits(text, eng)
        assert _spans(text, eng) == _spans(text, "python"), eng
    assert any(lines for lines in ref.values())


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
        _same_hits(text, eng)
    assert ref[("traceback", True)] == [i for i in range(0, 3000, 3) if i % 7 == 0]


@pytest.mark.parametrize("engine", ENGINES)
def test_only_non_ascii_case_insensitive_literals(engine):
    # nothing for a multi-literal engine to compile: the scanner still finds the lines
    sc = LiteralScanner([("Ошибка", True), ("Ärger", True)], engine)
    view = TextView("ok\nОШИБКА: сбой\näRGER here\n")
    sc.scan(view)
    assert view._hits[literal_key("Ошибка", True)] == [1] and view._hits[literal_key("Ärger", True)] == [2]


@pytest.mark.parametrize("engine", ENGINES)
def test_non_ascii_lines_and_question_marks_read_exactly(engine):
    # the engines read one byte per character, a character outside Latin-1 as '?': a literal's '?'
    # is not faked there, non-ASCII literals are found on the non-ASCII lines, and Latin-1
    # letters stay what they are
    lits = [("what?", False), ("why?", True), ("●", False), ("✕", True), ("é:", False), ("caf", False)]
    lines = ["what\u2019s up", "what? real", "WHY\u2019", "\u25cf passed", "x \u2715 y", "café: x", "plain",
             "\u2019 what? again", "● and ✕"]
    text = "\n".join(lines * 40)
    sc = LiteralScanner(lits, engine)
    sc._python_until = 0
    sc._prepare()
    view = TextView(text)
    sc.scan(view)
    got = {k: view._hits[literal_key(*k)] for k in lits}
    ref_view = TextView(text)
    assert got == {k: ref_view.lines_with(*k) for k in lits}
    nine = range(0, 360, 9)
    assert got[("what?", False)] == sorted([i + 1 for i in nine] + [i + 7 for i in nine])
    assert got[("●", False)] == sorted([i + 3 for i in nine] + [i + 8 for i in nine])
    assert got[("é:", False)] == [i + 5 for i in nine] and got[("caf", False)] == [i + 5 for i in nine]


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


# ---- whole-text gates: the one pass also finds the candidate lines of a rule without prefilter ----

from compactor.engine.literals import CHUNK, bytes_view, gate_fits_hyperscan, gate_key, non_ascii_lines  # noqa: E402

GATED_WHOLE = [cr for cr in RULES if getattr(cr, "text_gate", None) is not None]


def test_a_whole_text_rule_is_gated():
    assert "fileref.path-line" in {cr.id for cr in GATED_WHOLE}


def _gate_lines(text: str, engine: str):
    view = TextView(text)
    literal_scanner(RULES, engine).scan(view)
    return {cr.id: view._hits.get(gate_key(*cr.text_gate)) for cr in GATED_WHOLE}


_ref_piece = st.one_of(
    st.sampled_from(["a.py:12", "Pool.java:[23,29]", "x.go:8:3", "Pool.cs:line 142", "Main.kt: (12, 5)",
                     "Makefile:39", "node:fs:601:3", "bin/sync:7:in '<main>'", "x.py:١٢", "ملف.py:3", "é.rs:1:2",
                     "2022-05-30T09:10:31.1584995Z ", "12:30:45", "sha256:9f86", "(Pool.java:142)", "\t"]),
    st.text(alphabet="abcXY019 .:/_=-()[]'`éİ中", max_size=10),
    st.just("\n"),
)


@settings(max_examples=150)
@given(st.lists(_ref_piece, max_size=50))
def test_whole_text_gates_give_the_ungated_spans(pieces):
    text = "".join(pieces)
    if "hyperscan" not in ENGINES:
        pytest.skip("hyperscan wheel not available on this platform")
    gated = _gate_lines(text, "hyperscan")
    assert all(lines is not None for lines in gated.values())  # the gated path is taken
    assert _gate_lines(text, "python") == {cr.id: None for cr in GATED_WHOLE}  # and here it is not
    for cr in GATED_WHOLE:
        assert _rule_spans(text, "hyperscan", cr) == _rule_spans(text, "python", cr), cr.id
        assert _GATED_VIEWS[-2] and not _GATED_VIEWS[-1]  # gated with hyperscan (a short text), not without


def _rule_spans(text: str, engine: str, cr):
    # every rule's literals are scanned (a scanner with no literal to find uses no engine at all)
    view = TextView(text)
    found, timeouts = find_all(view, RULES, role="tool", engine=engine)
    assert cr.id not in timeouts
    _GATED_VIEWS.append(view._hits.get(gate_key(*cr.text_gate)) is not None)
    return sorted((a, b, ls, le) for c, a, b, ls, le, _e in found if c is cr)


_GATED_VIEWS: list[bool] = []  # per _rule_spans call: was the gated path taken?


def test_whole_text_gates_on_every_corpus_file(corpus):
    if "hyperscan" not in ENGINES:
        pytest.skip("hyperscan wheel not available on this platform")
    from compactor.normalize import normalize

    n = gated = 0
    for p in corpus_files(corpus):
        text = normalize(p.read_text(encoding="utf-8", errors="replace"))
        for cr in GATED_WHOLE:
            ref = _rule_spans(text, "ahocorasick" if "ahocorasick" in ENGINES else "python", cr)
            assert _rule_spans(text, "hyperscan", cr) == ref, (p.name, cr.id)
            gated += _GATED_VIEWS[-1]
            n += len(ref)
    assert n > 1000
    assert gated > 100  # most corpus files take the gated path


def test_dense_gate_line_stays_exact():
    text = "x " + "a:1 " * 5_000 + " see pool.py:12\n" + "b:2 " * 300 + "\nplain error\nfoo.rb:7:in 'x'\n"
    for cr in GATED_WHOLE:
        ref = _rule_spans(text, "python", cr)
        assert len(ref) == 2  # pool.py:12 on the dense line, the Ruby frame
        if "hyperscan" in ENGINES:
            assert _rule_spans(text, "hyperscan", cr) == ref


def test_gates_hyperscan_reads_differently_are_not_scanned():
    assert gate_fits_hyperscan(r"[A-Za-z]:(?:\[?\d|line \d)|node:", False)
    assert gate_fits_hyperscan(r"[^\n:]+:\d", True)
    for bad in (r"a\sb", r"^x:\d", r"x:\d$", r"(?<=a):\d", r"(?i)x:\d", r"é:\d", r"\p{L}:\d", r"(a)\1", "x\\"):
        assert not gate_fits_hyperscan(bad, False), bad


def test_bytes_view_offsets_and_wide_lines():
    lines = ["ascii", "é ok", "", "中文 x", *["plain"] * 200, "İ", "end"]
    text = "\n".join(lines)
    view = TextView(text)
    data, starts, wide = bytes_view(view)
    # one byte per character: the text's own offsets; characters outside Latin-1 read as '?'
    assert data == text.encode("latin-1", "replace") and len(data) == len(text)
    assert starts == view.starts == [len("\n".join(lines[:i])) + (1 if i else 0) for i in range(len(lines))]
    assert data[starts[3]:starts[3] + 4] == b"?? x" and data[starts[1]:starts[1] + 4] == b"\xe9 ok"
    assert wide == [1, 3, len(lines) - 2]
    assert bytes_view(TextView("plain\nascii")) == (b"plain\nascii", [0, 6], [])


@pytest.mark.parametrize("at", [0, 1, 711, 712, 713, 1425, 1426, -2, -1])
def test_a_long_text_is_encoded_run_by_run_as_one_piece(at):
    # runs of about CHUNK characters: a wide line anywhere, at a run's edge too, reads the same
    # as the whole text encoded at once
    lines = [f"line {i:05d} " + "x" * 80 for i in range(2000)]  # 92 characters a line
    lines[at] = lines[at][:40] + "’ é 中" + lines[at][40:]
    lines[600] += "\u00ff"  # Latin-1: its own byte
    text = "\n".join(lines)
    assert len(text) > 2 * CHUNK
    data, starts, wide = bytes_view(TextView(text))
    assert data == text.encode("latin-1", "replace")
    assert wide == sorted({600, at % len(lines)})
    assert starts == TextView(text).starts


@given(st.lists(st.sampled_from(["", "a", "plain ascii", "é", "x中", "\x7f", "\x80", "😀 end"]), max_size=40))
def test_non_ascii_lines_are_every_line_with_a_wide_character(lines):
    assert non_ascii_lines(lines) == [i for i, line in enumerate(lines) if any(ord(c) > 127 for c in line)]


def test_a_gate_on_most_lines_falls_back_to_the_whole_text():
    # a 100,000-frame style trace: every line holds the gate; the scan gives up on it and the rule
    # searches the whole text (same spans)
    if "hyperscan" not in ENGINES:
        pytest.skip("hyperscan wheel not available on this platform")
    text = "java.lang.Error: boom\n" + "".join(f"\tat a.B.f{i}(B.java:{i})\n" for i in range(2000))
    view = TextView(text)
    literal_scanner(RULES, "hyperscan").scan(view)
    for cr in GATED_WHOLE:
        assert view._hits.get(gate_key(*cr.text_gate)) is None
        ref = sorted(x[1:5] for x in find_all(TextView(text), RULES, role="tool", engine="python")[0] if x[0] is cr)
        got = sorted(x[1:5] for x in find_all(TextView(text), RULES, role="tool", engine="hyperscan")[0] if x[0] is cr)
        assert got == ref and len(ref) == 2000


# ---- the second tier: rule patterns approximated by hyperscan in the same pass ----------------------

from compactor.engine.approx import PROBE, approximate, line_local  # noqa: E402
from compactor.engine.literals import approx_key  # noqa: E402

APPROXIMATED = [cr for cr in RULES if cr.approx is not None]
EXAMPLES = sorted({ex for cr in RULES for ex in (*cr.rule.examples.match, *cr.rule.examples.no_match)})


def test_most_rules_are_approximated_and_broad_ones_are_not():
    ids = {cr.id for cr in APPROXIMATED}
    assert len(ids) >= 30
    assert {"trace.kernel", "error.crash", "test-failure.summary", "fileref.path-paren"} <= ids
    # with their lookarounds dropped these match almost any line: they stay on their literals
    assert not ids & {"fileref.path-line", "number.parameter"}
    # unless a lookaround's own text is narrower: 'Error|Exception' of '[A-Z][\w$]*+(?<=Error|Exception)'
    assert "error.exception-line" in ids

    near = re.compile(approximate(r"[A-Z][\w$]*+(?<=Error|Exception):", 0))
    assert near.search("KeyError: x") and near.search("an Exception") and not near.search("Building Foo: 1")
    assert approximate(r"(?:\w+(?<=Error)|\d+)", 0) is None  # one alternative broad: the whole is
    assert line_local(*next(cr for cr in RULES if cr.id == "fileref.path-paren").approx_source)


def _hs_lines(expr: str, text: str) -> list[int]:
    import hyperscan

    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=[expr.encode("ascii")], ids=[0], elements=1, flags=[0])
    view = TextView(text)
    data, starts, _ = bytes_view(view)
    out: list[int] = []
    from bisect import bisect_right

    db.scan(data, match_event_handler=lambda i, a, b, f, c: out.append(bisect_right(starts, b - 1) - 1))
    return out


def test_an_approximation_matches_wherever_its_pattern_does():
    # each rule's own examples, line by line and with a CI prefix: an ASCII line where the exact
    # pattern finds a match is found by the approximation, reported once, at the line's end
    if "hyperscan" not in ENGINES:
        pytest.skip("hyperscan wheel not available on this platform")
    checked = 0
    for cr in APPROXIMATED:
        if cr.approx == "":  # needs a non-ASCII character: no ASCII line can match
            assert not any(cr.start.search(ln) for ex in EXAMPLES for ln in ex.split("\n") if ln.isascii())
            continue
        pat = cr.start if hasattr(cr, "start") and cr.approx_source[0] == getattr(cr.spec, "start", None) else cr.pat
        lines = [ln for ex in EXAMPLES for ln in ex.split("\n") if ln.isascii()]
        lines += ["2022-05-30T09:10:31.1584995Z " + ln for ln in lines[:200]]
        text = "\n".join(lines)
        found = _hs_lines(cr.approx, text)
        assert len(found) == len(set(found))  # once per line
        found_set = set(found)
        for i, ln in enumerate(lines):
            if pat.search(ln) is not None:
                assert i in found_set, (cr.id, ln)
                checked += 1
    assert checked > 200


_ATOMS = ["FAIL", "ok", "k", "s", "7", " ", ":", "\\d", "\\w", "\\s", "\\S", "\\W", ".", "[^:]", "[a-f]", "[\\w.]",
          "\u2713", "\u00e9", "\u00df", "[\u00e0-\u00ff]", "[^\\s\u2713]", "(?:ok|\u2717)", "passed", "\u4e2d"]
_QUANT = ["", "", "", "?", "+", "*", "{2}", "{1,3}", "{0,2}", "{3,}"]


@given(st.lists(st.tuples(st.sampled_from(_ATOMS), st.sampled_from(_QUANT)), min_size=1, max_size=5),
       st.booleans(), st.data())
@settings(max_examples=300, deadline=None)
def test_a_utf8_approximation_matches_wherever_its_pattern_does(atoms, caseless, data):
    """``approximate_utf8`` on generated patterns (classes, '.', repeats, non-ASCII literals,
    caseless) and lines generated to hold a match (any Unicode characters where the pattern
    allows them): every such line (but one holding a character that folds to an ASCII letter)
    is matched by the approximation in the line's UTF-8 bytes."""
    if "hyperscan" not in ENGINES:
        pytest.skip("hyperscan wheel not available on this platform")
    import hyperscan
    import regex

    from compactor.engine.approx import FOLDS_TO_ASCII, approximate_utf8

    pattern = "".join((a if len(a) == 1 or a.startswith(("\\", "[", "(")) else f"(?:{a})") + q for a, q in atoms)
    flags = regex.IGNORECASE if caseless else 0
    expr = approximate_utf8(pattern, flags)
    if expr is None:
        return  # (no approximation: every line is a candidate)
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=[expr.encode("ascii")], ids=[0], elements=1, flags=[hyperscan.HS_FLAG_PREFILTER])
    exact = regex.compile(pattern, flags)
    lines = data.draw(st.lists(st.from_regex(re.compile(pattern, re.IGNORECASE if caseless else 0)), min_size=1,
                               max_size=5))
    for line in lines:
        line = line.split("\n")[0]
        if exact.search(line) is None or any(c in line for c in FOLDS_TO_ASCII):
            continue
        got: list = []
        # (scanned as the engine scans every text: with a line break after its last line)
        db.scan(line.encode("utf-8", "surrogatepass") + b"\n", match_event_handler=lambda *_a: got.append(1))
        assert got, (pattern, caseless, line, expr)


@pytest.mark.parametrize("pattern, caseless, text", [
    ("7[a-f]", True, "A" * 15 + "7A"), ("7[a-f]", True, "A" * 40 + "7A"), ("7[AB]", False, "A" * 15 + "7A"),
    ("(?:FAIL)+k(?:ok|✗)+7[a-f]", True, "FAILkokokokokok7A")])
def test_a_match_that_ends_the_text_is_found_by_every_scan(pattern, caseless, text):
    """Hyperscan misses some expressions that end at the end of the data (``7[A-F][^\\n]*(?:\\n|$)``
    in fifteen 'A' and '7A'): the engine's scans add the line break, and find the line."""
    if "hyperscan" not in ENGINES:
        pytest.skip("hyperscan wheel not available on this platform")
    import hyperscan
    import regex

    from compactor.engine.approx import approximate
    from compactor.engine.classify import _Prefilter
    from compactor.engine.literals import line_starts, scan_lines

    flags = regex.IGNORECASE if caseless else 0
    assert regex.search(pattern, text, flags)
    expr = approximate(pattern, flags)
    assert expr is not None
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=[expr.encode("ascii")], ids=[0], elements=1, flags=[hyperscan.HS_FLAG_PREFILTER])
    for data in (text, f"ok\n{text}"):
        out: list[list[int]] = [[]]
        b = data.encode("ascii")
        scan_lines(db, b, line_starts(data.split("\n")), out, hyperscan.ScanTerminated)
        assert out[0] == [data.count("\n")], (pattern, data, expr)
    assert 0 in _Prefilter([(pattern, flags)]).may(text), (pattern, text)


@pytest.mark.parametrize("pattern,flags,line", [
    ("FAIL.ok", 0, "FAIL\u2713ok"),  # '.' is one character, of one byte or four
    ("FAIL.ok", 0, "FAIL\U0001f600ok"),
    (r"passed\W{2}ok", 0, "passed \u2014ok"),
    (r"FAIL [^:]{1,3}:", 0, "FAIL \u4e2d\u6587x:"),
    ("\u2713 passed", 0, "\u2713 passed"),  # a non-ASCII literal: its own bytes
    ("(?i)\u00c9CHEC", 0, "\u00e9chec"),  # caseless: any non-ASCII character's bytes
    (r"(?i)stop\d{2}", 0, "STOP\u0663\u0664"),  # \d takes Arabic-Indic digits
])
def test_a_utf8_approximation_counts_characters_not_bytes(pattern, flags, line):
    if "hyperscan" not in ENGINES:
        pytest.skip("hyperscan wheel not available on this platform")
    import hyperscan
    import regex

    from compactor.engine.approx import approximate_utf8

    assert regex.search(pattern, line, flags)
    expr = approximate_utf8(pattern, flags)
    assert expr is not None
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=[expr.encode("ascii")], ids=[0], elements=1, flags=[hyperscan.HS_FLAG_PREFILTER])
    got: list = []
    db.scan(line.encode("utf-8"), match_event_handler=lambda *_a: got.append(1))
    assert got, expr


def test_approximations_are_bounded_on_probe_lines():
    # the probe lines (ordinary output) match at most one approximation in a few
    for cr in APPROXIMATED:
        import re

        if cr.approx == "":
            continue
        probe = re.compile(cr.approx)
        assert sum(probe.search(line) is not None for line in PROBE) <= 2, cr.id


def test_unsupported_patterns_have_no_approximation():
    assert approximate(r"(a+)\1", 0) is None  # a backreference
    assert approximate(r"\p{L}+:\d", 0) is None  # the regex module's syntax the parser does not read
    assert approximate(r"(?=x)", 0) is None  # matches the empty string: every line
    assert approximate(r"^Traceback \(most recent call last\):$", 0) is not None
    # a pattern that needs a non-ASCII character matches no ASCII line: nothing to scan for
    assert approximate("● ", 0) == approximate("[✕✗×] x", 0) == approximate("x (?:●|✕)+", 0) == ""
    assert approximate("(?:●)?abc", 0) is not None and approximate("(?:●)?abc", 0) != ""
    assert not line_local(r"a\sb", 0) and not line_local(r"a(?=\n)", 0) and not line_local(r"\Aab", 0)
    assert line_local(r"a[^\n]b(?<=[^\s(]b)", 0)


_tier_piece = st.one_of(
    st.sampled_from(EXAMPLES),
    st.sampled_from(EXAMPLES).map(str.upper),
    st.sampled_from(EXAMPLES).map(lambda s: s.replace(" ", "  ")),
    st.sampled_from(EXAMPLES).map(lambda s: "\n".join("2022-05-30T09:10:31.1584995Z " + x for x in s.split("\n"))),
    st.sampled_from(["\n", "\n", " ", "é", "İ", "K", "ſ", "中", "0x" * 80, "error " * 70]),
    st.text(alphabet="abcXYZ019 .:/_=-\t()[]éİ✕", max_size=12),
)


@settings(max_examples=120, deadline=None)
@given(st.lists(_tier_piece, max_size=30))
def test_approximated_rules_give_the_same_spans_on_every_engine(pieces):
    # texts from the rules' own examples (upper-cased, re-spaced, CI-prefixed, next to non-ASCII
    # characters and dense lines): the narrowed candidate lines give exactly the literal tier's spans
    text = "\n".join(pieces)
    ref = _spans(text, "python")
    for eng in ENGINES[:-1]:
        assert _spans(text, eng) == ref, eng


def test_the_tier_is_taken_and_narrows(corpus):
    if "hyperscan" not in ENGINES:
        pytest.skip("hyperscan wheel not available on this platform")
    text = (corpus / "ci-breakages" / "guava_2087" / "fail.log").read_text(encoding="utf-8", errors="replace")
    view = TextView(text)
    literal_scanner([cr for cr in RULES if "tool" in cr.roles], "hyperscan").scan(view)
    kernel = next(cr for cr in RULES if cr.id == "trace.kernel")
    near = view._hits[approx_key(kernel.approx)]
    assert len(near) < len(view.candidates(kernel.prefilter, kernel.ignore_case)) / 10
    jest = next(cr for cr in RULES if cr.id == "trace.jest")  # '●': candidates are the non-ASCII lines
    assert jest.approx == "" and list(view._hits[approx_key("")]) == []  # present (scanned) and no line


def test_non_ascii_lines_stay_candidates():
    # the approximations read bytes: on a line with a non-ASCII character they promise nothing, so
    # such lines are always searched ('Kelvin sign' folding onto 'k', a class matching 'é')
    text = "ok\n\u212aernel BUG at x.c:1!\n" + "filler line\n" * 50 + "Traceback (most recent call last):\n  File \"é.py\", line 3\nKeyError: 'é'\n"
    ref = _spans(text, "python")
    for eng in ENGINES[:-1]:
        assert _spans(text, eng) == ref, eng


def test_every_corpus_file_gives_the_same_spans_on_every_engine(corpus):
    from compactor.normalize import normalize

    n = 0
    for p in corpus_files(corpus):
        text = normalize(p.read_text(encoding="utf-8", errors="replace"))
        ref = _spans(text, "python")
        for eng in ENGINES[:-1]:
            assert _spans(text, eng) == ref, (p.name, eng)
        n += len(ref[0])
    assert n > 5000


def test_approximations_start_where_a_match_must():
    # leading optional repeats are dropped, a stretch after '[^\n]*' may stand for the whole, and an
    # alternation behind '^' is read alternative by alternative ('^A|^B' is parsed as '^(?:A|B)')

    a = approximate(r"^\s*#\d+\s+0x[0-9a-f]+\s", 0)
    assert a.startswith(("[\\x23]", "[\\x30][\\x78]"))  # '#' or '0x', not the optional spaces
    b = approximate(r"^\s+\S[^\n]* \[0x[0-9a-f]+\]$|^ZZTOP:", 0)
    assert b.startswith("(?:[\\x20][\\x5b][\\x30][\\x78]") and "[\\x5a][\\x5a]" in b
    for line in ("    at f (x) [0x1f]", "#3  0xdeadbeef in f ()", "ZZTOP: x"):
        assert re.search(b, line) or re.search(a, line), line


def test_a_rule_list_changed_in_place_is_seen_and_roles_still_choose_rules():
    from compactor.detect import Detector
    from compactor.engine import load_rules

    det = Detector(load_rules())
    text = 'Traceback (most recent call last):\n  File "a.py", line 3, in <module>\nValueError: bad\n'
    ids = lambda r: sorted({h[0] for h in r.hits})  # noqa: E731
    assert {"trace.python", "error.exception-line"} <= set(ids(det.detect(text, role="tool")))
    det.rules[:] = [cr for cr in det.rules if cr.id != "trace.python"]  # same list object, one rule fewer
    assert "trace.python" not in ids(det.detect(text, role="tool"))
    assert "error.exception-line" in ids(det.detect(text, role="tool"))
    # a rule that does not apply to a role is not called for it, whatever was detected before
    user_only = {cr.id for cr in det.rules if "tool" not in cr.roles}
    tool_only = {cr.id for cr in det.rules if "user" not in cr.roles}
    for role, banned in (("tool", user_only), ("user", tool_only)):
        assert not set(ids(det.detect(text, role=role))) & banned


# ---- literals the scan skips: the approximations stand for them ----------------------------------

from compactor.engine.approx import implies_literal  # noqa: E402


@pytest.mark.parametrize("pattern,flags,literals,ignore_case,expected", [
    (r"\b[1-9]\d* errors?\b", 0, ["error"], True, True),
    (r"[A-Z][\w$]*+(?<=Error|Exception):", 0, ["error", "xception"], True, True),  # 'E(?:rror|xception)'
    (r"^\s*(?:✕|✗|×)\s+\S", 0, ["✕", "✗", "×"], True, True),  # a class of literals: each one
    (r"^_{3,} \S", 0, ["___ "], False, True),  # the least rounds of a repeat, then what follows
    (r"^_{3,} \S", 0, ["____"], False, False),  # three underscores are enough for a match
    (r"^(?=[^\n]*?(?:timeout|exceeded))\w+=\d", re.IGNORECASE, ["timeout", "exceeded"], True, True),
    (r"(?i:Fatal error)", 0, ["fatal"], True, True),
    (r"(?i:Fatal error)", 0, ["fatal"], False, False),  # 'FATAL ERROR' lacks the case-sensitive 'fatal'
    (r"[Ee]rror: ", 0, ["error"], True, True),
    (r"\b(?:FATAL|SEVERE)\b", 0, ["fatal"], True, False),  # 'SEVERE' alone is not tried
    (r"^\s*E\s{3}", 0, ["e   "], True, False),  # '\s' may be a tab
    (r"(?:error)?\d+", 0, ["error"], True, False),  # optional
    (r"(?!error)\w+", 0, ["error"], True, False),  # a negative lookaround holds nothing
    (r"(a+)\1", 0, ["a"], False, True),
    (r"\p{L}+", 0, ["x"], False, False),  # not read by the parser: nothing is proven
])
def test_implies_literal(pattern, flags, literals, ignore_case, expected):
    assert implies_literal(pattern, flags, literals, ignore_case) is expected


def test_a_rules_prefilter_still_decides_which_lines_are_tried():
    # error.os-message finds 'Broken pipe' only on lines that also hold one of its literals (its
    # description says so): the first line holds none, so it is not tried, whether the scan looked
    # for the literals or left them to the approximation (on an ASCII line and on a non-ASCII one)
    text = "AM write failed: Broken pipe\nwrite error: Broken pipe\n’ write: Broken pipe ’\n’ error: Broken pipe\n"
    ref = _spans(text, "python")
    assert [ls for rid, _a, _b, ls, _le in ref[0] if rid == "error.os-message"] == [1, 3]
    for eng in ENGINES[:-1]:
        assert _spans(text, eng) == ref, eng
    if "hyperscan" in ENGINES:
        skipped = {key for key, _, _ in literal_scanner(RULES, "hyperscan").skipped}
        assert ("error", True) in skipped and ("not", True) in skipped  # the case above is a real one


def test_skipped_literals_are_only_those_every_rule_approximates():
    if "hyperscan" not in ENGINES:
        pytest.skip("hyperscan wheel not available on this platform")
    sc = literal_scanner(RULES, "hyperscan")
    sc.scan(TextView("x\n" * 40_000))  # (enough text for the engine)
    skipped = {key for key, _, _ in sc.skipped}
    assert skipped and ("  at ", False) in sc.keys and ("  at ", False) not in skipped  # trace.java has none
    for cr in RULES:
        if not skipped.isdisjoint(cr.literal_keys):
            assert cr.approx is not None and cr.approx in set(sc.approx) | {""}, cr.id


def test_a_long_text_is_detected_with_the_cyclic_collector_paused(monkeypatch):
    import gc

    import compactor.detect as detect_mod

    seen = []
    real = detect_mod.find_all

    def spy(*a, **kw):
        seen.append(gc.isenabled())
        return real(*a, **kw)

    monkeypatch.setattr(detect_mod, "find_all", spy)
    long_text = "step ok\nerror: boom at a.py:3\n" * 4000
    assert len(long_text) >= detect_mod.GC_PAUSE_CHARS
    assert gc.isenabled()
    try:
        got = DET.detect(long_text, role="tool")
        assert seen == [False] and gc.isenabled()  # paused while detecting, running again after
        assert got.hits and got == DET.detect_view(TextView(long_text), role="tool")
        DET.detect("error: short", role="tool")
        assert seen[-1] is True  # a short text: left alone
        gc.disable()  # the caller's choice stands
        DET.detect(long_text, role="tool")
        assert not gc.isenabled()
    finally:
        gc.enable()


_WIDE_CHARS = ["\u2713", "\u00e9", "\u00a0", "\u2019", "\u4e2d", "\U0001f600", "\u0663", "\u00df", "\u0645",
               "\u0130", "\u212a", "\u017f", "\u0131"]


def _spans_without_wide_checks(text: str):
    """The spans when every line with a non-ASCII character is searched (no rule's UTF-8
    approximation rules one out)."""
    saved = {cr: cr.__dict__.get("wide_check", _MISSING) for cr in RULES if hasattr(cr, "approx_source")}
    try:
        for cr in saved:
            cr.__dict__["wide_check"] = None
        return _spans(text, "python")
    finally:
        for cr, v in saved.items():
            if v is _MISSING:
                cr.__dict__.pop("wide_check", None)
            else:
                cr.__dict__["wide_check"] = v


_MISSING = object()


@given(st.integers(0, 10_000), st.lists(st.tuples(st.sampled_from(_WIDE_CHARS), st.floats(0, 1)), min_size=1,
                                         max_size=5), st.sampled_from(["insert", "replace"]))
@settings(max_examples=150, deadline=None)
def test_a_line_ruled_out_by_its_utf8_approximation_holds_no_match(which, wide, how):
    """Rule examples with non-ASCII characters put in (or in place of a character): a line a
    rule's UTF-8 approximation rules out is one its pattern does not match, so the spans are
    those found when every such line is searched."""
    text = EXAMPLES[which % len(EXAMPLES)]
    for ch, at in wide:
        k = int(at * len(text))
        text = text[:k] + ch + text[k + (how == "replace"):]
    assert _spans(text, "python") == _spans_without_wide_checks(text)


def test_lines_with_wide_characters_are_ruled_out_and_matches_kept():
    """Not vacuous: on the corpus's outputs with non-ASCII characters (and examples with a '✓'
    put before every line) some lines are ruled out, and the spans are the same."""
    from compactor.engine import matchers

    calls = {"out": 0}
    real = matchers._ruled_out_wide

    def counted(rule, line):
        got = real(rule, line)
        calls["out"] += got
        return got
    matchers._ruled_out_wide = counted
    try:
        texts = ["\n".join("\u2713 " + ln for ln in ex.split("\n")) for ex in EXAMPLES[:400]]
        for text in texts:
            assert _spans(text, "python") == _spans_without_wide_checks(text)
    finally:
        matchers._ruled_out_wide = real
    assert calls["out"] > 50


def test_a_character_that_folds_to_an_ascii_letter_keeps_its_line_searched():
    """KELVIN SIGN matches 'k' and LONG S 's' in a caseless pattern, which no approximation of
    bytes shows: a line holding one is always searched (the rules' examples with their letters
    so replaced find what they find with every line searched, and something)."""
    swap = str.maketrans({"k": "\u212a", "K": "\u212a", "s": "\u017f", "S": "\u017f"})
    found = 0
    for ex in EXAMPLES:
        text = ex.translate(swap)
        if text == ex:
            continue
        got = _spans(text, "python")
        assert got == _spans_without_wide_checks(text)
        found += bool(got[0])
    assert found > 20
