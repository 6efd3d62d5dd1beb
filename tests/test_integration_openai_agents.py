"""OpenAI Agents SDK: the input filter and the session, end to end with ``Runner.run`` against a
loopback server speaking the Chat Completions API (every request body is recorded: that is
exactly what a model would be sent)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("agents", reason="the 'openai-agents' extra is part of .[dev]")

from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, SQLiteSession, function_tool  # noqa: E402
from agents.extensions import ToolOutputTrimmer  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

import compactor  # noqa: E402
from compactor.integrations.openai_agents import (  # noqa: E402
    CompactorInputFilter,
    CompactorSession,
    compact_items,
    items_to_chat,
)

REF = re.compile(r"ref (c-[0-9a-f]{16})")
TASK = ("The orders test fails with ConnectionPoolExhausted. Fix it. "
        "Don't use TypeScript, and the fix must stay compatible with Node 18.")
ERROR = "ConnectionPoolExhausted: pool_size=20, queue_depth=347, timeout in _acquireConnection"
NPM = "\n".join([f"npm http fetch GET 200 https://registry.npmjs.org/pkg-{i} {10 + i % 50}ms (cache miss)" for i in range(300)]
                + ["npm WARN deprecated inflight@1.0.6: This module is not supported", "",
                   "added 234 packages, and audited 235 packages in 12s", "", "found 0 vulnerabilities"])
TEST = "\n".join(["> api@1.4.0 test", "> jest --ci", "", "FAIL src/__tests__/orders.test.js",
                  "  ● orders › creates an order under load", "", f"    {ERROR}", "",
                  "      at Pool._acquireConnection (src/db/pool.js:142:11)",
                  "      at async OrderService.create (src/services/orders.js:57:18)", "",
                  "Tests:       1 failed, 11 passed, 12 total"])
OUTPUTS = {"npm install": NPM, "npm test": TEST}
SCRIPT = ["npm install", "npm test", "npm install", "npm test"]


class FakeChatCompletions:
    """A loopback Chat Completions endpoint: turn k answers with the k-th scripted tool call,
    then a final text; every request body is kept."""

    def __init__(self, script: list[str]):
        self.script = script
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                k = len(outer.requests) - 1
                if k < len(outer.script):
                    msg = {"role": "assistant", "content": None, "tool_calls": [{
                        "id": f"call_{len(outer.requests)}", "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": outer.script[k]})}}]}
                    finish = "tool_calls"
                else:
                    msg, finish = {"role": "assistant", "content": "The pool is never released on the error path."}, "stop"
                data = json.dumps({"id": f"chatcmpl-{len(outer.requests)}", "object": "chat.completion", "created": 0,
                                   "model": "fake", "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                                   "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"


CALLS: list[str] = []


@function_tool
def bash(command: str) -> str:
    """Run a shell command and return its output."""
    CALLS.append(command)
    return OUTPUTS[command]


def run(filter_=None, session=None, script=SCRIPT, task=TASK):
    CALLS.clear()
    with FakeChatCompletions(script) as api:
        model = OpenAIChatCompletionsModel(model="fake", openai_client=AsyncOpenAI(base_url=api.url, api_key="sk-test",
                                                                                  max_retries=0))
        agent = Agent(name="coder", instructions="You are a coding agent.", tools=[bash], model=model)
        config = RunConfig(tracing_disabled=True, call_model_input_filter=filter_)
        result = asyncio.run(Runner.run(agent, task, run_config=config, session=session, max_turns=20))
    assert CALLS == script  # the tools really ran
    return api.requests, result


def sent_text(request: dict) -> str:
    return "\n".join(m.get("content") or "" for m in request["messages"] if isinstance(m.get("content"), str))


def chat_tokens(request: dict) -> int:
    msgs = [m for m in request["messages"] if m["role"] != "system"]
    return compactor.Compactor().compact(msgs, format="openai-chat", level=0).report.tokens_before


def test_without_a_filter_the_model_sees_every_output():
    reqs, result = run()
    assert len(reqs) == 5 and sent_text(reqs[-1]).count("pkg-299") == 2


def test_input_filter_compacts_what_the_model_is_sent_and_the_run_keeps_everything():
    flt = CompactorInputFilter(keep_recent=1)
    reqs, result = run(flt)
    assert result.final_output == "The pool is never released on the error path."
    last = reqs[-1]
    tools = [m for m in last["messages"] if m["role"] == "tool"]
    assert len(tools) == 4
    assert tools[0]["content"].startswith("[npm install:") and "234 packages" in tools[0]["content"]
    assert ERROR in tools[1]["content"] and "src/db/pool.js:142:11" in tools[1]["content"]
    assert tools[3]["content"] == TEST  # the newest output is untouched
    assert flt.expand(REF.search(tools[0]["content"]).group(1)) == NPM
    assert TASK in sent_text(last)
    # tool calls and results stay paired in what was sent
    ids = [c["id"] for m in last["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert [m["tool_call_id"] for m in tools] == ids
    # the run's own items are whole
    outputs = [i.raw_item for i in result.new_items if getattr(i, "type", "") == "tool_call_output_item"]
    assert any((o.get("output") if isinstance(o, dict) else None) == NPM for o in outputs)
    assert chat_tokens(last) < chat_tokens(run()[0][-1]) / 3


def test_input_filter_with_a_budget():
    reqs_full, _ = run()
    flt = CompactorInputFilter(budget=400, keep_recent=1)
    reqs, _ = run(flt)
    assert chat_tokens(reqs[0]) == chat_tokens(reqs_full[0])  # under budget: sent untouched
    assert reqs[0]["messages"] == reqs_full[0]["messages"]
    last = reqs[-1]
    assert chat_tokens(last) <= 400 or flt.last_report.level == 1
    assert chat_tokens(last) < chat_tokens(reqs_full[-1]) / 5
    assert ERROR in sent_text(last) and "Don't use TypeScript" in sent_text(last)
    # every request fit; where the newest raw output alone was over budget, older turns became the anchor
    assert all(chat_tokens(r) <= 400 for r in reqs)
    # (the conversation's Session compacts to its low-water mark, 0.6 x budget, so the older turns
    # become the Level 3 hand-off; the user's task with its constraint is kept as it was sent)
    def folded(r):
        return [m["content"] for m in r["messages"] if m["role"] == "user" and (
            "## Current working state" in (m.get("content") or "") or (m.get("content") or "").startswith("[compactor L3:"))]

    anchored = [c for r in reqs for c in folded(r)]
    # (the newest output stays raw, so the first fold is of the npm install alone, before any
    # error was seen; the folds after the failing test hold its error)
    assert anchored and ERROR not in anchored[0] and ERROR in anchored[-1]
    assert all("Don't use TypeScript" in sent_text(r) for r in reqs if folded(r))
    ref = re.search(r"(?:ref|expand) (c-[0-9a-f]{16})", anchored[0]).group(1)
    assert "pkg-299" in flt.expand(ref)  # what was folded into the anchor stays reachable


def test_filter_is_deterministic():
    a, _ = run(CompactorInputFilter(keep_recent=1))
    b, _ = run(CompactorInputFilter(keep_recent=1))
    assert [r["messages"] for r in a] == [r["messages"] for r in b]


def test_items_the_filter_does_not_read_are_kept_with_their_message():
    items = [
        {"role": "user", "content": TASK},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
        {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": '{"command": "npm install"}'},
        {"type": "function_call_output", "call_id": "c1", "output": NPM},
        {"role": "user", "content": [{"type": "input_text", "text": "and now?"}, {"type": "input_image", "image_url": "x"}]},
        {"type": "function_call", "call_id": "c2", "name": "bash", "arguments": '{"command": "npm test"}'},
        {"type": "function_call_output", "call_id": "c2", "output": TEST},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    ]
    chat = items_to_chat(items)
    assert [m["role"] for m in chat] == ["user", "assistant", "tool", "user", "assistant", "tool", "assistant"]
    out, report = compact_items(items, compactor.Compactor(), keep_recent=1)
    assert len(out) == len(items)
    assert out[1] == items[1] and out[4] == items[4] and out[7] == items[7]
    assert out[3]["output"].startswith("[npm install:") and out[3]["call_id"] == "c1"
    assert out[6] == items[6]
    assert items[3]["output"] == NPM  # the input is never mutated


def test_compactor_session_keeps_full_items_and_shares_the_store(tmp_path: Path):
    path = tmp_path / "store.sqlite"
    session = CompactorSession("run-1", path)
    flt = session.input_filter(keep_recent=1)
    reqs, result = run(flt, session=session)
    items = asyncio.run(session.get_items())
    outs = [i for i in items if i.get("type") == "function_call_output"]
    assert [o["output"] for o in outs] == [NPM, TEST, NPM, TEST]  # the session keeps everything
    assert items[0] == {"role": "user", "content": TASK} or items[0].get("content") == TASK
    # the same file: placeholders the model saw expand from it, also from the command line
    ref = REF.search(sent_text(reqs[-1])).group(1)
    assert CompactorSession("other", path).expand(ref) == NPM
    import subprocess
    import sys

    cli = subprocess.run([sys.executable, "-m", "compactor", "expand", "--store", str(path), ref],
                         capture_output=True, text=True)
    assert cli.returncode == 0 and cli.stdout == NPM
    # a second run continues the conversation from the session, again compacted on the way out
    reqs2, _ = run(flt, session=session, script=["npm test"], task="Run the tests once more.")
    first = reqs2[0]
    assert TASK in sent_text(first) and "pkg-299" not in sent_text(first)
    assert len(asyncio.run(session.get_items())) > len(items)
    # sessions are separate; limit and pop behave like the SDK's own sessions
    other = CompactorSession("run-2", path)
    assert asyncio.run(other.get_items()) == []
    last2 = asyncio.run(session.get_items(limit=2))
    assert last2 == asyncio.run(session.get_items())[-2:]
    popped = asyncio.run(session.pop_item())
    assert popped == last2[-1]
    asyncio.run(session.clear_session())
    assert asyncio.run(session.get_items()) == []


def test_session_matches_the_sdk_sqlite_session(tmp_path: Path):
    ours = CompactorSession("s", tmp_path / "c.sqlite")
    theirs = SQLiteSession("s", str(tmp_path / "sdk.sqlite"))
    run(session=ours)
    run(session=theirs)
    assert asyncio.run(ours.get_items()) == asyncio.run(theirs.get_items())


def test_session_rejects_a_non_sqlite_path(tmp_path: Path):
    with pytest.raises(compactor.StoreError, match="must be a .sqlite"):
        CompactorSession("s", tmp_path / "dir")


def test_tool_output_trimmer_exists_in_this_sdk():
    """The benchmark compares against it: keep the comparison honest if the SDK changes."""
    t = ToolOutputTrimmer(recent_turns=1)
    assert t.max_output_chars == 500 and t.preview_chars == 200


def test_filter_benchmark_runs_and_scores_honestly(tmp_path: Path):
    """``benchmarks/bench_agents_filter.py --quick``: the JSON it writes has every method, the
    unfiltered input keeps all the gold evidence, and compactor's Level 1 filter keeps at least as
    much as the SDK's trimmer."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "agents_filter.json"
    proc = subprocess.run([sys.executable, str(root / "benchmarks" / "bench_agents_filter.py"), "--quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    methods = data["aggregate"]["methods"]
    assert set(methods) == {"none", "ToolOutputTrimmer()", "ToolOutputTrimmer(recent_turns=1)", "trimmer, window forced",
                            "compactor filter (L1)", "compactor filter @ forced trimmer size"}
    kept = {k: v["evidence_kept"] for k, v in methods.items()}
    assert kept["none"][0] == kept["none"][1] > 0
    assert kept["compactor filter (L1)"][0] >= kept["ToolOutputTrimmer()"][0]
    assert methods["compactor filter (L1)"]["tokens"] <= methods["none"]["tokens"]
    assert "| compactor filter (L1) |" in proc.stdout


def test_items_after_the_last_message_survive_any_budget():
    items = [{"role": "user", "content": TASK}]
    for i in range(6):
        items += [{"type": "function_call", "call_id": f"c{i}", "name": "bash", "arguments": '{"command": "npm install"}'},
                  {"type": "function_call_output", "call_id": f"c{i}", "output": NPM + f"\n# run {i}"}]
    items.append({"type": "reasoning", "id": "rs_9", "summary": [], "encrypted_content": "opaque"})
    out, report = compact_items(items, compactor.Compactor(), budget=300, keep_recent=1)
    assert report.level >= 2 and len(out) < len(items)
    assert out[-1] == items[-1]
    assert out[0] == items[0]


def test_sessions_on_one_file_take_concurrent_writers(tmp_path: Path):
    path = tmp_path / "store.sqlite"
    sessions = [CompactorSession(f"s{k}", path) for k in range(4)]

    async def write(s: CompactorSession, k: int):
        for j in range(25):
            await s.add_items([{"role": "user", "content": f"{k}-{j}"}])

    async def main():
        await asyncio.gather(*(write(s, k) for k, s in enumerate(sessions)))

    asyncio.run(main())
    for k, s in enumerate(sessions):
        assert [it["content"] for it in asyncio.run(s.get_items())] == [f"{k}-{j}" for j in range(25)]


def test_filter_output_is_identical_across_hash_seeds():
    import os
    import subprocess
    import sys

    code = ("import json, sys; sys.path.insert(0, 'tests'); import compactor;"
            "from compactor.integrations.openai_agents import compact_items;"
            "from test_integration_openai_agents import NPM, TEST, TASK;"
            "items=[{'role':'user','content':TASK}]+[x for i,c in enumerate(['npm install','npm test']*3) for x in ("
            "{'type':'function_call','call_id':f'c{i}','name':'bash','arguments':json.dumps({'command':c})},"
            "{'type':'function_call_output','call_id':f'c{i}','output':{'npm install':NPM,'npm test':TEST}[c]})];"
            "print(json.dumps([compact_items(items, compactor.Compactor(), keep_recent=1)[0],"
            "compact_items(items, compactor.Compactor(), budget=400, keep_recent=1)[0]]))")
    root = Path(__file__).resolve().parents[1]
    outs = [subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}) for seed in ("1", "2")]
    assert outs[0].returncode == 0, outs[0].stderr
    assert outs[0].stdout == outs[1].stdout and "[npm install:" in outs[0].stdout


def test_pruning_the_store_never_touches_session_items(tmp_path: Path):
    """The session's items share the store file with the placeholders' originals; 'compactor store
    prune' evicts originals (expanding them is then a clear error) and leaves the conversation whole."""
    import subprocess
    import sys

    path = tmp_path / "store.sqlite"
    session = CompactorSession("run-1", path)
    reqs, _ = run(session.input_filter(keep_recent=1), session=session)
    ref = REF.search(sent_text(reqs[-1])).group(1)
    assert session.expand(ref) == NPM
    before = asyncio.run(session.get_items())
    proc = subprocess.run([sys.executable, "-m", "compactor", "store", "prune", "--store", str(path), "--to-mb", "0.0001"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert asyncio.run(CompactorSession("run-1", path).get_items()) == before
    with pytest.raises(compactor.StoreError, match="evicted"):
        CompactorSession("run-1", path).expand(ref)
