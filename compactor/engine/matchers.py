"""The rule engines ("kinds") and the scanner that runs protect rules over a text.

Speed comes from doing as little per line as possible:

- every rule names literal ``prefilter`` strings; the scanner finds them with ``str.find`` over
  the whole text (C speed) and only tries the rule's regex on the lines that contain one;
- a line rule with many candidate lines runs as gated branches (``branches.py``): each
  alternative of its pattern only on the lines holding a literal it needs; a rule's optional
  ``gate`` (a cheap necessary pattern) is tried before its pattern;
- rules without a prefilter run as one ``finditer`` over the whole text, with a timeout; when
  such a rule has a ``gate`` that hyperscan reads like ``regex`` (``literals.gate_fits_hyperscan``),
  the one-pass literal scan also finds the lines the gate may match and the pattern runs only on
  those lines (``fileref.path-line``);
- with hyperscan, the one pass also runs an approximation of every rule's pattern
  (``approx.approximate``, a superset on ASCII lines) and the exact pattern runs only on the lines
  both its literals and its approximation found (``CompiledRule._lines``); a whole-text rule whose
  matches lie within lines (``approx.line_local``) searches only the lines its approximation found;
- patterns are compiled once per process, and rebuilt from their compiled programs kept on disk
  (``programs.py``) rather than parsed again in each process.

Every rule is bounded: block-level calls carry the ``regex`` timeout; per-line calls on long
lines carry it too; multi-line blocks stop at ``max_lines`` / ``max_bytes``; a rule that runs out
of time raises :class:`RuleTimeout` and the caller keeps the region verbatim (fail toward
preservation).
"""

from __future__ import annotations

import time
from bisect import bisect_left, bisect_right
from functools import cached_property, lru_cache
from itertools import compress, filterfalse
from operator import itemgetter, not_, or_
from typing import TYPE_CHECKING, Iterable

from ..errors import RuleTimeout
from ..normalize import ci_prefix_length, ci_prefix_lengths, ci_prefixed_somewhere
from .branches import split_cached
from .approx import approximate, approximate_utf8, holds_ascii_fold, implies_literal, line_local
from .literals import (LiteralScanner, approx_key, bytes_view, gate_fits_hyperscan, gate_key, holding_in,
                       line_starts, lines_holding, literal_key, non_ascii_lines, wide_key)
from .records import FLAG_NAMES
from ..lazyre import lazy_re, lazy_regex

if TYPE_CHECKING:  # the engines take a typed Rule or its plain Record; Spans are built on demand
    import regex

    from ..models import Span
    from .schema import Rule

__all__ = ["CompiledRule", "RuleTimeout", "TextView", "compile_rule", "find_all", "literal_scanner", "make_spans",
           "resolve_found", "resolve_spans", "scan"]

LONG_LINE = 65_536  # per-line rules see the first and last 64 KiB of longer lines
# CPU seconds per rule per text, plus PER_MB per MiB: a safety net against runaway patterns only.
# It must never fire on input a rule handles in linear time, or the same input gives different
# output on a busy machine (CPU time per step grows when processes share a core). PER_MB is the
# pump test's limit (``pump.PUMP_LIMIT_S_PER_MB``): a rule that passes it stays well inside.
BASE_BUDGET = 0.25
PER_MB = 2.0
SPLIT_MIN = 64  # candidate lines from which a line-scope rule runs as gated branches
# a whole-text rule searches only the lines its approximation may match when they are at most this
# share of the text's lines (one search per line costs about a microsecond more than the whole text's)
APPROX_SHARE = 0.05


def _pick(lines: list[str], idx: list[int]) -> list[str]:
    """``lines[i]`` for each of ``idx``, picked in C (``itemgetter`` returns a lone item bare)."""
    return [lines[i] for i in idx] if len(idx) < 2 else list(itemgetter(*idx)(lines))


class _LazyPrefix(dict):
    """Line number -> the length of its CI timestamp prefix, worked out on first use of the line.
    Detection reads the prefixes of the lines the rules look at (3,879 of the 36,846 lines of the
    real CI logs of the corpus concatenated), far fewer than every line (``TextView.prefix``)."""

    __slots__ = ("lines",)

    def __init__(self, lines: list[str]):
        super().__init__()
        self.lines = lines

    def __missing__(self, i: int) -> int:
        k = self[i] = ci_prefix_length(self.lines[i])
        return k


class TextView:
    """A text split into lines, with offsets, a lazily lowered copy and CI prefixes skipped.

    Prefilter literals are looked up once per view and shared by every rule that names them
    (``lines_with``): a literal costs one C-speed pass over the text however many rules use it.
    Case-insensitive ASCII literals are searched in an ASCII-lowered copy with the same offsets
    (``_ci_haystack``): ``str.lower`` on non-ASCII text is several times slower.
    """

    __slots__ = ("text", "lines", "starts", "_prefix", "_tagged", "_lower", "_hay_ci", "_hits", "_bytes", "_cands",
                 "_bodies")

    def __init__(self, text: str):
        self.text = text
        self._prefix: list[int] | dict[int, int] | None = None
        self._tagged = False  # the engine prefixes (ENGINE_PREFIXES) are not looked for yet
        self._lower: str | None = None
        self._hay_ci: tuple | None = None
        self._hits: dict = {}
        self._bytes: tuple | None = None  # literals.bytes_view
        self._cands: dict = {}  # (literals, ignore case) -> the lines holding one of them (candidates)
        self._bodies: dict[int, str] = {}  # line -> its body, in a text with prefixes (bodies)
        self._split()

    def __repr__(self) -> str:
        return f"TextView(text={self.text!r}, lines={self.lines!r}, starts={self.starts!r}, prefix={self.prefix!r})"

    def _split(self) -> None:
        self.lines = self.text.split("\n")
        self.starts = line_starts(self.lines)
        # CI timestamp prefixes: rules see the line without it (offsets are mapped back), each
        # line's worked out when a rule first reads it (prefix_at), every line's when asked (prefix)
        if ci_prefixed_somewhere(self.lines):
            self._prefix = _LazyPrefix(self.lines)

    @property
    def prefix_at(self) -> list[int] | dict[int, int] | None:
        """Per line number, the length of the prefix rules do not see (None: no line has one), to
        be read line by line (``pre[i]``; a mapping filled on first use of a line when the text
        carries CI timestamps): what the rules use. ``prefix`` is the list of every line's."""
        if not self._tagged:
            self._tag()
        return self._prefix

    @property
    def prefix(self) -> list[int] | None:
        """Per line, the length of the prefix rules do not see (None: no line has one)."""
        pre = self.prefix_at
        if isinstance(pre, _LazyPrefix):  # every line's, with what was read (or tagged) kept
            full = ci_prefix_lengths(self.lines)
            for i, k in pre.items():
                full[i] = k
            self._prefix = pre = full
        return pre

    def _tag(self) -> None:
        """A fuzzing engine's log prefix in front of the target's own output (Centipede's
        'CRASH LOG: '): rules see the sanitizer report as the target printed it. Worked out on
        first use, from the lines holding the tag: the one-pass literal scan looks for the tags
        too (``literal_scanner``), so a view it scanned needs no search of its own (a pass over
        the text: 1.4 ms on 2.9 M characters). A view not scanned yet is searched without filling
        its literal cache (the scan would then take the lookups it lacks one by one)."""
        self._tagged = True
        for tag in ENGINE_PREFIXES:
            found = self._hits.get(literal_key(tag, False))
            if found is None:
                found = lines_holding(self.text, self.starts, tag)
            if found:
                if self._prefix is None:
                    self._prefix = [0] * len(self.lines)
                n = len(tag)
                pre = self._prefix
                lines = self.lines
                for i in found:
                    k = pre[i]
                    if lines[i].startswith(tag, k):
                        pre[i] = k + n

    @property
    def lower(self) -> str:
        if self._lower is None:
            self._lower = self.text.lower()
            if len(self._lower) != len(self.text):  # rare: lower() changed lengths (e.g. 'İ')
                self._lower = "".join(c if len(c.lower()) != 1 else c.lower() for c in self.text)
        return self._lower

    def line_of(self, offset: int) -> int:
        return bisect_right(self.starts, offset) - 1

    def body(self, i: int) -> str:
        """Line i as rules see it (CI prefix removed)."""
        pre = self.prefix_at
        if pre is None or not pre[i]:
            return self.lines[i]
        return self.lines[i][pre[i]:]

    def bodies(self, idx: Iterable[int]) -> list[str]:
        """The lines ``idx`` as rules see them (``body`` of each). In a text with prefixes each
        line's body is cut once and kept (``_bodies``: the rules of a CI log ask for the same
        lines, its 'error' lines or its stack frames, again and again), and the prefixes not read
        yet are worked out together (``ci_prefix_lengths``, C-level passes)."""
        lines = self.lines
        pre = self.prefix_at
        if not isinstance(idx, (list, range)):
            idx = list(idx)  # (read twice below)
        if pre is None:
            if isinstance(idx, range) and idx.step == 1:
                return lines[idx.start:idx.stop]
            return _pick(lines, idx if isinstance(idx, list) else list(idx))
        kept = self._bodies
        new = list(filterfalse(kept.__contains__, idx))
        if new:
            if isinstance(pre, _LazyPrefix):
                unread = list(filterfalse(pre.__contains__, new))
                if unread:
                    pre.update(zip(unread, ci_prefix_lengths([lines[i] for i in unread])))
            kept.update(zip(new, [x[k:] if k else x for x, k in zip(_pick(lines, new), map(pre.__getitem__, new))]))
        return list(map(kept.__getitem__, idx))

    def body_start(self, i: int) -> int:
        pre = self.prefix_at
        return self.starts[i] + (pre[i] if pre is not None else 0)

    def _ci_haystack(self) -> tuple:
        """(haystack, encoded?) for case-insensitive search of ASCII literals, offsets = str offsets.

        Non-ASCII text is encoded to Latin-1 with 'replace' (one byte per character, so offsets
        and line starts are unchanged) and ASCII-lowered as bytes: much cheaper than str.lower()
        on non-ASCII text, and exact for ASCII literals.
        """
        if self._hay_ci is None:
            if self.text.isascii():
                self._hay_ci = (self.text.lower(), False)
            else:
                self._hay_ci = (self.text.encode("latin-1", "replace").lower(), True)
        return self._hay_ci

    def lines_with(self, literal: str, ignore_case: bool = False) -> list[int]:
        """Sorted 0-based numbers of the lines that contain ``literal`` (cached per view)."""
        key = literal_key(literal, ignore_case)
        hit = self._hits.get(key)
        if hit is not None:
            return hit
        if ignore_case and literal.isascii():
            hay, encoded = self._ci_haystack()
            starts = self.starts
            needle = literal.lower().encode() if encoded else literal.lower()
        elif ignore_case and literal.lower() == literal == literal.upper():  # caseless ('●', '✕'): as is
            hay, starts, needle = self.text, self.starts, literal
        elif ignore_case:  # a non-ASCII literal with case: search the lowered str
            hay, starts, needle = self.lower, self.starts, literal.lower()
        else:
            hay, starts, needle = self.text, self.starts, literal
        out: list[int] = []
        find = hay.find
        nstarts = len(starts)
        end = len(hay)
        pos = find(needle)
        while pos != -1:
            ln = bisect_right(starts, pos) - 1
            out.append(ln)
            # one hit per line is enough: continue at the next line
            pos = find(needle, starts[ln + 1]) if ln + 1 < nstarts else -1
            if pos >= end:
                break
        self._hits[key] = out
        return out

    def candidates(self, literals: list[str], ignore_case: bool) -> list[int]:
        """Sorted numbers of the lines holding one of ``literals`` (cached per view: the Java,
        .NET and JavaScript trace rules share theirs)."""
        if len(literals) == 1:
            return self.lines_with(literals[0], ignore_case)
        key = (*literals, ignore_case)
        got = self._cands.get(key)
        if got is None:
            found: set[int] = set()
            for lit in literals:
                found.update(self.lines_with(lit, ignore_case))
            got = self._cands[key] = sorted(found)
        return got


# log prefixes a fuzzing engine puts before each line of the target's output
ENGINE_PREFIXES = ("CRASH LOG: ",)


def _in(hay, lit: str):
    """An ASCII literal in the type of ``hay`` (str or Latin-1 bytes)."""
    return lit if type(hay) is str else lit.encode("ascii")


_WIDE = ("wide",)  # key of the set of lines with a non-ASCII character in a view's literal cache


def _wide_set(view: TextView) -> set[int]:
    """The lines with a non-ASCII character, as a set made once per view (a log with progress bars
    has thousands of them)."""
    got = view._hits.get(_WIDE)
    if got is None:
        got = view._hits[_WIDE] = set(bytes_view(view)[2])
    return got


def _within(cand: list[int], near: list[int], view: TextView) -> list[int]:
    """The lines of ``cand`` (ascending) that are in ``near`` or hold a non-ASCII character
    (there an approximation promises nothing)."""
    if bytes_view(view)[2]:
        wide_set = _wide_set(view)
        if len(wide_set) < len(cand):
            # filtered from C: 'error' is on most lines of a CI log, and its rules' candidates
            # add up to some 30,000 lines per text (with a few non-ASCII lines to add to near)
            return list(filter(wide_set.union(near).__contains__, cand))
        keep = set(near)  # (a log of progress bars: thousands of non-ASCII lines, not copied)
        return [i for i in cand if i in keep or i in wide_set]
    if len(near) < len(cand):
        return list(filter(set(cand).__contains__, near))
    return list(filter(set(near).__contains__, cand))


def _near_holding(near: list[int], keys: list[tuple[str, bool]], view: TextView, implied: bool) -> list[int]:
    """A rule's candidate lines when the scan skipped some of its literals ``keys`` (a line is
    tried only if it holds one): among ``near``, its approximation's lines, those that hold a
    literal, and the lines with a non-ASCII character that hold one (there an approximation
    promises nothing). When the rule's pattern ``implied`` a literal in every match
    (``approx.implies_literal``), the ASCII lines of ``near`` are taken as they are; otherwise
    the skipped literals are looked up in those lines only (``literals.holding_in``). The
    literals scanned have all their lines; those skipped have their non-ASCII lines under
    ``wide_key``."""
    hits = view._hits
    wide_set: set[int] = set()
    if bytes_view(view)[2]:
        wide_set = _wide_set(view)
        near = list(filterfalse(wide_set.__contains__, near))
    out: set[int] = set(near) if implied else set()
    near_set = None
    look: list = []  # the skipped literals to look up in near
    for k in keys:
        got = hits.get(k)
        if got is not None:  # scanned: all its lines
            if got and wide_set:
                out.update(filter(wide_set.__contains__, got))
            if got and not implied:
                if near_set is None:
                    near_set = set(near)
                out.update(filter(near_set.__contains__, got))
            continue
        got = hits.get(wide_key(k))
        if got is None:  # (not scanned for at all: looked up)
            out.update(_within(view.lines_with(*k), near, view))
            continue
        out.update(got)
        if not implied:
            look.append((k, k[0].encode("ascii"), k[1]))  # (the skipped literals are ASCII)
    if look:
        for lines in holding_in(view, near, look).values():
            out.update(lines)
    return sorted(out)


def _flags(names: Iterable[str]) -> int:
    f = 0
    for n in names:
        f |= FLAG_NAMES[n]
    return f


@lru_cache(maxsize=4096)
def _compile(pattern: str, flags: int) -> regex.Pattern:
    from .programs import compile_pattern  # imports regex: a short trim that compiles no rule never pays

    return compile_pattern(pattern, flags)


@lru_cache(maxsize=1024)
def _wide_check(expr: str):
    import re

    return re.compile(expr.encode("ascii"))


# the longest line the UTF-8 approximation is searched on: as a rule's own pattern on a line this
# long or shorter, it runs without a time limit (the standard library's ``re`` has none), and the
# pump test holds it to the rules' time per MB on such lines (``pump.pump_derived``). A longer line
# is searched by the rule's pattern, under its time limit.
WIDE_CHECK_MAX = 4096


def _ruled_out_wide(rule: "RegexRule", line: str) -> bool:
    """Can the rule's pattern not match ``line`` (which holds a non-ASCII character), as its
    UTF-8 approximation says (``RegexRule.wide_check``)? False (it may) on a line longer than
    ``WIDE_CHECK_MAX``."""
    check = rule.wide_check
    if check is None or len(line) > WIDE_CHECK_MAX or holds_ascii_fold(line):
        return False
    return check.search(line.encode("utf-8", "surrogatepass")) is None


def _search_line(pat: regex.Pattern, line: str, deadline_budget: float):
    if len(line) <= 4096:
        return pat.search(line)
    if len(line) > LONG_LINE:
        m = pat.search(line[:LONG_LINE], timeout=deadline_budget)
        if m is None:
            tail_at = len(line) - LONG_LINE
            m2 = pat.search(line[tail_at:], timeout=deadline_budget)
            return _Shifted(m2, tail_at) if m2 is not None else None
        return m
    return pat.search(line, timeout=deadline_budget)


class _Shifted:
    """A match found in the tail window of a huge line, with offsets shifted back."""

    def __init__(self, m, shift: int):
        self._m, self._shift = m, shift

    def start(self, g=0):
        return self._m.start(g) + self._shift

    def end(self, g=0):
        return self._m.end(g) + self._shift

    def group(self, g=0):
        return self._m.group(g)


class _AnyOf:
    """Patterns searched one after another, as one pattern of their alternation (``search``: the
    first one's match)."""

    __slots__ = ("parts",)

    def __init__(self, parts: list):
        self.parts = parts

    def search(self, string: str, *args, **kw):
        for p in self.parts:
            m = p.search(string, *args, **kw)
            if m is not None:
                return m
        return None


class CompiledRule:
    def __init__(self, rule: Rule):
        self.rule = rule
        self.id = rule.id
        self.family = rule.family
        self.priority = rule.priority
        self.prefilter = list(rule.prefilter)
        self.ignore_case = rule.prefilter_ignore_case
        self.roles = frozenset(rule.roles)

    def find(self, view: TextView, budget: float) -> list[tuple[int, int, int, int, bool]]:
        """Return (start, end, line_start, line_end, elidable) tuples, 0-based lines inclusive."""
        raise NotImplementedError

    def warm(self) -> "CompiledRule":
        """Compile every pattern now (they are compiled on first use otherwise)."""
        for name in ("pat", "whole", "start", "cont", "end", "before"):
            getattr(self, name, None)
        return self

    # the pattern the one-pass scan approximates (``approx``): None for kinds that have none
    approx_source: tuple[str, int] | None = None

    @cached_property
    def approx(self) -> str | None:
        """The hyperscan approximation of this rule's (start) pattern, or None."""
        src = self.approx_source
        return approximate(*src) if src is not None else None

    @cached_property
    def approx_local(self) -> bool:
        """``approx.line_local`` of this rule's (start) pattern, worked out once per rule (looked
        up by the pattern's whole text, it cost a rule without literals ~10 µs per text)."""
        src = self.approx_source
        return src is not None and line_local(*src)

    @cached_property
    def literal_implied(self) -> bool:
        """Every match of this rule's (start) pattern holds a prefilter literal
        (``approx.implies_literal``): the approximation's lines need no literal lookup."""
        src = self.approx_source
        return src is not None and bool(self.prefilter) and implies_literal(src[0], src[1], self.prefilter,
                                                                            self.ignore_case)

    @cached_property
    def literal_keys(self) -> list[tuple[str, bool]]:
        """The keys of this rule's prefilter literals in a view's literal cache."""
        return [literal_key(lit, self.ignore_case) for lit in self.prefilter if lit]

    def _lines(self, view: TextView) -> Iterable[int] | None:
        if self.prefilter:
            near = view._hits.get(approx_key(self.approx)) if self.approx is not None else None
            if near is not None:  # found by the one-pass scan: only lines where the pattern may match
                hits = view._hits
                if not all(map(hits.__contains__, self.literal_keys)):
                    # the scan left out literals the approximation covers: looked up on its lines
                    return _near_holding(near, self.literal_keys, view, self.literal_implied)
                return _within(view.candidates(self.prefilter, self.ignore_case), near, view)
            return view.candidates(self.prefilter, self.ignore_case)
        return None


_UNSEEN = object()  # a line body not searched yet (RegexRule.find)


class RegexRule(CompiledRule):
    def __init__(self, rule: Rule):
        super().__init__(rule)
        spec = rule.regex_
        assert spec is not None
        self.spec = spec
        self.approx_source = (spec.pattern, _flags(spec.flags))

    # compiled on first use: with the one-pass literal scan, a rule whose literals never occur is
    # never compiled (compiling is most of a short run's start-up)
    @cached_property
    def pat(self) -> regex.Pattern:
        return _compile(self.spec.pattern, _flags(self.spec.flags))

    @cached_property
    def whole(self) -> regex.Pattern:
        return _compile(self.spec.pattern, _flags(self.spec.flags) | FLAG_NAMES["MULTILINE"])

    @cached_property
    def wide_check(self):
        """A line with a non-ASCII character is searched only if this matches its UTF-8 bytes:
        the pattern's UTF-8 approximation (``approx.approximate_utf8``, a superset of where it
        matches, unless the line holds a character of ``FOLDS_TO_ASCII``) compiled for bytes.
        ``regex`` searches such a line several times slower than an ASCII one (13 us for a line
        of 60 characters and a caseless rule). None: every such line is searched."""
        u = approximate_utf8(*self.approx_source)
        return None if u is None else _wide_check(u)

    def find(self, view: TextView, budget: float):
        out = []
        spec = self.spec
        cand = self._lines(view)
        t0 = time.process_time()
        nlines = len(view.lines)
        if cand is None:
            if self.text_gate is not None:
                gated = view._hits.get(gate_key(*self.text_gate))
            elif self.approx is not None and self.approx_local:
                gated = view._hits.get(approx_key(self.approx))
                if gated is not None:
                    wide = bytes_view(view)[2]
                    if wide:  # the approximation promises nothing on lines with a non-ASCII character
                        gated = sorted(set(gated).union(wide))
                    if len(gated) > APPROX_SHARE * nlines:
                        gated = None  # on many lines: one search of the whole text is cheaper
            else:
                gated = None
            if gated is not None and not gated:
                return out  # the gate is on no line: no match can be either
            group = spec.group
            by_line = spec.scope == "line"
            plain_lines = by_line and not spec.context_before and not spec.context_after
            try:
                if gated is None:
                    matches = list(self.whole.finditer(view.text, timeout=budget))
                elif plain_lines and group == 0:
                    return self._gated_lines(view, gated, budget, t0)
                else:
                    matches = self._gated_matches(view, gated, budget, t0)
            except TimeoutError:
                raise RuleTimeout(self.id) from None
            last_line = -1
            starts = view.starts
            nstarts = len(starts)
            lines = view.lines
            append = out.append
            if plain_lines and group == 0:  # the common case, one step per match less (a long trace has 100,000)
                ends = starts[1:]
                ends.append(1 << 62)
                for m in matches:
                    a, b = m.span()
                    if last_line >= 0 and a < ends[last_line]:
                        continue  # the line is already covered by an earlier match
                    ls = bisect_right(starts, a) - 1
                    e = b - 1 if b > a else a
                    le = ls if e < ends[ls] else bisect_right(starts, e) - 1
                    append((starts[ls], starts[le] + len(lines[le]), ls, le, False))
                    last_line = le
                return out
            for m in matches:
                a, b = m.span(group)
                if a < 0:
                    continue
                if by_line and last_line >= 0 and (last_line + 1 >= nstarts or a < starts[last_line + 1]):
                    continue  # the line is already covered by an earlier match
                ls = bisect_right(starts, a) - 1
                e = max(a, b - 1)
                le = ls if ls + 1 >= nstarts or e < starts[ls + 1] else bisect_right(starts, e) - 1
                if plain_lines:  # _span for whole lines without context, inline (one call per match less)
                    append((starts[ls], starts[le] + len(lines[le]), ls, le, False))
                    last_line = le
                else:
                    append(self._span(view, a, b, ls, le, nlines))
                    last_line = out[-1][3]
            return out
        if spec.scope == "line" and len(cand) >= SPLIT_MIN:
            if self.branches is not None:
                return self._find_split(view, cand, budget, t0)
            if spec.group == 0:  # whether a line matches is all that counts: its distinct bodies, from C
                return self._find_split(view, cand, budget, t0, [[self.pat, spec.pattern, (), (), False]])
        gate = self.gate
        group = spec.group
        seen: dict[str, tuple[int, int] | None] = {}  # body -> its match (a repeated line is searched once)
        for n, i in enumerate(cand):
            if n & 255 == 255 and time.process_time() - t0 > budget:
                raise RuleTimeout(self.id)
            body = view.body(i)
            got = seen.get(body, _UNSEEN)
            if got is _UNSEEN:
                try:
                    if gate is not None and _search_line(gate, body, budget) is None:
                        m = None  # the rule's own necessary condition fails: no match here
                    elif not body.isascii() and _ruled_out_wide(self, body):
                        m = None  # its UTF-8 approximation finds nothing in the line
                    else:
                        m = _search_line(self.pat, body, budget)
                except TimeoutError:
                    raise RuleTimeout(self.id) from None
                got = seen[body] = None if m is None else (m.start(group), m.end(group))
            if got is None:
                continue
            base = view.body_start(i)
            a, b = base + got[0], base + got[1]
            if a < base:
                continue
            out.append(self._span(view, a, b, i, i, nlines))
        return out

    @cached_property
    def text_gate(self) -> tuple[str, bool] | None:
        """(gate, ignore case) when the one-pass scan can find this whole-text rule's candidate
        lines: a rule without prefilter whose gate hyperscan reads like ``regex`` (no flags but
        IGNORECASE, see ``literals.gate_fits_hyperscan``)."""
        spec = self.spec
        if self.prefilter or not spec.gate or not set(spec.flags) <= {"IGNORECASE"}:
            return None
        gate = spec.gate if isinstance(spec.gate, str) else "|".join(f"(?:{p})" for p in spec.gate)
        g = (gate, "IGNORECASE" in spec.flags)
        return g if gate_fits_hyperscan(*g) else None

    def _gated_matches(self, view: TextView, lines: list[int], budget: float, t0: float) -> list:
        """The whole-text matches, searched only on the lines where the gate may match (each line
        up to its end, the newline excluded: a gated rule's matches lie within one line)."""
        finditer = self.whole.finditer
        text = view.text
        starts = view.starts
        nstarts = len(starts)
        end_all = len(text)
        out: list = []
        for n, i in enumerate(lines):
            if n & 255 == 255 and time.process_time() - t0 > budget:
                raise RuleTimeout(self.id)
            a = starts[i]
            b = starts[i + 1] - 1 if i + 1 < nstarts else end_all
            if b - a > 4096:
                out.extend(finditer(text, a, b, timeout=budget))
            else:
                out.extend(finditer(text, a, b))
        return out

    def _gated_lines(self, view: TextView, lines: list[int], budget: float, t0: float) -> list[tuple]:
        """The whole lines (no context, group 0) among ``lines`` where the whole-text pattern
        matches, each searched up to its end (the newline excluded: a gated rule's matches lie
        within one line). Only whether a line holds a match counts, so one search per line (not
        every match of it), and the line is known without looking its offset up.

        When the pattern is line-local (``approx.line_local``: nothing in it, lookbehinds included,
        can match a newline, and it uses no \\A or \\Z), whether a line holds a match depends on
        the line's text alone: each distinct line is searched once, on its own, from C (the
        path:line references of a Maven log's stack frames repeat: the 2,588 gate lines of the
        real CI logs are 791 distinct ones)."""
        starts = view.starts
        all_lines = view.lines
        if self.approx_local:
            texts = [all_lines[i] for i in lines]
            distinct = list(dict.fromkeys(texts))
            # each distinct line searched on its own, from C a chunk at a time (the time limit
            # checked between chunks; a line over 4096 characters alone, with the limit)
            matched = _bodies_matching(distinct, [[self.whole, None, (), (), False]], 0, None, budget, t0, self.id)
            hit = set(compress(distinct, matched))
            return [(starts[i], starts[i] + len(line), i, i, False) for i, line in zip(lines, texts) if line in hit]
        search = self.whole.search
        text = view.text
        out: list[tuple] = []
        append = out.append
        for n, i in enumerate(lines):
            if n & 255 == 255 and time.process_time() - t0 > budget:
                raise RuleTimeout(self.id)
            a = starts[i]
            b = a + len(all_lines[i])
            if (search(text, a, b) if b - a <= 4096 else search(text, a, b, timeout=budget)) is not None:
                append((a, b, i, i, False))
        return out

    @cached_property
    def gate_parts(self) -> list[regex.Pattern] | None:
        """The gate's patterns, compiled (one, or those of a gate given as a list): a line passes
        the gate iff one of them matches it."""
        gate = self.spec.gate
        if not gate:
            return None
        flags = _flags(self.spec.flags)
        return [_compile(p, flags) for p in ([gate] if isinstance(gate, str) else gate)]

    @cached_property
    def gate(self) -> regex.Pattern | _AnyOf | None:
        """The gate, to search a line with (its alternatives one after another, see ``gate_parts``)."""
        parts = self.gate_parts
        if parts is None:
            return None
        return parts[0] if len(parts) == 1 else _AnyOf(parts)

    @cached_property
    def branches(self) -> list[list] | None:
        """The pattern split into gated branches (``branches.split_any``), or None.

        Each entry: [compiled branch or None until first searched, source, case-sensitive gate
        literals, lowered case-insensitive gate literals, gated?]. A line can match the branch
        only if it contains one of the literals. Not split when more than one branch has no
        literal: every line would then be searched by several long patterns instead of one."""
        return _branch_table(self.spec.pattern, _flags(self.spec.flags))

    def _find_split(self, view: TextView, cand: list[int], budget: float, t0: float,
                    branches: list[list] | None = None):
        """Line-scope matching by branches: a line matches iff one of its branches does, and a
        branch is searched only on lines holding one of its literals (case-insensitive literals
        are checked on ASCII lines; a non-ASCII line is searched, since case folding can map
        non-ASCII letters such as the Kelvin sign onto ASCII ones).

        Branch by branch: the candidate lines are joined once, each branch's literals are found
        in that text with ``str.find`` (C speed, one step per line that holds one), and the
        branch is searched on those lines only; a line already matched is not searched again."""
        got = _lines_matching(view, cand, self.branches if branches is None else branches, _flags(self.spec.flags),
                              self.gate, budget, t0, self.id)
        if not self.spec.context_before and not self.spec.context_after:  # whole lines, as _span makes them
            starts, lines = view.starts, view.lines
            return [(starts[i], starts[i] + len(lines[i]), i, i, False) for i in got]
        nlines = len(view.lines)
        return [self._span(view, 0, 0, i, i, nlines) for i in got]

    def _span(self, view: TextView, a: int, b: int, ls: int, le: int, nlines: int):
        spec = self.spec
        if spec.scope == "line" or spec.context_before or spec.context_after:
            ls = max(0, ls - spec.context_before)
            le = min(nlines - 1, le + spec.context_after)
            if spec.scope == "line":
                a = view.starts[ls]
                b = view.starts[le] + len(view.lines[le])
        return (a, b, ls, le, False)


class LineBlockRule(CompiledRule):
    def __init__(self, rule: Rule):
        super().__init__(rule)
        spec = rule.line_block
        assert spec is not None
        self.spec = spec
        self.approx_source = (spec.start, 0)

    @cached_property
    def start(self) -> regex.Pattern:
        return _compile(self.spec.start, 0)

    @cached_property
    def cont(self) -> list[regex.Pattern]:
        return [_compile(p, 0) for p in self.spec.continue_]

    @cached_property
    def end(self) -> regex.Pattern | None:
        return _compile(self.spec.end, 0) if self.spec.end else None

    @cached_property
    def before(self) -> list[regex.Pattern]:
        return [_compile(p, 0) for p in self.spec.before]

    @cached_property
    def _cont_search(self) -> list:
        return [p.search for p in self.cont]

    def _continues(self, line: str, budget: float) -> bool:
        for p in self.cont:
            if _search_line(p, line, budget) is not None:
                return True
        return False

    def _start_marks(self, view: TextView, sub: Iterable[int], memo: dict[str, int]) -> bytes:
        """For the candidate lines ``sub`` (a chunk of them, ascending), one byte each: 1 where the
        start pattern matches, 0 where it does not, 2 for a line of more than 4096 characters
        (left to the line-by-line search with its time limit). Each line body is searched once
        (``memo``: body -> 0/1; the frames of a recursion repeat), the searches called from C."""
        bodies = view.bodies(sub)
        longest = max(map(len, bodies))
        todo = bodies if longest <= 4096 else [x for x in bodies if len(x) <= 4096]
        new = list(filterfalse(memo.__contains__, dict.fromkeys(todo)))
        if new:
            memo.update(zip(new, map(bool, map(self.start.search, new))))  # a match is true
        if longest <= 4096:
            return bytes(map(memo.__getitem__, bodies))
        return bytes(memo[x] if len(x) <= 4096 else 2 for x in bodies)

    def _window(self, view: TextView, lo: int, hi: int, memo: dict[str, int]) -> bytes:
        """The class of each line lo..hi-1 (each at most 4096 characters), one byte each, as the
        line-by-line loop decides it: BLANK first, then END (the end pattern matches), then CONT
        (a continue pattern does), else 0. Each line body is classified once (``memo``: body ->
        class), by the same searches, called from C."""
        bodies = view.bodies(range(lo, hi))
        new = list(filterfalse(memo.__contains__, dict.fromkeys(bodies)))
        if new and (self.end is None and not any(map(not_, new)) and not any(map(str.isspace, new))):
            # no blank line, no end pattern (the frames of a long trace): the first continue
            # pattern alone decides when it matches every line (CONT is 1: its flags are the classes)
            found = bytes(map(bool, map(self._cont_search[0], new)))
            if 0 not in found:
                memo.update(zip(new, found))
                new = []
        if new:
            blank = list(map(or_, map(not_, new), map(str.isspace, new)))
            cls = [BLANK if b else 0 for b in blank]
            rest = [k for k, b in enumerate(blank) if not b]  # the lines still to classify
            if self.end is not None:
                ends = list(map(bool, map(self.end.search, [new[k] for k in rest])))
                for k in compress(rest, ends):
                    cls[k] = END
                rest = [k for k, e in zip(rest, ends) if not e]
            for search in self._cont_search:  # a line matched by one pattern is not searched again
                if not rest:
                    break
                found = list(map(bool, map(search, [new[k] for k in rest])))
                for k in compress(rest, found):
                    cls[k] = CONT
                rest = [k for k, f in zip(rest, found) if not f]
            memo.update(zip(new, cls))
        return bytes(map(memo.__getitem__, bodies))

    def find(self, view: TextView, budget: float):
        spec = self.spec
        out = []
        cand = self._lines(view)
        if cand is None:
            cand = range(len(view.lines))
        t0 = time.process_time()
        nlines = len(view.lines)
        covered_until = -1
        start = self.start
        start_search = start.search
        all_lines = view.lines
        pre = view.prefix_at
        starts = view.starts
        text_end = len(view.text) + 1  # where a line after the last one would start
        # many candidate lines (a long trace): the start pattern is tried on a chunk of them at once
        chunked = len(cand) >= BULK_START_MIN
        marked = b""  # the start pattern on the chunk of candidates cand[chunk_lo:chunk_end]
        chunk_lo = chunk_end = 0
        chunk = BULK_START_CHUNK
        start_memo: dict[str, int] = {}  # line body -> does the start pattern match (1/0)
        line_memo: dict[str, int] = {}  # line body -> its class in a block (see _window)
        ncand = len(cand)
        nxt_n = 0
        while nxt_n < ncand:
            n = nxt_n
            i = cand[n]
            if i <= covered_until:  # inside the last block: go to the first candidate after it
                nxt_n = bisect_right(cand, covered_until, n + 1)
                continue
            nxt_n = n + 1
            if n & 127 == 127 and time.process_time() - t0 > budget:
                raise RuleTimeout(self.id)
            try:
                hit = None
                if chunked:
                    if n >= chunk_end:
                        chunk_end = min(ncand, n + chunk)
                        chunk = min(chunk * 2, BULK_START_CHUNK_MAX)  # no block start yet: longer chunks
                        marked, chunk_lo = self._start_marks(view, cand[n:chunk_end], start_memo), n
                        if time.process_time() - t0 > budget:
                            raise RuleTimeout(self.id)
                    # on to the next candidate of the chunk that starts a block (or may)
                    m = _NOT_ZERO.search(marked, n - chunk_lo)
                    if m is None:
                        nxt_n = chunk_end
                        continue
                    if chunk_lo + m.start() != n:
                        nxt_n = chunk_lo + m.start()
                        continue
                    hit = True if marked[n - chunk_lo] == 1 else None
                    chunk = BULK_START_CHUNK
                if hit is None:
                    head = all_lines[i] if pre is None or not pre[i] else all_lines[i][pre[i]:]  # view.body(i)
                    hit = (start_search(head) if len(head) <= 4096 else _search_line(start, head, budget)) is not None
                if not hit:
                    continue
                first = i
                # lines before the header that belong to it (e.g. Node's source-context preamble)
                if self.before:
                    j = i - 1
                    while j >= 0 and i - j <= spec.max_before and j > covered_until:
                        body = view.body(j)
                        if any(p.search(body[:LONG_LINE]) for p in self.before):
                            first = j
                            j -= 1
                        else:
                            break
                last = i
                size = len(view.lines[i])
                j = i + 1
                blanks = 0
                gaps = 0
                ended = False
                if self.end is not None and _search_line(self.end, view.body(i), budget) is not None and i > first:
                    ended = True
                # the continuation lines of a long trace: this loop runs once per frame, so the
                # short-line case calls the compiled searches directly; past BULK_AFTER lines the
                # block is classified a window of lines at a time (each distinct line once, the
                # searches called from C) and a run of continuation lines is taken in one step
                lines = view.lines
                prefix = view.prefix_at
                end_pat = self.end
                end_search = end_pat.search if end_pat is not None else None
                cont_search = self._cont_search
                lo = hi = 0  # the classified window: lines lo..hi-1
                window = BULK_WINDOW
                while not ended and j < nlines and j - first < spec.max_lines and size < spec.max_bytes:
                    if lo <= j < hi:
                        k = j - lo
                        c = w_cls[k]
                        if c == BLANK:
                            blanks += 1
                            if blanks > spec.allow_blank:
                                break
                            j += 1
                            continue
                        if c == END:
                            last = j
                            ended = True
                            break
                        if c == CONT:
                            # a run of continuation lines, up to the line or byte limit
                            other = _NOT_CONT.search(w_cls, k)
                            stop = min(hi if other is None else lo + other.start(), first + spec.max_lines)
                            # line t is taken while the size before it, size + starts[t] - starts[j],
                            # is below max_bytes (line j is: the loop condition held)
                            stop = bisect_left(starts, spec.max_bytes - size + starts[j], j + 1, stop)
                            nxt = starts[stop] if stop < nlines else text_end
                            size += nxt - starts[j]
                            last = stop - 1
                            blanks = 0
                            gaps = 0
                            j = stop
                            continue
                        gaps += 1
                        if gaps > spec.allow_gap:
                            break
                        size += len(lines[j]) + 1
                        j += 1
                        continue
                    if j - i > BULK_AFTER:
                        cap = min(nlines, j + window, first + spec.max_lines)
                        hi = cap
                        if max(map(len, lines[j:cap])) > 4096:  # short lines only (long ones: line by line)
                            hi = j
                            while hi < cap and len(lines[hi]) <= 4096:
                                hi += 1
                        if hi > j:
                            w_cls = self._window(view, j, hi, line_memo)
                            lo = j
                            window = min(window * 2, BULK_WINDOW_MAX)
                            if time.process_time() - t0 > budget:
                                raise RuleTimeout(self.id)
                            continue
                    body = lines[j] if prefix is None or not prefix[j] else lines[j][prefix[j]:]
                    # the line's class as _window decides it, kept for its body (each distinct
                    # short body is classified once: a trace printed again repeats its frames)
                    c = line_memo.get(body)
                    if c is None:
                        if not body or body.isspace():
                            c = BLANK
                        else:
                            short = len(body) <= 4096
                            if end_pat is not None and (end_search(body) if short else
                                                        _search_line(end_pat, body, budget)) is not None:
                                c = END
                            elif short:
                                c = 0
                                for search in cont_search:
                                    if search(body) is not None:
                                        c = CONT
                                        break
                            else:
                                c = CONT if self._continues(body, budget) else 0
                        if len(body) <= 4096:
                            line_memo[body] = c
                    if c == BLANK:
                        blanks += 1
                        if blanks > spec.allow_blank:
                            break
                        j += 1
                        continue
                    if c == END:
                        last = j
                        ended = True
                        break
                    if c == CONT:
                        last = j
                        size += len(view.lines[j]) + 1
                        blanks = 0
                        gaps = 0
                        j += 1
                        if n & 127 == 0 and (j & 1023) == 0 and time.process_time() - t0 > budget:
                            raise RuleTimeout(self.id)
                        continue
                    # a non-matching line: tolerated (like a blank) only if a continue line follows
                    gaps += 1
                    if gaps > spec.allow_gap:
                        break
                    size += len(view.lines[j]) + 1
                    j += 1
            except TimeoutError:
                raise RuleTimeout(self.id) from None
            if last - first + 1 < spec.min_lines or (spec.min_lines > 1 and not _has_lines(view, first, last, spec.min_lines)):
                continue
            a = view.starts[first]
            b = view.starts[last] + len(view.lines[last])
            out.append((a, b, first, last, spec.long_trace))
            covered_until = last
        return out


BULK_AFTER = 16  # continuation lines searched one by one before a block is classified in windows
# lines in a block's first classified window; each next one doubles, up to BULK_WINDOW_MAX. Small:
# the lines of a window past the block's end are classified for nothing (the JVM traces of a Maven
# log run about 70 lines; a first window of 256 lines classified some 200 lines after each)
BULK_WINDOW = 64
BULK_WINDOW_MAX = 16_384
BULK_START_MIN = 64  # candidate lines from which the start pattern is tried a chunk at a time
BULK_START_CHUNK = 256  # candidates in a chunk after a block start; doubling while none starts, up to
BULK_START_CHUNK_MAX = 8192


CONT, BLANK, END = 1, 2, 3  # classes of a line inside a block (LineBlockRule._window)
# (called as ``_NOT_CONT.search``: the compiled pattern's own method once compiled; a bound method
# taken at import would stay the compiling stand-in, a Python call more each time, ~1 us)
_NOT_CONT = lazy_re(b"[^\x01]")  # the first line of a window, from k, that is not CONT
_NOT_ZERO = lazy_re(b"[^\x00]")  # the first candidate of a chunk, from k, that may start a block


def _branch_table(pattern: str, flags: int) -> list[list] | None:
    """``RegexRule.branches`` of a pattern (see there)."""
    split = split_cached(pattern, flags)
    if split is None or sum(br.literals is None for br in split) > 1:
        return None
    out = []
    for br in split:
        lits = br.literals or []
        cs = tuple(lit for lit, ci in lits if not ci)
        ci = tuple(lit.lower() for lit, ci in lits if ci)
        out.append([None, br.source, cs, ci, br.literals is not None])
    # the ungated branch last: a line matched by a gated one is not searched again
    out.sort(key=lambda b: not b[4])
    return out


def _lines_matching(view: TextView, cand: list[int], branches: list[list], flags: int, gate, budget: float,
                    t0: float, rule_id: str) -> list[int]:
    """The candidate lines (ascending) whose body one of ``branches`` matches (see
    ``RegexRule.branches``), searched branch by branch: the candidate lines are joined once, each
    branch's literals are found in that text with ``str.find`` and the branch is searched on those
    lines only; a line already matched is not searched again. ``gate``, if given, must also match.

    Each distinct body is searched once (whether a body matches depends on it alone): CI logs
    repeat lines, and the candidates of the real CI logs hold 1.5 to 2.3 lines per distinct body."""
    bodies = view.bodies(cand)
    distinct = list(dict.fromkeys(bodies))
    if gate is not None:
        # the gate first, on every distinct body, each of its alternatives from C: it rules out
        # most of them, and the branches (and their literals) are then tried on the few it lets through
        parts = gate.parts if isinstance(gate, _AnyOf) else [gate]  # (each searched from C)
        passed = _bodies_matching(distinct, [[p, None, (), (), False] for p in parts], flags, None, budget, t0, rule_id)
        distinct = list(compress(distinct, passed))
        gate = None
    if len(distinct) == len(bodies):
        return list(compress(cand, _bodies_matching(bodies, branches, flags, gate, budget, t0, rule_id)))
    matched = _bodies_matching(distinct, branches, flags, gate, budget, t0, rule_id)
    hit = set(compress(distinct, matched))
    return [i for i, body in zip(cand, bodies) if body in hit]


def _bodies_matching(bodies: list[str], branches: list[list], flags: int, gate, budget: float, t0: float,
                     rule_id: str) -> bytearray:
    """For each of ``bodies``, 1 if one of ``branches`` (and ``gate``, if given) matches it, else 0
    (see ``_lines_matching``)."""
    joined = hay = jstarts = None
    if any(br[4] for br in branches):  # (a branch has literals to look up)
        joined = "\n".join(bodies)
        jstarts = line_starts(bodies)
        # ASCII literals are found in one byte per character (same offsets; characters outside
        # Latin-1 become '?', which can only add candidate lines): str.find on text with wide
        # characters is slow
        hay = joined if joined.isascii() else joined.encode("latin-1", "replace")
    low = None  # ASCII-lowered joined text (same offsets), for case-insensitive literals
    wide: list[int] | None = None  # the non-ASCII candidate lines
    ncand = len(bodies)
    matched = bytearray(ncand)
    gated_out = bytearray(ncand)  # 1: the gate was tried and failed, 2: it passed
    searches = 0
    orders: list[Iterable[int]] = []
    holding: dict[tuple[str, bool], list[int]] = {}  # literal -> candidate lines (branches share some)
    for br in branches:
        pat, _src, cs, ci, has_lits = br
        if has_lits:
            ks: set[int] = set()
            for lit in cs:
                got = holding.get((lit, False))
                if got is None:
                    if lit.isascii():
                        got = lines_holding(hay, jstarts, _in(hay, lit))
                    else:
                        got = lines_holding(joined, jstarts, lit)
                    holding[(lit, False)] = got
                ks.update(got)
            if ci:
                if wide is None:
                    wide = [] if joined.isascii() else non_ascii_lines(bodies)
                if low is None:
                    low = joined.lower() if joined.isascii() else joined.encode("latin-1", "replace").lower()
                for lit in ci:
                    if lit.isascii():  # a non-ASCII literal is never in a lowered ASCII line
                        got = holding.get((lit, True))
                        if got is None:
                            got = holding[(lit, True)] = lines_holding(low, jstarts, _in(low, lit))
                        ks.update(got)
                ks.update(wide)
            orders.append(sorted(ks))
        else:
            orders.append(range(ncand))
    # the lines longer than 4096 characters, searched one by one with the time limit
    long_bodies = {k for k, n in enumerate(map(len, bodies)) if n > 4096} if max(map(len, bodies), default=0) > 4096 \
        else None
    for br, order in zip(branches, orders):
        todo = list(filterfalse(matched.__getitem__, order))
        if not todo:
            continue
        if br[0] is None:  # compiled on first use: most branches never find their literal
            br[0] = _compile(br[1], flags)
        pat = br[0]
        if long_bodies:
            searches = _search_each(bodies, [k for k in todo if k in long_bodies], pat, gate, gated_out, matched,
                                    budget, t0, rule_id, searches)
            todo = [k for k in todo if k not in long_bodies]
        # short lines: the gate and the branch called from C, a chunk at a time (the time limit
        # is checked between chunks, as often as the line-by-line loop checked it)
        for lo in range(0, len(todo), 256):
            if searches and time.process_time() - t0 > budget:
                raise RuleTimeout(rule_id)
            ks = todo[lo:lo + 256]
            if gate is not None:
                new = [k for k in ks if not gated_out[k]]
                if new:
                    for k, m in zip(new, map(gate.search, [bodies[k] for k in new])):
                        gated_out[k] = 1 if m is None else 2
                ks = [k for k in ks if gated_out[k] == 2]
            searches += len(ks)
            for k, m in zip(ks, map(pat.search, [bodies[k] for k in ks])):
                if m is not None:
                    matched[k] = 1
    return matched


def _search_each(bodies: list[str], todo: list[int], pat, gate, gated_out: bytearray, matched: bytearray,
                 budget: float, t0: float, rule_id: str, searches: int) -> int:
    """``_bodies_matching``'s search of one branch on the lines longer than 4096 characters, one
    by one with the time limit; returns the searches made so far."""
    for k in todo:
        body = bodies[k]
        try:
            if gate is not None:
                if not gated_out[k]:
                    gated_out[k] = 1 if _search_line(gate, body, budget) is None else 2
                if gated_out[k] == 1:
                    continue
            searches += 1
            if searches & 255 == 255 and time.process_time() - t0 > budget:
                raise RuleTimeout(rule_id)
            m = _search_line(pat, body, budget)
        except TimeoutError:
            raise RuleTimeout(rule_id) from None
        if m is not None:
            matched[k] = 1
    return searches


def _has_lines(view: TextView, first: int, last: int, need: int) -> bool:
    """min_lines counts lines with content: blank lines picked up around a lone match don't count."""
    for k in range(first, last + 1):
        if view.lines[k].strip():
            need -= 1
            if need <= 0:
                return True
    return False


_SENTENCE_END = lazy_regex(r"[.!?;。！？；]\s|[。！？；]|\n")


class LiteralRule(CompiledRule):
    def __init__(self, rule: Rule):
        super().__init__(rule)
        spec = rule.literal
        assert spec is not None
        self.spec = spec
        self.require = [r.lower() for r in spec.require_any]
        self.exclude = [r.lower() for r in spec.exclude]
        if not self.prefilter:
            # the words themselves are the prefilter
            self.prefilter = list(spec.words)
            self.ignore_case = not spec.case_sensitive

    @cached_property
    def _alts(self) -> str:
        import regex

        spec = self.spec
        alts = []
        for w in sorted(set(spec.words), key=lambda w: (-len(w), w)):
            e = regex.escape(w)
            if spec.whole_word and w.isascii() and w[:1].isalnum():
                e = r"\b" + e
            if spec.whole_word and w.isascii() and w[-1:].isalnum():
                e = e + r"\b"
            alts.append(e)
        return "(?:" + "|".join(alts) + ")"

    @cached_property
    def pat(self) -> regex.Pattern:  # compiled on first use, like the other kinds (and so is its alternation)
        return _compile(self._alts, 0 if self.spec.case_sensitive else FLAG_NAMES["IGNORECASE"])

    def find(self, view: TextView, budget: float):
        spec = self.spec
        out = []
        t0 = time.process_time()
        last_end = -1
        for n, i in enumerate(view.candidates(self.prefilter, self.ignore_case)):
            if n & 255 == 255 and time.process_time() - t0 > budget:
                raise RuleTimeout(self.id)
            line = view.lines[i]
            base = view.starts[i]
            try:
                matches = list(self.pat.finditer(line[:LONG_LINE], timeout=budget)) if len(line) > 4096 \
                    else list(self.pat.finditer(line))
            except TimeoutError:
                raise RuleTimeout(self.id) from None
            seen_until = -1
            for m in matches:
                if m.start() < seen_until:
                    continue  # inside a sentence (or line) already looked at: one span per sentence
                if spec.scope == "word":
                    a, b = m.start(), m.end()
                elif spec.scope == "line":
                    a, b = 0, len(line)
                else:
                    a, b = _sentence(line, m.start(), m.end())
                seen_until = b
                # a sentence that starts where the last one ended is a new sentence (Chinese
                # punctuation is not followed by a space): only one that starts inside it is not
                if base + a < last_end:
                    continue
                sentence = line[a:b].lower()
                if self.require and not any(r in sentence for r in self.require):
                    continue
                if self.exclude and any(x in sentence for x in self.exclude):
                    continue
                out.append((base + a, base + b, i, i, False))
                last_end = base + b
        return out


_SENTENCE_END_BACK = lazy_regex(r"(?r)[.!?;。！？；]\s|[。！？；]|\n")


def _sentence(line: str, a: int, b: int) -> tuple[int, int]:
    # the nearest sentence end before the match, searched backwards from it (a forward scan from the
    # line start for every match was quadratic on long single-line texts)
    m = _SENTENCE_END_BACK.search(line, 0, a)
    start = m.end() if m else 0
    m = _SENTENCE_END.search(line, b)
    end = m.start() + 1 if m else len(line)
    if m and line[m.start()] in "\n":
        end = m.start()
    # trim whitespace and list bullets
    while start < end and line[start] in " \t-*>":
        start += 1
    while end > start and line[end - 1] in " \t":
        end -= 1
    return start, end


_COMPILED: dict[tuple[str, str], CompiledRule] = {}


def compile_rule(rule: Rule) -> CompiledRule:
    """Compile once per process (keyed by the rule's full content, so edited rules recompile).
    ``rule`` is a typed :class:`Rule` or its plain :class:`~.records.Record` (which carries
    its content key); patterns are compiled when first used."""
    key = getattr(rule, "content_key", None) or (rule.id, rule.model_dump_json())
    cr = _COMPILED.get(key)
    if cr is None:
        cr = _COMPILED[key] = _compiled(rule)
    return cr


def _compiled(rule: Rule) -> CompiledRule:
    if rule.kind == "regex":
        return RegexRule(rule)
    if rule.kind == "line-block":
        return LineBlockRule(rule)
    if rule.kind == "literal":
        return LiteralRule(rule)
    raise ValueError(f"rule {rule.id}: kind {rule.kind!r} is not a scanning kind")


_SCANNERS: dict[tuple, LiteralScanner] = {}


def literal_scanner(rules: list[CompiledRule], engine: str | None = None) -> LiteralScanner:
    """One multi-literal scanner per set of prefilter literals and whole-text gates (compiled
    once per process)."""
    lits = tuple(sorted({literal_key(lit, cr.ignore_case) for cr in rules for lit in cr.prefilter if lit}
                        | {literal_key(tag, False) for tag in ENGINE_PREFIXES}))  # TextView.prefix reads these
    gates = tuple(sorted({g for cr in rules if (g := getattr(cr, "text_gate", None)) is not None}))
    # the rule ids too: the approximations come from the rules, and are worked out only later (a
    # rule edited under the same id finds its own approximation missing and runs on its literals)
    key = (lits, gates, engine, tuple(cr.id for cr in rules))
    sc = _SCANNERS.get(key)
    if sc is None:
        # rules' approximate patterns: those of prefiltered rules narrow their candidate lines;
        # a whole-text rule's, when its matches lie within lines, replace the whole-text search
        def approx() -> list[str]:  # worked out only if hyperscan is used
            return sorted({cr.approx for cr in rules if cr.approx is not None
                           and (cr.prefilter or (getattr(cr, "text_gate", 0) is None and cr.approx_local))})

        def covered(scanned: set[str]) -> set[tuple[str, bool]]:
            """The literals whose every rule has its approximation among ``scanned`` (see
            ``CompiledRule._lines``); the log prefixes ``TextView.prefix`` reads are kept."""
            ok: dict[tuple[str, bool], bool] = {}
            for cr in rules:
                has = cr.approx is not None and cr.approx in scanned
                for k in cr.literal_keys:
                    ok[k] = ok.get(k, True) and has
            return {k for k, v in ok.items() if v} - {literal_key(tag, False) for tag in ENGINE_PREFIXES}

        sc = _SCANNERS[key] = LiteralScanner(list(lits), engine, list(gates), approx, covered)
    return sc


_PLANS: dict[tuple, tuple] = {}


def _plan(rules: list[CompiledRule], role: str | None, engine: str | None) -> tuple:
    """(the rules, the rules for the role, their literal scanner, the positions of those rules by
    literal key, the positions of the rules without literals), worked out once per list of rules,
    role and engine: a turn of a session detects a few short texts, and the ~500 literal keys of
    the rules are not worked out again for each. A list changed in place is seen (its rules are
    compared, by identity first)."""
    snap = tuple(rules)
    key = (id(rules), role, engine)
    got = _PLANS.get(key)
    if got is not None and got[0] == snap:
        return got
    mine = [cr for cr in rules if role is None or role in cr.roles]
    by_key: dict[tuple[str, bool], list[int]] = {}
    always: list[int] = []
    for i, cr in enumerate(mine):
        if cr.prefilter:
            for lit in cr.prefilter:
                by_key.setdefault(literal_key(lit, cr.ignore_case), []).append(i)
        else:
            always.append(i)
    if len(_PLANS) >= 64:
        _PLANS.clear()
    got = _PLANS[key] = (snap, mine, literal_scanner(mine, engine), by_key, tuple(always), {})
    return got


def _by_approx(rules: list[CompiledRule], scanner: LiteralScanner) -> dict:
    """The positions of the rules by the key of their approximation, for the rules naming a
    literal the scanner skips (such a rule is called when its approximation is found)."""
    skipped = {key for key, _, _ in scanner.skipped}
    out: dict = {}
    for i, cr in enumerate(rules):
        if cr.approx is not None and not skipped.isdisjoint(cr.literal_keys):
            out.setdefault(approx_key(cr.approx), []).append(i)
    return out


def prepare_engines(rules: list[CompiledRule], roles: Iterable[str | None]) -> None:
    """Make the literal scanners of ``rules`` for each of ``roles`` use their engine from the next
    text on (see ``LiteralScanner.prepare_now``)."""
    for role in roles:
        _plan(rules, role, None)[2].prepare_now()


def find_all(view: TextView, rules: list[CompiledRule], *, role: str | None = None,
             engine: str | None = None) -> tuple[list[tuple], list[str]]:
    """Run rules over a view: ``([(rule, start, end, line_start, line_end, elidable), ...],
    timed_out_rule_ids)`` as plain tuples (0-based inclusive lines), not yet resolved.

    Every prefilter literal of the rules is found in one multi-literal pass first; a rule whose
    literals occur nowhere in the text is not called at all (nor looked at: the rules to call
    come from the literals found)."""
    _snap, rules, scanner, by_key, always, lazy = _plan(rules, role, engine)
    keys = scanner.scan(view)
    if keys is None:  # the view was searched for them before: its cache says which are there
        keys = scanner.found_keys(view, by_key)
    if scanner.skipped:  # the approximations found stand for the literals the scan skipped
        merged = lazy.get("by_key")
        if merged is None:
            merged = lazy["by_key"] = {**by_key, **_by_approx(rules, scanner)}
        by_key = merged
    run = set(always)
    for k in keys:
        run.update(by_key.get(k, ()))
    found: list[tuple] = []
    timeouts: list[str] = []
    mb = len(view.text) / 1_048_576
    budget = BASE_BUDGET + PER_MB * mb
    for i in sorted(run):
        cr = rules[i]
        try:
            res = cr.find(view, budget)
        except RuleTimeout:
            timeouts.append(cr.id)
            continue
        found.extend(map((cr,).__add__, res))  # (cr, a, b, ls, le, elidable), no Python loop
    return found, timeouts


def scan(view: TextView, rules: list[CompiledRule], *, role: str | None = None,
         segment_id: str | None = None, step_id: str | None = None, engine: str | None = None):
    """Run rules over a view. Returns (spans, timed_out_rule_ids). Spans are not yet resolved.

    The frozen :class:`Span` models are built here, at the edge, from the plain tuples of
    :func:`find_all`."""
    found, timeouts = find_all(view, rules, role=role, engine=engine)
    return make_spans(view.text, found, segment_id, step_id), timeouts


def make_spans(text: str, found: list[tuple], segment_id: str | None = None,
               step_id: str | None = None) -> list[Span]:
    """Frozen :class:`Span` models from :func:`find_all` tuples (1-based lines) over ``text``."""
    return [_make_span(cr.id, cr.family, segment_id, a, b, ls + 1, le + 1, text[a:b], cr.priority, step_id)
            for cr, a, b, ls, le, elidable in found]


_SPAN: type | None = None  # models.Span, imported when the first span is made


def _span_class() -> type:
    global _SPAN
    from ..models import Span

    _SPAN = Span
    return Span


def _make_span(rule_id, family, segment_id, start, end, line_start, line_end, text, priority, step_id) -> Span:
    """A frozen Span from values detection produced itself (already the right types)."""
    return (_SPAN or _span_class())(rule_id=rule_id, family=family, segment_id=segment_id, start=start, end=end,
                                    line_start=line_start, line_end=line_end, text=text, priority=priority,
                                    step_id=step_id)


def _order_key(s: Span):
    return (-s.priority, -(s.end - s.start), s.start, s.rule_id)


class _Disjoint:
    """Accepted, pairwise disjoint intervals sorted by start, kept in chunks so that an insert
    costs O(sqrt n), not O(n): 100k spans on a long trace made one flat sorted list quadratic."""

    CHUNK = 512

    def __init__(self) -> None:
        self.firsts: list[int] = []  # first start of each chunk
        self.starts: list[list[int]] = []
        self.ends: list[list[int]] = []

    def add_if_free(self, a: int, b: int) -> bool:
        """Insert [a, b) unless it overlaps an accepted interval; True if inserted."""
        firsts = self.firsts
        if not firsts:
            firsts.append(a)
            self.starts.append([a])
            self.ends.append([b])
            return True
        c = bisect_right(firsts, a) - 1
        if c < 0:
            c = 0
        starts, ends = self.starts[c], self.ends[c]
        k = bisect_right(starts, a)
        # the interval before (in this chunk, or the last of the previous one) must end by a
        if k > 0:
            if ends[k - 1] > a:
                return False
        elif c > 0 and self.ends[c - 1][-1] > a:
            return False
        # the interval after (in this chunk, or the first of the next one) must start at or after b
        if k < len(starts):
            if starts[k] < b:
                return False
        elif c + 1 < len(firsts) and firsts[c + 1] < b:
            return False
        starts.insert(k, a)
        ends.insert(k, b)
        if k == 0:
            firsts[c] = a
        if len(starts) > self.CHUNK:
            half = len(starts) // 2
            self.starts[c:c + 1] = [starts[:half], starts[half:]]
            self.ends[c:c + 1] = [ends[:half], ends[half:]]
            firsts[c:c + 1] = [starts[0], starts[half]]
        return True


FLAT_MAX = 4096  # up to this many spans one flat sorted list is cheapest; beyond, chunks


def accept_disjoint(items: list, bounds) -> list:
    """Greedy acceptance over ``items`` already in priority order; ``bounds(item) -> (a, b)``:
    an item is kept unless it is empty or overlaps one kept before (the detect and secret stages
    resolve overlaps with it)."""
    accepted = []
    if len(items) <= FLAT_MAX:
        starts: list[int] = []
        ends: list[int] = []
        for it in items:
            a, b = bounds(it)
            if a == b:
                continue
            k = bisect_right(starts, a)
            if k > 0 and ends[k - 1] > a:
                continue
            if k < len(starts) and starts[k] < b:
                continue
            starts.insert(k, a)
            ends.insert(k, b)
            accepted.append(it)
        return accepted
    taken = _Disjoint()
    for it in items:
        a, b = bounds(it)
        if a != b and taken.add_if_free(a, b):
            accepted.append(it)
    return accepted


def resolve_spans(spans: list[Span]) -> list[Span]:
    """Make spans non-overlapping by a total order: priority, length, start, rule id.

    A span that overlaps one already accepted is dropped from the list; the region stays
    protected because the accepted span covers it or the caller protects the union of lines.
    """
    accepted = accept_disjoint(sorted(spans, key=_order_key), lambda s: (s.start, s.end))
    accepted.sort(key=lambda s: (s.start, s.end, s.rule_id))
    return accepted


def _found_key(f: tuple):
    cr, a, b = f[0], f[1], f[2]
    return (-cr.priority, a - b, a, cr.id)


def resolve_found(found: list[tuple]) -> list[tuple]:
    """``resolve_spans`` on the plain tuples of :func:`find_all` (same order, same choice)."""
    accepted = accept_disjoint(sorted(found, key=_found_key), _bounds)
    accepted.sort(key=lambda f: (f[1], f[2], f[0].id))
    return accepted


def _bounds(f: tuple) -> tuple[int, int]:
    return f[1], f[2]
