"""`compactor trim` on real CI failures and real crash traces (skipped without ../shared/corpus).

Bars (issue: Level 1 / trim): at least 99% of the hand-labelled error lines kept verbatim (ANSI
colour codes aside) while the logs shrink at least 4x overall; every crash and exception trace
survives whole (its header-to-last-frame lines, per the hand-written table in
test_traces_corpus.EXPECT).
"""

from __future__ import annotations

import json

import pytest

from compactor.collapse.trim import TrimOptions, trim_text
from compactor.detect import Detector
from compactor.engine import load_rules
from compactor.normalize import normalize_line, strip_ansi

from conftest import CORPUS
from test_traces_corpus import EXCEPT, EXPECT

DET = Detector(load_rules())


@pytest.mark.corpus
def test_trim_keeps_99_percent_of_labelled_error_lines_and_shrinks_4x():
    root = CORPUS / "ci-breakages"
    if not root.is_dir():
        pytest.skip("corpus absent")
    labelled = kept = bytes_in = bytes_out = 0
    for folder in sorted(p for p in root.iterdir() if (p / "fail.log").is_file()):
        text = (folder / "fail.log").read_text(encoding="utf-8")
        out, _ = trim_text(DET, text, TrimOptions(receipt=False))
        lines = text.splitlines()
        for n in json.loads((folder / "labels.json").read_text())["error_lines"]:
            labelled += 1
            want = strip_ansi(lines[n - 1]).strip()
            kept += (not want) or (want in out)
        bytes_in += len(text.encode())
        bytes_out += len(out.encode())
    recall, ratio = kept / labelled, bytes_in / bytes_out
    print(f"trim on ci-breakages: recall {recall:.2%} ({kept}/{labelled}), {ratio:.2f}x smaller")
    assert recall >= 0.99
    assert ratio >= 4.0


@pytest.mark.corpus
@pytest.mark.parametrize("name", sorted(k for k, v in EXPECT.items() if not isinstance(v, str)))
def test_trim_keeps_every_trace_whole(name):
    path = CORPUS / name
    if not path.is_file():
        pytest.skip("corpus absent")
    text = path.read_text(encoding="utf-8", errors="replace")
    out, _ = trim_text(DET, text, TrimOptions(receipt=False))
    out_lines = set(out.split("\n"))
    lines = text.split("\n")
    skip = set(EXCEPT.get(name, ()))
    lost = []
    for a, b in EXPECT[name]:
        for n in range(a, b + 1):
            if n in skip or n > len(lines):
                continue
            line = normalize_line(lines[n - 1])
            if line.strip() and line not in out_lines:
                lost.append(n)
    assert not lost, f"{name}: trace lines missing from trim output: {lost[:10]}"
