"""Cline and Roo Code task histories: ``api_conversation_history.json`` and ``ui_messages.json``.

Both extensions keep, per task, the conversation sent to the model and the chat shown to the user.

``api_conversation_history.json`` is a JSON array of Anthropic-style messages ``{role, content}``
(``content`` a string or text/image blocks; Roo adds a ``ts``). The model calls tools by writing
XML inside its text, one element per tool with one child per parameter
(``<execute_command><command>npm test</command></execute_command>``, ``<read_file>``,
``<write_to_file>``, ``<replace_in_file>``/``<apply_diff>``, ``<attempt_completion>``...). The
extension answers in the next user message with a text block ``[execute_command for 'npm test']
Result:`` followed by the tool's output in the next text block(s) (or, in some versions, in the
same block after the header line); the user message ends with an ``<environment_details>`` block.

- Prose and tool calls in one assistant text block are separate segments over spans of the block
  (a ``message`` for the prose, a ``tool_call`` whose text is the XML element); the writer
  rebuilds the block from its spans, so a replaced span changes only that part of the text.
- A result header opens a ``tool_result`` that takes the text blocks after it (up to the next
  header or the environment details), paired with the call of that tool name in the previous
  assistant message (the oldest one not answered yet). ``The tool execution failed ...`` /
  ``<error>`` outputs are errors; Roo's ``Exit code: N`` gives the exit code. The compacted output
  is written back into the same block.
- ``<task>`` and ``<feedback>`` blocks are the user's; ``<environment_details>``, the
  ``[TASK RESUMPTION]`` notice and the ``[ERROR] You did not use a tool`` reminder are harness
  text (``meta``).

``ui_messages.json`` is a JSON array of ``ClineMessage {ts, type: ask|say, ask?, say?, text?,
images?, partial?}``. ``say task`` / ``user_feedback`` are the user's; ``say text`` / ``reasoning``
/ ``completion_result`` and ``ask followup`` the assistant's; ``ask``/``say command`` (the command
line), ``tool`` (a JSON description of a file tool) and ``use_mcp_server`` are calls;
``command_output``, ``mcp_server_response`` and ``browser_action_result`` are their results (paired
with the latest open call); ``say error``/``diff_error`` and ``ask api_req_failed``/
``mistake_limit_reached`` are error results. ``api_req_started`` (request accounting whose text is
JSON the UI parses), checkpoints and resume prompts are not text for the model and are kept as
they are. The summary is a ``say user_feedback`` message.

Both are written back in the file's own JSON style (:mod:`.jsonstyle`).
"""

from __future__ import annotations

import re
from typing import Any

from ..models import Role, Segment, SegmentKind
from ..record import Field
from .registry import register
from .base import CallIndex, Document, Edits, Probe, get_at, make_segment, set_at
from .jsonstyle import StyledFormat, StyledState
from ..lazyre import lazy_regex

# tool elements of Cline's and Roo Code's XML tool protocol
TOOLS = ("execute_command", "read_file", "write_to_file", "replace_in_file", "apply_diff", "insert_content",
         "search_and_replace", "search_files", "list_files", "list_code_definition_names", "browser_action",
         "use_mcp_tool", "access_mcp_resource", "ask_followup_question", "attempt_completion", "new_task",
         "plan_mode_respond", "act_mode_respond", "switch_mode", "fetch_instructions", "codebase_search",
         "update_todo_list", "load_mcp_documentation", "web_fetch", "condense", "summarize_task", "report_bug",
         "new_rule", "run_slash_command", "generate_image", "simple_read_file", "edit_file")
_CALL = lazy_regex(r"<(" + "|".join(TOOLS) + r")>(.*?)(?:</\1>|\Z)", re.S)
_HEADER = lazy_regex(r"\A\[([a-z_]+)(?: for (?:'(.*?)'|[^\]]*?))?\] Result:[ \t]*(?:\r?\n)?", re.S)
_EXIT = lazy_regex(r"Exit code: (-?\d+)")
_ERROR_STARTS = ("The tool execution failed", "<error>", "Error executing", "[ERROR]")
_META_STARTS = ("<environment_details>", "[TASK RESUMPTION]", "[ERROR] You did not use a tool")
_PARAM_FOR_COMMAND = ("command", "path", "regex", "url", "server_name", "query", "question")
# tools whose "result" is the user's answer or feedback: read as the user's message
_ASKS_USER = ("attempt_completion", "ask_followup_question", "plan_mode_respond")
_USER_REPLY = ("<feedback>", "<answer>", "<user_message>")


class ClineState(StyledState):
    """Cline/Roo: segments that cover a part of a text block (segment id -> (block path, start,
    end)); the writer rebuilds those blocks from their parts."""

    spans: dict[str, tuple[tuple[str | int, ...], int, int]] = Field(default_factory=dict)


def _blocks(content: Any, path: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], str]]:
    """(origin, text) of a message's text: the string, or each text block."""
    if isinstance(content, str):
        return [((*path, "content"), content)]
    out = []
    if isinstance(content, list):
        for j, b in enumerate(content):
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str):
                out.append(((*path, "content", j, "text"), b["text"]))
    return out


def _texts(msg: Any) -> list[str]:
    return [t for _, t in _blocks(msg.get("content"), ())] if isinstance(msg, dict) else []


def _call_id(msg: dict[str, Any], text: str, seen: dict[str, int]) -> str:
    """An id for a call the layout gives none: the message's ``ts`` (Roo) when it has one, else a
    digest of the call's text and how many identical calls came before it. Not the message's
    position, which changes when earlier messages are dropped."""
    import hashlib

    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
    ts = msg.get("ts")
    key = f"ts{ts}-{digest}" if isinstance(ts, int) and not isinstance(ts, bool) else f"call-{digest}"
    n = seen.get(key, 0)
    seen[key] = n + 1
    return key + (f"-{n}" if n else "")


def _command_of(name: str, body: str) -> str | None:
    """The parameter that names what a call acts on (nested ones too: Roo's ``<args><file><path>``)."""
    for key in _PARAM_FOR_COMMAND:
        m = re.search(f"<{key}>(.*?)</{key}>", body, re.S)
        if m and m.group(1).strip():
            return m.group(1).strip()
    return None


@register
class ClineApiFormat(StyledFormat):
    name = "cline"
    State = ClineState
    title = "Cline / Roo Code api_conversation_history.json (XML tool calls in assistant text)"
    detection = ("a JSON array of user/assistant messages whose assistant text holds Cline/Roo XML tool elements "
                 "(<execute_command>, <read_file>, ...) or whose user text holds '[tool for '...'] Result:' "
                 "headers or <environment_details>")
    container = "json"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        v = probe.json_value
        if not probe.is_json or not isinstance(v, list) or not v:
            return False, "not a JSON array of messages"
        if not all(isinstance(m, dict) and m.get("role") in ("user", "assistant") and
                   isinstance(m.get("content"), (str, list)) for m in v):
            return False, "not every item is a user/assistant message"
        calls = results = env = False
        for m in v:
            for t in _texts(m):
                if m["role"] == "assistant":
                    calls = calls or _CALL.search(t) is not None
                else:
                    results = results or _HEADER.match(t) is not None
                    env = env or t.lstrip().startswith(("<environment_details>", "<task>"))
            if (calls or env) and results or (calls and env):
                break
        if not ((calls and (results or env)) or (results and env)):
            return False, "no Cline/Roo XML tool calls with '[tool] Result:' replies or <environment_details>"
        return True, "Cline/Roo conversation history"

    def read(self, probe: Probe) -> Document:
        msgs = probe.json_value
        if not isinstance(msgs, list):
            raise self.fail(probe, "expected a JSON array of messages")
        segments: list[Segment] = []
        spans: dict[str, tuple[tuple[str | int, ...], int, int]] = {}
        calls = CallIndex()
        step = 0
        prev_calls: list[tuple[str, str, str | None, int, str]] = []  # (name, seg id, command, step, call id)
        seen_calls: dict[str, int] = {}

        def add(**kw: Any) -> None:
            segments.append(make_segment(index=len(segments), **kw))

        for i, msg in enumerate(msgs):
            where = f"item[{i}]"
            if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
                raise self.fail(probe, f"{where} is not a user/assistant message", where)
            blocks = _blocks(msg.get("content"), (i,))
            if msg["role"] == "assistant":
                step += 1
                prev_calls = []
                for j, (origin, text) in enumerate(blocks):
                    pos = 0
                    pieces: list[tuple[int, int, re.Match[str] | None]] = []
                    for m in _CALL.finditer(text):
                        if m.start() > pos:
                            pieces.append((pos, m.start(), None))
                        pieces.append((m.start(), m.end(), m))
                        pos = m.end()
                    if pos < len(text) or not pieces:
                        pieces.append((pos, len(text), None))
                    whole = len(pieces) == 1
                    for k, (a, b, m) in enumerate(pieces):
                        part = text[a:b]
                        if m is None and not part.strip() and not whole:
                            continue
                        sid = f"m{i}.{j}" if whole else f"m{i}.{j}.{k}"
                        if m is None:
                            add(id=sid, step=step, step_id=f"s{step}", role=Role.assistant, kind=SegmentKind.message,
                                text=part, origin=origin if whole else ())
                        else:
                            name = m.group(1)
                            cmd = _command_of(name, m.group(2))
                            call_id = _call_id(msg, part, seen_calls)
                            add(id=sid, step=step, step_id=f"s{step}", role=Role.assistant,
                                kind=SegmentKind.tool_call, text=part, call_id=call_id, tool_name=name, command=cmd,
                                origin=origin if whole else ())
                            calls.add_call(call_id, sid)
                            prev_calls.append((name, sid, cmd, step, call_id))
                        if not whole:
                            spans[sid] = (origin, a, b)
                continue
            # a user message: the task, feedback, tool results, environment details
            open_result: dict[str, Any] | None = None
            for j, (origin, text) in enumerate(blocks):
                head = _HEADER.match(text)
                stripped = text.lstrip()
                if head is not None:
                    name = head.group(1)
                    match = next((c for c in prev_calls if c[0] == name), None) or (prev_calls[0] if prev_calls else None)
                    if match is not None:
                        prev_calls.remove(match)
                    open_result = dict(name=name, call=match, n=0)
                    rest = text[head.end():]
                    if not rest.strip():
                        continue  # the output follows in the next block(s)
                    if name in _ASKS_USER or any(tag in rest for tag in _USER_REPLY):
                        step += 1
                        sid = f"m{i}.{j}"
                        add(id=sid, step=step, step_id=f"s{step}", role=Role.user, kind=SegmentKind.message,
                            text=rest, origin=())
                        spans[sid] = (origin, head.end(), len(text))
                        open_result = None
                        continue
                    sid = f"m{i}.{j}"
                    self._result(add, sid, rest, open_result, calls, step, origin=())
                    spans[sid] = (origin, head.end(), len(text))
                    continue
                user_reply = open_result is not None and (open_result["name"] in _ASKS_USER or
                                                          any(tag in text for tag in _USER_REPLY))
                if open_result is not None and not user_reply and not stripped.startswith(_META_STARTS):
                    self._result(add, f"m{i}.{j}", text, open_result, calls, step, origin=origin)
                    continue
                open_result = None
                meta = stripped.startswith(_META_STARTS)
                if not meta:
                    step += 1
                add(id=f"m{i}.{j}", step=max(step, 1), step_id=f"s{max(step, 1)}", role=Role.user,
                    kind=SegmentKind.message, text=text, meta=meta, origin=origin)
        doc = self.new_document(msgs, segments, probe.raw.source)
        doc.state.pairs = calls.pairs
        doc.state.spans = spans
        self.note_style(doc, probe)
        return doc

    @staticmethod
    def _result(add: Any, sid: str, text: str, res: dict[str, Any], calls: CallIndex, step: int,
                origin: tuple[str | int, ...]) -> None:
        call = res["call"]
        first = res["n"] == 0
        res["n"] += 1
        call_id = None
        if call is not None:
            calls.match(call[4], sid)
            call_id = call[4]
        err = True if first and text.lstrip().startswith(_ERROR_STARTS) else None
        m = _EXIT.search(text[:600]) if first else None
        code = int(m.group(1)) if m else None
        if code is not None:
            err = code != 0 or bool(err)
        st = call[3] if call is not None else max(step, 1)
        add(id=sid, step=st, step_id=f"s{st}", role=Role.tool, kind=SegmentKind.tool_result, text=text,
            call_id=call_id, tool_name=res["name"], command=call[2] if call is not None else None,
            is_error=err, exit_code=code, origin=origin)

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        state = self.state_of(doc)
        data, dropped = self.start_write(doc, edits)
        if dropped is None:
            return data
        # blocks split into spans: rebuilt from the original text, the replaced spans swapped in
        by_block: dict[tuple[str | int, ...], list[tuple[int, int, str]]] = {}
        for sid, (origin, a, b) in state.spans.items():
            if sid in edits.replace:
                by_block.setdefault(tuple(origin), []).append((a, b, edits.replace[sid]))
        for origin, parts in by_block.items():
            text = get_at(doc.data, origin)
            for a, b, new in sorted(parts, reverse=True):
                text = text[:a] + new + text[b:]
            set_at(data, origin, text)
        insert_at = min(dropped) if dropped else (0 if edits.summary else None)
        text = edits.summary
        kept = self.splice(data, dropped, insert_at, (lambda _i: self.make_message("user", text)) if text else None)
        return self.finish(doc, kept, True)

    def make_message(self, role: str, text: str) -> Any:
        return {"role": role, "content": [{"type": "text", "text": text}]}


# ---------------------------------------------------------------------------- ui_messages.json

_USER_SAYS = ("task", "user_feedback")
_ASSISTANT_SAYS = ("text", "reasoning", "completion_result")
_CALL_KINDS = ("command", "tool", "use_mcp_server", "browser_action", "browser_action_launch")
_RESULT_SAYS = ("command_output", "mcp_server_response", "browser_action_result")
_ERROR_KINDS = ("error", "diff_error", "clineignore_error", "rooignore_error", "api_req_failed",
                "mistake_limit_reached", "command_permission_denied")


def _is_ui(m: Any) -> bool:
    return isinstance(m, dict) and m.get("type") in ("ask", "say") and "ts" in m


class ClineUiState(StyledState):
    """Cline/Roo ui_messages.json: the file's JSON style (and text, for an unchanged write)."""


@register
class ClineUiFormat(StyledFormat):
    State = ClineUiState
    name = "cline-ui"
    title = "Cline / Roo Code ui_messages.json (ClineMessage ask/say list)"
    detection = "a JSON array of ClineMessage objects {ts, type: ask|say, ask|say kind, text}"
    container = "json"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        v = probe.json_value
        if not probe.is_json or not isinstance(v, list) or not v:
            return False, "not a JSON array"
        if not all(_is_ui(m) for m in v):
            return False, "not every item is a ClineMessage {ts, type: ask|say}"
        return True, "Cline/Roo UI messages"

    def read(self, probe: Probe) -> Document:
        items = probe.json_value
        segments: list[Segment] = []
        calls = CallIndex()
        step = 0
        last_call: tuple[str, str | None, str | None, int] | None = None

        def add(**kw: Any) -> None:
            segments.append(make_segment(index=len(segments), **kw))

        prev_side = None
        for i, m in enumerate(items):
            if not _is_ui(m):
                raise self.fail(probe, f"item[{i}] is not a ClineMessage", f"item[{i}]")
            kind = m.get(m["type"])
            text = m.get("text")
            if not isinstance(text, str) or not text:
                continue
            origin = (i, "text")
            sid = f"m{i}"
            if m["type"] == "say" and kind in _USER_SAYS:
                step += 1
                prev_side = "user"
                add(id=sid, step=step, step_id=f"s{step}", role=Role.user, kind=SegmentKind.message, text=text,
                    origin=origin)
            elif (m["type"] == "say" and kind in _ASSISTANT_SAYS) or (m["type"] == "ask" and kind == "followup"):
                if prev_side != "assistant":
                    step += 1
                prev_side = "assistant"
                add(id=sid, step=step, step_id=f"s{step}", role=Role.assistant, kind=SegmentKind.message,
                    text=text, origin=origin)
            elif kind in _CALL_KINDS:
                if prev_side != "assistant":
                    step += 1
                prev_side = "assistant"
                st = max(step, 1)
                cmd = text if kind == "command" else _json_field(text, ("path", "command", "serverName", "url"))
                call_id = f"ts{m['ts']}" if isinstance(m.get("ts"), int) else sid  # stable when items are dropped
                add(id=sid, step=st, step_id=f"s{st}", role=Role.assistant, kind=SegmentKind.tool_call, text=text,
                    call_id=call_id, tool_name=kind if kind != "tool" else (_json_field(text, ("tool",)) or "tool"),
                    command=cmd, origin=origin)
                calls.add_call(call_id, sid)
                last_call = (call_id, kind, cmd, st)
            elif kind in _RESULT_SAYS or kind in _ERROR_KINDS or (m["type"] == "ask" and kind == "command_output"):
                prev_side = "tool"
                is_err = True if kind in _ERROR_KINDS else None
                call = last_call if kind not in _ERROR_KINDS or kind in ("command_permission_denied",) else None
                if call is not None:
                    calls.match(call[0], sid)
                st = call[3] if call is not None else max(step, 1)
                m2 = _EXIT.search(text[-400:])
                code = int(m2.group(1)) if m2 else None
                add(id=sid, step=st, step_id=f"s{st}", role=Role.tool, kind=SegmentKind.tool_result, text=text,
                    call_id=call[0] if call is not None else None, tool_name=call[1] if call is not None else kind,
                    command=call[2] if call is not None else None, is_error=is_err if code is None else code != 0,
                    exit_code=code, origin=origin)
        doc = self.new_document(items, segments, probe.raw.source)
        doc.state.pairs = calls.pairs
        self.note_style(doc, probe)
        return doc

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        state = self.state_of(doc)
        data, dropped = self.start_write(doc, edits)
        if dropped is None:
            return data
        insert_at = min(dropped) if dropped else (0 if edits.summary else None)
        text = edits.summary

        def summary(i: int) -> dict[str, Any]:
            msg = self.make_message("user", text or "")
            if 0 <= i < len(data) and isinstance(data[i], dict) and "ts" in data[i]:
                msg["ts"] = data[i]["ts"]
            return msg

        return self.finish(doc, self.splice(data, dropped, insert_at, summary if text else None), True)

    def make_message(self, role: str, text: str) -> Any:
        if role == "assistant":
            return {"ts": 0, "type": "say", "say": "text", "text": text}
        return {"ts": 0, "type": "say", "say": "user_feedback", "text": text}


def _json_field(text: str, keys: tuple[str, ...]) -> str | None:
    if not text.startswith("{"):
        return None
    import json

    try:
        v = json.loads(text)
    except ValueError:
        return None
    if isinstance(v, dict):
        for k in keys:
            if isinstance(v.get(k), str) and v[k]:
                return v[k]
    return None
