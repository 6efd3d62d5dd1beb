"""The structural fallback: a conversation found by its shape in JSON no layout claimed.

Tried after every named layout and before plain text. It looks (breadth first, a bounded number
of containers, at most :data:`MAX_DEPTH` levels down) for the list that holds the most messages:
objects with a string ``role`` and a ``content``/``parts``/``text``/``tool_calls``, either directly
or wrapped one level down as ``{..., "message": {role, content}}`` (event streams). A JSONL stream
is such a list itself. Two messages at least, and a quarter of the list's objects, must be messages
(hook dumps interleave as many system and progress records).

Messages are read as chat messages in the common shapes:
- ``content`` a string, or a list of parts: text parts (``text``/``input_text``/``output_text``),
  Anthropic ``tool_use``/``tool_result`` blocks, Responses ``function_call``/``function_call_output``,
  ``toolCall``/``tool-call`` parts (pi, the Vercel AI SDK) with ``arguments``/``args``;
- OpenAI ``tool_calls`` (``function.arguments``) and the legacy ``function_call``;
- ``role: tool``/``function``/``toolResult`` messages answer a call by ``tool_call_id``/``tool_use_id``/
  ``call_id``/``toolCallId`` (else by name); results pair by id, never by position.
Roles ``human``/``ai``/``model``/``bot`` are read as user/assistant. Everything else in the file is
kept as it is. The document's diagnostics say that the fallback read it and where the messages were.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from ..models import Diagnostic, Role, Segment, SegmentKind, Severity
from ..record import Field
from .registry import register
from .base import CallIndex, Document, Edits, Probe, command_from_arguments, make_segment, name_of
from .jsonstyle import StyledFormat, StyledState

MAX_DEPTH = 6
MAX_CONTAINERS = 20000
_BODY = ("content", "parts", "text", "tool_calls", "function_call")
_ROLE = {"user": Role.user, "human": Role.user, "assistant": Role.assistant, "ai": Role.assistant,
         "model": Role.assistant, "bot": Role.assistant, "system": Role.system, "developer": Role.system,
         "tool": Role.tool, "function": Role.tool, "tool_result": Role.tool, "toolresult": Role.tool,
         "ipython": Role.tool}
_TEXT_PARTS = ("text", "input_text", "output_text")
# call and result parts: Anthropic, OpenAI Responses, pi / Vercel AI SDK style
_CALL_PARTS = ("tool_use", "function_call", "toolCall", "tool-call", "tool_call")
_RESULT_PARTS = ("tool_result", "function_call_output", "toolResult", "tool-result")


def _message(item: Any) -> str | None:
    """'' when ``item`` is a message, the wrapping key when it holds one, else None."""
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("role"), str) and item["role"].lower() in _ROLE and any(k in item for k in _BODY):
        return ""
    inner = item.get("message")
    if isinstance(inner, dict) and _message(inner) == "":
        return "message"
    return None


def _score(items: list[Any]) -> int:
    dicts = [x for x in items if isinstance(x, dict)]
    n = sum(1 for x in dicts if _message(x) is not None)
    return n if n >= 2 and 4 * n >= len(dicts) else 0


def find_conversation(value: Any, jsonl: bool = False) -> tuple[tuple[str | int, ...], int] | None:
    """(path of the list holding the most messages, their number), or None."""
    best: tuple[int, int, tuple[str | int, ...]] | None = None  # (messages, -depth, path)
    queue: deque[tuple[Any, tuple[str | int, ...]]] = deque([(value, ())])
    seen = 0
    while queue and seen < MAX_CONTAINERS:
        cur, path = queue.popleft()
        seen += 1
        if isinstance(cur, list):
            if not jsonl or path:
                n = _score(cur)
                if n and (best is None or (n, -len(path)) > best[:2]):
                    best = (n, -len(path), path)
            elif jsonl:
                n = _score(cur)
                if n:
                    best = (n, 0, ())
            children = enumerate(cur)
        elif isinstance(cur, dict):
            children = cur.items()  # type: ignore[assignment]
        else:
            continue
        if len(path) >= MAX_DEPTH:
            continue
        for k, v in children:
            if isinstance(v, (dict, list)):
                queue.append((v, (*path, k)))
    return (best[2], best[0]) if best else None


class ConversationState(StyledState):
    """Where the messages were, and how each item wraps its message ('' or 'message')."""

    wrap: dict[int, str] = Field(default_factory=dict)


@register
class ConversationFormat(StyledFormat):
    name = "conversation"
    State = ConversationState
    title = "Structural fallback: a conversation found in any JSON / JSONL"
    detection = ("tried after every named layout: the list (anywhere in a JSON document, or a JSONL stream) "
                 "holding the most objects with a 'role' and 'content'/'parts'/'tool_calls' (also wrapped as "
                 "'message'), read as chat messages with OpenAI or Anthropic tool calls and results")
    container = "json"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        if probe.is_json:
            found = find_conversation(probe.json_value)
        elif probe.jsonl is not None:
            found = find_conversation(probe.jsonl, jsonl=True)
        else:
            return False, "not JSON or JSONL"
        if found is None:
            return False, "no list of messages (objects with a role and content) found"
        return True, f"{found[1]} messages at {'/'.join(map(str, found[0])) or 'the top level'}"

    def read(self, probe: Probe) -> Document:
        lines = not probe.is_json and probe.jsonl is not None
        value = probe.jsonl if lines else probe.json_value
        found = find_conversation(value, jsonl=lines)
        if found is None:
            raise self.fail(probe, "no list of messages (objects with a role and content) found")
        base, count = found
        items = value
        for key in base:
            items = items[key]
        segments: list[Segment] = []
        calls = CallIndex()
        wrap: dict[int, str] = {}
        step = 0
        prev = None

        def add(**kw: Any) -> str:
            segments.append(make_segment(index=len(segments), **kw))
            return kw["id"]

        for i, item in enumerate(items):
            w = _message(item)
            if w is None:
                continue
            wrap[i] = w
            msg = item[w] if w else item
            path = (*base, i, w) if w else (*base, i)
            role = _ROLE[msg["role"].lower()]
            if role == Role.user:
                step += 1
            elif role == Role.assistant and prev != Role.assistant:
                step += 1
            if role != Role.tool:
                prev = role
            st = 0 if role == Role.system else max(step, 1)
            self._read_message(i, msg, path, role, st, add, calls)
        doc = self.new_document(value, segments, probe.raw.source)
        doc.state.base = base
        doc.state.pairs = calls.pairs
        doc.state.wrap = wrap
        where = "/".join(map(str, base)) or ("the JSONL records" if lines else "the top level")
        doc.diagnostics.append(Diagnostic(
            code="structural-fallback", severity=Severity.warning,
            message=f"{probe.raw.source}: no known layout; read by the structural fallback as a conversation of "
                    f"{count} messages at {where} (pass --format NAME to force a layout)"))
        self.note_style(doc, probe, lines=lines)
        return doc

    def _read_message(self, i: int, msg: dict[str, Any], path: tuple[str | int, ...], role: Role, st: int,
                      add: Any, calls: CallIndex) -> None:
        def result(sid: str, text: str, origin: tuple[str | int, ...], call_id: Any, name: Any,
                   err: bool | None = None) -> None:
            key = call_id if call_id is not None else (f"name:{name}" if name else None)
            info = calls.match(key, sid) if key is not None else None
            s = (info or {}).get("step", st)
            add(id=sid, step=s, step_id=f"s{s}", role=Role.tool, kind=SegmentKind.tool_result, text=text,
                call_id=key if info is not None else None, tool_name=(info or {}).get("name") or name_of(name),
                command=(info or {}).get("cmd"), is_error=err, origin=origin)

        def call(sid: str, args: Any, origin: tuple[str | int, ...], call_id: Any, name: Any) -> None:
            if isinstance(args, str):
                try:
                    parsed = json.loads(args)
                except ValueError:
                    parsed = args
            else:
                parsed = args
            text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            cmd = command_from_arguments(parsed) if isinstance(parsed, (dict, str)) else None
            key = call_id if call_id is not None else (f"name:{name}" if name else None)
            add(id=sid, step=st, step_id=f"s{st}", role=Role.assistant, kind=SegmentKind.tool_call, text=text,
                call_id=key, tool_name=name_of(name), command=cmd, origin=origin,
                **({"arguments": parsed} if isinstance(parsed, dict) else {}))
            if key is not None:
                calls.add_call(key, sid, step=st, name=name_of(name), cmd=cmd)

        tool_id = msg.get("tool_call_id") or msg.get("tool_use_id") or msg.get("call_id") or msg.get("toolCallId")
        content = msg.get("content")
        if content is None and isinstance(msg.get("text"), str):
            content, ckey = msg["text"], "text"
        else:
            ckey = "content"
        if isinstance(content, str):
            if role == Role.tool:
                result(f"m{i}", content, (*path, ckey), tool_id, msg.get("name") or msg.get("toolName"),
                       True if msg.get("is_error") is True or msg.get("isError") is True else None)
            else:
                add(id=f"m{i}", step=st, step_id=f"s{st}", role=role, kind=SegmentKind.message, text=content,
                    origin=(*path, ckey))
        parts = content if isinstance(content, list) else (msg.get("parts") if isinstance(msg.get("parts"), list) else [])
        pkey = "content" if isinstance(content, list) else "parts"
        for j, part in enumerate(parts):
            ppath = (*path, pkey, j)
            if isinstance(part, str):
                add(id=f"m{i}.{j}", step=st, step_id=f"s{st}", role=role if role != Role.tool else Role.user,
                    kind=SegmentKind.message, text=part, origin=ppath)
                continue
            if not isinstance(part, dict):
                continue
            ptype = part.get("type")
            if ptype in _CALL_PARTS or (ptype is None and "functionCall" in part):
                fc = part.get("functionCall") if ptype is None else part
                if not isinstance(fc, dict):
                    continue
                akey = next((k for k in ("input", "arguments", "args") if k in fc), "input")
                origin = (*ppath, akey) if ptype is not None else (*ppath, "functionCall", akey)
                call(f"m{i}.c{j}", fc.get(akey), origin if akey in fc else (),
                     next((fc[k] for k in ("call_id", "toolCallId", "id") if fc.get(k)), None),
                     fc.get("name") or fc.get("toolName"))
            elif ptype in _RESULT_PARTS:
                ikey = next((k for k in ("content", "output", "result") if k in part), "content")
                inner = part.get(ikey)
                cid = next((part[k] for k in ("tool_use_id", "call_id", "toolCallId") if part.get(k)), None)
                flag = part.get("is_error", part.get("isError"))
                err = flag if isinstance(flag, bool) else None
                if isinstance(inner, str) or inner is None:
                    result(f"m{i}.r{j}", inner or "", (*ppath, ikey) if isinstance(inner, str) else (), cid, None, err)
                elif isinstance(inner, list):
                    texts = [(k, p["text"]) for k, p in enumerate(inner)
                             if isinstance(p, dict) and isinstance(p.get("text"), str)]
                    for n, (k, t) in enumerate(texts or [(None, "")]):
                        result(f"m{i}.r{j}" + (f".{n}" if n else ""), t,
                               (*ppath, ikey, k, "text") if k is not None else (), cid, None, err)
            elif isinstance(part.get("text"), str) and (ptype in _TEXT_PARTS or ptype is None):
                if role == Role.tool:
                    result(f"m{i}.{j}", part["text"], (*ppath, "text"), tool_id, msg.get("name") or msg.get("toolName"),
                           True if msg.get("isError") is True or msg.get("is_error") is True else None)
                elif not part.get("thought") or role == Role.assistant:
                    add(id=f"m{i}.{j}", step=st, step_id=f"s{st}", role=role, kind=SegmentKind.message,
                        text=part["text"], origin=(*ppath, "text"))
            elif ptype is None and isinstance(part.get("functionResponse"), dict):
                fr = part["functionResponse"]
                resp = fr.get("response")
                text = json.dumps(resp, ensure_ascii=False) if not isinstance(resp, str) else resp
                result(f"m{i}.r{j}", text, (*ppath, "functionResponse", "response"), fr.get("id"), fr.get("name"))
        for k, tc in enumerate(msg.get("tool_calls") or [] if isinstance(msg.get("tool_calls"), list) else []):
            if not isinstance(tc, dict):
                continue
            fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc
            akey = "arguments" if "arguments" in fn else "args"
            origin = (*path, "tool_calls", k, "function", akey) if fn is not tc else (*path, "tool_calls", k, akey)
            call(f"m{i}.t{k}", fn.get(akey), origin if akey in fn else (), tc.get("id"), fn.get("name"))
        fc = msg.get("function_call")
        if isinstance(fc, dict):
            call(f"m{i}.f", fc.get("arguments"), (*path, "function_call", "arguments") if "arguments" in fc else (),
                 None, fc.get("name"))

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        state = self.state_of(doc)
        data, dropped = self.start_write(doc, edits)
        if dropped is None:
            return data
        base = tuple(state.base)
        items = data
        for key in base:
            items = items[key]
        text = edits.summary
        insert_at = min(dropped) if dropped else None
        if insert_at is None and text:
            insert_at = next((i for i, w in sorted(state.wrap.items())
                              if (items[i][w] if w else items[i]).get("role") not in ("system", "developer")), 0)
        kept = self.splice(items, dropped, insert_at, (lambda i: self._summary(items, state.wrap, i, text)) if text else None)
        if not base:
            return self.finish(doc, kept, True)
        parent = data
        for key in base[:-1]:
            parent = parent[key]
        parent[base[-1]] = kept
        return self.finish(doc, data, True)

    def _summary(self, items: list[Any], wrap: dict[int, str], near: int, text: str) -> Any:
        """A user message shaped like its neighbours (wrapped the same way, blocks or a string)."""
        ref = min(wrap, key=lambda i: abs(i - near)) if wrap else None
        w = wrap.get(ref, "") if ref is not None else ""
        msg_ref = (items[ref][w] if w else items[ref]) if ref is not None else {}
        body: Any = [{"type": "text", "text": text}] if isinstance(msg_ref.get("content"), list) else text
        msg = {"role": "user", "content": body}
        if not w:
            return msg
        out = {"type": "user"} if "type" in items[ref] else {}
        out[w] = msg
        return out

    def make_message(self, role: str, text: str) -> Any:
        return {"role": role, "content": text}
