"""OpenAI Chat Completions messages, and mini-swe-agent ``.traj.json`` files that wrap them.

Accepted containers: a bare list of messages, ``{"messages": [...]}`` (a request body), or a
mini-swe-agent trajectory ``{"trajectory_format": "mini-swe-agent-1.1", "messages": [...],
"info": {...}}``. Content may be a string, ``null`` or a list of ``{"type": "text"}`` parts.
Tool calls are paired with ``role: "tool"`` results by ``tool_call_id``.
"""

from __future__ import annotations

import json
from typing import Any, Iterable


from ..models import Role, Segment, SegmentKind
from .registry import register
from .base import (
    CallIndex,
    Document,
    Edits,
    Format,
    Probe,
    command_from_arguments,
    make_segment,
    norm_id,
    plan_drops,
)
from ..lazyre import lazy_regex

_RETURNCODE = lazy_regex(r"<returncode>\s*(-?\d+)\s*</returncode>")
_ROLES = ("system", "developer", "user", "assistant", "tool", "function", "exit")
_ANTHROPIC_BLOCKS = ("tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use")


def messages_of(value: Any) -> tuple[list[Any] | None, tuple[str | int, ...]]:
    if isinstance(value, list):
        return value, ()
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        return value["messages"], ("messages",)
    return None, ()


def not_chat(msgs: list[Any]) -> str | None:
    """Why the items of ``msgs`` are not chat messages (each a dict with a known role, no
    Anthropic content blocks), or None when they are. A session asks this of the messages
    appended since its last compaction."""
    if not all(isinstance(m, dict) and m.get("role") in _ROLES for m in msgs):
        return "not every item is a message with a known 'role'"
    if any(isinstance(m.get("content"), list) and any(
            isinstance(p, dict) and p.get("type") in _ANTHROPIC_BLOCKS for p in m["content"])
           for m in msgs):
        return "content has tool_use/tool_result blocks (Anthropic layout)"
    return None


@register
class OpenAIChatFormat(Format):
    name = "openai-chat"
    title = "OpenAI Chat Completions messages (incl. mini-swe-agent .traj.json)"
    detection = ("a JSON list of {role, content} messages, or an object with such a 'messages' list "
                 "(request bodies, mini-swe-agent trajectories)")
    container = "json"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        if not probe.is_json:
            return False, "not a JSON document"
        msgs, _ = messages_of(probe.json_value)
        if msgs is None:
            return False, "no list of messages (neither a JSON array nor an object with 'messages')"
        if not msgs:
            return False, "empty message list"
        why = not_chat(msgs)
        if why:
            return False, why
        if isinstance(probe.json_value, dict) and isinstance(probe.json_value.get("system"), (str, list)):
            return False, "top-level 'system' beside 'messages' (Anthropic layout)"
        return True, "chat messages"

    def read(self, probe: Probe) -> Document:
        data = probe.json_value
        msgs, base = messages_of(data)
        assert msgs is not None
        reader = ChatReader(base)
        reader.feed(msgs)
        return reader.document(data, probe.raw.source)

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        data = self.copy_data(doc, edits)
        if edits is None or edits.is_empty():
            return data
        self.replace_texts(data, doc, edits)
        msgs, base = messages_of(data)
        assert msgs is not None
        dropped_msgs = _fully_dropped(doc, edits.drop, doc.state.pairs)
        first = min(dropped_msgs) if dropped_msgs else None
        kept: list[Any] = []
        inserted = False
        insert_at = first
        if insert_at is None and edits.summary:
            insert_at = 1 if msgs and msgs[0].get("role") in ("system", "developer") else 0
        for i, msg in enumerate(msgs):
            if edits.summary and not inserted and i == insert_at:
                kept.append(self.make_message("user", edits.summary))
                inserted = True
            if i in dropped_msgs:
                continue
            kept.append(msg)
        if edits.summary and not inserted:
            kept.append(self.make_message("user", edits.summary))
        _drop_orphan_tool_messages(kept, msgs)
        if base:
            data["messages"] = kept
            return data
        return kept

    def make_message(self, role: str, text: str) -> Any:
        return {"role": role, "content": text}


class ChatReader:
    """The chat reader as a fold over messages: :meth:`feed` reads messages in order (the ones
    appended since the last call), so a session reads each message once."""

    def __init__(self, base: tuple[str | int, ...] = ()):
        self.base = base
        self.segments: list[Segment] = []
        self.mirrors: dict[str, list[tuple[str | int, ...]]] = {}
        self.call_steps: dict[str, int] = {}
        self.call_cmds: dict[str, tuple[str | None, str | None]] = {}
        self.calls = CallIndex()
        self.step = 0
        self.count = 0  # messages read so far

    def feed(self, msgs: list[Any]) -> None:
        """Read ``msgs[self.count:]``."""
        for i in range(self.count, len(msgs)):
            self.message(i, msgs[i])
        self.count = len(msgs)

    def document(self, data: Any, source: str) -> Document:
        doc = Document(OpenAIChatFormat.name, data, list(self.segments), source)
        doc.state.mirrors = self.mirrors
        doc.state.base = self.base
        doc.state.pairs = self.calls.pairs
        return doc

    def forget_answered(self) -> None:
        """Forget what is kept of the calls whose output has been read, for a reader that reads a
        file whose call ids each name one call and one output (nothing later asks for them)."""
        for cid in self.calls.forget_answered():
            self.call_steps.pop(cid, None)
            self.call_cmds.pop(cid, None)

    def message(self, i: int, msg: Any) -> None:
        """Read message ``i`` (the next one) into :attr:`segments`."""
        role = msg.get("role")
        path = (*self.base, i)
        if role in ("user", "assistant") or (role == "system" and i > 0):
            self.step += 1
        content = msg.get("content")
        parts: list[tuple[tuple[str | int, ...], str]] = []
        if isinstance(content, str):
            parts.append(((*path, "content"), content))
        elif isinstance(content, list):
            for j, part in enumerate(content):
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    parts.append(((*path, "content", j, "text"), part["text"]))
                elif isinstance(part, str):
                    parts.append(((*path, "content", j), part))
        if role in ("tool", "function"):
            ids = msg.get("tool_call_ids")
            call_id = (norm_id(msg.get("tool_call_id")) or (norm_id(ids[0]) if isinstance(ids, list) and ids else None)
                       or norm_id(msg.get("name")))
            st = self.call_steps.get(call_id, self.step) if call_id else self.step
            tool_name, cmd = self.call_cmds.get(call_id, (msg.get("name"), None))
            extra = msg.get("extra") if isinstance(msg.get("extra"), dict) else {}
            exit_code = extra.get("returncode") if isinstance(extra.get("returncode"), int) else None
            text_all = "\n".join(t for _, t in parts)
            if exit_code is None:
                m = _RETURNCODE.search(text_all[:2000])
                if m:
                    exit_code = int(m.group(1))
            for k, (origin, text) in enumerate(parts):
                sid = f"m{i}" if len(parts) == 1 else f"m{i}.{k}"
                self.calls.match(call_id, sid)
                self.segments.append(make_segment(
                    id=sid, index=len(self.segments), step=max(st, 1), step_id=f"s{max(st, 1)}",
                    role=Role.tool, kind=SegmentKind.tool_result, text=text, call_id=call_id,
                    tool_name=tool_name, command=cmd,
                    is_error=(exit_code != 0) if exit_code is not None else None,
                    exit_code=exit_code, origin=origin))
                if "raw_output" in extra and k == 0:
                    self.mirrors[sid] = [(*path, "extra", "raw_output")]
            return
        seg_role = {"developer": Role.system, "exit": Role.system, "function": Role.tool}.get(role, None)
        seg_role = seg_role or Role(role)
        meta = role == "exit" or bool(msg.get("is_demo"))
        for k, (origin, text) in enumerate(parts):
            sid = f"m{i}" if len(parts) == 1 else f"m{i}.{k}"
            self.segments.append(make_segment(
                id=sid, index=len(self.segments), step=self.step if role != "system" or i > 0 else 0,
                step_id=f"s{self.step}", role=seg_role, kind=SegmentKind.message, text=text, meta=meta,
                origin=origin))
        raw_calls = msg.get("tool_calls")
        for j, call in enumerate(raw_calls if isinstance(raw_calls, list) else []):
            if not isinstance(call, dict):
                continue
            fn = call.get("function") if isinstance(call.get("function"), dict) else {}
            args = fn.get("arguments")
            call_id = norm_id(call.get("id"))
            name = fn.get("name")
            cmd = command_from_arguments(args)
            if call_id:
                self.call_steps[call_id] = self.step
                self.call_cmds[call_id] = (name, cmd)
                self.calls.add_call(call_id, f"m{i}.c{j}")
            text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            self.segments.append(make_segment(
                id=f"m{i}.c{j}", index=len(self.segments), step=self.step, step_id=f"s{self.step}",
                role=Role.assistant, kind=SegmentKind.tool_call, text=text or "", call_id=call_id,
                tool_name=name, command=cmd,
                origin=(*path, "tool_calls", j, "function", "arguments") if isinstance(args, str) else (),
                **({"arguments": args} if isinstance(args, dict) else {})))


def _fully_dropped(doc: Document, drop: set[str], pairs: Iterable[tuple[str, str]] = ()) -> set[int]:
    """Message indices all of whose segments are dropped, keeping calls and results together."""
    base = doc.state.base

    def record_of(s: Segment) -> int | None:
        if s.origin and len(s.origin) > len(base):
            return int(s.origin[len(base)])
        if s.id.startswith("m"):  # tool calls with object arguments have no origin
            return int(s.id[1:].split(".")[0])
        return None

    return {int(r) for r in plan_drops(doc.segments, drop, record_of, pairs)}


def _call_ids(msgs: list[Any]) -> set[str]:
    ids: set[str] = set()
    for m in msgs:
        calls = m.get("tool_calls") if isinstance(m, dict) else None
        for c in calls if isinstance(calls, list) else []:
            cid = norm_id(c.get("id")) if isinstance(c, dict) else None
            if cid:
                ids.add(cid)
    return ids


def _drop_orphan_tool_messages(msgs: list[Any], before: list[Any] | None = None) -> None:
    """After dropping, a tool result whose call is gone would be invalid for the API: drop it too.

    With ``before`` (the messages before dropping), only results whose call was removed go;
    results that had no call in the input to begin with are left alone.
    """
    present = _call_ids(msgs)
    removed = (_call_ids(before) - present) if before is not None else None
    keep = []
    for m in msgs:
        cid = norm_id(m.get("tool_call_id")) if isinstance(m, dict) and m.get("role") == "tool" else None
        if cid and cid not in present and (removed is None or cid in removed):
            continue
        keep.append(m)
    msgs[:] = keep
