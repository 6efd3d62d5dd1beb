"""Text hygiene: CRLF, ANSI escapes and ``\\r``-redrawn progress bars.

``normalize`` returns the text the rules and the reader of the compacted output see: line
endings are ``\\n``, escape sequences are gone, and a line redrawn in place with ``\\r`` keeps
only its final state. The original bytes are what the store keeps.
"""

from __future__ import annotations

from .lazyre import lazy_re, lazy_regex

__all__ = ["CI_PREFIX", "ci_prefixed", "normalize", "normalize_block", "normalize_line", "strip_ansi"]

# CSI (colours, cursor moves, bracketed paste), OSC (titles, hyperlinks), and lone ESC-x pairs.
_ANSI = lazy_regex(r"\x1b(?:\[[0-?]*+[ -/]*+[@-~]|\][^\x07\x1b]*+(?:\x07|\x1b\\)|[@-Z\\-_])")
# Timestamps that CI systems put before every line (GitHub Actions / Azure raw logs).
CI_PREFIX = lazy_regex(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ")


def ci_prefixed(line: str) -> bool:
    """Does LINE start with a CI timestamp (``CI_PREFIX``)? Every ``\\d`` is one character, so a
    match has '-' at index 4 and 'T' at index 10: checked first, most lines never run the
    pattern (and a log without timestamps never compiles it)."""
    return line[4:5] == "-" and line[10:11] == "T" and CI_PREFIX.match(line) is not None


def strip_ansi(text: str) -> str:
    if "\x1b" not in text:
        return text
    return _ANSI.sub("", text)


def normalize_line(line: str) -> str:
    """One line (no ``\\n``): ANSI removed, ``\\r`` redraws resolved to the last non-empty state."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    if "\r" in line:
        return _redraw(line)
    return line


def _redraw(line: str) -> str:
    """A line redrawn with ``\\r``: its last non-blank state (a CRLF ending: the line before it)."""
    if line.find("\r") == len(line) - 1:  # only a CRLF ending: the line before it, if not blank
        line = line[:-1]
        return line if line.strip() else ""
    parts = [p for p in line.split("\r") if p.strip()]
    return parts[-1] if parts else ""


# _ANSI for lines joined by '\n': no escape sequence can run across a newline (an OSC title stops
# at one), so one substitution over the joined lines removes what one per line would
_ANSI_LINES = lazy_regex(r"\x1b(?:\[[0-?]*+[ -/]*+[@-~]|\][^\x07\x1b\n]*+(?:\x07|\x1b\\)|[@-Z\\-_])")


# a line whose only '\r' ends it: all of it if it is blank (str.isspace is re's \s), else the '\r'
_CRLF_ONLY = lazy_re(r"(?m)^[^\S\n]*\r$|\r$")


def normalize_block(text: str) -> tuple[str, list[str]]:
    """``normalize_line`` on every line of ``text`` (lines joined by ``\\n``): (the normalised
    lines joined again, the lines). The ANSI escapes of all lines go in one pass."""
    if "\x1b" in text:
        text = _ANSI_LINES.sub("", text)
    if "\r" in text:
        ncr = text.count("\r")
        if ncr == text.count("\r\n") + text.endswith("\r"):
            # CRLF endings only (every '\r' ends its line): blank lines become empty, the others
            # lose the '\r', in one substitution
            text = _CRLF_ONLY.sub("", text)
        else:
            lines = [_redraw(x) if "\r" in x else x for x in text.split("\n")]
            return "\n".join(lines), lines
    return text, text.split("\n")


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
