"""Lists over a document's segments that several stages read every compaction (the tool results,
their positions, segment ids), kept by a conversation and extended as its document grows.

A session's document keeps its segment objects from turn to turn and only appends: the index
checks that by identity (the segments it has seen are the first ones of the document, the same
objects) and reads only the new segments; anything else builds it again. The lists are the same
as a fresh pass over the segments would give.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import compress, count

_GENERATIONS = count(1)

from .models import Segment, SegmentKind

__all__ = ["OutcomeLog", "SegmentIndex", "changed", "differing", "segment_index"]

PROBE = 64  # ``differing`` scans the last positions one by one, the ones before them in one comparison


def changed(old: Sequence, new: Sequence) -> list[int]:
    """Positions ``i < min(len(old), len(new))`` where ``old[i]`` is not ``new[i]`` (by identity)."""
    return list(compress(range(min(len(old), len(new))), map(operator.is_not, old, new)))


def differing(old: list, new: list) -> list[int]:
    """:func:`changed` for lists whose items mean the same when they compare equal (texts, spans,
    Level 1 outcomes: what is read of them depends on their content only). A conversation's lists
    change near their end, if at all: the items before the last :data:`PROBE` positions are
    compared first with one list ``==``, which takes an item as equal to itself without calling
    its ``__eq__`` (a C loop, several times faster than an identity test per item); when they are
    all equal only the last positions are looked at. Otherwise the result is :func:`changed`'s."""
    n = min(len(old), len(new))
    cut = n - PROBE
    if cut > PROBE and (old if len(old) == cut else old[:cut]) == (new if len(new) == cut else new[:cut]):
        return [cut + i for i in changed(old[cut:n], new[cut:n])]
    return changed(old, new)


class SegmentIndex:
    def __init__(self) -> None:
        self.segs: list[Segment] = []
        self.ids: list[str] = []
        self.texts: list[str] = []  # each segment's original text
        self.by_id: dict[str, Segment] = {}  # the last segment of each id, as ``{s.id: s for s in segs}``
        self.rebinds = 0  # how often an id already in ``by_id`` was given another segment
        self.results: list[Segment] = []  # every tool result, in order
        self.result_pos: dict[str, int] = {}  # tool result id -> its first position in ``results``
        self.live: list[Segment] = []  # tool results that are not harness text (``meta``)
        self.live_ids: list[str] = []
        self._checked: Sequence[Segment] | None = None  # the list last checked, while it is trusted
        self.generation = next(_GENERATIONS)  # a new number whenever the lists are built again

    def mark(self) -> tuple[int, int]:
        """Names the segments indexed now: while :meth:`extends` says so, they are the first
        segments of the list this index was last updated with (the same objects, in order)."""
        return (self.generation, len(self.segs))

    def extends(self, mark: tuple[int, int] | None) -> bool:
        """Are the segments ``mark`` named (see :meth:`mark`) the first ones of the list this index
        was last updated with? Every update checks that the list only grew (else it starts a new
        generation), so the answer takes no pass over the segments."""
        return mark is not None and mark[0] == self.generation and mark[1] <= len(self.segs)

    def forget(self) -> None:
        """Check the next list in full (a new compaction: the segments may have changed since)."""
        self._checked = None

    def update(self, segs: Sequence[Segment]) -> "SegmentIndex":
        if segs is self._checked and len(segs) == len(self.segs):
            return self  # the list checked earlier in this compaction (its stages do not mutate it)
        old = self.segs
        n = len(old)
        if not (n <= len(segs) and all(map(operator.is_, old, segs))):
            self.__init__()
            n = 0
        self._checked = segs
        if n == len(segs):
            return self
        by_id, results, pos, live, live_ids = self.by_id, self.results, self.result_pos, self.live, self.live_ids
        ids, texts = self.ids, self.texts
        for s in segs[n:]:
            ids.append(s.id)
            texts.append(s.text)
            if s.id in by_id:
                self.rebinds += 1
            by_id[s.id] = s
            if s.kind == SegmentKind.tool_result:
                pos.setdefault(s.id, len(results))
                results.append(s)
                if not s.meta:
                    live.append(s)
                    live_ids.append(s.id)
        self.segs = list(segs)
        return self


def segment_index(holder, segs: Sequence[Segment]) -> SegmentIndex:
    """The :class:`SegmentIndex` of ``segs``, kept on ``holder`` (a conversation) when it takes
    one (``holder.segment_index``), or a fresh one."""
    idx = getattr(holder, "segment_index", None) if holder is not None else None
    if idx is None:
        idx = SegmentIndex()
        if holder is not None and hasattr(holder, "segment_index"):
            holder.segment_index = idx
    return idx.update(segs)


class OutcomeLog:
    """A conversation's Level 1 outcomes by segment position, and from which position each Level 1
    run may have given a segment another outcome object (before it, every outcome is the object
    of the run before). Kept by the Level 1 stage, so the stages that remember what they read of
    the outcomes learn what changed without comparing every segment's outcome again.

    A reader keeps :attr:`runs` from when it last read; :meth:`since` gives the first position
    that may have changed since then (``len(segs)`` or more: none), or None when that is not known
    (another segment list, an id naming two segments): then it compares as it did before."""

    def __init__(self) -> None:
        self.generation: int | None = None  # the segment index generation of ``outs``
        self.outs: list = []  # outcome per segment position (as ``list(map(outcomes.get, ids))``)
        self.starts: list[int] = []  # per run: the first position whose outcome object may differ
        self.runs = 0

    def record(self, index: "SegmentIndex", outcomes: dict, start: int) -> None:
        """After a Level 1 run over ``index``'s segments: outcomes before ``start`` are the
        objects of the last run (only a fresh run may say 0)."""
        if index.rebinds or self.generation != index.generation or start > len(self.outs):
            start = 0
            self.starts = []
        outs = self.outs
        del outs[start:]
        outs.extend(map(outcomes.get, index.ids[start:]))
        self.generation = index.generation
        self.starts.append(start)
        if len(self.starts) > 4096:  # a reader that many runs behind compares again
            del self.starts[:2048]
        self.runs += 1

    def since(self, runs: int | None, index: "SegmentIndex") -> int | None:
        """The first position whose outcome may have changed since a reader saw ``runs`` runs
        (:attr:`runs` then), or None when not known."""
        if runs is None or index.rebinds or self.generation != index.generation or runs > self.runs \
                or runs <= self.runs - len(self.starts):
            return None
        if runs == self.runs:
            return len(self.outs)
        return min(self.starts[runs - self.runs:])
