"""Small helpers shared by the policy modules (no anchor extraction here: that is compactor.anchor)."""

from __future__ import annotations

import hashlib

import regex

from ..models import Anchor, Role, Segment, SegmentKind
from ..normalize import normalize
from .triggers import is_summary_text

__all__ = ["bf_id", "newest_request", "squash", "present", "last_assistant", "shorten"]

_WS = regex.compile(r"\s+")


def squash(text: str) -> str:
    return " ".join(normalize(text).split())


def shorten(text: str, limit: int) -> str:
    t = _WS.sub(" ", text).strip()
    if len(t) <= limit:
        return t
    cut = t[: limit - 1]
    sp = cut.rfind(" ")
    if sp > limit * 0.6:
        cut = cut[:sp]
    return cut.rstrip(" ,;:") + "…"


def bf_id(prefix: str, *parts: str) -> str:
    """A stable id for a back-filled item (same shape as the anchor's ids)."""
    try:
        from ..anchor._text import item_id  # the anchor's own id scheme when available

        return item_id(prefix, *parts)
    except Exception:  # pragma: no cover - anchor package absent
        h = hashlib.sha256("\x1f".join(parts).encode("utf-8", errors="surrogatepass")).hexdigest()
        return f"{prefix}-{h[:16]}"


def is_request(seg: Segment) -> bool:
    return (seg.role == Role.user and seg.kind == SegmentKind.message and not seg.meta
            and bool(seg.text.strip()) and not is_summary_text(seg.text))


def newest_request(segments: list[Segment], anchor: Anchor | None = None) -> Segment | None:
    """The newest human request: the last user message that is not harness text or a summary."""
    for s in reversed(segments):
        if is_request(s):
            return s
    return None


def last_assistant(segments: list[Segment]) -> Segment | None:
    for s in reversed(segments):
        if s.role == Role.assistant and s.kind == SegmentKind.message and s.text.strip():
            return s
    return None


def present(needle: str, haystack_squashed: str, *, prefix: int = 0) -> bool:
    """Is ``needle`` (whitespace-insensitively) in the squashed haystack? ``prefix`` > 0 checks
    only the first ``prefix`` characters of the needle (for texts a renderer may shorten)."""
    n = squash(needle)
    if not n:
        return True
    if prefix and len(n) > prefix:
        n = n[:prefix]
    n = n.rstrip("…").rstrip()
    return n in haystack_squashed
