"""Aider chat history (``.aider.chat.history.md``).

Line-oriented Markdown appended across sessions. ``# aider chat started at ...`` opens a
session (kept, not a segment). A run of ``#### `` lines is one user message; a run of ``> ``
lines is aider's console output (role ``tool``, kind ``tool_result``: warnings, prompts,
``Applied edit``, ``Commit <hash> <message>``, token counts, provider errors). A console message
of several lines carries ``> `` on its first line only and ends its last with a Markdown break
(two spaces): the lines up to that break belong to it. The output after a user's ``/run cmd``,
``/test cmd`` or ``!cmd`` carries that command (``command``), so it is classified and its failures
are told by command; a console block is split before each ``> Running <cmd>`` line (a shell
command the model suggested), and the part it opens carries that command; everything else up to the next user/console
line is the assistant's reply (lines inside a ``` fence always belong to the reply). A session
header opens a new step, which its first user message joins; later user messages open steps. Aider
keeps no ids and no tool-call structure, so there are no calls and no ``call_id``s.

``Document.data`` is the list of lines (line endings kept). A segment's ``origin`` is
``(start_line, end_line)``: 0-based, end exclusive; its id is ``m<start_line>``. User and
console texts are given without their prefixes and trailing Markdown line breaks. With no
edits the writer returns the original text byte for byte; with edits it re-renders only the
edited ranges (a new assistant line that would read as a user/console/header line gets one
leading space).
"""

from __future__ import annotations

from typing import Any

from ..models import Role, Segment, SegmentKind
from ..record import Field, Record
from .registry import register
from .base import Document, Edits, Format, LayoutState, Probe, make_segment
from ..lazyre import lazy_regex

_HEADER = lazy_regex(r"(?m)^# aider chat started at ")
_RUNNING = lazy_regex(r"^> Running (\S[^\n]*?)[ \t]*\r?\n?$")
_RUN = lazy_regex(r"^(?:/run|/test|!)[ \t]*(\S[^\n]*)$")


def split_lines(text: str) -> list[str]:
    """Split on '\\n' only, keeping the endings ("".join gives the text back exactly)."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _kind(line: str) -> str:
    if line.startswith("# aider chat started at"):
        return "header"
    if line.startswith("#### ") or line.rstrip() == "####":
        return "user"
    if line.startswith("> ") or line.rstrip() == ">":
        return "tool"
    if not line.strip():
        return "blank"
    return "assistant"


def _strip(line: str, kind: str) -> str:
    body = line[5:] if kind == "user" else line[2:] if line.startswith("> ") else line[1:]
    if kind == "user" and not line.startswith("#### "):
        body = ""
    return body.rstrip()


class AiderState(LayoutState):
    """Aider: the line numbers of the session headers (``# aider chat started at``)."""

    sessions: list[int] = Field(default_factory=list)


@register
class AiderFormat(Format):
    name = "aider"
    State = AiderState
    title = "Aider .aider.chat.history.md"
    detection = "Markdown with '# aider chat started at' session lines, '#### ' user lines and '> ' console lines"
    container = "text"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        if _HEADER.search(probe.raw.text[:65536]) is None:
            return False, "no '# aider chat started at' line"
        return True, "aider chat history"

    def read(self, probe: Probe) -> Document:
        lines = split_lines(probe.raw.text)
        if not any(_kind(line) == "header" for line in lines):
            raise self.fail(probe, "no '# aider chat started at' session line")
        blocks = _split_running(lines, parse_blocks(lines))
        headers = [n for n, line in enumerate(lines) if _kind(line) == "header"]
        segments: list[Segment] = []
        step = 0
        h = 0
        joined = False  # the session's first user message joins the step its header opened
        run_cmd: str | None = None  # a '/run' / '/test' / '!' command waiting for its output
        for kind, start, end in blocks:
            while h < len(headers) and headers[h] < start:
                step += 1
                h += 1
                joined = False
            command = None
            if kind == "user":
                if joined or step == 0:
                    step += 1
                joined = True
                text = "\n".join(_strip(line, "user") for line in lines[start:end])
                role, skind = Role.user, SegmentKind.message
                m = _RUN.match(text)
                run_cmd = m.group(1).strip() if m else None
            elif kind == "tool":
                m = _RUNNING.match(lines[start])
                if m:  # a shell command the model suggested, and its output
                    run_cmd = m.group(1).strip()
                text = "\n".join(_strip(line, "tool") if line.startswith(">") else line.rstrip()
                                 for line in lines[start:end])
                role, skind = Role.tool, SegmentKind.tool_result
                command, run_cmd = run_cmd, None  # the output of the user's /run command
            else:
                run_cmd = None  # the assistant answered: a later console block is not the command's
                text = "".join(lines[start:end])
                text = text[:-1] if text.endswith("\n") else text
                role, skind = Role.assistant, SegmentKind.message
            st = max(step, 1)
            segments.append(make_segment(id=f"m{start}", index=len(segments), step=st, step_id=f"s{st}",
                                    role=role, kind=skind, text=text, origin=(start, end), command=command,
                                    tool_name="run" if command else None))
        doc = self.new_document(lines, segments, probe.raw.source)
        doc.state.sessions = headers
        return doc

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        lines: list[str] = list(doc.data)
        if edits is None or edits.is_empty():
            return "".join(lines)
        by_start = {int(s.origin[0]): s for s in doc.segments if len(s.origin) == 2}
        dropped_starts = sorted(int(s.origin[0]) for s in doc.segments if s.id in edits.drop and len(s.origin) == 2)
        insert_at: int | None = dropped_starts[0] if dropped_starts else None
        if insert_at is None and edits.summary:
            users = [int(s.origin[0]) for s in doc.segments if s.role == Role.user and len(s.origin) == 2]
            firsts = [int(s.origin[0]) for s in doc.segments if len(s.origin) == 2]
            insert_at = users[0] if users else (firsts[0] if firsts else len(lines))
        out: list[str] = []
        n = 0
        while n <= len(lines):
            if edits.summary and n == insert_at:
                if out and not out[-1].endswith("\n"):
                    out[-1] += "\n"
                out.append(self.make_message("user", edits.summary))
                out.append("\n")
            if n == len(lines):
                break
            seg = by_start.get(n)
            if seg is None:
                out.append(lines[n])
                n += 1
                continue
            end = int(seg.origin[1])
            if seg.id in edits.drop:
                n = end
                if n < len(lines) and _kind(lines[n]) == "blank":
                    n += 1  # the separator after the dropped block
                continue
            if seg.id in edits.replace:
                ending = "\n" if lines[end - 1].endswith("\n") else ""
                rendered = self._render(seg.role, edits.replace[seg.id])
                if rendered and not ending:
                    rendered = rendered[:-1]
                out.append(rendered)
            else:
                out.extend(lines[n:end])
            n = end
        return "".join(out)

    def _render(self, role: Role, text: str) -> str:
        body = text.rstrip("\n").split("\n") if text.strip("\n") else []
        if role == Role.user:
            return "".join(f"#### {line.rstrip()}  \n" for line in body) if body else "####\n"
        if role == Role.tool:
            return "".join((f"> {line.rstrip()}  \n" if line.strip() else ">  \n") for line in body) if body else ">  \n"
        out = []
        for line in body:
            if _kind(line) in ("user", "tool", "header"):
                line = " " + line
            out.append(line + "\n")
        return "".join(out)

    def make_message(self, role: str, text: str) -> Any:
        return self._render(Role.user if role == "user" else Role.assistant if role == "assistant" else Role.tool, text)


_MAX_CONTINUATION = 200  # lines a console message may run on without its '> ' prefix


def _ends_break(line: str) -> bool:
    """Does the line end with a Markdown line break (exactly two spaces), the way aider ends the
    last line of every console message?"""
    body = line.rstrip("\r\n")
    return body.endswith("  ") and not body.endswith("   ")


def _continuation(lines: list[str], n: int) -> int:
    """A console message of several lines has '> ' on its first line only; the lines after it up
    to the one ending in a Markdown break belong to it. The index after them (``n`` when the
    lines that follow do not end that way: they are the assistant's)."""
    k = n
    while k < len(lines) and k - n < _MAX_CONTINUATION and _kind(lines[k]) == "assistant":
        k += 1
        if _ends_break(lines[k - 1]):
            return k
    return n


def _split_running(lines: list[str], blocks: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """A console block is split before each ``> Running <cmd>`` line: aider runs a shell command
    the model suggested, and what follows is that command's output."""
    out: list[tuple[str, int, int]] = []
    for kind, start, end in blocks:
        if kind != "tool":
            out.append((kind, start, end))
            continue
        cut = start
        for k in range(start + 1, end):
            if _RUNNING.match(lines[k]):
                out.append((kind, cut, k))
                cut = k
        out.append((kind, cut, end))
    return out


def parse_blocks(lines: list[str]) -> list[tuple[str, int, int]]:
    """(kind, start, end) of each user/tool/assistant block, in order."""
    blocks: list[tuple[str, int, int]] = []
    n = 0
    total = len(lines)
    while n < total:
        kind = _kind(lines[n])
        if kind in ("header", "blank"):
            n += 1
            continue
        start = n
        if kind in ("user", "tool"):
            while n < total and _kind(lines[n]) == kind:
                n += 1
                if kind == "tool" and not _ends_break(lines[n - 1]):
                    n = _continuation(lines, n)
            blocks.append((kind, start, n))
            continue
        # assistant: up to the next user/tool/header line outside a fence, trailing blanks excluded
        in_fence = False
        last = n
        while n < total:
            k = _kind(lines[n])
            if not in_fence and k in ("user", "tool", "header"):
                break
            if lines[n].lstrip().startswith("```"):
                in_fence = not in_fence
            if k != "blank" or in_fence:
                last = n
            n += 1
        blocks.append(("assistant", start, last + 1))
        n = last + 1
    return blocks
