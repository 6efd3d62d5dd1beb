"""Small helpers shared by the self-check, the budget stage and the tools above the pipeline (no
anchor extraction here: that is compactor.anchor)."""

from __future__ import annotations


import regex

from ..anchor._text import item_id, shorten
from ..anchor.runmodel import harness_note
from ..models import Anchor, Role, Segment, SegmentKind
from ..normalize import normalize
from ..syntax import is_summary_text
from ..lazyre import lazy_regex

__all__ = ["bf_id", "content_words", "is_request", "last_assistant", "newest_request", "present", "present_squashed", "shorten", "squash",
           "word_set"]

def squash(text: str) -> str:
    return " ".join(normalize(text).split())


def bf_id(prefix: str, *parts: str) -> str:
    """A stable id for a back-filled item (the anchor's own id scheme)."""
    return item_id(prefix, *parts)


def is_request(seg: Segment) -> bool:
    return (seg.role == Role.user and seg.kind == SegmentKind.message and not seg.meta
            and bool(seg.text.strip()) and not is_summary_text(seg.text)
            and not harness_note(seg.text))  # a harness's note in the user's place asks for nothing


def newest_request(segments: list[Segment], anchor: Anchor | None = None) -> Segment | None:
    """The newest human request: the last user message that is not harness text or a summary."""
    for s in reversed(segments):
        if is_request(s):
            return s
    return None


def last_assistant(segments: list[Segment]) -> Segment | None:
    for s in reversed(segments):
        if s.role == Role.assistant and s.kind == SegmentKind.message and s.text.strip():
            return s
    return None


def present(needle: str, haystack_squashed: str, *, prefix: int = 0) -> bool:
    """Is ``needle`` (whitespace-insensitively) in the squashed haystack? ``prefix`` > 0 checks
    only the first ``prefix`` characters of the needle (for texts a renderer may shorten)."""
    return present_squashed(squash(needle), haystack_squashed, prefix=prefix)


PREFIX = 60  # characters of a (possibly shortened) item that must appear in the output


def squashed_needle(n: str, prefix: int = 0) -> str | None:
    """What of a squashed needle must be in the squashed haystack for :func:`present` (its first
    ``prefix`` characters, a trailing ellipsis left out); None: nothing, any haystack has it."""
    if not n:
        return None
    if prefix and len(n) > prefix:
        n = n[:prefix]
    n = n.rstrip("…").rstrip()
    return n or None


def present_squashed(n: str, haystack_squashed: str, *, prefix: int = 0) -> bool:
    """:func:`present` of a needle that is squashed already."""
    k = squashed_needle(n, prefix)
    return k is None or k in haystack_squashed


_WORD = lazy_regex(r"[A-Za-z_][A-Za-z0-9_'-]*[A-Za-z0-9_]|\p{Han}+")
_STOP = frozenset("""
a an and are as at be been but by can could did do does done for from had has have he her his how i if in into is it
its just may me might must my no not now of on once one only or our out over own same she should so some such than
that the their them then there these they this those through to too under until up us very was we were what when where
which while who whom why will with would you your also any all each both more most other few nor off again further
here above below between during before after about against because until being having doing let lets we'll i'll it's
""".split())


def content_words(text: str) -> list[str]:
    out: list[str] = []
    for m in _WORD.finditer(text):
        w = m.group(0)
        if regex.match(r"\p{Han}", w):
            out.extend(w[i:i + 2] for i in range(max(1, len(w) - 1)))
            continue
        w = w.casefold().strip("'-")
        if len(w) >= 3 and w not in _STOP:
            out.append(w)
    return out


def word_set(text: str) -> set[str]:
    s = set(content_words(text))
    # sub-words of identifiers too: 'pool_size' matches 'pool' and 'size'
    for w in list(s):
        for part in regex.split(r"[_.\-/]+", w):
            if len(part) >= 3:
                s.add(part)
    return s
