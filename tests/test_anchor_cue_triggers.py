"""The cues' trigger prefilter gives the same answer through the one-pass automaton as through
one substring search per trigger (the answer it replaced), on texts built from the triggers
themselves (overlapping, nested, English and Chinese) and on real prose."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from compactor.anchor import cues as C

TRIGGERS = sorted({t for c in C.CUES.values() for t in c.triggers})
pieces = st.one_of(st.sampled_from(TRIGGERS), st.sampled_from([" ", "\n", "x", "n", "t", "不", "用", "'", "."]),
                   st.text(max_size=6))


def _by_search(cue: C.Cue, low: str) -> bool:
    return any(t in low for t in cue.triggers)


@settings(max_examples=500, deadline=None)
@given(parts=st.lists(pieces, max_size=40), pad=st.sampled_from([0, 600]))
def test_possible_equals_one_search_per_trigger(parts, pad):
    low = ("." * pad + "".join(parts)).lower()  # (the automaton answers texts of 128 characters or more)
    for cue in C.CUES.values():
        assert cue.possible(low) == _by_search(cue, low)
        assert cue.possible(low[:len(low) // 2]) == _by_search(cue, low[:len(low) // 2])


def test_the_automaton_is_used_when_installed():
    pytest.importorskip("ahocorasick_rs")
    low = "i decided to keep the old parser because the new one still fails; 不要用 eval. " * 8
    assert {n for n, c in C.CUES.items() if c.possible(low)} == {n for n, c in C.CUES.items() if _by_search(c, low)}
    assert C._automaton() is not None
    assert all(c._set is not None for c in C.CUES.values() if all(c.triggers))


def test_a_cue_of_its_own_triggers_is_searched_as_before():
    cue = C.Cue(C.DECISION, ("zzqq-not-a-trigger-of-any-cue",))
    assert not cue.possible("decided")
    assert cue.possible("xx zzqq-not-a-trigger-of-any-cue yy")
