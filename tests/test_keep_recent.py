"""``keep_recent``: the newest N tool outputs stay raw, whatever N and however many outputs there are.

A lone output was collapsed despite ``keep_recent=3`` and came back raw once a second output
arrived: the agent's first observation was hidden and the prompt-cache prefix changed on the next
turn. Checked over 0-5 outputs and several N, through ``compact()``, a ``Session`` fed turn by turn,
and the OpenAI Agents input filter."""

from __future__ import annotations

import pytest

import compactor

# an output Level 1 collapses when it may (a benign install log), different in each turn
def _output(k: int) -> str:
    return "\n".join([f"Collecting pkg{k}-{i}==1.{i}.0" for i in range(40)]
                     + [f"  Downloading pkg{k}-{i}-1.{i}.0-py3-none-any.whl (12 kB)" for i in range(40)]
                     + [f"Successfully installed " + " ".join(f"pkg{k}-{i}-1.{i}.0" for i in range(40))])


def _turn(k: int) -> list[dict]:
    return [
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{k}", "type": "function",
            "function": {"name": "bash", "arguments": '{"command": "pip install -r req%d.txt"}' % k}}]},
        {"role": "tool", "tool_call_id": f"call_{k}", "content": _output(k)},
    ]


def conversation(outputs: int) -> list[dict]:
    msgs = [{"role": "user", "content": "Install the requirements and run the tests."}]
    for k in range(outputs):
        msgs += _turn(k)
    return msgs


def tool_texts(messages) -> list[str]:
    return [m["content"] for m in messages if m.get("role") == "tool"]


def expect_raw(outputs: int, keep: int) -> list[bool]:
    """Which outputs stay raw: the newest ``keep``."""
    return [k >= outputs - keep for k in range(outputs)]


def raw_flags(messages, outputs: int) -> list[bool]:
    texts = tool_texts(messages)
    assert len(texts) == outputs
    return [t == _output(k) for k, t in enumerate(texts)]


def test_an_output_level1_may_collapse_is_collapsed_once_old():
    # the fixture's premise: an older output does collapse (else every check below passes vacuously)
    got = compactor.compact(conversation(3), format="openai-chat", keep_recent=1)
    assert raw_flags(got.messages, 3) == [False, False, True]
    assert "ref " in tool_texts(got.messages)[0]


@pytest.mark.parametrize("keep", [0, 1, 2, 3, 5])
@pytest.mark.parametrize("outputs", [0, 1, 2, 3, 4, 5])
def test_compact_keeps_the_newest_outputs_raw(outputs, keep):
    got = compactor.compact(conversation(outputs), format="openai-chat", keep_recent=keep)
    assert raw_flags(got.messages, outputs) == expect_raw(outputs, keep)


@pytest.mark.parametrize("keep", [0, 1, 2, 3, 5])
def test_a_session_turn_by_turn_never_brings_an_output_back(keep):
    session = compactor.Session(format="openai-chat", keep_recent=keep, collapse_batch=1)
    msgs = conversation(0)
    session.append(msgs)
    collapsed_before: list[str] = []
    for outputs in range(1, 6):
        turn = _turn(outputs - 1)
        msgs = msgs + turn
        session.append(turn)
        got = session.compact()
        assert raw_flags(got.messages, outputs) == expect_raw(outputs, keep), outputs
        texts = tool_texts(got.messages)
        # an output collapsed in an earlier turn stays collapsed, in the same words (the prompt
        # cache's prefix does not change back)
        assert texts[:len(collapsed_before)] == collapsed_before
        collapsed_before = [t for k, t in enumerate(texts) if not expect_raw(outputs, keep)[k]]
        # and the session agrees with a one-shot compaction of the same messages
        once = compactor.compact(msgs, format="openai-chat", keep_recent=keep)
        assert raw_flags(once.messages, outputs) == raw_flags(got.messages, outputs)


def test_a_plain_log_is_still_compacted():
    # a log is one output with no newer one to keep it raw for: keep_recent does not hold it back
    got = compactor.compact(_output(0), format="text", keep_recent=3)
    assert got.messages != _output(0) and "ref " in got.messages


@pytest.mark.parametrize("keep", [1, 3])
def test_the_openai_agents_filter_keeps_the_newest_outputs_raw(keep):
    pytest.importorskip("agents", reason="the 'openai-agents' extra is part of .[dev]")
    from compactor.integrations.openai_agents import compact_items

    comp = compactor.Compactor()
    pool_filter = __import__("compactor.integrations.openai_agents", fromlist=["SessionPool"]).SessionPool(comp, 8)
    items: list[dict] = [{"role": "user", "content": "Install the requirements and run the tests."}]
    for outputs in range(1, 6):
        k = outputs - 1
        items = items + [
            {"type": "function_call", "call_id": f"call_{k}", "name": "bash",
             "arguments": '{"command": "pip install -r req%d.txt"}' % k},
            {"type": "function_call_output", "call_id": f"call_{k}", "output": _output(k)},
        ]
        out, _report = compact_items(items, comp, keep_recent=keep, pool=pool_filter)
        texts = [it["output"] for it in out if isinstance(it, dict) and it.get("type") == "function_call_output"]
        assert [t == _output(j) for j, t in enumerate(texts)] == expect_raw(outputs, keep), outputs


@pytest.mark.parametrize("keep", [1, 3])
def test_a_session_collapsing_in_batches_keeps_the_newest_raw(keep):
    # (a session built from options collapses older outputs a batch at a time: an output may stay
    # raw longer, the newest ``keep`` always do, and none comes back once collapsed)
    session = compactor.Session(format="openai-chat", keep_recent=keep)
    session.append(conversation(0))
    was_collapsed: set[int] = set()
    for outputs in range(1, 6):
        session.append(_turn(outputs - 1))
        flags = raw_flags(session.compact().messages, outputs)
        assert all(flags[max(0, outputs - keep):]), outputs
        assert not {k for k in was_collapsed if flags[k]}, outputs
        was_collapsed |= {k for k, raw in enumerate(flags) if not raw}
