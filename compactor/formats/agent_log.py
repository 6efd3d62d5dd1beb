"""Terminal agent logs: the conversation a bash-only agent prints as it runs (mini-swe-agent's
console output and the ``agent.log`` files Terminal-Bench / Harbor runs keep of it).

The log is plain text, one message after another, each opened by a line of its own:

- ``System:`` / ``User:`` / ``Assistant:`` / ``Tool:`` (the role, capitalised) or, for the
  agent's turns, ``mini-swe-agent (step 3, $0.04):``;
- the message text follows, up to the next such line. Horizontal rules (``────…``, ``-----…``)
  between messages are kept as they are and make no segment.

Segments:

- ``System:`` → the system prompt (a system message);
- ``Tool:``, or ``User:`` whose text opens with ``<returncode>``, ``<output>``, ``<exception>``,
  ``<warning>`` or ``Observation:`` → the observation of the agent's last action (a tool
  result, its exit code read from ``<returncode>N</returncode>``, paired with that action). An
  observation rewritten so that it no longer opens that way is written under ``Tool:``;
- ``User:`` with the agent harness's fixed feedback (``Please always provide EXACTLY ONE action``,
  a timeout notice, a format error) → a user message marked as harness text (``meta``);
- any other ``User:`` → the human's request or comment (a user message: never collapsed);
- the agent's turn → its prose (an assistant message) and each fenced block
  (```` ```bash ````, ```` ```sh ````, ```` ```mswea_bash_command ````) as one call (the command
  inside the fence; the fence lines are kept when it is rewritten).

A user request opens a step; the agent's turn joins the step its request opened, or opens the
next one; an observation belongs to the step of the action it answers.

``Document.data`` is the list of lines (endings kept). A segment's ``origin`` is
``(start_line, end_line)`` (0-based, end exclusive), its id ``m<start_line>``. With no edits the
writer returns the text byte for byte; with edits only the edited ranges are re-rendered, and a
summary is written as a ``User:`` message where the first dropped segment was.
"""

from __future__ import annotations

from typing import Any

from ..models import Role, Segment, SegmentKind
from .registry import register
from .base import Document, Edits, Format, Probe, make_segment
from .aider import split_lines
from ..lazyre import lazy_regex

_ROLE_LINE = lazy_regex(r"^(System|User|Assistant|Tool):[ \t]*\r?\n?$")
_AGENT_LINE = lazy_regex(r"^mini-swe-agent \(step \d+, \$[0-9.]+\):[ \t]*\r?\n?$")
_RULE = lazy_regex(r"^\s*[─━-]{20,}\s*$|^\s*[─━]{3,}[^\n]{0,80}[─━]{3,}\s*$")
_OBS_START = lazy_regex(r"^\s*(?:<returncode>|<output>|<exception>|<warning>|Observation:)")
_RETURNCODE = lazy_regex(r"<returncode>\s*(-?\d+)\s*</returncode>")
_FENCE_OPEN = lazy_regex(r"^```(?:bash|sh|shell|mswea_bash_command)?[ \t]*\r?\n?$")
_FENCE_CLOSE = lazy_regex(r"^```[ \t]*\r?\n?$")
_HARNESS = lazy_regex(
    r"(?s)^\s*(?:Please always provide EXACTLY ONE action|Please provide EXACTLY ONE action|"
    r"The last command .{0,2000}? timed out|Format error:|Tool call error:|Your output was too long)")


def _header(line: str) -> str | None:
    """'system' / 'user' / 'assistant' / 'tool' for a message-opening line, else None."""
    if _AGENT_LINE.match(line):
        return "assistant"
    m = _ROLE_LINE.match(line)
    return m.group(1).lower() if m else None


def _body(lines: list[str], start: int, end: int) -> str:
    text = "".join(lines[start:end])
    return text[:-1] if text.endswith("\n") else text


@register
class AgentLogFormat(Format):
    name = "agent-log"
    title = "Terminal agent log (mini-swe-agent console / agent.log)"
    detection = ("text with 'mini-swe-agent (step N, $X):' turn lines, or 'System:' / 'User:' / 'Assistant:' "
                 "lines with '<returncode>' observations")
    container = "text"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        head = probe.raw.text[:262144]
        lines = head.split("\n")
        agent = sum(1 for ln in lines if _AGENT_LINE.match(ln))
        roles = {m.group(1) for ln in lines if (m := _ROLE_LINE.match(ln))}
        if agent and ("User" in roles or "System" in roles):
            return True, "mini-swe-agent turn lines"
        if {"User", "Assistant"} <= roles and "<returncode>" in head:
            return True, "role lines with <returncode> observations"
        return False, "no 'mini-swe-agent (step N, $X):' or 'User:' / 'Assistant:' lines with <returncode> observations"

    def read(self, probe: Probe) -> Document:
        lines = split_lines(probe.raw.text)
        heads = [(n, role) for n, line in enumerate(lines) if (role := _header(line)) is not None]
        if not heads:
            raise self.fail(probe, "no 'System:' / 'User:' / 'Assistant:' / 'mini-swe-agent (step …):' line")
        segments: list[Segment] = []
        step = 0
        open_user = False  # the current step was opened by a request the agent has not answered yet
        pending: list[str] = []  # ids of the current step's calls not answered yet
        for h, (n, role) in enumerate(heads):
            stop = heads[h + 1][0] if h + 1 < len(heads) else len(lines)
            end = stop
            while end > n + 1 and (not lines[end - 1].strip() or _RULE.match(lines[end - 1])):
                end -= 1  # trailing blank lines and rules stay outside the message
            start = n + 1
            body = _body(lines, start, end)

            def add(**kw: Any) -> None:
                sid = f"m{kw['origin'][0]}"
                segments.append(make_segment(id=sid, index=len(segments), step=max(step, 0), step_id=f"s{max(step, 0)}",
                                             **kw))

            if role == "system":
                add(role=Role.system, kind=SegmentKind.message, text=body, origin=(start, end))
            elif role in ("user", "tool") and (_OBS_START.match(body) or role == "tool"):
                m = _RETURNCODE.search(body[:2000])
                call = pending.pop(0) if pending else None
                add(role=Role.tool, kind=SegmentKind.tool_result, text=body, origin=(start, end), call_id=call,
                    exit_code=int(m.group(1)) if m else None, is_error=True if "<exception>" in body[:200] else None)
            elif role == "user":
                harness = bool(_HARNESS.match(body))
                if not harness:
                    step += 1
                    open_user = True
                    pending = []
                add(role=Role.user, kind=SegmentKind.message, text=body, origin=(start, end), meta=harness)
            else:  # the agent's turn: prose runs and fenced actions, in line order
                if not open_user:
                    step += 1
                open_user = False
                pending = []
                k = start
                run = start
                while k < end:
                    if _FENCE_OPEN.match(lines[k]):
                        close = next((j for j in range(k + 1, end) if _FENCE_CLOSE.match(lines[j])), None)
                        if close is not None:
                            prose_end = k
                            while prose_end > run and not lines[prose_end - 1].strip():
                                prose_end -= 1  # blank lines before the fence stay outside the message
                            if run < prose_end:
                                add(role=Role.assistant, kind=SegmentKind.message, text=_body(lines, run, prose_end),
                                    origin=(run, prose_end))
                            cmd = _body(lines, k + 1, close)
                            add(role=Role.assistant, kind=SegmentKind.tool_call, text=cmd, origin=(k, close + 1),
                                call_id=f"m{k}", tool_name="bash", command=cmd)
                            pending.append(f"m{k}")
                            k = close + 1
                            while k < end and not lines[k].strip():
                                k += 1  # and blank lines after it
                            run = k
                            continue
                    k += 1
                if run < end:
                    add(role=Role.assistant, kind=SegmentKind.message, text=_body(lines, run, end), origin=(run, end))
        return self.new_document(lines, segments, probe.raw.source)

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        lines: list[str] = list(doc.data)
        if edits is None or edits.is_empty():
            return "".join(lines)
        owner: list[int | None] = []  # the header line of the message each line belongs to
        cur: int | None = None
        for n, line in enumerate(lines):
            if _header(line) is not None:
                cur = n
            owner.append(cur)
        segs = [s for s in doc.segments if len(s.origin) == 2]
        by_start = {int(s.origin[0]): s for s in segs}
        by_head: dict[int, list[Segment]] = {}
        for s in segs:
            h = owner[int(s.origin[0])] if int(s.origin[0]) < len(owner) else None
            if h is not None:
                by_head.setdefault(h, []).append(s)
        # a message whose every segment is dropped loses its header line too
        gone_heads = {h for h, ss in by_head.items() if all(s.id in edits.drop for s in ss)}
        # an observation rewritten so that it no longer opens with <returncode> / <output> keeps
        # reading as one: its message line becomes 'Tool:'
        as_tool = {owner[int(s.origin[0])] for s in segs if s.kind == SegmentKind.tool_result and s.id in edits.replace
                   and s.id not in edits.drop and not _OBS_START.match(edits.replace[s.id])}
        insert_at: int | None = None
        if edits.summary is not None:
            dropped = sorted(int(s.origin[0]) for s in segs if s.id in edits.drop)
            if dropped:
                first = dropped[0]
            else:
                users = [int(s.origin[0]) for s in segs if s.role == Role.user]
                first = users[0] if users else None
            # the summary is a message of its own, before the message the first dropped text was in
            h = owner[first] if first is not None and first < len(owner) else None
            insert_at = h if h is not None else (first if first is not None else len(lines))
        out: list[str] = []
        n = 0
        while n <= len(lines):
            if edits.summary is not None and n == insert_at:
                if out and not out[-1].endswith("\n"):
                    out[-1] += "\n"
                out.append(self.make_message("user", edits.summary))
                out.append("\n")
            if n == len(lines):
                break
            if n in gone_heads:
                n += 1
                continue
            if n in as_tool:
                out.append("Tool:" + lines[n][len(lines[n].rstrip("\r\n")):])
                n += 1
                continue
            seg = by_start.get(n)
            if seg is None:
                out.append(lines[n])
                n += 1
                continue
            end = int(seg.origin[1])
            if seg.id in edits.drop:
                n = end
                while n < len(lines) and not lines[n].strip() and n + 1 not in by_start:
                    n += 1  # the blank lines after the dropped block
                continue
            if seg.id in edits.replace:
                ending = "\n" if lines[end - 1].endswith("\n") else ""
                text = edits.replace[seg.id]
                if seg.kind == SegmentKind.tool_call:
                    rendered = lines[n] + _safe(text) + "\n" + lines[end - 1].rstrip("\n") + ending
                else:
                    rendered = _safe(text) + ending
                out.append(rendered)
            else:
                out.extend(lines[n:end])
            n = end
        return "".join(out)

    def make_message(self, role: str, text: str) -> Any:
        head = {"user": "User:", "assistant": "Assistant:", "system": "System:"}.get(role, "User:")
        return head + "\n" + _safe(text.rstrip("\n")) + "\n"


def _safe(text: str) -> str:
    """A rewritten text must not open a new message: a line that reads as a header gets one
    leading space."""
    return "\n".join((" " + ln) if _header(ln + "\n") is not None else ln for ln in text.split("\n"))
