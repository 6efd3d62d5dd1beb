"""Anthropic Messages API conversations.

Accepted containers: a request body ``{"system": ..., "messages": [...]}`` (``system`` a string
or a list of text blocks) or a bare list of messages whose content uses Anthropic blocks.
Content is a string or a list of blocks: ``text`` (a message segment), ``tool_use {id, name,
input}`` (a ``tool_call`` whose text is the JSON of ``input``; a replacement is written back
only when it is a JSON object), ``tool_result {tool_use_id, content, is_error}`` (one
``tool_result`` per text part; ``content`` is a string or a list of text/image parts).
``thinking`` / ``redacted_thinking`` blocks are signed by the API and never rewritten, so they
are not segments. Calls and results are paired by ``tool_use.id`` = ``tool_use_id``.
"""

from __future__ import annotations

import json
from typing import Any


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
    plan_drops,
)
from ..lazyre import lazy_regex

_EXIT = lazy_regex(r"\A\s*(?:Error: )?Exit code:? (-?\d+)")
_BLOCKS = ("text", "tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document",
           "server_tool_use", "web_search_tool_result", "search_result", "container_upload")


def messages_of(value: Any) -> tuple[list[Any] | None, tuple[str | int, ...]]:
    if isinstance(value, list):
        return value, ()
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        return value["messages"], ("messages",)
    return None, ()


def text_parts(content: Any, path: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], str]]:
    """The texts of content that is a string or a list of blocks (its ``text`` blocks; images and
    the rest hold none), each with its origin: ``path`` is where the content sits."""
    if isinstance(content, str):
        return [(path, content)]
    parts: list[tuple[tuple[str | int, ...], str]] = []
    if isinstance(content, list):
        for k, block in enumerate(content):
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                parts.append(((*path, k, "text"), block["text"]))
    return parts


def exit_code_of(text: str) -> int | None:
    m = _EXIT.match(text[:200])
    return int(m.group(1)) if m else None


class BlockReader:
    """Turns Anthropic content (a string or a list of blocks) into segments; shared with Claude Code."""

    def __init__(self, compact_json: bool = False) -> None:
        # tool inputs are objects: their text is their JSON, written the way the container
        # writes it (compact in JSONL) so the text also appears verbatim in the output
        self.separators = (",", ":") if compact_json else None
        self.segments: list[Segment] = []
        self.calls = CallIndex()
        self.call_info: dict[str, dict[str, Any]] = {}

    def add(self, **kw: Any) -> Segment:
        seg = make_segment(index=len(self.segments), **kw)
        self.segments.append(seg)
        return seg

    def content(self, i: int, role: str, content: Any, path: tuple[str | int, ...], step: int,
                meta: bool = False) -> list[Segment]:
        """Segments of one message's content. Ids: m<i> (string), m<i>.<j> (text block j),
        m<i>.c<j> (tool_use j), m<i>.r<j> / m<i>.r<j>.<k> (tool_result j, text part k)."""
        out: list[Segment] = []
        seg_role = Role.assistant if role == "assistant" else Role.user
        if isinstance(content, str):
            out.append(self.add(id=f"m{i}", step=step, step_id=f"s{step}", role=seg_role,
                                kind=SegmentKind.message, text=content, meta=meta, origin=(*path, "content")))
            return out
        if not isinstance(content, list):
            return out
        for j, block in enumerate(content):
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            bpath = (*path, "content", j)
            if btype == "text" and isinstance(block.get("text"), str):
                out.append(self.add(id=f"m{i}.{j}", step=step, step_id=f"s{step}", role=seg_role,
                                    kind=SegmentKind.message, text=block["text"], meta=meta, origin=(*bpath, "text")))
            elif btype in ("tool_use", "server_tool_use"):
                inp = block.get("input")
                call_id = block.get("id")
                name = block.get("name")
                text = inp if isinstance(inp, str) else json.dumps(inp, ensure_ascii=False, separators=self.separators)
                cmd = command_from_arguments(inp) if isinstance(inp, (dict, str)) else None
                sid = f"m{i}.c{j}"
                out.append(self.add(id=sid, step=step, step_id=f"s{step}", role=Role.assistant,
                                    kind=SegmentKind.tool_call, text=text, call_id=call_id, tool_name=name,
                                    command=cmd, origin=(*bpath, "input"),
                                    **({"arguments": inp} if isinstance(inp, dict) else {})))
                self.calls.add_call(call_id, sid, step=step, name=name, cmd=cmd)
            elif btype == "tool_result":
                call_id = block.get("tool_use_id")
                flag = block.get("is_error") if isinstance(block.get("is_error"), bool) else None
                inner = block.get("content")
                parts = text_parts(inner, (*bpath, "content"))
                if not parts:
                    parts.append(((*bpath, "content") if inner is None or isinstance(inner, str) else (), ""))
                for k, (origin, text) in enumerate(parts):
                    sid = f"m{i}.r{j}" if len(parts) == 1 else f"m{i}.r{j}.{k}"
                    info = self.calls.match(call_id, sid) or {}
                    code = exit_code_of(text) if k == 0 else None
                    err = flag
                    if err is None and code is not None:
                        err = code != 0
                    st = info.get("step", step)
                    out.append(self.add(id=sid, step=st, step_id=f"s{st}", role=Role.tool,
                                        kind=SegmentKind.tool_result, text=text,
                                        call_id=call_id, tool_name=info.get("name"), command=info.get("cmd"),
                                        is_error=err, exit_code=code, meta=meta, origin=origin))
        return out


@register
class AnthropicFormat(Format):
    name = "anthropic"
    title = "Anthropic Messages API (system + messages with tool_use/tool_result blocks)"
    detection = ("an object with 'messages' (and usually 'system') or a JSON list of {role, content} messages "
                 "using Anthropic content blocks")
    container = "json"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        if not probe.is_json:
            return False, "not a JSON document"
        msgs, base = messages_of(probe.json_value)
        if msgs is None:
            return False, "no list of messages"
        if not msgs:
            return False, "empty message list"
        if not all(isinstance(m, dict) and m.get("role") in ("user", "assistant") for m in msgs):
            return False, "not every item is a user/assistant message"
        for m in msgs:
            c = m.get("content")
            if isinstance(c, list) and not all(isinstance(b, dict) and b.get("type") in _BLOCKS for b in c):
                return False, "content blocks are not Anthropic block types"
        has_blocks = any(isinstance(m.get("content"), list) and m["content"] for m in msgs)
        has_system = base and isinstance(probe.json_value.get("system"), (str, list))
        if not (has_blocks or has_system):
            return False, "no Anthropic content blocks and no top-level 'system'"
        return True, "Anthropic messages"

    def read(self, probe: Probe) -> Document:
        data = probe.json_value
        msgs, base = messages_of(data)
        if msgs is None:
            raise self.fail(probe, "expected a list of messages or an object with 'messages'")
        reader = BlockReader()
        if base:
            system = data.get("system")
            if isinstance(system, str):
                reader.add(id="system", step=0, step_id="s0", role=Role.system, kind=SegmentKind.message,
                           text=system, origin=("system",))
            elif isinstance(system, list):
                for k, block in enumerate(system):
                    if isinstance(block, dict) and isinstance(block.get("text"), str):
                        reader.add(id=f"system.{k}", step=0, step_id="s0", role=Role.system,
                                   kind=SegmentKind.message, text=block["text"], origin=("system", k, "text"))
            elif system is not None:
                raise self.fail(probe, "'system' must be a string or a list of text blocks", "system")
        step = 0
        for i, msg in enumerate(msgs):
            where = f"messages[{i}]"
            if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
                raise self.fail(probe, f"{where} is not a user/assistant message", where)
            content = msg.get("content")
            if not isinstance(content, (str, list)):
                raise self.fail(probe, f"{where}.content must be a string or a list of blocks", where)
            only_results = isinstance(content, list) and content and all(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
            if not only_results:
                step += 1
            reader.content(i, msg["role"], content, (*base, i), max(step, 1))
        doc = self.new_document(data, reader.segments, probe.raw.source)
        doc.state.base = base
        doc.state.pairs = reader.calls.pairs
        return doc

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        data = self.copy_data(doc, edits)
        if edits is None or edits.is_empty():
            return data
        self.replace_texts(data, doc, edits)
        base = doc.state.base

        def record_of(seg: Segment) -> int | None:
            if seg.id.startswith("m"):
                return int(seg.id[1:].split(".")[0])
            return None

        dropped = plan_drops(doc.segments, edits.drop, record_of, doc.state.pairs)
        msgs, _ = messages_of(data)
        assert msgs is not None
        insert_at = min(dropped) if dropped else (0 if edits.summary else None)
        text = edits.summary
        kept = self.splice(msgs, dropped, insert_at, (lambda _i: self.make_message("user", text)) if text else None)
        if base:
            data["messages"] = kept
            return data
        return kept

    def make_message(self, role: str, text: str) -> Any:
        return {"role": role, "content": [{"type": "text", "text": text}]}

