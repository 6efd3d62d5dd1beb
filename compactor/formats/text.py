"""Plain text and logs: the whole input is one tool output."""

from __future__ import annotations

from typing import Any

from ..models import Diagnostic, Role, Segment, SegmentKind, Severity
from .registry import register
from .base import Document, Edits, Format, Probe


@register
class TextFormat(Format):
    name = "text"
    title = "Plain text / logs"
    detection = "fallback for anything that is not one of the structured layouts (CRLF, ANSI and \\r redraws are handled)"
    container = "text"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        if probe.jsonl_error or (probe.json_error and probe.jsonl is None):
            return False, "starts like JSON but does not parse (pass --format text to treat it as a plain log)"
        return True, "plain text"

    def read(self, probe: Probe) -> Document:
        seg = Segment(
            id="m0",
            index=0,
            step=1,
            step_id="s1",
            role=Role.tool,
            kind=SegmentKind.tool_result,
            text=probe.raw.text,
            origin=(),
        )
        doc = self.new_document(probe.raw.text, [seg], probe.raw.source)
        if probe.is_json or probe.jsonl is not None:
            kind = "JSON" if probe.is_json else "JSONL"
            doc.diagnostics.append(Diagnostic(
                code="json-read-as-text", severity=Severity.warning,
                message=f"{probe.raw.source}: valid {kind} that matches no known layout; read as plain text "
                        f"(pass --format NAME to force a layout)"))
        return doc

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        text = doc.data
        if edits is None or edits.is_empty():
            return text
        if "m0" in edits.drop:
            text = ""
        elif "m0" in edits.replace:
            text = edits.replace["m0"]
        if edits.summary:
            text = edits.summary.rstrip("\n") + "\n\n" + text
        return text

    def make_message(self, role: str, text: str) -> Any:
        return text
