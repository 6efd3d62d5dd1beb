"""The streamed read/write edge (JSON parsed incrementally from the file, JSONL record by record,
the output written in pieces, the final write in place) gives exactly what the in-memory path
gives: the same probe, the same bytes out, the same one-line errors with their positions."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from compactor import Compactor, emit
from compactor.cli import main
from compactor.formats import read_document
from compactor.formats.inputs import FileText, make_probe, probe_file, read_input
from compactor.models import Role, Span

from conftest import CORPUS

TRAJECTORY_DIRS = ("claude-code", "codex-rollout", "mini-swe-agent", "openhands-v0", "openhands-v1", "swe-agent",
                   "gemini-cli", "aider", "anthropic", "openai-chat")


@pytest.fixture(autouse=True)
def _stream_every_size(monkeypatch):
    """The streamed read (and the command line's fold over the messages) is for large files;
    here every file takes it, so that it is compared with the in-memory read on all of these
    inputs (small ones included)."""
    from compactor import streaming
    from compactor.formats import inputs

    monkeypatch.setattr(inputs, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(streaming, "FOLD_MIN_BYTES", 0)


def test_small_files_are_read_in_memory_as_the_streamed_read_reads_them(tmp_path: Path, monkeypatch) -> None:
    from compactor.formats import inputs

    p = tmp_path / "in.json"
    p.write_text(json.dumps(_chat(4)), encoding="utf-8")
    streamed = probe_file(p)
    assert isinstance(streamed.raw, FileText)
    monkeypatch.setattr(inputs, "STREAM_MIN_BYTES", p.stat().st_size + 1)
    small = probe_file(p)
    assert not isinstance(small.raw, FileText)
    _same_probe(small, streamed)
    monkeypatch.setattr(inputs, "STREAM_MIN_BYTES", p.stat().st_size)
    assert isinstance(probe_file(p).raw, FileText)


def _corpus_files() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    out = []
    for d in sorted(CORPUS.iterdir()):
        if d.is_dir() and d.name in TRAJECTORY_DIRS:
            out += sorted(p for p in d.iterdir() if p.is_file() and p.suffix in (".json", ".jsonl", ".md"))
    return out


def _legacy_probe(path, max_depth=512):
    return make_probe(read_input(path), max_depth=max_depth)


def _same_probe(a, b) -> None:
    assert a.is_json == b.is_json
    assert a.json_value == b.json_value
    assert a.jsonl == b.jsonl
    assert a.json_error == b.json_error
    assert a.jsonl_error == b.jsonl_error
    assert a.raw.text == b.raw.text
    assert a.raw.source == b.raw.source
    assert a.raw.diagnostics == b.raw.diagnostics


@pytest.mark.corpus
@pytest.mark.parametrize("path", _corpus_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_corpus_streamed_output_is_byte_identical(path: Path, tmp_path: Path) -> None:
    streamed = probe_file(path)
    legacy = _legacy_probe(path)
    if path.suffix in (".json", ".jsonl"):
        assert isinstance(streamed.raw, FileText), "a JSON/JSONL corpus file must take the streamed path"
    _same_probe(streamed, legacy)
    # the in-memory reference: parsed from the whole text, written by a copying writer, one string
    comp = Compactor(store=str(tmp_path / "store"))
    expected = emit.render(comp.compact(read_document(legacy)), "json")
    out = tmp_path / "out.json"
    assert main(["compact", str(path), "-o", str(out), "--store", str(tmp_path / "store")]) == 0
    assert out.read_text(encoding="utf-8") == expected
    expected_msgs = emit.render(comp.compact(read_document(_legacy_probe(path))), "messages")
    assert main(["compact", str(path), "--emit", "messages", "-o", str(out), "--store", str(tmp_path / "store")]) == 0
    assert out.read_text(encoding="utf-8") == expected_msgs


def test_corpus_files_found() -> None:
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus not available")
    files = _corpus_files()
    assert sum(p.suffix == ".jsonl" for p in files) >= 2 and sum(p.suffix == ".json" for p in files) >= 4


def test_write_json_pieces_equal_dumps() -> None:
    from compactor.formats.base import write_json

    value = {"a": ["x" * 3000, {"b": [1, 2.5, None, True]}], "é": "ü\n\t\"", "n": list(range(2000))}
    buf = io.StringIO()
    write_json(value, buf.write, piece_size=100)
    assert buf.getvalue() == json.dumps(value, ensure_ascii=False, indent=2) + "\n"


def _chat(n: int) -> list[dict]:
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "fix the bug"}]
    for i in range(n):
        msgs.append({"role": "assistant", "content": f"step {i}",
                     "tool_calls": [{"id": f"c{i}", "type": "function",
                                     "function": {"name": "bash", "arguments": json.dumps({"command": f"ls {i}"})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": "\n".join(f"file_{i}_{k}.py" for k in range(40))})
    return msgs


@pytest.mark.parametrize("text", [
    json.dumps(_chat(12), indent=2),
    "\ufeff" + json.dumps(_chat(3)),                        # UTF-8 byte-order mark
    json.dumps(_chat(3), ensure_ascii=True).replace("ls 1", "ls \\ud83d\\ude00"),  # a valid surrogate pair
    json.dumps([{"role": "user", "content": "lone \\ud800 surrogate"}]).replace("\\\\", "\\"),
    json.dumps([{"role": "user", "content": "big", "n": 123456789012345678901234567890}]),
    '[{"role": "user", "content": "x", "v": NaN}]',
    "\n".join(json.dumps(m) for m in _chat(3)) + "\n",      # JSONL
    "\n\n" + "\n".join(json.dumps(m) for m in _chat(2)) + "\r\n\n",
    '[{"role": "user", "content": "x"}] trailing',
    "[INFO] a log that opens with a bracket\n[INFO] done\n",
])
def test_streamed_probe_equals_in_memory(tmp_path: Path, text: str) -> None:
    p = tmp_path / "in.json"
    p.write_text(text, encoding="utf-8")
    _same_probe(probe_file(p), _legacy_probe(p))


def test_deep_nesting_is_refused_not_parsed(tmp_path: Path) -> None:
    """A deeply nested file never reaches the C parser (it would build it without limit): the
    in-memory path refuses it with its line."""
    from compactor.errors import LimitError

    p = tmp_path / "deep.json"
    p.write_text('{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8")
    with pytest.raises(LimitError) as exc:
        probe_file(p)
    assert "line 1" in str(exc.value)
    assert main(["compact", str(p), "--store", str(tmp_path / "s")]) == 2


def _run_err(capsys, argv) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def test_truncated_json_one_line_error_with_position(tmp_path: Path, capsys) -> None:
    p = tmp_path / "cut.json"
    text = json.dumps(_chat(20), indent=2)
    p.write_text(text[: len(text) // 2], encoding="utf-8")
    code, err = _run_err(capsys, ["compact", str(p), "--store", str(tmp_path / "s")])
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert str(p) in err and "line" in err and "column" in err


def test_bad_jsonl_line_one_line_error_with_line(tmp_path: Path, capsys) -> None:
    lines = [json.dumps(m) for m in _chat(5)]
    lines[6] = lines[6][:-5]
    p = tmp_path / "bad.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, err = _run_err(capsys, ["compact", str(p), "--store", str(tmp_path / "s")])
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert str(p) in err and "line 7" in err


def test_final_write_in_place_only_for_owned_documents(tmp_path: Path) -> None:
    """Messages passed in as objects are never changed by a compaction; a document read from a
    file is written in place (its data becomes the output)."""
    msgs = _chat(15)
    before = json.dumps(msgs)
    comp = Compactor(store=str(tmp_path / "s"))
    res = comp.compact(msgs)
    assert json.dumps(msgs) == before
    assert res.messages != msgs  # something was collapsed
    p = tmp_path / "in.json"
    p.write_text(before, encoding="utf-8")
    again = comp.compact(str(p))
    assert json.dumps(again.messages) == json.dumps(res.messages)


def test_segments_are_slotted_and_copy_independently() -> None:
    from compactor.formats.base import make_segment

    a = make_segment(id="m1", index=0, step=1, step_id="s1", role="tool", kind="tool_result", text="x", origin=[1])
    b = make_segment(id="m2", index=1, step=1, step_id="s1", role="tool", kind="tool_result", text="y", origin=(2,))
    assert not hasattr(a, "__dict__")  # slots only: no per-segment dict or set of given fields
    assert a.origin == (1,) and a.role is Role.tool  # normalised as the model's types say
    c = a.model_copy(update={"exit_code": 3})
    assert c.exit_code == 3 and a.exit_code is None and b.exit_code is None
    assert "exit_code" in c.model_fields_set and "exit_code" not in a.model_fields_set
    assert a.model_dump(mode="json") == {"id": "m1", "index": 0, "step": 1, "step_id": "s1", "role": "tool",
                                         "kind": "tool_result", "text": "x", "call_id": None, "tool_name": None,
                                         "command": None, "is_error": None, "exit_code": None, "meta": False,
                                         "origin": [1], "call": None}
    assert a == make_segment(id="m1", index=0, step=1, step_id="s1", role="tool", kind="tool_result", text="x",
                             origin=(1,))


def test_detected_spans_are_slotted_and_copy_independently() -> None:
    spans = Compactor().scan("Traceback (most recent call last):\n  File \"a.py\", line 3, in f\nKeyError: 'x'\n"
                             "error: exit code 2 after 1500 ms\n")
    assert len(spans) >= 2
    a, b = spans[0], spans[1]
    assert not hasattr(a, "__dict__")
    c = a.model_copy(update={"elided": True})
    assert c.elided and "elided" in c.model_fields_set
    assert not a.elided and not b.elided
    assert Span.model_validate(a.model_dump()) == a


@pytest.mark.parametrize("kind", ["json", "messages"])
def test_streamed_emit_equals_render(tmp_path: Path, kind: str) -> None:
    msgs = _chat(15)
    msgs[5]["content"] = "Traceback (most recent call last):\n  File \"x.py\", line 3, in f\nKeyError: 'k'"
    res = Compactor(store=str(tmp_path / "s")).compact(msgs)
    assert res.report.placeholders and res.report.protected
    buf = io.StringIO()
    emit.write(res, kind, buf)
    assert buf.getvalue() == emit.render(res, kind)


def test_without_the_c_parser_files_are_read_in_memory(tmp_path: Path, monkeypatch) -> None:
    from compactor.formats import inputs

    p = tmp_path / "in.json"
    p.write_text(json.dumps(_chat(4)), encoding="utf-8")
    assert isinstance(probe_file(p).raw, FileText)
    monkeypatch.setattr(inputs, "_yajl", lambda: None)
    probe = probe_file(p)
    assert not isinstance(probe.raw, FileText)
    _same_probe(probe, _legacy_probe(p))


def test_cli_and_path_compactions_write_in_place(tmp_path: Path, monkeypatch) -> None:
    """The final write of a document read from a file builds the output in the parsed data (no
    deep copy); a document passed in by the caller is copied."""
    from compactor.formats.base import Format

    seen: list[bool] = []
    real = Format.copy_data

    def spy(doc, edits=None):
        seen.append(bool(edits is not None and edits.in_place))
        return real(doc, edits)

    monkeypatch.setattr(Format, "copy_data", staticmethod(spy))
    p = tmp_path / "in.json"
    p.write_text(json.dumps(_chat(15)), encoding="utf-8")
    assert main(["compact", str(p), "-o", str(tmp_path / "out.json"), "--store", str(tmp_path / "s"),
                 "--stream", "never"]) == 0
    assert seen == [True]
    seen.clear()
    # by default the command line compacts such a file message by message: no copy of anything
    assert main(["compact", str(p), "-o", str(tmp_path / "out2.json"), "--store", str(tmp_path / "s")]) == 0
    assert seen == []
    assert (tmp_path / "out.json").read_bytes() == (tmp_path / "out2.json").read_bytes()
    Compactor(store=str(tmp_path / "s")).compact(str(p))
    assert seen == [True]
    seen.clear()
    from compactor import load_document

    doc = load_document(p)
    Compactor(store=str(tmp_path / "s")).compact(doc)
    assert seen == [False]
