"""Claude Code records: the reader and writer shared by the containers that hold them.

The records are those of a Claude Code session transcript (``~/.claude/projects/<project>/<session>.jsonl``,
one JSON object per line: :mod:`.claude_code`), the same records dumped by a hook as one JSON array
(``*.chat.json``: :mod:`.claude_code`), and the message stream of a headless run (the Claude Agent
SDK, ``claude -p --output-format stream-json``: :mod:`.claude_sdk`), whose ``assistant`` / ``user``
events carry the same Anthropic ``message``. :class:`ClaudeRecordsFormat` is registered by none of
them itself; each container subclasses it and says where its records are and how they are named.
 ``type: "user"`` / ``"assistant"`` lines carry an Anthropic
``message``; other records (``queue-operation``, ``summary``, ``system``,
``file-history-snapshot``, ...) are not conversation: they make no segments and are written
back unchanged. One API response is split over several lines sharing ``message.id`` (one
content block per line); those lines count as one step. Segment ids use the line's record
index: ``m<i>`` (string content), ``m<i>.<j>`` (text block), ``m<i>.c<j>`` (tool_use),
``m<i>.r<j>`` (tool_result). ``tool_use.id`` pairs with ``tool_result.tool_use_id``.

- ``toolUseResult`` is a second, structured copy of a line's tool result: never a segment;
  when the result is replaced the copy becomes the new text, so the output really shrinks.
- ``is_error`` → ``Segment.is_error``; a result starting ``Exit code N`` → ``exit_code``.
- ``isMeta`` lines (hook feedback, caveats) and ``isCompactSummary`` lines are ``meta=True``,
  and so are user lines that only echo a local slash command (``<command-name>…``,
  ``<local-command-stdout>…``: what ``/compact`` or ``/cost`` printed to the user, not a request).
- ``isSidechain`` lines (sub-agents) are kept as normal segments; their ids are listed in
  ``doc.state.sidechain``.
- A line repeated with the same ``uuid`` (resumed sessions copy history) is one payload: the
  copy makes no segments and is updated as a mirror.

Writing with drops re-links ``parentUuid`` across removed lines so the chain stays unbroken.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..models import Segment
from ..record import Field, Record
from .anthropic import BlockReader
from .base import (Document, Edits, Format, LayoutState, Probe, jsonl_records, object_records, plan_drops, record_line,
                   update_state)

_MESSAGE_TYPES = ("user", "assistant")
_LOCAL_COMMAND_TAGS = ("<command-name>", "<local-command-stdout>", "<local-command-stderr>",
                       "<local-command-caveat>")


def _local_command(content: Any) -> bool:
    """A user line that only records a local slash command and what it printed."""
    if isinstance(content, list):
        texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        if len(texts) != len(content) or not texts:
            return False
        content = "".join(t for t in texts if isinstance(t, str))
    return isinstance(content, str) and content.lstrip().startswith(_LOCAL_COMMAND_TAGS)
_OTHER_TYPES = ("queue-operation", "summary", "system", "file-history-snapshot", "progress", "attachment")


class ClaudeCodeState(LayoutState):
    """Claude records: tool-result mirrors (``toolUseResult``) and the ids of sidechain segments."""

    tool_mirrors: dict[str, list[tuple[str | int, ...]]] = Field(default_factory=dict)
    sidechain: list[str] = Field(default_factory=list)


class ClaudeRecordsFormat(Format):
    """Reads and writes a list of Claude Code records; subclasses say where the list is
    (:meth:`records`), how a record is named in messages (:meth:`where`) and what else a record
    holds (:meth:`other_record`, :meth:`is_meta`)."""

    State = ClaudeCodeState
    # the keys of a record's structured copy of its tool result
    result_copies: tuple[str, ...] = ("toolUseResult",)
    # a new record is linked into the parentUuid chain (the session layouts have one)
    linked = True
    # what a new record (the summary) copies from the message record next to it
    template_keys: tuple[str, ...] = ("isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch",
                                      "timestamp")

    def records(self, probe: Probe) -> list[Any] | None:
        return jsonl_records(probe)

    def where(self, probe: Probe, i: int) -> str:
        return f"line {record_line(probe, i)}"

    def other_record(self, i: int, rec: dict[str, Any], doc_notes: dict[str, Any]) -> None:
        """A record that is not a user/assistant message (the run's own records)."""

    def is_meta(self, rec: dict[str, Any], content: Any, doc_notes: dict[str, Any]) -> bool:
        return bool(rec.get("isMeta") or rec.get("isCompactSummary")) or _local_command(content)

    def finish(self, doc: Document, doc_notes: dict[str, Any]) -> None:
        """Anything the records said of the run, set on the read document."""

    def sniff_records(self, records: list[Any] | None, what: str, unit: str) -> tuple[bool, str]:
        """Whether ``records`` (the container's list, None: the input is not ``what``) are Claude
        Code session records."""
        why = object_records(records, what, unit)
        if why is not None or records is None:
            return False, why or f"not {what}"
        msgs = [r for r in records if r.get("type") in _MESSAGE_TYPES]
        if not msgs:
            return False, "no user/assistant records"
        if not all(isinstance(r.get("message"), dict) for r in msgs):
            return False, "user/assistant records without a 'message' object"
        if not any(k in r for r in msgs for k in ("uuid", "sessionId", "parentUuid")):
            return False, "no uuid/sessionId/parentUuid fields"
        return True, "Claude Code session"

    def read(self, probe: Probe) -> Document:
        records = self.records(probe)
        if records is None:
            raise self.fail(probe, "expected a list of records")
        reader = BlockReader(compact_json=True)
        mirrors: dict[str, list[tuple[str | int, ...]]] = {}
        tool_mirror: dict[str, list[tuple[str | int, ...]]] = {}
        sidechain: list[str] = []
        seen_uuid: dict[str, int] = {}
        seg_ids_of: dict[int, list[Segment]] = {}
        notes: dict[str, Any] = {}
        step = 0
        last_msg_id: Any = None
        for i, rec in enumerate(records):
            if not isinstance(rec, dict):
                line = self.where(probe, i)
                raise self.fail(probe, f"{line}: record is not a JSON object", line)
            rtype = rec.get("type")
            if rtype not in _MESSAGE_TYPES:
                self.other_record(i, rec, notes)
                continue
            line = self.where(probe, i)
            msg = rec.get("message")
            if not isinstance(msg, dict):
                raise self.fail(probe, f"{line}: '{rtype}' record without a 'message' object", line)
            content = msg.get("content")
            if not isinstance(content, (str, list)):
                raise self.fail(probe, f"{line}: message.content must be a string or a list of blocks", line)
            uuid = rec.get("uuid")
            if isinstance(uuid, str) and uuid in seen_uuid:
                # a repeated line: one payload, the copy is a mirror
                first = seen_uuid[uuid]
                for seg in seg_ids_of.get(first, []):
                    mp = (i, *seg.origin[1:]) if seg.origin else ()
                    if mp:
                        mirrors.setdefault(seg.id, []).append(mp)
                continue
            if isinstance(uuid, str):
                seen_uuid[uuid] = i
            role = msg.get("role") or rtype
            meta = self.is_meta(rec, content, notes)
            if role == "assistant":
                mid = msg.get("id")
                if not (mid and mid == last_msg_id):
                    step += 1
                last_msg_id = mid
            else:
                only_results = isinstance(content, list) and content and all(
                    isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
                if not only_results:
                    step += 1
                    last_msg_id = None
            segs = reader.content(i, "assistant" if role == "assistant" else "user", content, (i, "message"),
                                  max(step, 1), meta=meta)
            seg_ids_of[i] = segs
            results = [s for s in segs if s.kind.value == "tool_result"]
            for key in self.result_copies:
                if key in rec and results:
                    tool_mirror.setdefault(results[0].id, []).append((i, key))
            if rec.get("isSidechain"):
                sidechain += [s.id for s in segs]
        doc = self.new_document(records, reader.segments, probe.raw.source)
        update_state(doc.state, mirrors=mirrors, tool_mirrors=tool_mirror, pairs=reader.calls.pairs,
                     sidechain=sidechain)
        self.finish(doc, notes)
        return doc

    def write(self, doc: Document, edits: Edits | None = None) -> Any:
        state = self.state_of(doc)
        data = self.copy_data(doc, edits)
        if edits is None or edits.is_empty():
            return data
        tool_mirrors = state.tool_mirrors
        for seg, text in self.replace_texts(data, doc, edits):
            for mp in tool_mirrors.get(seg.id, []):
                data[mp[0]][mp[1]] = text  # the structured copy becomes the new text

        def record_of(seg: Segment) -> int | None:
            return int(seg.id[1:].split(".")[0]) if seg.id.startswith("m") else None

        dropped = plan_drops(doc.segments, edits.drop, record_of, state.pairs)
        # lines of a dropped API response that hold no segment (thinking blocks) go with it
        groups: dict[str, list[int]] = {}
        for i, rec in enumerate(data):
            mid = rec.get("message", {}).get("id") if isinstance(rec, dict) and isinstance(rec.get("message"), dict) else None
            if isinstance(mid, str):
                groups.setdefault(mid, []).append(i)
        with_segs = {record_of(s) for s in doc.segments}
        for members in groups.values():
            live = [i for i in members if i in with_segs]
            if live and all(i in dropped for i in live):
                dropped.update(members)
        # mirror copies of dropped lines go too
        drop_uuids = {data[i].get("uuid") for i in dropped if isinstance(data[i].get("uuid"), str)}
        for i, rec in enumerate(data):
            if isinstance(rec, dict) and rec.get("type") in _MESSAGE_TYPES and isinstance(rec.get("uuid"), str) \
                    and rec["uuid"] in drop_uuids:
                dropped.add(i)
        insert_at: int | None = min(dropped) if dropped else None
        if insert_at is None and edits.summary:
            insert_at = next((i for i, r in enumerate(data) if isinstance(r, dict) and r.get("type") in _MESSAGE_TYPES),
                             len(data))
        alias: dict[str, Any] = {}

        def resolve(u: Any) -> Any:
            seen = set()
            while isinstance(u, str) and u in alias and u not in seen:
                seen.add(u)
                u = alias[u]
            return u

        out: list[Any] = []
        for i, rec in enumerate(data):
            if edits.summary and i == insert_at:
                summary = self._summary_record(data, i, edits.summary)
                if self.linked:
                    summary["parentUuid"] = resolve(rec.get("parentUuid")) if i in dropped else \
                        resolve(_previous_uuid(out))
                    if i in dropped and isinstance(rec.get("uuid"), str):
                        alias[rec["uuid"]] = summary["uuid"]
                    elif i not in dropped and "parentUuid" in rec:
                        rec["parentUuid"] = summary["uuid"]
                out.append(summary)
            if i in dropped:
                if isinstance(rec.get("uuid"), str) and rec["uuid"] not in alias:
                    alias[rec["uuid"]] = rec.get("parentUuid")
                continue
            if isinstance(rec, dict) and isinstance(rec.get("parentUuid"), str):
                rec["parentUuid"] = resolve(rec["parentUuid"])
            out.append(rec)
        if edits.summary and insert_at is not None and insert_at >= len(data):
            summary = self._summary_record(data, len(data) - 1, edits.summary)
            if self.linked:
                summary["parentUuid"] = _previous_uuid(out)
            out.append(summary)
        return out

    def _summary_record(self, data: list[Any], near: int, text: str) -> dict[str, Any]:
        rec = self.make_message("user", text)
        template = None
        for j in list(range(near, len(data))) + list(range(near - 1, -1, -1)):
            r = data[j] if 0 <= j < len(data) else None
            if isinstance(r, dict) and r.get("type") in _MESSAGE_TYPES:
                template = r
                break
        if template is not None:
            for key in self.template_keys:
                if key in template:
                    rec[key] = template[key]
            if "isSidechain" in self.template_keys:
                rec["isSidechain"] = False
        rec["uuid"] = "compactor-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]
        return rec

    def make_message(self, role: str, text: str) -> Any:
        return {"parentUuid": None, "type": role, "message": {"role": role, "content": text}}


def _previous_uuid(out: list[Any]) -> Any:
    for r in reversed(out):
        if isinstance(r, dict) and isinstance(r.get("uuid"), str):
            return r["uuid"]
    return None
