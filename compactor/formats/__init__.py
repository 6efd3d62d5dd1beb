"""The read and write edge: layout readers and writers, auto-detection, input decoding.

Each layout is a :class:`~compactor.formats.base.Format` subclass registered in
:data:`REGISTRY` in detection order: the most specific layouts first, plain text last.
:func:`load_document` turns anything a user passes (a path, text, bytes, parsed messages) into a
:class:`Document`.
"""

from __future__ import annotations

from .base import Document, Edits, Format, LayoutState, Probe, RawInput
from .registry import REGISTRY, detect, get_format, read_document, register

__all__ = ["REGISTRY", "Document", "Edits", "Format", "LayoutState", "Probe", "RawInput", "detect", "get_format", "load_document",
           "read_document", "register"]

# Registration order is detection order. A layout module may import helpers from .base and from
# layouts registered before it (claude_code and claude_sdk use anthropic's block reader), never from later ones: importing a
# module registers it, so a forward import would change the detection order.
from . import (  # noqa: E402,F401  (import for registration side effects)
    steps,
    swe_agent,
    openhands,
    cline,
    openai_chat,
    anthropic,
    claude_sdk,
    claude_code,
    pi,
    claude_md,
    gemini,
    atif,
    debug_gym,
    codex,
    codex_tui,
    aider,
    agent_log,
    conversation,
    text,
)

from .load import load_document  # noqa: E402
