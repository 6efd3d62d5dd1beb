"""Gemini CLI ``--output-format stream-json`` transcripts.

One event per line, keyed by ``type``: ``init`` (session start; a file can hold several),
``message`` (``role`` user/assistant, ``content``; assistant text streams as ``delta: true``
chunks), ``tool_use {tool_name, tool_id, parameters}``, ``tool_result {tool_id, status,
output?, error?: {type, message}}``, ``error`` (a CLI warning/error) and ``result`` (stats).

- A run of consecutive assistant delta chunks is one segment (ids ``m<i>`` of the first
  chunk). Writing a replacement puts the new text in the first chunk and empties the others.
- ``tool_use`` is a ``tool_call`` whose text is the JSON of ``parameters``; ``tool_result`` is
  paired by ``tool_id``. ``status: "error"`` → ``is_error``; an ``Exit Code: N`` line in shell
  output → ``exit_code``. When ``error.message`` repeats ``output`` it is a mirror; otherwise
  it is a second result segment (``m<i>.e``). A ``tool_use`` with no result (run interrupted)
  stays a segment.
- ``init``/``result`` make no segments and are written back unchanged.
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
    jsonl_records,
    make_segment,
    name_of,
    plan_drops,
    record_line,
    update_state,
)
from .jsonstyle import StyledFormat, StyledState
from ..lazyre import lazy_regex

_TYPES = ("init", "message", "tool_use", "tool_result", "result", "error")
_EXIT = lazy_regex(r"(?m)^Exit Code: (-?\d+)\s*$")


class GeminiState(LayoutState):
    """Gemini CLI streams: segment id -> the stream chunks that hold its text."""

    chunks: dict[str, list[int]] = Field(default_factory=dict)


@register
class GeminiFormat(Format):
    name = "gemini-cli"
    State = GeminiState
    title = "Gemini CLI stream-json"
    detection = "JSONL of events with 'type' init/message/tool_use/tool_result/result (tool_use/tool_result linked by 'tool_id')"
    container = "jsonl"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        records = jsonl_records(probe)
        if records is None:
            return False, "not JSONL"
        if not all(isinstance(r, dict) and r.get("type") in _TYPES for r in records):
            return False, "not every record has a Gemini event 'type' (init/message/tool_use/tool_result/result)"
        if any("payload" in r or isinstance(r.get("message"), dict) for r in records):
            return False, "records carry 'payload'/'message' objects (another JSONL layout)"
        if not any(r.get("type") in ("init", "tool_use", "tool_result") or
                   (r.get("type") == "message" and "role" in r) for r in records):
            return False, "no init/message/tool events"
        return True, "Gemini CLI stream-json"

    def read(self, probe: Probe) -> Document:
        records = jsonl_records(probe)
        if records is None:
            raise self.fail(probe, "expected JSONL records")
        segments: list[Segment] = []
        calls = CallIndex()
        chunks: dict[str, list[int]] = {}
        mirrors: dict[str, list[tuple[str | int, ...]]] = {}
        step = 0
        prev_side = "user"
        run_sid: str | None = None  # segment id of the open run of assistant delta chunks
        run_texts: list[str] = []

        def flush() -> None:
            nonlocal run_sid, run_texts
            if run_sid is not None:
                idx = next(n for n, s in enumerate(segments) if s.id == run_sid)
                segments[idx] = segments[idx].model_copy(update={"text": "".join(run_texts)})
            run_sid, run_texts = None, []

        for i, rec in enumerate(records):
            line = f"line {record_line(probe, i)}"
            if not isinstance(rec, dict) or rec.get("type") not in _TYPES:
                raise self.fail(probe, f"{line}: not a Gemini stream-json event", line)
            rtype = rec["type"]
            if rtype == "message":
                role = rec.get("role")
                content = rec.get("content")
                if not isinstance(content, str):
                    raise self.fail(probe, f"{line}: message 'content' must be a string", line)
                if role == "assistant" and rec.get("delta"):
                    if run_sid is not None:
                        chunks[run_sid].append(i)
                        run_texts.append(content)
                        continue
                    if prev_side != "assistant":
                        step += 1
                    prev_side = "assistant"
                    run_sid = f"m{i}"
                    run_texts = [content]
                    chunks[run_sid] = []
                    segments.append(make_segment(id=run_sid, index=len(segments), step=step, step_id=f"s{step}",
                                            role=Role.assistant, kind=SegmentKind.message, text=content,
                                            origin=(i, "content")))
                    continue
                flush()
                if role == "assistant":
                    if prev_side != "assistant":
                        step += 1
                    prev_side = "assistant"
                    seg_role = Role.assistant
                else:
                    step += 1
                    prev_side = "user"
                    seg_role = Role.system if role == "system" else Role.user
                segments.append(make_segment(id=f"m{i}", index=len(segments), step=step, step_id=f"s{step}",
                                        role=seg_role, kind=SegmentKind.message, text=content, origin=(i, "content")))
                continue
            flush()
            if rtype == "tool_use":
                if prev_side != "assistant":
                    step += 1
                prev_side = "assistant"
                st = max(step, 1)
                params = rec.get("parameters")
                call_id = rec.get("tool_id")
                name = rec.get("tool_name")
                text = params if isinstance(params, str) else json.dumps(params, ensure_ascii=False, separators=(",", ":"))
                cmd = command_from_arguments(params) if isinstance(params, (dict, str)) else None
                segments.append(make_segment(id=f"m{i}", index=len(segments), step=st, step_id=f"s{st}",
                                        role=Role.assistant, kind=SegmentKind.tool_call, text=text,
                                        call_id=call_id, tool_name=name, command=cmd,
                                        origin=(i, "parameters") if "parameters" in rec else (),
                                        **({"arguments": params} if isinstance(params, dict) else {})))
                calls.add_call(call_id, f"m{i}", step=st, name=name, cmd=cmd)
            elif rtype == "tool_result":
                prev_side = "tool"
                call_id = rec.get("tool_id")
                status = rec.get("status")
                err = rec.get("error") if isinstance(rec.get("error"), dict) else {}
                out = rec.get("output")
                parts: list[tuple[str, tuple[str | int, ...], str]] = []
                if isinstance(out, str):
                    parts.append((f"m{i}", (i, "output"), out))
                emsg = err.get("message")
                if isinstance(emsg, str) and emsg:
                    if parts and emsg == parts[0][2]:
                        mirrors.setdefault(f"m{i}", []).append((i, "error", "message"))
                    elif parts:
                        parts.append((f"m{i}.e", (i, "error", "message"), emsg))
                    else:
                        parts.append((f"m{i}", (i, "error", "message"), emsg))
                if not parts:
                    parts.append((f"m{i}", (), ""))
                is_error = True if status == "error" else (False if status == "success" else None)
                for sid, origin, text in parts:
                    info = calls.match(call_id, sid) or {}
                    m = _EXIT.search(text[-4000:]) if isinstance(text, str) else None
                    code = int(m.group(1)) if m else None
                    err_flag = is_error
                    if code is not None and code != 0:
                        err_flag = True
                    st = info.get("step", max(step, 1))
                    segments.append(make_segment(id=sid, index=len(segments), step=st, step_id=f"s{st}",
                                            role=Role.tool, kind=SegmentKind.tool_result, text=text,
                                            call_id=call_id, tool_name=info.get("name"), command=info.get("cmd"),
                                            is_error=err_flag, exit_code=code, origin=origin))
            elif rtype == "error":
                msg = rec.get("message")
                if isinstance(msg, str):
                    st = max(step, 1)
                    segments.append(make_segment(id=f"m{i}", index=len(segments), step=st, step_id=f"s{st}",
                                            role=Role.tool, kind=SegmentKind.tool_result, text=msg,
                                            is_error=rec.get("severity") != "warning", origin=(i, "message")))
            elif rtype == "init":
                prev_side = "user"
        flush()
        doc = self.new_document(records, segments, probe.raw.source)
        update_state(doc.state, chunks=chunks, mirrors=mirrors, pairs=calls.pairs)
        return doc

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        state = self.state_of(doc)
        data = self.copy_data(doc, edits)
        if edits is None or edits.is_empty():
            return data
        chunks = state.chunks
        by_id = {s.id: s for s in doc.segments}
        for seg, _text in self.replace_texts(data, doc, edits):
            for j in chunks.get(seg.id, []):
                data[j]["content"] = ""

        def record_of(seg: Segment) -> int | None:
            return int(seg.id[1:].split(".")[0]) if seg.id.startswith("m") else None

        dropped = plan_drops(doc.segments, edits.drop, record_of, state.pairs)
        for sid, more in chunks.items():
            if record_of(by_id[sid]) in dropped:
                dropped.update(more)
        insert_at: int | None = min(dropped) if dropped else None
        if insert_at is None and edits.summary:
            insert_at = next((i for i, r in enumerate(data) if r.get("type") != "init"), len(data))
        text = edits.summary
        return self.splice(data, dropped, insert_at, (lambda i: self._summary(data, i, text)) if text else None)

    def _summary(self, data: list[Any], near: int, text: str) -> dict[str, Any]:
        rec = self.make_message("user", text)
        src = data[near] if 0 <= near < len(data) else None
        if isinstance(src, dict):
            for key in ("timestamp", "ts"):
                if key in src:
                    rec[key] = src[key]
        return rec

    def make_message(self, role: str, text: str) -> Any:
        return {"type": "message", "role": role, "content": text}


# ---------------------------------------------------------------------------- saved chats
#
# A saved Gemini CLI chat (``/chat save``, a checkpoint, a ``trajectory.json``) is the Gemini API's
# ``contents`` list itself: ``[{role: user|model, parts: [...]}]`` (or a request body
# ``{contents: [...], systemInstruction?}``). Parts: ``text`` (``thought: true`` marks the model's
# thinking summary), ``functionCall {id?, name, args}``, ``functionResponse {id?, name, response}``,
# ``inlineData``/``fileData`` (never text). A response's text is ``response.output`` (the CLI's
# tools), else ``response.error``, else the JSON of ``response``; the shell tool's
# ``Exit Code: N`` line gives the exit code, as in the stream. Calls and responses pair by ``id``,
# else by function name, oldest open call first. A user text that is the CLI's own
# ``<session_context>`` preamble is harness context (``meta``).

_ROLES_CONTENTS = ("user", "model", "function", "system")


def contents_of(value: Any) -> tuple[list[Any] | None, tuple[str | int, ...]]:
    if isinstance(value, list):
        return value, ()
    if isinstance(value, dict) and isinstance(value.get("contents"), list):
        return value["contents"], ("contents",)
    return None, ()


def _part_keys(msg: dict[str, Any]) -> set[str]:
    return {k for p in msg.get("parts") or [] if isinstance(p, dict) for k in p}


class GeminiContentsState(StyledState):
    """A saved Gemini chat: the file's JSON style (and text, for an unchanged write)."""


@register
class GeminiContentsFormat(StyledFormat):
    State = GeminiContentsState
    name = "gemini-contents"
    title = "Gemini API contents (Gemini CLI saved chat / trajectory.json / checkpoint)"
    detection = ("a JSON list (or an object with 'contents') of {role: user|model, parts: [...]} with text, "
                 "functionCall, functionResponse or thought parts")
    container = "json"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        if not probe.is_json:
            return False, "not a JSON document"
        items, _ = contents_of(probe.json_value)
        if not items:
            return False, "no list of contents"
        if not all(isinstance(m, dict) and m.get("role") in _ROLES_CONTENTS and isinstance(m.get("parts"), list)
                   for m in items):
            return False, "not every item is a {role, parts} Gemini content"
        if not any(m.get("role") == "model" or _part_keys(m) & {"functionCall", "functionResponse"} for m in items):
            return False, "no model turn and no function parts"
        return True, "Gemini contents"

    def read(self, probe: Probe) -> Document:
        data = probe.json_value
        items, base = contents_of(data)
        if items is None:
            raise self.fail(probe, "expected a list of Gemini contents")
        segments: list[Segment] = []
        calls = CallIndex()
        step = 0

        def add(**kw: Any) -> None:
            segments.append(make_segment(index=len(segments), **kw))

        if base and isinstance(data.get("systemInstruction"), dict):
            for k, part in enumerate(data["systemInstruction"].get("parts") or []):
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    add(id=f"system.{k}", step=0, step_id="s0", role=Role.system, kind=SegmentKind.message,
                        text=part["text"], origin=("systemInstruction", "parts", k, "text"))
        prev = None
        for i, msg in enumerate(items):
            where = f"{'contents' if base else 'item'}[{i}]"
            if not isinstance(msg, dict) or not isinstance(msg.get("parts"), list):
                raise self.fail(probe, f"{where} is not a {{role, parts}} content", where)
            role = msg.get("role")
            path = (*base, i, "parts")
            keys = _part_keys(msg)
            if role == "model":
                if prev != "model":
                    step += 1
            elif keys - {"functionResponse"}:
                step += 1
            prev = role
            st = max(step, 1)
            for k, part in enumerate(msg["parts"]):
                if not isinstance(part, dict):
                    continue
                ppath = (*path, k)
                if isinstance(part.get("text"), str):
                    text = part["text"]
                    if role == "model":
                        add(id=f"m{i}.{k}", step=st, step_id=f"s{st}", role=Role.assistant,
                            kind=SegmentKind.message, text=text, origin=(*ppath, "text"))
                    else:
                        add(id=f"m{i}.{k}", step=st, step_id=f"s{st}",
                            role=Role.system if role == "system" else Role.user, kind=SegmentKind.message,
                            text=text, meta=text.lstrip().startswith("<session_context>"), origin=(*ppath, "text"))
                elif isinstance(part.get("functionCall"), dict):
                    fc = part["functionCall"]
                    args = fc.get("args")
                    name = name_of(fc.get("name"))
                    key = fc.get("id") or f"name:{name}"
                    cmd = command_from_arguments(args) if isinstance(args, (dict, str)) else None
                    sid = f"m{i}.c{k}"
                    add(id=sid, step=st, step_id=f"s{st}", role=Role.assistant, kind=SegmentKind.tool_call,
                        text=args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
                        call_id=key, tool_name=name, command=cmd,
                        origin=(*ppath, "functionCall", "args") if "args" in fc else (),
                        **({"arguments": args} if isinstance(args, dict) else {}))
                    calls.add_call(key, sid, step=st, name=name, cmd=cmd)
                elif isinstance(part.get("functionResponse"), dict):
                    fr = part["functionResponse"]
                    name = name_of(fr.get("name"))
                    key = fr.get("id") or f"name:{name}"
                    sid = f"m{i}.r{k}"
                    info = calls.match(key, sid) or {}
                    resp = fr.get("response")
                    rpath = (*ppath, "functionResponse", "response")
                    err: bool | None = None
                    if isinstance(resp, dict) and isinstance(resp.get("output"), str):
                        text, origin = resp["output"], (*rpath, "output")
                    elif isinstance(resp, dict) and isinstance(resp.get("error"), str):
                        text, origin, err = resp["error"], (*rpath, "error"), True
                    elif isinstance(resp, str):
                        text, origin = resp, rpath
                    else:
                        text = json.dumps(resp, ensure_ascii=False)
                        origin = rpath if isinstance(resp, (dict, list)) else ()
                    m = _EXIT.search(text[-4000:])
                    code = int(m.group(1)) if m else None
                    if code is not None and code != 0:
                        err = True
                    rst = info.get("step", st)
                    add(id=sid, step=rst, step_id=f"s{rst}", role=Role.tool, kind=SegmentKind.tool_result, text=text,
                        call_id=key if info else None, tool_name=name or info.get("name"), command=info.get("cmd"),
                        is_error=err, exit_code=code, origin=origin)
        doc = self.new_document(data, segments, probe.raw.source)
        doc.state.base = base
        doc.state.pairs = calls.pairs
        self.note_style(doc, probe)
        return doc

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        state = self.state_of(doc)
        data, dropped = self.start_write(doc, edits)
        if dropped is None:
            return data
        items, base = contents_of(data)
        assert items is not None
        insert_at = min(dropped) if dropped else (0 if edits.summary else None)
        text = edits.summary
        kept = self.splice(items, dropped, insert_at, (lambda _i: self.make_message("user", text)) if text else None)
        if base:
            data["contents"] = kept
            return self.finish(doc, data, True)
        return self.finish(doc, kept, True)

    def make_message(self, role: str, text: str) -> Any:
        return {"role": "model" if role == "assistant" else "user", "parts": [{"text": text}]}
