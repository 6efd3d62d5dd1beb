"""debug-gym run logs (microsoft/debug-gym): one JSON document per run, often named ``.jsonl``.

``{problem, config, tools, uuid, success, log: [step...], agent_type, logger}``; a step is
``{step_id, action: null | {id, name, arguments}, obs, prompt_response_pairs: null | [{prompt:
[chat messages], response?, tool?, token_usage?}]}``. Step 0 has no action: its ``obs`` is the
first evaluation of the code (the environment's opening observation).

- ``action`` is a ``tool_call`` (text: the JSON of ``arguments``; ``pdb`` commands, ``view`` paths and
  ``rewrite`` targets name the command), ``obs`` its ``tool_result``, paired by the action's ``id``.
- ``prompt_response_pairs`` hold the prompt the model was sent at that step: the whole history
  rebuilt every step. The first prompt's first user message is the task (the instructions with
  the problem statement); every text that repeats an earlier segment (a tool message repeating an
  earlier ``obs``, the same closing instruction every step) is a mirror of it, rewritten with it.
  A later prompt's first message, the instruction view (current code, breakpoints, last
  evaluation), is what the environment showed the model: a ``tool_result`` without a call. The
  prompt's other user lines are harness text (``meta``). A pair's ``response`` text, when present, is the assistant's.
- The summary is a step ``{step_id, action: null, obs: null, summary: text}`` read back as a user
  message; dropped steps are removed (with their prompts), and the later prompts' copies of their
  texts are emptied.
- The step limit is in ``config.max_steps``; the log records no end event. A run that is not a
  ``success`` and whose actions reached that limit was stopped by it: the reader says so in a last
  harness line (``meta``, no origin: it is derived, never written back).
"""

from __future__ import annotations

import json
from typing import Any

import regex

from ..lazyre import lazy_regex
from ..models import Role, Segment, SegmentKind
from .registry import register
from .base import CallIndex, Document, Edits, Probe, command_from_arguments, make_segment, name_of, put_text
from .jsonstyle import StyledFormat, StyledState, record_index



def _is_step(e: Any) -> bool:
    return isinstance(e, dict) and "step_id" in e and "obs" in e and "action" in e


_REWRITE_FAILED = lazy_regex(r"^Error while rewriting\b|^Rewrite failed\.?\s*$", regex.M)
_EVAL_FAILED = lazy_regex(r"^=+ .*\b\d+ (?:failed|errors?)\b.* =+\s*$|^!+ Interrupted: ", regex.M)


def _failed(tool: str, obs: str) -> bool | None:
    """What the tool's output says of its outcome: a rewrite the environment refused ("Error while
    rewriting the file: ... Rewrite failed."), an evaluation whose tests fail or do not collect.
    ``None`` (unknown) for the other tools: the output is read as it is."""
    if tool == "rewrite":
        return bool(_REWRITE_FAILED.search(obs))
    if tool == "eval":
        return bool(_EVAL_FAILED.search(obs[-4000:]))
    return None


def _limit_note(data: dict[str, Any], log: list[Any]) -> str | None:
    """The harness line for a run its step limit ended: not a success, and as many actions as
    ``config.max_steps`` allows (``None`` otherwise, or when the file gives no limit)."""
    config = data.get("config")
    limit = config.get("max_steps") if isinstance(config, dict) else None
    if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0 or data.get("success") is True:
        return None
    actions = sum(1 for e in log if isinstance(e.get("action"), dict))
    if actions < limit:
        return None
    return (f"debug-gym: step limit reached (max_steps {limit}): the run ended after {actions} actions "
            f"without success")


class DebugGymState(StyledState):
    """debug-gym: the file's JSON style (and text, for an unchanged write)."""


@register
class DebugGymFormat(StyledFormat):
    State = DebugGymState
    name = "debug-gym"
    title = "debug-gym run log (microsoft/debug-gym, JSON despite a .jsonl name)"
    detection = ("a JSON object with a 'log' list of steps {step_id, action, obs, prompt_response_pairs} "
                 "(and usually 'problem', 'uuid', 'success')")
    container = "json"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        v = probe.json_value
        if not probe.is_json or not isinstance(v, dict):
            return False, "not a JSON object"
        log = v.get("log")
        if not isinstance(log, list) or not log:
            return False, "no 'log' list"
        if not all(_is_step(e) for e in log):
            return False, "'log' items are not debug-gym steps (step_id, action, obs)"
        return True, "debug-gym log"

    def read(self, probe: Probe) -> Document:
        data = probe.json_value
        log = data.get("log") if isinstance(data, dict) else None
        if not isinstance(log, list):
            raise self.fail(probe, "expected an object with a 'log' list")
        segments: list[Segment] = []
        mirrors: dict[str, list[tuple[str | int, ...]]] = {}
        seen: dict[str, str] = {}  # text -> id of the segment that holds it
        calls = CallIndex()
        task_seen = False

        def add(text: str, **kw: Any) -> None:
            segments.append(make_segment(index=len(segments), text=text, **kw))
            seen.setdefault(text, kw["id"])

        for i, e in enumerate(log):
            where = f"log[{i}]"
            if not _is_step(e):
                raise self.fail(probe, f"{where} is not a debug-gym step (step_id, action, obs)", where)
            path = ("log", i)
            st = i + 1
            ids = dict(step=st, step_id=f"s{st}")
            if isinstance(e.get("summary"), str):
                add(e["summary"], id=f"m{i}", role=Role.user, kind=SegmentKind.message, origin=(*path, "summary"), **ids)
                continue
            for p, pair in enumerate(e.get("prompt_response_pairs") or []):
                if not isinstance(pair, dict):
                    continue
                for k, msg in enumerate(pair.get("prompt") or []):
                    text = msg.get("content") if isinstance(msg, dict) else None
                    if not isinstance(text, str) or not text:
                        continue
                    origin = (*path, "prompt_response_pairs", p, "prompt", k, "content")
                    if text in seen:
                        mirrors.setdefault(seen[text], []).append(origin)
                        continue
                    sid = f"m{i}.p{p}.{k}"
                    role = msg.get("role")
                    if role == "system":
                        add(text, id=sid, role=Role.system, kind=SegmentKind.message, origin=origin, step=0, step_id="s0")
                    elif role == "assistant":
                        add(text, id=sid, role=Role.assistant, kind=SegmentKind.message, origin=origin, **ids)
                    elif role == "user" and not task_seen:
                        task_seen = True
                        add(text, id=sid, role=Role.user, kind=SegmentKind.message, origin=origin, **ids)
                    elif role == "tool" or k == 0:
                        add(text, id=sid, role=Role.tool, kind=SegmentKind.tool_result, origin=origin,
                            tool_name="debug-gym:view", **ids)
                    else:
                        add(text, id=sid, role=Role.user, kind=SegmentKind.message, meta=True, origin=origin, **ids)
                resp = pair.get("response")
                if isinstance(resp, str) and resp:
                    add(resp, id=f"m{i}.p{p}.a", role=Role.assistant, kind=SegmentKind.message,
                        origin=(*path, "prompt_response_pairs", p, "response"), **ids)
            action = e.get("action")
            call_id = None
            if isinstance(action, dict):
                args = action.get("arguments")
                name = name_of(action.get("name"))
                call_id = action.get("id") or f"step-{e.get('step_id')}"
                cmd = command_from_arguments(args) if isinstance(args, dict) and args else name
                text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
                segments.append(make_segment(
                    id=f"m{i}.c", index=len(segments), role=Role.assistant, kind=SegmentKind.tool_call, text=text,
                    call_id=call_id, tool_name=name, command=cmd if cmd != name or not args else cmd,
                    origin=(*path, "action", "arguments") if "arguments" in action else (),
                    **({"arguments": args} if isinstance(args, dict) else {}), **ids))
                calls.add_call(call_id, f"m{i}.c", name=name, cmd=cmd)
            obs = e.get("obs")
            if isinstance(obs, str):
                info = calls.match(call_id, f"m{i}") if call_id else None
                tool = (info or {}).get("name") or "eval"
                segments.append(make_segment(
                    id=f"m{i}", index=len(segments), role=Role.tool, kind=SegmentKind.tool_result, text=obs,
                    call_id=call_id if info is not None else None, tool_name=tool,
                    command=(info or {}).get("cmd"), origin=(*path, "obs"), is_error=_failed(tool, obs), **ids))
                seen.setdefault(obs, f"m{i}")
        end = _limit_note(data, log)
        if end is not None and segments:
            last = segments[-1]
            segments.append(make_segment(id="limit", index=len(segments), role=Role.system, kind=SegmentKind.message,
                                         text=end, meta=True, step=last.step, step_id=last.step_id))
        doc = self.new_document(data, segments, probe.raw.source)
        doc.state.mirrors = mirrors
        doc.state.pairs = calls.pairs
        self.note_style(doc, probe)
        return doc

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        state = self.state_of(doc)
        data, dropped = self.start_write(doc, edits)
        if dropped is None:
            return data
        log = data["log"]
        # the later prompts' copies of a dropped step's texts go with it (emptied): the prompts
        # repeat the history, and a dropped step kept in every later prompt would save nothing
        for seg in doc.segments:
            if record_index(seg) in dropped:
                for mp in state.mirrors.get(seg.id, []):
                    if mp[1] not in dropped:
                        put_text(data, mp, "")
        insert_at = min(dropped) if dropped else (0 if edits.summary else None)
        text = edits.summary
        data["log"] = self.splice(log, dropped, insert_at, (lambda i: self._summary_step(log, i, text)) if text else None)
        return self.finish(doc, data, True)

    def _summary_step(self, log: list[Any], near: int, text: str) -> dict[str, Any]:
        step = self.make_message("user", text)
        if 0 <= near < len(log) and isinstance(log[near], dict):
            step["step_id"] = log[near].get("step_id")
        return step

    def make_message(self, role: str, text: str) -> Any:
        return {"step_id": None, "action": None, "obs": None, "summary": text, "prompt_response_pairs": None}
