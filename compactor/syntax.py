"""The text compactor writes into a conversation, and how it is recognised again.

Ground floor: no imports from the rest of the package. Every stage that writes a placeholder, an
elision marker, a summary head or a redaction, and every stage that must recognise one in its
input (a conversation compacted before), uses these definitions, so writer and reader can never
drift apart.
"""

from __future__ import annotations

from .lazyre import lazy_regex

__all__ = [
    "COMPACTION_MARKER",
    "ELIDED_TRACE_LINE",
    "MAX_SUMMARY",
    "PLACEHOLDER_LINE",
    "PLACEHOLDER_RE",
    "REDACTED_PREFIX",
    "SUMMARY_HEAD",
    "elided_trace_summary",
    "is_summary_text",
    "placeholder_line",
    "placeholder_safe",
]

# ---------------------------------------------------------------- placeholders (Level 1)
# ``[npm install: 234 packages, 0 errors · ref c-3f9a0c17d2b4e881]``: a summary and a store id of
# 16 hex digits. The summary never contains brackets or a newline (placeholder_safe).
PLACEHOLDER_RE = lazy_regex(r"\[[^\[\]\n]{0,400}?· ref (c-[0-9a-f]{16})\]")
# a whole line that is a placeholder (the input was compacted before)
PLACEHOLDER_LINE = lazy_regex(r"\s*\[[^\[\]\n]{0,400}?· ref c-[0-9a-f]{16}\]\s*")
# the marker left inside a long trace whose frame-only middle was elided
ELIDED_TRACE_LINE = lazy_regex(r"\s*\[… \d+ trace lines elided · ref c-[0-9a-f]{16}\]\s*")
MAX_SUMMARY = 300  # characters; a placeholder line must stay one short line
_BRACKETS = str.maketrans({"[": "(", "]": ")"})


def placeholder_line(summary: str, ref: str) -> str:
    return f"[{summary} · ref {ref}]"


def elided_trace_summary(count: int) -> str:
    return f"… {count} trace lines elided"


def placeholder_safe(text: str) -> str:
    """Captured text goes into ``[summary · ref id]``: no brackets (they would end the placeholder
    early for readers and PLACEHOLDER_RE), one line, bounded length."""
    text = text.translate(_BRACKETS)
    if len(text) > MAX_SUMMARY:
        text = text[: MAX_SUMMARY - 1].rstrip() + "…"
    return text


# ---------------------------------------------------------------- summaries (Level 2/3)
# The first line of every summary the budget stage inserts; also how the triggers and the
# self-check find an earlier compaction in their input.
COMPACTION_MARKER = "[compactor: "
SUMMARY_HEAD = lazy_regex(r"(?m)^\[compactor: |^#{1,3} (?:Current working state|Working state|当前工作状态)\b")


def is_summary_text(text: str) -> bool:
    """Is this message a summary compactor inserted (or an anchor rendered as Markdown)?"""
    return bool(SUMMARY_HEAD.search(text[:2000]))


# ---------------------------------------------------------------- redaction
# ``[REDACTED:github-token#2]``: a typed, numbered stand-in for a secret.
REDACTED_PREFIX = "[REDACTED:"
