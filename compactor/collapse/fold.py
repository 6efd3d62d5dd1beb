"""Repetition folding: runs of lines that differ only in numbers, ids, hashes, paths or
timestamps become the first line, one fold marker with a count, and the last line.

Streaming and cheap: one masking substitution per line (skipped for very long lines, which
only fold when identical), then a comparison with the previous one or two templates.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

from ..lazyre import lazy_re, lazy_regex
from ..plain import Plain

__all__ = ["FoldRun", "MIN_RUN", "fold_lines", "informative", "short", "summarize", "template_of"]

MIN_RUN = 4  # a run shorter than this is cheaper to keep as it is
MASK_MAX = 1000  # lines longer than this only fold when identical
_MASK = lazy_regex(
    # path-like token, tried only where a token starts: elsewhere in a token it cannot match (the
    # scan reaches the middle of a token only when the token did not end in '/'), and trying it
    # there rescanned the token at every position (quadratic in its length)
    r"(?<![^\s/\"'()\[\]<>=,])[^\s/\"'()\[\]<>=,]*+/[^\s\"'()\[\]<>=,]*+"
    r"|[A-Fa-f]*+\d[0-9A-Fa-f]*+"  # numbers, hex ids, hashes
)


# the same substitution on a line without '/': the path-like branch needs one, and trying it at
# every position of a long token costs time quadratic in the token
_MASK_NO_SLASH = lazy_regex(r"[A-Fa-f]*+\d[0-9A-Fa-f]*+")

# the same two patterns in the standard ``re`` module with ASCII classes, for ASCII lines (most log
# lines): about 2.5x faster there, and on ASCII text ``\s`` and ``\d`` name the same characters
# in both modules (without the ASCII flag, ``re`` counts '\x1c'-'\x1f' as white space and
# ``regex`` does not); tests compare the two on every character and on the corpus
_RE_ASCII = 256  # re.ASCII, without importing re here
_MASK_ASCII = lazy_re(_MASK.pattern, _RE_ASCII)
_MASK_NO_SLASH_ASCII = lazy_re(_MASK_NO_SLASH.pattern, _RE_ASCII)


def template_of(line: str) -> str:
    if len(line) > MASK_MAX:
        return line
    if line.isascii():
        if "/" not in line:
            return _MASK_NO_SLASH_ASCII.sub("#", line)
        return _MASK_ASCII.sub("#", line)
    if "/" not in line:
        return _MASK_NO_SLASH.sub("#", line)
    return _MASK.sub("#", line)


class FoldRun(Plain):
    """``start``: index of the first folded line (0-based, in the input); ``end``: index of the
    last folded line (inclusive); ``period``: 1 (one template) or 2 (two alternating)."""

    __slots__ = ("start", "end", "period")


def find_runs(lines: list[str], protected: Callable[[int], bool] | None = None,
              min_run: int = MIN_RUN) -> list[FoldRun]:
    """Runs of at least ``min_run`` lines with the same template (period 1) or alternating
    between two templates (period 2). Protected lines break runs."""
    runs: list[FoldRun] = []
    n = len(lines)
    tmpl = [template_of(line) if line.strip() else None for line in lines]
    i = 0
    while i < n:
        if tmpl[i] is None or (protected and protected(i)):
            i += 1
            continue
        # period 1
        j = i + 1
        while j < n and tmpl[j] == tmpl[i] and not (protected and protected(j)):
            j += 1
        if j - i >= min_run:
            runs.append(FoldRun(i, j - 1, 1))
            i = j
            continue
        # period 2 (e.g. "Downloading x" / "Downloaded x")
        if i + 1 < n and tmpl[i + 1] is not None and tmpl[i + 1] != tmpl[i]:
            j = i + 2
            while j < n and tmpl[j] == tmpl[j - 2] and not (protected and protected(j)):
                j += 1
            if j - i >= 2 * min_run:
                if (j - i) % 2:
                    j -= 1
                runs.append(FoldRun(i, j - 1, 2))
                i = j
                continue
        i += 1
    return runs


def fold_lines(lines: list[str], marker: Callable[[list[str], FoldRun], str],
               protected: Callable[[int], bool] | None = None, min_run: int = MIN_RUN) -> tuple[list[str], list[FoldRun]]:
    """Return the folded lines and the runs folded. ``marker(original_lines, run)`` renders
    the fold line (and may store the originals)."""
    runs = find_runs(lines, protected, min_run)
    if not runs:
        return lines, []
    out: list[str] = []
    pos = 0
    for run in runs:
        out.extend(lines[pos:run.start])
        keep = run.period
        out.extend(lines[run.start:run.start + keep])
        inner_a, inner_b = run.start + keep, run.end - keep
        if inner_b >= inner_a:
            out.append(marker(lines, FoldRun(inner_a, inner_b, run.period)))
        out.extend(lines[run.end - keep + 1:run.end + 1])
        pos = run.end + 1
    out.extend(lines[pos:])
    return out, runs


def iter_templates(lines: Iterable[str]) -> Iterator[str]:
    for line in lines:
        yield template_of(line)


# ---------------------------------------------------------------------------- fold summaries

_SHORT = 60


def informative(template: str) -> bool:
    """A line shape worth naming in a summary: it has a letter or a digit mask, not only
    separators, punctuation or blanks ('-----', '', '====', '}' say nothing about a region)."""
    for ch in template:
        if ch.isalpha() or ch == "#":
            return True
    return False


def short(text: str, n: int = _SHORT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def summarize(counts: list[tuple[str, int]], first: str | None = None, last: str | None = None,
              top: int = 3) -> str:
    """The body of a fold marker: the most frequent informative shapes with their counts, and the
    first and last instance of the most frequent one when its instances differ from its shape.
    ``counts`` is (template, count) pairs; order does not matter (a total sort is applied)."""
    ranked = sorted((kv for kv in counts if informative(kv[0])), key=lambda kv: (-kv[1], kv[0]))
    if not ranked:
        return "separators and blank lines"
    parts = []
    for k, (t, n) in enumerate(ranked[:top]):
        part = f'{n}× "{short(t)}"'
        if k == 0 and n > 1 and first is not None and last is not None and first != last:
            part += f' (first "{short(first, 48)}", last "{short(last, 48)}")'
        parts.append(part)
    rest = len(ranked) - top
    if rest > 0:
        parts.append(f"{rest} other shape{'s' if rest > 1 else ''}")
    return ", ".join(parts)
