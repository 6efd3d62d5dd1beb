"""Baseline compaction methods, applied to the same segments compactor sees.

Every method takes the document's segments (``gold.SegmentLike``: role, kind, text) and returns
the list of output texts (one per kept segment). Token counting is done by the caller with the
same counter for every method.

- ``none``: no compaction.
- ``truncate``: keep the newest messages that fit in a token budget (a one-segment document,
  i.e. a plain log, keeps its newest lines instead).
- ``mask``: observation masking as OpenHands' ``ObservationMaskingCondenser`` and the JetBrains
  study ("The Complexity Trap", 2025) do it: every tool output except the last ``keep_last``
  (default 10) is replaced by a fixed placeholder; the calls and all other messages stay.
- ``head_tail``: every tool output longer than ``2n`` lines keeps its first and last ``n``
  lines and one ``[... k lines omitted ...]`` marker (SWE-agent / Claude Code style truncation).

The ``tune_*`` helpers choose each baseline's parameter so that its output fits a token budget
(the largest parameter that fits: most messages / most unmasked outputs / most lines).
"""

from __future__ import annotations

from typing import Callable, Sequence

from gold import SegmentLike

__all__ = ["MASK", "head_tail", "mask", "none", "truncate", "tune_head_tail", "tune_mask", "tokens_of"]

MASK = "<MASKED>"

Count = Callable[[str], int]


def tokens_of(texts: Sequence[str], count: Count) -> int:
    return sum(count(t) for t in texts)


def none(segs: Sequence[SegmentLike]) -> list[str]:
    return [s.text for s in segs]


def truncate(segs: Sequence[SegmentLike], budget: int, count: Count) -> list[str]:
    """Keep the newest messages within ``budget`` tokens (newest lines for a single-segment log)."""
    if len(segs) == 1:
        lines = segs[0].text.split("\n")
        kept: list[str] = []
        total = 0
        for line in reversed(lines):
            c = count(line + "\n")
            if total + c > budget:
                break
            kept.append(line)
            total += c
        return ["\n".join(reversed(kept))] if kept else []
    out: list[str] = []
    total = 0
    for s in reversed(segs):
        c = count(s.text)
        if total + c > budget:
            break
        out.append(s.text)
        total += c
    out.reverse()
    return out


def mask(segs: Sequence[SegmentLike], keep_last: int = 10, placeholder: str = MASK) -> list[str]:
    results = [i for i, s in enumerate(segs) if s.kind == "tool_result"]
    masked = set(results[: max(0, len(results) - keep_last)])
    return [placeholder if i in masked else s.text for i, s in enumerate(segs)]


def _head_tail_text(text: str, n: int) -> str:
    lines = text.split("\n")
    if len(lines) <= 2 * n + 1:
        return text
    omitted = len(lines) - 2 * n
    return "\n".join(lines[:n] + [f"[... {omitted} lines omitted ...]"] + (lines[-n:] if n else []))


def head_tail(segs: Sequence[SegmentLike], n: int = 20) -> list[str]:
    return [_head_tail_text(s.text, n) if s.kind == "tool_result" else s.text for s in segs]


def tune_head_tail(segs: Sequence[SegmentLike], budget: int, count: Count) -> tuple[int, list[str]]:
    """The largest n whose head+tail output fits the budget (n = 0 if none does)."""
    longest = max((s.text.count("\n") + 1 for s in segs if s.kind == "tool_result"), default=0)
    lo, hi = 0, max(0, longest // 2 + 1)
    best = 0
    while lo <= hi:
        mid = (lo + hi) // 2
        if tokens_of(head_tail(segs, mid), count) <= budget:
            best = mid
            lo = mid + 1
        else:
            hi = mid - 1
    return best, head_tail(segs, best)


def tune_mask(segs: Sequence[SegmentLike], budget: int, count: Count) -> tuple[int, list[str]]:
    """The largest number of recent tool outputs left unmasked that fits (0 if none does)."""
    n_results = sum(1 for s in segs if s.kind == "tool_result")
    lo, hi, best = 0, n_results, 0
    while lo <= hi:
        mid = (lo + hi) // 2
        if tokens_of(mask(segs, mid), count) <= budget:
            best = mid
            lo = mid + 1
        else:
            hi = mid - 1
    return best, mask(segs, best)
