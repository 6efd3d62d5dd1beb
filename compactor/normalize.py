"""Text hygiene: CRLF, ANSI escapes and ``\\r``-redrawn progress bars.

``normalize`` returns the text the rules and the reader of the compacted output see: line
endings are ``\\n``, escape sequences are gone, and a line redrawn in place with ``\\r`` keeps
only its final state. The original bytes are what the store keeps.
"""

from __future__ import annotations

from .lazyre import lazy_re, lazy_regex

__all__ = ["CI_PREFIX", "ci_prefixed", "ci_prefixed_somewhere", "normalize", "normalize_line", "strip_ansi"]

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


PREFIX_SAMPLES = 64  # lines spread over a text that say whether its lines carry CI timestamps


def ci_prefixed_somewhere(lines: list[str]) -> bool:
    """Do the lines carry CI timestamps (``ci_prefixed``)? The first five lines are looked at and
    ``PREFIX_SAMPLES`` more spread evenly over the rest (every line of a short text): a log
    pasted or concatenated after lines without timestamps still has its own skipped, while a
    text without any pays a few dozen checks."""
    if len(lines) > 5 + PREFIX_SAMPLES:
        sample = lines[:5] + lines[5::(len(lines) - 5) // PREFIX_SAMPLES]
    else:
        sample = lines
    return any(map(ci_prefixed, sample))


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
