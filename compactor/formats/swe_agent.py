"""SWE-agent ``.traj`` files, 0.x (text actions) and 1.x (function calling).

Top level ``{"environment", "trajectory": [...], "history": [...], "info": {...}}``. Segments
come from ``history[]`` only: the chat as the model saw it. ``trajectory[]`` holds mirror
copies (``response``, ``observation`` without the prompt suffix, and in 1.x a full chat
snapshot ``messages`` per step); they are never read as segments, but a writer updates them
when it replaces or drops the history text they copy.

- ``system`` is the system prompt (step 0). Demonstrations (``is_demo: true`` or
  ``message_type: "demonstration"``) are prompt text: ``meta=True``, step 0.
- Text actions (0.x): an assistant turn with an ``action`` is the tool call (its content holds
  the thought and the fenced command); the user message that follows it is its observation
  (role ``tool``). There are no ids, so these pairs carry ``call_id=None`` and come from the
  step structure (``trajectory[k]`` pairs action k with observation k).
- Function calling (1.x): ``tool_calls[].id`` ↔ the ``role: "tool"`` message's
  ``tool_call_ids`` list. Ids repeat in replays; pairing takes the oldest unanswered call.
"""

from __future__ import annotations

import json
from typing import Any

from ..models import Role, Segment, SegmentKind
from ..record import Field, Record
from .registry import register
from .base import (
    CallIndex,
    Document,
    Edits,
    Format,
    LayoutState,
    Probe,
    command_from_arguments,
    get_at,
    make_segment,
    norm_id,
    plan_drops,
)

_ROLES = ("system", "user", "assistant", "tool")


def _is_demo(msg: dict[str, Any]) -> bool:
    return bool(msg.get("is_demo")) or msg.get("message_type") == "demonstration"


def _content_parts(msg: dict[str, Any], path: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], str]]:
    content = msg.get("content")
    if isinstance(content, str):
        return [((*path, "content"), content)]
    parts: list[tuple[tuple[str | int, ...], str]] = []
    if isinstance(content, list):
        for j, part in enumerate(content):
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(((*path, "content", j, "text"), part["text"]))
            elif isinstance(part, str):
                parts.append(((*path, "content", j), part))
    return parts


class SweAgentState(LayoutState):
    """SWE-agent: file snapshots, whether the run used function calling, record -> action step."""

    snapshots: dict[Any, Any] = Field(default_factory=dict)
    function_calling: bool = False
    action_steps: dict[Any, Any] = Field(default_factory=dict)


@register
class SweAgentFormat(Format):
    name = "swe-agent"
    State = SweAgentState
    title = "SWE-agent .traj (0.x text actions and 1.x function calling)"
    detection = "a JSON object with a 'history' list of {role, content} messages and a 'trajectory' list of steps"
    container = "json"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        if not probe.is_json:
            return False, "not a JSON document"
        value = probe.json_value
        if not isinstance(value, dict):
            return False, "not a JSON object"
        if not isinstance(value.get("history"), list) or not isinstance(value.get("trajectory"), list):
            return False, "no 'history' and 'trajectory' lists"
        hist = value["history"]
        if not hist:
            return False, "empty 'history'"
        if not all(isinstance(m, dict) and m.get("role") in _ROLES for m in hist):
            return False, "'history' items are not all {role, content} messages"
        return True, "SWE-agent trajectory"

    def read(self, probe: Probe) -> Document:
        data = probe.json_value
        hist = data.get("history")
        traj = data.get("trajectory")
        if not isinstance(hist, list) or not isinstance(traj, list):
            raise self.fail(probe, "expected 'history' and 'trajectory' lists")
        for k, st in enumerate(traj):
            if not isinstance(st, dict):
                raise self.fail(probe, f"trajectory[{k}] is not an object", f"trajectory[{k}]")
        segments: list[Segment] = []
        mirrors: dict[str, list[tuple[str | int, ...]]] = {}
        calls = CallIndex()
        step = 0
        seen_task = False
        pending_action: tuple[str, int, str | None, str | None] | None = None  # (seg id, step, name, cmd)
        action_k = 0  # index into trajectory[] of the next non-demo assistant action
        obs_of_action: dict[str, int] = {}  # call seg id -> trajectory index
        text_pairs: list[tuple[str, str]] = []
        msg_index: dict[str, int] = {}
        for i, msg in enumerate(hist):
            where = f"history[{i}]"
            if not isinstance(msg, dict) or msg.get("role") not in _ROLES:
                raise self.fail(probe, f"{where} is not a message with a known 'role'", where)
            role = msg["role"]
            path = ("history", i)
            parts = _content_parts(msg, path)
            demo = _is_demo(msg)

            def add(sid: str, **kw: Any) -> None:
                segments.append(make_segment(id=sid, index=len(segments), **kw))
                msg_index[sid] = i

            if role == "system" or demo:
                for k, (origin, text) in enumerate(parts):
                    add(f"m{i}" if len(parts) == 1 else f"m{i}.{k}", step=0, step_id="s0",
                        role=Role.system if role == "system" else Role(role), kind=SegmentKind.message,
                        text=text, meta=demo, origin=origin)
                continue
            if role == "tool":
                raw_ids = msg.get("tool_call_ids")
                ids = [x for x in (norm_id(v) for v in raw_ids) if x] if isinstance(raw_ids, list) else []
                if not ids and norm_id(msg.get("tool_call_id")):
                    ids = [norm_id(msg.get("tool_call_id"))]
                call_id = ids[0] if ids else None
                for k, (origin, text) in enumerate(parts):
                    sid = f"m{i}" if len(parts) == 1 else f"m{i}.{k}"
                    info = None
                    for cid in ids or [None]:
                        got = calls.match(cid, sid)
                        info = info or got
                    info = info or {}
                    add(sid, step=info.get("step", max(step, 1)), step_id=f"s{info.get('step', max(step, 1))}",
                        role=Role.tool, kind=SegmentKind.tool_result, text=text, call_id=call_id,
                        tool_name=info.get("name"), command=info.get("cmd"), origin=origin)
                    if k == 0 and info.get("k") is not None:
                        obs_of_action[sid] = info["k"]
                pending_action = None
                continue
            if role == "user":
                if pending_action is not None and seen_task:
                    call_sid, st, name, cmd = pending_action
                    for k, (origin, text) in enumerate(parts):
                        sid = f"m{i}" if len(parts) == 1 else f"m{i}.{k}"
                        add(sid, step=st, step_id=f"s{st}", role=Role.tool, kind=SegmentKind.tool_result,
                            text=text, tool_name=name, command=cmd, origin=origin)
                        text_pairs.append((call_sid, sid))
                        if k == 0:
                            obs_of_action[sid] = action_k - 1
                    pending_action = None
                    continue
                step += 1
                seen_task = True
                for k, (origin, text) in enumerate(parts):
                    add(f"m{i}" if len(parts) == 1 else f"m{i}.{k}", step=step, step_id=f"s{step}",
                        role=Role.user, kind=SegmentKind.message, text=text, origin=origin)
                pending_action = None
                continue
            # assistant
            step += 1
            k_here = action_k if action_k < len(traj) else None
            raw_calls = msg.get("tool_calls")
            tool_calls = [c for c in raw_calls if isinstance(c, dict)] if isinstance(raw_calls, list) else []
            action = msg.get("action") if isinstance(msg.get("action"), str) else None
            if tool_calls or action is None:
                for k, (origin, text) in enumerate(parts):
                    sid = f"m{i}" if len(parts) == 1 else f"m{i}.{k}"
                    add(sid, step=step, step_id=f"s{step}", role=Role.assistant, kind=SegmentKind.message,
                        text=text, origin=origin)
                    if k_here is not None:
                        for key in ("response", "thought"):
                            if traj[k_here].get(key) == text:
                                mirrors.setdefault(sid, []).append(("trajectory", k_here, key))
                    if len(parts) == 1 and msg.get("thought") == text:
                        mirrors.setdefault(sid, []).append(("history", i, "thought"))
                for j, call in enumerate(tool_calls):
                    fn = call.get("function") if isinstance(call.get("function"), dict) else {}
                    args = fn.get("arguments")
                    name = fn.get("name")
                    cmd = command_from_arguments(args)
                    if name == "bash" or cmd is None:
                        cmd = cmd if cmd is not None else (action.strip() if action else None)
                    elif action:
                        cmd = action.strip()
                    sid = f"m{i}.c{j}"
                    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
                    add(sid, step=step, step_id=f"s{step}", role=Role.assistant, kind=SegmentKind.tool_call,
                        text=text or "", call_id=call.get("id"), tool_name=name, command=cmd,
                        origin=("history", i, "tool_calls", j, "function", "arguments"))
                    calls.add_call(call.get("id"), sid, step=step, name=name, cmd=cmd, k=k_here)
                pending_action = None
            else:
                # text action: the reply is the call
                cmd = action.strip()
                name = cmd.split()[0] if cmd.split() else None
                sid = f"m{i}"
                text = "\n".join(t for _, t in parts)
                origin = parts[0][0] if len(parts) == 1 else ()
                add(sid, step=step, step_id=f"s{step}", role=Role.assistant, kind=SegmentKind.tool_call,
                    text=text, tool_name=name, command=cmd, origin=origin)
                if k_here is not None and traj[k_here].get("response") == text:
                    mirrors.setdefault(sid, []).append(("trajectory", k_here, "response"))
                pending_action = (sid, step, name, cmd)
            if action is not None or tool_calls:
                action_k += 1
        # observation mirrors in trajectory[k].observation (without the prompt suffix)
        for sid, k in obs_of_action.items():
            if k is None or not (0 <= k < len(traj)):
                continue
            obs = traj[k].get("observation")
            seg_text = next(s.text for s in segments if s.id == sid)
            if isinstance(obs, str) and (not obs.strip() or obs.strip() in seg_text):
                mirrors.setdefault(sid, []).append(("trajectory", k, "observation"))
        # 1.x chat snapshots: trajectory[k].messages[j] copies history[j]
        snapshots: dict[int, list[tuple[int, int]]] = {}
        for k, st in enumerate(traj):
            msgs = st.get("messages")
            if not isinstance(msgs, list):
                continue
            for j, m in enumerate(msgs[: len(hist)]):
                if isinstance(m, dict) and m.get("role") == hist[j].get("role") and \
                        m.get("content") == hist[j].get("content"):
                    snapshots.setdefault(j, []).append((k, j))
        if snapshots:
            for s in segments:
                if not s.origin or s.origin[0] != "history":
                    continue
                j = int(s.origin[1])
                for k, _ in snapshots.get(j, []):
                    mp = ("trajectory", k, "messages", j, *s.origin[2:])
                    try:
                        if get_at(data, mp) == s.text:
                            mirrors.setdefault(s.id, []).append(mp)
                    except (KeyError, IndexError, TypeError):
                        pass
        doc = self.new_document(data, segments, probe.raw.source)
        doc.state.mirrors = mirrors
        doc.state.pairs = calls.pairs + text_pairs
        doc.state.snapshots = snapshots
        doc.state.function_calling = any(m.get("role") == "tool" for m in hist)
        doc.state.action_steps = _action_steps(hist, len(traj))
        return doc

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        state = self.state_of(doc)
        data = self.copy_data(doc, edits)
        if edits is None or edits.is_empty():
            return data
        self.replace_texts(data, doc, edits)

        def record_of(seg: Segment) -> int | None:
            return int(seg.origin[1]) if len(seg.origin) > 1 and seg.origin[0] == "history" else None

        dropped = plan_drops(doc.segments, edits.drop, record_of, state.pairs)
        hist = data["history"]
        insert_at: int | None = min(dropped) if dropped else None
        if insert_at is None and edits.summary:
            insert_at = 0
            while insert_at < len(hist) and (hist[insert_at].get("role") == "system" or _is_demo(hist[insert_at])):
                insert_at += 1
        kept: list[Any] = []
        for i, msg in enumerate(hist):
            if edits.summary and i == insert_at:
                kept.append(self._summary_message(hist, edits.summary))
            if i not in dropped:
                kept.append(msg)
        if edits.summary and insert_at is not None and insert_at >= len(hist):
            kept.append(self._summary_message(hist, edits.summary))
        data["history"] = kept
        if dropped:
            traj = data["trajectory"]
            gone_steps = {k for i, k in state.action_steps.items() if int(i) in dropped}
            for st in traj:
                msgs = st.get("messages") if isinstance(st, dict) else None
                if isinstance(msgs, list):
                    st["messages"] = [m for j, m in enumerate(msgs) if j not in dropped]
            data["trajectory"] = [st for k, st in enumerate(traj) if k not in gone_steps]
        return data

    def _summary_message(self, hist: list[Any], text: str) -> dict[str, Any]:
        msg = self.make_message("user", text)
        agent = next((m.get("agent") for m in hist if isinstance(m, dict) and m.get("agent")), None)
        if agent:
            msg["agent"] = agent
        if any(isinstance(m, dict) and "message_type" in m for m in hist):
            msg["message_type"] = "observation"
        return msg

    def make_message(self, role: str, text: str) -> Any:
        return {"role": role, "content": text}


def _action_steps(hist: list[Any], n_steps: int) -> dict[int, int]:
    """history index of each non-demo assistant action -> its trajectory[] index."""
    out: dict[int, int] = {}
    k = 0
    for i, msg in enumerate(hist):
        if not isinstance(msg, dict) or msg.get("role") != "assistant" or _is_demo(msg):
            continue
        if isinstance(msg.get("action"), str) or (isinstance(msg.get("tool_calls"), list) and msg["tool_calls"]):
            if k < n_steps:
                out[i] = k
            k += 1
    return out
