"""Tokens as the model sees them: the written layout, read back.

A budget is a promise about what an agent sends, so the output is measured the way it leaves:
the document is written in its own layout (with every mirror copy of a replaced text, the
tool-call arguments, the summary message), serialised, read back with the same layout reader,
and every text the reader finds is counted — each segment's text plus every mirror copy the
layout keeps of it (Claude Code ``toolUseResult``, Codex ``event_msg`` copies, …).
"""

from __future__ import annotations

import json
from typing import Any

from ..formats import Document, Edits, RawInput, get_format
from ..formats.base import get_at
from ..formats.inputs import make_probe
from ..tokens import TokenCounter

__all__ = ["read_back", "sent_texts", "sent_tokens", "written_texts"]


def read_back(format_name: str, written: Any, source: str = "<written>") -> Document:
    """Read what a writer returned (Python data or text) back with the layout's own reader."""
    fmt = get_format(format_name)
    text = written if isinstance(written, str) else fmt.dumps(written)
    return fmt.read(make_probe(RawInput(text, source)))


def sent_texts(doc: Document) -> list[str]:
    """Every text of a read document that an agent would send: segment texts (messages,
    tool-call arguments, tool results, harness text) plus the mirror copies the layout holds."""
    out = [s.text for s in doc.segments]
    for _sid, paths in sorted(doc.state.mirrors.items()):
        for p in paths:
            try:
                v = get_at(doc.data, p)
            except (KeyError, IndexError, TypeError):
                continue
            if isinstance(v, str):
                out.append(v)
            elif v is not None:
                out.append(json.dumps(v, ensure_ascii=False))
    return out


def written_texts(doc: Document, edits: Edits) -> list[str]:
    """The texts of ``doc`` written with ``edits`` and read back."""
    fmt = get_format(doc.format)
    return sent_texts(read_back(doc.format, fmt.write(doc, edits)))


def sent_tokens(doc: Document, edits: Edits, counter: TokenCounter) -> int:
    return sum(counter.count(t) for t in written_texts(doc, edits))
