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
from .calls import NOT_JSON, make_call, parse_arguments
from .style import DEFAULT_JSON, DEFAULT_JSONL, JsonStyle, detect_style

__all__ = [
    "LayoutState",
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
    jsonl_lines: list[int] | None = None  # line number of each JSONL record, when read line by line

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


class Format:
    """Base class of the layout readers/writers. Subclasses register in ``formats.REGISTRY``."""

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
        """Serialise what :meth:`write` returned, in the layout's container, written the way
        ``style`` says (the input's own layout: :attr:`Document.style`)."""
        if self.container == "json":
            return self.style(style).dumps(obj)
        if self.container == "jsonl":
            return self.style(style).dumps_lines(obj)
        return obj

    def dump(self, obj: Any, write: Callable[[str], Any], style: JsonStyle | None = None) -> None:
        """Write :meth:`dumps` of ``obj`` through ``write`` in pieces (never the whole text at once)."""
        if self.container == "json":
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
            return marshal.loads(marshal.dumps(doc.data))
        except (ValueError, TypeError):
            return copy.deepcopy(doc.data)

    def fail(self, probe: Probe, message: str, position: str | None = None) -> InputError:
        return InputError(f"{self.name}: {message}", source=probe.raw.source, position=position)
