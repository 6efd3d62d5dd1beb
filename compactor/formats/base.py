"""What every layout reader/writer shares.

A :class:`Format` reads a :class:`RawInput` into a :class:`Document` (the parsed layout plus
the list of :class:`~compactor.models.Segment`), and writes a document back in the same layout
after applying :class:`Edits` (replaced texts, dropped segments, an inserted summary). A
segment's ``origin`` is a path of keys and indices into ``Document.data`` that holds its text,
so most writers are "copy the data, set the new texts at their origins".
"""

from __future__ import annotations

import copy
from functools import lru_cache
import marshal
import json
from typing import Any, Callable, ClassVar, Hashable, Iterable

from ..errors import InputError
from ..models import Diagnostic, Segment, SegmentKind
from ..record import Field, Record
from ..lazyre import lazy_regex
from .calls import NOT_JSON, make_call, parse_arguments
from .style import DEFAULT_JSON, DEFAULT_JSONL, JsonStyle, detect_style

__all__ = [
    "LayoutState",
    "Laid",
    "TextLayout",
    "array_layout",
    "jsonl_layout",
    "keep_layout",
    "update_state",
    "CallIndex",
    "Document",
    "Edits",
    "Format",
    "Probe",
    "RawInput",
    "command_from_arguments",
    "get_at",
    "jsonl_records",
    "make_segment",
    "name_of",
    "norm_id",
    "object_records",
    "plan_drops",
    "put_text",
    "record_line",
    "set_at",
    "write_json",
]


class RawInput(Record, plain=True, frozen=True):
    """Decoded input text plus where it came from."""

    text: str
    source: str = "<input>"
    diagnostics: tuple[Diagnostic, ...] = ()

    def is_blank(self) -> bool:
        return not self.text.strip()

    def json_style(self, container: str) -> JsonStyle | None:
        """How the text's JSON is written (None for a text layout): the output is written the same way."""
        return detect_style(self.text, container)


class Probe(Record, plain=True, frozen=False):
    """What sniffers look at: the text and, when it parsed, the JSON value or JSONL records.

    ``json_value`` is set when the whole text is one JSON document; ``jsonl`` is set when
    every non-empty line is a JSON value (and there are at least two lines, or one object).
    ``json_error`` / ``jsonl_error`` say why parsing failed, for error messages.
    """

    raw: RawInput
    json_value: Any = None
    is_json: bool = False
    json_error: str | None = None
    jsonl: list[Any] | None = None
    jsonl_error: str | None = None
    jsonl_lines: list[int] | None = None  # line number where each JSONL record starts
    jsonl_spans: list[tuple[int, int]] | None = None  # where each JSONL record sits in the text (start, end)

    @property
    def head(self) -> str:
        return self.raw.text[:4096]


class LayoutState(Record, plain=True, frozen=False):
    """What a reader remembers so that its writer can put the document back in the same layout.

    Common to the layouts: ``base`` (where the message list sits in the data), ``pairs`` (call
    segment id, result segment id: a call and its result are dropped together), ``mirrors``
    (segment id -> paths of duplicated copies of its text, rewritten with it). A layout with more
    to remember subclasses it next to its reader (``Format.State``): one typed class per layout."""

    base: tuple[str | int, ...] = ()
    pairs: list[tuple[str, str]] = Field(default_factory=list)
    mirrors: dict[str, list[tuple[str | int, ...]]] = Field(default_factory=dict)


def update_state(state: LayoutState, **values: Any) -> None:
    """Set fields of a layout's state; a field its class does not have is an error (typo guard)."""
    names = type(state).__record_fields__
    for k, v in values.items():
        if k not in names:
            raise AttributeError(f"{type(state).__name__} has no field {k!r}")
        setattr(state, k, v)


class Document(Record, plain=True, frozen=False):
    format: str
    data: Any
    segments: list[Segment]
    source: str = "<input>"
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    state: LayoutState = Field(default_factory=LayoutState)  # the reader's notes for the writer
    # nobody but the compaction holds ``data`` (it was parsed from a file, text or bytes, not passed
    # in as objects): the final write may build its output in it instead of in a copy
    disposable: bool = False
    # how the input's JSON was written (indent, separators, escaping, line ends); None: it came as
    # objects, and is written the layout's default way
    style: JsonStyle | None = None
    # where each record of ``data`` sits in the text it was read from (a :class:`TextLayout`), so
    # that the writer gives back every record it did not change byte for byte; None: written anew
    layout: Any = None

    def segment(self, seg_id: str) -> Segment:
        for s in self.segments:
            if s.id == seg_id:
                return s
        raise KeyError(seg_id)


class Edits(Record, plain=True, frozen=False):
    """Changes to apply when writing a document back.

    ``replace`` maps segment ids to new texts. ``drop`` lists segments to remove (whole
    messages/records are removed when all their segments are dropped). ``summary`` is a text to
    insert as one message where the first dropped segment was (or at the start after the system
    prompt when nothing is dropped).
    """

    replace: dict[str, str] = Field(default_factory=dict)
    drop: set[str] = Field(default_factory=set)
    summary: str | None = None
    # the document is not used again: the writer may change ``doc.data`` instead of a copy of it
    in_place: bool = False
    # when ``replace`` is the same map object the previous write got: the ids whose entry may have
    # changed since (added, changed or removed); None: not known (an incremental writer looks at all)
    touched: set[str] | None = None

    def is_empty(self) -> bool:
        return not (self.replace or self.drop or self.summary)


def get_at(data: Any, path: tuple[str | int, ...]) -> Any:
    cur = data
    for key in path:
        cur = cur[key]
    return cur


def set_at(data: Any, path: tuple[str | int, ...], value: Any) -> None:
    if not path:
        raise ValueError("empty origin")
    cur = data
    for key in path[:-1]:
        cur = cur[key]
    cur[path[-1]] = value


def command_from_arguments(arguments: Any) -> str | None:
    """Best-effort command text of a tool call's arguments (a JSON string or an object)."""
    if isinstance(arguments, str):
        return _command_from_string(arguments)
    return _command_from(arguments)


@lru_cache(maxsize=8192)
def _command_from_string(arguments: str) -> str | None:
    args = parse_arguments(arguments)
    if args is NOT_JSON:
        return arguments[:2000] or None
    return _command_from(args)


def _command_from(args: Any) -> str | None:
    if isinstance(args, dict):
        for key in ("command", "cmd", "code", "query", "path", "file_path", "pattern", "url"):
            v = args.get(key)
            if isinstance(v, str) and v:
                return v
            if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
                return " ".join(v)
        return json.dumps(args, ensure_ascii=False, sort_keys=True)[:2000]
    return None


def norm_id(value: Any) -> str | None:
    """An id as found in the data, as a string (ints are ids too); anything else is no id."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def name_of(value: Any) -> str | None:
    """A membership-safe string: the value when it is a string, else None (never unhashable)."""
    return value if isinstance(value, str) else None


def make_segment(**kw: Any) -> Segment:
    """Build a Segment from values read out of untrusted data, coercing the optional fields.

    Real files hold odd values (a list where a string id was expected, a bool exit code); a
    reader must not crash on them, so ids/names/commands that are not strings become None,
    exit codes must be ints, error flags bools.

    A ``tool_call`` segment gets its typed call (:func:`~.calls.make_call`): ``arguments=`` passes
    the JSON value the reader serialised the text from (it is then not parsed again);
    ``call_verb=`` / ``call_paths=`` what the layout says of a call whose text is not its arguments.
    """
    arguments = kw.pop("arguments", NOT_JSON)
    verb, paths = kw.pop("call_verb", None), kw.pop("call_paths", ())
    for key in ("call_id", "tool_name", "command"):
        v = kw.get(key)
        if v is not None and not isinstance(v, str):
            kw[key] = norm_id(v) if key == "call_id" else None
    code = kw.get("exit_code")
    if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
        kw["exit_code"] = None
    if kw.get("is_error") is not None and not isinstance(kw["is_error"], bool):
        kw["is_error"] = None
    if not isinstance(kw.get("text"), str):
        kw["text"] = "" if kw.get("text") is None else json.dumps(kw["text"], ensure_ascii=False, default=str)
    if kw.get("kind") in _CALL_KINDS and "call" not in kw:
        kw["call"] = make_call(kw.get("tool_name"), kw["text"], kw.get("command"), arguments, verb=verb, paths=paths)
    return Segment(**kw)


_CALL_KINDS = (SegmentKind.tool_call, "tool_call")


def put_text(data: Any, path: tuple[str | int, ...], text: str) -> bool:
    """Write a segment's new text at its origin; return False when nothing could be written.

    Most origins hold a string. Some hold a JSON object or array (tool-call inputs such as
    Anthropic ``tool_use.input``); the segment text is then the value's JSON, and a replacement
    is written only when it parses back to the same JSON type (otherwise the call is kept as is,
    which keeps the document valid).
    """
    if not path:
        return False
    try:
        current = get_at(data, path)
    except (KeyError, IndexError, TypeError):
        return False
    if isinstance(current, (dict, list)):
        try:
            value = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            return False
        if type(value) is not type(current):
            return False
        set_at(data, path, value)
        return True
    set_at(data, path, text)
    return True


def plan_drops(segments: Iterable[Segment], drop: set[str], record_of: Callable[[Segment], Hashable | None],
               pairs: Iterable[tuple[str, str]] = ()) -> set[Hashable]:
    """Records to remove: those all of whose segments are dropped, kept API-valid.

    ``record_of`` maps a segment to the record (message, event, line) that holds it, or None.
    ``pairs`` are (call segment id, result segment id). A call and its result are removed
    together or kept together: when a call's record goes, the result's record goes too if it
    holds nothing else that stays; otherwise (and when only the result was dropped) both stay.
    """
    segs = list(segments)
    if not drop:
        return set()
    by_record: dict[Hashable, list[str]] = {}
    rec_of_seg: dict[str, Hashable] = {}
    for s in segs:
        rec = record_of(s)
        if rec is None:
            continue
        by_record.setdefault(rec, []).append(s.id)
        rec_of_seg[s.id] = rec
    dropped = {rec for rec, ids in by_record.items() if all(sid in drop for sid in ids)}
    pair_list = [(c, r) for c, r in pairs if c in rec_of_seg and r in rec_of_seg
                 and rec_of_seg[c] != rec_of_seg[r]]
    if not pair_list:
        return dropped
    call_of_result: dict[str, list[str]] = {}
    for c, r in pair_list:
        call_of_result.setdefault(r, []).append(c)
    for _ in range(2 * len(pair_list) + 4):
        changed = False
        for c, r in pair_list:
            rc, rr = rec_of_seg[c], rec_of_seg[r]
            if rc in dropped and rr not in dropped:
                # the result's record may go if everything else in it goes with it
                ok = all(sid in drop or any(rec_of_seg[cc] in dropped for cc in call_of_result.get(sid, []))
                         for sid in by_record[rr])
                if ok:
                    dropped.add(rr)
                else:
                    dropped.discard(rc)
                changed = True
            elif rr in dropped and rc not in dropped:
                dropped.discard(rr)
                changed = True
        if not changed:
            break
    else:  # did not settle: keep every pair whose halves disagree
        for c, r in pair_list:
            if (rec_of_seg[c] in dropped) != (rec_of_seg[r] in dropped):
                dropped.discard(rec_of_seg[c])
                dropped.discard(rec_of_seg[r])
    return dropped


class CallIndex:
    """Pairs tool calls with their results by id (never by position).

    Ids can repeat in real files (SWE-agent replays reuse one id for several calls): a result
    takes the oldest call with its id that has no result yet, else the newest call with that id.
    ``pairs`` collects (call segment id, result segment id).
    """

    def __init__(self) -> None:
        self._open: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        self._last: dict[str, tuple[str, dict[str, Any]]] = {}
        self.pairs: list[tuple[str, str]] = []

    def add_call(self, call_id: Any, seg_id: str, **info: Any) -> None:
        call_id = norm_id(call_id)
        if not call_id:
            return
        self._open.setdefault(call_id, []).append((seg_id, info))
        self._last[call_id] = (seg_id, info)

    def match(self, call_id: Any, result_seg_id: str) -> dict[str, Any] | None:
        """Record the pairing; return the call's info (step, tool_name, command, ...) or None."""
        call_id = norm_id(call_id)
        if not call_id:
            return None
        waiting = self._open.get(call_id)
        if waiting:
            seg_id, info = waiting.pop(0)
        elif call_id in self._last:
            seg_id, info = self._last[call_id]
        else:
            return None
        self.pairs.append((seg_id, result_seg_id))
        return info

    def forget_answered(self) -> list[str]:
        """Forget the calls that have their result, and the pairs collected so far; return their
        ids. Only for a reader that streams a conversation in which every call id names one call
        and one result (nothing later asks for an answered id)."""
        done = [cid for cid, waiting in self._open.items() if not waiting]
        for cid in done:
            del self._open[cid]
            self._last.pop(cid, None)
        self.pairs.clear()
        return done

    def has(self, call_id: Any) -> bool:
        call_id = norm_id(call_id)
        return bool(call_id) and call_id in self._last


def jsonl_records(probe: Probe) -> list[Any] | None:
    """The records of a JSONL input (a lone JSON object counts as one record)."""
    if probe.jsonl is not None:
        return probe.jsonl
    if probe.is_json and isinstance(probe.json_value, dict):
        return [probe.json_value]
    return None


def object_records(records: list[Any] | None, what: str = "JSONL", unit: str = "line") -> str | None:
    """Why ``records`` (a container's list; None: the input is not ``what``) are not a list of
    JSON objects, or None when they are."""
    if records is None:
        return f"not {what}"
    if not all(isinstance(r, dict) for r in records):
        return f"not every {unit} is a JSON object"
    return None


def record_line(probe: Probe, index: int) -> int:
    """1-based line number of the index-th non-empty line (JSONL record) of the input."""
    if probe.jsonl_lines is not None and 0 <= index < len(probe.jsonl_lines):
        return probe.jsonl_lines[index]
    n = -1
    for lineno, line in enumerate(probe.raw.text.split("\n"), start=1):
        if line.strip():
            n += 1
            if n == index:
                return lineno
    return index + 1


def write_json(obj: Any, write: Callable[[str], Any], piece_size: int = 1 << 16,
               style: JsonStyle | None = None) -> None:
    """Write ``json.dumps(obj, ensure_ascii=False, indent=2) + "\\n"`` (or ``obj`` in ``style``)
    through ``write`` in pieces of about ``piece_size`` characters: the same text, never held whole."""
    (style or DEFAULT_JSON).dump(obj, write, piece_size)


_TEXT_PIECE = 1 << 20


# ---------------------------------------------------------------------------- the input's own text


class TextLayout:
    """Where each record of a document sits in the text it was read from: the records of a JSONL
    stream (``kind="jsonl"``: one a line, run together on a line, or pretty-printed one after
    another) or the items of a top-level JSON array (``kind="array"``).

    A writer's output that keeps this layout (:class:`Laid`) is serialised by :meth:`pieces`: each
    record equal to the one read is its original text; a changed or new record is serialised in
    the style the input's records are written in (separators, indentation, ASCII escapes, found
    by trying them on the first record); the text between records, before the first and after
    the last is the input's. So an untouched input comes back byte-identical, a record that
    shared a line with the one before it still does, and a rewritten record looks like its
    neighbours."""

    __slots__ = ("raw", "spans", "kind", "_style", "copied")

    LOOKAHEAD = 64  # how far past the expected record a kept record is looked for (drops)

    def __init__(self, raw: RawInput, spans: list[tuple[int, int]], kind: str = "jsonl"):
        self.raw = raw
        self.spans = spans
        self.kind = kind
        self._style: Callable[[Any], str] | None = None
        self.copied: Any = None  # the copy of the records the last write started from

    def _text(self, i: int) -> str:
        a, b = self.spans[i]
        return self.raw.text[a:b]

    def _gap(self, i: int) -> str:
        """The text between record i and record i + 1 (after the last: the tail)."""
        text = self.raw.text
        end = self.spans[i][1]
        return text[end:self.spans[i + 1][0]] if i + 1 < len(self.spans) else text[end:]

    def style(self, originals: list[Any]) -> Callable[[Any], str]:
        if self._style is None:
            self._style = self._find_style(originals)
        return self._style

    def _find_style(self, originals: list[Any]) -> Callable[[Any], str]:
        text = self.raw.text
        prefix = ""
        if self.kind == "array" and self.spans:
            a = self.spans[0][0]
            line_start = text.rfind("\n", 0, a) + 1
            lead = text[line_start:a]
            prefix = lead if not lead.strip() else ""
        # non-ASCII written as is, or as \\u escapes: what the text shows (when it shows neither,
        # what its writer does: Python escapes, a compact JavaScript writer does not)
        if not text.isascii():
            ascii_first: bool | None = False
        elif _NON_ASCII_ESCAPE.search(text) is not None:
            ascii_first = True
        else:
            ascii_first = None
        candidates: list[dict[str, Any]] = []
        for indent in (None, 2, 4, 1, "\t"):
            for seps in ((",", ":"), (", ", ": "), (",", ": ")):
                if indent is None or seps[0] == ",":
                    candidates.append({"indent": indent, "separators": seps})

        def make(kw: dict[str, Any]) -> Callable[[Any], str]:
            if kw["indent"] is None:
                return lambda v: json.dumps(v, **kw)
            return lambda v: json.dumps(v, **kw).replace("\n", "\n" + prefix)

        for i, value in enumerate(originals[:8]):
            if i >= len(self.spans) or not isinstance(value, (dict, list)) or not value:
                continue
            a, b = self.spans[i]
            if b - a > 65536:
                continue
            original = text[a:b]
            multi = "\n" in original
            for kw in candidates:
                if (kw["indent"] is not None) != multi:
                    continue
                for ascii_ in ((ascii_first,) if ascii_first is not None else (False, True)):
                    got = {**kw, "ensure_ascii": ascii_}
                    if make(got)(value) == original:
                        if ascii_first is None:  # no sign either way: Python's separators say Python
                            got["ensure_ascii"] = kw["indent"] is not None or kw["separators"] == (", ", ": ")
                        return make(got)
            break
        if self.kind == "array" and any("\n" in self._text(i) for i in range(min(1, len(self.spans)))):
            return make({"ensure_ascii": bool(ascii_first), "indent": 2, "separators": (",", ": ")})
        return make({"ensure_ascii": bool(ascii_first), "indent": None, "separators": (",", ":")})

    def _default_gap(self) -> str:
        if self.kind == "jsonl":
            return "\n"
        for i in range(len(self.spans) - 1):
            return self._gap(i)
        return ",\n  " if self.spans and "\n" in self._text(0) else ", "

    def align(self, out: list[Any], originals: list[Any], copied: list[Any] | None) -> list[int | None]:
        """For each written record, the index of the input record it is (unchanged: a non-negative
        index), replaces (changed: ``-1 - index``), or None (a new record). ``copied`` is the copy of
        the records the writer started from (:meth:`Format.copy_data`): a written record that is
        the i-th of it stands where input record i stood; without it, records are matched by
        value in order."""
        n = len(originals)
        plan: list[int | None] = []
        if copied is not None and len(copied) == n:
            index = {id(rec): i for i, rec in enumerate(copied)}
            for rec in out:
                i = index.get(id(rec))
                plan.append(None if i is None else i if rec == originals[i] else -1 - i)
            return plan
        j = 0
        for rec in out:
            hit = None
            for k in range(j, min(n, j + self.LOOKAHEAD)):
                if originals[k] == rec:
                    hit = k
                    break
            if hit is not None:
                plan.append(hit)
                j = hit + 1
            else:
                plan.append(None)
        return plan

    def pieces(self, out: list[Any], originals: list[Any], copied: list[Any] | None = None) -> Iterable[str]:
        """The text of ``out`` in this layout, in pieces (one per record and gap)."""
        text = self.raw.text
        plan = self.align(out, originals, copied)
        if not self.spans:
            return
        head = text[:self.spans[0][0]]
        tail = text[self.spans[-1][1]:]
        if not out:
            if self.kind == "array":
                yield head.rstrip(" \t\r\n") + tail.lstrip(" \t\r\n")
            return
        yield head
        default_gap = self._default_gap()
        ser = None
        prev: int | None = None
        for pos, (rec, where) in enumerate(zip(out, plan)):
            at = None if where is None else (where if where >= 0 else -1 - where)
            if pos:
                if prev is not None and prev + 1 < len(self.spans) and (at == prev + 1 or "\n" in self._gap(prev)
                                                                       or self.kind == "array"):
                    yield self._gap(prev)
                else:
                    yield default_gap
            if where is not None and where >= 0:
                yield self._text(where)
            else:
                if ser is None:
                    ser = self.style(originals)
                yield ser(rec)
            prev = at
        yield tail if prev is not None and prev == len(self.spans) - 1 or self.kind == "array" else \
            _trailing(tail)


_NON_ASCII_ESCAPE = lazy_regex(r"\\u(?:00[89a-fA-F][0-9a-fA-F]|0[1-9a-fA-F][0-9a-fA-F]{2}|[1-9a-fA-F][0-9a-fA-F]{3})")


def _trailing(tail: str) -> str:
    """The input's tail after a record that was not its last: a newline when the input ended
    with one, else nothing."""
    return "\n" if tail.endswith("\n") else tail


class Laid(list):
    """A written list of records that keeps the :class:`TextLayout` of the input it came from
    (and the records read, to tell which ones are unchanged)."""

    __slots__ = ("layout", "originals", "copied")

    def __init__(self, items: Iterable[Any], layout: TextLayout, originals: list[Any], copied: list[Any] | None):
        super().__init__(items)
        self.layout = layout
        self.originals = originals
        self.copied = copied

    def pieces(self) -> Iterable[str]:
        return self.layout.pieces(self, self.originals, self.copied)


def array_layout(probe: Probe) -> TextLayout | None:
    """The :class:`TextLayout` of a top-level JSON array (None: not one, or not read from text)."""
    if not isinstance(probe.json_value, list):
        return None
    text = probe.raw.text
    decode = json.JSONDecoder().raw_decode
    pos = _skip_ws(text, 0)
    if text[pos:pos + 1] != "[":
        return None
    spans: list[tuple[int, int]] = []
    pos = _skip_ws(text, pos + 1)
    if text[pos:pos + 1] == "]":
        return None
    try:
        while True:
            _, end = decode(text, pos)
            spans.append((pos, end))
            pos = _skip_ws(text, end)
            if text[pos:pos + 1] == ",":
                pos = _skip_ws(text, pos + 1)
                continue
            break
    except (json.JSONDecodeError, RecursionError):
        return None
    if len(spans) != len(probe.json_value):
        return None
    return TextLayout(probe.raw, spans, "array")


def _skip_ws(text: str, pos: int) -> int:
    n = len(text)
    while pos < n and text[pos] in " \t\r\n":
        pos += 1
    return pos


def jsonl_layout(probe: Probe) -> TextLayout | None:
    """The :class:`TextLayout` of JSONL records (a lone JSON object read as one record included)."""
    if probe.jsonl is not None and probe.jsonl_spans is not None and len(probe.jsonl_spans) == len(probe.jsonl):
        return TextLayout(probe.raw, probe.jsonl_spans, "jsonl")
    if probe.jsonl is None and probe.is_json and isinstance(probe.json_value, dict) and probe.raw.text[:1] != "[":
        text = probe.raw.text
        start = _skip_ws(text, 0)
        end = len(text.rstrip(" \t\r\n"))
        if start < end:
            return TextLayout(probe.raw, [(start, end)], "jsonl")
    return None


def keep_layout(doc: Document, out: Any, copied: Any = None) -> Any:
    """What a writer returned, as a :class:`Laid` list when the document remembers its text
    (``copied``: the copy of ``doc.data`` the writer started from, when known)."""
    layout = doc.layout
    if layout is None or not isinstance(out, list) or not isinstance(doc.data, list) \
            or len(doc.data) != len(layout.spans):
        return out
    return Laid(out, layout, doc.data, copied if isinstance(copied, list) else None)


class Format:
    """Base class of the layout readers/writers. Subclasses register in ``formats.REGISTRY``."""

    def __init_subclass__(cls, **kw: Any) -> None:
        # every layout's writer gives a list that keeps the input's text layout when the document
        # has one (:func:`keep_layout`), and never changes the document's records in place then
        # (they are what tells an unchanged record from a changed one)
        super().__init_subclass__(**kw)
        write = cls.__dict__.get("write")
        if write is not None and not getattr(write, "_keeps_layout", False):
            def laid_write(self: Format, doc: Document, edits: Edits | None = None, _write: Any = write) -> Any:
                if doc.layout is not None and edits is not None and edits.in_place:
                    edits = Edits(replace=edits.replace, drop=edits.drop, summary=edits.summary,
                                  in_place=False, touched=edits.touched)
                layout = doc.layout
                if layout is None:
                    return _write(self, doc, edits)
                layout.copied = None
                out = _write(self, doc, edits)
                copied, layout.copied = layout.copied, None
                return keep_layout(doc, out, copied)

            laid_write.__doc__ = write.__doc__
            laid_write.__name__ = "write"
            laid_write.__qualname__ = f"{cls.__qualname__}.write"
            laid_write._keeps_layout = True  # type: ignore[attr-defined]
            cls.write = laid_write  # type: ignore[method-assign]

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    detection: ClassVar[str] = ""  # one sentence: how the layout is recognised
    container: ClassVar[str] = "json"  # json | jsonl | text
    State: ClassVar[type[LayoutState]] = LayoutState  # what the reader remembers for the writer

    def new_document(self, data: Any, segments: list[Segment], source: str) -> Document:
        """A document of this layout, with an empty state of the layout's own class."""
        return Document(self.name, data, segments, source, state=self.State())

    def state_of(self, doc: Document) -> Any:
        """The document's state, checked to be this layout's (a document read by another layout
        cannot be written by this one)."""
        if not isinstance(doc.state, self.State):
            raise TypeError(f"{self.name}: the document's state is a {type(doc.state).__name__}, "
                            f"not a {self.State.__name__}")
        return doc.state

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        """Return (matches, reason). The reason is shown when no layout matches."""
        raise NotImplementedError

    def read(self, probe: Probe) -> Document:
        raise NotImplementedError

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        """Return the document (as Python data, or text for text layouts) with edits applied."""
        raise NotImplementedError

    def style(self, style: JsonStyle | None = None) -> JsonStyle:
        """The style to write in: the input's (``style``, from :attr:`Document.style`) or the
        container's default (two-space indented JSON; one compact record a line for JSON Lines)."""
        if style is not None:
            return style
        return DEFAULT_JSONL if self.container == "jsonl" else DEFAULT_JSON

    def dumps(self, obj: Any, style: JsonStyle | None = None) -> str:
        """Serialise what :meth:`write` returned, in the layout's container: in the input's own
        text when the writer kept it (:class:`Laid`), else written the way ``style`` says (the
        input's own layout: :attr:`Document.style`)."""
        if isinstance(obj, Laid):
            return "".join(obj.pieces())
        if self.container == "json":
            return self.style(style).dumps(obj)
        if self.container == "jsonl":
            return self.style(style).dumps_lines(obj)
        return obj

    def dump(self, obj: Any, write: Callable[[str], Any], style: JsonStyle | None = None) -> None:
        """Write :meth:`dumps` of ``obj`` through ``write`` in pieces (never the whole text at once)."""
        if isinstance(obj, Laid):
            for piece in obj.pieces():
                write(piece)
        elif self.container == "json":
            self.style(style).dump(obj, write)
        elif self.container == "jsonl":
            self.style(style).dump_lines(obj, write)
        elif len(obj) <= _TEXT_PIECE:
            write(obj)
        else:  # in pieces: a text stream encodes what it is given whole (a 30 MB log: 30 MB more)
            for i in range(0, len(obj), _TEXT_PIECE):
                write(obj[i:i + _TEXT_PIECE])

    def make_message(self, role: str, text: str) -> Any:
        """A new message/record in this layout (used to insert the anchor summary)."""
        raise NotImplementedError

    def replace_texts(self, data: Any, doc: Document, edits: Edits) -> list[tuple[Segment, str]]:
        """Write every replaced text at its segment's origin and at each mirror copy of it
        (``doc.state.mirrors``: the layout's duplicated payloads). Returns the (segment, text)
        pairs applied, in id order, for layout-specific follow-ups."""
        mirrors = doc.state.mirrors
        by_id = {s.id: s for s in doc.segments}
        applied: list[tuple[Segment, str]] = []
        for sid, text in sorted(edits.replace.items()):
            seg = by_id.get(sid)
            if seg is None:
                continue
            put_text(data, seg.origin, text)
            for mp in mirrors.get(sid, []):
                put_text(data, mp, self.mirror_text(seg, mp, text))
            applied.append((seg, text))
        return applied

    @staticmethod
    def splice(items: list[Any], dropped: set[int], insert_at: int | None,
               summary: Callable[[int], Any] | None) -> list[Any]:
        """The items without the dropped ones, with ``summary(i)`` (a new message near item i)
        inserted at ``insert_at`` (appended when that is past the end)."""
        out: list[Any] = []
        for i, item in enumerate(items):
            if summary is not None and i == insert_at:
                out.append(summary(i))
            if i not in dropped:
                out.append(item)
        if summary is not None and insert_at is not None and insert_at >= len(items):
            out.append(summary(len(items) - 1))
        return out

    def mirror_text(self, seg: Segment, path: tuple[str | int, ...], text: str) -> str:
        """What a mirror copy of a replaced segment becomes (by default: the same new text)."""
        return text

    # helpers shared by JSON layouts -------------------------------------------------
    @staticmethod
    def copy_data(doc: Document, edits: Edits | None = None) -> Any:
        """A deep copy of the parsed document (JSON values: marshal is ~5x faster than deepcopy), or
        the document's own data when the edits say it is written in place (the last write of a
        document nobody else holds: a large input is then not held twice)."""
        if edits is not None and edits.in_place:
            return doc.data
        try:
            data = marshal.loads(marshal.dumps(doc.data))
        except (ValueError, TypeError):
            data = copy.deepcopy(doc.data)
        if doc.layout is not None:
            doc.layout.copied = data  # which written record stands where (see TextLayout.align)
        return data

    def fail(self, probe: Probe, message: str, position: str | None = None) -> InputError:
        return InputError(f"{self.name}: {message}", source=probe.raw.source, position=position)
