"""Claude Code sessions exported to Markdown (``# Claude Session Export``).

Layout: an optional header (``# Claude Session Export``, a ``## Session Information`` list,
``## Conversation``), then one section per message: a ``### User`` or ``### Assistant`` heading,
usually a ``> <local date/time>`` line, the body, and a ``---`` separator. The body is plain
text, or a pretty-printed JSON array of Anthropic content blocks (``text``, ``tool_use``,
``tool_result`` with ``is_error``) — read with the same block reader as the Anthropic and Claude
Code layouts, so calls pair with their results by ``tool_use.id``. Each content block was
exported as its own section, so one API response spans several ``### Assistant`` sections.

``Document.data`` is ``{"prefix": str, "sections": [...]}``; each section keeps its raw text
(written back byte for byte when nothing in it changed), its role, its heading lines and its
``content`` (a string, or the parsed block list). Segment ids use the section index
(``m<i>``, ``m<i>.<j>``, ``m<i>.c<j>``, ``m<i>.r<j>``). An edited section is re-rendered: the
heading, the date line, the body (JSON bodies pretty-printed with two-space indents) and the
separator. A section a body line could be mistaken for is impossible: only a ``### User`` /
``### Assistant`` heading after a ``---`` line starts a new section.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from ..models import Segment
from .registry import register
from .anthropic import _BLOCKS, BlockReader
from .base import Document, Edits, Format, Probe, plan_drops
from ..lazyre import lazy_regex

_HEADING = lazy_regex(r"^### (User|Assistant)[ \t]*$")
_SEP = lazy_regex(r"^---[ \t]*$")
_DATE = lazy_regex(r"^> \S")
_SNIFF_HEADING = lazy_regex(r"(?m)^### (?:User|Assistant)[ \t]*\r?$")
_SNIFF_SEP = lazy_regex(r"(?m)^---[ \t]*\r?$")


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _starts(lines: list[str]) -> list[int]:
    """Indices of the section headings: a heading at the start, or after a '---' line (blank
    lines between them allowed)."""
    out: list[int] = []
    last_sep = True  # the first heading needs no separator
    seen_first = False
    for n, line in enumerate(lines):
        body = line.rstrip("\n").rstrip("\r")
        if _HEADING.match(body) and (last_sep or not seen_first):
            out.append(n)
            seen_first = True
            last_sep = False
            continue
        if _SEP.match(body):
            last_sep = True
        elif body.strip():
            last_sep = False
    return out


def _blocks(body: str) -> list[Any] | None:
    s = body.strip()
    if not (s.startswith("[") and s.endswith("]")):
        return None
    try:
        value = json.loads(s)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, list) and value and all(isinstance(b, dict) and b.get("type") in _BLOCKS for b in value):
        return value
    return None


def _parse(text: str) -> dict[str, Any]:
    lines = _lines(text)
    starts = _starts(lines)
    prefix = "".join(lines[: starts[0]]) if starts else text
    sections: list[dict[str, Any]] = []
    for k, a in enumerate(starts):
        b = starts[k + 1] if k + 1 < len(starts) else len(lines)
        raw = lines[a:b]
        role = "user" if _HEADING.match(raw[0].rstrip("\r\n")).group(1) == "User" else "assistant"
        i = 1
        date = ""
        while i < len(raw) and not raw[i].strip():
            i += 1
        if i < len(raw) and _DATE.match(raw[i]):
            date = raw[i].rstrip("\r\n")
            i += 1
        # the body ends at the last '---' line of the section
        end = len(raw)
        for j in range(len(raw) - 1, i - 1, -1):
            if _SEP.match(raw[j].rstrip("\r\n")):
                end = j
                break
        body = "".join(raw[i:end]).strip("\n")
        body = body.replace("\r\n", "\n")
        blocks = _blocks(body)
        sections.append({"role": role, "date": date, "raw": "".join(raw),
                         "content": blocks if blocks is not None else body, "json": blocks is not None,
                         "closed": end < len(raw)})
    return {"prefix": prefix, "sections": sections}


@register
class ClaudeMarkdownFormat(Format):
    name = "claude-code-md"
    title = "Claude Code session exported to Markdown"
    detection = ("Markdown with '### User' / '### Assistant' sections separated by '---', bodies plain text or "
                 "JSON arrays of Anthropic content blocks (usually under '# Claude Session Export')")
    container = "text"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        if probe.is_json or probe.jsonl is not None:
            return False, "JSON, not Markdown"
        text = probe.raw.text
        head = text[:65536]
        if "###" not in head or not _SNIFF_HEADING.search(head):
            return False, "no '### User' / '### Assistant' section"
        if not _SNIFF_SEP.search(head):
            return False, "no '---' separators between sections"
        data = _parse(text)
        secs = data["sections"]
        if "# Claude Session Export" in head[:2000] and secs:
            return True, "Claude Code Markdown export"
        if len(secs) >= 2 and any(s["json"] for s in secs):
            return True, "Markdown sections with content-block arrays"
        return False, "sections without the export header or any content-block array"

    def read(self, probe: Probe) -> Document:
        data = _parse(probe.raw.text)
        if not data["sections"]:
            raise self.fail(probe, "no '### User' / '### Assistant' sections")
        reader = BlockReader()
        step = 0
        for i, sec in enumerate(data["sections"]):
            content = sec["content"]
            only_results = isinstance(content, list) and all(b.get("type") == "tool_result" for b in content)
            if not only_results:
                step += 1
            reader.content(i, sec["role"], content, ("sections", i), max(step, 1))
        doc = self.new_document(data, reader.segments, probe.raw.source)
        doc.state.pairs = reader.calls.pairs
        return doc

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        data = doc.data
        if edits is None or edits.is_empty():
            return data["prefix"] + "".join(s["raw"] for s in data["sections"])
        new = copy.deepcopy(data)
        applied = self.replace_texts(new, doc, edits)
        touched = {_record(seg) for seg, _ in applied}

        def record_of(seg: Segment) -> int | None:
            return _record(seg)

        dropped = plan_drops(doc.segments, edits.drop, record_of, doc.state.pairs)
        sections = new["sections"]
        for i in touched:
            if i is not None and 0 <= i < len(sections):
                sections[i]["raw"] = None
        insert_at = min(dropped) if dropped else (0 if edits.summary else None)
        text = edits.summary
        kept = self.splice(sections, dropped, insert_at, (lambda _i: self.make_message("user", text)) if text else None)
        out = [new["prefix"]]
        if out[0] and not out[0].endswith("\n"):
            out.append("\n")
        for sec in kept:
            out.append(sec["raw"] if sec.get("raw") is not None else _render(sec))
        return "".join(out)

    def make_message(self, role: str, text: str) -> Any:
        return {"role": role, "date": "", "raw": None, "content": text, "json": False, "closed": True}


def _record(seg: Segment) -> int | None:
    if seg.id.startswith("m"):
        try:
            return int(seg.id[1:].split(".")[0])
        except ValueError:
            return None
    return None


def _render(sec: dict[str, Any]) -> str:
    head = "### User" if sec["role"] == "user" else "### Assistant"
    parts = [head]
    if sec.get("date"):
        parts.append(sec["date"])
    parts.append("")
    content = sec["content"]
    body = json.dumps(content, ensure_ascii=False, indent=2) if isinstance(content, list) else str(content)
    parts += [body, "", "---", "", ""]
    return "\n".join(parts)
