"""Rendering a :class:`CompactionResult` for output: JSON (with the anchor's canonical JSON), the
layout itself, the anchor as seed 000's memory record (exactly its six fields), Markdown
(English or Chinese), a hand-off document, or the report."""

from __future__ import annotations

import json
from typing import TextIO

from .errors import ConfigError
from .formats import get_format
from .formats.base import write_json
from .models import CompactionResult

__all__ = ["render", "write"]

EMITS = ("json", "messages", "anchor", "markdown", "handoff", "report")


def _dump(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=2) + "\n"


def _json_dict(result: CompactionResult) -> dict:
    d = result.to_json_dict()
    if result.anchor is not None:
        from .anchor import to_json

        d["anchor"] = to_json(result.anchor)
    return d


def render(result: CompactionResult, emit: str = "json", *, lang: str = "en") -> str:
    if emit == "json":
        return _dump(_json_dict(result))
    if emit == "messages":
        return get_format(result.format).dumps(result.messages)
    if emit == "report":
        return _dump(result.report.model_dump(mode="json"))
    if emit in ("anchor", "markdown", "handoff"):
        if result.anchor is None:
            raise ConfigError(f"--emit {emit} needs the anchor, which was not built (level 0?)")
        if emit == "anchor":
            from .anchor import to_seed_json

            return _dump(to_seed_json(result.anchor))
        if emit == "markdown":
            from .anchor import to_markdown

            return to_markdown(result.anchor, lang=lang)
        if result.handoff:
            return result.handoff
        from .budget.handoff import handoff_document

        return handoff_document(result, lang=lang)
    raise ConfigError(f"unknown --emit {emit!r}; choose one of {', '.join(EMITS)}")


def write(result: CompactionResult, emit: str, out: TextIO, *, lang: str = "en") -> None:
    """Write what :func:`render` returns to ``out``, the same text, without building it as one
    string: JSON goes out in pieces as it is encoded."""
    if emit == "json":
        write_json(_json_dict(result), out.write)
    elif emit == "messages":
        get_format(result.format).dump(result.messages, out.write)
    else:
        out.write(render(result, emit, lang=lang))

