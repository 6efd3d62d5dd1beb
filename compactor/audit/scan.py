"""The self-check's questions about an output that is never held whole.

:func:`~compactor.audit.selfcheck.run_selfcheck` asks its questions of an ``output`` (``has``,
``has_span``, ``has_words``). In memory that is the kept texts (``_Output`` in
:mod:`~compactor.audit.selfcheck`). A reader that writes the output as it goes (the streamed
pipeline) keeps only the normalised texts, spooled, and asks twice: a first run of the check
registers its questions in an :class:`OutputScan` through a :class:`ScannedOutput`, one pass over
the texts answers them all, and a second run reads the answers. The answers are the in-memory
view's (a property test holds them equal).
"""

from __future__ import annotations

from typing import Iterator

from ..models import Span
from .common import PREFIX, content_words, present_squashed, squash, squashed_needle, word_set

__all__ = ["OutputScan", "ScannedOutput"]


class OutputScan:
    """The self-check's questions about the whole output, answered in one pass over its
    normalised texts (as :class:`~compactor.audit.selfcheck._Output` answers them in memory: each
    text on its own, the texts joined by line breaks, and the squashed output)."""

    def __init__(self) -> None:
        self.piece: dict[str, bool] = {}  # in some text
        self.blob: dict[str, bool] = {}  # in the texts joined by "\n" (plus the empty summary)
        self.squashed: dict[str, bool] = {}  # in the squashed output
        self.lower: dict[str, bool] = {}  # in the squashed output, casefolded
        self.words: dict[str, bool] = {}  # a word of some text

    def empty(self) -> bool:
        return not (self.piece or self.blob or self.squashed or self.lower or self.words)

    def scan(self, texts: Iterator[str]) -> None:
        piece = [t for t in self.piece if not self.piece[t]]
        blob = [t for t in self.blob if not self.blob[t]]
        sq = [t for t in self.squashed if not self.squashed[t]]
        low = [t for t in self.lower if not self.lower[t]]
        words = set(w for w in self.words if not self.words[w])
        blob_keep = max((len(t) for t in blob), default=1) - 1
        sq_keep = max((len(t) for t in (*sq, *low)), default=1) - 1
        blob_tail = ""
        sq_tail = ""
        low_tail = ""
        first_sq = True
        for text in texts:
            if piece:
                for t in [t for t in piece if t in text]:
                    self.piece[t] = True
                    piece.remove(t)
            if blob:
                window = blob_tail + text + "\n"
                for t in [t for t in blob if t in window]:
                    self.blob[t] = True
                    blob.remove(t)
                blob_tail = window[-blob_keep:] if blob_keep else ""
            if sq or low:
                q = " ".join(text.split())
                if q:
                    add = q if first_sq else " " + q
                    first_sq = False
                    if sq:
                        window = sq_tail + add
                        for t in [t for t in sq if t in window]:
                            self.squashed[t] = True
                            sq.remove(t)
                        sq_tail = window[-sq_keep:] if sq_keep else ""
                    if low:
                        window = low_tail + add.casefold()
                        for t in [t for t in low if t in window]:
                            self.lower[t] = True
                            low.remove(t)
                        low_tail = window[-sq_keep:] if sq_keep else ""
            if words:
                hit = word_set(text) & words
                for w in hit:
                    self.words[w] = True
                words -= hit
            if not (piece or blob or sq or low or words):
                break


class ScannedOutput:
    """What :func:`compactor.audit.selfcheck.run_selfcheck` asks of the output (``has``,
    ``has_span``, ``has_words``), asked twice: first to learn the questions (``ask``), then, after
    :class:`OutputScan`'s pass over the output, to answer them with the same logic as
    :class:`~compactor.audit.selfcheck._Output` without a memo."""

    def __init__(self, own: dict[str, str], finder: OutputScan) -> None:
        self.own = own  # segment id -> its normalised kept text, for the segments asked about
        self.f = finder

    # each question splits into lookups of the finder's tables: registered, then answered
    def _sq(self, n: str) -> bool:
        if not n:
            return True  # the empty text is in any output (a span of only escape codes squashes to it)
        if n not in self.f.squashed:
            self.f.squashed[n] = False
        return self.f.squashed[n]

    def has(self, text: str, prefix: int = PREFIX, own: str | None = None) -> bool:
        n = squash(text)
        if own is not None and own in self.own and present_squashed(n, squash(self.own[own]), prefix=prefix):
            return True
        k = squashed_needle(n, prefix)
        return k is None or self._sq(k)

    def has_span(self, sp: Span) -> bool:
        t = sp.text
        if not t.strip():
            return True
        own = self.own.get(sp.segment_id or "")
        if own is not None and t in own:
            return True
        if "\n" in t:
            table = self.f.blob
        else:
            table = self.f.piece
        if t not in table:
            table[t] = False
        if table[t]:
            return True
        return self._sq(squash(t))

    def has_words(self, text: str, share: float = 0.8) -> bool:
        if self.has(text, prefix=0):
            return True
        ws = content_words(text)
        if not ws:
            return True
        hits = 0
        for w in ws:
            if w not in self.f.words:
                self.f.words[w] = False
            if w not in self.f.lower:
                self.f.lower[w] = False
            if self.f.words[w] or self.f.lower[w]:
                hits += 1
        return hits / len(ws) >= share
