"""Text hygiene: CRLF, ANSI escapes and ``\\r``-redrawn progress bars.

``normalize`` returns the text the rules and the reader of the compacted output see: line
endings are ``\\n``, escape sequences are gone, and a line redrawn in place with ``\\r`` keeps
only its final state. The original bytes are what the store keeps.
"""

from __future__ import annotations

import re
from itertools import compress, repeat
from operator import itemgetter

from .lazyre import lazy_re, lazy_regex

__all__ = ["CI_PREFIX", "ci_prefix_length", "ci_prefix_lengths", "ci_prefixed", "ci_prefixed_somewhere", "normalize",
           "normalize_line", "strip_ansi"]

# CSI (colours, cursor moves, bracketed paste), OSC (titles, hyperlinks), and lone ESC-x pairs.
# Explicit character ranges only (no \s, \d, \w or flags), so the standard ``re`` module reads it
# as ``regex`` would, and substitutes about 2x faster (a test compares the two modules).
_ANSI = lazy_re(r"\x1b(?:\[[0-?]*+[ -/]*+[@-~]|\][^\x07\x1b]*+(?:\x07|\x1b\\)|[@-Z\\-_])")
# Timestamps that CI systems put before every line (GitHub Actions / Azure raw logs).
CI_PREFIX = lazy_regex(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ")


def ci_prefixed(line: str) -> bool:
    """Does LINE start with a CI timestamp (``CI_PREFIX``)? Every ``\\d`` is one character, so a
    match has '-' at index 4 and 'T' at index 10: checked first, most lines never run the
    pattern (and a log without timestamps never compiles it)."""
    return line[4:5] == "-" and line[10:11] == "T" and CI_PREFIX.match(line) is not None


PREFIX_SAMPLES = 64  # lines spread over a text that say whether its lines carry CI timestamps ...
PREFIX_STRIDE = 16  # ... at least one in every PREFIX_STRIDE lines of a long text


def ci_prefixed_somewhere(lines: list[str]) -> bool:
    """Do the lines carry CI timestamps (``ci_prefixed``)? The first five lines are looked at and
    ``PREFIX_SAMPLES`` more spread evenly over the rest (every line of a short text), and in a
    long text one line in every ``PREFIX_STRIDE``: a log pasted or concatenated before, after or
    between lines without timestamps has its own skipped as soon as it is that many lines long,
    while a text without any pays a check per sample, most of them a C-level comparison of one
    character (about 1% of a detection)."""
    n = len(lines)
    if n > 5 + PREFIX_SAMPLES:
        sample = lines[:5] + lines[5::min(PREFIX_STRIDE, (n - 5) // PREFIX_SAMPLES)]
        # only a line with '-' at index 4 can start with a timestamp
        sample = list(compress(sample, map(str.startswith, sample, repeat("-"), repeat(4))))
    else:
        sample = lines
    return any(map(ci_prefixed, sample))


_GHA_HEAD = itemgetter(slice(0, 29))
_GHA_SHAPE = b"9999-99-99T99:99:99.9999999Z \n"  # its shape, every digit read as 9
_GHA_RUN = lazy_re(b"(?:" + re.escape(_GHA_SHAPE) + b")*+")  # heads that fit, one after another
_DIGITS_AS_9 = bytes.maketrans(b"0123456789", b"9999999999")
_AS_29 = bytes.maketrans(b"\x01", b"\x1d")  # a line's flag (1: the prefix fits) as its length


def ci_prefix_lengths(lines: list[str]) -> list[int]:
    """``ci_prefix_length`` of every line. A GitHub Actions log puts the same 29-character timestamp
    in front of nearly every line, and only a line starting with '20' can carry a prefix: the
    heads of those lines (their first 29 characters) are joined, encoded, every digit read as 9,
    and compared with that shape repeated. When one does not fit (a shorter line, another date),
    each run of heads that fit is skipped by one match, and only the heads that do not fit are
    looked at one by one. Every step over all the lines is a C-level pass: the same lengths as
    ``ci_prefix_length`` line by line, in about a quarter of the time."""
    n = len(lines)
    s20 = bytes(map(str.startswith, lines, repeat("20")))
    k = s20.count(1)
    if not k:
        return [0] * n
    # each head and a newline (a character outside ASCII reads as '?', a short line is short)
    shape = ("\n".join(map(_GHA_HEAD, compress(lines, s20))).encode("ascii", "replace") + b"\n").translate(_DIGITS_AS_9)
    if shape == _GHA_SHAPE * k:
        return [29] * n if k == n else list(s20.translate(_AS_29))
    where = list(compress(range(n), s20))  # head -> line
    fit = bytearray(s20)  # 1 where the prefix is the 29 characters
    todo = []
    run = _GHA_RUN.match
    pos = head = 0
    end_all = len(shape)
    while True:
        end = run(shape, pos).end()
        head += (end - pos) // 30
        if end == end_all:
            break
        todo.append(where[head])  # a head that does not fit, up to its newline
        fit[where[head]] = 0
        pos = shape.index(b"\n", end) + 1
        head += 1
    out = list(fit.translate(_AS_29))
    for i in todo:
        out[i] = ci_prefix_length(lines[i])
    return out


def ci_prefix_length(line: str) -> int:
    """Length of a CI timestamp prefix ('2022-05-30T09:10:41.3367743Z '), 0 if none."""
    if line[:2] != "20" or len(line) < 21 or line[10] != "T" or line[4] != "-":
        return 0  # (every match of CI_PREFIX has '-' at 4 and 'T' at 10: a '2024-05-01 12:30' log time has not)
    # fast path: GitHub Actions prints exactly 7 fraction digits (29 characters with the space)
    if line[27:29] == "Z " and line[19] == "." and line[20:27].isdigit() and line[:4].isdigit() and line[11:13].isdigit():
        return 29
    m = CI_PREFIX.match(line)
    return m.end() if m else 0


def strip_ansi(text: str) -> str:
    if "\x1b" not in text:
        return text
    return _ANSI.sub("", text)


def normalize_line(line: str) -> str:
    """One line (no ``\\n``): ANSI removed, ``\\r`` redraws resolved to the last non-empty state."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    if "\r" in line:
        if line.find("\r") == len(line) - 1:  # only a CRLF ending: the line before it, if not blank
            return "" if line.isspace() else line[:-1]  # ('\r' is white space: no copy to strip)
        parts = [p for p in line.split("\r") if p.strip()]
        line = parts[-1] if parts else ""
    return line


def normalize(text: str) -> str:
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        lines = text.split("\n")
        for i, line in enumerate(lines):
            if "\r" in line:
                parts = [p for p in line.split("\r") if p.strip()]
                lines[i] = parts[-1] if parts else ""
        text = "\n".join(lines)
    return text
