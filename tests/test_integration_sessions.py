"""The integrations keep one compactor.Session per conversation (compactor/integrations/sessions.py):
the OpenAI Agents input filter's output equals the stateless path call after call, repeated calls
continue the same session and (with batched collapsing, or under a budget) extend the previous
output, conversations are told apart by content, and the number of sessions kept is bounded."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("agents")
pytest.importorskip("langchain")

pytestmark = [pytest.mark.slow, pytest.mark.corpus]

import compactor  # noqa: E402
from compactor.integrations.langchain import CompactorMiddleware, from_openai, to_openai  # noqa: E402
from compactor.integrations.openai_agents import compact_items  # noqa: E402
from compactor.integrations.sessions import SessionPool  # noqa: E402

from conftest import corpus_path  # noqa: E402

DJANGO = ("mini-swe-agent", "django__django-11099.deepseek_chat_test_1-100.traj.json")
PVLIB = ("mini-swe-agent", "pvlib__pvlib-python-1072.deepseek_reasoner_dev.traj.json")


def chat_of(parts) -> list[dict]:
    """A corpus mini-swe-agent run as clean OpenAI chat messages."""
    out = []
    for m in json.loads(corpus_path(*parts).read_text())["messages"]:
        if m["role"] not in ("system", "user", "assistant", "tool"):
            continue  # mini-swe-agent's closing "exit" record is no message
        msg = {"role": m["role"], "content": m.get("content") if isinstance(m.get("content"), str) else ""}
        if m.get("tool_calls"):
            msg["tool_calls"] = [{"id": c["id"], "type": "function", "function": {
                "name": c["function"]["name"], "arguments": c["function"]["arguments"]}} for c in m["tool_calls"]]
        if m["role"] == "tool":
            msg["tool_call_id"] = m["tool_call_id"]
        out.append(msg)
    return out


def items_of(chat: list[dict]) -> list[dict]:
    """The same run as OpenAI Responses input items (what the Agents SDK hands a filter)."""
    items = []
    for m in chat:
        if m["role"] == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]})
            continue
        if m["content"] or not m.get("tool_calls"):
            items.append({"role": "developer" if m["role"] == "system" else m["role"], "content": m["content"]})
        for c in m.get("tool_calls") or []:
            items.append({"type": "function_call", "call_id": c["id"], "name": c["function"]["name"],
                          "arguments": c["function"]["arguments"]})
    return items


def model_calls(items: list[dict]) -> list[int]:
    """Input lengths at which the agent calls the model: after the task and after each tool output."""
    first_user = next(i for i, it in enumerate(items) if it.get("role") == "user")
    return [first_user + 1] + [i + 1 for i, it in enumerate(items) if it.get("type") == "function_call_output"]


def extends(prev: list, cur: list) -> bool:
    return len(prev) <= len(cur) and all(json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
                                         for a, b in zip(prev, cur))


@pytest.mark.parametrize("batch", [1, 10])
def test_filter_sessions_equal_the_stateless_path(batch):
    items = items_of(chat_of(DJANGO))
    comp = compactor.Compactor()
    pool = SessionPool(comp)
    calls = model_calls(items)
    outs = []
    for k, n in enumerate(calls):
        out, _ = compact_items(items[:n], comp, keep_recent=3, collapse_batch=batch, pool=pool)
        outs.append(out)
        if k % 5 == 0 or k == len(calls) - 1:  # the stateless path is slow: compare every 5th call
            ref, _ = compact_items(items[:n], compactor.Compactor(), keep_recent=3, collapse_batch=batch)
            assert out == ref, f"call {k} ({n} items) differs from the stateless path"
    assert len(pool) == 1 and pool.started == 1 and pool.reused == len(calls) - 1  # one session, continued
    assert sum(len(json.dumps(o)) for o in outs[-1:]) < sum(len(json.dumps(i)) for i in items)
    ext = sum(extends(a, b) for a, b in zip(outs, outs[1:])) / (len(outs) - 1)
    if batch == 10:
        assert ext >= 0.8, f"only {ext:.0%} of calls extend the previous input"
    print(f"collapse_batch={batch}: {ext:.1%} of {len(outs) - 1} calls extend the previous input")


def test_filter_sessions_under_a_budget_fit_and_extend():
    items = items_of(chat_of(DJANGO))
    comp = compactor.Compactor()
    pool = SessionPool(comp)
    budget = 6000
    outs, reports = [], []
    for n in model_calls(items):
        out, rep = compact_items(items[:n], comp, budget=budget, keep_recent=3, pool=pool)
        outs.append(out)
        reports.append(rep)
    compacted = [r for r in reports if r.tokens_before > budget]
    assert compacted and all(r.tokens_after <= budget for r in compacted)
    over = [k for k, r in enumerate(reports) if r.tokens_before > budget]
    ext = sum(extends(outs[k - 1], outs[k]) for k in over[1:]) / max(1, len(over) - 1)
    assert ext >= 0.5, f"under the budget only {ext:.0%} of compacted calls extend the previous input"
    # the final error of the run and the task are still sent
    text = json.dumps(outs[-1], ensure_ascii=False)
    assert "UsernameValidator allows trailing newline in usernames" in text  # the task
    assert "ImproperlyConfigured: The SECRET_KEY setting must not be empty." in text  # the run's last error
    print(f"budget {budget}: {ext:.1%} of {len(over) - 1} compacted calls extend the previous input")


def test_conversations_are_told_apart_and_the_pool_is_bounded():
    a, b = items_of(chat_of(DJANGO)), items_of(chat_of(PVLIB))
    ca, cb = model_calls(a)[:12], model_calls(b)[:12]
    comp = compactor.Compactor()
    for max_sessions in (2, 1):
        pool = SessionPool(comp, max_sessions=max_sessions)
        for na, nb in zip(ca, cb):
            for its, n in ((a, na), (b, nb)):
                out, _ = compact_items(its[:n], comp, keep_recent=3, pool=pool)
                assert out == compact_items(its[:n], comp, keep_recent=3)[0]
            assert len(pool) <= max_sessions
        if max_sessions == 2:
            assert pool.started == 2 and pool.reused == 2 * len(ca) - 2
        else:  # one slot, two conversations: every call starts again (correct, not incremental)
            assert pool.started == 2 * len(ca) and pool.reused == 0


def test_an_edited_history_starts_a_new_session():
    items = items_of(chat_of(DJANGO))
    comp = compactor.Compactor()
    pool = SessionPool(comp)
    n = model_calls(items)[6]
    compact_items(items[:n], comp, pool=pool)
    edited = [dict(it) for it in items[:n]]
    edited[2] = {**edited[2], "content": "an edited message"} if "content" in edited[2] else {**edited[2], "output": "x"}
    out, _ = compact_items(edited, comp, pool=pool)
    assert pool.started == 2 and out == compact_items(edited, compactor.Compactor())[0]


def test_langchain_middleware_keeps_a_session_per_thread():
    chat = chat_of(DJANGO)
    lc = from_openai(chat)
    mw = CompactorMiddleware(5000, keep_recent=3)
    points = [i + 1 for i, m in enumerate(chat) if m["role"] == "tool"]
    sent, reports = [], []
    for n in points:
        out = mw.compact_messages(lc[:n])
        sent.append(to_openai(out) if out is not None else to_openai(lc[:n]))
        reports.append(mw.last_report)
    assert len(mw.sessions) == 1 and mw.sessions.reused == len(points) - 1
    over = [k for k, r in enumerate(reports) if r.tokens_before > 5000]
    assert over and all(reports[k].tokens_after <= 5000 for k in over)
    ext = sum(extends(sent[k - 1], sent[k]) for k in over[1:]) / max(1, len(over) - 1)
    assert ext >= 0.5, f"only {ext:.0%} of compacted calls extend the previous request"
    # same input, fresh middleware: the same requests (deterministic)
    mw2 = CompactorMiddleware(5000, keep_recent=3)
    again = []
    for n in points:
        out = mw2.compact_messages(lc[:n])
        again.append(to_openai(out) if out is not None else to_openai(lc[:n]))
    assert again == sent
    print(f"LangChain budget 5000: {ext:.1%} of {len(over) - 1} compacted calls extend the previous request")


def test_pool_rejects_a_zero_bound():
    with pytest.raises(ValueError):
        SessionPool(compactor.Compactor(), max_sessions=0)


def test_level1_edit_through_its_sessions_equals_a_one_shot_level1():
    from langchain_core.messages import ToolMessage

    from compactor.integrations.langchain import Level1Edit

    chat = chat_of(DJANGO)
    lc = from_openai(chat)
    edit = Level1Edit(trigger=0, keep=3)
    points = [i + 1 for i, m in enumerate(chat) if m["role"] == "tool"][::4]
    for n in points:
        msgs = list(lc[:n])
        edit.apply(msgs, count_tokens=lambda m: 1)
        ref = compactor.Compactor().compact(to_openai(lc[:n]), format="openai-chat", level=1, keep_recent=3).messages
        tools = [i for i, m in enumerate(msgs) if isinstance(m, ToolMessage)]
        for i in tools[: max(0, len(tools) - 3)]:
            assert msgs[i].content == ref[i]["content"]
    compacting = sum(1 for n in points if sum(m["role"] == "tool" for m in chat[:n]) > 3)  # others return early
    assert len(edit.sessions) == 1 and edit.sessions.started == 1 and edit.sessions.reused == compacting - 1
