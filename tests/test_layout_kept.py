"""Never larger: an input's own JSON layout (indentation, separators, key order, escaping, final
newline) is kept when it is written back; a file with nothing to compact comes back byte for
byte; the output keeps the replaced file's mode (a new file gets the umask's)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from compactor.batch import BatchConfig, compact_record
from compactor.cli import main
from compactor.formats.style import JsonStyle, detect_file_style, detect_style

from conftest import CORPUS

LAYOUT_DIRS = ("claude-code", "codex-rollout", "mini-swe-agent", "openhands-v0", "openhands-v1", "swe-agent")


def _corpus_files() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    return sorted(p for d in LAYOUT_DIRS if (CORPUS / d).is_dir() for p in (CORPUS / d).iterdir() if p.is_file())


def _compact(src: Path, out: Path, capsys, *extra: str) -> str:
    rc = main(["compact", str(src), "--emit", "messages", "-o", str(out), *extra])
    err = capsys.readouterr().err
    assert rc == 0, err
    return err


# ---------------------------------------------------------------------------- styles


MESSAGES = [{"role": "user", "content": "fix the bug in café.py"},
            {"role": "assistant", "content": "ok", "tool_calls": []}]


@pytest.mark.parametrize("kw", [
    {"indent": 2}, {"indent": 4}, {"indent": "\t"}, {"indent": None},
    {"indent": None, "separators": (",", ":")}, {"indent": 2, "ensure_ascii": True},
    {"indent": None, "separators": (", ", ": ")}, {"indent": 2, "separators": (", ", ": ")},
    {"indent": 0},
])
@pytest.mark.parametrize("end", ["", "\n", "\n\n"])
def test_every_json_dumps_layout_is_read_back_exactly(kw, end):
    text = json.dumps(MESSAGES, **kw) + end
    style = detect_style(text, "json")
    assert style.dumps(json.loads(text)) == text, style
    pieces: list[str] = []
    style.dump(json.loads(text), pieces.append, piece_size=7)
    assert "".join(pieces) == text


def test_crlf_lines_and_jsonl_endings_are_kept():
    text = json.dumps(MESSAGES, indent=2).replace("\n", "\r\n") + "\r\n"
    style = detect_style(text, "json")
    assert style.eol == "\r\n" and style.dumps(json.loads(text)) == text
    lines = "\n".join(json.dumps(m, separators=(", ", ": ")) for m in MESSAGES)  # no final newline
    style = detect_style(lines, "jsonl")
    assert style.dumps_lines(MESSAGES) == lines
    assert detect_style(lines + "\n", "jsonl").dumps_lines(MESSAGES) == lines + "\n"


def test_a_file_is_read_by_its_beginning_and_end(tmp_path):
    # over the 64 KiB head: the escaping is decided over the whole file, the final newline at its end
    big = [{"role": "user", "content": "x" * 70000}, {"role": "assistant", "content": "caf\u00e9"}]
    p = tmp_path / "a.json"
    p.write_text(json.dumps(big, indent=1, ensure_ascii=True), encoding="utf-8")
    style = detect_file_style(p, "json")
    assert style == JsonStyle(indent=1, ensure_ascii=True, end="")
    assert style.dumps(big) == p.read_text(encoding="utf-8")


def test_objects_passed_in_are_written_in_the_layouts_default(capsys):
    import compactor

    res = compactor.compact(MESSAGES)
    assert res.layout is None
    assert compactor.render(res, "messages") == json.dumps(res.messages, ensure_ascii=False, indent=2) + "\n"


# ---------------------------------------------------------------------------- the corpus


@pytest.mark.corpus
@pytest.mark.parametrize("name", [str(p.relative_to(CORPUS)) for p in _corpus_files()] or ["<absent>"])
def test_corpus_output_is_never_larger_and_untouched_is_identical(name, tmp_path, capsys):
    if name == "<absent>":
        pytest.skip("../shared/corpus not available")
    src = CORPUS / name
    out = tmp_path / "out"
    err = _compact(src, out, capsys)
    data, written = src.read_bytes(), out.read_bytes()
    assert len(written) <= len(data), (len(data), len(written))
    assert "larger than the input" not in err  # smaller in its own layout, not by falling back to the input
    # the same file with nothing to compact (every tool output protected: level 0 keeps all)
    _compact(src, out, capsys, "--level", "0")
    assert out.read_bytes() == data


@pytest.mark.corpus
def test_the_openhands_run_that_grew_is_written_compact(tmp_path, capsys):
    """It is one line of compact JSON; it used to come back indented, 197,237 -> 230,189 bytes."""
    src = CORPUS / "openhands-v0" / "ponylang__ponyc-4593.json"
    if not src.exists():
        pytest.skip("corpus not available")
    out = tmp_path / "out.json"
    err = _compact(src, out, capsys)
    text = out.read_text(encoding="utf-8")
    assert "\n" not in text.rstrip("\n") and '":"' in text and '", "' not in text[:2000]
    assert len(text.encode()) < src.stat().st_size and "larger" not in err


def test_a_compacted_file_keeps_its_layout(tmp_path, capsys):
    """Tab-indented, escaped, no final newline: a compacted output is written the same way."""
    msgs = [{"role": "system", "content": "You are a coding agent. Réponds en français."},
            {"role": "user", "content": "install the deps and run the tests"}]
    for i in range(6):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": "npm install"})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}",
                     "content": "\n".join(f"npm http fetch GET 200 https://registry.npmjs.org/pkg{j} 12ms" for j in range(80))
                     + "\nadded 234 packages in 3s\n"})
    msgs.append({"role": "user", "content": "now run the tests"})
    src = tmp_path / "run.json"
    src.write_text(json.dumps(msgs, indent="\t", ensure_ascii=True), encoding="utf-8")
    out = tmp_path / "out.json"
    _compact(src, out, capsys)
    text = out.read_text(encoding="utf-8")
    assert text != src.read_text(encoding="utf-8") and len(text) < src.stat().st_size
    assert text.startswith("[\n\t{\n\t\t\"role\"") and not text.endswith("\n")
    assert text.isascii() and "fran\\u00e7ais" in text
    assert json.dumps(json.loads(text), indent="\t", ensure_ascii=True) == text
    # same input, same bytes
    again = tmp_path / "again.json"
    _compact(src, again, capsys)
    assert again.read_bytes() == out.read_bytes()


def _mixed_layout_run() -> str:
    """A run whose first separators are Python's (", ") but whose bulk (a metadata array) is
    written without spaces: in the detected layout it grows by more than the compaction saves."""
    msgs = [{"role": "user", "content": "install the deps"}]
    for i in range(4):
        msgs += [{"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function", "function": {
                     "name": "bash", "arguments": json.dumps({"command": "npm install"})}}]},
                 {"role": "tool", "tool_call_id": f"c{i}", "content": "\n".join(
                     f"npm http fetch GET 200 https://registry.npmjs.org/pkg{j} 12ms" for j in range(30))
                  + "\nadded 234 packages in 3s\n"}]
    msgs.append({"role": "user", "content": "thanks"})
    return ('{"messages": ' + json.dumps(msgs, separators=(", ", ": ")) + ', "metadata":'
            + json.dumps({"ids": list(range(4000))}, separators=(",", ":")) + "}")


def test_a_result_larger_than_its_input_is_replaced_by_the_input(tmp_path, capsys):
    import compactor

    text = _mixed_layout_run()
    res = compactor.compact(text)
    assert not res.unchanged and len(compactor.render(res, "messages")) > len(text)  # the premise
    src = tmp_path / "run.json"
    src.write_text(text, encoding="utf-8")
    out = tmp_path / "out.json"
    err = _compact(src, out, capsys)
    assert out.read_bytes() == src.read_bytes()
    assert f"would be larger than the input ({len(text)} bytes)" in err
    # and to standard output
    assert main(["compact", str(src), "--emit", "messages"]) == 0
    captured = capsys.readouterr()
    assert captured.out == text and "larger than the input" in captured.err
    # batch: the input is the output, and the report's note says why
    row = compact_record({"id": "t", "text": text}, BatchConfig())
    assert row["ok"] and row["output"] == text and "would be larger than the input" in row["note"]


# ---------------------------------------------------------------------------- file modes


def test_outputs_keep_the_replaced_files_mode_and_new_ones_get_the_umasks(tmp_path, capsys):
    src = tmp_path / "run.json"
    src.write_text(json.dumps(MESSAGES), encoding="utf-8")
    os.chmod(src, 0o640)
    _compact(src, src, capsys)  # in place: keeps 0640
    assert stat.S_IMODE(src.stat().st_mode) == 0o640
    old = os.umask(0o022)
    try:
        out = tmp_path / "new.json"
        _compact(src, out, capsys)
        assert stat.S_IMODE(out.stat().st_mode) == 0o644
        # batch outputs and its report too (they were written 0600)
        rc = main(["batch", str(src), "--out", str(tmp_path / "o"), "--workers", "1", "-q", "--no-progress"])
        capsys.readouterr()
        assert rc == 0
        for p in (tmp_path / "o").iterdir():
            assert stat.S_IMODE(p.stat().st_mode) == 0o644, p
    finally:
        os.umask(old)


def test_batch_writes_untouched_inputs_back_byte_for_byte(tmp_path):
    text = json.dumps(MESSAGES, separators=(", ", ": "))  # Python's default, no final newline
    row = compact_record({"id": "t", "text": text}, BatchConfig())
    assert row["ok"] and row["output"] == text and row["note"] is None
