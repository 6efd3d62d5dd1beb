"""Line-local patterns: one search over many lines that answers "does the pattern match in this
line?" for each of them, as searching each line alone would.

A line-block rule (a trace) asks that question of its continuation and end patterns for every
line of a block, and of its start pattern for every candidate line; on a 100,000-frame trace
that is 100,000 calls per pattern, each costing more in the call than in the match.

``line_local(pattern)`` rewrites a pattern so that no part of it can match, or look at, a
newline: a class that could match ``\\n`` excludes it (``\\s`` becomes ``[^\\S\\n]``, ``\\W``
becomes ``[^\\w\\n]``, ``[^x]`` becomes ``[^x\\n]``, a positive class with a range or a class
escape is guarded by ``(?!\\n)``). Compiled with MULTILINE and searched over the lines joined
with ``\\n`` (none of which contains one), every match then lies inside one line and sees that
line as the line alone would:

- ``^`` and ``$`` hold at the line's start and end, as at the start and end of the line alone
  (``$`` before a final newline: a line has none);
- a lookaround cannot step over the newline, as it cannot step past the ends of the line alone;
- ``\\b``/``\\B`` see the newline as a non-word character, as they see the ends of a string.

So the lines holding a match of the rewritten pattern are exactly the lines the original pattern
matches (a property test checks it for every rule on the corpus and on adversarial lines).
A construct where that is not evident gets ``None`` and the caller searches line by line:
``\\A``, ``\\Z``, ``\\G``, a newline or a character given by code outside a set (``\\n``,
``\\x0a``, ``\\N{..}``), Unicode properties, nested sets, a range from a class escape,
conditionals, comments, fuzzy matching, a global flag group inside the pattern, and the DOTALL,
VERBOSE, WORD and full-case-folding flags. Blank lines are for the caller (a line-block
rule decides them before it tries a pattern).

``marks(pattern, text)`` runs a compiled :func:`whole_line` pattern over lines joined by ``\\n``
and returns one byte per line, 1 where the pattern matches.
"""

from __future__ import annotations

__all__ = ["LINE_MARK", "line_local", "marks", "whole_line"]

LINE_MARK = "\x01"  # what a matching line becomes; the joined text must not contain it

# escapes that cannot match a newline, kept as they are (a backslash before any other
# non-alphanumeric character is that character)
_SAFE_ESCAPES = frozenset("dwSbBtrf123456789")
# escapes that could match a newline, and their line-local forms (outside a set)
_WIDE_ESCAPES = {"s": r"[^\S\n]", "W": r"[^\w\n]", "D": r"[^\d\n]"}
_INLINE_FLAGS_OK = frozenset("im-")  # IGNORECASE, MULTILINE (and turning a flag off)


def line_local(pattern: str) -> tuple[str, bool] | None:
    """(the line-local form of ``pattern``, anchored?) or None when it cannot be given.

    "Anchored": the pattern starts with ``^`` and has no top-level alternative, so a match
    starts at the start of its line."""
    out: list[str] = []
    s = pattern
    n = len(s)
    i = 0
    depth = 0
    top_alt = False
    while i < n:
        c = s[i]
        if c == "\n":
            return None
        if c == "\\":
            if i + 1 >= n:
                return None
            d = s[i + 1]
            if d in _WIDE_ESCAPES:
                out.append(_WIDE_ESCAPES[d])
            elif d in _SAFE_ESCAPES or not d.isalnum() and d not in "\n":
                out.append(s[i:i + 2])
            else:
                return None
            i += 2
            continue
        if c == "[":
            cls = _set(s, i)
            if cls is None:
                return None
            text, end = cls
            out.append(text)
            i = end
            continue
        if c == "(":
            if s.startswith("(?", i):
                head = _group_head(s, i)
                if head is None:
                    return None
                out.append(head)
                i += len(head)
                if head.endswith(")"):  # a flag group such as (?i): no nesting opened
                    continue
            else:
                out.append(c)
                i += 1
            depth += 1
            continue
        if c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            top_alt = True
        elif c == "{" and i + 1 < n and s[i + 1].isalpha():  # fuzzy constraints {e<=1}
            return None
        out.append(c)
        i += 1
    text = "".join(out)
    anchored = not top_alt and _strip_flags(pattern).startswith("^")
    return text, anchored


def _strip_flags(s: str) -> str:
    """The pattern after a leading global flag group such as ``(?i)``."""
    if s.startswith("(?"):
        j = s.find(")")
        if j > 2 and all(ch.isalpha() for ch in s[2:j]):
            return s[j + 1:]
    return s


def _group_head(s: str, i: int) -> str | None:
    """The opening of a ``(?...`` group at ``s[i]``, as it stays, or None if not line-local."""
    rest = s[i + 2:i + 4]
    if rest[:1] in (":", "=", "!", ">"):
        return s[i:i + 3]
    if rest in ("<=", "<!"):
        return s[i:i + 4]
    if rest[:1] == "P" and s[i + 3:i + 4] == "<" or rest[:1] == "<":  # named group
        j = s.find(">", i)
        return s[i:j + 1] if j != -1 else None
    if rest[:1] == "P" and s[i + 3:i + 4] == "=":  # (?P=name): a backreference
        j = s.find(")", i)
        return s[i:j + 1] if j != -1 else None
    # inline flags: (?i) or (?i:
    j = i + 2
    while j < len(s) and (s[j].isalpha() or s[j] == "-"):
        j += 1
    flags = s[i + 2:j]
    if not flags or j >= len(s) or s[j] not in ":)" or not set(flags) <= _INLINE_FLAGS_OK:
        return None  # comments (?#, conditionals (?(, DOTALL/VERBOSE/WORD/fuzzy/version flags...
    if s[j] == ")" and (i != 0 or "-" in flags):
        return None  # a global flag group inside the pattern (or turning flags off): leave it alone
    return s[i:j + 1]


def _set(s: str, i: int) -> tuple[str, int] | None:
    """The line-local form of the set ``[...]`` starting at ``s[i]`` and the index after it."""
    j = i + 1
    neg = j < len(s) and s[j] == "^"
    if neg:
        j += 1
    body_start = j
    if j < len(s) and s[j] == "]":  # a leading ']' is a literal
        j += 1
    wide = False  # may the (positive) set match a newline?
    prev: str | None = None  # the previous member if it was one literal character
    while j < len(s) and s[j] != "]":
        ch = s[j]
        if ch == "\n" or ch == "[":
            return None  # nested sets, POSIX classes, a literal newline
        if ch == "\\":
            if j + 1 >= len(s):
                return None
            d = s[j + 1]
            if d in "sWDn":
                wide = True
            elif not (d in "dwStrf" or not d.isalnum()):
                return None  # \n, \x.., \p{..}, \N{..}, octal...
            prev = d if not d.isalnum() else "\n" if d == "n" else None
            j += 2
            continue
        if ch == "-" and prev is not None and j + 1 < len(s) and s[j + 1] != "]":
            # a range: it may hold '\n' unless both ends are plain characters above it
            hi = s[j + 1]
            if hi == "\\" and j + 2 < len(s) and not s[j + 2].isalnum():
                hi = s[j + 2]
                j += 1
            elif hi == "\\" or hi == "[":
                return None
            if ord(prev) <= 10 <= ord(hi):
                wide = True
            prev = None
            j += 2
            continue
        if ch == "-" and prev is None and j > body_start and j + 1 < len(s) and s[j + 1] != "]":
            return None  # a range from a class escape: leave it to the line-by-line search
        prev = ch
        j += 1
    if j >= len(s):
        return None
    body = s[body_start:j]
    if neg:
        return "[^" + body + "\\n]", j + 1
    text = s[i:j + 1]
    return ("(?:(?!\\n)" + text + ")" if wide else text), j + 1


def whole_line(pattern: str) -> str | None:
    """A pattern that matches the whole of each line (without its newline) in which ``pattern``
    matches, for :func:`marks`; None when ``pattern`` is not line-local."""
    got = line_local(pattern)
    if got is None:
        return None
    text, anchored = got
    flags = ""
    if text.startswith("(?") and text.find(")") > 2 and text[2:text.find(")")].isalpha():
        k = text.find(")")
        flags, text = text[:k + 1], text[k + 1:]
    if anchored:
        return f"{flags}(?:{text})[^\\n]*"
    return f"{flags}^[^\\n]*?(?:{text})[^\\n]*"


def marks(compiled, text: str, nlines: int, timeout: float | None = None) -> bytes:
    """One byte per line of ``text`` (lines joined by ``\\n``, no ``LINE_MARK`` in it): 1 where the
    MULTILINE-compiled :func:`whole_line` pattern matches the line."""
    done = compiled.sub(LINE_MARK, text, timeout=timeout) if timeout is not None else compiled.sub(LINE_MARK, text)
    parts = done.split("\n")
    assert len(parts) == nlines
    return bytes(map(LINE_MARK.__eq__, parts))
