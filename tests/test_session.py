"""compactor.Session: one conversation compacted turn after turn.

- Without a budget its output is the one-shot compaction of the same messages (property test
  over how the messages are appended, on real trajectories and with batching).
- Batching keeps the previous output a byte prefix of the next one between batches.
- With a budget: every output fits; after a refit the output is at most low_water x budget; in
  between, new messages are appended and the output extends the previous one.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

import compactor
from compactor import Compactor, Session
from compactor.pipeline import collapse_boundary
from compactor.session import SESSION_COLLAPSE_BATCH
from conftest import ROOT, corpus_path

DEMO = ROOT / "fixtures" / "demo" / "debug-session.openai.json"


def _chat(path) -> list[dict]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return data["messages"] if isinstance(data, dict) else data


def _same(a, b) -> bool:
    return json.dumps(a.to_json_dict(), sort_keys=True) == json.dumps(b.to_json_dict(), sort_keys=True)


def _dumps(result) -> str:
    return json.dumps(result.messages, ensure_ascii=False)


@pytest.fixture(scope="module")
def django():
    return _chat(corpus_path("mini-swe-agent", "django__django-11099.deepseek_chat_test_1-100.traj.json"))


_ONE_SHOT = {}


def _one_shot(msgs: list[dict], n: int, **options):
    key = (id(msgs), n, tuple(sorted(options.items())))
    if key not in _ONE_SHOT:
        _ONE_SHOT[key] = Compactor(**options).compact(msgs[:n])
    return _ONE_SHOT[key]


@settings(max_examples=12, deadline=None)
@given(chunks=st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=40),
       options=st.sampled_from([{}, {"keep_recent": 1}, {"collapse_batch": 4}, {"keep_recent": 2, "collapse_batch": 3},
                                {"keep_recent": 0}, {"level": 0},
                                # the anchor: bounded small (overflow), in Chinese, and rendered as the
                                # Level 2 summary of the folded turns
                                {"anchor_max_tokens": 300, "lang": "zh"}, {"level": 2, "keep_recent_turns": 3}]))
def test_session_equals_one_shot_on_a_real_trajectory(django, chunks, options):
    conv = Session(Compactor(**options))
    n = 0
    for size in chunks:
        if n >= len(django):
            break
        conv.append(django[n:n + size])
        n = min(len(django), n + size)
        got = conv.compact()
        if size > 3:  # the one-shot side is the slow one: compare on the bigger steps
            assert _same(got, _one_shot(django, n, **options)), (n, options)
    assert _same(conv.compact(), _one_shot(django, n, **options)), (n, options)  # and always at the end


_OVERRIDES = [{}, {"keep_recent": 1}, {"keep_recent": 5, "collapse_batch": 2}, {"anchor_max_tokens": 300},
              {"level": 0}, {"lang": "zh"}]


@settings(max_examples=10, deadline=None)
@given(turns=st.lists(st.tuples(st.integers(min_value=0, max_value=9), st.integers(min_value=0, max_value=5)),
                      min_size=1, max_size=30))
def test_one_session_compacted_under_changing_overrides_equals_one_shot(django, turns):
    """What a session keeps between turns (segment lists, protected spans per segment, token counts
    of the written texts, the writer's edited records, the self-check's and the continuation
    check's verdicts) holds while the per-call options move the collapse boundary back and forth,
    change the anchor's bound or turn compaction off, and when nothing was appended in between."""
    conv = Session(Compactor())
    n = 0
    for size, k in turns:
        conv.append(django[n:n + size])
        n = min(len(django), n + size)
        if not n:
            continue
        overrides = _OVERRIDES[k]
        got = conv.compact(**overrides)
        assert _same(got, _one_shot(django, n, **overrides)), (n, overrides)
        assert _dumps(got) == _dumps(_one_shot(django, n, **overrides)), (n, overrides)


@settings(max_examples=6, deadline=None)
@given(chunks=st.lists(st.integers(min_value=1, max_value=15), min_size=1, max_size=12),
       share=st.sampled_from([0.35, 0.6]))
def test_a_lasting_conversation_equals_one_shot_under_a_budget(django, chunks, share):
    """What a session keeps between compactions (detections, Level 1 outcomes, the older-output
    pass, the merged anchor, the self-check's texts) changes nothing under a budget either: the
    pipeline run on one lasting Conversation, turn after turn, gives each turn the one-shot result."""
    msgs = django[:48]
    budget = int(Compactor().compact(msgs).report.tokens_after * share)
    options = {"budget": budget, "handoff_after": 1000}  # the Level 3 counter is the one thing kept on purpose
    comp = Compactor(**options)
    session = Session(comp)  # its reader and its writer; the budget is fitted every turn (no hysteresis)
    levels = set()
    n = 0
    for size in chunks:
        if n >= len(msgs):
            break
        session.append(msgs[n:n + size])
        n = min(len(msgs), n + size)
        doc = session._document(comp.config)
        try:
            got = comp.run(None, session.conversation, doc=doc, writer=session._write)
        except compactor.BudgetError as exc:
            with pytest.raises(compactor.BudgetError) as ref:
                Compactor(**options).compact(msgs[:n])
            assert str(ref.value) == str(exc)
            continue
        ref = Compactor(**options).compact(msgs[:n])
        assert got.report.level == ref.report.level
        assert _same(got, ref), (n, budget)
        levels.add(got.report.level)
    if n == len(msgs):
        assert max(levels) >= 2  # the budget did make it fold


def test_session_equals_one_shot_every_turn_on_the_demo():
    msgs = json.loads(DEMO.read_text(encoding="utf-8"))
    for options in ({}, {"keep_recent": 1, "collapse_batch": 2}, {"redact": True}):
        conv = Session(Compactor(**options))
        for i, m in enumerate(msgs):
            conv.append(m)
            assert _same(conv.compact(), Compactor(**options).compact(msgs[:i + 1])), (i, options)
    # a session built from options batches by default: the same as a compactor configured so
    conv = Session(keep_recent=1)
    assert conv.config.collapse_batch == SESSION_COLLAPSE_BATCH
    for i, m in enumerate(msgs):
        conv.append(m)
        ref = Compactor(keep_recent=1, collapse_batch=SESSION_COLLAPSE_BATCH).compact(msgs[:i + 1])
        assert _same(conv.compact(), ref), i


def test_session_on_a_layout_without_an_incremental_reader():
    """Anthropic messages are re-read every turn: still the one-shot result."""
    msgs = [
        {"role": "user", "content": "Run the tests and fix the failure in app/util.py."},
        {"role": "assistant", "content": [{"type": "text", "text": "Running them."},
                                          {"type": "tool_use", "id": "toolu_01", "name": "bash",
                                           "input": {"command": "pytest -q"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01",
                                      "content": "F.\nFAILED tests/test_util.py::test_parse - ValueError: bad\n1 failed"}]},
        {"role": "assistant", "content": "The parser rejects empty strings; fixing it."},
    ]
    conv = Session()
    for i, m in enumerate(msgs):
        conv.append(m)
        got = conv.compact()
        assert got.format == ("openai-chat" if i == 0 else "anthropic")  # a lone user message reads as chat
        assert _same(got, Compactor().compact(msgs[:i + 1]))


def test_batching_keeps_the_previous_output_a_prefix(django):
    """With collapse_batch=B the recent window moves B outputs at a time: between batches every
    turn's output extends the previous one byte for byte."""
    batch = SESSION_COLLAPSE_BATCH
    conv = Session()
    prev = None
    extends = breaks = 0
    for m in django:
        conv.append(m)
        cur = _dumps(conv.compact())[:-1]  # without the closing bracket of the list
        if prev is not None:
            if cur.startswith(prev):
                extends += 1
            else:
                breaks += 1
        prev = cur
    results = sum(1 for m in django if m.get("role") == "tool")
    # the window moves once per batch of outputs: at most that many turns rewrite older messages
    assert breaks <= results // batch + 1, (extends, breaks)
    assert extends >= 0.9 * (extends + breaks)
    unbatched = Session(collapse_batch=1)
    prev, breaks1 = None, 0
    for m in django:
        unbatched.append(m)
        cur = _dumps(unbatched.compact())[:-1]
        if prev is not None and not cur.startswith(prev):
            breaks1 += 1
        prev = cur
    assert breaks < breaks1  # batching is what keeps the prefix


def test_collapse_boundary():
    assert collapse_boundary(0, 3) == 0
    assert collapse_boundary(1, 3) == 0  # a lone output is the newest one: it stays raw (issue 35)
    assert collapse_boundary(1, 0) == 1
    assert collapse_boundary(5, 3) == 2
    assert collapse_boundary(5, 0) == 5
    assert [collapse_boundary(n, 3, 4) for n in range(2, 13)] == [0, 0, 0, 0, 0, 4, 4, 4, 4, 8, 8]


def test_budget_hysteresis_fits_refits_low_and_then_appends(django):
    msgs = django[:60]
    full = Compactor().compact(msgs).report.tokens_after
    budget = int(full * 0.5)
    conv = Session(low_water=0.6)
    prev = None
    refits = appends = 0
    for m in msgs:
        conv.append(m)
        r = conv.compact(budget=budget)
        assert r.report.tokens_after <= budget
        assert r.report.budget == budget
        cur = _dumps(r)[:-1]
        if prev is not None and cur.startswith(prev):
            appends += 1
        elif r.report.level >= 2:
            refits += 1
            # well under the budget (the low-water mark, or the lowest mark the evidence allows)
            assert r.report.tokens_after <= budget * 0.9, (r.report.tokens_after, budget)
        prev = cur
    assert refits >= 1 and appends > refits * 3, (refits, appends)


def test_session_keeps_no_state_in_the_compactor():
    """Two sessions on one Compactor are two conversations: their Level 3 counters are apart."""
    msgs = json.loads(DEMO.read_text(encoding="utf-8"))
    comp = Compactor()
    a, b = Session(comp), Session(comp)
    a.append(msgs)
    b.append(msgs)
    budget = max(1, int(comp.compact(msgs, level=2).report.tokens_after * 0.6))
    try:
        ra = a.compact(budget=budget, level=3)
    except compactor.BudgetError:
        pytest.skip("the demo cannot reach Level 3 at this budget")
    assert a.level3_count == (1 if ra.report.level == 3 else 0)
    assert b.level3_count == 0
    b.compact(budget=budget, level=3)
    assert b.level3_count == a.level3_count


def test_session_rejects_bad_input():
    conv = Session()
    with pytest.raises(compactor.InputError):
        conv.compact()
    with pytest.raises(compactor.InputError):
        conv.append("not a message")
    conv.append({"role": "user", "content": "hi"})
    conv.compact()
    conv.append(["oops"])  # no longer chat messages: detected again, as a one-shot compaction would
    assert _same(conv.compact(), Compactor().compact([{"role": "user", "content": "hi"}, "oops"]))


def test_session_output_does_not_alias_its_input():
    msgs = json.loads(DEMO.read_text(encoding="utf-8"))
    snapshot = json.dumps(msgs)
    conv = Session(keep_recent=0)
    conv.append(msgs)
    out = conv.compact().messages
    for m in out:
        m["content"] = "changed"
    assert json.dumps(msgs) == snapshot
    assert json.dumps(conv.compact().messages) != json.dumps(out)


def test_a_changed_output_message_does_not_reach_the_next_turn():
    """A caller may mark the messages it sends (a prompt-cache marker on the last one): the next
    turn's output is copied from the conversation, not from what the caller changed. A message
    nobody changed is the same copy as the turn before (not copied again)."""
    msgs = json.loads(DEMO.read_text(encoding="utf-8"))
    session = Session()
    session.append(msgs[:-1])
    first = session.compact().messages
    expected = json.dumps(first)
    first[-1]["cache_control"] = {"type": "ephemeral"}
    first[0].pop("content")
    session.append(msgs[-1])
    second = session.compact().messages
    assert json.dumps(second[:-1]) == expected
    assert "cache_control" not in second[-2] and "content" in second[0]
    assert second[-2] is not first[-1] and second[0] is not first[0]
    assert all(a is b for a, b in zip(first[1:-1], second[1:-2]))  # unchanged: the same copies
    assert second is not first
    fresh = Session()
    fresh.append(msgs)
    assert json.dumps(second) == json.dumps(fresh.compact().messages)


def test_changed_output_messages_anywhere_in_a_long_conversation_are_copied_again():
    """The output copies are compared with their sources a run at a time: a change the caller
    made in any run (the first message, one in a middle run, one in the last, partial run) is
    undone in the next turn's output, and the copies nobody changed are given again."""
    from compactor.session import COPY_RUN

    msgs = []
    for i in range(COPY_RUN * 2 + 20):
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}: step {i // 2} done"})
    session = Session()
    session.append(msgs[:-1])
    first = session.compact().messages
    expected = json.dumps(first)
    changed = [0, COPY_RUN + 3, 2 * COPY_RUN + 5, len(first) - 1]
    for i in changed:
        first[i]["cache_control"] = {"type": "ephemeral"}
    session.append(msgs[-1])
    second = session.compact().messages
    assert json.dumps(second[:-1]) == expected
    assert all(second[i] is not first[i] for i in changed)
    assert all(second[i] is first[i] for i in range(len(first)) if i not in changed)


def test_a_document_changed_in_place_between_compactions_is_indexed_again():
    # a conversation's segment lists are checked once per compaction: a document whose segment list
    # (the same list object, same length) changed since the last compaction (a tool output is now a
    # user message: one tool result less) is indexed again, and the result is the one-shot
    # compaction of what it holds now
    from compactor.formats import load_document
    from compactor.pipeline import Conversation

    msgs = json.loads(DEMO.read_text(encoding="utf-8"))
    changed = json.loads(json.dumps(msgs))
    changed[3] = {"role": "user", "content": changed[3]["content"]}
    comp = Compactor(keep_recent=0)
    conv = Conversation(comp)
    doc = load_document(msgs)
    first = comp.run(None, conv, doc=doc)
    assert _same(first, Compactor(keep_recent=0).compact(msgs))
    other = load_document(changed)
    assert len(other.segments) == len(doc.segments)
    doc.segments[:] = other.segments
    doc.data = other.data
    again = comp.run(None, conv, doc=doc)
    assert _same(again, Compactor(keep_recent=0).compact(changed))
    assert not _same(again, first)


def test_a_compactor_keeps_no_anchor_working_state_between_calls(django):
    """The anchor's working state is continued (mutated) by the next merge: only a session's own
    conversation keeps it; a Compactor's memo across calls (which may run side by side) holds the
    frozen anchor only, and the next call gives the one-shot result."""
    comp = Compactor()
    comp.compact(django[:20])
    assert comp._anchor_memo is not None and comp._anchor_memo[4] is None
    assert _same(comp.compact(django[:30]), Compactor().compact(django[:30]))
    session = Session(comp)
    session.append(django[:10])
    session.compact()
    assert session.conversation._policy_anchor_cache[4] is not None  # the session's own, continued next turn
    session.append(django[10:14])
    assert _same(session.compact(), Compactor().compact(django[:14]))


def test_session_loads_the_literal_engine_at_once():
    # a session scans its first texts with the literal engine (hyperscan or Aho-Corasick when
    # installed), not with str.find until 64 K characters have gone by: the same lines, less work
    from compactor.engine.matchers import _plan

    session = Session()
    for role in ("system", "user", "assistant", "tool"):
        scanner = _plan(session.compactor.detector.rules, role, None)[2]
        assert scanner._python_until == 0
        if scanner.engine == "hyperscan":
            assert scanner._db is not None
        elif scanner.engine == "ahocorasick":
            assert scanner._ac is not None
    session.append({"role": "user", "content": "Traceback (most recent call last):\n  File \"a.py\", line 3"})
    assert _same(session.compact(), Compactor(collapse_batch=10).compact(list(session.messages)))


def test_a_turn_keeps_the_level1_outcomes_whose_collapse_did_not_move():
    """Each turn re-reads Level 1 only where a collapse decision moved: every other segment keeps
    its outcome object (so the stages after it find nothing changed there)."""
    msgs = [{"role": "user", "content": "fix the failing test"}]
    for i in range(12):
        msgs.append({"role": "assistant", "content": f"step {i}",
                     "tool_calls": [{"id": f"c{i}", "type": "function",
                                     "function": {"name": "bash", "arguments": '{"command": "ls -la"}'}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}",
                     "content": "\n".join(f"-rw-r--r-- 1 u u {100 + j} Jan 1 file{i}_{j}.txt" for j in range(40))})
    session = compactor.Session(compactor.Compactor(keep_recent=3))
    session.append(msgs[:-2])
    session.compact()
    conv = session.conversation
    before = dict(conv.level1_memo.outcomes)
    session.append(msgs[-2:])
    result = session.compact()
    after = conv.level1_memo.outcomes
    idx = conv.segment_index
    collapsed = [s.id for s in idx.results if after[s.id].changed and not before[s.id].changed]
    assert len(collapsed) == 1  # the output that left the recent window
    for sid, o in before.items():
        assert (o is after[sid]) == (sid not in collapsed), sid
    log = conv.outcome_log
    assert log.starts[-1] == idx.ids.index(collapsed[0])
    fresh = compactor.Compactor(keep_recent=3).compact(msgs)
    assert result.messages == fresh.messages


def _unique_reference(phs, drop):
    want, seen = [], set()
    for p in phs:
        if (p.id, p.segment_id) not in seen and p.segment_id not in drop:
            want.append(p)
        seen.add((p.id, p.segment_id))
    return want


@given(st.lists(st.tuples(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 4)), max_size=12),
                          st.sampled_from(["grow", "same", "insert", "replace"]), st.sets(st.integers(0, 4), max_size=2)),
                min_size=1, max_size=8), st.booleans())
def test_the_report_lists_each_placeholder_once_in_order(turns, twice):
    """The report's placeholders, turn after turn of one conversation (its list grown, the same,
    with some put in before the end, or rebuilt, and the dropped segments changed): each (id,
    segment) once, the first in order, none of a dropped segment; the same placeholder object
    met twice is listed once."""
    from types import SimpleNamespace

    from compactor.models import Placeholder
    from compactor.pipeline import _unique_placeholders

    conv = SimpleNamespace(placeholder_memo=None)
    phs: list = []
    for k, (items, how, dropped) in enumerate(turns):
        new = [Placeholder(id=f"c-{i}", rule_id="r", summary=f"{k}/{j}", sha256="0" * 64, segment_id=f"m{s}",
                           tokens_before=2, tokens_after=1) for j, (i, s) in enumerate(items)]
        if how == "grow":
            phs = phs + new
        elif how == "insert":
            phs = phs[: len(phs) // 2] + new + phs[len(phs) // 2:]
        elif how == "replace":
            phs = new
        if twice and phs:
            phs = phs + [phs[0]]
        drop = {f"m{s}" for s in dropped}
        got = _unique_placeholders(phs, drop, conv)
        want = _unique_reference(phs, drop)
        assert len(got) == len(want) and all(a is b for a, b in zip(got, want)), (k, how)
        assert got is not phs
