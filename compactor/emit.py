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

__all__ = ["render", "write", "write_parts"]

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
        return get_format(result.format).dumps(result.messages, result.layout)
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


class _DumpedOneByOne(list):
    """The JSON form of a list of models, each item dumped only when the encoder reaches it (the
    report's spans and placeholders are as many as the input has evidence: never all as dicts at
    once). Only for the pure-Python encoder of :func:`write_json`, which iterates lists."""

    def __init__(self, items: list):
        super().__init__()
        self._items = items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self):
        for item in self._items:
            yield item.model_dump(mode="json")


_ONE_BY_ONE = ("protected", "placeholders")


def _json_dict_streamed(result: CompactionResult) -> dict:
    """:func:`_json_dict` with the report's long lists dumped item by item as they are written."""
    d = result.to_json_dict(report=False)
    report = result.report
    d["report"] = _report_dict(report, {k: _DumpedOneByOne(getattr(report, k)) for k in _ONE_BY_ONE})
    if result.anchor is not None:
        from .anchor import to_json

        d["anchor"] = to_json(result.anchor)
    return d


def _report_dict(report, lists: dict) -> dict:
    """The report's JSON with its long lists (``protected``, ``placeholders``) taken from ``lists``."""
    dumped = report.model_dump(mode="json", exclude=set(_ONE_BY_ONE))
    return {k: (lists[k] if k in _ONE_BY_ONE else dumped[k])
            for k in type(report).model_fields if k in _ONE_BY_ONE or k in dumped}


def write_parts(report, anchor, emit: str, write, *, messages, lists: dict, style=None) -> None:
    """What :func:`write` writes of a result, from its parts: the report (its long lists in
    ``lists``), the anchor and the layout's messages (in ``style``: the input's JSON layout), each
    list written item by item as the encoder reaches it (a compaction that never held its output
    whole)."""
    if emit == "messages":
        write_json(messages, write, style=style)
        return
    if emit != "json":
        raise ConfigError(f"--emit {emit} is written from a whole result")
    from .models import SCHEMA_VERSION

    d = {"schema_version": SCHEMA_VERSION, "format": report.format, "messages": messages, "anchor": None,
         "report": _report_dict(report, lists)}
    if anchor is not None:
        from .anchor import to_json

        d["anchor"] = to_json(anchor)
    write_json(d, write)


def write(result: CompactionResult, emit: str, out: TextIO, *, lang: str = "en") -> None:
    """Write what :func:`render` returns to ``out``, the same text, without building it as one
    string: JSON goes out in pieces as it is encoded."""
    if emit == "json":
        write_json(_json_dict_streamed(result), out.write)
    elif emit == "messages":
        get_format(result.format).dump(result.messages, out.write, result.layout)
    else:
        out.write(render(result, emit, lang=lang))

