"""The windowed line-block scan gives the spans of the line-by-line search.

``LineBlockRule.find`` classifies the lines of a long block a window at a time and the candidate
start lines a chunk at a time (each distinct line once), and takes a run of continuation lines
in one step; with the windows and chunks switched off it searches line by line. Both must give
the same spans: on corpus texts, on generated traces with blanks, gaps, end lines, CI prefixes
and long lines, on recursions (repeated frames), and at the byte limit.
"""

from __future__ import annotations

import random

import pytest

from compactor.engine import load_rules
from compactor.engine import matchers
from compactor.engine.matchers import LineBlockRule, TextView, compile_rule

RULES = [r for r in load_rules().records("protect") if r.kind == "line-block"]


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
