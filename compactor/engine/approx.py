"""Approximate forms of rule patterns for the one-pass scan: the second tier of ``literals``.

A rule's literal prefilter says which lines *may* hold a match; on the real CI logs most of those
lines hold none ('error' is on thousands of lines, an exception header on a few dozen), and the
exact ``regex`` search on each of them is most of detection's time. Hyperscan can run every
rule's pattern in the same single pass as the literals, if the pattern is given in a form it
reads. This module turns a rule pattern into such a form: a **superset** on ASCII lines (every
line on which the exact pattern finds a match, the approximation matches too), built from the
parsed pattern:

- anchors, word boundaries and lookarounds are dropped (a condition removed only widens);
- atomic groups and possessive repeats become plain ones (backtracking finds every match a
  committed path finds, and more);
- character classes become explicit byte classes: their ASCII members as the ``regex`` module
  reads them (``\\s`` includes \\x1c-\\x1f), plus every non-ASCII byte when the class can match a
  non-ASCII character (lines with a non-ASCII character are candidates anyway: there Unicode
  case folding and classes differ from bytes);
- case-insensitive letters become ``[aA]``;
- bounded repeats above ``MAX_BOUND`` become unbounded;
- a repeat of more than one round whose body holds an alternation or a repeat becomes a run of the
  characters the body may hold (a byte class repeated), at least as long as its shortest match:
  no approximation nests repeats, so none can backtrack exponentially (``re``, which searches the
  UTF-8 approximations in ``matchers``, has no time limit);
- anything else (backreferences, conditionals, unknown constructs): no approximation, the rule
  keeps its literal prefilter alone.

Only whether a line holds a match counts, and every part of a match is on the line too, so each
alternative of the pattern is approximated on its own by the narrowest of: the alternative itself,
one stretch of it between two unbounded repeats, or the text of one of its positive lookarounds
(``[A-Z][\\w$]*+(?<=Error|Exception)`` is approximated by ``Error|Exception``); its ends are
trimmed of what a match need not show there (``^\\s*`` before ``#12 0x…``). "Narrowest" is
measured: fewest ``PROBE`` lines matched, then the longest literal head (which hyperscan finds
fastest). An alternative that needs a non-ASCII character matches no ASCII line and is not scanned
for; a pattern made only of such alternatives gets the empty approximation (``NON_ASCII_ONLY``).

The approximation is followed by ``[^\\n]*(?:\\n|$)``: hyperscan reports a pattern once per end
offset, so every match on a line ends at that line's end and the line is reported once, however
many matches it holds (the cost per line is one callback, not one per match). Every text is
scanned with a line break after its last line: ending at the end of the data (``$``), such an
expression is missed by hyperscan 0.9 on some inputs (``7[A-F][^\n]*(?:\n|$)`` finds nothing in
fifteen ``A`` and ``7A``, and finds it when a ``\n`` follows).

On UTF-8 bytes (``approximate_utf8``) a non-ASCII character is a lead byte and its continuation
bytes, which split a run of bytes into characters one way only; repeated without bound it is a
run of bytes >= 0x80. A group or an alternation at either end of the approximation is trimmed
inside too (``(?i:[^\n]*?(?:error|fail))`` starts at ``error|fail``): a search does not walk
to the line's end and back from each position.

Some approximations are *broad*: with the lookarounds gone they match almost any line (a
capitalised word, '=1', ':12'). In the scan they cost more than they save, so an approximation
that matches more than ``BROAD_PROBES`` of the bland log lines in ``PROBE`` (downloads, progress,
telemetry, stack frames, paths with line numbers) is not used. The approximations are computed
once and kept in the compiled-program cache (``programs.cached_value``).
"""

from __future__ import annotations

import re
from re import _constants as C  # noqa: N812
from re import _parser as sre

__all__ = ["FOLDS_TO_ASCII", "approximate", "approximate_utf8", "holds_ascii_fold", "implies_literal", "line_local"]

MAX_BOUND = 20  # a repeat bounded above this is approximated as unbounded
LINE_END = r"[^\n]*(?:\n|$)"  # appended: one report per line, at its end
# the approximation of a pattern that needs a non-ASCII character in every match: no ASCII line
# can match, nothing is scanned for, its candidates are the lines with a non-ASCII character
NON_ASCII_ONLY = ""

# ordinary lines of CI and tool output that are evidence for no rule; an approximation matching
# more than BROAD_PROBES of them is too broad to pay for itself in the scan
PROBE = (
    "[INFO] Downloading from central: https://repo.maven.apache.org/maven2/org/acme/lib/1.2/lib-1.2.pom",
    "[INFO] Building Acme Parent 1.0-SNAPSHOT [3/12]",
    "Downloaded from central: https://repo1.maven.org/maven2/junit/junit/4.13/junit-4.13.jar (382 kB at 1.2 MB/s)",
    "2024-05-01 10:12:33,120 INFO  [worker-3] processed batch=51 rows=3051 in 51ms",
    "Collecting requests==2.31.0 (from -r requirements.txt (line 3))",
    "  Downloading requests-2.31.0-py3-none-any.whl (62 kB)",
    "tests/test_pool.py::test_acquire PASSED                                  [ 42%]",
    "Step 4/12 : RUN apt-get install -y libpq-dev=15.4",
    "\tat org.apache.maven.surefire.booter.ForkedBooter.main(ForkedBooter.java:418)",
    "    at Object.<anonymous> (/home/runner/work/app/src/index.js:12:5)",
    "Running org.acme.PoolTest",
    "Tests run: 12, Skipped: 0, Time elapsed: 0.532 s - in org.acme.PoolTest",
    "GET /api/v1/items/42?page=3&limit=50 200 12ms - \"Mozilla/5.0 (X11; Linux x86_64)\"",
    "Compiling serde v1.0.188",
    "  + terraform init -input=false -backend-config=key=prod/app.tfstate",
    "Setting up libpq5:amd64 (15.4-0+deb12u1) ...",
    "npm WARN deprecated glob@7.2.3: Glob versions prior to v9 are no longer supported",
)
BROAD_PROBES = 0

_SPACE = frozenset(" \t\n\r\f\v\x1c\x1d\x1e\x1f")
# one non-ASCII character's UTF-8 bytes: a lead byte and its continuation bytes. A run of bytes
# splits into characters one way only, so a repeat of it cannot backtrack over the ways of
# splitting it (``(?:[ascii]|[\x80-\xff]+)*`` tried 2^n of them on n characters, and a search of
# a line of source code with "→" and deep indentation did not end)
_UTF8_CHAR = "[\\xc0-\\xff][\\x80-\\xbf]{0,3}"
# the non-ASCII characters that ``regex`` (or ``re``) matches caseless to an ASCII letter (a
# test checks every code point): an ASCII letter of a caseless pattern may match them, which no
# approximation of bytes shows, so a line holding one is taken as a candidate as it is
_ASCII_FOLD = {"\u0130": "iI", "\u0131": "iI", "\u017f": "sS", "\u212a": "kK"}
FOLDS_TO_ASCII = frozenset(_ASCII_FOLD)


def holds_ascii_fold(text: str) -> bool:
    """Does ``text`` hold a character of ``FOLDS_TO_ASCII`` (where a UTF-8 approximation
    promises nothing)?"""
    return any(c in text for c in FOLDS_TO_ASCII)
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_DIGIT = frozenset("0123456789")
_ASCII = frozenset(chr(i) for i in range(128))
_CATEGORY = {
    C.CATEGORY_DIGIT: _DIGIT, C.CATEGORY_NOT_DIGIT: _ASCII - _DIGIT,
    C.CATEGORY_WORD: _WORD, C.CATEGORY_NOT_WORD: _ASCII - _WORD,
    C.CATEGORY_SPACE: _SPACE, C.CATEGORY_NOT_SPACE: _ASCII - _SPACE,
}


class _Unsupported(Exception):
    pass


class _NonAscii(Exception):
    """The element matches only non-ASCII characters: on an ASCII line it never matches (and lines
    with a non-ASCII character are candidates anyway), so the sequence holding it needs no scan."""


def _fold(chars, icase: bool) -> set[str]:
    if not icase:
        return set(chars)
    out = set()
    for c in chars:
        out.add(c)
        for d in (c.lower(), c.upper(), *_ASCII_FOLD.get(c, "")):
            if len(d) == 1 and d.isascii():
                out.add(d)
    return out


def _byte_class(chars, wide: bool) -> str:
    """A byte class of the ASCII ``chars`` (and every non-ASCII byte if ``wide``)."""
    codes = sorted(ord(c) for c in chars if ord(c) < 128)
    parts = []
    i = 0
    while i < len(codes):
        j = i
        while j + 1 < len(codes) and codes[j + 1] == codes[j] + 1:
            j += 1
        parts.append("\\x%02x" % codes[i] if i == j else "\\x%02x-\\x%02x" % (codes[i], codes[j]))
        i = j + 1
    if wide:
        parts.append("\\x80-\\xff")
    if not parts:
        raise _Unsupported("a class that matches nothing")
    return "[" + "".join(parts) + "]"


class _Emitter:
    """Walks a parsed pattern; ``newline`` records whether the pattern (lookarounds included) can
    match or look at a newline, ``string_anchor`` whether it uses \\A or \\Z."""

    def __init__(self, strict: bool = True, utf8: bool = False) -> None:
        self.newline = False
        self.string_anchor = False
        # strict: an element that needs a non-ASCII character raises _NonAscii; otherwise (the walk
        # that only reads newlines and anchors) it stands for any non-ASCII bytes
        self.strict = strict
        # utf8: the expression reads a text's UTF-8 bytes (``approximate_utf8``): a character is
        # one ASCII byte or a run of bytes >= 0x80, so one round of a repeat stays one character
        self.utf8 = utf8

    def _wide(self, ascii_class: str | None) -> str:
        """One character of a class that can match a non-ASCII one: an ASCII member, or (UTF-8)
        a run of non-ASCII bytes (one character or more: a superset)."""
        if ascii_class is None:
            return "(?:" + _UTF8_CHAR + ")"
        return "(?:" + ascii_class + "|" + _UTF8_CHAR + ")"

    def seq(self, items, icase: bool, dotall: bool) -> str:
        out = []
        for op, av in items:
            out.append(self.item(op, av, icase, dotall))
        return "".join(out)

    def item(self, op, av, icase: bool, dotall: bool) -> str:
        if op is C.LITERAL:
            if av >= 128:
                ch = chr(av)
                # caseless, the ASCII letters it matches, in both cases ('k' and 'K' for KELVIN SIGN)
                folds = _fold(_fold({ch}, icase) - {ch}, icase) if icase else set()
                if self.utf8:
                    if not icase:
                        return "(?:" + "".join("\\x%02x" % b for b in ch.encode("utf-8", "surrogatepass")) + ")"
                    return self._wide(_byte_class(folds, False) if folds else None)
                if folds:  # (an ASCII line may hold a match: its letters)
                    return _byte_class(folds, True)
                if self.strict:
                    raise _NonAscii
                return "[\\x80-\\xff]"
            ch = chr(av)
            if ch == "\n":
                self.newline = True
            return _byte_class(_fold({ch}, icase), False)
        if op is C.NOT_LITERAL:
            if av != 10:
                self.newline = True
            members = _ASCII - _fold({chr(av)}, icase) if av < 128 else _ASCII
            if self.utf8:
                return self._wide(_byte_class(members, False))
            return _byte_class(members, True)
        if op is C.ANY:
            if dotall:
                self.newline = True
                return self._wide("[\\x00-\\x7f]") if self.utf8 else "[\\x00-\\xff]"
            return self._wide("[\\x00-\\x09\\x0b-\\x7f]") if self.utf8 else "[^\\n]"
        if op is C.IN:
            members, wide = self._members(av, icase)
            if "\n" in members:
                self.newline = True
            if self.utf8 and wide:
                return self._wide(_byte_class(members, False) if members else None)
            if not members and self.strict:
                raise _NonAscii
            return _byte_class(members, wide)
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            lo, hi, sub = av
            try:
                inner = self.seq(sub, icase, dotall)
            except _NonAscii:
                if lo == 0:
                    return ""  # on an ASCII line it repeats zero times
                raise
            unbounded = hi is C.MAXREPEAT or hi > MAX_BOUND
            if (hi != 1 and not _plain(sub)) or (self.utf8 and unbounded and len(sub) == 1):
                # a repeat (of more than one round) of alternatives or of repeats ('(?:\\w+\\s?)+',
                # '(?:\\.\\d+){0,3}') can match one text in many ways, and a backtracking search tries every one of them
                # (exponentially many with nested unbounded repeats); as a run of the characters
                # it may hold, at least as long as its shortest match, it matches each text one
                # way. So does a UTF-8 character repeated without bound: a run of its bytes.
                return self._run(sub, lo, icase, dotall)
            if unbounded:
                lo = min(lo, MAX_BOUND)
                q = "*" if lo == 0 else "+" if lo == 1 else "{%d,}" % lo
            elif (lo, hi) == (0, 1):
                q = "?"
            else:
                q = "{%d}" % lo if lo == hi else "{%d,%d}" % (lo, hi)
            return "(?:" + inner + ")" + q
        if op is C.SUBPATTERN:
            _group, add, dele, sub = av
            ic = (icase or bool(add & re.IGNORECASE)) and not (dele & re.IGNORECASE)
            da = (dotall or bool(add & re.DOTALL)) and not (dele & re.DOTALL)
            return "(?:" + self.seq(sub, ic, da) + ")"
        if op is C.ATOMIC_GROUP:
            return "(?:" + self.seq(av, icase, dotall) + ")"
        if op is C.BRANCH:
            alts = []
            for b in av[1]:
                try:
                    alts.append(self.seq(b, icase, dotall))
                except _NonAscii:
                    pass  # an alternative that needs a non-ASCII character: nothing to scan for
            if not alts:
                raise _NonAscii
            return "(?:" + "|".join(alts) + ")"
        if op is C.AT:
            if av in (C.AT_BEGINNING_STRING, C.AT_END_STRING):
                self.string_anchor = True
            return ""  # anchors and word boundaries: dropped
        if op in (C.ASSERT, C.ASSERT_NOT):
            if not self.strict:
                self.seq(av[1], icase, dotall)  # only to learn whether it can look at a newline
            return ""  # dropped (a positive one's text may be chosen instead: _sequence)
        raise _Unsupported(str(op))

    def _run(self, sub, lo: int, icase: bool, dotall: bool) -> str:
        """A run of the characters ``sub`` may match (a byte class: their ASCII members, and every
        non-ASCII byte when one may be non-ASCII), at least as long as ``lo`` of its shortest
        matches: a superset of ``sub`` repeated ``lo`` times or more, with no nested repeat."""
        chars, wide, least = self._chars(sub, icase, dotall)
        if not chars and not wide:
            return ""  # (zero-width only: it matches where it stands)
        n = min(lo * least, MAX_BOUND)
        q = "*" if n == 0 else "+" if n == 1 else "{%d,}" % n
        return _byte_class(chars, wide) + q

    def _chars(self, items, icase: bool, dotall: bool) -> tuple[set[str], bool, int]:
        """(the ASCII characters a match of ``items`` may hold, may it hold a non-ASCII one, the
        length of its shortest match)."""
        chars: set[str] = set()
        wide = False
        least = 0
        for op, av in items:
            if op is C.LITERAL:
                ch = chr(av)
                if av < 128:
                    chars |= _fold({ch}, icase)
                else:
                    wide = True
                    if icase:
                        chars |= _fold(_fold({ch}, True) - {ch}, True)
                least += 1
            elif op is C.NOT_LITERAL:
                chars |= _ASCII - _fold({chr(av)}, icase) if av < 128 else _ASCII
                wide = True
                least += 1
            elif op is C.ANY:
                chars |= _ASCII if dotall else _ASCII - {"\n"}
                wide = True
                least += 1
            elif op is C.IN:
                m, w = self._members(av, icase)
                chars |= m
                wide = wide or w
                least += 1
            elif op in _REPEATS:
                c, w, n = self._chars(av[2], icase, dotall)
                chars |= c
                wide = wide or w
                least += av[0] * n
            elif op is C.SUBPATTERN:
                _group, add, dele, sub = av
                ic = (icase or bool(add & re.IGNORECASE)) and not (dele & re.IGNORECASE)
                da = (dotall or bool(add & re.DOTALL)) and not (dele & re.DOTALL)
                c, w, n = self._chars(sub, ic, da)
                chars |= c
                wide = wide or w
                least += n
            elif op is C.ATOMIC_GROUP:
                c, w, n = self._chars(av, icase, dotall)
                chars |= c
                wide = wide or w
                least += n
            elif op is C.BRANCH:
                got = [self._chars(b, icase, dotall) for b in av[1]]
                for c, w, _n in got:
                    chars |= c
                    wide = wide or w
                least += min(n for _c, _w, n in got)
            elif op in (C.AT, C.ASSERT, C.ASSERT_NOT):
                pass  # zero-width (dropped)
            else:
                raise _Unsupported(str(op))
        return chars, wide, least

    def _members(self, items, icase: bool) -> tuple[set[str], bool]:
        negate = False
        members: set[str] = set()
        wide = False
        for o, a in items:
            if o is C.NEGATE:
                negate = True
            elif o is C.LITERAL:
                if a < 128:
                    members |= _fold({chr(a)}, icase)
                else:
                    wide = True
                    if icase:  # (the ASCII letters it matches caseless)
                        members |= _fold(_fold({chr(a)}, True) - {chr(a)}, True)
            elif o is C.RANGE:
                lo, hi = a
                members |= _fold({chr(x) for x in range(lo, min(hi, 127) + 1)}, icase)
                if hi >= 128:
                    wide = True
                    if icase:  # (the ASCII letters the non-ASCII members match caseless)
                        members |= _fold({c for c in _ASCII_FOLD if lo <= ord(c) <= hi}, True) - FOLDS_TO_ASCII
            elif o is C.CATEGORY and a in _CATEGORY:
                members |= _CATEGORY[a]
                wide = True  # \w, \d, \s and their negations also match non-ASCII characters
            else:
                raise _Unsupported(str(o))
        if negate:
            return set(_ASCII - members), True
        return members, wide


def _analyse(pattern: str, flags: int, utf8: bool = False) -> tuple[str | None, bool]:
    """(approximation without the line end, line-local?); the approximation is None when there is
    none, ``_NEEDS_NON_ASCII`` when every match needs a non-ASCII character."""
    try:
        tree = sre.parse(pattern, flags & (re.IGNORECASE | re.MULTILINE | re.DOTALL | re.VERBOSE))
    except (re.error, RecursionError, OverflowError, ValueError, TypeError):
        return None, False
    f = tree.state.flags
    icase, dotall = bool(f & re.IGNORECASE), bool(f & re.DOTALL)
    walk = _Emitter(strict=False)
    try:
        walk.seq(list(tree), icase, dotall)
    except (_Unsupported, KeyError, RecursionError):
        return None, False
    local = not walk.newline and not walk.string_anchor
    items = list(tree)
    # a group around the whole pattern ('(?:A|B|C)') is read as its alternatives, and so is an
    # alternation behind anchors ('^A|^B' is parsed as '^(?:A|B)')
    while True:
        core = [it for it in items if it[0] is not C.AT]
        if len(core) == 1 and core[0][0] is C.SUBPATTERN:
            _group, add, dele, sub = core[0][1]
            icase = (icase or bool(add & re.IGNORECASE)) and not (dele & re.IGNORECASE)
            dotall = (dotall or bool(add & re.DOTALL)) and not (dele & re.DOTALL)
            items = list(sub)
            continue
        break
    branches = core[0][1][1] if len(core) == 1 and core[0][0] is C.BRANCH else [items]
    alts = []
    for branch in branches:
        e = _sequence(list(branch), icase, dotall, utf8)
        if e is None:
            return None, local
        if e != _NEEDS_NON_ASCII:
            alts.append(e)
    if not alts:
        return _NEEDS_NON_ASCII, local
    return (alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"), local


def _sequence(items, icase: bool, dotall: bool, utf8: bool = False) -> str | None:
    """The approximation of one alternative. Every part of a match is on the line too, so any of
    these is a superset: the sequence with its lookarounds dropped, a stretch of it between two
    unbounded repeats ('#\\d+\\s+\\S[^\\n]* \\(' has ' \\(' after its '[^\\n]*'), or the text of
    one of its positive lookarounds ('[A-Z][\\w$]*+(?<=Error|Exception)': 'Error|Exception' is far
    narrower than a capitalised word). The one chosen matches the fewest ``PROBE`` lines, then
    starts with the longest literal (hyperscan finds those fastest), then comes first."""
    parts: list[list] = [items]
    run: list = []
    for op, av in items:
        if op in _REPEATS and av[1] is C.MAXREPEAT:
            if run:
                parts.append(run)
            run = []
        else:
            run.append((op, av))
    if run and len(run) < len(items):
        parts.append(run)
    parts += [list(av[1]) for op, av in items if op is C.ASSERT]
    options: list[tuple[str, int]] = []
    for k, part in enumerate(parts):
        part = _trim(part)
        try:
            options.append((_Emitter(utf8=utf8).seq(part, icase, dotall), _literal_head(part)))
        except _NonAscii:
            return _NEEDS_NON_ASCII  # the line must hold this part, which needs a non-ASCII character
        except (_Unsupported, KeyError, RecursionError):
            pass
    best, best_score = None, None
    for order, (e, head) in enumerate(options):
        try:
            probe = re.compile(e)
        except (re.error, RecursionError, OverflowError):
            continue
        if probe.fullmatch("") is not None:
            continue  # matches the empty string: every line
        score = (sum(probe.search(line) is not None for line in PROBE), -head, order)
        if best_score is None or score < best_score:
            best, best_score = e, score
    return best


def _literal_head(items: list) -> int:
    n = 0
    for op, _av in items:
        if op is not C.LITERAL:
            break
        n += 1
    return n


_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT)
_ONE_CHAR = (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN)


def _plain(items) -> bool:
    """Is ``items`` a sequence of single characters (through groups), with no repeat and no
    alternation? Such a sequence has one length, so a repeat of it splits a text one way only."""
    for op, av in items:
        if op is C.SUBPATTERN:
            if not _plain(av[3]):
                return False
        elif op not in _ONE_CHAR:
            return False
    return True


def _trim(items: list) -> list:
    """A sequence without what a line holding a match of it need not show at its ends: zero-width
    items, optional repeats ('\\s*' before '#12 0x…'), and a repeat's extra rounds ('\\s+' is one
    '\\s' there). Only whether a line holds a match counts, and every match contains a match of
    the trimmed sequence; without the leading repeats hyperscan starts far fewer attempts."""
    items = list(items)
    for end in (0, -1):
        items = _trim_end(items, end)
    return items


def _trim_end(items: list, end: int) -> list:
    """``items`` trimmed at one end (0: the start, -1: the end); a group or an alternation at that
    end is trimmed inside ('(?i:[^\\n]*?(?:error|fail))' is 'error|fail' at its start)."""
    items = list(items)
    while items:
        op, av = items[end]
        if op in (C.AT, C.ASSERT, C.ASSERT_NOT) or (op in _REPEATS and av[0] == 0):
            items.pop(end)
            continue
        if op in _REPEATS and av[1] != av[0] and 1 <= av[0] <= 3:
            items[end] = (C.MAX_REPEAT, (av[0], av[0], av[2]))
        elif op is C.SUBPATTERN or op is C.ATOMIC_GROUP:
            inner = _trim_end(av[3] if op is C.SUBPATTERN else av, end)
            if not inner:
                items.pop(end)  # (it may match nothing there)
                continue
            items[end] = (C.SUBPATTERN, (None, av[1], av[2], inner)) if op is C.SUBPATTERN else (op, inner)
        elif op is C.BRANCH:
            alts = [_trim_end(alt, end) for alt in av[1]]
            if not all(alts):
                items.pop(end)  # one alternative may match nothing there
                continue
            items[end] = (op, (av[0], alts))
        break
    return items


_NEEDS_NON_ASCII = "\0"  # what _analyse returns for such a pattern (an expression is never this)


def _approximate(pattern: str, flags: int, utf8: bool = False) -> list:
    expr, local = _analyse(pattern, flags, utf8)
    if expr is None:
        return [None, False]
    if expr == _NEEDS_NON_ASCII:
        # (with UTF-8 only a class that matches nothing gets here: no approximation is claimed)
        return [None, local] if utf8 else [NON_ASCII_ONLY, local]
    try:
        probe = re.compile(expr)
    except (re.error, RecursionError, OverflowError):
        return [None, False]
    if probe.fullmatch("") is not None:  # matches the empty string: every line
        return [None, local]
    if sum(probe.search(line) is not None for line in PROBE) > BROAD_PROBES:
        return [None, local]
    return [expr + LINE_END, local]


def _cached(pattern: str, flags: int, utf8: bool = False) -> list:
    from .programs import cached_value, source_hash

    kind = "approx-utf8" if utf8 else "approx"
    got = cached_value(f"{kind} {source_hash(__file__)}", f"{int(flags)}\0{pattern}",
                       lambda: _approximate(pattern, flags, utf8))
    if type(got) is list and len(got) == 2 and (got[0] is None or type(got[0]) is str) and type(got[1]) is bool:
        return got
    return _approximate(pattern, flags, utf8)  # not what _approximate writes: computed afresh


def approximate(pattern: str, flags: int) -> str | None:
    """A hyperscan expression that matches (reported at the line's end) every ASCII line on which
    ``pattern`` finds a match; None when there is none worth scanning for (see the module notes)."""
    return _cached(pattern, flags)[0]


def approximate_utf8(pattern: str, flags: int) -> str | None:
    """:func:`approximate` for a text's UTF-8 bytes: an expression that matches (reported at the
    line's end) every line of the encoded text on which ``pattern`` finds a match, unless the
    line holds a character of ``FOLDS_TO_ASCII`` (those lines must be taken as they are). Each
    character a class or ``.`` may match non-ASCII is an ASCII byte or a run of bytes >= 0x80,
    and a non-ASCII literal is its own bytes (caseless: any such run), so a repeat counts
    characters as the pattern does. None when there is none worth scanning for."""
    return _cached(pattern, flags, True)[0]


def line_local(pattern: str, flags: int) -> bool:
    """True if nothing in ``pattern`` (lookarounds included) can match a newline and it uses no
    \\A or \\Z: its matches in a text lie within single lines and do not depend on other lines,
    so searching each line up to its end finds the same matches as searching the whole text."""
    return _cached(pattern, flags)[1]




# ---------------------------------------------------------------------------------------------
# Does every match hold a prefilter literal?

def implies_literal(pattern: str, flags: int, literals: list[str], ignore_case: bool) -> bool:
    """True if every match of ``pattern`` holds one of ``literals`` (compared lowered when
    ``ignore_case``, as the prefilter is), proven from the parsed pattern; False when that cannot
    be shown. A rule's prefilter decides which lines are tried at all ("a line is only tried if it
    contains one of them"), so where this holds the literals add nothing to the rule's
    approximation and the one-pass scan need not look for them (``LiteralScanner.skipped``).

    Conservative: a literal must lie within one stretch of literal characters the match always
    holds: a run of plain characters (a class of one letter in both cases counts as that letter,
    caseless), carried into each alternative of a group that follows it ('E(?:rror|xception)'),
    the least number of rounds of a repeated character, or the text of a positive lookaround. A
    class such as ``\\s`` ends the stretch."""
    from .programs import cached_value, source_hash

    lits = sorted({lit.lower() if ignore_case else lit for lit in literals if lit})
    key = "\0".join([str(int(flags)), str(ignore_case), *lits, "", pattern])
    got = cached_value(f"implies {source_hash(__file__)}", key, lambda: _implies_literal(pattern, flags, lits, ignore_case))
    return got if type(got) is bool else _implies_literal(pattern, flags, lits, ignore_case)


def _implies_literal(pattern: str, flags: int, lits: list[str], ignore_case: bool) -> bool:
    if not lits:
        return False
    try:
        tree = sre.parse(pattern, flags & (re.IGNORECASE | re.MULTILINE | re.DOTALL | re.VERBOSE))
    except (re.error, RecursionError, OverflowError, ValueError, TypeError):
        return False
    try:
        return _Implies(lits, ignore_case).seq(list(tree), bool(tree.state.flags & re.IGNORECASE))
    except RecursionError:
        return False


class _Implies:
    MAX_DEPTH = 8  # alternatives a stretch is carried into, nested

    def __init__(self, literals: list[str], ignore_case: bool):
        self.literals = literals
        self.ignore_case = ignore_case

    def holds(self, run: list[tuple[str, bool]]) -> bool:
        """Does the stretch ``run`` ((character, caseless?) pairs) hold a literal?"""
        if self.ignore_case:
            text = "".join(c for c, _ in run).lower()
            return any(lit in text for lit in self.literals)
        text = "".join(c if not ci or c.lower() == c.upper() else "\0" for c, ci in run)
        return any(lit in text for lit in self.literals)

    @staticmethod
    def char(op, av, icase: bool) -> tuple[str, bool] | None:
        if op is C.LITERAL:
            return chr(av), icase
        if op is C.IN and all(o is C.LITERAL for o, _ in av):
            chars = {chr(v) for _, v in av}
            if len(chars) == 1:
                return next(iter(chars)), icase
            low = {c.lower() for c in chars}
            if len(low) == 1 and chars == {next(iter(low)), next(iter(low)).upper()}:
                return next(iter(low)), True
        return None

    @staticmethod
    def alternatives(op, av) -> list[list] | None:
        if op is C.BRANCH:
            return [list(a) for a in av[1]]
        if op is C.IN and len(av) > 1 and all(o is C.LITERAL for o, _ in av):
            return [[(C.LITERAL, v)] for _, v in av]
        return None

    def seq(self, items: list, icase: bool, depth: int = 0) -> bool:
        run: list[tuple[str, bool]] = []
        for n, (op, av) in enumerate(items):
            c = self.char(op, av, icase)
            if c is not None:
                run.append(c)
                continue
            if op in _REPEATS and av[0] >= 1 and len(av[2]) == 1:
                c = self.char(*av[2][0], icase)
                if c is not None:  # the first and the last rounds of a repeated character
                    if av[0] == av[1]:
                        run += [c] * av[0]
                        continue
                    if self.holds(run + [c] * av[0]):
                        return True
                    run = [c] * av[0]
                    continue
            alts = self.alternatives(op, av) if depth < self.MAX_DEPTH else None
            if alts is not None:
                head = [(C.LITERAL, ord(ch)) if not ci or ch.lower() == ch.upper() else
                        (C.IN, [(C.LITERAL, ord(ch.lower())), (C.LITERAL, ord(ch.upper()))]) for ch, ci in run]
                rest = items[n + 1:]
                if all(self.seq(head + alt + rest, icase, depth + 1) for alt in alts):
                    return True
            if run and self.holds(run):
                return True
            run = []
            if self.item(op, av, icase, depth):
                return True
        return bool(run) and self.holds(run)

    def item(self, op, av, icase: bool, depth: int) -> bool:
        if op is C.SUBPATTERN:
            _group, add, dele, sub = av
            return self.seq(list(sub), (icase or bool(add & re.IGNORECASE)) and not (dele & re.IGNORECASE), depth)
        if op is C.BRANCH:
            return all(self.seq(list(alt), icase, depth) for alt in av[1])
        if op in _REPEATS:
            return av[0] >= 1 and self.seq(list(av[2]), icase, depth)
        if op is C.ATOMIC_GROUP:
            return self.seq(list(av), icase, depth)
        if op is C.ASSERT:  # a positive lookaround: its text is on the line too
            return self.seq(list(av[1]), icase, depth)
        return False
