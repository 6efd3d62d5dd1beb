"""OpenHands event streams: V0 (``action``/``observation`` events) and V1 SDK (``kind`` events).

Containers: a bare JSON array of events (GUI export, replay fixtures), or one evaluation-output
record ``{instance_id, instruction, history: [...], metrics, error, test_result}``.

V0: actions carry ``action`` + ``args``, observations ``observation`` + ``content`` + ``extras``
and ``cause`` (the id of the action they answer: that is how results are paired, never by
position). The model's prose for a tool step is ``args.thought`` (an assistant message
segment); the call itself is ``args.command`` (run), ``args.code`` (IPython), or the payload
argument of other actions (``file_text``/``new_str``/``content`` of an edit, ``path`` of a read;
``command`` then reads ``"<sub-command> <path>"``). Exit codes come from
``extras.metadata.exit_code``; ``observation: "error"`` and results starting ``ERROR:`` are
errors. ``tool_call_metadata.model_response`` (the raw LLM reply) and the edit observation's
``old_content``/``new_content``/``diff`` are mirror copies: never segments; a replaced edit
result has them cleared. ``recall`` actions repeat the user message and are skipped; a
``recall`` observation is harness context (``meta=True``). The eval record's ``instruction``
repeats the first user message (a mirror) unless no event holds it.

V1 (software-agent-sdk): ``MessageEvent`` (``llm_message.content`` text parts),
``ActionEvent`` (``thought`` text parts, ``tool_call.arguments``), ``ObservationEvent``
(``observation.output``/``content``/``error``/``exit_code``), paired by ``action_id`` (else
``tool_call_id``), ``AgentErrorEvent`` (an error result for ``tool_call_id``),
``SystemPromptEvent``. The system prompt is usually not in the history; the top-level
``instruction`` is the user task. Browser screenshots are never text.

Writing: a dropped event takes its observations with it; when the user message that the
eval record's ``instruction`` repeats is dropped (or the instruction segment itself), the
instruction is emptied so the dropped text does not come back.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..models import Role, Segment, SegmentKind
from ..record import Field, Record
from .registry import get_format, register
from .base import (CallIndex, Document, Edits, Format, LayoutState, Probe, jsonl_records, make_segment, name_of, norm_id,
                   plan_drops, record_line, update_state)
from .jsonstyle import StyledFormat, StyledState

_V1_KINDS = ("ActionEvent", "ObservationEvent", "MessageEvent", "SystemPromptEvent", "AgentErrorEvent",
             "UserRejectObservation", "Condensation", "CondensationRequest", "CondensationSummaryEvent",
             "PauseEvent", "ConversationStateUpdateEvent", "LLMConvertibleEvent")
_CALL_FIELD = {"run": "command", "run_ipython": "code", "browse": "url", "browse_interactive": "browser_actions"}
_NOISE_ARGS = ("thought", "blocking", "is_static", "cwd", "hidden", "confirmation_state", "security_risk",
               "impl_source", "is_input", "include_extra", "wait_for_response", "image_urls",
               "action", "keep_prompt", "is_confirmed", "kernel_init_code", "images_urls")
_SKIP_OBS = ("agent_state_changed", "null")
# V0 arguments that carry a call's payload, by preference (translated_ipython_code is derived)
_PAYLOAD_ARGS = ("file_text", "new_str", "content", "code", "old_str", "path", "url", "query", "task", "agent")
_EDIT_MIRRORS = ("old_content", "new_content", "diff", "_diff_cache")


def events_of(value: Any) -> tuple[list[Any] | None, tuple[str | int, ...]]:
    if isinstance(value, list):
        return value, ()
    if isinstance(value, dict) and isinstance(value.get("history"), list):
        return value["history"], ("history",)
    return None, ()


def _is_v0(e: Any) -> bool:
    return isinstance(e, dict) and ("action" in e or "observation" in e) and ("id" in e or "source" in e)


def _is_flat_v0(e: Any) -> bool:
    """An event of the resolver's output.jsonl: 'action'/'observation' with the arguments or the
    result on the event itself, no 'args', no ids."""
    return isinstance(e, dict) and "args" not in e and "id" not in e and (
        isinstance(e.get("action"), str) or isinstance(e.get("observation"), str))


def _flat_id(e: dict[str, Any], seen: dict[str, int]) -> str:
    """A call id for a flat event (which has none): a digest of the event and how many identical
    events came before it, not its position (which moves when earlier events are dropped)."""
    digest = hashlib.sha256(json.dumps(e, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8")).hexdigest()[:12]
    n = seen.get(digest, 0)
    seen[digest] = n + 1
    return f"action-{digest}" + (f"-{n}" if n else "")


def _is_v1(e: Any) -> bool:
    return isinstance(e, dict) and e.get("kind") in _V1_KINDS


def _text_parts(value: Any, path: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], str]]:
    if isinstance(value, str):
        return [(path, value)]
    out: list[tuple[tuple[str | int, ...], str]] = []
    if isinstance(value, list):
        for k, part in enumerate(value):
            if isinstance(part, dict) and part.get("type", "text") == "text" and isinstance(part.get("text"), str):
                out.append(((*path, k, "text"), part["text"]))
            elif isinstance(part, str):
                out.append(((*path, k), part))
    elif isinstance(value, dict) and isinstance(value.get("text"), str):
        out.append(((*path, "text"), value["text"]))
    return out


def _sid(i: int, k: int, n: int) -> str:
    return f"m{i}" if n == 1 else f"m{i}.{k}"


class OpenHandsState(LayoutState):
    """OpenHands: paths cleared when a segment is rewritten (stale copies of an edit); the event
    layout version (``v0`` / ``v1``)."""

    clear: dict[str, list[tuple[str | int, ...]]] = Field(default_factory=dict)
    version: str | None = None


@register
class OpenHandsFormat(Format):
    name = "openhands"
    State = OpenHandsState
    title = "OpenHands event stream (V0 actions/observations, V1 SDK events)"
    detection = ("a JSON array of OpenHands events, or an evaluation record whose 'history' holds them "
                 "(V0: 'action'/'observation' + 'id'; V1: 'kind' ActionEvent/ObservationEvent/MessageEvent)")
    container = "json"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        if not probe.is_json:
            return False, "not a JSON document"
        events, base = events_of(probe.json_value)
        if events is None:
            return False, "neither a JSON array nor an object with a 'history' list"
        if not events:
            return False, "no events"
        if all(_is_v0(e) for e in events):
            return True, "OpenHands V0 events"
        if all(isinstance(e, dict) and "kind" in e for e in events) and any(_is_v1(e) for e in events):
            return True, "OpenHands V1 events"
        return False, "items are not OpenHands events (V0 'action'/'observation' or V1 'kind')"

    # ------------------------------------------------------------------ reading
    def read(self, probe: Probe) -> Document:
        return self.read_value(probe, probe.json_value)

    def read_value(self, probe: Probe, data: Any, where: str = "") -> Document:
        """The document of one run (an event list or an evaluation record); ``where`` prefixes
        positions in errors (the run's line in an output.jsonl)."""
        events, base = events_of(data)
        if events is None:
            raise self.fail(probe, f"{where}expected a JSON array of events or an object with a 'history' list")
        where0 = where + ("history" if base else "event")
        for i, e in enumerate(events):
            if not isinstance(e, dict):
                raise self.fail(probe, f"{where0}[{i}] is not an object", f"{where0}[{i}]")
        v1 = any(_is_v1(e) for e in events)
        if not v1:
            for i, e in enumerate(events):
                if not (_is_v0(e) or _is_flat_v0(e)):
                    raise self.fail(probe, f"{where0}[{i}] has neither 'action' nor 'observation'", f"{where0}[{i}]")
        doc = self.new_document(data, [], probe.raw.source)
        ctx = _Ctx(base)
        if v1:
            self._read_v1(probe, data, events, base, ctx)
        else:
            self._read_v0(probe, data, events, base, ctx)
        doc.segments = ctx.segments
        update_state(doc.state, mirrors=ctx.mirrors, clear=ctx.clear, pairs=ctx.calls.pairs, base=base,
                         version="v1" if v1 else "v0")
        return doc

    def _instruction(self, data: Any, base: tuple[str | int, ...], ctx: "_Ctx", user_texts: dict[str, str]) -> None:
        """The eval record's 'instruction': a mirror of a user message, or the task itself."""
        if not base or not isinstance(data.get("instruction"), str) or not data["instruction"]:
            return
        text = data["instruction"]
        for sid, t in user_texts.items():
            if t == text:
                ctx.mirrors.setdefault(sid, []).append(("instruction",))
                return
        ctx.add("instruction", step=1, role=Role.user, kind=SegmentKind.message, text=text,
                origin=("instruction",), first=True)

    def _read_v0(self, probe: Probe, data: Any, events: list[Any], base: tuple[str | int, ...], ctx: "_Ctx") -> None:
        step = 0
        last_resp: Any = None
        action_info: dict[Any, dict[str, Any]] = {}  # event id -> {step, call seg, call_id, name, cmd}
        user_texts: dict[str, str] = {}
        agent_acted = False
        flat_seen: dict[str, int] = {}
        unanswered: list[dict[str, Any]] = []  # flat events: an observation answers the last open action
        for i, e in enumerate(events):
            path = (*base, i)
            flat = _is_flat_v0(e)
            # resolver output.jsonl: the arguments sit on the event itself (no 'args', no ids)
            args = e if flat else (e.get("args") if isinstance(e.get("args"), dict) else {})
            argp: tuple[str | int, ...] = path if flat else (*path, "args")
            tcm = e.get("tool_call_metadata") if isinstance(e.get("tool_call_metadata"), dict) else {}
            if "action" in e:
                kind = e.get("action")
                source = e.get("source")
                if source is None and flat:  # no source: the first message is the user's task
                    source = "agent" if agent_acted or kind != "message" else "user"
                if kind != "message" or source != "user":
                    agent_acted = True
                if kind == "recall":
                    continue
                if kind == "system":
                    parts = _text_parts(args.get("content"), (*argp, "content"))
                    for k, (origin, text) in enumerate(parts):
                        sid = _sid(i, k, len(parts))
                        ctx.add(sid, step=0, role=Role.system, kind=SegmentKind.message, text=text, origin=origin)
                        ctx.mirror_if_equal(sid, e, path, text)
                    continue
                if kind == "message" and source == "user":
                    step += 1
                    last_resp = None
                    parts = _text_parts(args.get("content"), (*argp, "content"))
                    for k, (origin, text) in enumerate(parts):
                        sid = _sid(i, k, len(parts))
                        ctx.add(sid, step=step, role=Role.user, kind=SegmentKind.message, text=text, origin=origin)
                        ctx.mirror_if_equal(sid, e, path, text)
                        user_texts[sid] = text
                    continue
                resp = tcm.get("model_response")
                resp_id = resp.get("id") if isinstance(resp, dict) else None
                if not (resp_id and resp_id == last_resp):
                    step += 1
                last_resp = resp_id
                st = max(step, 1)
                if kind == "message":
                    parts = _text_parts(args.get("content"), (*argp, "content"))
                    for k, (origin, text) in enumerate(parts):
                        sid = _sid(i, k, len(parts))
                        ctx.add(sid, step=st, role=Role.assistant, kind=SegmentKind.message, text=text, origin=origin)
                        ctx.mirror_if_equal(sid, e, path, text)
                    continue
                call_id = norm_id(tcm.get("tool_call_id")) or (
                    _flat_id(e, flat_seen) if flat else f"event-{norm_id(e.get('id')) or i}")
                name = tcm.get("function_name") or kind
                thought = args.get("thought")
                if kind == "think":
                    if isinstance(thought, str):
                        ctx.add(f"m{i}.c0", step=st, role=Role.assistant, kind=SegmentKind.tool_call, text=thought,
                                call_id=call_id, tool_name=name, command=None, origin=(*argp, "thought"))
                        ctx.calls.add_call(call_id, f"m{i}.c0")
                        action_info[norm_id(e.get("id"))] = dict(step=st, call_id=call_id, name=name, cmd=None, seg=f"m{i}.c0")
                        unanswered.append(action_info[norm_id(e.get("id"))])
                    continue
                if isinstance(thought, str) and thought:
                    ctx.add(f"m{i}", step=st, role=Role.assistant, kind=SegmentKind.message, text=thought,
                            origin=(*argp, "thought"))
                    ctx.mirror_if_equal(f"m{i}", e, path, thought)
                if kind == "finish":
                    final = args.get("final_thought")
                    if isinstance(final, str) and final and final != thought:
                        ctx.add(f"m{i}.c0", step=st, role=Role.assistant, kind=SegmentKind.tool_call, text=final,
                                call_id=call_id, tool_name=name, origin=(*argp, "final_thought"))
                        ctx.calls.add_call(call_id, f"m{i}.c0")
                    continue
                field_name = _CALL_FIELD.get(str(kind))
                if field_name and isinstance(args.get(field_name), str):
                    text = args[field_name]
                    origin: tuple[str | int, ...] = (*argp, field_name)
                    cmd = text
                else:
                    # the payload argument, so the text is in the file and can be rewritten
                    key = next((k for k in _PAYLOAD_ARGS if isinstance(args.get(k), str) and args[k]), None)
                    if key is not None:
                        text, origin = args[key], (*argp, key)
                    else:
                        rest = {k: v for k, v in args.items() if k not in _NOISE_ARGS and v is not None}
                        text, origin = json.dumps(rest, ensure_ascii=False, sort_keys=True), ()
                    target = name_of(args.get("path")) or name_of(args.get("url"))
                    sub = name_of(args.get("command"))
                    cmd = f"{sub} {target}" if sub and target else target
                ctx.add(f"m{i}.c0", step=st, role=Role.assistant, kind=SegmentKind.tool_call, text=text,
                        call_id=call_id, tool_name=name, command=cmd, origin=origin,
                        call_verb=name_of(args.get("command")) or name_of(kind),
                        call_paths=(args["path"],) if name_of(args.get("path")) else ())
                ctx.calls.add_call(call_id, f"m{i}.c0")
                action_info[norm_id(e.get("id"))] = dict(step=st, call_id=call_id, name=name, cmd=cmd, seg=f"m{i}.c0")
                unanswered.append(action_info[norm_id(e.get("id"))])
                continue
            # observation
            obs = e.get("observation")
            if obs in _SKIP_OBS:
                continue
            cause = norm_id(e.get("cause"))
            info = action_info.get(cause) if cause is not None else None
            if info is None and flat and unanswered:
                info = unanswered.pop()
            elif info is not None and info in unanswered:
                unanswered.remove(info)
            st = info["step"] if info else max(step, 1)
            parts = _text_parts(e.get("content"), (*path, "content")) or [((), "")]
            if obs == "recall":
                for k, (origin, text) in enumerate(parts):
                    ctx.add(_sid(i, k, len(parts)), step=st, role=Role.user, kind=SegmentKind.message, text=text,
                            meta=True, origin=origin)
                continue
            extras = e.get("extras") if isinstance(e.get("extras"), dict) else {}
            meta = extras.get("metadata") if isinstance(extras.get("metadata"), dict) else {}
            exit_code = meta.get("exit_code") if isinstance(meta.get("exit_code"), int) else None
            if exit_code is None and flat and isinstance(e.get("exit_code"), int) and not isinstance(e["exit_code"], bool):
                exit_code = e["exit_code"]
            is_error: bool | None = None
            if exit_code is not None:
                is_error = exit_code != 0
            if e.get("success") is False or obs == "error":
                is_error = True
            elif e.get("success") is True and is_error is None:
                is_error = False
            for k, (origin, text) in enumerate(parts):
                sid = _sid(i, k, len(parts))
                err = is_error
                if err is None and text.lstrip().startswith("ERROR:"):
                    err = True
                if info:
                    ctx.calls.pairs.append((info["seg"], sid))
                ctx.add(sid, step=st, role=Role.tool, kind=SegmentKind.tool_result, text=text,
                        call_id=info["call_id"] if info else None, tool_name=info["name"] if info else obs,
                        command=info["cmd"] if info else None, is_error=err, exit_code=exit_code, origin=origin)
                ctx.mirror_if_equal(sid, e, path, text)
                if k == 0:
                    clear = [(*path, "extras", key) for key in _EDIT_MIRRORS if extras.get(key) is not None]
                    if clear:
                        ctx.clear[sid] = clear
        self._instruction(data, base, ctx, user_texts)

    def _read_v1(self, probe: Probe, data: Any, events: list[Any], base: tuple[str | int, ...], ctx: "_Ctx") -> None:
        step = 0
        last_resp: Any = None
        user_texts: dict[str, str] = {}
        by_event: dict[Any, dict[str, Any]] = {}
        if base and isinstance(data.get("instruction"), str):
            step = 1  # the instruction is the first user turn
        for i, e in enumerate(events):
            path = (*base, i)
            kind = e.get("kind")
            if kind == "SystemPromptEvent":
                parts = _text_parts(e.get("system_prompt"), (*path, "system_prompt"))
                for k, (origin, text) in enumerate(parts):
                    ctx.add(_sid(i, k, len(parts)), step=0, role=Role.system, kind=SegmentKind.message,
                            text=text, origin=origin)
                continue
            if kind == "MessageEvent":
                msg = e.get("llm_message") if isinstance(e.get("llm_message"), dict) else {}
                role = msg.get("role") if isinstance(msg.get("role"), str) else (
                    "user" if e.get("source") == "user" else "assistant")
                parts = _text_parts(msg.get("content"), (*path, "llm_message", "content"))
                if role == "user":
                    if not (base and not user_texts and parts and parts[0][1] == data.get("instruction")):
                        step += 1
                    last_resp = None
                elif role == "assistant":
                    resp_id = e.get("llm_response_id")
                    if not (resp_id and resp_id == last_resp):
                        step += 1
                    last_resp = resp_id
                seg_role = {"system": Role.system, "tool": Role.tool}.get(role, Role.user if role == "user" else Role.assistant)
                for k, (origin, text) in enumerate(parts):
                    sid = _sid(i, k, len(parts))
                    ctx.add(sid, step=0 if role == "system" else max(step, 1), role=seg_role,
                            kind=SegmentKind.message, text=text, origin=origin)
                    if role == "user":
                        user_texts[sid] = text
                continue
            if kind == "CondensationSummaryEvent" and isinstance(e.get("summary"), str):
                ctx.add(f"m{i}", step=max(step, 1), role=Role.user, kind=SegmentKind.message, text=e["summary"],
                        meta=True, origin=(*path, "summary"))
                continue
            if kind == "ActionEvent":
                resp_id = e.get("llm_response_id")
                if not (resp_id and resp_id == last_resp):
                    step += 1
                last_resp = resp_id
                st = max(step, 1)
                parts = _text_parts(e.get("thought"), (*path, "thought"))
                for k, (origin, text) in enumerate(parts):
                    if text:
                        ctx.add(_sid(i, k, len(parts)), step=st, role=Role.assistant, kind=SegmentKind.message,
                                text=text, origin=origin)
                tc = e.get("tool_call") if isinstance(e.get("tool_call"), dict) else {}
                action = e.get("action") if isinstance(e.get("action"), dict) else {}
                call_id = e.get("tool_call_id") or tc.get("id")
                name = e.get("tool_name") or tc.get("name") or action.get("kind")
                args = tc.get("arguments")
                if isinstance(args, str):
                    text, origin = args, (*path, "tool_call", "arguments")
                else:
                    rest = {k: v for k, v in action.items() if k != "kind" and v is not None}
                    text, origin = json.dumps(rest, ensure_ascii=False, sort_keys=True), ()
                cmd = _v1_command(action)
                ctx.add(f"m{i}.c0", step=st, role=Role.assistant, kind=SegmentKind.tool_call, text=text,
                        call_id=call_id, tool_name=name, command=cmd, origin=origin)
                ctx.calls.add_call(call_id, f"m{i}.c0")
                by_event[norm_id(e.get("id"))] = dict(seg=f"m{i}.c0", step=st, call_id=call_id, name=name, cmd=cmd)
                continue
            if kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
                info = by_event.get(norm_id(e.get("action_id"))) if norm_id(e.get("action_id")) else None
                call_id = info["call_id"] if info else e.get("tool_call_id")
                obs = e.get("observation") if isinstance(e.get("observation"), dict) else {}
                exit_code: int | None = None
                is_error: bool | None = None
                if kind == "ObservationEvent":
                    parts = []
                    for key in ("output", "content", "message"):
                        if key in obs:
                            parts += [(o, t) for o, t in _text_parts(obs[key], (*path, "observation", key)) if t]
                    err = obs.get("error")
                    if isinstance(err, str) and err and all(t != err for _, t in parts):
                        parts.append(((*path, "observation", "error"), err))
                    if not parts:
                        for key in ("output", "content", "message"):
                            if isinstance(obs.get(key), str):
                                parts = [((*path, "observation", key), obs[key])]
                                break
                    ec = obs.get("exit_code")
                    if not isinstance(ec, int) and isinstance(obs.get("metadata"), dict):
                        ec = obs["metadata"].get("exit_code")
                    exit_code = ec if isinstance(ec, int) and not isinstance(ec, bool) else None
                    if isinstance(err, bool):
                        is_error = err
                    elif isinstance(err, str):
                        is_error = bool(err)
                    if isinstance(obs.get("is_error"), bool):
                        is_error = obs["is_error"] or bool(is_error)
                    if exit_code is not None and exit_code != 0:
                        is_error = True
                    elif exit_code == 0 and is_error is None:
                        is_error = False
                elif kind == "AgentErrorEvent":
                    parts = _text_parts(e.get("error"), (*path, "error"))
                    is_error = True
                else:
                    parts = _text_parts(e.get("rejection_reason"), (*path, "rejection_reason"))
                    is_error = True
                parts = parts or [((), "")]
                st = info["step"] if info else max(step, 1)
                for k, (origin, text) in enumerate(parts):
                    sid = _sid(i, k, len(parts))
                    if info:
                        ctx.calls.pairs.append((info["seg"], sid))
                    else:
                        ctx.calls.match(call_id, sid)
                    ctx.add(sid, step=st, role=Role.tool, kind=SegmentKind.tool_result, text=text,
                            call_id=call_id if (info or ctx.calls.has(call_id)) else None,
                            tool_name=(info or {}).get("name") or e.get("tool_name"),
                            command=(info or {}).get("cmd"), is_error=is_error, exit_code=exit_code, origin=origin)
                continue
        self._instruction(data, base, ctx, user_texts)

    # ------------------------------------------------------------------ writing
    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        state = self.state_of(doc)
        data = self.copy_data(doc, edits)
        if edits is None or edits.is_empty():
            return data
        mirrors = state.mirrors
        clear = state.clear
        base = tuple(state.base)
        by_id = {s.id: s for s in doc.segments}
        for seg, _text in self.replace_texts(data, doc, edits):
            for cp in clear.get(seg.id, []):
                try:
                    parent = data
                    for key in cp[:-1]:
                        parent = parent[key]
                    parent[cp[-1]] = None
                except (KeyError, IndexError, TypeError):
                    pass

        def record_of(seg: Segment) -> int | None:
            if len(seg.origin) > len(base) and tuple(seg.origin[: len(base)]) == base and seg.id != "instruction":
                return int(seg.origin[len(base)])
            if seg.id.startswith("m"):
                return int(seg.id[1:].split(".")[0])
            return None

        dropped = plan_drops(doc.segments, edits.drop, record_of, state.pairs)
        # the eval record's instruction goes with the message it repeats (or when dropped itself)
        if base and isinstance(data.get("instruction"), str):
            for sid, paths in mirrors.items():
                seg = by_id.get(sid)
                if ("instruction",) in paths and seg is not None and record_of(seg) in dropped:
                    data["instruction"] = ""
            if "instruction" in edits.drop:
                data["instruction"] = ""
        events, _ = events_of(data)
        assert events is not None
        v1 = state.version == "v1"
        if v1:
            # observations follow their action out even when they hold no segment
            gone_ids = {norm_id(events[i].get("id")) for i in dropped} - {None}
            for i, e in enumerate(events):
                if norm_id(e.get("action_id")) in gone_ids:
                    dropped.add(i)
        else:
            gone_ids = {norm_id(events[i].get("id")) for i in dropped if "action" in events[i]} - {None}
            for i, e in enumerate(events):
                if norm_id(e.get("cause")) in gone_ids:
                    dropped.add(i)
            # actions with no segments of their own (recall) go with their observations
            with_segs = {record_of(s) for s in doc.segments}
            causes: dict[str, list[int]] = {}
            for i, e in enumerate(events):
                if norm_id(e.get("cause")):
                    causes.setdefault(norm_id(e["cause"]), []).append(i)
            for i, e in enumerate(events):
                obs = causes.get(norm_id(e.get("id")) or "", []) if "action" in e else []
                if i not in with_segs and obs and all(j in dropped for j in obs):
                    dropped.add(i)
        insert_at: int | None = min(dropped) if dropped else None
        if insert_at is None and edits.summary:
            insert_at = 0
            while insert_at < len(events) and (events[insert_at].get("action") == "system"
                                               or events[insert_at].get("kind") == "SystemPromptEvent"):
                insert_at += 1
        summary = self._summary_event(events, edits.summary, insert_at, dropped, v1) if edits.summary else None
        kept = self.splice(events, dropped, insert_at, (lambda _i: summary) if summary is not None else None)
        if base:
            data["history"] = kept
            return data
        return kept

    def _summary_event(self, events: list[Any], text: str, at: int | None, dropped: set[int], v1: bool) -> dict[str, Any]:
        if v1:
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
            ev: dict[str, Any] = {"kind": "MessageEvent", "id": f"compactor-summary-{digest}", "source": "user",
                                  "llm_message": {"role": "user", "content": [{"type": "text", "text": text}]}}
            if at is not None and at < len(events) and events[at].get("timestamp"):
                ev["timestamp"] = events[at]["timestamp"]
            return ev
        ev = self.make_message("user", text)
        ids = [e.get("id") for e in events if isinstance(e.get("id"), int)]
        if at is not None and at in dropped and isinstance(events[at].get("id"), int):
            ev["id"] = events[at]["id"]  # the dropped event's id is free
        else:
            ev["id"] = (max(ids) + 1) if ids else 0
        if at is not None and at < len(events) and events[at].get("timestamp"):
            ev["timestamp"] = events[at]["timestamp"]
        return ev

    def make_message(self, role: str, text: str) -> Any:
        return {"id": 0, "source": "user" if role == "user" else "agent", "message": text,
                "action": "message", "args": {"content": text, "image_urls": None, "wait_for_response": False}}


def _v1_command(action: dict[str, Any]) -> str | None:
    for key in ("command", "code", "url", "query"):
        v = action.get(key)
        if isinstance(v, str) and v:
            if key == "command" and action.get("path"):
                return f"{v} {action['path']}"
            return v
    if isinstance(action.get("path"), str):
        return action["path"]
    return None


class _Ctx:
    """Reading state shared by the V0 and V1 readers."""

    def __init__(self, base: tuple[str | int, ...]) -> None:
        self.base = base
        self.segments: list[Segment] = []
        self.mirrors: dict[str, list[tuple[str | int, ...]]] = {}
        self.clear: dict[str, list[tuple[str | int, ...]]] = {}
        self.calls = CallIndex()

    def add(self, sid: str, *, step: int, role: Role, kind: SegmentKind, text: str, first: bool = False,
            **kw: Any) -> None:
        seg = make_segment(id=sid, index=0, step=step, step_id=f"s{step}", role=role, kind=kind, text=text, **kw)
        if first:  # after the system prompt
            at = 0
            while at < len(self.segments) and self.segments[at].role == Role.system:
                at += 1
            self.segments.insert(at, seg)
            self.segments = [s.model_copy(update={"index": n}) for n, s in enumerate(self.segments)]
        else:
            self.segments.append(seg.model_copy(update={"index": len(self.segments)}))

    def mirror_if_equal(self, sid: str, event: dict[str, Any], path: tuple[str | int, ...], text: str) -> None:
        if text and event.get("message") == text:
            self.mirrors.setdefault(sid, []).append((*path, "message"))


# ---------------------------------------------------------------------------- resolver / eval output.jsonl


class OpenHandsOutputState(StyledState):
    """One OpenHands state per run, with that run's own segments (ids and origins relative to the
    run record), so each run is written back by the event-stream writer."""

    runs: list[Any] = Field(default_factory=list)  # (line index, run Document) per run


def _run_records(probe: Probe) -> list[Any] | None:
    recs = jsonl_records(probe)
    if recs is None or not all(isinstance(r, dict) and isinstance(r.get("history"), list) for r in recs):
        return None
    return recs


@register
class OpenHandsOutputFormat(StyledFormat):
    name = "openhands-output"
    State = OpenHandsOutputState
    title = "OpenHands resolver / evaluation output.jsonl (one run a line, each with its event 'history')"
    detection = ("JSONL (or one line) of run records each holding a 'history' list of OpenHands V0 events "
                 "('action'/'observation', with 'args' and ids, or flat as the resolver writes them)")
    container = "jsonl"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        recs = _run_records(probe)
        if recs is None:
            return False, "not JSONL of records with a 'history' list"
        for r in recs:
            h = r["history"]
            if h and not all(_is_v0(e) or _is_flat_v0(e) for e in h):
                return False, "a 'history' holds items that are not OpenHands V0 events"
        if not any(r["history"] for r in recs):
            return False, "every 'history' is empty"
        return True, "OpenHands output.jsonl"

    def read(self, probe: Probe) -> Document:
        recs = _run_records(probe)
        if recs is None:
            raise self.fail(probe, "expected JSONL records with a 'history' list")
        inner = get_format("openhands")
        segments: list[Segment] = []
        runs: list[Any] = []
        pairs: list[tuple[str, str]] = []
        mirrors: dict[str, list[tuple[str | int, ...]]] = {}
        step0 = 0
        for j, rec in enumerate(recs):
            sub = inner.read_value(probe, rec, where=f"line {record_line(probe, j)}: ")
            runs.append((j, sub))
            pre = f"r{j}."
            top = 0
            for s in sub.segments:
                st = s.step + step0 if s.step else 0
                top = max(top, st)
                segments.append(s.model_copy(update={"id": pre + s.id, "index": len(segments), "step": st,
                                                     "step_id": f"s{st}", "origin": (j, *s.origin) if s.origin else ()}))
            step0 = max(step0, top)
            pairs += [(pre + c, pre + r) for c, r in sub.state.pairs]
            for sid, paths in sub.state.mirrors.items():
                mirrors[pre + sid] = [(j, *mp) for mp in paths]
        data = probe.jsonl if probe.jsonl is not None else [probe.json_value]
        doc = self.new_document(data, segments, probe.raw.source)
        update_state(doc.state, runs=runs, pairs=pairs, mirrors=mirrors)
        self.note_style(doc, probe, lines=True)
        return doc

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        state = self.state_of(doc)
        data = self.copy_data(doc, edits)
        if edits is None or edits.is_empty():
            return self.finish(doc, data, False)
        inner = get_format("openhands")
        summary_run = None
        if edits.summary:
            first = min((s.index for s in doc.segments if s.id in edits.drop), default=None)
            summary_run = int(doc.segments[first].id[1:].split(".")[0]) if first is not None else 0
        for j, sub in state.runs:
            pre = f"r{j}."
            cut = len(pre)
            run_edits = Edits(replace={k[cut:]: v for k, v in edits.replace.items() if k.startswith(pre)},
                              drop={k[cut:] for k in edits.drop if k.startswith(pre)},
                              summary=edits.summary if j == summary_run else None, in_place=True)
            if run_edits.is_empty():
                continue
            view = Document(sub.format, data[j], sub.segments, sub.source, state=sub.state)
            data[j] = inner.write(view, run_edits)
        return self.finish(doc, data, True)

    def make_message(self, role: str, text: str) -> Any:
        return get_format("openhands").make_message(role, text)
