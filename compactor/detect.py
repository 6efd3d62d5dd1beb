"""The detect stage: run every enabled protect rule over a text and resolve the spans."""

from __future__ import annotations

import gc
from functools import cached_property
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, NamedTuple

from .engine import RuleSet, TextView, compile_rule, resolve_spans
from .engine.matchers import _make_span, find_all

if TYPE_CHECKING:
    from .models import Diagnostic, Span

__all__ = ["DetectResult", "Detector", "Hit"]


class Hit(NamedTuple):
    """One rule match as plain values (1-based inclusive lines, like :class:`~.models.Span`)."""

    rule_id: str
    family: str
    priority: int
    start: int
    end: int
    line_start: int
    line_end: int
    text: str


_HIT_ORDER = itemgetter(3, 4, 0)  # (start, end, rule id)
GC_PAUSE_CHARS = 64 * 1024  # a text this long is detected with the cyclic collector paused
_RULE = itemgetter(0)
_new = tuple.__new__


class DetectResult:
    """What the protect rules found in one text.

    ``hits`` / ``resolved_hits`` are plain tuples; ``raw_spans`` / ``spans`` are the same as typed
    :class:`~.models.Span` models, built on first use (a command that only needs the lines, such
    as ``compactor trim``, never builds them)."""

    def __init__(self, hits: tuple[Hit, ...], diagnostics: tuple[Diagnostic, ...] = (), protect_all: bool = False,
                 *, segment_id: str | None = None, step_id: str | None = None):
        self.hits = hits  # sorted by (start, end, rule id), before overlap resolution
        self.diagnostics = diagnostics
        self.protect_all = protect_all  # a rule timed out: keep the whole text verbatim
        self.segment_id = segment_id
        self.step_id = step_id

    @cached_property
    def resolved_hits(self) -> tuple[Hit, ...]:
        return tuple(resolve_spans(list(self.hits)))

    @cached_property
    def raw_spans(self) -> tuple[Span, ...]:
        return tuple(self._span(h) for h in self.hits)

    @cached_property
    def spans(self) -> tuple[Span, ...]:
        """The resolved (non-overlapping) spans; only they are built (a long trace has many)."""
        return tuple(self._span(h) for h in self.resolved_hits)

    def line_ranges(self, weak: frozenset[str] | set[str] = frozenset()) -> list[tuple[int, int]]:
        """(first, last) 0-based line ranges of the unresolved hits, skipping families in ``weak``."""
        return [(h.line_start - 1, h.line_end - 1) for h in self.hits if h.family not in weak]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DetectResult):
            return NotImplemented
        return (self.hits, self.diagnostics, self.protect_all) == (other.hits, other.diagnostics, other.protect_all)

    __hash__ = None  # type: ignore[assignment]

    def _span(self, h: Hit) -> Span:
        return _make_span(h.rule_id, h.family, self.segment_id, h.start, h.end, h.line_start, h.line_end, h.text,
                          h.priority, self.step_id)

    def protected_lines(self, context: int = 0, nlines: int | None = None) -> set[int]:
        """0-based line numbers covered by any span (unresolved: the union), widened by context."""
        out: set[int] = set()
        for ls, le in self.line_ranges():
            lo = max(0, ls - context)
            hi = le + context
            if nlines is not None:
                hi = min(hi, nlines - 1)
            if lo == hi:
                out.add(lo)
            else:
                out.update(range(lo, hi + 1))
        return out

    def __repr__(self) -> str:
        return f"DetectResult(hits={len(self.hits)}, protect_all={self.protect_all})"


class Detector:
    """Compiled protect rules, ready to run on many texts (patterns compile on first use)."""

    def __init__(self, ruleset: RuleSet, *, stage: str = "protect", families: set[str] | None = None):
        rules = ruleset.records(stage)
        if families is not None:
            rules = [r for r in rules if r.family in families]
        self.rules = [compile_rule(r) for r in rules]
        self.stage = stage

    def prepare(self, roles: tuple[str | None, ...] = ("system", "user", "assistant", "tool")) -> None:
        """Load the literal scanners' engine for texts of these roles now: the texts that follow
        are scanned by it from the first one (a short process scans its first texts with
        ``str.find`` and loads the engine only once they add up; the lines found are the same)."""
        from .engine.matchers import prepare_engines

        prepare_engines(self.rules, roles)

    def detect_view(self, view: TextView, *, role: str | None = None, segment_id: str | None = None,
                    step_id: str | None = None) -> DetectResult:
        """The hits of the rules in ``view``.

        A long text is detected with Python's cyclic garbage collector paused (and resumed after,
        if it was running): detection builds only acyclic objects, a tuple per line found and per
        hit, and the collector's passes over them cost about 6% of detecting the real CI logs and
        grow faster than the text (on a 100,000-frame trace, building the hits took 3.2 times as
        long for twice the frames). Whatever cycles other code makes meanwhile are collected once
        the collector runs again."""
        if len(view.text) < GC_PAUSE_CHARS or not gc.isenabled():
            return self._detect_view(view, role, segment_id, step_id)
        gc.disable()
        try:
            return self._detect_view(view, role, segment_id, step_id)
        finally:
            gc.enable()

    def _detect_view(self, view: TextView, role: str | None, segment_id: str | None,
                     step_id: str | None) -> DetectResult:
        found, timeouts = find_all(view, self.rules, role=role)
        diags: tuple = ()
        if timeouts:
            from .models import Diagnostic, Severity

            diags = tuple(
                Diagnostic(code="rule-timeout", severity=Severity.warning, rule_id=rid, segment_id=segment_id,
                           message=f"rule {rid} ran out of time on this text; the text is kept verbatim")
                for rid in timeouts
            )
        text, lines, starts = view.text, view.lines, view.starts
        # one rule's matches come together: its fields are read once per rule, not once per hit
        # (a 100,000-frame trace has a hit per frame), and the tuples are made without the
        # keyword-handling constructor of the named tuple. A hit that is one whole line takes
        # that line's string (nearly every hit in a CI log): no copy cut from the text, which
        # costs most when the text is a wide string
        hits: list[Hit] = []
        for cr, group in groupby(found, _RULE):
            rid, fam, pri = cr.id, cr.family, cr.priority
            hits += [_new(Hit, (rid, fam, pri, a, b, ls + 1, le + 1,
                                lines[ls] if ls == le and a == starts[ls] and b - a == len(lines[ls]) else text[a:b]))
                     for _cr, a, b, ls, le, _e in group]
        hits.sort(key=_HIT_ORDER)
        return DetectResult(tuple(hits), diags, bool(timeouts), segment_id=segment_id, step_id=step_id)

    def detect(self, text: str, **kw) -> DetectResult:
        return self.detect_view(TextView(text), **kw)
