"""The detect stage: run every enabled protect rule over a text and resolve the spans."""

from __future__ import annotations

from .engine import RuleSet, TextView, compile_rule
from .engine.matchers import find_all, make_spans, resolve_found
from .models import Diagnostic, Severity, Span

__all__ = ["DetectResult", "Detector"]


class DetectResult:
    """What detection found in one text.

    ``spans`` are the resolved (non-overlapping) spans; ``raw_spans`` every span before overlap
    resolution, sorted by position. Inside detection matches are plain tuples; the frozen
    :class:`Span` models are built at this edge, and ``raw_spans`` only when asked for:
    ``protected_lines`` (what Level 1 and ``trim`` use) reads the tuples.
    """

    __slots__ = ("spans", "diagnostics", "protect_all", "_raw", "_found", "_text", "_ids")

    def __init__(self, spans: tuple[Span, ...], diagnostics: tuple[Diagnostic, ...] = (), protect_all: bool = False,
                 raw_spans: tuple[Span, ...] = (), *, found: list[tuple] | None = None, text: str = "",
                 ids: tuple[str | None, str | None] = (None, None)):
        self.spans = spans
        self.diagnostics = diagnostics
        self.protect_all = protect_all  # a rule timed out: keep the whole text verbatim
        self._raw = raw_spans if found is None else None
        self._found = found
        self._text = text
        self._ids = ids

    def __repr__(self) -> str:
        return f"DetectResult(spans={self.spans!r}, diagnostics={self.diagnostics!r}, protect_all={self.protect_all})"

    def __eq__(self, other) -> bool:
        if not isinstance(other, DetectResult):
            return NotImplemented
        return (self.spans, self.diagnostics, self.protect_all, self.raw_spans) == \
            (other.spans, other.diagnostics, other.protect_all, other.raw_spans)

    __hash__ = None  # type: ignore[assignment]

    @property
    def raw_spans(self) -> tuple[Span, ...]:
        """Every span before overlap resolution, sorted by (start, end, rule id)."""
        if self._raw is None:
            found = sorted(self._found or (), key=lambda f: (f[1], f[2], f[0].id))
            self._raw = tuple(make_spans(self._text, found, *self._ids)) if found else ()
        return self._raw

    def line_ranges(self, weak: frozenset[str] | set[str] = frozenset()):
        """(first, last) 0-based line ranges of the unresolved spans, skipping families in ``weak``."""
        if self._found is not None:
            return [(ls, le) for cr, _a, _b, ls, le, _e in self._found if cr.family not in weak]
        return [(s.line_start - 1, s.line_end - 1) for s in self._raw or self.spans if s.family not in weak]

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


class Detector:
    """Compiled protect rules, ready to run on many texts."""

    def __init__(self, ruleset: RuleSet, *, stage: str = "protect", families: set[str] | None = None):
        rules = ruleset.stage(stage)
        if families is not None:
            rules = [r for r in rules if r.family in families]
        self.rules = [compile_rule(r) for r in rules]
        self.stage = stage

    def detect_view(self, view: TextView, *, role: str | None = None, segment_id: str | None = None,
                    step_id: str | None = None) -> DetectResult:
        found, timeouts = find_all(view, self.rules, role=role)
        diags = tuple(
            Diagnostic(code="rule-timeout", severity=Severity.warning, rule_id=rid, segment_id=segment_id,
                       message=f"rule {rid} ran out of time on this text; the text is kept verbatim")
            for rid in timeouts
        )
        spans = tuple(make_spans(view.text, resolve_found(found), segment_id, step_id))
        return DetectResult(spans, diags, bool(timeouts), found=found, text=view.text, ids=(segment_id, step_id))

    def detect(self, text: str, **kw) -> DetectResult:
        return self.detect_view(TextView(text), **kw)
