"""Edges of the command line: an output folder that cannot be written, a log that is one huge
line, Maven's ``File.java:[line,col]`` in GitHub annotations."""

from __future__ import annotations

import io
import json
import re

import pytest

from compactor.cli import main


def test_batch_into_an_unwritable_folder_is_one_line_and_exit_2(tmp_path, capsys):
    src = tmp_path / "run.json"
    src.write_text(json.dumps([{"role": "user", "content": "hi"}]), encoding="utf-8")
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    for out in (blocker / "out", "/proc/compactor-cannot-write/out"):  # under a file; where nothing may be made
        rc = main(["batch", str(src), "--out", str(out), "--no-progress", "-q"])
        err = capsys.readouterr().err
        assert rc == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "cannot create --out" in lines[0] and str(out) in lines[0], err
        assert "internal error" not in err and "Traceback" not in err


def test_batch_report_that_cannot_be_written_is_exit_2(tmp_path, capsys):
    src = tmp_path / "run.json"
    src.write_text(json.dumps([{"role": "user", "content": "hi"}]), encoding="utf-8")
    rc = main(["batch", str(src), "--out", str(tmp_path / "o"), "--report", "/proc/compactor-no/report.jsonl",
               "--no-progress", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "report" in err, err


def _one_line_log(n: int) -> str:
    parts = [f"[INFO] step {i} processing item {i * 7919 % 100003} ok; " for i in range(n)]
    return "".join(parts)


def test_one_huge_line_is_cut_reversibly_with_a_true_receipt(tmp_path, capsys):
    """Over max_line_chars (1 MiB): the middle goes to the store and its ref expands it back; the
    receipt counts one line in."""
    text = _one_line_log(40000)  # about 1.7 MB, one line, no final newline
    assert "\n" not in text and len(text) > 1024 * 1024
    log = tmp_path / "one.log"
    log.write_text(text, encoding="utf-8")
    out = tmp_path / "out.txt"
    assert main(["trim", str(log), "-o", str(out)]) == 0
    capsys.readouterr()
    body, receipt = out.read_text(encoding="utf-8").rsplit("\n[compactor trim: ", 1)
    assert receipt.startswith("1 lines in, 1 lines out,") and "1 over-long lines cut" in receipt
    m = re.search(r" \[… (\d+) characters cut · ref (c-[0-9a-f]{16})\] ", body)
    assert m, body[:200]
    assert main(["expand", m.group(2)]) == 0
    middle = capsys.readouterr().out
    assert len(middle) == int(m.group(1))
    assert body[:m.start()] + middle + body[m.end():] == text


def test_a_line_without_end_split_into_pieces_counts_as_one_line():
    """Past 4x max_line_chars a line without end is read in pieces (bounded memory): each piece is
    cut with its own ref, and the receipt still says one line in."""
    import compactor
    from compactor.collapse.store import MemoryStore

    store = MemoryStore()
    text = _one_line_log(60000)  # about 2.6 MB: read in 1 MiB chunks, each a piece over 4x 4,000
    out = io.StringIO()
    stats = compactor.trim_to(out, io.BytesIO(text.encode()), max_line_chars=4000, cut_store=store)
    assert stats.lines_in == 1 and stats.long_lines_cut >= 3
    written = out.getvalue()
    refs = re.findall(r" \[… (\d+) characters cut · ref (c-[0-9a-f]{16})\] ", written)
    assert len(refs) == stats.long_lines_cut
    # every piece put back from its head, its stored middle and its tail is the input
    pieces = [ln for ln in written.split("\n") if ln and not ln.startswith("[compactor trim:")]
    rebuilt = ""
    for ln in pieces:
        m = re.search(r" \[… (\d+) characters cut · ref (c-[0-9a-f]{16})\] ", ln)
        rebuilt += ln[:m.start()] + store.get(m.group(2)).decode() + ln[m.end():] if m else ln
    assert rebuilt == text
    assert "1 lines in" in written.rsplit("[compactor trim: ", 1)[1]


def test_maven_file_line_col_gets_a_github_annotation(tmp_path, capsys):
    log = tmp_path / "mvn.log"
    log.write_text("\n".join([
        "[INFO] Scanning for projects...",
        "[INFO] --- maven-compiler-plugin:3.8.1:compile (default-compile) @ demo ---",
        "[ERROR] COMPILATION ERROR :",
        "[ERROR] /home/runner/work/demo/src/main/java/com/acme/Widget.java:[107,64] cannot find symbol",
        "  symbol:   method frob(int)",
        "[INFO] BUILD FAILURE",
    ]) + "\n", encoding="utf-8")
    assert main(["trim", "--github", str(log)]) == 0
    out = capsys.readouterr().out
    ann = [ln for ln in out.splitlines() if ln.startswith("::error ")]
    assert ann == ["::error file=/home/runner/work/demo/src/main/java/com/acme/Widget.java,line=107,col=64::"
                   "[ERROR] /home/runner/work/demo/src/main/java/com/acme/Widget.java:[107,64] cannot find symbol"]


def test_go_file_line_annotations_have_no_column(tmp_path, capsys):
    log = tmp_path / "go.log"
    log.write_text("--- FAIL: TestX (0.00s)\n    x_test.go:12: got 1, want 2\nFAIL\n", encoding="utf-8")
    assert main(["trim", "--github", str(log)]) == 0
    ann = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("::error ")]
    assert ann and ann[0].startswith("::error file=x_test.go,line=12::")
