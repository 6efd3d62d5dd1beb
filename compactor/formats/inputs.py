"""Reading untrusted input at the edge: bytes to text, text to JSON, with limits.

- Binary data (NUL bytes in the first 64 KiB that is not valid text) is rejected.
- Invalid UTF-8 inside otherwise valid text is decoded with U+FFFD and reported as a
  diagnostic naming the first bad byte offset; nothing is dropped.
- JSON nesting deeper than ``max_json_depth`` is rejected before Python's recursion limit can
  be hit; lone UTF-16 surrogates are replaced (they would crash UTF-8 output later).
- JSONL errors name the line.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import InputError, LimitError
from ..models import Diagnostic, Severity
from .base import Probe, RawInput
from ..lazyre import lazy_re, lazy_regex

__all__ = [
    "DEFAULT_MAX_JSON_DEPTH",
    "DEFAULT_MAX_INPUT_BYTES",
    "decode_bytes",
    "decode_stream",
    "load_json_text",
    "make_probe",
    "probe_file",
    "read_input",
    "stream_start",
]

DEFAULT_MAX_JSON_DEPTH = 512
DEFAULT_MAX_INPUT_BYTES = 2 * 1024**3  # 2 GiB for in-memory (non-streaming) commands
# below this a JSON file is parsed in memory (the same value): the streaming parser saves memory
# only on large files, and importing it costs a short run about a third of Python's own start
STREAM_MIN_BYTES = 1024**2

_SURROGATE = lazy_regex(r"[\ud800-\udfff]")


def decode_bytes(data: bytes, source: str = "<input>") -> RawInput:
    """Decode bytes as UTF-8 (BOM stripped). Invalid bytes become U+FFFD with a diagnostic."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    elif data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return RawInput(data.decode("utf-16"), source)
        except UnicodeDecodeError:
            pass
    head = data[:65536]
    if b"\x00" in head:
        nul_at = head.index(b"\x00")
        # Text with a stray NUL is still text; mostly-binary data is not.
        sample = head[:8192]
        controls = sum(1 for b in sample if b < 9 or 13 < b < 32)
        if controls > len(sample) // 20 or not _mostly_utf8(sample):
            raise InputError(
                f"binary data (NUL byte at offset {nul_at}); compactor reads text and JSON, not binary files",
                source=source,
                position=f"byte {nul_at}",
            )
    try:
        return RawInput(data.decode("utf-8"), source)
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", errors="replace")
        diag = Diagnostic(
            code="invalid-utf8",
            severity=Severity.warning,
            message=f"{source}:byte {exc.start}: invalid UTF-8; undecodable bytes were replaced with U+FFFD",
            position=f"byte {exc.start}",
        )
        return RawInput(text, source, (diag,))


def _mostly_utf8(sample: bytes) -> bool:
    try:
        sample.decode("utf-8")
        return True
    except UnicodeDecodeError as exc:
        return exc.start > len(sample) - 4  # cut in the middle of a character at the end


def read_input(path: str | os.PathLike[str] | None, *, stdin: BinaryIO | None = None,
               max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> RawInput:
    """Read a file (or stdin for ``None``/``'-'``) into a :class:`RawInput`."""
    if path is None or str(path) == "-":
        stream = stdin if stdin is not None else sys.stdin.buffer
        data = stream.read(max_bytes + 1)
        source = "<stdin>"
    else:
        p = Path(path)
        source = str(path)
        if not p.exists():
            raise InputError("no such file; check the path", source=source)
        if p.is_dir():
            raise InputError("is a directory; pass a file (or '-' for standard input)", source=source)
        try:
            size = p.stat().st_size
            if size > max_bytes:
                raise LimitError(
                    f"input is {size} bytes, over the {max_bytes}-byte limit for in-memory commands; "
                    "use 'compactor trim' for logs or raise the limit",
                    source=source,
                )
            data = p.read_bytes()
        except PermissionError:
            raise InputError("permission denied", source=source) from None
        except IsADirectoryError:
            raise InputError("is a directory", source=source) from None
    if len(data) > max_bytes:
        raise LimitError(f"input is over the {max_bytes}-byte limit", source=source)
    return decode_bytes(data, source)


def _depth_ok(text: str, max_depth: int) -> int | None:
    """Return the offset where nesting first exceeds max_depth, or None.

    Cheap pass: strings are skipped by a regex, brackets counted. Only called when the text
    has enough brackets to possibly be that deep.
    """
    depth = 0
    for m in _TOKENS.finditer(text):
        ch = m.group()
        if ch[0] == '"':
            continue
        if ch in "[{":
            depth += 1
            if depth > max_depth:
                return m.start()
        else:
            depth -= 1
    return None


_BRACKETS = lazy_regex(r"[\[\]{}]")


def _bracket_depth_bound(text: str) -> int:
    """An upper bound of the nesting depth, counting brackets inside strings too (C-speed scan;
    the exact, string-aware check only runs when this bound is over the limit)."""
    depth = best = 0
    for ch in _BRACKETS.findall(text):
        if ch == "[" or ch == "{":
            depth += 1
            if depth > best:
                best = depth
        else:
            depth -= 1
    return best


_TOKENS = lazy_regex(r'(?s)"(?:[^"\\]|\\.)*+"|[\[\]{}]')


def _fix_surrogates(value: Any) -> tuple[Any, int]:
    """Replace lone surrogates in every string of a JSON value (iteratively)."""
    count = 0

    def fix(s: str) -> str:
        nonlocal count
        if _SURROGATE.search(s) is None:
            return s
        new, n = _SURROGATE.subn("\ufffd", s)
        count += n
        return new

    if isinstance(value, str):
        return fix(value), count
    stack: list[Any] = [value]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            for k in list(cur.keys()):
                v = cur[k]
                nk = fix(k) if isinstance(k, str) else k
                if isinstance(v, str):
                    v = fix(v)
                elif isinstance(v, (dict, list)):
                    stack.append(v)
                if nk != k:
                    del cur[k]
                cur[nk] = v
        elif isinstance(cur, list):
            for i, v in enumerate(cur):
                if isinstance(v, str):
                    cur[i] = fix(v)
                elif isinstance(v, (dict, list)):
                    stack.append(v)
    return value, count


def _check_depth(text: str, source: str, max_depth: int, position_prefix: str) -> None:
    if text.count("[") + text.count("{") > max_depth and _bracket_depth_bound(text) > max_depth:
        where = _depth_ok(text, max_depth)
        if where is not None:
            line = text.count("\n", 0, where) + 1
            raise LimitError(
                f"JSON nesting deeper than {max_depth} levels (at line {line}); refusing to parse "
                "(raise max_json_depth if this is real data)",
                source=source,
                position=f"{position_prefix}line {line}",
            )


def load_json_text(text: str, source: str = "<input>", *, position_prefix: str = "",
                   max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> tuple[Any, int]:
    """Parse one JSON document; return (value, lone surrogates replaced).

    Raises InputError naming line and column, LimitError for nesting over max_depth.
    """
    _check_depth(text, source, max_depth, position_prefix)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"malformed JSON: {exc.msg}",
            source=source,
            position=f"{position_prefix}line {exc.lineno} column {exc.colno}",
        ) from None
    except RecursionError:
        raise LimitError("JSON nesting too deep", source=source) from None
    if "\\ud" in text or "\\uD" in text:
        value, n = _fix_surrogates(value)
        return value, n
    return value, 0


# How JSON (or a JSONL record) begins: an object with a key or empty, an array of values. Logs
# whose lines open with a bracket ("[INFO] …", "[2018-05-17 07:01:35] …", "[ RUN      ] …",
# "{main} …") do not, and are read as text instead of failing as malformed JSON.
_JSON_START = lazy_re(r'\{\s*(?:"|\})|\[\s*(?:[\[{"\]]|-?\d[\d.eE+-]*\s*[,\]]|(?:true|false|null)\s*[,\]])')


def make_probe(raw: RawInput, *, max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> Probe:
    """Parse the text as JSON or JSONL when it looks like either. Errors are kept, not raised."""
    probe = Probe(raw)
    text = raw.text
    stripped = text.lstrip()
    if not stripped:
        return probe
    first = stripped[0]
    if first in "[{" and _JSON_START.match(stripped):
        try:
            probe.json_value, _ = load_json_text(text, raw.source, max_depth=max_depth)
            probe.is_json = True
            return probe
        except LimitError:
            raise
        except InputError as exc:
            probe.json_error = _json_error(exc)
        # JSONL, or values run together on a line, or several pretty-printed values: one JSON
        # value after another
        try:
            records, spans, lines = decode_stream(text, raw.source, max_depth=max_depth)
        except LimitError:
            raise
        except InputError as exc:
            if exc.position is not None:  # a record after the first is broken: it is JSONL with a bad record
                probe.jsonl_error = exc.message
                probe.json_error = None
            # else: not JSONL at all (its first value is no JSON value): the JSON error, which
            # names the line and column where the document breaks off, is the one to report
            return probe
        probe.jsonl = records
        probe.jsonl_spans = spans
        probe.jsonl_lines = lines
    return probe


_WS = lazy_re(r"[ \t\n\r]*")


def decode_stream(text: str, source: str = "<input>", *,
                  max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> tuple[list[Any], list[tuple[int, int]], list[int]]:
    """Every JSON value of a text, one after another (JSONL, values run together on one line with or
    without whitespace between them, pretty-printed values one after another): the values, where
    each sits in the text (start, end offsets) and the line each starts on.

    A value that does not parse raises InputError naming the line and column; its ``position`` is
    None when it is the first value (the text is not a stream of JSON values at all)."""
    _check_depth(text, source, max_depth, "")
    decode = _DECODER.raw_decode
    skip = _WS.match
    values: list[Any] = []
    spans: list[tuple[int, int]] = []
    lines: list[int] = []
    end = len(text)
    pos = skip(text, 0).end()
    line = 1 + text.count("\n", 0, pos)
    surrogates = "\\ud" in text or "\\uD" in text
    while pos < end:
        try:
            value, stop = decode(text, pos)
        except json.JSONDecodeError as exc:
            # the text ends inside the value (a string can hold no raw newline: one that never
            # ends runs to the end of the text)
            truncated = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
            what = "truncated JSON (the file ends inside a record)" if truncated else "malformed JSON"
            where = f"line {exc.lineno} column {exc.colno}"
            started = "" if exc.lineno == line else f" (in the record that starts at line {line})"
            raise InputError(f"{where}: {what}: {exc.msg}{started}", source=source,
                             position=where if values else None) from None
        except RecursionError:
            raise LimitError("JSON nesting too deep", source=source, position=f"line {line}") from None
        if surrogates:
            value, _ = _fix_surrogates(value)
        values.append(value)
        spans.append((pos, stop))
        lines.append(line)
        nxt = skip(text, stop).end()
        line += text.count("\n", pos, nxt)
        pos = nxt
    return values, spans, lines


_DECODER = json.JSONDecoder()


# ---------------------------------------------------------------------------- streamed reading
#
# ``probe_file`` gives the probe ``make_probe(read_input(path))`` gives, without ever holding the
# file's bytes or text when the file is JSON or JSONL: JSON is parsed incrementally from the file
# (ijson's C backend), JSONL record by record. Whatever the streamed path is not sure to read
# exactly as ``json.loads`` would (a byte-order mark other than UTF-8's, invalid UTF-8, lone
# surrogate escapes, nesting that may be over the limit, numbers out of range, NaN, any parse
# error) is read by the in-memory path instead, so results, warnings and error messages with
# their positions stay exactly the same.

_CHUNK = 8 * 1024 * 1024
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_TO_SQUARE = bytes.maketrans(b"{}", b"[]")
_SURROGATE_ESC = lazy_re(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE_PAIR = lazy_re(rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}")


class FileText(RawInput):
    """A :class:`RawInput` whose text is read from its file only when something asks for it (a
    text layout, an error message naming a line); a JSON reader never does."""

    __slots__ = ("_path", "_max_bytes", "_text")

    def __init__(self, path: Path, source: str, max_bytes: int = DEFAULT_MAX_INPUT_BYTES):
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "diagnostics", ())
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_max_bytes", max_bytes)
        object.__setattr__(self, "_text", None)

    @property
    def text(self) -> str:  # type: ignore[override]
        if self._text is None:
            object.__setattr__(self, "_text", read_input(self._path, max_bytes=self._max_bytes).text)
        return self._text

    def is_blank(self) -> bool:
        return False  # only a file that parsed as JSON or JSONL is read this way

    def json_style(self, container: str):
        if self._text is not None:
            return super().json_style(container)
        from .style import detect_file_style

        return detect_file_style(self._path, container)  # its beginning and end, never the whole text

    def __repr__(self) -> str:
        return f"FileText({self.source!r})"


def _yajl():
    try:
        import ijson

        return ijson.get_backend("yajl2_c")
    except Exception:  # noqa: BLE001 - no C backend: the in-memory path reads the file
        return None


def probe_file(path: str | os.PathLike[str] | None, *, max_depth: int = DEFAULT_MAX_JSON_DEPTH,
               max_bytes: int = DEFAULT_MAX_INPUT_BYTES, stdin: BinaryIO | None = None) -> Probe:
    """The probe of a file (or stdin for ``None``/``'-'``), read the way :func:`make_probe` of
    :func:`read_input` reads it, but streamed for JSON and JSONL files."""
    if path is not None and str(path) != "-":
        p = Path(path)
        try:
            ok = p.is_file() and STREAM_MIN_BYTES <= p.stat().st_size <= max_bytes
        except OSError:
            ok = False
        if ok:
            try:
                probe = _stream_probe(p, str(path), max_depth, max_bytes)
            except OSError:
                probe = None
            if probe is not None:
                return probe
    return make_probe(read_input(path, stdin=stdin, max_bytes=max_bytes), max_depth=max_depth)


def stream_start(path: str | os.PathLike[str], max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> tuple[Any, int, bytes] | None:
    """Where ijson's C parser starts reading the file value by value, when it reads it exactly as
    ``json.loads`` reads it whole (UTF-8, an array or object, nesting surely within
    ``max_depth``, no lone surrogate escape): (the backend, the byte offset of the JSON text
    after a byte order mark, its first byte ``b"["`` or ``b"{"``). None: not such a file (or no C
    backend); the in-memory reader reads it and names what is wrong with it."""
    backend = _yajl()
    if backend is None:
        return None
    with open(path, "rb") as fh:
        head = fh.read(65536)
        start = 3 if head.startswith(b"\xef\xbb\xbf") else 0
        if head.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in head:
            return None
        body = head[start:].lstrip(b" \t\n\r")
        if not body or body[:1] not in b"[{" or not _JSON_START.match(body[:256].decode("utf-8", "replace")):
            return None
        if not _safe_for_stream(fh, head, max_depth):
            return None
    return backend, start, body[:1]


def _stream_probe(path: Path, source: str, max_depth: int, max_bytes: int) -> Probe | None:
    at = stream_start(path, max_depth)
    if at is None:
        return None
    backend, start, _ = at
    with open(path, "rb") as fh:
        fh.seek(start)
        items = backend.items(fh, "", use_float=True)
        try:
            value = next(items)
            for _ in items:  # a second value: not one JSON document
                return None
        except StopIteration:
            return None
        except Exception as exc:  # noqa: BLE001 - any parse error: the in-memory path names it
            if "trailing garbage" in str(exc):
                return _stream_jsonl(path, source, max_depth, max_bytes)
            return None
    return Probe(FileText(path, source, max_bytes), json_value=value, is_json=True)


def _safe_for_stream(fh: BinaryIO, head: bytes, max_depth: int) -> bool:
    """One pass over the file: nesting surely within ``max_depth`` (brackets inside strings count
    too: a bound) and no lone surrogate escape (which the C parser would not read like json)."""
    depth = 0
    chunk = head
    while chunk:
        if (b"\\ud" in chunk or b"\\uD" in chunk) and \
                len(_SURROGATE_ESC.findall(chunk)) != 2 * len(_SURROGATE_PAIR.findall(chunk)):
            return False
        brackets = chunk.translate(_TO_SQUARE, _NOT_BRACKET)
        passes = 0
        while b"[]" in brackets:
            brackets = brackets.replace(b"[]", b"")
            passes += 1
            if depth + passes > max_depth:
                return False
        closers = len(brackets) - len(brackets.lstrip(b"]"))
        openers = len(brackets) - closers
        if depth + passes + openers > max_depth:
            return False
        depth = max(0, depth - closers) + openers
        chunk = fh.read(_CHUNK)
    return True


def _stream_jsonl(path: Path, source: str, max_depth: int, max_bytes: int) -> Probe | None:
    """Every non-empty line a JSON value, read line by line (None: let the in-memory path read it)."""
    records: list[Any] = []
    lines: list[int] = []
    spans: list[tuple[int, int]] = []
    first_two: list[str] = []
    offset = 0  # in characters of the decoded text, as the in-memory read counts them
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                return None
            if lineno == 1 and line.startswith("\ufeff"):
                line = line[1:]
            if len(lines) < 2:
                first_two.append(line)
            at = offset
            offset += len(line)
            line = line[:-1] if line.endswith("\n") else line
            body = line.strip(" \t\r")
            if not body:
                continue
            try:
                value, _ = load_json_text(line, source, max_depth=max_depth)
            except InputError:  # LimitError too: the in-memory path names the line
                return None
            start = at + len(line) - len(line.lstrip(" \t\r"))
            records.append(value)
            lines.append(lineno)
            spans.append((start, start + len(body)))
    if len(records) < 2:
        return None
    probe = Probe(FileText(path, source, max_bytes), jsonl=records)
    probe.jsonl_lines = lines
    probe.jsonl_spans = spans
    try:  # what the whole-document parse says of it (the text up to the second record is enough)
        load_json_text("".join(first_two), source, max_depth=max_depth)
    except InputError as exc:
        probe.json_error = _json_error(exc)
    return probe


def _json_error(exc: InputError) -> str:
    """What a whole-document parse error says, with where: ``Expecting value: line 3 column 9``."""
    msg = exc.message.removeprefix("malformed JSON: ")
    return f"{msg}: {exc.position}" if exc.position else msg
