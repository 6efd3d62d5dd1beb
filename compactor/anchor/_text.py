"""Text helpers for the anchor: ids, normalisation, sentence splitting, the cue patterns.

Every pattern here is an *explicit cue* (a word or phrase that states a decision, a failed
approach, a constraint, ...). The anchor never infers what the text does not say.
"""

from __future__ import annotations

import hashlib
import unicodedata

import regex
from ..lazyre import lazy_regex

__all__ = [
    "item_id",
    "norm_key",
    "squash",
    "shorten",
    "prose_of",
    "sentences",
    "split_reason",
]

_EDGE_PUNCT = " \t\n.,;:!?。，；：！？…"


def squash(text: str) -> str:
    """Collapse runs of whitespace to one space and strip."""
    return " ".join(text.split())


def norm_key(text: str) -> str:
    """The normalised form that ids are derived from: NFKC, casefolded, whitespace collapsed."""
    t = text if text.isascii() else unicodedata.normalize("NFKC", text)
    return " ".join(t.casefold().split()).strip(_EDGE_PUNCT)


def item_id(prefix: str, *parts: str, exact: bool = False) -> str:
    """A stable id from content: ``<prefix>-<16 hex digits of sha256(normalised parts)>``.

    ``exact=True`` hashes the text as it is (verbatim evidence: two lines that differ only in a
    bracket are two pieces of evidence)."""
    h = hashlib.sha256()
    for p in parts:
        h.update((p if exact else norm_key(p)).encode("utf-8", errors="surrogatepass"))
        h.update(b"\x1f")
    return f"{prefix}-{h.hexdigest()[:16]}"


def shorten(text: str, limit: int) -> str:
    """One line, at most ``limit`` characters; cut at a word boundary with an ellipsis."""
    t = _squashed_head(text, limit) if len(text) > 2 * limit + 64 else squash(text)
    if len(t) <= limit:
        return t
    cut = t[: limit - 1]
    sp = cut.rfind(" ")
    if sp > limit * 0.6:
        cut = cut[:sp]
    return cut.rstrip(" ,;:") + "…"


def _squashed_head(text: str, limit: int) -> str:
    """``squash(text)``, or, when that is longer than ``limit``, a prefix of it longer than
    ``limit`` (all :func:`shorten` reads of it): the head of a long text is squashed, not the
    whole text (a task statement of several KB is shortened every turn)."""
    n = len(text)
    p = 2 * limit + 64
    while p < n:
        head = squash(text[:p])  # a prefix of squash(text) (its last word may go on)
        if len(head) > limit:
            return head
        p *= 2
    return squash(text)


# ------------------------------------------------------------------ prose and sentences

_FENCE = lazy_regex(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?^[ \t]*\1[ \t]*$", regex.M | regex.S)
_UNCLOSED_FENCE = lazy_regex(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*\Z", regex.M | regex.S)
_TAG_BLOCK = lazy_regex(r"<(think|thinking|reasoning|example_response|example)>.*?</\1>", regex.S | regex.I)
_TAG = lazy_regex(r"</?[A-Za-z_][\w-]{0,40}(?:\s[^<>\n]{0,200})?>")
_DISCUSSION = lazy_regex(r"^\s*DISCUSSION\s*$", regex.M)


def prose_of(text: str) -> str:
    """The prose of a message: fenced code blocks and XML-ish tags removed."""
    if "```" in text or "~~~" in text:
        text = _FENCE.sub("\n", text)
        text = _UNCLOSED_FENCE.sub("\n", text)
    if "<" in text:
        text = _TAG_BLOCK.sub("\n", text)
        text = _TAG.sub(" ", text)
    if "DISCUSSION" in text:
        text = _DISCUSSION.sub("", text)
    return text


# A sentence ends at . ! ? (plus a closing quote/bracket) followed by space and an upper-case
# letter / digit / quote / CJK, or at CJK sentence punctuation, or at a line break.
_BOUNDARY = lazy_regex(r"[.!?][\"')\]]?\s+(?=[\"'(\[`*]?[\p{Lu}\p{N}\p{Han}])|[。！？]")
_BULLET = lazy_regex(r"^\s*(?:[-*•]|\d{1,2}[.)]|\(\d{1,2}\)|[一二三四五六七八九十]、)\s+")
_MAX_SENT = 400
_ENDERS = frozenset(".!?。！？")


def sentences(text: str, *, max_chars: int = 200_000) -> list[str]:
    """Split prose into sentences (English and Chinese), list markers removed, each stripped."""
    if len(text) > max_chars:
        text = text[:max_chars]
    out: list[str] = []
    for line in text.split("\n"):
        if not line.strip():
            continue
        if _ENDERS.isdisjoint(line):
            parts = [line]
        else:
            parts = []
            start = 0
            for m in _BOUNDARY.finditer(line):
                cut = m.end() if m.group(0)[0] in "。！？" else m.start() + len(m.group(0).rstrip())
                parts.append(line[start:cut])
                start = m.end()
            parts.append(line[start:])
        for raw in parts:
            s = raw.strip()
            if s[:1] in "-*•(" or s[:1].isdigit() or s[:1] in "一二三四五六七八九十":
                s = _BULLET.sub("", s)
            s = s.strip("*").strip()
            if 3 <= len(s) <= _MAX_SENT:
                out.append(s)
    return out


_REASON = lazy_regex(
    r"(?i)\s*(?:,\s*)?\b(?:because|since|as (?=it|this|that|they|the|we)|given that|due to|so that|in order to|to avoid)\b\s*"
    r"|[，,]?\s*(?:因为|由于|原因是|考虑到|为了)\s*"
)


def split_reason(sentence: str) -> tuple[str, str]:
    """Split 'do X because Y' into ('do X', 'Y'). Returns (sentence, '') when there is no reason cue."""
    m = _REASON.search(sentence)
    if not m or m.start() < 4:
        return sentence.strip(), ""
    head = sentence[: m.start()].strip(" ,;:，；")
    tail = sentence[m.end():].strip(" ,;:，；。.")
    if not head or not tail:
        return sentence.strip(), ""
    return head, tail
