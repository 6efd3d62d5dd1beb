"""Secrets: find them, and redact them before anything leaves the machine.

The rules are data: ``rules/secret/*.toml`` (``stage = "secret"``, ``kind = "regex"``), loaded
through :func:`compactor.engine.load_rules` like every other rule, each with examples that must
and must not match. Provider-prefixed rules (``ghp_``, ``sk-ant-``, ``AKIA``…) are precise; the
one keyword rule (``secret.generic-credential``) carries value heuristics in its pattern. There
is no entropy-only rule: protocol ids (``call_…``, ``toolu_…``, ``msg_…``, ``chatcmpl-…``) and
hashes are high-entropy strings too, and ids must never be redacted (tool-call pairing depends
on them).

Scanning:

- a rule with ``prefilter`` literals only runs when one of them occurs in the text (``str.find``
  at C speed), and then only over the lines that contain one (one ``finditer`` per window, so a
  line with two secrets yields both);
- a rule without a prefilter (private-key blocks, which span lines) runs one ``finditer`` over
  the whole text; its pattern starts with a literal so this stays fast;
- every call is bounded by a CPU-time budget; a rule that runs out raises
  :class:`SecretScanError`: the egress path fails closed (nothing is sent).

Redaction replaces only the secret part of a match (key names, URL scheme, user and host stay)
with a typed, numbered placeholder ``[REDACTED:github-token#2]``: the number is the first-seen
ordinal of *distinct values of that type within the document*. It is deterministic and never
derived from the secret (an unkeyed hash would be an offline guessing oracle for weak
passwords). Findings never carry the value in their ``repr``; diagnostics name the rule and the
position only.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterable, Sequence

from .engine.matchers import accept_disjoint
from .errors import SecretScanError
from .models import Span
from .syntax import REDACTED_PREFIX

__all__ = [
    "PLACEHOLDER_PREFIX",
    "Redactor",
    "SecretFinding",
    "SecretScanError",
    "SecretScanner",
    "default_scanner",
    "find_secrets",
    "has_secrets",
    "placeholder_type",
    "redact",
]

PLACEHOLDER_PREFIX = REDACTED_PREFIX

# CPU seconds per rule call: a safety net only (the pump tests keep it from ever firing on
# realistic input, so output stays deterministic).
BASE_BUDGET = 1.0
PER_MB = 0.5
WHOLE_TEXT_FRACTION = 0.5  # candidate windows covering more than this: scan the whole text once


@dataclass(frozen=True)
class SecretFinding:
    """One secret: where it is and what replaces it. ``value`` is kept out of ``repr``."""

    rule_id: str
    type: str
    start: int
    end: int
    line_start: int
    line_end: int
    priority: int = 50
    placeholder: str = ""
    value: str = field(default="", repr=False, compare=False)

    def to_span(self, *, segment_id: str | None = None, step_id: str | None = None) -> Span:
        """A :class:`Span` for reports: its text is the placeholder, never the secret."""
        return Span(rule_id=self.rule_id, family="secret", segment_id=segment_id, start=self.start,
                    end=self.end, line_start=self.line_start, line_end=self.line_end,
                    text=self.placeholder or f"{PLACEHOLDER_PREFIX}{self.type}]", priority=self.priority,
                    step_id=step_id)

    def describe(self) -> str:
        """A safe one-line description (rule and position, no value)."""
        where = f"line {self.line_start}" if self.line_start == self.line_end else \
            f"lines {self.line_start}-{self.line_end}"
        return f"{self.rule_id} at {where}"


def placeholder_type(rule_id: str) -> str:
    """``secret.github-token`` → ``github-token``; other ids keep their name with dots as dashes."""
    if rule_id.startswith("secret."):
        return rule_id[len("secret."):]
    return rule_id.replace(".", "-")


class _CompiledSecretRule:
    def __init__(self, rule) -> None:
        from .engine import compile_rule

        self.rule = rule
        self.id = rule.id
        self.type = placeholder_type(rule.id)
        self.priority = rule.priority
        self.prefilter = list(rule.prefilter)
        self.ignore_case = rule.prefilter_ignore_case
        self.engine_rule = compile_rule(rule)
        if rule.kind == "regex":
            spec = rule.regex_
            self.pattern = self.engine_rule.whole  # MULTILINE, as the engine's whole-text scan
            self.group = spec.group
        else:  # a user secret rule of another kind: run it through the engine
            self.pattern = None
            self.group = 0


class SecretScanner:
    """The compiled secret rules. Build once (see :func:`default_scanner`), scan many texts."""

    def __init__(self, rules: Iterable | None = None, *, rule_dirs: Sequence[str] = (),
                 disabled: Iterable[str] = ()):
        if rules is None:
            from .engine import load_rules

            rules = load_rules(list(rule_dirs)).stage("secret")
        off = set(disabled)
        self.rules = [_CompiledSecretRule(r) for r in rules if r.enabled and r.id not in off]
        self.rules.sort(key=lambda c: (-c.priority, c.id))
        self.rule_ids = tuple(c.id for c in self.rules)
        self.any_ignore_case = any(c.ignore_case for c in self.rules if c.prefilter)

    # ------------------------------------------------------------------ scanning
    def find(self, text: str) -> list[SecretFinding]:
        """Every secret in ``text``: non-overlapping, in text order, without placeholders."""
        if not text:
            return []
        lower: str | None = None
        if self.any_ignore_case:
            lower = text.lower()
            if len(lower) != len(text):  # rare: lower() changed lengths; keep offsets aligned
                lower = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
        budget = BASE_BUDGET + PER_MB * (len(text) / 1_048_576)
        raw: list[tuple[int, int, int, str, str, str]] = []  # start, end, priority, rule id, type, value
        for cr in self.rules:
            for a, b in self._find_rule(cr, text, lower, budget):
                if b > a:
                    raw.append((a, b, cr.priority, cr.id, cr.type, text[a:b]))
        if not raw:
            return []
        accepted = _resolve(raw)
        nl = _newlines(text)
        out = []
        for a, b, prio, rid, typ, val in accepted:
            ls = bisect_right(nl, a - 1) + 1 if nl else 1
            le = bisect_right(nl, b - 2) + 1 if nl else 1
            out.append(SecretFinding(rule_id=rid, type=typ, start=a, end=b, line_start=ls,
                                     line_end=max(ls, le), priority=prio, value=val))
        return out

    def _find_rule(self, cr: _CompiledSecretRule, text: str, lower: str | None, budget: float):
        if cr.pattern is None:
            from .engine import RuleTimeout, TextView

            try:
                return [(a, b) for a, b, _, _, _ in cr.engine_rule.find(TextView(text), budget)]
            except RuleTimeout:
                raise SecretScanError(f"secret rule {cr.id} ran out of time: text not verified",
                                      source=cr.rule.source or None) from None
        windows: list[tuple[int, int]] | None
        if cr.prefilter:
            hay = lower if (cr.ignore_case and lower is not None) else text
            windows = _windows(hay, [lit.lower() if cr.ignore_case else lit for lit in cr.prefilter])
            if not windows:
                return []
            if sum(b - a for a, b in windows) > WHOLE_TEXT_FRACTION * len(text):
                windows = [(0, len(text))]
        else:
            windows = [(0, len(text))]
        out: list[tuple[int, int]] = []
        t0 = time.process_time()
        for a, b in windows:
            left = budget - (time.process_time() - t0)
            if left <= 0:
                raise SecretScanError(f"secret rule {cr.id} ran out of time: text not verified")
            try:
                for m in cr.pattern.finditer(text, a, b, timeout=left):
                    s, e = m.span(cr.group)
                    if s >= 0 and e > s:
                        out.append((s, e))
            except TimeoutError:  # before any OSError handler: a regex timeout is not an I/O error
                raise SecretScanError(f"secret rule {cr.id} ran out of time: text not verified") from None
        return out


def _windows(hay: str, literals: list[str]) -> list[tuple[int, int]]:
    """The lines of ``hay`` that contain one of ``literals``, merged into (start, end) windows."""
    spans: list[tuple[int, int]] = []
    n = len(hay)
    for lit in literals:
        if not lit:
            continue
        pos = hay.find(lit)
        while pos != -1:
            ls = hay.rfind("\n", 0, pos) + 1
            le = hay.find("\n", pos)
            le = n if le == -1 else le
            spans.append((ls, le))
            pos = hay.find(lit, le + 1) if le < n else -1
    if not spans:
        return []
    spans.sort()
    merged = [spans[0]]
    for a, b in spans[1:]:
        pa, pb = merged[-1]
        if a <= pb + 1:
            merged[-1] = (pa, max(pb, b))
        else:
            merged.append((a, b))
    return merged


def _resolve(raw):
    """Non-overlapping by a total order: priority, length, start, rule id (never input order)."""
    accepted = accept_disjoint(sorted(raw, key=lambda r: (-r[2], -(r[1] - r[0]), r[0], r[3])), lambda r: (r[0], r[1]))
    accepted.sort(key=lambda r: (r[0], r[1], r[3]))
    return accepted


def _newlines(text: str) -> list[int]:
    out = []
    pos = text.find("\n")
    while pos != -1:
        out.append(pos)
        pos = text.find("\n", pos + 1)
    return out


@lru_cache(maxsize=8)
def _scanner_for(rule_dirs: tuple[str, ...], disabled: tuple[str, ...]) -> SecretScanner:
    return SecretScanner(rule_dirs=rule_dirs, disabled=disabled)


def default_scanner(rule_dirs: Sequence[str] = (), disabled: Iterable[str] = ()) -> SecretScanner:
    """The built-in secret rules (plus user rule directories), compiled once per process."""
    return _scanner_for(tuple(str(d) for d in rule_dirs), tuple(sorted(set(disabled))))


class Redactor:
    """Redacts the texts of one document with shared numbering.

    The same value gets the same placeholder everywhere in the document (all texts passed to
    this instance), and ``#n`` counts distinct values per type in first-seen order.
    """

    def __init__(self, scanner: SecretScanner | None = None):
        self.scanner = scanner or default_scanner()
        self._ordinal: dict[tuple[str, str], int] = {}
        self._next: dict[str, int] = {}
        self.findings: list[SecretFinding] = []

    def placeholder(self, typ: str, value: str) -> str:
        key = (typ, value)
        n = self._ordinal.get(key)
        if n is None:
            n = self._next.get(typ, 0) + 1
            self._next[typ] = n
            self._ordinal[key] = n
        return f"{PLACEHOLDER_PREFIX}{typ}#{n}]"

    def redact(self, text: str) -> tuple[str, list[SecretFinding]]:
        found = self.scanner.find(text)
        if not found:
            return text, []
        parts: list[str] = []
        out: list[SecretFinding] = []
        last = 0
        for f in found:
            ph = self.placeholder(f.type, f.value)
            parts.append(text[last:f.start])
            parts.append(ph)
            last = f.end
            out.append(SecretFinding(rule_id=f.rule_id, type=f.type, start=f.start, end=f.end,
                                     line_start=f.line_start, line_end=f.line_end, priority=f.priority,
                                     placeholder=ph, value=f.value))
        parts.append(text[last:])
        self.findings.extend(out)
        return "".join(parts), out

    def counts(self) -> dict[str, int]:
        """Findings per rule id (occurrences, not values): safe to put in a report."""
        c: dict[str, int] = {}
        for f in self.findings:
            c[f.rule_id] = c.get(f.rule_id, 0) + 1
        return dict(sorted(c.items()))

    def distinct(self) -> int:
        return len(self._ordinal)


def find_secrets(text: str, *, scanner: SecretScanner | None = None) -> list[SecretFinding]:
    """Every secret in ``text`` (non-overlapping, in order). Raises SecretScanError on a timeout."""
    return (scanner or default_scanner()).find(text)


def has_secrets(text: str, *, scanner: SecretScanner | None = None) -> bool:
    return bool(find_secrets(text, scanner=scanner))


def redact(text: str, *, scanner: SecretScanner | None = None) -> tuple[str, list[SecretFinding]]:
    """Replace every secret in ``text`` (one document) by ``[REDACTED:type#n]``.

    Returns the redacted text and the findings (offsets refer to the *input* text).
    """
    return Redactor(scanner).redact(text)
