"""Line-local patterns and the windowed line-block scan give the answers of the line-by-line search.

- ``linelocal.whole_line``: the lines a rewritten pattern marks in one pass over many lines are
  exactly the lines the original pattern matches one at a time (every pattern of every built-in
  line-block rule, on the corpus and on generated lines full of odd whitespace);
- ``LineBlockRule.find`` with its windows and start chunks equals the same rule searched line by
  line (the windows switched off), on corpus texts and on generated traces with blanks, gaps,
  end lines, CI prefixes, long lines and the line/byte limits.
"""

from __future__ import annotations

import random

import pytest
import regex
from hypothesis import given, settings, strategies as st

from compactor.engine import load_rules
from compactor.engine import matchers
from compactor.engine.linelocal import LINE_MARK, line_local, marks, whole_line
from compactor.engine.matchers import LineBlockRule, TextView, _compile, compile_rule

RULES = [r for r in load_rules().records("protect") if r.kind == "line-block"]
PATTERNS = sorted({p for r in RULES for p in (r.line_block.start, r.line_block.end, *r.line_block.continue_,
                                              *r.line_block.before) if p})

ODD = ["", " ", "\t", "\r", "\x0b", "\x0c", "\x1c", "\x1e", "\x85", "\xa0", "\u2028", "\u2029", "\u3000", "\ufeff"]
FRAGMENTS = ["  at foo.Bar(Baz.java:1)", "\tat x.Y.z(Unknown Source)", "Caused by: x", "#0 0x1234 in f /a.c:1",
             "goroutine 1 [running]:", "panic: x", "Traceback (most recent call last):", '  File "a.py", line 1',
             "error: x", "==1==ERROR: AddressSanitizer: x", "SUMMARY: AddressSanitizer: x", "---[ end trace",
             "[ERROR] x", "x.go:1:2: y", "note: run with `RUST_BACKTRACE", "    at f (/a.js:1:2)", "}", "...",
             "a.rb:1:in `f'", "_____ test _____", "E   assert 0", "===", "----", "#", "^", "]", "\\", "-", "é", "中"]


def _per_line(pattern: str, lines: list[str]) -> bytes:
    pat = _compile(pattern, 0)
    return bytes(pat.search(line) is not None for line in lines)


def _marked(pattern: str, lines: list[str]) -> bytes:
    form = whole_line(pattern)
    assert form is not None, pattern
    return marks(regex.compile(form, regex.MULTILINE), "\n".join(lines), len(lines))


def _generated_lines(seed: int, n: int) -> list[str]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        out.append("".join(rnd.choice(ODD + FRAGMENTS) for _ in range(rnd.randint(1, 4))))
    return out


def test_every_builtin_block_pattern_is_line_local():
    # a pattern that is not would make its rule search long traces line by line again
    assert PATTERNS
    assert [p for p in PATTERNS if whole_line(p) is None] == []


def test_marks_equal_the_line_by_line_search_on_generated_lines():
    lines = _generated_lines(1, 4000)
    for p in PATTERNS:
        assert _marked(p, lines) == _per_line(p, lines), p


def test_marks_equal_the_line_by_line_search_on_the_corpus(corpus):
    lines: list[str] = []
    for f in sorted(corpus.rglob("*")):
        if f.is_file() and f.suffix in (".log", ".txt", "") and f.stat().st_size < 2_000_000:
            lines += [x for x in f.read_bytes().decode("utf-8", "replace").split("\n")
                      if len(x) <= 4096 and LINE_MARK not in x]
    assert len(lines) > 10_000
    rnd = random.Random(2)
    for x in lines[:5000]:  # odd characters put into real lines
        if x:
            k = rnd.randrange(len(x) + 1)
            lines.append(x[:k] + rnd.choice(ODD) + x[k:])
    for p in PATTERNS:
        assert _marked(p, lines) == _per_line(p, lines), p


@settings(max_examples=300)
@given(st.lists(st.text(alphabet=" \t\r\x0b\x0c\x1c\x85\u2028ab:#()[]{}0x1/.-_\\^$'\"é", max_size=20), min_size=1,
                max_size=8),
       st.sampled_from([r"^\s*\S", r"\s$", r"(?<=\s)b", r"b(?=\s)", r"(?<!\S)a", r"a(?!\s)", r"\bab\b", r"\Bb",
                        r"^[^x]*$", r"[\s:]+a", r"[^\S]+a", r"\W\d", r"\D{2}$", r"^(?:a|b)+$", r"(a)\1", r"^$",
                        r"(?i)^A", r"[ -/]b", r"a(?=[^b]*$)"]))
def test_marks_on_adversarial_lines(lines, pattern):
    lines = [x for x in lines if "\n" not in x]
    assert _marked(pattern, lines) == _per_line(pattern, lines)


@pytest.mark.parametrize("pattern", [r"\Aa", r"a\Z", r"a\z", r"(?s)a.b", r"(?x)a b", "a\nb", r"a\nb", r"\x0a",
                                     r"\p{L}", r"[[:alpha:]]", r"(?(1)a|b)", r"(?#c)a", r"(?:ab){e<=1}", r"a(?i)b",
                                     r"\N{LATIN SMALL LETTER A}", r"\u000a", r"[\w-z]", r"(?w)^a"])
def test_constructs_left_to_the_line_by_line_search(pattern):
    assert line_local(pattern) is None


def test_rewriting_examples():
    assert line_local(r"^\s*+at \S") == (r"^[^\S\n]*+at \S", True)
    assert line_local(r"x[^)]*\W") == (r"x[^)\n]*[^\w\n]", False)
    assert line_local(r"^a|^b") == (r"^a|^b", False)  # a top-level alternative: not anchored
    assert line_local(r"[0-9a-f]+") == (r"[0-9a-f]+", False)  # the ranges lie above the newline
    assert line_local(r"[\x00-z]") is None
    assert line_local(r"[\t -~]")[0] == r"[\t -~]"  # ' '..'~' does not hold a newline
    assert line_local(r"[\s,]")[0] == "(?:(?!\\n)[\\s,])"


# ---------------------------------------------------------------------------- the block scan

def _line_by_line(monkeypatch):
    monkeypatch.setattr(matchers, "BULK_AFTER", 10 ** 9)
    monkeypatch.setattr(matchers, "BULK_START_MIN", 10 ** 9)


def _finds(text: str, monkeypatch) -> tuple[list, list]:
    rules = [compile_rule(r) for r in RULES]
    assert all(isinstance(cr, LineBlockRule) for cr in rules)
    fast = []
    for cr in rules:
        fast.append((cr.id, cr.find(TextView(text), 100.0)))
    with monkeypatch.context() as m:
        _line_by_line(m)
        slow = [(cr.id, cr.find(TextView(text), 100.0)) for cr in rules]
    return fast, slow


def _trace_text(seed: int, n: int) -> str:
    rnd = random.Random(seed)
    heads = ['Exception in thread "main" java.lang.IllegalStateException: x', "Traceback (most recent call last):",
             "panic: runtime error: index out of range", "==1==ERROR: AddressSanitizer: heap-use-after-free",
             "Unhandled exception. System.Exception: x", "TypeError: x is not a function", "#0 0x4005 in main /a.c:1:2",
             "thread 'main' panicked at src/main.rs:1:5:", "goroutine 1 [running]:", "BUG: unable to handle page fault"]
    frames = ["\tat com.acme.A.f{k}(A.java:{k})", "    at f{k} (/app/a.js:{k}:2)", '  File "/a/m{k}.py", line {k}, in f',
              "    #{k} 0x{k:x} in f{k} /src/a.c:{k}:5", "main.f{k}(0x{k:x})", "\t/app/main.go:{k} +0x{k:x}",
              "   at A.B.F{k}() in /a/b.cs:line {k}", "  [<ffffffff8100{k:04x}>] f{k}+0x1/0x2", "    ... {k} more",
              "Caused by: java.io.IOException: x{k}", "SUMMARY: AddressSanitizer: x", "note: run with `RUST_BACKTRACE=1`",
              "", " ", "\t", "noise line {k}", "---[ end trace {k} ]---", "\x0c", "x" * 5000 + "{k}"]
    out = []
    for _ in range(n):
        out.append(rnd.choice(heads))
        for k in range(rnd.choice([3, 40, 300, 2000])):
            out.append(rnd.choice(frames[:3] if rnd.random() < 0.7 else frames).format(k=rnd.randrange(400)))
    lines = out
    if seed % 2:  # CI timestamp prefixes on every line
        lines = [f"2024-01-02T03:04:05.{k % 10_000_000:07d}Z {x}" for k, x in enumerate(lines)]
    return "\n".join(lines)


@pytest.mark.parametrize("seed", range(6))
def test_windowed_block_scan_equals_line_by_line_on_generated_traces(seed, monkeypatch):
    text = _trace_text(seed, 30)
    fast, slow = _finds(text, monkeypatch)
    assert fast == slow
    assert sum(len(x[1]) for x in fast) > 0


def test_windowed_block_scan_equals_line_by_line_on_recursions(monkeypatch):
    # repeated frames (the lines memoised across windows), up to the line and byte limits
    java = "\n".join(['Exception in thread "main" java.lang.StackOverflowError']
                     + [f"\tat com.acme.Rec.f{k % 7}(Rec.java:{k % 13 + 1})" for k in range(30_000)])
    native = "\n".join(["==1==ERROR: AddressSanitizer: stack-overflow"]
                       + [f"    #{k} 0x{0x400000 + k:x} in f{k % 5} /src/rec.c:{k % 9}:5" for k in range(30_000)])
    for text in (java, native):
        fast, slow = _finds(text, monkeypatch)
        assert fast == slow
        assert len([s for _, spans in fast for s in spans]) > 2


@pytest.mark.parametrize("length", [63, 64, 65])
def test_windowed_block_scan_stops_at_the_byte_limit_like_line_by_line(length, monkeypatch):
    # trace.java stops a block at 256 KiB: with 64-character frames the size before the 4033rd
    # frame is exactly the limit (64 + 4032 * 65 == 262144), so an off-by-one shows
    def frame(k: int) -> str:
        line = f"\tat com.acme.Rec.f{k % 7}(Rec.java:{k % 13 + 10})"
        return line.replace("Rec.f", "R" * (length - len(line)) + "Rec.f")
    assert len(frame(3)) == length
    text = "\n".join(['Exception in thread "main" java.lang.StackOverflowError'] + [frame(k) for k in range(9000)])
    fast, slow = _finds(text, monkeypatch)
    assert fast == slow
    java = dict(fast)["trace.java"]
    assert len(java) >= 2 and java[0][3] - java[0][2] < 4999  # cut by the byte limit, not the line limit


def test_windowed_block_scan_equals_line_by_line_on_the_corpus(corpus, monkeypatch):
    texts = []
    for folder in ("crash-traces", "exception-traces", "ci-logs", "ci-breakages"):
        for f in sorted((corpus / folder).rglob("*")):
            if f.is_file() and f.suffix != ".json" and f.stat().st_size < 3_000_000:
                texts.append(f.read_bytes().decode("utf-8", "replace"))
    assert len(texts) > 50
    found = 0
    for text in texts:
        fast, slow = _finds(text, monkeypatch)
        assert fast == slow
        found += sum(len(x[1]) for x in fast)
    assert found > 100
