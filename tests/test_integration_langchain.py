"""LangChain v1: the anchor summarizer, the Level 1 context edit and the budget middleware, each
end to end under ``create_agent`` with langchain's own fake chat model and real tool calls."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("langchain", reason="the 'langchain' extra is part of .[dev]")

from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import ContextEditingMiddleware, SummarizationMiddleware  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402

import compactor  # noqa: E402
from compactor.integrations.langchain import (  # noqa: E402
    AnchorSummarizer,
    CompactorMiddleware,
    Level1Edit,
    to_openai,
)

REF = re.compile(r"ref (c-[0-9a-f]{16})")
TASK = ("The orders test fails with ConnectionPoolExhausted. Fix it. "
        "Don't use TypeScript, and the fix must stay compatible with Node 18.")
ERROR = "ConnectionPoolExhausted: pool_size=20, queue_depth=347, timeout in _acquireConnection"


def npm_install_output() -> str:
    lines = [f"npm http fetch GET 200 https://registry.npmjs.org/pkg-{i} {10 + i % 50}ms (cache miss)" for i in range(300)]
    lines += ["npm WARN deprecated inflight@1.0.6: This module is not supported",
              "npm WARN deprecated glob@7.2.3: Glob versions prior to v9 are no longer supported",
              "", "added 234 packages, and audited 235 packages in 12s", "", "found 0 vulnerabilities"]
    return "\n".join(lines)


def npm_test_output() -> str:
    return "\n".join([
        "> api@1.4.0 test", "> jest --ci", "",
        "PASS src/__tests__/health.test.js",
        "FAIL src/__tests__/orders.test.js",
        "  ● orders › creates an order under load", "",
        f"    {ERROR}", "",
        "      at Pool._acquireConnection (src/db/pool.js:142:11)",
        "      at async OrderService.create (src/services/orders.js:57:18)", "",
        "Tests:       1 failed, 11 passed, 12 total",
    ])


OUTPUTS = {"npm install": npm_install_output(), "npm test": npm_test_output(),
           "cat src/db/pool.js": "\n".join(f"{i:4d}  const line{i} = pool.acquire({i});" for i in range(1, 200))}
CALLS: list[str] = []


@tool
def bash(command: str) -> str:
    """Run a shell command and return its output."""
    CALLS.append(command)
    return OUTPUTS[command]


class RecordingFakeModel(GenericFakeChatModel):
    """langchain's GenericFakeChatModel, recording every request; tools are accepted as given."""

    requests: list = []

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.requests.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def script() -> list[AIMessage]:
    def call(i: int, cmd: str) -> AIMessage:
        return AIMessage(content=f"Running {cmd}.", tool_calls=[{"name": "bash", "args": {"command": cmd}, "id": f"call_{i}"}])

    return [call(1, "npm install"), call(2, "npm test"), call(3, "cat src/db/pool.js"), call(4, "npm test"),
            AIMessage(content="The pool is never released on the error path; fixing that next.")]


def run_agent(middleware: list) -> tuple[RecordingFakeModel, dict[str, Any]]:
    CALLS.clear()
    model = RecordingFakeModel(messages=iter(script()), requests=[])
    agent = create_agent(model, tools=[bash], system_prompt="You are a coding agent.", middleware=middleware)
    state = agent.invoke({"messages": [HumanMessage(TASK)]})
    assert CALLS == ["npm install", "npm test", "cat src/db/pool.js", "npm test"]  # the tools really ran
    return model, state


def text_of(messages) -> str:
    return "\n".join(m.content if isinstance(m.content, str) else str(m.content) for m in messages)


def tokens(messages) -> int:
    return compactor.Compactor().compact(to_openai(messages), format="openai-chat", level=0).report.tokens_before


def test_without_compactor_the_model_sees_everything():
    model, state = run_agent([])
    assert len(model.requests) == 5
    assert "pkg-299" in text_of(model.requests[-1])


def test_budget_middleware_fits_the_request_and_keeps_the_evidence():
    budget = 1200
    mw = CompactorMiddleware(budget, keep_recent=1)
    model, state = run_agent([mw])
    assert len(model.requests) == 5
    full = tokens(state["messages"])
    assert full > 3 * budget  # the history really is over budget
    last = model.requests[-1]
    sent = [m for m in last if m.type != "system"]
    assert tokens(sent) <= budget
    seen = text_of(last)
    assert ERROR in seen and "src/db/pool.js:142:11" in seen
    assert "Don't use TypeScript" in seen and "Node 18" in seen
    assert "pkg-299" not in seen
    # a tool call is never separated from its result: every ToolMessage answers a call that was sent
    calls = {c["id"] for m in sent if isinstance(m, AIMessage) for c in m.tool_calls}
    assert all(m.tool_call_id in calls for m in sent if isinstance(m, ToolMessage))
    # the agent's own state keeps the full history
    assert "pkg-299" in text_of(state["messages"])
    # the first request fit the budget and went through untouched
    assert model.requests[0][-1].content == TASK and len(model.requests[0]) == 2
    assert mw.last_report is not None and mw.last_report.tokens_before == tokens(state["messages"][:-1])


def test_budget_middleware_is_deterministic():
    a, _ = run_agent([CompactorMiddleware(1200, keep_recent=1)])
    b, _ = run_agent([CompactorMiddleware(1200, keep_recent=1)])
    assert [text_of(r) for r in a.requests] == [text_of(r) for r in b.requests]


def test_level1_edit_under_context_editing_middleware():
    comp = compactor.Compactor()
    edit = Level1Edit(trigger=500, keep=1, compactor=comp)
    model, state = run_agent([ContextEditingMiddleware(edits=[edit])])
    last = model.requests[-1]
    tool_msgs = [m for m in last if isinstance(m, ToolMessage)]
    assert len(tool_msgs) == 4
    npm, test1, cat, test2 = tool_msgs
    # benign install output became a semantic placeholder that expands to the exact original
    assert npm.content.startswith("[npm install:") and "234 packages" in npm.content
    assert npm.response_metadata["context_editing"] == {"compacted": True, "strategy": "compactor_level1"}
    assert comp.expand(REF.search(npm.content).group(1)) == OUTPUTS["npm install"]
    # the failure stays verbatim; the newest tool result is untouched
    assert ERROR in test1.content and "src/db/pool.js:142:11" in test1.content
    assert test2.content == OUTPUTS["npm test"]
    assert len(cat.content) < len(OUTPUTS["cat src/db/pool.js"])
    # below the trigger nothing is edited
    first_with_tool = next(r for r in model.requests if any(isinstance(m, ToolMessage) for m in r))
    assert [m.content for m in first_with_tool if isinstance(m, ToolMessage)] == [OUTPUTS["npm install"]]
    assert "pkg-299" in text_of(state["messages"])  # state untouched


def test_anchor_summarizer_under_summarization_middleware():
    summ = SummarizationMiddleware(model=GenericFakeChatModel(messages=iter([])), trigger=("messages", 8),
                                   keep=("messages", 2), summarizer=AnchorSummarizer(), trim_tokens_to_summarize=None)
    model, state = run_agent([summ])
    assert len(model.requests) == 5  # the summary model (an empty iterator) is never called
    summaries = [m for r in model.requests for m in r if isinstance(m, HumanMessage)
                 and m.content.startswith("Here is a summary of the conversation to date:")]
    assert summaries, "summarization triggered"
    text = summaries[-1].content
    assert "## Current working state" in text
    assert "Don't use TypeScript" in text  # the user's constraint survives verbatim
    assert ERROR in text  # the live error is key evidence
    assert "pkg-299" not in text
    # deterministic: the same messages give the same anchor
    again = AnchorSummarizer()(state["messages"][:6])
    assert again == AnchorSummarizer()(state["messages"][:6])


def test_budget_below_what_can_be_reached_sends_the_level1_result():
    # 20 tokens is below the floor (the request, the constraints, the live error's header): the
    # Level 1 result goes out, smaller than the history, nothing lost, no exception in the loop
    mw = CompactorMiddleware(20, keep_recent=1)
    model, state = run_agent([mw])
    sent = [m for m in model.requests[-1] if m.type != "system"]
    assert mw.last_report.level == 1 and tokens(sent) > 20
    assert tokens(sent) < tokens(state["messages"][:-1]) / 5
    assert ERROR in text_of(sent) and "Don't use TypeScript" in text_of(sent)


def test_a_budget_above_the_floor_is_met():
    mw = CompactorMiddleware(300, keep_recent=1)
    model, state = run_agent([mw])
    sent = [m for m in model.requests[-1] if m.type != "system"]
    assert tokens(sent) <= 300 and mw.last_report.level >= 2
    assert ERROR in text_of(sent) and "Don't use TypeScript" in text_of(sent)


def test_level2_and_3_messages_round_trip_through_langchain():
    import json
    from pathlib import Path

    from compactor.integrations.langchain import from_openai

    demo = json.loads((Path(__file__).resolve().parents[1] / "fixtures/demo/debug-session.openai.json").read_text())
    lc = from_openai(demo)
    mw = CompactorMiddleware(700)
    out = mw.compact_messages(lc)
    assert out is not None and mw.last_report.level >= 2
    assert tokens(out) <= 700 < tokens(lc)
    assert [m.type for m in out][0] == "system" and out[-1].type == "human"
    assert "Don't use TypeScript" in text_of(out)
    assert CompactorMiddleware(10_000).compact_messages(lc) is None  # under budget: untouched


def test_async_agents_use_the_same_compaction():
    import asyncio

    def arun(middleware):
        CALLS.clear()
        model = RecordingFakeModel(messages=iter(script()), requests=[])
        agent = create_agent(model, tools=[bash], system_prompt="You are a coding agent.", middleware=middleware)
        asyncio.run(agent.ainvoke({"messages": [HumanMessage(TASK)]}))
        return model

    sync_model, _ = run_agent([CompactorMiddleware(1200, keep_recent=1)])
    async_model = arun([CompactorMiddleware(1200, keep_recent=1)])
    assert [text_of(r) for r in async_model.requests] == [text_of(r) for r in sync_model.requests]
    summ = SummarizationMiddleware(model=GenericFakeChatModel(messages=iter([])), trigger=("messages", 8),
                                   keep=("messages", 2), summarizer=AnchorSummarizer(), trim_tokens_to_summarize=None)
    m = arun([summ, ContextEditingMiddleware(edits=[Level1Edit(trigger=500, keep=1)])])
    assert any("## Current working state" in text_of(r) for r in m.requests)
    assert "pkg-299" not in text_of(m.requests[-1])


def test_repeated_summaries_keep_the_whole_conversation():
    """Each summarization replaces the previous summary by the messages it stood for (kept in the
    store): after three summaries the goal, the constraint and the first error are still there."""
    import json as _json

    cmds = ["npm install", "npm test", "cat src/db/pool.js", "npm test"] * 2
    steps = [AIMessage(content=f"Running {c}.", tool_calls=[{"name": "bash", "args": {"command": c}, "id": f"call_{i}"}])
             for i, c in enumerate(cmds)] + [AIMessage(content="done")]
    CALLS.clear()
    model = RecordingFakeModel(messages=iter(steps), requests=[])
    comp = compactor.Compactor()
    summ = SummarizationMiddleware(model=GenericFakeChatModel(messages=iter([])), trigger=("messages", 6),
                                   keep=("messages", 2), summarizer=AnchorSummarizer(compactor=comp),
                                   trim_tokens_to_summarize=None)
    agent = create_agent(model, tools=[bash], system_prompt="You are a coding agent.", middleware=[summ])
    agent.invoke({"messages": [HumanMessage(TASK)]})
    summaries = []
    for r in model.requests:
        for m in r:
            if isinstance(m, HumanMessage) and m.content.startswith("Here is a summary") and m.content not in summaries:
                summaries.append(m.content)
    assert len(summaries) >= 3
    last = summaries[-1]
    assert "**Goal**: The orders test fails with ConnectionPoolExhausted" in last
    assert "Don't use TypeScript" in last and ERROR in last
    assert "Current working state\n\n**Goal**: Current working state" not in last
    m = re.search(r"\[compactor: anchor of (\d+) earlier messages · ref (c-[0-9a-f]{16})\]", last)
    history = _json.loads(comp.expand(m.group(2)))
    assert len(history) == int(m.group(1)) and history[0] == {"role": "user", "content": TASK}
    assert sum(1 for x in history if x["role"] == "tool") > 4  # every earlier tool output, whole
    assert any(x["role"] == "tool" and x["content"] == OUTPUTS["npm install"] for x in history)
