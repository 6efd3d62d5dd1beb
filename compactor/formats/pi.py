"""pi coding agent sessions (``~/.pi/agent/sessions/--<cwd>--/<timestamp>_<uuid>.jsonl``).

JSONL (records run together on one line, as some real sessions have, are read too and written
back sharing their line). The first record is the ``session`` header (``version``, ``id``,
``cwd``, ``timestamp``; older versions also ``provider``/``modelId``/``thinkingLevel``; a fork
says where it came from in ``branchedFrom`` / ``parentSession``). Every other record is an entry
(from version 2 on, linked into a tree by ``id``/``parentId``; version 1 files are a plain
sequence without ids):

- ``message``: ``message.role`` is
  - ``user`` (``content`` a string or ``text``/``image`` blocks): the user's words;
  - ``assistant`` (``text``, ``thinking``, ``toolCall {id, name, arguments}`` blocks; ``stopReason``
    ``stop``/``toolUse``/``length``/``error``/``aborted``, with ``errorMessage``): each record is
    one API response, one step. ``thinking`` blocks (signed by some providers) are never
    rewritten, so they are not segments; a ``toolCall``'s text is the JSON of its ``arguments``;
  - ``toolResult`` (``toolCallId``, ``toolName``, ``content`` text/image blocks, ``isError``,
    ``details`` for the UI only): paired with its call by id; a bash output ending in
    ``Command exited with code N`` gives the exit code;
  - ``bashExecution`` (a command the user ran with ``!``: ``command``, ``output``, ``exitCode``):
    a call and its output;
  - ``custom`` / ``branchSummary`` / ``compactionSummary``: text an extension or pi put in
    the context: meta.
- ``compaction`` (pi's own compaction: ``summary``, ``firstKeptEntryId``, ``tokensBefore``) and
  ``branch_summary`` (``summary`` of an abandoned branch): the summary is a meta segment; the
  entries before the compaction stay in the file and are read like the rest.
- ``custom_message`` (an extension's message in the context: ``content``): meta.
- ``model_change``, ``thinking_level_change``, ``label``, ``session_info``, ``custom``: no text
  for a model; no segments, written back unchanged.

The tree: segments of entries that are not on the path from the last entry to the root (an
abandoned branch) are listed in ``doc.state.off_path``. Writing with drops links each kept
entry to its nearest kept ancestor, so the tree stays whole; the summary is a ``user`` message
entry in the place of the first dropped one.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..lazyre import lazy_regex
from ..models import Role, Segment, SegmentKind
from ..record import Field
from .anthropic import BlockReader, text_parts
from .base import (Document, Edits, Format, LayoutState, Probe, command_from_arguments, jsonl_records,
                   object_records, plan_drops, record_line, update_state)
from .registry import register

__all__ = ["PiSessionFormat"]

_ENTRY_TYPES = ("message", "model_change", "thinking_level_change", "compaction", "branch_summary", "custom",
                "custom_message", "label", "session_info")
_ROLES = ("user", "assistant", "toolResult", "bashExecution", "custom", "branchSummary", "compactionSummary",
          "hookMessage")
_EXIT = lazy_regex(r"\n(?:Command )?exited with code (-?\d+)\s*\Z")


class PiState(LayoutState):
    """pi sessions: the segments of entries off the active branch; pi's own compactions
    (record index, firstKeptEntryId)."""

    off_path: list[str] = Field(default_factory=list)
    compactions: list[tuple[int, str | None]] = Field(default_factory=list)


@register
class PiSessionFormat(Format):
    name = "pi-session"
    State = PiState
    title = "pi coding agent session JSONL"
    detection = ("JSONL opening with a 'session' header (id, cwd, version) followed by 'message' entries whose "
                 "message.role is user/assistant/toolResult (toolCall blocks), model_change, compaction ... entries")
    container = "jsonl"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        records = jsonl_records(probe)
        why = object_records(records)
        if why is not None or records is None:
            return False, why or "not JSONL"
        head = records[0]
        header = head.get("type") == "session" and isinstance(head.get("id"), str) and ("cwd" in head or "version" in head)
        msgs = [r for r in records if r.get("type") == "message"]
        if not msgs or not all(isinstance(r.get("message"), dict) and r["message"].get("role") in _ROLES for r in msgs):
            return False, "no 'message' entries with a pi message role (user/assistant/toolResult ...)"
        if not all(r.get("type") in _ENTRY_TYPES for r in records[1 if header else 0:]):
            return False, "records other than pi session entries"
        if not header and not any(r["message"].get("role") == "toolResult" for r in msgs):
            return False, "no 'session' header and no toolResult messages"
        return True, "pi session"

    def read(self, probe: Probe) -> Document:
        records = jsonl_records(probe)
        if records is None:
            raise self.fail(probe, "expected JSONL records")
        reader = BlockReader(compact_json=True)
        add = reader.add
        step = 0
        compactions: list[tuple[int, str | None]] = []
        seg_of_entry: dict[str, list[str]] = {}
        for i, rec in enumerate(records):
            line = f"line {record_line(probe, i)}"
            if not isinstance(rec, dict):
                raise self.fail(probe, f"{line}: record is not a JSON object", line)
            rtype = rec.get("type")
            eid = rec.get("id") if isinstance(rec.get("id"), str) else None
            before = len(reader.segments)
            if rtype in ("compaction", "branch_summary"):
                if isinstance(rec.get("summary"), str):
                    step += 1
                    add(id=f"m{i}", step=step, step_id=f"s{step}", role=Role.user, kind=SegmentKind.message,
                        text=rec["summary"], meta=True, origin=(i, "summary"))
                if rtype == "compaction":
                    first = rec.get("firstKeptEntryId")
                    compactions.append((i, first if isinstance(first, str) else None))
            elif rtype == "custom_message":
                self._content(reader, i, Role.user, rec.get("content"), (i, "content"), max(step, 1), meta=True)
            elif rtype == "message":
                msg = rec.get("message")
                if not isinstance(msg, dict):
                    raise self.fail(probe, f"{line}: 'message' entry without a 'message' object", line)
                role = msg.get("role")
                path: tuple[str | int, ...] = (i, "message")
                if role == "user":
                    step += 1
                    self._content(reader, i, Role.user, msg.get("content"), path + ("content",), step)
                elif role == "assistant":
                    step += 1
                    self._assistant(reader, i, msg, path, step)
                elif role == "toolResult":
                    self._result(reader, i, msg, path, max(step, 1))
                elif role == "bashExecution":
                    step += 1
                    self._bash(reader, i, msg, path, step)
                elif role in ("custom", "hookMessage", "branchSummary", "compactionSummary"):
                    key = "content" if "content" in msg else "summary"
                    self._content(reader, i, Role.user, msg.get(key), path + (key,), max(step, 1), meta=True)
                elif role is not None and not isinstance(role, str):
                    raise self.fail(probe, f"{line}: message.role is not a string", line)
            if eid is not None and len(reader.segments) > before:
                seg_of_entry[eid] = [s.id for s in reader.segments[before:]]
        doc = self.new_document(records, reader.segments, probe.raw.source)
        update_state(doc.state, pairs=reader.calls.pairs, compactions=compactions,
                     off_path=self._off_path(records, seg_of_entry))
        return doc

    # ---------------------------------------------------------------- reading helpers

    @staticmethod
    def _content(reader: BlockReader, i: int, role: Role, content: Any, origin: tuple[str | int, ...], step: int,
                 meta: bool = False) -> None:
        for where, text in text_parts(content, origin):
            sid = f"m{i}" if where == origin else f"m{i}.{where[-2]}"
            reader.add(id=sid, step=step, step_id=f"s{step}", role=role, kind=SegmentKind.message, text=text,
                       meta=meta, origin=where)

    @staticmethod
    def _assistant(reader: BlockReader, i: int, msg: dict[str, Any], path: tuple[str | int, ...], step: int) -> None:
        content = msg.get("content")
        if isinstance(content, str):
            reader.add(id=f"m{i}", step=step, step_id=f"s{step}", role=Role.assistant, kind=SegmentKind.message,
                       text=content, origin=(*path, "content"))
        elif isinstance(content, list):
            for j, block in enumerate(content):
                if not isinstance(block, dict):
                    continue
                btype = block.get("type")
                if btype == "text" and isinstance(block.get("text"), str):
                    reader.add(id=f"m{i}.{j}", step=step, step_id=f"s{step}", role=Role.assistant,
                               kind=SegmentKind.message, text=block["text"], origin=(*path, "content", j, "text"))
                elif btype == "toolCall":
                    args = block.get("arguments")
                    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, separators=(",", ":"))
                    cmd = command_from_arguments(args) if isinstance(args, (dict, str)) else None
                    sid = f"m{i}.c{j}"
                    reader.add(id=sid, step=step, step_id=f"s{step}", role=Role.assistant, kind=SegmentKind.tool_call,
                               text=text, call_id=block.get("id"), tool_name=block.get("name"), command=cmd,
                               origin=(*path, "content", j, "arguments"),
                               **({"arguments": args} if isinstance(args, dict) else {}))
                    reader.calls.add_call(block.get("id"), sid, step=step, name=block.get("name"), cmd=cmd)
        error = msg.get("errorMessage")
        if isinstance(error, str) and error:
            # the API call failed (stopReason error/aborted): what the harness recorded of it
            reader.add(id=f"m{i}.e", step=step, step_id=f"s{step}", role=Role.assistant, kind=SegmentKind.message,
                       text=error, meta=True, origin=(*path, "errorMessage"))

    @staticmethod
    def _result(reader: BlockReader, i: int, msg: dict[str, Any], path: tuple[str | int, ...], step: int) -> None:
        call_id = msg.get("toolCallId")
        flag = msg.get("isError") if isinstance(msg.get("isError"), bool) else None
        parts = text_parts(msg.get("content"), (*path, "content"))
        if not parts:
            parts.append(((), ""))
        for k, (origin, text) in enumerate(parts):
            sid = f"m{i}.r" if len(parts) == 1 else f"m{i}.r{k}"
            info = reader.calls.match(call_id, sid) or {}
            code = None
            if k == len(parts) - 1:
                m = _EXIT.search(text[-200:])
                code = int(m.group(1)) if m else None
            err = flag if flag is not None else (code != 0 if code is not None else None)
            st = info.get("step", step)
            name = msg.get("toolName") if isinstance(msg.get("toolName"), str) else info.get("name")
            reader.add(id=sid, step=st, step_id=f"s{st}", role=Role.tool, kind=SegmentKind.tool_result, text=text,
                       call_id=call_id, tool_name=name, command=info.get("cmd"), is_error=err, exit_code=code,
                       origin=origin)

    @staticmethod
    def _bash(reader: BlockReader, i: int, msg: dict[str, Any], path: tuple[str | int, ...], step: int) -> None:
        command = msg.get("command")
        if not isinstance(command, str):
            return
        call_id = f"pi-bash-{i}"
        meta = bool(msg.get("excludeFromContext"))
        reader.add(id=f"m{i}.c", step=step, step_id=f"s{step}", role=Role.user, kind=SegmentKind.tool_call,
                   text=command, call_id=call_id, tool_name="bash", command=command, meta=meta,
                   origin=(*path, "command"))
        reader.calls.add_call(call_id, f"m{i}.c", step=step, name="bash", cmd=command)
        output = msg.get("output")
        if isinstance(output, str):
            code = msg.get("exitCode")
            code = code if isinstance(code, int) and not isinstance(code, bool) else None
            reader.calls.match(call_id, f"m{i}.r")
            reader.add(id=f"m{i}.r", step=step, step_id=f"s{step}", role=Role.tool, kind=SegmentKind.tool_result,
                       text=output, call_id=call_id, tool_name="bash", command=command, meta=meta,
                       is_error=(code != 0) if code is not None else None, exit_code=code, origin=(*path, "output"))

    @staticmethod
    def _off_path(records: list[Any], seg_of_entry: dict[str, list[str]]) -> list[str]:
        """Segments of the entries that are not on the path from the last entry to the root."""
        parent: dict[str, Any] = {}
        leaf = None
        for rec in records:
            if isinstance(rec, dict) and rec.get("type") != "session" and isinstance(rec.get("id"), str) \
                    and "parentId" in rec:
                parent[rec["id"]] = rec.get("parentId")
                leaf = rec["id"]
        if leaf is None:
            return []
        on_path: set[str] = set()
        cur: Any = leaf
        while isinstance(cur, str) and cur not in on_path:
            on_path.add(cur)
            cur = parent.get(cur)
        return [sid for eid, sids in seg_of_entry.items() if eid in parent and eid not in on_path for sid in sids]

    # ---------------------------------------------------------------- writing

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        data = self.copy_data(doc, edits)
        if edits is None or edits.is_empty():
            return data
        self.replace_texts(data, doc, edits)

        def record_of(seg: Segment) -> int | None:
            return int(seg.id[1:].split(".")[0]) if seg.id.startswith("m") else None

        dropped = plan_drops(doc.segments, edits.drop, record_of, doc.state.pairs)
        insert_at: int | None = min(dropped) if dropped else None
        if insert_at is None and edits.summary:
            insert_at = next((i for i, r in enumerate(data) if isinstance(r, dict) and r.get("type") == "message"),
                             len(data))
        # each kept entry is linked to its nearest kept ancestor
        parent_of = {r["id"]: r.get("parentId") for r in data
                     if isinstance(r, dict) and r.get("type") != "session" and isinstance(r.get("id"), str)}
        gone = {data[i]["id"] for i in dropped if isinstance(data[i].get("id"), str)}

        def kept_ancestor(pid: Any) -> Any:
            seen: set[str] = set()
            while isinstance(pid, str) and pid in gone and pid not in seen:
                seen.add(pid)
                pid = parent_of.get(pid)
            return pid

        summary_rec = None
        if edits.summary:
            summary_rec = self._summary_entry(data, insert_at if insert_at is not None else len(data), edits.summary)
        out: list[Any] = []
        for i, rec in enumerate(data):
            if summary_rec is not None and i == insert_at:
                if "id" in summary_rec:
                    summary_rec["parentId"] = kept_ancestor(rec.get("parentId")) if isinstance(rec, dict) else None
                out.append(summary_rec)
            if i in dropped:
                continue
            if isinstance(rec, dict) and isinstance(rec.get("parentId"), str):
                pid = kept_ancestor(rec["parentId"])
                if summary_rec is not None and "id" in summary_rec and insert_at is not None and i > insert_at \
                        and pid == summary_rec.get("parentId"):
                    pid = summary_rec["id"]  # the entry that followed the summary's place hangs below it
                if pid != rec["parentId"]:
                    rec["parentId"] = pid
            out.append(rec)
        if summary_rec is not None and insert_at is not None and insert_at >= len(data):
            if "id" in summary_rec:
                summary_rec["parentId"] = next((r["id"] for r in reversed(out) if isinstance(r, dict)
                                                and isinstance(r.get("id"), str) and r.get("type") != "session"), None)
            out.append(summary_rec)
        return out

    def _summary_entry(self, data: list[Any], near: int, text: str) -> dict[str, Any]:
        rec = self.make_message("user", text)
        template = next((data[j] for j in list(range(near, len(data))) + list(range(near - 1, -1, -1))
                         if isinstance(data[j], dict) and data[j].get("type") == "message"), None)
        if template is not None:
            if "id" in template:
                rec = {"type": "message", "id": hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], "parentId": None,
                       **{k: v for k, v in rec.items() if k != "type"}}
            if "timestamp" in template:
                rec = {**{k: v for k, v in rec.items() if k != "message"}, "timestamp": template["timestamp"],
                       "message": rec["message"]}
            ts = template.get("message", {}).get("timestamp") if isinstance(template.get("message"), dict) else None
            if ts is not None:
                rec["message"]["timestamp"] = ts
        return rec

    def make_message(self, role: str, text: str) -> Any:
        return {"type": "message", "message": {"role": role, "content": [{"type": "text", "text": text}]}}
