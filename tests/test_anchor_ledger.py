"""The fold's fact ledger (``compactor.anchor.ledger.FactLedger``): an anchor fed segment by
segment that holds only the facts its size bound can still show gives, once bounded, exactly the
anchor bound from every fact (items kept, overflow ids and steps, the objective line), and holds
a bounded number of facts however many it is fed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor.anchor import bound_anchor, to_json, to_markdown
from compactor.anchor.build import AnchorFold
from compactor.models import Role, Segment, SegmentKind
from compactor.tokens import _Estimate, get_counter, piecewise

_TIKTOKEN = piecewise(get_counter())
_ESTIMATE = _Estimate().count
_NAMES = ("requests handled", "cache hits", "retries", "p99 latency ms", "queue depth", "workers",
          "open files", "timeout_ms", "pool_size", "bytes written")
_SENTENCE_END = ("", ".", "!", " .")


def _segments(outputs: list[list[tuple[int, int, int]]], users: list[int]) -> list[Segment]:
    """A user request, then per output a shell call and its output: one fact line per
    (name, value, padding) (lines of every length: a short old fact can fit after long new ones)."""
    segs = [Segment(id="m0", index=0, step=1, step_id="s1", role=Role.user, kind=SegmentKind.message,
                    text="Fix the failing check; do not touch the public API of pool.py.")]
    for i, lines in enumerate(outputs, start=1):
        step = i + 1
        cmd = f"python check.py --stats --round {i}"
        segs.append(Segment(id=f"m{i}.c", index=len(segs), step=step, step_id=f"s{step}", role=Role.assistant,
                            kind=SegmentKind.tool_call, text=cmd, call_id=f"c{i}", tool_name="bash", command=cmd))
        text = "\n".join(f"{_NAMES[n % len(_NAMES)]}{' of worker' * pad}: {v}{_SENTENCE_END[pad % 4]}"
                         for n, v, pad in lines)
        failing = i in users
        if failing:
            text += f"\nTraceback (most recent call last):\n  File \"check.py\", line {i}, in main\nKeyError: 'k{i}'"
        segs.append(Segment(id=f"m{i}.r", index=len(segs), step=step, step_id=f"s{step}", role=Role.tool,
                            kind=SegmentKind.tool_result, text=text, call_id=f"c{i}", tool_name="bash", command=cmd,
                            exit_code=1 if failing else 0, is_error=failing))
        if i in users:
            segs.append(Segment(id=f"m{i}.u", index=len(segs), step=step, step_id=f"s{step}", role=Role.user,
                                kind=SegmentKind.message, text=f"Keep the timeout at {i} seconds."))
    return segs


def _both(segs: list[Segment], max_tokens: int, count, lang: str):
    whole = AnchorFold()
    held = AnchorFold(bound=(max_tokens, count, lang))
    for s in segs:
        whole.feed(s)
        held.feed(s)
    a = bound_anchor(whole.freeze(), max_tokens, count, lang=lang)
    b = bound_anchor(held.freeze(), max_tokens, count, lang=lang, facts=held.facts)
    return a, b, held.facts


_LINES = st.lists(st.tuples(st.integers(0, 9), st.integers(0, 10**6), st.integers(0, 12)), min_size=0, max_size=14)


@settings(max_examples=60, deadline=None)
@given(outputs=st.lists(_LINES, min_size=1, max_size=40), users=st.sets(st.integers(1, 40), max_size=6),
       max_tokens=st.sampled_from([1, 40, 90, 200, 500]), counter=st.sampled_from(["tiktoken", "estimate"]),
       lang=st.sampled_from(["en", "zh"]))
def test_the_ledger_bounds_to_the_same_anchor(outputs, users, max_tokens, counter, lang):
    count = _TIKTOKEN if counter == "tiktoken" else _ESTIMATE
    a, b, ledger = _both(_segments(outputs, sorted(users)), max_tokens, count, lang)
    assert to_json(b) == to_json(a)
    assert to_markdown(b, lang) == to_markdown(a, lang)
    assert b.objective_state == a.objective_state
    assert len(ledger) == len({f for f in ledger.ids_newest_first()}) >= len(b.facts_learned)


def test_many_facts_are_held_bounded_and_bound_the_same():
    """Thousands of facts, a few dozen shown: the ledger lets most go (and holds far fewer than it
    saw), the bounded anchor is the one bound from every fact, its overflow names every fact not shown."""
    outputs = [[(n, i * 31 + n, (i * 7 + n) % 13) for n in range(10)] for i in range(1, 800)]
    segs = _segments(outputs, [5, 300, 790])
    a, b, ledger = _both(segs, 2000, _TIKTOKEN, "en")
    assert to_json(b) == to_json(a)
    assert len(ledger) > 4000 and ledger.dropped > 3500
    assert len(ledger.values()) < len(ledger) // 5
    over = {o.section: o for o in b.overflow}["facts_learned"]
    assert over.count + len(b.facts_learned) == len(ledger)
    assert f"{len(ledger)} facts learned (s2–s800)" in b.objective_state


def test_an_old_short_fact_that_fits_is_kept():
    """Long new facts fill the bound until only a few tokens are left; an old short fact still fits
    then: the ledger must not have let it go."""
    long_lines = [[(n, 10**5 + i * 10 + n, 12) for n in range(6)] for i in range(60)]
    outputs = [[(2, 7, 0)]] + long_lines
    kept_old = 0
    for max_tokens in range(300, 420, 7):
        a, b, ledger = _both(_segments(outputs, []), max_tokens, _TIKTOKEN, "en")
        assert to_json(b) == to_json(a), max_tokens
        assert ledger.dropped > 300
        kept_old += any(f.text == "retries: 7" for f in b.facts_learned)
    assert kept_old >= 5  # (the case is reached: the oldest fact shown after newer ones were skipped)


def test_the_guard_names_an_anchor_that_fits_without_facts_let_go():
    from compactor.anchor.ledger import FactLedger, LedgerOverrun

    ledger = FactLedger(100, _TIKTOKEN)
    ledger.check_overflowing(50)  # nothing let go: fitting is fine
    ledger.dropped = 3
    ledger.check_overflowing(101)
    with pytest.raises(LedgerOverrun, match="3 facts"):
        ledger.check_overflowing(100)
