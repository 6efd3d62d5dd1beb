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
from itertools import compress

from .models import Segment, SegmentKind

__all__ = ["SegmentIndex", "changed", "segment_index"]


def changed(old: Sequence, new: Sequence) -> list[int]:
    """Positions ``i < min(len(old), len(new))`` where ``old[i]`` is not ``new[i]`` (by identity)."""
    return list(compress(range(min(len(old), len(new))), map(operator.is_not, old, new)))


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

    def update(self, segs: Sequence[Segment]) -> "SegmentIndex":
        old = self.segs
        n = len(old)
        if not (n <= len(segs) and all(map(operator.is_, old, segs))):
            self.__init__()
            n = 0
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
