"""Lines arrive in bulk (a chunk of many lines) or one by one: trim closes its blocks at the same
lines and writes the same output and figures either way, also with small blocks that close on
the line limit and on the byte limit."""

from __future__ import annotations

import pytest

from compactor.collapse.trim import TrimOptions, Trimmer
from compactor.detect import Detector
from compactor.engine import load_rules

DET = Detector(load_rules())


def _run(text: str, chunks: list[str], opt: TrimOptions):
    out: list[str] = []
    t = Trimmer(DET, opt)
    t.raw = [text]
    t.raw_bytes = len(text.encode("utf-8", "surrogatepass"))
    blocks: list[int] = []
    real = t.process_block

    def spy(lines, final):
        blocks.append(len(lines))
        return real(lines, final)

    t.process_block = spy  # type: ignore[method-assign]
    stats = t.run(iter(chunks), out.append)
    return "".join(out), stats.as_dict(), blocks


@pytest.mark.parametrize("block_lines,block_bytes", [(7, 1 << 20), (1000, 300), (13, 700), (1, 1 << 20)])
def test_bulk_and_single_lines_agree(block_lines, block_bytes, corpus):
    f = corpus / "ci-breakages"
    text = "".join(sorted(p.read_text(encoding="utf-8", errors="replace") for p in f.glob("*/fail.log"))[:2])
    text = text[:60_000] + "\nnon-ASCII é 中文 line\n" + "x" * 900 + "\nlast line without end"
    opt = TrimOptions(block_lines=block_lines, block_bytes=block_bytes, carry_lines=3)
    bulk = _run(text, [text], opt)
    lines = text.split("\n")
    single = _run(text, [x + "\n" for x in lines[:-1]] + [lines[-1]], opt)
    assert bulk == single
    assert len(bulk[2]) > 3  # several blocks closed


# shape keys of a whole ASCII block, cut from one encoded and digit-masked copy of its text, are
# the keys of its line bodies one by one (white space as str.strip() sees it, '\x1c'-'\x1f'
# included; CI timestamp and fuzzing-engine prefixes removed)
from hypothesis import given, settings, strategies as st  # noqa: E402

from compactor.collapse.trim import _block_keys, shape_key  # noqa: E402
from compactor.engine.matchers import TextView  # noqa: E402

_PIECES = ["2024-05-01T10:00:00.1234567Z ", "2024-05-01T10:00:00Z ", "CRASH LOG: ", " ", "\t", "\x0b", "\x0c",
           "\x1c", "\x1f", "\x7f", "ab", "C0FFEE", "12", "/x/y.py:3", "=", "\r", "é", "x" * 230 + "9"]


def _keys_one_by_one(view: TextView) -> list[bytes]:
    return [shape_key(view.body(i)) for i in range(len(view.lines))]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_PIECES), max_size=8).map("".join), min_size=1, max_size=12))
def test_block_keys_are_the_line_keys(lines):
    view = TextView("\n".join(lines))
    keys = _block_keys(view)
    if not view.text.isascii():
        assert keys is None
    else:
        assert keys == _keys_one_by_one(view)


def test_block_keys_on_prefixed_lines():
    text = "\n".join(f"2024-05-01T10:00:{i % 60:02d}.1234567Z  step {i}\x1c " for i in range(40))
    view = TextView(text)
    assert view.prefix is not None
    keys = _block_keys(view)
    assert keys == _keys_one_by_one(view)
    assert keys[3] == b"step 0"


from compactor.collapse.trim import _protected_runs  # noqa: E402
from compactor.detect import DetectResult  # noqa: E402


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 8)), max_size=12), st.integers(0, 4),
       st.integers(1, 70))
def test_protected_runs_hold_the_protected_lines(spans, context, n):
    ranges = [(ls, ls + k) for ls, k in spans]

    class _Det:  # the line ranges of hits, as DetectResult reads them
        def line_ranges(self, weak=frozenset()):
            return ranges

    want = DetectResult.protected_lines(_Det(), context=context, nlines=n)
    runs = _protected_runs(ranges, context, n)
    got = [i for lo, hi in runs for i in range(lo, hi + 1)]
    assert got == sorted(want)
    assert all(runs[k][1] + 1 < runs[k + 1][0] for k in range(len(runs) - 1))  # disjoint, not touching
