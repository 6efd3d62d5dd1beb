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
import re
import sys
from pathlib import Path
from typing import Any, BinaryIO

import regex

from ..errors import InputError, LimitError
from ..models import Diagnostic, Severity
from .base import Probe, RawInput

__all__ = [
    "DEFAULT_MAX_JSON_DEPTH",
    "DEFAULT_MAX_INPUT_BYTES",
    "decode_bytes",
    "load_json_text",
    "make_probe",
    "read_input",
]

DEFAULT_MAX_JSON_DEPTH = 512
DEFAULT_MAX_INPUT_BYTES = 2 * 1024**3  # 2 GiB for in-memory (non-streaming) commands

_SURROGATE = regex.compile(r"[\ud800-\udfff]")


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
            message=f"invalid UTF-8 at byte {exc.start}; undecodable bytes were replaced with U+FFFD",
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


_BRACKETS = regex.compile(r"[\[\]{}]")


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


_TOKENS = regex.compile(r'"(?:[^"\\]|\\.)*+"|[\[\]{}]', regex.DOTALL)


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


def load_json_text(text: str, source: str = "<input>", *, position_prefix: str = "",
                   max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> tuple[Any, int]:
    """Parse one JSON document; return (value, lone surrogates replaced).

    Raises InputError naming line and column, LimitError for nesting over max_depth.
    """
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
_JSON_START = re.compile(r'\{\s*(?:"|\})|\[\s*(?:[\[{"\]]|-?\d[\d.eE+-]*\s*[,\]]|(?:true|false|null)\s*[,\]])')


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
            probe.json_error = exc.message
        # JSONL: every non-empty line is a JSON value
        records: list[Any] = []
        lines = text.split("\n")
        nonempty = 0
        for lineno, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            nonempty += 1
            try:
                value, _ = load_json_text(line, raw.source, position_prefix="", max_depth=max_depth)
            except LimitError as exc:
                raise LimitError(exc.message, source=raw.source, position=f"line {lineno}") from None
            except InputError as exc:
                truncated = lineno == len(lines) or (lineno == len(lines) - 1 and not lines[-1])
                what = "truncated JSON (the file ends inside a record)" if truncated else "malformed JSON"
                probe.jsonl_error = f"line {lineno}: {what}: {exc.message.split(': ', 1)[-1]}"
                probe.jsonl = None
                if nonempty > 1:
                    probe.json_error = None  # it is JSONL with a bad line, say that
                return probe
            records.append(value)
        probe.jsonl = records
    return probe
