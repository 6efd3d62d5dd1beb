"""What every layout reader/writer shares.

A :class:`Format` reads a :class:`RawInput` into a :class:`Document` (the parsed layout plus
the list of :class:`~compactor.models.Segment`), and writes a document back in the same layout
after applying :class:`Edits` (replaced texts, dropped segments, an inserted summary). A
segment's ``origin`` is a path of keys and indices into ``Document.data`` that holds its text,
so most writers are "copy the data, set the new texts at their origins".
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import InputError
from ..models import Diagnostic, Segment

__all__ = [
    "Document",
    "Edits",
    "Format",
    "Probe",
    "RawInput",
    "get_at",
    "set_at",
]


@dataclass(frozen=True)
class RawInput:
    """Decoded input text plus where it came from."""

    text: str
    source: str = "<input>"
    diagnostics: tuple[Diagnostic, ...] = ()


@dataclass
class Probe:
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

    @property
    def head(self) -> str:
        return self.raw.text[:4096]


@dataclass
class Document:
    format: str
    data: Any
    segments: list[Segment]
    source: str = "<input>"
    diagnostics: list[Diagnostic] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)  # layout-private bookkeeping

    def segment(self, seg_id: str) -> Segment:
        for s in self.segments:
            if s.id == seg_id:
                return s
        raise KeyError(seg_id)


@dataclass
class Edits:
    """Changes to apply when writing a document back.

    ``replace`` maps segment ids to new texts. ``drop`` lists segments to remove (whole
    messages/records are removed when all their segments are dropped). ``summary`` is a text to
    insert as one message where the first dropped segment was (or at the start after the system
    prompt when nothing is dropped).
    """

    replace: dict[str, str] = field(default_factory=dict)
    drop: set[str] = field(default_factory=set)
    summary: str | None = None

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


class Format:
    """Base class of the layout readers/writers. Subclasses register in ``formats.REGISTRY``."""

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    detection: ClassVar[str] = ""  # one sentence: how the layout is recognised
    container: ClassVar[str] = "json"  # json | jsonl | text

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        """Return (matches, reason). The reason is shown when no layout matches."""
        raise NotImplementedError

    def read(self, probe: Probe) -> Document:
        raise NotImplementedError

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        """Return the document (as Python data, or text for text layouts) with edits applied."""
        raise NotImplementedError

    def dumps(self, obj: Any) -> str:
        """Serialise what :meth:`write` returned, in the layout's container."""
        if self.container == "json":
            return json.dumps(obj, ensure_ascii=False, indent=2) + "\n"
        if self.container == "jsonl":
            return "".join(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n" for rec in obj)
        return obj

    def make_message(self, role: str, text: str) -> Any:
        """A new message/record in this layout (used to insert the anchor summary)."""
        raise NotImplementedError

    # helpers shared by JSON layouts -------------------------------------------------
    @staticmethod
    def copy_data(doc: Document) -> Any:
        return copy.deepcopy(doc.data)

    def fail(self, probe: Probe, message: str, position: str | None = None) -> InputError:
        return InputError(f"{self.name}: {message}", source=probe.raw.source, position=position)
