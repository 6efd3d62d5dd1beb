"""Safety rails for embedding: a per-call time limit (past it the input passes through as it is,
and the report says so), and a result never larger than what came in, at every entry point."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import compactor
from compactor import Compactor, Session
from compactor.cli import main

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo" / "debug-session.openai.json"


def _demo() -> list[dict]:
    return json.loads(DEMO.read_text(encoding="utf-8"))


def _bloating(comp: Compactor, times: int = 500) -> Compactor:
    """A compactor whose Level 1 stage makes the first text much longer (a stage replaced by name,
    as a user may): the result would be larger than the input."""
    level1 = comp.stages["level1"]

    def bloat(state):
        level1(state)
        sid = state.segments[0].id
        state.texts[sid] = state.texts[sid] * times

    comp.stages["level1"] = bloat
    return comp


def _codes(report) -> list[str]:
    return [d.code for d in report.diagnostics]


# ---------------------------------------------------------------------------- time limit


def test_a_compaction_past_its_time_limit_passes_the_input_through():
    msgs = _demo()
    res = compactor.compact(msgs, time_limit=1e-9)
    assert res.messages == msgs and res.unchanged and res.report.level == 0
    assert res.report.tokens_after == res.report.tokens_before > 0
    diag = next(d for d in res.report.diagnostics if d.code == "time-limit")
    assert "time limit of 1e-09 s" in diag.message and "passes through" in diag.message
    # a generous limit changes nothing: the same result as without one
    free = compactor.compact(msgs)
    timed = compactor.compact(msgs, time_limit=600)
    assert timed.messages == free.messages and "time-limit" not in _codes(timed.report)
    assert free.messages != msgs  # (the demo does compact)


def test_the_time_limit_keeps_secrets_redacted():
    msgs = [{"role": "user", "content": "deploy with key AKIAIOSFODNN7EXAMPLE please"}]
    res = compactor.compact(msgs, time_limit=1e-9, redact=True)
    assert "AKIAIOSFODNN7EXAMPLE" not in json.dumps(res.messages) and "time-limit" in _codes(res.report)


def test_a_session_past_its_time_limit_passes_through_and_recovers():
    msgs = _demo()
    s = Session(time_limit=1e-9, keep_recent=0)
    s.append(msgs)
    res = s.compact()
    assert res.messages == msgs and "time-limit" in _codes(res.report)
    res = s.compact(time_limit=600)  # the next call, in time, compacts as a fresh session does
    fresh = Session(keep_recent=0)
    fresh.append(msgs)
    assert res.messages == fresh.compact().messages and res.messages != msgs


def test_the_cli_flag_sets_the_time_limit(tmp_path, capsys):
    out = tmp_path / "out.json"
    assert main(["compact", str(DEMO), "--emit", "json", "--time-limit", "0.000000001", "-o", str(out)]) == 0
    capsys.readouterr()
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["messages"] == _demo()
    assert any(d["code"] == "time-limit" for d in doc["report"]["diagnostics"])
    out2 = tmp_path / "out2.json"
    assert main(["compact", str(DEMO), "--emit", "messages", "--time-limit", "0.000000001", "-o", str(out2)]) == 0
    capsys.readouterr()
    assert out2.read_bytes() == DEMO.read_bytes()  # nothing compacted: the input's own bytes


# ---------------------------------------------------------------------------- never larger


def test_the_api_never_returns_more_tokens_than_came_in():
    msgs = _demo()
    res = _bloating(Compactor()).compact(msgs)
    assert res.messages == msgs and res.report.tokens_after == res.report.tokens_before
    assert res.report.level == 0 and res.report.placeholders == []
    diag = next(d for d in res.report.diagnostics if d.code == "not-smaller")
    assert "would be larger than the input" in diag.message


def test_a_session_never_returns_more_than_came_in():
    msgs = _demo()
    s = Session(compactor=_bloating(Compactor()))
    s.append(msgs[:4])
    first = s.compact()
    assert first.messages == msgs[:4] and "not-smaller" in _codes(first.report)
    s.append(msgs[4:])
    second = s.compact()
    assert second.messages == msgs and second.report.tokens_after <= second.report.tokens_before


def test_trim_cli_writes_the_input_when_the_result_would_be_larger(tmp_path, capsys, monkeypatch):
    import compactor as pkg

    log = tmp_path / "build.log"
    log.write_text("".join(f"step {i} ok\n" for i in range(50)), encoding="utf-8")
    real = pkg.trim_to

    def padded(out, src, **kw):  # a trim whose output came out larger than the log
        stats = real(out, src, **kw)
        out.write("#" * 5000 + "\n")
        return stats

    monkeypatch.setattr(pkg, "trim_to", padded)
    out = tmp_path / "out.log"
    assert main(["trim", str(log), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert out.read_bytes() == log.read_bytes() and "would be larger than the input" in err
    assert main(["trim", str(log)]) == 0
    cap = capsys.readouterr()
    assert cap.out == log.read_text(encoding="utf-8") and "larger than the input" in cap.err


def test_trim_api_never_returns_more_than_came_in(monkeypatch):
    from compactor.collapse import trim as trim_mod

    log = "".join(f"step {i} ok\n" for i in range(50)) + "ERROR: failed at main.c:3\n"
    honest = compactor.trim(log)
    assert honest.stats.note is None and len(honest.text) < len(log)
    real = trim_mod.Trimmer.run

    def padded(self, chunks, write):
        stats = real(self, chunks, write)
        write("#" * 5000 + "\n")
        return stats

    monkeypatch.setattr(trim_mod.Trimmer, "run", padded)
    res = compactor.trim(log)
    assert res.text == log and "would be larger than the input" in res.stats.note


def test_hooks_leave_an_output_alone_when_the_compacted_one_is_not_smaller(monkeypatch):
    from compactor.integrations import claude_code as cc

    monkeypatch.setenv("COMPACTOR_HOOK_MIN_CHARS", "100")
    cc._compactor_cache.clear()
    lines = [f"E   AssertionError: value {i} != {i + 1} in tests/test_mod.py:{i + 10}" for i in range(20)]
    lines += [f"collecting module {i} ... ok" for i in range(12)]
    stdout = "\n".join(lines) + "\n"
    assert len(cc._level1(stdout)) < len(stdout)  # Level 1 folds something, but less than its header adds
    payload = {"hook_event_name": "PostToolUse", "tool_name": "Bash",
               "tool_response": {"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False}}
    out, err = io.StringIO(), io.StringIO()
    assert cc.run_hook("post-tool-use", io.StringIO(json.dumps(payload)), out, err) == 0
    assert out.getvalue() == "" and err.getvalue() == ""
    assert cc.captured_text(stdout.encode(), 1, "/tmp/full.out") is None  # the wrapper prints it verbatim


def test_mcp_transcript_tool_never_returns_more_than_the_file(tmp_path):
    pytest.importorskip("mcp", reason="the 'mcp' extra is part of .[dev]")
    from compactor.integrations.mcp_server import _Tools

    tools = _Tools(store=str(tmp_path / "s.sqlite"), root=str(tmp_path))
    tools.comp = _bloating(tools.comp)
    src = tmp_path / "run.json"
    msgs = _demo()
    src.write_text(json.dumps(msgs, separators=(",", ":")), encoding="utf-8")
    text = tools.compact_transcript_file(str(src))
    receipt, body = text.split("\n\n", 1)
    assert "would be larger than the input" in receipt and "level 0" in receipt
    assert body.count(msgs[0]["content"]) == 1  # the input as it is, not the bloated result


def test_openai_agents_filter_never_sends_more_than_came_in():
    pytest.importorskip("agents", reason="the 'openai-agents' extra is part of .[dev]")
    from compactor.integrations.openai_agents import compact_items

    items = [{"role": "user", "content": "run the tests"},
             {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{\"command\": \"npm install\"}"},
             {"type": "function_call_output", "call_id": "c1",
              "output": "\n".join(f"npm http fetch GET 200 https://registry.npmjs.org/p{j} 9ms" for j in range(60))},
             {"role": "user", "content": "and now?"}]
    out, report = compact_items(items, _bloating(Compactor()), keep_recent=0)
    assert out == items and "not-smaller" in _codes(report)


def test_langchain_edit_never_sends_more_than_came_in():
    pytest.importorskip("langchain", reason="the 'langchain' extra is part of .[dev]")
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from compactor.integrations.langchain import Level1Edit

    def build():
        return [HumanMessage("run the tests"),
                AIMessage("", tool_calls=[{"id": "c1", "name": "bash", "args": {"command": "npm install"}}]),
                ToolMessage("\n".join(f"npm http fetch GET 200 https://registry.npmjs.org/p{j} 9ms" for j in range(60)),
                            tool_call_id="c1"),
                HumanMessage("and now?")]

    honest = build()
    Level1Edit(trigger=10, keep=0).apply(honest, count_tokens=lambda ms: 10_000)
    assert honest[2].content != build()[2].content  # (the output does collapse)
    msgs = build()
    Level1Edit(trigger=10, keep=0, compactor=_bloating(Compactor())).apply(msgs, count_tokens=lambda ms: 10_000)
    assert [m.content for m in msgs] == [m.content for m in build()]
