"""Split a rule pattern's top-level alternation into branches, each gated by literals it needs.

A protect rule's pattern is often one alternation of a dozen or more forms (``FAILED (failures=1)``
| ``Tests run: N, Failures: F`` | ``<<< FAILURE!`` | …). The ``regex`` engine tries every branch at
every position of a line, so the alternation costs about 0.4 µs per character even on the many
lines that match none of it. Most branches need a literal that most lines lack (``Tests run:``,
``<<<``, ``not ok``): run alone, on the lines that contain one of its literals, a branch costs a
fraction of that.

The rule's lines are the same: the split is used only for rules that protect whole lines
(``scope = "line"``), where only *whether* a line matches counts. A pattern ``A|B|C`` matches a line iff one of its branches does, and
``X(?:A|B)Y`` iff ``X(?:A)Y`` or ``X(?:B)Y`` does (a backtracking search tries every alternative
of an unquantified group; an atomic or possessive ``X`` commits to the same first path whatever
follows it). A branch's literals are *necessary*: any text it matches contains one of them
(derived from the parsed pattern, see ``required``), so a line without them cannot match that
branch.

A pattern is split only when that is safe: no backreferences or recursion, no global inline
flags after the start (``regex`` applies those to the whole pattern), no nested character sets,
and every branch parses with the standard library's parser (used here only to read which
literals a branch needs). Otherwise the rule keeps its one pattern.
"""

from __future__ import annotations

import re
from re import _constants as C  # noqa: N812
from re import _parser as sre
from ..lazyre import lazy_re

__all__ = ["Branch", "gate_of", "required", "required_cached", "split_any", "split_cached"]

MAX_ALTERNATIVES = 12  # a branch gated by more literals than this is not worth gating
MIN_LITERAL = 2  # a one-character gate ('=', ':') is on most lines

_FLAG_HEAD = lazy_re(r"\(\?[aiLmsux]+\)")


class Branch:
    """One alternative of a split pattern, with the literals one of which any match contains."""

    __slots__ = ("source", "literals")

    def __init__(self, source: str, literals: list[tuple[str, bool]] | None):
        self.source = source
        self.literals = literals  # [(literal, ignore_case)], or None: the branch runs on every line


def _scan(body: str, verbose: bool):
    """Top-level '|' positions and top-level groups (open, close) of a pattern, or None when the
    text is not balanced or uses a construct this splitter does not read (nested sets)."""
    bars: list[int] = []
    groups: list[tuple[int, int]] = []
    depth = 0
    opened = -1
    i = 0
    n = len(body)
    while i < n:
        c = body[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            # a character class: ']' right after '[' or '[^' is a literal; escapes skip a character
            j = i + 1
            if j < n and body[j] == "^":
                j += 1
            if j < n and body[j] == "]":
                j += 1
            while j < n and body[j] != "]":
                if body[j] == "\\":
                    j += 1
                elif body[j] == "[":  # nested sets / POSIX classes: too subtle, don't split
                    return None
                j += 1
            if j >= n:
                return None
            i = j + 1
            continue
        if verbose and c == "#":
            j = body.find("\n", i)
            i = n if j == -1 else j + 1
            continue
        if c == "(":
            if depth == 0:
                opened = i
            depth += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                return None
            if depth == 0:
                groups.append((opened, i))
        elif c == "|" and depth == 0:
            bars.append(i)
        i += 1
    if depth != 0:
        return None
    return bars, groups


def _parts(body: str, verbose: bool) -> list[str] | None:
    sc = _scan(body, verbose)
    if sc is None:
        return None
    out = []
    last = 0
    for b in sc[0]:
        out.append(body[last:b])
        last = b + 1
    out.append(body[last:])
    return out


_QUANT = "?*+{"


def _distribute(part: str, verbose: bool, depth: int) -> list[str] | None:
    """Alternatives of one sequence such that the sequence matches iff one of them does.

    'X(?:A|B)Y' matches a text iff 'X(?:A)Y' or 'X(?:B)Y' does: a backtracking search tries every
    alternative of an unquantified group (an atomic or possessive X commits to the same first
    path whatever follows it). The group with the most alternatives is spread out."""
    sc = _scan(part, verbose)
    if sc is None:
        return None
    best = None
    for a, b in sc[1]:
        if not part.startswith("(?:", a):
            continue
        k = b + 1
        if verbose:
            while k < len(part) and part[k] in " \t\n\r":
                k += 1
        if k < len(part) and part[k] in _QUANT:
            continue
        alts = _parts(part[a + 3:b], verbose)
        if alts and len(alts) > 1 and (best is None or len(alts) > len(best[2])):
            best = (a, b, alts)
    if best is None:
        return [part]
    a, b, alts = best
    out: list[str] = []
    for alt in alts:
        piece = part[:a] + "(?:" + alt + ")" + part[b + 1:]
        more = _distribute(piece, verbose, depth + 1) if depth < 2 else [piece]
        if more is None:
            return None
        out.extend(more)
    return out


def split_any(pattern: str, flags: int, limit: int = 64) -> list[Branch] | None:
    """Branches such that ``pattern`` finds a match in a text iff one of them does, each with the
    literals it needs; None if the pattern is not split (see the module notes)."""
    if re.search(r"\\[1-9]|\(\?P=|\\g<|\(\?R|\(\?[0-9&]", pattern):
        return None  # backreferences, recursion
    head = ""
    m = _FLAG_HEAD.match(pattern)
    if m:
        head, rest = m.group(), pattern[m.end():]
    else:
        rest = pattern
    if _FLAG_HEAD.search(rest):
        return None  # a global inline flag later in the pattern
    verbose = bool(flags & re.VERBOSE) or "x" in head
    parts = _parts(rest, verbose)
    if parts is None:
        return None
    pieces: list[str] = []
    for p in parts:
        d = _distribute(p, verbose, 0)
        if d is None:
            return None
        pieces.extend(d)
    if len(pieces) < 2 or len(pieces) > limit:
        return None
    py_flags = flags & (re.IGNORECASE | re.MULTILINE | re.DOTALL | re.VERBOSE)
    branches = []
    for p in pieces:
        try:
            tree = sre.parse(head + p, py_flags)
        except (re.error, RecursionError, OverflowError, ValueError):
            return None
        branches.append(Branch(head + p, required(tree, bool(tree.state.flags & re.IGNORECASE))))
    return branches


def split_cached(pattern: str, flags: int) -> list[Branch] | None:
    """``split_any`` kept on disk beside the compiled programs (``programs.cached_value``), keyed
    by this module's source: parsing every branch with ``sre`` costs about 30 ms per process."""
    from .programs import cached_value, source_hash

    data = cached_value(f"split {source_hash(__file__)}", f"{int(flags)}\0{pattern}",
                        lambda: _as_data(split_any(pattern, flags)))
    try:
        if data is None:
            return None
        return [Branch(src, None if lits is None else [(str(lit), bool(ci)) for lit, ci in lits]) for src, lits in data]
    except (TypeError, ValueError):  # not what _as_data writes: computed afresh
        return split_any(pattern, flags)


def required_cached(pattern: str, flags: int) -> list[tuple[str, bool]] | None:
    """The literals one of which every match of the whole ``pattern`` contains (see
    ``required``), or None: unknown, or a construct this module does not read (backreferences,
    recursion, anything the standard library's parser refuses). Kept on disk like
    :func:`split_cached`."""
    from .programs import cached_value, source_hash

    def compute() -> list | None:
        if re.search(r"\\[1-9]|\(\?P=|\\g<|\(\?R|\(\?[0-9&|]", pattern):
            return None
        try:
            tree = sre.parse(pattern, flags & (re.IGNORECASE | re.MULTILINE | re.DOTALL | re.VERBOSE))
        except (re.error, RecursionError, OverflowError, ValueError):
            return None
        req = required(tree, bool(tree.state.flags & re.IGNORECASE))
        return None if req is None else [(lit, ci) for lit, ci in req]

    data = cached_value(f"required {source_hash(__file__)}", f"{int(flags)}\0{pattern}", compute)
    try:
        return None if data is None else [(str(lit), bool(ci)) for lit, ci in data]
    except (TypeError, ValueError):  # not what compute writes: computed afresh
        return compute()


def gate_of(pattern: str, flags: int) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """A test that a text cannot match ``pattern``: (case-sensitive literals, lower-cased
    case-insensitive ones), one of which every match contains; None when there is none. A text
    holding none of them has no match. The case-insensitive ones are only tested on ASCII texts
    (outside ASCII, case folding and ``str.lower`` part ways, e.g. 'ſ' matches 's')."""
    req = required_cached(pattern, flags)
    if not req or any(ci and not lit.isascii() for lit, ci in req):
        return None  # (a non-ASCII literal may match ASCII text without case: 'K' (Kelvin) matches 'k')
    return tuple(lit for lit, ci in req if not ci), tuple(lit.lower() for lit, ci in req if ci)


def may_match(gate: tuple[tuple[str, ...], tuple[str, ...]] | None, text: str, lowered: list) -> bool:
    """False only when ``text`` holds none of ``gate``'s literals (so the pattern cannot match
    it). ``lowered``: a one-item cache of ``text.lower()`` (``[]`` at first) for the gates of
    several patterns over the same text."""
    if gate is None:
        return True
    exact, folded = gate
    for lit in exact:
        if lit in text:
            return True
    if folded:
        if not text.isascii():
            return True
        if not lowered:
            lowered.append(text.lower())
        low = lowered[0]
        for lit in folded:
            if lit in low:
                return True
    return False


def _as_data(branches: list[Branch] | None) -> list | None:
    if branches is None:
        return None
    return [(b.source, None if b.literals is None else [(lit, ci) for lit, ci in b.literals]) for b in branches]


# ---- necessary literals of a parsed pattern -------------------------------------------------------

_Req = list  # [(literal, ignore_case)]: any match contains at least one of them


def _score(req: _Req) -> tuple:
    # fewer alternatives and longer shortest literal is tighter
    return (min(len(lit) for lit, _ in req), -len(req))


def _better(a: _Req | None, b: _Req | None) -> _Req | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if _score(a) >= _score(b) else b


def required(seq, icase: bool) -> _Req | None:
    """Literals one of which every match of the parsed sequence contains, or None (unknown)."""
    best: _Req | None = None
    run: list[str] = []

    def flush() -> None:
        nonlocal best, run
        if run:
            lit = "".join(run)
            if len(lit) >= MIN_LITERAL or not lit.isascii():
                best = _better(best, [(lit, icase)])
            run = []

    for op, av in seq:
        if op is C.LITERAL:
            run.append(chr(av))
            continue
        flush()
        sub: _Req | None = None
        if op is C.SUBPATTERN:
            _group, add, dele, p = av
            ic = (icase or bool(add & re.IGNORECASE)) and not (dele & re.IGNORECASE)
            sub = required(p, ic)
        elif op is C.ATOMIC_GROUP:
            sub = required(av, icase)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            lo, _hi, p = av
            if lo >= 1:
                sub = required(p, icase)
        elif op is C.BRANCH:
            alts: _Req = []
            for alt in av[1]:
                r = required(alt, icase)
                if r is None:
                    alts = []
                    break
                alts.extend(r)
            if alts:
                alts = sorted(set(alts))
                if len(alts) <= MAX_ALTERNATIVES:
                    sub = alts
        elif op is C.ASSERT:  # a positive lookaround: its text is in the line too
            _dir, p = av
            sub = required(p, icase)
        elif op is C.IN and len(av) == 1 and av[0][0] is C.LITERAL and not icase:
            run.append(chr(av[0][1]))
            continue
        best = _better(best, sub)
    flush()
    return best
