"""The detect stage: run every enabled protect rule over a text and resolve the spans."""

from __future__ import annotations

from dataclasses import dataclass, field

from .engine import RuleSet, TextView, compile_rule, resolve_spans, scan
from .models import Diagnostic, Severity, Span

__all__ = ["DetectResult", "Detector"]


@dataclass(frozen=True)
class DetectResult:
    spans: tuple[Span, ...]
    diagnostics: tuple[Diagnostic, ...] = ()
    protect_all: bool = False  # a rule timed out: keep the whole text verbatim
    raw_spans: tuple[Span, ...] = field(default=(), repr=False)  # before overlap resolution

    def protected_lines(self, context: int = 0, nlines: int | None = None) -> set[int]:
        """0-based line numbers covered by any span (unresolved: the union), widened by context."""
        out: set[int] = set()
        for s in self.raw_spans or self.spans:
            lo = max(0, s.line_start - 1 - context)
            hi = s.line_end - 1 + context
            if nlines is not None:
                hi = min(hi, nlines - 1)
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
        spans, timeouts = scan(view, self.rules, role=role, segment_id=segment_id, step_id=step_id)
        diags = tuple(
            Diagnostic(code="rule-timeout", severity=Severity.warning, rule_id=rid, segment_id=segment_id,
                       message=f"rule {rid} ran out of time on this text; the text is kept verbatim")
            for rid in timeouts
        )
        raw = tuple(sorted(spans, key=lambda s: (s.start, s.end, s.rule_id)))
        return DetectResult(tuple(resolve_spans(spans)), diags, bool(timeouts), raw)

    def detect(self, text: str, **kw) -> DetectResult:
        return self.detect_view(TextView(text), **kw)
