"""Anything a user passes (a path, text, bytes, already-parsed messages, a Document) → a
:class:`~compactor.formats.base.Document`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import InputError
from .base import Document, Probe, RawInput
from .inputs import decode_bytes, make_probe, probe_file
from .registry import read_document

__all__ = ["load_document"]


def load_document(data: Any, *, format: str = "auto", max_json_depth: int = 512,
                  source: str | None = None) -> Document:
    """Turn a path, bytes, text, or already-parsed messages into a :class:`Document`."""
    if isinstance(data, Document):
        return data
    if isinstance(data, Path) or (isinstance(data, str) and _looks_like_path(data)):
        return read_document(probe_file(data, max_depth=max_json_depth), format)
    if isinstance(data, (bytes, bytearray)):
        raw = decode_bytes(bytes(data), source or "<bytes>")
        return read_document(make_probe(raw, max_depth=max_json_depth), format)
    if isinstance(data, str):
        raw = RawInput(data, source or "<text>")
        return read_document(make_probe(raw, max_depth=max_json_depth), format)
    if isinstance(data, (list, dict)):
        # Already parsed: no text to sniff. Readers only look at the JSON value; the text is a
        # stand-in that says whether there is anything at all.
        probe = Probe(RawInput("[...]" if data else "", source or "<messages>"), json_value=data, is_json=True,
                      jsonl=list(data) if isinstance(data, list) else None)
        doc = read_document(probe, format)
        doc.style = None  # objects have no layout of their own: the layout's default is written
        return doc
    raise InputError(f"cannot compact a {type(data).__name__}: pass a path, text, bytes, or a list/dict of messages")


def _looks_like_path(s: str) -> bool:
    if "\n" in s or len(s) > 4096 or not s.strip():
        return False
    if s.lstrip()[:1] in "[{":
        return False
    try:
        return os.path.exists(s) or s == "-"
    except (OSError, ValueError):
        return False
