"""Codex TUI session recordings (``codex-rs/tui`` session log JSONL).

Each line is ``{ts, dir: "meta" | "to_tui" | "from_tui", kind, ...}``. Most lines are UI
traffic (``app_event`` redraws, ``log_line``, ``op``, ``insert_history``) and make no segments;
they are written back unchanged. Segments come from:

- **the user's prompts**: this recording does not log them as text, only as ``key_event`` lines
  (``KeyEvent { code: Char('f'), kind: Press, … }``). A prompt is rebuilt from the presses
  (and repeats) of ``Char`` keys, ``Backspace`` removing the last character, up to ``Enter``
  (``Enter`` with SHIFT is a newline). It is a user message with no writable origin (it cannot
  be rewritten, only kept or dropped with all of its key lines). ``slash_command`` lines are
  user messages too;
- ``codex_event`` lines (``payload.msg``): ``agent_message`` (assistant text),
  ``exec_command_begin`` (a call: the argv as JSON, paired by ``call_id``), ``exec_command_end``
  (its result: ``stdout`` then ``stderr``, ``exit_code``), ``patch_apply_begin`` (a call: the
  ``changes`` object) and ``patch_apply_end`` (its result; ``success: false`` is an error).
  ``agent_message_delta`` / ``exec_command_output_delta`` (byte arrays) repeat the final
  messages: never segments, and dropped when the result they repeat is replaced or dropped.
  ``task_complete.last_agent_message`` is a mirror of the last agent message.
- ``compactor_summary`` lines: a summary an earlier compaction inserted (a user message).

A replaced command result is written to ``stdout`` with ``stderr`` emptied (and to
``aggregated_output`` / ``formatted_output`` when present).
"""

from __future__ import annotations

import json
from typing import Any

from ..models import Role, Segment, SegmentKind
from ..record import Field, Record
from .registry import register
from .base import CallIndex, Document, Edits, Format, LayoutState, Probe, jsonl_records, make_segment, plan_drops, update_state
from ..lazyre import lazy_regex

_DIRS = ("meta", "to_tui", "from_tui")
_KEY = lazy_regex(r"code:\s*(Char\('((?:\\.|[^'\\])*)'\)|Enter|Backspace|Tab)")
_KIND = lazy_regex(r"kind:\s*(Press|Repeat|Release)")
_SHIFT = lazy_regex(r"modifiers:\s*[^,}]*SHIFT")
_OUT_FIELDS = ("aggregated_output", "formatted_output")


def _char(raw: str) -> str:
    if raw.startswith("\\"):
        try:
            return json.loads('"' + raw.replace('"', '\\"') + '"') if raw != "\\'" else "'"
        except ValueError:
            return raw[1:]
    return raw


def _msg(rec: dict[str, Any]) -> dict[str, Any] | None:
    if rec.get("kind") != "codex_event":
        return None
    p = rec.get("payload")
    m = p.get("msg") if isinstance(p, dict) else None
    return m if isinstance(m, dict) else None


def _argv_text(cmd: Any) -> str:
    if isinstance(cmd, list) and all(isinstance(x, str) for x in cmd):
        if len(cmd) >= 3 and cmd[0].endswith("sh") and cmd[1].startswith("-"):
            return cmd[-1]
        return " ".join(cmd)
    return cmd if isinstance(cmd, str) else ""


class CodexTuiState(LayoutState):
    """Codex TUI recordings: segment id -> the records it owns, paths cleared when it is rewritten;
    call id -> the paths of its streamed output deltas."""

    owned: dict[str, list[Any]] = Field(default_factory=dict)
    clear: dict[str, list[tuple[str | int, ...]]] = Field(default_factory=dict)
    deltas: dict[str, list[Any]] = Field(default_factory=dict)


@register
class CodexTuiFormat(Format):
    name = "codex-tui"
    State = CodexTuiState
    title = "Codex TUI session recording"
    detection = "JSONL of {ts, dir: meta/to_tui/from_tui, kind} lines with codex_event / key_event / session_start kinds"
    container = "jsonl"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        records = jsonl_records(probe)
        if records is None:
            return False, "not JSONL"
        if not all(isinstance(r, dict) and r.get("dir") in _DIRS and isinstance(r.get("kind"), str) for r in records):
            return False, "not every line is {ts, dir, kind} with dir meta/to_tui/from_tui"
        kinds = {r["kind"] for r in records}
        if not kinds & {"codex_event", "session_start", "key_event"}:
            return False, "no codex_event / session_start / key_event lines"
        return True, "Codex TUI recording"

    def read(self, probe: Probe) -> Document:
        records = jsonl_records(probe)
        if records is None:
            raise self.fail(probe, "expected JSONL records")
        segs: list[Segment] = []
        calls = CallIndex()
        owned: dict[str, list[int]] = {}  # segment id -> every record it is made of
        mirrors: dict[str, list[tuple[str | int, ...]]] = {}
        clear: dict[str, list[tuple[str | int, ...]]] = {}
        deltas: dict[str, list[int]] = {}  # call_id -> delta records
        step = 0
        buf: list[str] = []
        keys: list[int] = []
        last_agent: str | None = None

        def add(**kw: Any) -> Segment:
            seg = make_segment(index=len(segs), **kw)
            segs.append(seg)
            return seg

        def flush(i: int) -> None:
            nonlocal step
            text = "".join(buf)
            if text.strip():
                step += 1
                sid = f"m{keys[0]}"
                add(id=sid, step=step, step_id=f"s{step}", role=Role.user, kind=SegmentKind.message,
                    text=text, origin=())
                owned[sid] = list(keys)
            buf.clear()
            keys.clear()

        for i, rec in enumerate(records):
            kind = rec.get("kind")
            if kind == "key_event":
                ev = str(rec.get("event", ""))
                m = _KEY.search(ev)
                k = _KIND.search(ev)
                if m is None or (k is not None and k.group(1) == "Release"):
                    continue
                keys.append(i)
                if m.group(1) == "Enter":
                    if _SHIFT.search(ev):
                        buf.append("\n")
                    else:
                        flush(i)
                elif m.group(1) == "Backspace":
                    if buf:
                        buf.pop()
                elif m.group(1) == "Tab":
                    buf.append("\t")
                else:
                    buf.append(_char(m.group(2)))
                continue
            if kind == "slash_command":
                text = next((rec[f] for f in ("command", "cmd", "name", "text") if isinstance(rec.get(f), str)), "")
                if text:
                    step += 1
                    field = next(f for f in ("command", "cmd", "name", "text") if rec.get(f) == text)
                    sid = f"m{i}"
                    add(id=sid, step=step, step_id=f"s{step}", role=Role.user, kind=SegmentKind.message,
                        text=text if text.startswith("/") else "/" + text, origin=(i, field) if text.startswith("/") else ())
                    owned[sid] = [i]
                continue
            if kind == "compactor_summary" and isinstance(rec.get("text"), str):
                step += 1
                sid = f"m{i}"
                add(id=sid, step=step, step_id=f"s{step}", role=Role.user, kind=SegmentKind.message,
                    text=rec["text"], origin=(i, "text"))
                owned[sid] = [i]
                continue
            msg = _msg(rec)
            if msg is None:
                continue
            t = msg.get("type")
            base = (i, "payload", "msg")
            cid = msg.get("call_id")
            if t == "agent_message" and isinstance(msg.get("message"), str):
                step += 1
                sid = f"m{i}"
                add(id=sid, step=step, step_id=f"s{step}", role=Role.assistant, kind=SegmentKind.message,
                    text=msg["message"], origin=(*base, "message"))
                owned[sid] = [i]
                last_agent = sid
            elif t == "task_complete" and isinstance(msg.get("last_agent_message"), str) and last_agent:
                prev = next(s for s in segs if s.id == last_agent)
                if prev.text == msg["last_agent_message"]:
                    mirrors.setdefault(last_agent, []).append((*base, "last_agent_message"))
            elif t in ("exec_command_begin", "patch_apply_begin"):
                step += 1
                sid = f"m{i}.c"
                if t == "exec_command_begin":
                    value = msg.get("command")
                    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
                    cmd, origin, tool = _argv_text(value), (*base, "command"), "shell"
                else:
                    value = msg.get("changes")
                    text = json.dumps(value, ensure_ascii=False)
                    cmd, origin, tool = " ".join(value) if isinstance(value, dict) else "", (*base, "changes"), "apply_patch"
                add(id=sid, step=step, step_id=f"s{step}", role=Role.assistant, kind=SegmentKind.tool_call,
                    text=text, call_id=cid, tool_name=tool, command=cmd or None, origin=origin)
                owned[sid] = [i]
                calls.add_call(cid, sid, step=step, name=tool, cmd=cmd or None)
            elif t in ("exec_command_end", "patch_apply_end"):
                out = msg.get("stdout") if isinstance(msg.get("stdout"), str) else ""
                err = msg.get("stderr") if isinstance(msg.get("stderr"), str) else ""
                text = out + ("\n" if out and err else "") + err
                if not text and isinstance(msg.get("aggregated_output"), str):
                    text = msg["aggregated_output"]
                sid = f"m{i}.r"
                info = calls.match(cid, sid) or {}
                code = msg.get("exit_code") if t == "exec_command_end" else None
                is_err = (code not in (None, 0)) if t == "exec_command_end" else (msg.get("success") is False)
                st = info.get("step", max(step, 1))
                add(id=sid, step=st, step_id=f"s{st}", role=Role.tool, kind=SegmentKind.tool_result, text=text,
                    call_id=cid, tool_name=info.get("name"), command=info.get("cmd"), exit_code=code,
                    is_error=is_err, origin=(*base, "stdout"))
                owned[sid] = [i]
                clear[sid] = [(*base, "stderr")]
                mirrors[sid] = [(*base, f) for f in _OUT_FIELDS if isinstance(msg.get(f), str)]
            elif t in ("exec_command_output_delta", "agent_message_delta", "agent_reasoning_delta") and cid:
                deltas.setdefault(str(cid), []).append(i)
        if buf and keys:
            flush(len(records))
        if not segs:
            raise self.fail(probe, "no prompts, agent messages or commands in the recording")
        doc = self.new_document(records, segs, probe.raw.source)
        update_state(doc.state, owned=owned, mirrors=mirrors, clear=clear, deltas=deltas, pairs=calls.pairs)
        return doc

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        state = self.state_of(doc)
        data = self.copy_data(doc, edits)
        if edits is None or edits.is_empty():
            return data
        applied = self.replace_texts(data, doc, edits)
        gone: set[int] = set()
        for seg, _text in applied:
            for path in state.clear.get(seg.id, []):
                try:
                    data[path[0]][path[1]][path[2]][path[3]] = ""
                except (KeyError, IndexError, TypeError):
                    pass
            if seg.kind == SegmentKind.tool_result and seg.call_id:
                gone.update(state.deltas.get(str(seg.call_id), []))
        owned = state.owned

        def record_of(seg: Segment) -> int | None:
            recs = owned.get(seg.id)
            return recs[-1] if recs else None

        dropped = plan_drops(doc.segments, edits.drop, record_of, state.pairs)
        by_last = {recs[-1]: recs for recs in owned.values() if recs}
        for r in list(dropped):
            gone.update(by_last.get(r, [r]))
        for seg in doc.segments:
            if seg.kind == SegmentKind.tool_result and seg.call_id and record_of(seg) in dropped:
                gone.update(state.deltas.get(str(seg.call_id), []))
        first = min(dropped) if dropped else None
        insert_at = min(gone) if (first is not None and gone) else (0 if edits.summary else None)
        text = edits.summary
        return self.splice(data, gone, insert_at, (lambda _i: self.make_message("user", text)) if text else None)

    def make_message(self, role: str, text: str) -> Any:
        return {"ts": "", "dir": "meta", "kind": "compactor_summary", "role": role, "text": text}
