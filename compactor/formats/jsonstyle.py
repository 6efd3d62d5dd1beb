"""Writing a JSON layout back the way its file was written.

Agents write their JSON in many styles: Python's ``json.dump(indent=4)``, ``JSON.stringify(x, null, 2)``,
compact JSONL with or without spaces after separators, with or without a final newline, with
non-ASCII text escaped or not. A reader of such a layout notes the style (:func:`detect_style`) and
its writer returns a :class:`Styled` value: the data plus the style (and, when nothing was changed,
the original text itself). :class:`StyledFormat` serialises it in that style, so a run with
nothing to compact comes back byte for byte, and a compacted one differs only where it changed.
Key order is kept by the parsed dicts themselves.
"""

from __future__ import annotations

import json
from typing import Any, Callable, NamedTuple

from .base import Document, Edits, Format, LayoutState, Probe, plan_drops
from ..models import Segment

__all__ = ["JsonStyle", "Styled", "StyledFormat", "StyledState", "detect_style", "record_index", "styled"]


class JsonStyle(NamedTuple):
    """How a JSON text is laid out: ``json.dumps`` arguments and the final newline."""

    indent: int | str | None = 2
    item_sep: str = ","
    key_sep: str = ": "
    ensure_ascii: bool = False
    newline: bool = True

    def dumps(self, value: Any) -> str:
        return json.dumps(value, ensure_ascii=self.ensure_ascii, indent=self.indent,
                          separators=(self.item_sep, self.key_sep))


DEFAULT_JSON = JsonStyle()
DEFAULT_JSONL = JsonStyle(indent=None, item_sep=",", key_sep=":")


def _separators(text: str, limit: int = 65536) -> tuple[str | None, str | None]:
    """The first item and key separators outside strings: ``", "`` or ``","`` etc. (None: not seen)."""
    item = key = None
    in_str = esc = False
    n = min(len(text), limit)
    i = 0
    while i < n and (item is None or key is None):
        c = text[i]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == "," and item is None:
            item = ", " if text[i + 1:i + 2] == " " else ","
        elif c == ":" and key is None:
            key = ": " if text[i + 1:i + 2] == " " else ":"
        i += 1
    return item, key


def _ensure_ascii(text: str) -> bool:
    if not text.isascii():
        return False
    # escaped non-ASCII (\u0080 and up) in an all-ASCII text: written with ensure_ascii
    at = text.find("\\u")
    while at != -1:
        code = text[at + 2:at + 6]
        if len(code) == 4 and code.lower() >= "0080" and all(ch in "0123456789abcdefABCDEF" for ch in code):
            if text[at - 1:at] != "\\":
                return True
        at = text.find("\\u", at + 2)
    return False


def detect_style(text: str, *, lines: bool = False) -> JsonStyle:
    """The style of a JSON document (``lines=False``) or of the records of a JSONL text."""
    body = text.lstrip("\ufeff")
    newline = body.endswith("\n")
    ensure_ascii = _ensure_ascii(body[:1 << 20])
    if lines:
        first = next((ln for ln in body.split("\n", 64)[:64] if ln.strip()), "")
        item, key = _separators(first)
        return JsonStyle(None, item or ",", key or ":", ensure_ascii, newline)
    stripped = body.strip()
    nl = stripped.find("\n")
    if nl == -1:
        item, key = _separators(stripped)
        return JsonStyle(None, item or ", ", key or ": ", ensure_ascii, newline)
    after = stripped[nl + 1:]
    ws = after[:len(after) - len(after.lstrip(" \t"))]
    indent: int | str | None = len(ws) if ws and set(ws) == {" "} else (ws or 0)
    _, key = _separators(stripped)
    return JsonStyle(indent, ",", key or ": ", ensure_ascii, newline)


class _Style:
    """What a written document carries besides its data: the style to serialise it in, whether it
    is JSONL (one record a line), and the original text when the document is unchanged."""

    style: JsonStyle
    raw: str | None
    lines: bool


class StyledList(list, _Style):
    pass


class StyledDict(dict, _Style):
    pass


Styled = (StyledList, StyledDict)


def styled(value: Any, style: JsonStyle, *, lines: bool = False, raw: str | None = None) -> Any:
    out: Any = StyledDict(value) if isinstance(value, dict) else StyledList(value)
    out.style, out.raw, out.lines = style, raw, lines
    return out


def _text(obj: Any) -> str:
    if obj.raw is not None:
        return obj.raw
    st = obj.style
    body = "\n".join(st.dumps(rec) for rec in obj) if obj.lines else st.dumps(obj)
    return body + ("\n" if st.newline else "")


def record_index(seg: Segment) -> int | None:
    """The record (message, step, item) a segment ``m<i>...`` belongs to."""
    return int(seg.id[1:].split(".")[0]) if seg.id.startswith("m") else None


class StyledState(LayoutState):
    """The file's JSON style and, for an unchanged write, its text."""

    style: Any = None
    raw: str | None = None
    lines: bool = False


class StyledFormat(Format):
    """A JSON layout written back in its file's style (see the module docstring). The reader
    calls :meth:`note_style`; the writer returns :meth:`finish` of its data."""

    def note_style(self, doc: Document, probe: Probe, *, lines: bool = False) -> None:
        text = probe.raw.text
        doc.state.style = detect_style(text, lines=lines) if text != "[...]" else (
            DEFAULT_JSONL if lines else DEFAULT_JSON)
        doc.state.raw = text if text != "[...]" else None
        doc.state.lines = lines

    State = StyledState

    def finish(self, doc: Document, data: Any, changed: bool) -> Any:
        lines = doc.state.lines
        style = doc.state.style or (DEFAULT_JSONL if lines else DEFAULT_JSON)
        return styled(data, style, lines=lines, raw=None if changed else doc.state.raw)

    def start_write(self, doc: Document, edits: Edits | None) -> tuple[Any, set[int] | None]:
        """What every writer of these layouts does first: the data to write (a copy unless written in
        place) with the replaced texts set at their origins and their mirrors, and the indices of the
        records to remove (segment ids ``m<i>...`` name record ``i``; a call and its result go
        together). ``(the unchanged document, finished, None)`` when there is nothing to change."""
        data = self.copy_data(doc, edits)
        if edits is None or edits.is_empty():
            return self.finish(doc, data, False), None
        self.replace_texts(data, doc, edits)
        return data, plan_drops(doc.segments, edits.drop, record_index, doc.state.pairs)

    def dumps(self, obj: Any, style: Any = None) -> str:
        """As :meth:`Format.dumps`; a :class:`Styled` result carries its file's own style, which
        wins over ``style``."""
        if isinstance(obj, Styled):
            return _text(obj)
        return super().dumps(obj, style)

    def dump(self, obj: Any, write: Callable[[str], Any], style: Any = None) -> None:
        if isinstance(obj, Styled):
            if obj.raw is not None:
                write(obj.raw)
            elif obj.lines:
                st = obj.style
                for n, rec in enumerate(obj):
                    write(("\n" if n else "") + st.dumps(rec))
                if st.newline:
                    write("\n")
            else:
                write(_text(obj))
            return
        super().dump(obj, write, style)
