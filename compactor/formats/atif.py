"""ATIF, the Agent Trajectory Interchange Format (Harbor / Terminal-Bench), v1.x.

Two containers: one JSON document ``{schema_version: "ATIF-v1.N", session_id, agent, steps: [...],
notes?, final_metrics?, extra?}``, or JSONL whose first record is the same header marked
``"__header__": true`` (without ``steps``) and whose other records are the steps.

A step is ``{step_id, timestamp?, source: system|user|agent, message, reasoning_content?,
tool_calls?: [{tool_call_id, function_name, arguments}], observation?: {results: [{source_call_id?,
content?, subagent_trajectory_ref?}]}, metrics?, extra?}``.

- ``message`` is a message segment: the system prompt for a ``system`` step before any other,
  the user's for ``user`` steps and for later ``system`` steps (harness instructions: a task
  selected, a subtask started), the assistant's for ``agent`` steps; ``reasoning_content`` is an
  assistant message too.
- each tool call is a ``tool_call`` whose text is the JSON of ``arguments`` (a replacement is
  written back only when it is a JSON object); each observation result is a ``tool_result``,
  paired by ``source_call_id`` = ``tool_call_id`` (a result without one answers no call).
  ``content`` is a string in the spec; some writers put an object there: its ``output`` string is
  the text (``command`` names the command, ``passed: false`` / ``success: false`` mark an error),
  or else its JSON; a list of parts gives one segment per text part.
- ``metrics``, ``extra``, ``final_metrics`` and the subagent references are kept as they are.

Writing keeps the file's JSON style (:mod:`.jsonstyle`). Dropped steps are removed; the summary is
a ``user`` step. When steps were removed or inserted, ``step_id`` is renumbered 1..n (ATIF requires
sequential ids) if it was so numbered.
"""

from __future__ import annotations

import json
from typing import Any

from ..models import Role, Segment, SegmentKind
from .registry import register
from .base import CallIndex, Document, Edits, Probe, command_from_arguments, make_segment, name_of, record_line
from .jsonstyle import StyledFormat, StyledState

_SOURCES = ("system", "user", "agent")


def _is_header(rec: Any) -> bool:
    return isinstance(rec, dict) and str(rec.get("schema_version", "")).startswith("ATIF")


def _is_step(rec: Any) -> bool:
    return isinstance(rec, dict) and "step_id" in rec and rec.get("source") in _SOURCES


def _steps(probe: Probe) -> tuple[list[Any], tuple[str | int, ...], bool] | None:
    """(steps, base path, JSONL?) of an ATIF input, or None."""
    v = probe.json_value
    if probe.is_json and _is_header(v) and isinstance(v.get("steps"), list):
        return v["steps"], ("steps",), False
    recs = probe.jsonl
    if recs and _is_header(recs[0]) and recs[0].get("__header__") is True:
        return recs, (), True
    return None


class AtifState(StyledState):
    """ATIF: the file's JSON style (and text, for an unchanged write)."""


@register
class AtifFormat(StyledFormat):
    State = AtifState
    name = "atif"
    title = "ATIF trajectory (Harbor / Terminal-Bench Agent Trajectory Interchange Format)"
    detection = ("a JSON object with schema_version 'ATIF-v1.x' and a 'steps' list, or JSONL whose first record "
                 "is that header with '__header__': true and whose other records are steps "
                 "(step_id, source system/user/agent)")
    container = "json"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        found = _steps(probe)
        if found is None:
            return False, "no ATIF header (schema_version 'ATIF-v1.x' with 'steps', or a '__header__' JSONL record)"
        steps, _, lines = found
        body = steps[1:] if lines else steps
        if not all(_is_step(s) for s in body):
            return False, "not every step has a step_id and a source system/user/agent"
        return True, "ATIF trajectory"

    def read(self, probe: Probe) -> Document:
        found = _steps(probe)
        if found is None:
            raise self.fail(probe, "expected an ATIF trajectory")
        steps, base, lines = found
        segments: list[Segment] = []
        calls = CallIndex()

        def add(**kw: Any) -> None:
            segments.append(make_segment(index=len(segments), **kw))

        turn = 0
        started = False
        for i, step in enumerate(steps):
            if lines and i == 0:
                continue
            where = f"line {record_line(probe, i)}" if lines else f"steps[{i}]"
            if not _is_step(step):
                raise self.fail(probe, f"{where} is not an ATIF step (step_id and source system/user/agent)", where)
            path = (*base, i)
            source = step["source"]
            if source == "system" and not started:
                role, st = Role.system, 0
            else:
                started = True
                turn += 1
                role, st = (Role.assistant if source == "agent" else Role.user), turn
            msg = step.get("message")
            if isinstance(msg, str) and msg:
                add(id=f"m{i}", step=st, step_id=f"s{st}", role=role, kind=SegmentKind.message, text=msg,
                    origin=(*path, "message"))
            elif isinstance(msg, list):  # multimodal parts (ATIF 1.5+)
                for k, part in enumerate(msg):
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        add(id=f"m{i}.{k}", step=st, step_id=f"s{st}", role=role, kind=SegmentKind.message,
                            text=part["text"], origin=(*path, "message", k, "text"))
            reasoning = step.get("reasoning_content")
            if isinstance(reasoning, str) and reasoning:
                add(id=f"m{i}.t", step=st, step_id=f"s{st}", role=Role.assistant, kind=SegmentKind.message,
                    text=reasoning, origin=(*path, "reasoning_content"))
            st = max(st, 1)
            tool_calls = step.get("tool_calls") if isinstance(step.get("tool_calls"), list) else []
            for k, tc in enumerate(tool_calls):
                if not isinstance(tc, dict):
                    continue
                args = tc.get("arguments")
                text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
                cmd = command_from_arguments(args) if isinstance(args, (dict, str)) else None
                sid = f"m{i}.c{k}"
                add(id=sid, step=st, step_id=f"s{st}", role=Role.assistant, kind=SegmentKind.tool_call, text=text,
                    call_id=tc.get("tool_call_id"), tool_name=tc.get("function_name"), command=cmd,
                    origin=(*path, "tool_calls", k, "arguments") if "arguments" in tc else (),
                    **({"arguments": args} if isinstance(args, dict) else {}))
                calls.add_call(tc.get("tool_call_id"), sid, step=st, name=name_of(tc.get("function_name")), cmd=cmd)
            obs = step.get("observation") if isinstance(step.get("observation"), dict) else {}
            results = obs.get("results") if isinstance(obs.get("results"), list) else []
            for k, res in enumerate(results):
                if not isinstance(res, dict):
                    continue
                rpath = (*path, "observation", "results", k)
                for n, (origin, text, cmd, err) in enumerate(_result_parts(res, rpath)):
                    sid = f"m{i}.r{k}" if n == 0 else f"m{i}.r{k}.{n}"
                    call_id = res.get("source_call_id")
                    info = calls.match(call_id, sid) or {}
                    add(id=sid, step=info.get("step", st), step_id=f"s{info.get('step', st)}", role=Role.tool,
                        kind=SegmentKind.tool_result, text=text, call_id=call_id if info else None,
                        tool_name=info.get("name"), command=cmd or info.get("cmd"), is_error=err, origin=origin)
        doc = self.new_document(probe.jsonl if lines else probe.json_value, segments, probe.raw.source)
        doc.state.base = base
        doc.state.pairs = calls.pairs
        self.note_style(doc, probe, lines=lines)
        return doc

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        state = self.state_of(doc)
        data, dropped = self.start_write(doc, edits)
        if dropped is None:
            return data
        base = tuple(state.base)
        lines = state.lines
        steps = data if lines else data["steps"]
        first = 1 if lines else 0
        insert_at = min(dropped) if dropped else None
        if insert_at is None and edits.summary:
            insert_at = first
            while insert_at < len(steps) and isinstance(steps[insert_at], dict) and \
                    steps[insert_at].get("source") == "system" and not _has_calls(steps[insert_at]):
                insert_at += 1
                if any(isinstance(s, dict) and s.get("source") != "system" for s in steps[first:insert_at]):
                    break
        text = edits.summary
        kept = self.splice(steps, dropped, insert_at,
                           (lambda i: self._summary_step(steps, i, text)) if text else None)
        if dropped or text:
            body = kept[first:]
            ids = [s.get("step_id") for s in steps[first:] if isinstance(s, dict)]
            if ids == list(range(1, len(ids) + 1)):
                for n, s in enumerate(body, start=1):
                    s["step_id"] = n
        if lines:
            return self.finish(doc, kept, True)
        data["steps"] = kept
        return self.finish(doc, data, True)

    def _summary_step(self, steps: list[Any], near: int, text: str) -> dict[str, Any]:
        step = self.make_message("user", text)
        src = steps[near] if 0 <= near < len(steps) else None
        if isinstance(src, dict) and "step_id" in src:
            step["step_id"] = src["step_id"]
            if "timestamp" in src:
                step["timestamp"] = src["timestamp"]
            step = {"step_id": step.pop("step_id"), **step}
        return step

    def make_message(self, role: str, text: str) -> Any:
        return {"step_id": 0, "source": "agent" if role == "assistant" else role, "message": text}


def _has_calls(step: dict[str, Any]) -> bool:
    return bool(step.get("tool_calls")) or bool(step.get("observation"))


def _result_parts(res: dict[str, Any], rpath: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], str, str | None, bool | None]]:
    """(origin, text, command, is_error) of one observation result's text."""
    content = res.get("content")
    if isinstance(content, str):
        return [((*rpath, "content"), content, None, None)]
    if isinstance(content, list):
        out = []
        for k, part in enumerate(content):
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(((*rpath, "content", k, "text"), part["text"], None, None))
            elif isinstance(part, str):
                out.append(((*rpath, "content", k), part, None, None))
        return out or [((), "", None, None)]
    if isinstance(content, dict):
        err = None
        for flag in ("passed", "success"):
            if isinstance(content.get(flag), bool):
                err = not content[flag]
        if isinstance(content.get("is_error"), bool):
            err = content["is_error"]
        cmd = name_of(content.get("command"))
        for key in ("output", "stdout", "result", "text", "error"):
            if isinstance(content.get(key), str):
                return [((*rpath, "content", key), content[key], cmd, err)]
        return [((*rpath, "content"), json.dumps(content, ensure_ascii=False), cmd, err)]
    return [((), "" if content is None else json.dumps(content, ensure_ascii=False), None, None)]
