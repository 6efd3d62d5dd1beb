"""How an input's JSON was written (indentation, separators, escaping, line ends), so that the
output is written the same way: a compact file stays compact, a tab-indented one keeps its tabs,
and a file with nothing to compact comes back byte for byte.

:func:`detect_style` reads the style off the text the reader parsed (its first 64 KiB for the
layout, the whole text for the escaping); :class:`JsonStyle` writes a value in it. A JSON Lines
input keeps its record separators, its line ends and whether the last line ends with one.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable

from ..lazyre import lazy_re
from ..record import Record

__all__ = ["DEFAULT_JSON", "DEFAULT_JSONL", "JsonStyle", "detect_style", "detect_file_style"]

_HEAD = 65536
# a JSON token: a string, a structural character, or a run of whitespace (anything else is a scalar)
_TOKEN = lazy_re(r'"(?:[^"\\]|\\.)*+"?|[\[\]{}:,]|[ \t\r\n]+|[^\s"\[\]{}:,]+', 0)
# an escaped character above ASCII (what ``ensure_ascii=True`` writes)
_ESCAPE = r"\\u(?:00[89a-fA-F][0-9a-fA-F]|0[1-9a-fA-F][0-9a-fA-F]{2}|[1-9a-fA-F][0-9a-fA-F]{3})"
_NON_ASCII_ESCAPE = lazy_re(_ESCAPE)
_NON_ASCII_ESCAPE_B = lazy_re(_ESCAPE.encode("ascii"))


class JsonStyle(Record, plain=True, frozen=True):
    """The parameters of :func:`json.dumps` that reproduce a file, plus its line ends.

    ``indent``: None (one line per document or record), a number of spaces or an indent string;
    ``item_sep`` / ``key_sep``: the separators (``item_sep`` without the newline an indent adds);
    ``ensure_ascii``: non-ASCII written as ``\\uXXXX``; ``eol``: the line end (``"\\n"`` or
    ``"\\r\\n"``); ``end``: what follows the document (JSON) or the last record (JSON Lines)."""

    indent: int | str | None = 2
    item_sep: str = ","
    key_sep: str = ": "
    ensure_ascii: bool = False
    eol: str = "\n"
    end: str = "\n"

    def _encoder(self) -> json.JSONEncoder:
        return json.JSONEncoder(ensure_ascii=self.ensure_ascii, indent=self.indent,
                                separators=(self.item_sep, self.key_sep))

    def _lines(self, text: str) -> str:
        return text.replace("\n", self.eol) if self.eol != "\n" and self.indent is not None else text

    def dumps(self, obj: Any) -> str:
        """The whole document as text (JSON container)."""
        return self._lines(self._encoder().encode(obj)) + self.end

    def dump(self, obj: Any, write: Callable[[str], Any], piece_size: int = 1 << 16) -> None:
        """:meth:`dumps` through ``write`` in pieces of about ``piece_size`` characters, never the
        whole text at once. (The pure-Python encoder, used with an indent, yields about one piece per
        12 characters, each a string object: a piece of 1 M characters held some 90,000 of them.)"""
        buf: list[str] = []
        size = 0
        for piece in self._encoder().iterencode(obj):
            if len(piece) >= piece_size:  # one long string (a 30 MB log): not joined again, written in slices
                if buf:
                    write(self._lines("".join(buf)))
                    buf, size = [], 0
                for i in range(0, len(piece), piece_size):
                    write(self._lines(piece[i:i + piece_size]))
                continue
            buf.append(piece)
            size += len(piece)
            if size >= piece_size:
                write(self._lines("".join(buf)))
                buf, size = [], 0
        write(self._lines("".join(buf)) + self.end)

    def record(self, rec: Any) -> str:
        """One JSON Lines record, without its line end."""
        return json.dumps(rec, ensure_ascii=self.ensure_ascii, separators=(self.item_sep, self.key_sep))

    def dumps_lines(self, records: list[Any]) -> str:
        """The records as JSON Lines text."""
        out: list[str] = []
        self.dump_lines(records, out.append)
        return "".join(out)

    def dump_lines(self, records: Any, write: Callable[[str], Any]) -> None:
        """Write the records one line each; the last one ends with :attr:`end`."""
        prev: str | None = None
        for rec in records:
            if prev is not None:
                write(prev + self.eol)
            prev = self.record(rec)
        if prev is not None:
            write(prev + self.end)


DEFAULT_JSON = JsonStyle()
DEFAULT_JSONL = JsonStyle(indent=None, item_sep=",", key_sep=":")


def detect_style(text: str, container: str, *, escaped: bool | None = None) -> JsonStyle | None:
    """The style ``text`` (a JSON document, or JSON Lines) was written in; None for a text layout.

    ``escaped``: whether the whole input is ASCII with non-ASCII characters escaped, when the
    caller knows it (a file it scanned) and ``text`` is only its beginning."""
    if container not in ("json", "jsonl"):
        return None
    default = DEFAULT_JSON if container == "json" else DEFAULT_JSONL
    head = text[:_HEAD]
    body = head.lstrip()
    if not body:
        return default
    if container == "jsonl":
        first = body.split("\n", 1)[0].rstrip("\r")
        item_sep, key_sep, _ = _separators(first)
        indent = None
    else:
        item_sep, key_sep, indent = _separators(body)
    eol = "\r\n" if "\r\n" in head else "\n"
    stripped = text.rstrip(" \t\r\n")
    end = text[len(stripped):]
    if container == "jsonl" and end.strip("\r\n") != "":
        end = end.strip(" \t")
    if escaped is None:
        escaped = text.isascii() and _NON_ASCII_ESCAPE.search(text) is not None
    return JsonStyle(indent=indent, item_sep=item_sep, key_sep=key_sep, ensure_ascii=escaped, eol=eol,
                     end=end)


def _separators(body: str) -> tuple[str, str, int | str | None]:
    """(item separator, key separator, indent) of the first separators and nesting in ``body``."""
    item_sep: str | None = None
    key_sep: str | None = None
    indent: int | str | None = None
    indent_known = False
    toks = [m.group() for _, m in zip(range(4096), _TOKEN.finditer(body))]
    for i, tok in enumerate(toks):
        nxt = toks[i + 1] if i + 1 < len(toks) else ""
        ws = nxt if nxt[:1] in (" ", "\t", "\r", "\n") else ""
        if not indent_known and tok in ("[", "{"):
            after = toks[i + 2] if ws and i + 2 < len(toks) else nxt
            if after and after not in ("]", "}"):  # a container with something in it
                indent_known = True
                if "\n" in ws:
                    unit = ws.rsplit("\n", 1)[1]
                    indent = len(unit) if unit.strip(" ") == "" else unit
        elif tok == ":" and key_sep is None:
            key_sep = ":" + ws.split("\n", 1)[0]
        elif tok == "," and item_sep is None:
            item_sep = "," + (ws.split("\n", 1)[0].rstrip("\r") if "\n" in ws else ws)
        if item_sep is not None and key_sep is not None and indent_known:
            break
    if item_sep is None:
        item_sep = "," if indent is not None or key_sep == ":" else ", "
    if key_sep is None:
        key_sep = ":" if item_sep == "," and indent is None else ": "
    return item_sep, key_sep, indent


def detect_file_style(path: str | os.PathLike[str], container: str) -> JsonStyle | None:
    """:func:`detect_style` of a file, reading its beginning, its end and (in chunks) whether it is
    ASCII: never the whole file at once."""
    if container not in ("json", "jsonl"):
        return None
    with open(path, "rb") as fh:
        head = fh.read(_HEAD)
        ascii_text, escapes = head.isascii(), _NON_ASCII_ESCAPE_B.search(head) is not None
        carry = head[-5:]
        while ascii_text:
            chunk = fh.read(1 << 22)
            if not chunk:
                break
            ascii_text = chunk.isascii()
            escapes = escapes or _NON_ASCII_ESCAPE_B.search(carry + chunk) is not None
            carry = chunk[-5:]
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(len(head), size - 64))
        tail = fh.read() if size > len(head) else b""
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    text = head.decode("utf-8", "replace")
    tail_text = tail.decode("utf-8", "replace")
    style = detect_style(text, container, escaped=ascii_text and escapes)
    if style is None or not tail_text:
        return style
    stripped = tail_text.rstrip(" \t\r\n")
    end = tail_text[len(stripped):]
    if container == "jsonl":
        end = end.strip(" \t")
    return style.model_copy(update={"end": end})
