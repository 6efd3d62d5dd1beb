"""OpenAI Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Each line is ``{"timestamp", "type", "payload"}``. Segments come from ``response_item`` lines
only: ``message`` (``role`` user/assistant/developer/system; ``content`` parts
``input_text``/``output_text``), ``function_call`` (``arguments`` JSON string, ``call_id``),
``function_call_output`` (``output``), ``custom_tool_call`` (``input``) /
``custom_tool_call_output``, ``local_shell_call`` (``action.command`` argv) and
``web_search_call``. Calls and outputs pair by ``call_id``. ``reasoning`` items (summaries or
encrypted content) are not segments. ``compacted`` lines (Codex's own summary) are a
``meta`` user message.

- ``event_msg`` lines mirror response items (``user_message``, ``agent_message``,
  ``exec_command_end`` output): never segments. A replaced text is written to its mirrors too
  (command output fields for ``call_id``), and mirrors of dropped items are dropped.
- Harness user messages (``<environment_context>``, ``# AGENTS.md instructions``,
  ``<user_instructions>``) are ``meta=True``; they and the prompt after them form one step.
  ``session_meta`` (including its ``instructions``, which the AGENTS.md message repeats),
  ``turn_context`` and ``event_msg`` lines make no segments and are written back unchanged.
- Exit codes are parsed from the output text: ``Exit code: N`` or a JSON string with
  ``metadata.exit_code``. There is no error flag besides that.
"""

from __future__ import annotations

import json
from typing import Any

from ..models import Role, Segment, SegmentKind
from ..record import Field, Record
from .registry import register
from .calls import NOT_JSON, parse_arguments
from .base import (
    CallIndex,
    Document,
    Edits,
    Format,
    LayoutState,
    Probe,
    command_from_arguments,
    jsonl_records,
    make_segment,
    plan_drops,
    record_line,
    update_state,
)
from ..lazyre import lazy_regex

_TYPES = ("session_meta", "response_item", "event_msg", "turn_context", "compacted",
          "world_state", "token_usage_record")  # the last two since Codex 0.171: no messages in them
_EXIT = lazy_regex(r"\A(?:.*\n){0,3}?Exit code: (-?\d+)")
_HARNESS = ("<environment_context>", "# AGENTS.md instructions", "<user_instructions>", "<INSTRUCTIONS>")
_ASSISTANT_ITEMS = ("function_call", "custom_tool_call", "local_shell_call", "web_search_call", "reasoning")
_OUTPUT_MIRROR_FIELDS = ("stdout", "stderr", "aggregated_output", "formatted_output")


def exit_code_of(text: str) -> int | None:
    s = text.lstrip()
    if s.startswith("{"):
        try:
            obj = json.loads(s)
        except (json.JSONDecodeError, RecursionError):
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
            code = obj["metadata"].get("exit_code")
            if isinstance(code, int) and not isinstance(code, bool):
                return code
    m = _EXIT.match(text[:500])
    return int(m.group(1)) if m else None


def _command(args: Any) -> str | None:
    obj = args
    if isinstance(args, str):
        obj = parse_arguments(args)
        if obj is NOT_JSON:
            return command_from_arguments(args)
    if isinstance(obj, dict):
        cmd = obj.get("command") if "command" in obj else obj.get("cmd")
        if isinstance(cmd, list) and all(isinstance(x, str) for x in cmd):
            if len(cmd) >= 3 and cmd[1] in ("-lc", "-c") and cmd[0].endswith(("bash", "sh", "zsh")):
                return cmd[2]
            return " ".join(cmd)
    return command_from_arguments(obj)


class CodexState(LayoutState):
    """Codex rollouts: record index -> indices of the records that mirror it (``event_msg`` copies)."""

    mirror_records: dict[int, list[int]] = Field(default_factory=dict)


@register
class CodexFormat(Format):
    name = "codex"
    State = CodexState
    title = "OpenAI Codex CLI rollout JSONL"
    detection = "JSONL of {timestamp, type, payload} lines with type session_meta/response_item/event_msg/turn_context"
    container = "jsonl"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        records = jsonl_records(probe)
        if records is None:
            return False, "not JSONL"
        if not all(isinstance(r, dict) and r.get("type") in _TYPES and "payload" in r for r in records):
            return False, "not every line is {timestamp, type, payload} with a Codex rollout type"
        if not any(r["type"] == "response_item" for r in records):
            return False, "no response_item lines"
        return True, "Codex rollout"

    def read(self, probe: Probe) -> Document:
        records = jsonl_records(probe)
        if records is None:
            raise self.fail(probe, "expected JSONL records")
        segments: list[Segment] = []
        calls = CallIndex()
        mirrors: dict[str, list[tuple[str | int, ...]]] = {}
        mirror_records: dict[str, list[int]] = {}
        step = 0
        prev_side = "user"
        harness_open = False

        def add(**kw: Any) -> None:
            segments.append(make_segment(index=len(segments), **kw))

        for i, rec in enumerate(records):
            line = f"line {record_line(probe, i)}"
            if not isinstance(rec, dict) or rec.get("type") not in _TYPES:
                raise self.fail(probe, f"{line}: not a Codex rollout line", line)
            p = rec.get("payload")
            if not isinstance(p, dict):
                raise self.fail(probe, f"{line}: 'payload' must be an object", line)
            rtype = rec["type"]
            if rtype == "compacted":
                if isinstance(p.get("message"), str):
                    step += 1
                    prev_side = "user"
                    add(id=f"m{i}", step=step, step_id=f"s{step}", role=Role.user, kind=SegmentKind.message,
                        text=p["message"], meta=True, origin=(i, "payload", "message"))
                continue
            if rtype != "response_item":
                continue
            ptype = p.get("type")
            if ptype == "message":
                role = p.get("role")
                content = p.get("content")
                parts: list[tuple[tuple[str | int, ...], str]] = []
                if isinstance(content, str):
                    parts.append(((i, "payload", "content"), content))
                elif isinstance(content, list):
                    for k, part in enumerate(content):
                        if isinstance(part, dict) and isinstance(part.get("text"), str):
                            parts.append(((i, "payload", "content", k, "text"), part["text"]))
                else:
                    raise self.fail(probe, f"{line}: message 'content' must be a list of parts", line)
                if role == "assistant":
                    if prev_side != "assistant":
                        step += 1
                    prev_side = "assistant"
                    seg_role, st = Role.assistant, step
                elif role in ("developer", "system"):
                    seg_role, st = Role.system, 0
                else:
                    harness = bool(parts) and all(t.lstrip().startswith(_HARNESS) for _, t in parts)
                    if not (harness_open and prev_side == "user"):
                        step += 1  # harness context and the prompt after it are one user turn
                    harness_open = harness
                    prev_side = "user"
                    seg_role, st = Role.user, step
                for k, (origin, text) in enumerate(parts):
                    meta = role == "user" and text.lstrip().startswith(_HARNESS)
                    add(id=f"m{i}" if len(parts) == 1 else f"m{i}.{k}", step=st, step_id=f"s{st}", role=seg_role,
                        kind=SegmentKind.message, text=text, meta=meta, origin=origin)
                continue
            if ptype in _ASSISTANT_ITEMS:
                if prev_side != "assistant":
                    step += 1
                prev_side = "assistant"
            st = max(step, 1)
            if ptype in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
                call_id = p.get("call_id") or p.get("id")
                name = p.get("name") or ("shell" if ptype == "local_shell_call" else
                                         "web_search" if ptype == "web_search_call" else None)
                if ptype == "function_call":
                    args = p.get("arguments")
                    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, separators=(",", ":"))
                    origin: tuple[str | int, ...] = (i, "payload", "arguments")
                    cmd = _command(args)
                elif ptype == "custom_tool_call":
                    inp = p.get("input")
                    text = inp if isinstance(inp, str) else json.dumps(inp, ensure_ascii=False, separators=(",", ":"))
                    origin = (i, "payload", "input")
                    cmd = text.splitlines()[0] if text else None
                elif ptype == "local_shell_call":
                    action = p.get("action") if isinstance(p.get("action"), dict) else {}
                    text = json.dumps(action, ensure_ascii=False, separators=(",", ":"))
                    origin = (i, "payload", "action")
                    cmd = _command(action)
                else:
                    action = p.get("action") if isinstance(p.get("action"), dict) else {}
                    q = action.get("query")
                    text = q if isinstance(q, str) else json.dumps(action, ensure_ascii=False, separators=(",", ":"))
                    origin = (i, "payload", "action", "query") if isinstance(q, str) else ()
                    cmd = q if isinstance(q, str) else None
                add(id=f"m{i}", step=st, step_id=f"s{st}", role=Role.assistant, kind=SegmentKind.tool_call,
                    text=text or "", call_id=call_id, tool_name=name, command=cmd, origin=origin)
                calls.add_call(call_id, f"m{i}", step=st, name=name, cmd=cmd)
                continue
            if ptype in ("function_call_output", "custom_tool_call_output"):
                prev_side = "tool"
                call_id = p.get("call_id")
                out = p.get("output")
                parts = []
                success = None
                if isinstance(out, str):
                    parts.append(((i, "payload", "output"), out))
                elif isinstance(out, dict):
                    if isinstance(out.get("content"), str):
                        parts.append(((i, "payload", "output", "content"), out["content"]))
                    success = out.get("success") if isinstance(out.get("success"), bool) else None
                elif isinstance(out, list):
                    for k, part in enumerate(out):
                        if isinstance(part, dict) and isinstance(part.get("text"), str):
                            parts.append(((i, "payload", "output", k, "text"), part["text"]))
                if not parts:
                    parts.append(((), ""))
                for k, (origin, text) in enumerate(parts):
                    sid = f"m{i}" if len(parts) == 1 else f"m{i}.{k}"
                    info = calls.match(call_id, sid) or {}
                    code = exit_code_of(text) if k == 0 else None
                    is_error = (code != 0) if code is not None else (None if success is None else not success)
                    rst = info.get("step", st)
                    add(id=sid, step=rst, step_id=f"s{rst}", role=Role.tool, kind=SegmentKind.tool_result,
                        text=text, call_id=call_id, tool_name=info.get("name"), command=info.get("cmd"),
                        is_error=is_error, exit_code=code, origin=origin)
                continue
            # reasoning and unknown items: no segments
        segments = [s.model_copy(update={"index": n}) if s.index != n else s for n, s in enumerate(segments)]
        # event_msg mirrors
        by_call: dict[str, str] = {s.call_id: s.id for s in segments
                                   if s.kind == SegmentKind.tool_result and s.call_id}
        texts: dict[tuple[str, str], list[str]] = {}
        for s in segments:
            if s.kind == SegmentKind.message and s.role in (Role.user, Role.assistant):
                texts.setdefault((s.role.value, s.text), []).append(s.id)
        used: set[str] = set()
        for i, rec in enumerate(records):
            if rec.get("type") != "event_msg":
                continue
            p = rec["payload"]
            et = p.get("type")
            if et in ("user_message", "agent_message") and isinstance(p.get("message"), str):
                role = "user" if et == "user_message" else "assistant"
                cands = [sid for sid in texts.get((role, p["message"]), []) if sid not in used]
                if cands:
                    used.add(cands[0])
                    mirrors.setdefault(cands[0], []).append((i, "payload", "message"))
                    mirror_records.setdefault(cands[0], []).append(i)
            elif isinstance(p.get("call_id"), str) and p["call_id"] in by_call:
                sid = by_call[p["call_id"]]
                mirror_records.setdefault(sid, []).append(i)
                for f in _OUTPUT_MIRROR_FIELDS:
                    if isinstance(p.get(f), str) and p.get(f):
                        mirrors.setdefault(sid, []).append((i, "payload", f))
        doc = self.new_document(records, segments, probe.raw.source)
        update_state(doc.state, mirrors=mirrors, mirror_records=mirror_records, pairs=calls.pairs)
        return doc

    def mirror_text(self, seg: Segment, path: tuple[str | int, ...], text: str) -> str:
        # an exec event keeps stdout and stderr apart: the compacted output replaces stdout
        if seg.kind == SegmentKind.tool_result and path[-1] == "stderr":
            return ""
        return text

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        state = self.state_of(doc)
        data = self.copy_data(doc, edits)
        if edits is None or edits.is_empty():
            return data
        mirror_records = state.mirror_records
        by_id = {s.id: s for s in doc.segments}
        self.replace_texts(data, doc, edits)

        def record_of(seg: Segment) -> int | None:
            if seg.origin:
                return int(seg.origin[0])
            return int(seg.id[1:].split(".")[0]) if seg.id.startswith("m") else None

        dropped = plan_drops(doc.segments, edits.drop, record_of, state.pairs)
        for sid, recs in mirror_records.items():
            if sid in by_id and record_of(by_id[sid]) in dropped:
                dropped.update(recs)
        insert_at: int | None = min(dropped) if dropped else None
        if insert_at is None and edits.summary:
            insert_at = next((i for i, r in enumerate(data) if r.get("type") == "response_item"), len(data))
        text = edits.summary
        return self.splice(data, dropped, insert_at, (lambda i: self._summary(data, i, text)) if text else None)

    def _summary(self, data: list[Any], near: int, text: str) -> dict[str, Any]:
        rec = self.make_message("user", text)
        if 0 <= near < len(data) and isinstance(data[near].get("timestamp"), str):
            rec["timestamp"] = data[near]["timestamp"]
        return rec

    def make_message(self, role: str, text: str) -> Any:
        kind = "input_text" if role == "user" else "output_text"
        return {"timestamp": "1970-01-01T00:00:00.000Z", "type": "response_item",
                "payload": {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}}
