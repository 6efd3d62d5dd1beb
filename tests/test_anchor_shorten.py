"""``shorten`` squashes only the head of a long text: the same result as squashing all of it."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from compactor.anchor._text import shorten, squash


def _reference(text: str, limit: int) -> str:
    t = squash(text)
    if len(t) <= limit:
        return t
    cut = t[: limit - 1]
    sp = cut.rfind(" ")
    if sp > limit * 0.6:
        cut = cut[:sp]
    return cut.rstrip(" ,;:") + "…"


pieces = st.sampled_from(["a", "bc", "word", " ", "  ", "\n", "\t", "\u3000", ",", ";", ":", "é", "x" * 40, " " * 50])


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(pieces, max_size=400), limit=st.sampled_from([1, 10, 80, 120, 160, 200, 300]),
       lead=st.integers(0, 1000))
def test_shorten_equals_squashing_the_whole_text(parts, limit, lead):
    text = " " * lead + "".join(parts)
    assert shorten(text, limit) == _reference(text, limit)


def test_shorten_a_long_task_statement():
    text = "Fix the bug.\n\n" + "The validator accepts a trailing newline.   " * 200
    assert shorten(text, 200) == _reference(text, 200)
    assert len(shorten(text, 200)) <= 200
