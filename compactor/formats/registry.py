"""The layout registry: every :class:`~compactor.formats.base.Format` in detection order, and
picking one for an input."""

from __future__ import annotations

from ..errors import InputError
from .base import Document, Format, Probe, jsonl_layout

__all__ = ["REGISTRY", "detect", "get_format", "read_document", "register"]

REGISTRY: list[Format] = []


def register(fmt: type[Format]) -> type[Format]:
    REGISTRY.append(fmt())
    return fmt


def get_format(name: str) -> Format:
    for fmt in REGISTRY:
        if fmt.name == name:
            return fmt
    names = ", ".join(f.name for f in REGISTRY)
    raise InputError(f"unknown format {name!r}; known formats: {names}")


def detect(probe: Probe) -> Format:
    """Pick the layout of the input, or raise InputError saying why each layout was rejected."""
    reasons: list[str] = []
    for fmt in REGISTRY:
        ok, why = fmt.sniff(probe)
        if ok:
            return fmt
        reasons.append(f"{fmt.name}: {why}")
    hint = " (if this is a plain log, pass --format text)"
    if probe.jsonl_error:
        raise InputError(probe.jsonl_error + hint, source=probe.raw.source)
    if probe.json_error:
        raise InputError(f"malformed JSON: {probe.json_error}{hint}", source=probe.raw.source)
    raise InputError("unrecognised layout; tried " + "; ".join(reasons), source=probe.raw.source)


def read_document(probe: Probe, format_name: str = "auto") -> Document:
    if probe.raw.is_blank():
        raise InputError("empty input: nothing to compact", source=probe.raw.source)
    fmt = detect(probe) if format_name == "auto" else get_format(format_name)
    if format_name != "auto":
        ok, why = fmt.sniff(probe)
        if not ok and fmt.name != "text":
            if probe.jsonl_error:
                raise InputError(probe.jsonl_error, source=probe.raw.source)
            raise InputError(f"input is not in the {fmt.name} layout: {why}", source=probe.raw.source)
    doc = fmt.read(probe)
    if doc.layout is None and fmt.container == "jsonl":
        doc.layout = jsonl_layout(probe)
    doc.diagnostics[:0] = list(probe.raw.diagnostics)
    doc.style = probe.raw.json_style(fmt.container)
    return doc
