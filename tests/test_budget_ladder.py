"""The budget ladder's steps, each alone, and the contract they make together.

- ``fold`` folds from the oldest end a batch at a time and stops at the first batch that fits;
- ``shorten`` fits by shortening the anchor once folding alone cannot;
- ``fill`` puts back, by priority, what the folded turns held, and never goes over;
- ``longest_prefix`` / ``fold_batches`` are the small pure pieces;
- together: a run whose Level 1 output is over the budget comes back at 85-100% of it (or at its
  floor), deterministically, and a Session fits each time it compacts.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import compactor
from compactor import BudgetError, Compactor, load_document
from compactor.budget import steps
from compactor.budget.escalate import Unit, _Escalation, full_anchor
from compactor.pipeline import Conversation
from test_budget_contract import TRACE, corpus_trajectories, reread_tokens, session

COUNT = compactor.get_counter().count


def long_session(turns: int = 30, errors=(3, 9, 15), listing: int = 40) -> list[dict]:
    """The contract's synthetic session with the agent's reasoning written out at every step
    (prose Level 1 never shortens: folding it is what saves tokens)."""
    msgs = session(turns, list(errors), None, listing=listing)
    for i, m in enumerate(msgs):
        if m["role"] == "assistant" and m.get("tool_calls"):
            m["content"] += " " + " ".join(
                f"Looking at handler {i}.{j}: the pool is acquired in one place and released in another, so "
                f"the count drifts when request {j} raises before the release." for j in range(8))
    return msgs


def escalation(comp: Compactor, msgs, budget: int):
    """An escalation on the Level 1 state of ``msgs`` (what escalate() starts from)."""
    state = comp.run_state(msgs, Conversation(comp))
    return _Escalation(comp, state, full_anchor(comp, state), budget), state


def l1_written(comp: Compactor, msgs) -> int:
    esc, _ = escalation(comp, msgs, 10**9)
    return esc.written(set(), None)


# ------------------------------------------------------------------ the small pieces


def _unit(i: int, pinned: bool = False) -> Unit:
    return Unit(f"s:{i}", [f"m{i}"], [f"s{i}"], pinned, "system prompt" if pinned else "")


def test_fold_batches_take_free_units_oldest_first_and_leave_the_recent_ones():
    units = [_unit(0, True), *[_unit(i) for i in range(1, 8)], _unit(8, True)]
    got = steps.fold_batches(units, 3, keep_recent=2)
    assert [[u.key for u in b] for b in got] == [["s:1", "s:2", "s:3"], ["s:4", "s:5"]]
    assert [[u.key for u in b] for b in steps.fold_batches(units, 1)] == [[f"s:{i}"] for i in range(1, 8)]
    assert steps.fold_batches(units, 2, keep_recent=7) == []


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 50), max_size=30), budget=st.integers(0, 400))
def test_longest_prefix_is_the_longest_that_fits(sizes, budget):
    n, measured = steps.longest_prefix(sizes, sum, budget)
    assert sum(sizes[:n]) <= budget or n == 0
    assert n == len(sizes) or sum(sizes[: n + 1]) > budget
    assert len(measured) <= len(sizes).bit_length() + 1  # a binary search, not a scan


# ------------------------------------------------------------------ fold


def test_fold_stops_at_the_first_batch_that_fits(tmp_path):
    comp = Compactor(store=str(tmp_path / "s"))
    msgs = long_session()
    l1 = l1_written(comp, msgs)
    budget = int(l1 * 0.8)
    esc, _ = escalation(comp, msgs, budget)
    fit = steps.fold(esc, budget, keep_recent=6, batch=1)
    assert fit is not None and fit.level == 2 and fit.total <= budget
    assert esc.written(fit.dropped, fit.cand[0]) == fit.total
    batches = steps.fold_batches(esc.units, 1, 6)
    folded = [b for b in batches if all(sid in fit.dropped for u in b for sid in u.ids)]
    # an oldest-first prefix of the batches, and nothing else
    assert folded == batches[: len(folded)]
    assert fit.dropped == {sid for b in folded for u in b for sid in u.ids}
    # one batch fewer does not fit: it stopped as soon as it fitted
    fewer = {sid for b in folded[:-1] for u in b for sid in u.ids}
    if fewer:
        esc2, _ = escalation(comp, msgs, budget)
        assert esc2.written(fewer, esc2.render(fewer, 2, None)[0]) > budget
    # and it did not fold everything it could (the point of stepping down gradually)
    assert len(folded) < len(batches)


def test_fold_in_batches_folds_whole_batches(tmp_path):
    comp = Compactor(store=str(tmp_path / "s"))
    msgs = long_session()
    budget = int(l1_written(comp, msgs) * 0.8)
    esc, _ = escalation(comp, msgs, budget)
    fit = steps.fold(esc, budget, keep_recent=6, batch=4)
    assert fit is not None and fit.total <= budget
    units = [u for b in steps.fold_batches(esc.units, 4, 6) for u in b]
    n = sum(1 for u in units if all(sid in fit.dropped for sid in u.ids))
    assert n % 4 == 0 or n == len(units)


def test_fold_gives_up_when_the_recent_turns_alone_are_over(tmp_path):
    comp = Compactor(store=str(tmp_path / "s"))
    msgs = long_session()
    esc, _ = escalation(comp, msgs, 200)
    assert steps.fold(esc, 200, keep_recent=6, batch=1) is None


# ------------------------------------------------------------------ shorten


def test_shorten_fits_by_shortening_the_anchor_where_folding_cannot(tmp_path):
    comp = Compactor(store=str(tmp_path / "s"))
    msgs = long_session()
    esc, _ = escalation(comp, msgs, 10**9)
    everything = esc.level2_drop()
    whole = esc.written(everything, esc.render(everything, 2, None)[0])
    budget = int(whole * 0.85)
    esc, _ = escalation(comp, msgs, budget)
    assert steps.fold(esc, budget, keep_recent=6, batch=1) is None
    fit = steps.shorten(esc, budget, esc.level2_drop())
    assert fit is not None and fit.level == 3 and fit.total <= budget
    assert fit.dropped >= everything


# ------------------------------------------------------------------ fill


def test_fill_puts_back_folded_evidence_by_priority_and_never_goes_over(tmp_path):
    comp = Compactor(store=str(tmp_path / "s"))
    msgs = long_session(listing=60)
    msgs[1]["content"] += " Keep the retry limit at 3."
    l1 = l1_written(comp, msgs)
    budget = int(l1 * 0.75)
    esc, _ = escalation(comp, msgs, budget)
    fit = steps.fold(esc, budget, keep_recent=6, batch=4)  # a batch: room is left to fill
    assert fit is not None
    got = steps.fill(esc, fit, budget)
    assert got.total <= budget and got.total > fit.total
    assert esc.written(got.dropped, got.cand[0]) == got.total
    added = got.cand[0][len(fit.cand[0].rstrip("\n")):]
    # what the ladder ranks highest comes first: folded evidence before folded outputs
    labels = [it.label for it in esc.filled]
    if "folded output" in labels and "folded evidence" in labels:
        assert labels.index("folded evidence") < labels.index("folded output")
    # nothing is put back that the output already shows
    for it in esc.filled:
        if it.label != "folded output":
            assert it.text not in fit.cand[0]
    assert added.strip()
    # no room: nothing changes
    same = steps.fill(esc, fit, fit.total)
    assert same is fit


def test_fill_items_rank_the_live_error_first_then_folded_evidence_then_outputs(tmp_path):
    comp = Compactor(store=str(tmp_path / "s"))
    msgs = session(20, [3, 9, 15], None)
    esc, state = escalation(comp, msgs, 10**9)
    folded = {s.id for s in state.segments if s.step <= 12 and s.step >= 1}
    items = steps.fill_items(esc, folded)
    pr = [it.priority for it in items]
    kinds = [it.label for it in items]
    assert "live error header" in kinds and "folded evidence" in kinds and "folded output" in kinds
    assert kinds.index("live error header") < kinds.index("folded evidence") < kinds.index("folded output")
    assert pr[kinds.index("folded output")] == 6
    # every evidence line of the folded failures is offered verbatim
    texts = {it.text for it in items}
    for ln in TRACE.split("\n"):
        assert ln in texts or any(ln in t for t in texts), ln


def test_fill_offers_errors_the_user_pasted_and_their_frames(tmp_path):
    comp = Compactor(store=str(tmp_path / "s"))
    msgs = session(12, [], None)
    pasted = ("I ran it myself and got this:\n\nTraceback (most recent call last):\n"
              '  File "/usr/lib/python3/site-packages/requests/adapters.py", line 519, in send\n'
              "    raise ConnectionError(e, request=request)\n"
              "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='api.example.org', port=443)")
    msgs.insert(4, {"role": "user", "content": pasted})
    esc, state = escalation(comp, msgs, 10**9)
    user = next(s for s in state.segments if s.text == pasted)
    texts = [it.text for it in steps.folded_evidence(esc, {user.id})]
    assert any("adapters.py\", line 519" in t for t in texts), texts
    assert any("requests.exceptions.ConnectionError" in t for t in texts), texts


# ------------------------------------------------------------------ the contract


def test_a_run_over_the_budget_uses_it(tmp_path):
    """The synthetic session at budgets that need more than Level 1: 85-100% of the budget."""
    comp = Compactor(store=str(tmp_path / "s"))
    msgs = long_session(40, (3, 9, 15, 30), listing=60)
    l1 = l1_written(comp, msgs)
    for frac in (0.9, 0.7, 0.5, 0.3, 0.2, 0.1):
        budget = int(l1 * frac)
        try:
            res = comp.compact(msgs, budget=budget)
        except BudgetError as exc:
            assert exc.floor > budget
            continue
        got = reread_tokens(res)
        assert 0.85 * budget <= got <= budget, (frac, got, budget, res.report.stages)


@pytest.mark.parametrize("frac", [0.25, 0.15, 0.10, 0.05])
def test_corpus_runs_over_the_budget_come_back_at_85_to_100_percent_or_the_floor(corpus, frac, tmp_path):
    comp = Compactor(store=str(tmp_path / "store"))
    low = []
    for path in corpus_trajectories(corpus):
        doc = load_document(path)
        before = sum(COUNT(s.text) for s in doc.segments)
        budget = max(1, math.ceil(before * frac))
        if l1_written(comp, str(path)) <= budget:
            continue
        try:
            res = comp.compact(str(path), budget=budget)
        except BudgetError as exc:
            assert exc.floor > budget
            continue
        got = reread_tokens(res)
        assert got <= budget
        if got < 0.85 * budget:
            low.append((path.name, got, budget))
    # every run with a budget of at least 1,000 tokens is held to the goal; below that, what is
    # left can be smaller than the one item not yet put back (OpenHands writes the summary twice:
    # runtime-trajs-basic at 25% has 286 tokens, 67 a copy left, and a 72-token output to put back)
    assert all(budget < 1000 for _, got, budget in low), low
    assert len(low) <= 1, low


def test_the_ladder_is_deterministic(tmp_path):
    msgs = long_session(40, (3, 9, 15, 30), listing=60)
    comp = Compactor(store=str(tmp_path / "a"))
    budget = int(l1_written(comp, msgs) * 0.4)
    a = comp.compact(msgs, budget=budget)
    b = Compactor(store=str(tmp_path / "b")).compact(msgs, budget=budget)
    assert json.dumps(a.to_json_dict(), sort_keys=True) == json.dumps(b.to_json_dict(), sort_keys=True)


def test_every_reference_the_fill_writes_expands_to_its_original(tmp_path):
    comp = Compactor(store=str(tmp_path / "s"))
    msgs = long_session(40, (3, 9, 15, 30), listing=60)
    originals = {s.text for s in load_document(msgs).segments}
    res = comp.compact(msgs, budget=int(l1_written(comp, msgs) * 0.5))
    text = json.dumps(res.messages, ensure_ascii=False)
    import re

    refs = set(re.findall(r"c-[0-9a-f]{16}", text))
    assert refs
    for ref in refs:
        back = comp.expand(ref)
        assert back in originals or back.startswith("--- "), (ref, back[:100])


def test_session_fits_every_turn_and_each_refit_steps_down_gradually(tmp_path):
    """The documented Session behaviour: over the budget it compacts to the low-water mark with
    the same ladder (fold from the oldest end, fill), then appends untouched until the budget
    is exceeded again."""
    msgs = long_session(60, (5, 20, 33, 47), listing=30)
    budget = 3000
    conv = compactor.Session(low_water=0.6)
    prev = None
    refits = 0
    for m in msgs:
        conv.append(m)
        r = conv.compact(budget=budget)
        assert r.report.tokens_after <= budget
        cur = json.dumps(r.messages, ensure_ascii=False)[:-1]
        if prev is not None and not cur.startswith(prev) and r.report.level >= 2:
            refits += 1
            sent = r.report.tokens_sent
            # a refit lands at 85-100% of the low-water mark (or a higher mark when the evidence
            # does not fit that low), never far below it
            assert 0.85 * 0.6 * budget <= sent <= budget, (sent, r.report.stages)
            assert any(s.startswith(("level2:", "level3:", "ladder:")) for s in r.report.stages)
        prev = cur
    assert refits >= 2


def test_folded_evidence_keeps_constraint_and_dead_end_sentences_in_their_order(tmp_path):
    comp = Compactor(store=str(tmp_path / "s"))
    msgs = session(12, [4], None)
    msgs.insert(3, {"role": "user", "content": "One more thing: please don't touch the migrations folder."})
    msgs.insert(6, {"role": "assistant", "content": "Raising the timeout to 60s did not work: the pool still runs dry."})
    esc, state = escalation(comp, msgs, 10**9)
    ids = {s.id for s in state.segments if 1 <= s.step}
    items = steps.folded_evidence(esc, ids)
    labels = [it.label for it in items]
    texts = [it.text for it in items]
    assert any("don't touch the migrations folder" in t for t in texts), texts
    assert any("Raising the timeout to 60s did not work" in t for t in texts), texts
    # constraints first, then what was tried (failed approaches rank above older error lines)
    assert labels.index("folded constraint") < labels.index("folded dead end") < labels.index("folded evidence")
    assert len(texts) == len(set(texts))  # each once


def test_an_edit_that_did_not_apply_is_a_failed_attempt_the_fill_offers(tmp_path):
    """An editor's "No replacement was performed" carries no error keyword and no exit code; the
    protect rule error.edit-not-applied makes it evidence, so a folded edit that did not apply
    is offered back as a failed call with its arguments, and its message verbatim."""
    comp = Compactor(store=str(tmp_path / "s"))
    msgs = session(10, [], None)
    args = json.dumps({"command": "str_replace", "path": "/testbed/app/pool.py",
                       "old_str": "def acquire(self):", "new_str": "def acquire(self, timeout=30):"})
    msgs[4:4] = [
        {"role": "assistant", "content": "Adding a timeout to acquire.", "tool_calls": [
            {"id": "e1", "type": "function", "function": {"name": "str_replace_editor", "arguments": args}}]},
        {"role": "tool", "tool_call_id": "e1", "content": "No replacement was performed, old_str `def acquire(self):` "
                                                         "did not appear verbatim in /testbed/app/pool.py."},
    ]
    esc, state = escalation(comp, msgs, 10**9)
    ids = {s.id for s in state.segments if s.call_id == "e1"}
    items = steps.folded_evidence(esc, ids)
    failed = [it.text for it in items if it.label == "failed call"]
    assert failed and "/testbed/app/pool.py" in failed[0] and "def acquire(self, timeout=30):" in failed[0], items
    assert any(it.label == "folded evidence" and it.text.startswith("No replacement was performed") for it in items)


def test_a_short_system_prompt_comes_back_before_the_history_details():
    """The agent's standing instructions outrank failed approaches and older evidence when they
    are short: at budgets where the ladder runs, the demo keeps its system message first."""
    import json as _json
    from pathlib import Path as _Path

    import compactor as _c

    demo = _json.loads((_Path(__file__).resolve().parents[1] / "fixtures/demo/debug-session.openai.json").read_text())
    assert demo[0]["role"] == "system"
    for budget in (500, 420, 300):
        res = _c.compact(demo, format="openai-chat", budget=budget)
        assert res.report.tokens_after <= budget
        assert res.messages[0]["role"] == "system" and res.messages[0]["content"] == demo[0]["content"], budget


# ------------------------------------------------------------------ making room for the evidence


def test_fold_more_folds_in_one_step_as_many_batches_as_the_room_asked_for_needs(tmp_path):
    comp = Compactor(store=str(tmp_path / "s"))
    msgs = long_session(40, (3, 9, 15, 30), listing=60)
    budget = int(l1_written(comp, msgs) * 0.8)
    esc, _ = escalation(comp, msgs, budget)
    fit = steps.fold(esc, budget, keep_recent=6, batch=2)
    assert fit is not None and fit.level == 2
    one = steps.fold_more(esc, fit, budget, keep_recent=6, batch=2)
    assert one is not None
    units = lambda f: sum(1 for u in esc.units if not u.pinned and all(i in f.dropped for i in u.ids))  # noqa: E731
    assert units(one) == units(fit) + 2  # no room asked for: one batch
    need = 3000
    more = steps.fold_more(esc, fit, budget, keep_recent=6, batch=2, need=need)
    assert more is not None and more.total <= budget
    freed = sum(esc.weights[i] for i in more.dropped - fit.dropped)
    assert freed >= need  # enough turns folded for the room asked for ...
    last = [u for u in esc.units if not u.pinned and all(i in more.dropped for i in u.ids)
            and not all(i in fit.dropped for i in u.ids)][-2:]
    assert freed - sum(esc.weights[i] for u in last for i in u.ids) < need  # ... and one batch less would not do


def edited_session(turns: int = 40) -> list[dict]:
    """The long session with an edit after every command: a handler file changed per turn, with
    the decision behind it. What the anchor records of them (each change, each file touched) is
    what shortening it drops first, so with every turn folded the anchor is most of the output."""
    out: list[dict] = []
    for m in long_session(turns, (3, 9, 15, 30), listing=60):
        out.append(m)
        if m["role"] != "tool":
            continue
        i = int(m["tool_call_id"][1:])
        path = f"/repo/src/app/handlers/h{i}.py"
        args = json.dumps({"command": "str_replace", "path": path,
                           "old_str": f"    conn = pool.acquire()\n    return handle_{i}(conn, r)",
                           "new_str": f"    with pool.acquire() as conn:\n        return handle_{i}(conn, r)"})
        out.append({"role": "assistant", "content": f"Decided to wrap handler {i} in a context manager because its "
                                                    f"connection leaks when handle_{i} raises.",
                    "tool_calls": [{"id": f"e{i}", "type": "function",
                                    "function": {"name": "str_replace_editor", "arguments": args}}]})
        out.append({"role": "tool", "tool_call_id": f"e{i}",
                    "content": f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet:\n"
                               f"    12\t    with pool.acquire() as conn:\n    13\t        return handle_{i}(conn, r)\n"
                               "Review the changes and make sure they are as expected."})
    return out


def every_turn_folded(tmp_path):
    """An escalation of the edited session at 20% of its Level 1 size, and every free turn.

    The tests on it are about the room a shortened anchor leaves: they mean something only while
    the anchor, every turn folded and nothing reserved, takes more than two thirds of the budget
    (else nothing has to be shortened to leave a third free). That premise is checked here, so a
    smaller anchor fails the fixture instead of voiding the tests."""
    comp = Compactor(store=str(tmp_path / "s"))
    msgs = edited_session()
    budget = int(l1_written(comp, msgs) * 0.2)
    esc, _ = escalation(comp, msgs, budget)
    dropped = {sid for u in esc.units if not u.pinned for sid in u.ids}
    whole = _Escalation(esc.comp, esc.state, esc.full, budget).try_fit(dropped, budget)  # (esc left as it was)
    assert whole is not None and whole[1] > budget - budget // 3, (whole and whole[1], budget)
    return esc, budget, dropped


def test_a_shortened_anchor_leaves_the_room_reserved_for_the_fill(tmp_path):
    esc, budget, dropped = every_turn_folded(tmp_path)
    whole = esc.try_fit(dropped, budget)
    part = esc.try_fit(dropped, budget, reserve=budget // 3)
    assert whole is not None and part is not None
    assert part[1] <= budget - budget // 3 < whole[1]


def test_fill_offers_the_folded_turns_evidence_before_the_anchors_other_items(tmp_path):
    """The anchor's other items (priority 6) never take the room of a failed call or a folded
    error line (priority 5): the offer is in priority order, the folded outputs whole last."""
    comp = Compactor(store=str(tmp_path / "s"))
    msgs = long_session(30, (3, 9, 15), listing=40)
    esc, state = escalation(comp, msgs, 10**9)
    folded = {s.id for s in state.segments if 1 <= s.step <= 20}
    items = steps.fill_items(esc, folded)
    pr = [it.priority for it in items]
    assert 6 in pr and 5 in pr
    assert pr == sorted(pr)
    outputs = [i for i, it in enumerate(items) if it.label == "folded output"]
    assert outputs and outputs == list(range(len(items) - len(outputs), len(items)))


def test_folded_user_lines_that_may_bind_come_back_whole_and_changes_of_course_are_offered(tmp_path):
    comp = Compactor(store=str(tmp_path / "s"))
    msgs = session(12, [4], None)
    msgs.insert(3, {"role": "user", "content": "Two rules for the cleanup:\n"
                                               "**KEEP PUBLIC**: Keep the exported helpers other packages call.\n"
                                               "* The CLI module is a thin wrapper (argument parsing only).\n"
                                               "Here is the list from the linter."})
    msgs.insert(6, {"role": "assistant", "content": "The sed command did the wrong thing. Let me use a Python script "
                                                    "instead of sed for the multi-line edit. Now reading the file."})
    esc, state = escalation(comp, msgs, 10**9)
    ids = {s.id for s in state.segments if 1 <= s.step}
    items = steps.folded_evidence(esc, ids)
    cons = [it.text for it in items if it.label == "folded constraint"]
    dead = [it.text for it in items if it.label == "folded dead end"]
    # verbatim, as the user wrote the line (its bold label, its list marker)
    assert "- **KEEP PUBLIC**: Keep the exported helpers other packages call." in cons, cons
    assert "- * The CLI module is a thin wrapper (argument parsing only)." in cons, cons
    assert not any("Here is the list" in t or "Two rules" in t for t in cons), cons
    assert "- Let me use a Python script instead of sed for the multi-line edit." in dead, dead
    assert not any("Now reading the file" in t or "did the wrong thing" in t for t in dead), dead


def test_a_real_run_at_its_budget_leaves_no_evidence_of_the_folded_turns_behind(tmp_path):
    """A real run whose failed calls and failed attempts were crowded out by the recent turns
    whole (the fill left 15 of them behind at 15%): more turns fold until they fit."""
    from conftest import CORPUS

    path = CORPUS.parent / "trajectories-extra" / "claude-code-chat-json" / "templar.lint-fix.chat.json"
    if not path.exists():
        pytest.skip("run not in the shared data")
    comp = Compactor(store=str(tmp_path / "s"))
    before = sum(COUNT(s.text) for s in load_document(str(path)).segments)
    budget = math.ceil(before * 0.15)
    esc, _ = escalation(comp, str(path), budget)
    esc.run()
    assert esc.left_behind == [], [(it.label, it.text[:60]) for it in esc.left_behind]
    assert [it for it in esc.filled if it.label == "failed call"]
    assert any(s.startswith("fill:") for s in esc.state.stages)


def test_with_every_turn_folded_fold_more_makes_room_by_shortening_the_anchor(tmp_path):
    esc, budget, dropped = every_turn_folded(tmp_path)
    got = esc.try_fit(dropped, budget)
    assert got is not None
    fit = steps.Fit(dropped, got[0], 3, esc.written(dropped, got[0][0]), 1)
    more = steps.fold_more(esc, fit, budget, keep_recent=6, batch=1, need=budget // 4)
    assert more is not None and more.dropped == dropped and more.reserve == budget // 4
    assert more.total <= budget - budget // 4 < fit.total
    # nothing more to fold and no more room asked for: nothing to do
    assert steps.fold_more(esc, more, budget, keep_recent=6, batch=1, need=0) is None


def test_the_room_reserved_for_the_fill_holds_when_the_self_check_back_fills(tmp_path):
    """The self-check's back-fill comes on top of the shortened anchor: the room asked for is
    held on the candidate as written, not only on the anchor (in this run the back-fill took
    about 400 tokens of the room reserved, and the fill left a folded dead end behind)."""
    from conftest import CORPUS

    path = CORPUS.parent / "trajectories-extra" / "claude-code-chat-json" / "templar.lint-fix.chat.json"
    if not path.exists():
        pytest.skip("run not in the shared data")
    comp = Compactor(store=str(tmp_path / "s"))
    budget = math.ceil(sum(COUNT(s.text) for s in load_document(str(path)).segments) * 0.15)
    esc, _ = escalation(comp, str(path), budget)
    dropped = {sid for u in esc.units if not u.pinned for sid in u.ids}
    whole = esc.try_fit(dropped, budget)
    assert whole is not None and whole[0][2].missing  # the premise: the self-check back-fills
    for reserve in (budget // 5, budget // 4, budget // 3):
        part = esc.try_fit(dropped, budget, reserve=reserve)
        assert part is not None and part[1] <= budget - reserve < whole[1], (reserve, part and part[1], whole[1])
