"""The seed-000 step array: ``{"current_objective", "token_budget_for_summary", "trajectory_so_far": [...]}``.

Also accepted: a bare JSON array of step objects. A step is ``{"step": "s1", "action": ...,
"observation": ...}`` (an optional ``thought`` is the model's prose). The action becomes a
``tool_call`` segment and the observation its ``tool_result``; they are paired by the step's
own id. ``step_id`` is the step's ``"step"`` value (``s<position>`` when missing), ``step`` its
1-based position. ``current_objective`` is a user message segment at step 0 (step id ``s0``),
like a system prompt: it frames every step. Objective and budget are kept in
``doc.state.objective`` / ``doc.state.budget``.

A summary written back is a step of its own shape: ``{"step": "summary", "role": "user",
"content": "..."}``; steps with ``content`` read back as message segments.
"""

from __future__ import annotations

import json
from typing import Any

from ..models import Role, Segment, SegmentKind
from ..record import Record
from .registry import register
from .base import (
    CallIndex,
    Document,
    Edits,
    Format,
    LayoutState,
    Probe,
    command_from_arguments,
    make_segment,
    plan_drops,
)

_STEP_KEYS = ("action", "observation", "content")
_EVENT_KEYS = ("id", "source", "args", "extras", "cause", "kind", "role")


def steps_of(value: Any) -> tuple[list[Any] | None, tuple[str | int, ...]]:
    if isinstance(value, dict) and isinstance(value.get("trajectory_so_far"), list):
        return value["trajectory_so_far"], ("trajectory_so_far",)
    if isinstance(value, list):
        return value, ()
    return None, ()


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)


class StepsState(LayoutState):
    """The seed-000 step array: the task's own objective and summary budget."""

    objective: str | None = None
    budget: int | None = None


@register
class StepsFormat(Format):
    name = "steps"
    State = StepsState
    title = "Seed-000 step array (current_objective + trajectory_so_far)"
    detection = ("an object with a 'trajectory_so_far' list, or a JSON array of step objects "
                 "{step, action, observation}")
    container = "json"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        if not probe.is_json:
            return False, "not a JSON document"
        value = probe.json_value
        steps, base = steps_of(value)
        if steps is None:
            return False, "neither a 'trajectory_so_far' list nor a JSON array"
        if base:
            return True, "object with trajectory_so_far"
        if not steps:
            return False, "empty array"
        for item in steps:
            if not isinstance(item, dict):
                return False, "array items are not all objects"
            if "step" not in item and any(k in item for k in _EVENT_KEYS):
                return False, "items look like events/messages, not steps (no 'step' key)"
            if not any(k in item for k in _STEP_KEYS):
                return False, "an item has no 'action'/'observation'"
        # compactor's own output: at a tight budget every step may be folded into its summary step
        if not any("action" in item or "observation" in item or item.get("step") == "summary" for item in steps):
            return False, "no step has an 'action' or 'observation'"
        return True, "array of step objects"

    def read(self, probe: Probe) -> Document:
        data = probe.json_value
        steps, base = steps_of(data)
        if steps is None:
            raise self.fail(probe, "expected 'trajectory_so_far' (a list of steps) or a JSON array of steps")
        segments: list[Segment] = []
        calls = CallIndex()
        if base:
            objective = data.get("current_objective")
            if objective is not None and not isinstance(objective, str):
                raise self.fail(probe, "'current_objective' must be a string", "current_objective")
            if isinstance(objective, str):
                segments.append(make_segment(
                    id="objective", index=0, step=0, step_id="s0", role=Role.user,
                    kind=SegmentKind.message, text=objective, origin=("current_objective",)))
        for i, item in enumerate(steps):
            where = f"{'trajectory_so_far' if base else 'step'}[{i}]"
            if not isinstance(item, dict):
                raise self.fail(probe, f"{where} is not an object", where)
            if not any(k in item for k in _STEP_KEYS):
                raise self.fail(probe, f"{where} has no 'action', 'observation' or 'content'", where)
            path = (*base, i)
            pos = i + 1
            raw_id = item.get("step")
            step_id = str(raw_id) if raw_id not in (None, "") else f"s{pos}"
            if "content" in item and "action" not in item and "observation" not in item:
                role = Role.assistant if item.get("role") == "assistant" else Role.user
                segments.append(make_segment(
                    id=f"m{i}", index=len(segments), step=pos, step_id=step_id, role=role,
                    kind=SegmentKind.message, text=_text_of(item["content"]), origin=(*path, "content")))
                continue
            thought = item.get("thought")
            if isinstance(thought, str) and thought:
                segments.append(make_segment(
                    id=f"m{i}", index=len(segments), step=pos, step_id=step_id, role=Role.assistant,
                    kind=SegmentKind.message, text=thought, origin=(*path, "thought")))
            call_id = step_id
            cmd = None
            name = None
            if "action" in item:
                action = item["action"]
                text = _text_of(action)
                cmd = text if isinstance(action, str) else command_from_arguments(action)
                if isinstance(action, dict):
                    name = next((action[k] for k in ("tool", "name") if isinstance(action.get(k), str)), None)
                else:
                    name = text.split("(", 1)[0].split()[0] if text.strip() else None
                segments.append(make_segment(
                    id=f"m{i}.c0", index=len(segments), step=pos, step_id=step_id, role=Role.assistant,
                    kind=SegmentKind.tool_call, text=text, call_id=call_id, tool_name=name, command=cmd,
                    origin=(*path, "action")))
                calls.add_call(call_id, f"m{i}.c0")
            if "observation" in item:
                obs = item["observation"]
                paired = "action" in item
                if paired:
                    calls.match(call_id, f"m{i}.r0")
                segments.append(make_segment(
                    id=f"m{i}.r0", index=len(segments), step=pos, step_id=step_id, role=Role.tool,
                    kind=SegmentKind.tool_result, text=_text_of(obs), call_id=call_id if paired else None,
                    tool_name=name, command=cmd, origin=(*path, "observation")))
        doc = self.new_document(data, segments, probe.raw.source)
        doc.state.base = base
        doc.state.pairs = calls.pairs
        doc.state.objective = data.get("current_objective") if base else None
        doc.state.budget = data.get("token_budget_for_summary") if base else None
        return doc

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        state = self.state_of(doc)
        data = self.copy_data(doc, edits)
        if edits is None or edits.is_empty():
            return data
        self.replace_texts(data, doc, edits)
        base = state.base
        steps, _ = steps_of(data)
        assert steps is not None

        def record_of(seg: Segment) -> int | None:
            return int(seg.origin[len(base)]) if len(seg.origin) > len(base) else None

        dropped = plan_drops(doc.segments, edits.drop, record_of, state.pairs)
        insert_at = min(dropped) if dropped else (0 if edits.summary else None)
        text = edits.summary
        kept = self.splice(steps, dropped, insert_at, (lambda _i: self.make_message("user", text)) if text else None)
        if base:
            data["trajectory_so_far"] = kept
            return data
        return kept

    def make_message(self, role: str, text: str) -> Any:
        return {"step": "summary", "role": role, "content": text}
