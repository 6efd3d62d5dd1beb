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
