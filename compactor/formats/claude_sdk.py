"""The message stream of a headless Claude Code run: the Claude Agent SDK, or
``claude -p --output-format stream-json``.

One JSON event per line (records run together on a line are read too):

- ``system`` events: ``subtype: "init"`` first (session id, cwd, model, tools, MCP servers and
  their status, permission mode), then ``compact_boundary`` (the run's own compaction:
  ``compact_metadata.trigger`` / ``pre_tokens``), ``status``, ``hook_response``;
- ``assistant`` events: ``message`` is an Anthropic API message (``id``, ``model``, content blocks
  ``text`` / ``thinking`` / ``tool_use``). The stream splits one API message over several events
  sharing ``message.id`` (one content block each): they are one step;
- ``user`` events: ``message`` with ``tool_result`` blocks (or the prompt's text); a structured
  copy of the tool result (``tool_use_result``) is a mirror, rewritten with the result. The user
  text right after a ``compact_boundary`` is the run's own summary of what came before: meta;
- ``result`` (last, when the run finished): ``subtype`` ``success`` / ``error_max_turns`` /
  ``error_during_execution`` / ``error_max_budget_usd`` ..., ``is_error``, ``num_turns``,
  ``total_cost_usd``, ``duration_ms``, ``result`` (the final answer text, on success),
  ``permission_denials``. A stream without it was cut off.

Two containers of the same events are read alike: the bare stream-json events (``system`` and
``result`` fields at the top level, ``session_id`` / ``uuid`` / ``parent_tool_use_id`` beside
``message``), and logs that wrap each event as ``{type, message, timestamp}`` (the fields of a
``system`` / ``result`` event under ``message``).

The run's ending is kept reachable: ``doc.state.run`` holds the ``result`` event's facts (how the
run stopped: ``finished``, ``stopped by max turns``, ``stopped by an error``, ``stopped by the
budget``, or ``cut off`` when the stream has no result), and a ``run-status`` diagnostic says it in
a sentence. The final answer text of a ``result`` is a segment when it is not the last assistant
text again.

Written back in the input's own text layout (see :class:`~.base.TextLayout`): the events with no
segments (system, result) stay as they are, an untouched stream is byte-identical.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..models import Diagnostic, Role, SegmentKind, Severity
from ..record import Field
from .base import Document, Probe, jsonl_records, make_segment, object_records
from .claude_records import ClaudeCodeState, ClaudeRecordsFormat
from .registry import register

__all__ = ["ClaudeSdkStreamFormat"]

# how a run stopped, by the result event's subtype
_STOPS = {
    "success": "finished",
    "error_max_turns": "stopped by max turns",
    "error_during_execution": "stopped by an error during execution",
    "error_max_budget_usd": "stopped by the budget",
    "error_max_structured_output_retries": "stopped by structured-output retries",
}
_RUN_FACTS = ("subtype", "is_error", "num_turns", "total_cost_usd", "duration_ms", "duration_api_ms",
              "session_id", "stop_reason")


def _event(rec: dict[str, Any]) -> dict[str, Any]:
    """The fields of a system/result event: at the top level (bare stream-json) or under
    ``message`` (the wrapped logs)."""
    if "subtype" not in rec and isinstance(rec.get("message"), dict):
        return rec["message"]
    return rec


class ClaudeSdkState(ClaudeCodeState):
    """The stream's run facts: the ``result`` event's (``stop`` says how the run ended), the init's
    session id/model, the run's own compactions."""

    run: dict[str, Any] = Field(default_factory=dict)


@register
class ClaudeSdkStreamFormat(ClaudeRecordsFormat):
    name = "claude-sdk-stream"
    State = ClaudeSdkState
    title = "Claude Agent SDK / claude -p --output-format stream-json message stream"
    detection = ("JSONL of stream-json events: a 'system' event with subtype 'init' (or a final 'result' "
                 "with num_turns/total_cost_usd), 'assistant'/'user' events holding an Anthropic 'message'; "
                 "bare or wrapped as {type, message, timestamp}; no Claude Code sessionId/parentUuid")
    container = "jsonl"
    result_copies = ("tool_use_result", "toolUseResult")
    linked = False
    template_keys = ("timestamp", "session_id", "parent_tool_use_id")

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        records = jsonl_records(probe)
        why = object_records(records)
        if why is not None or records is None:
            return False, why or "not JSONL"
        if any("sessionId" in r or "parentUuid" in r for r in records[:50]):
            return False, "Claude Code session records (sessionId/parentUuid), not a stream"
        marker = False
        for r in records:
            t = r.get("type")
            if t == "system":
                ev = _event(r)
                if ev.get("subtype") == "init" and ("tools" in ev or "session_id" in ev or "model" in ev):
                    marker = True
                    break
            elif t == "result":
                ev = _event(r)
                if isinstance(ev.get("subtype"), str) and ("num_turns" in ev or "total_cost_usd" in ev):
                    marker = True
                    break
        if not marker:
            return False, "no system/init or result event"
        msgs = [r for r in records if r.get("type") in ("user", "assistant")]
        if not all(isinstance(r.get("message"), dict) for r in msgs):
            return False, "user/assistant events without a 'message' object"
        return True, "stream-json events"

    def other_record(self, i: int, rec: dict[str, Any], notes: dict[str, Any]) -> None:
        t = rec.get("type")
        ev = _event(rec)
        if t == "system":
            sub = ev.get("subtype")
            if sub == "init":
                notes.setdefault("init", {k: ev[k] for k in ("session_id", "model", "cwd", "permissionMode",
                                                              "claude_code_version") if k in ev})
                failed = [s.get("name") for s in ev.get("mcp_servers") or []
                          if isinstance(s, dict) and s.get("status") not in (None, "connected")]
                if failed:
                    notes.setdefault("mcp_failed", []).extend(str(n) for n in failed)
            elif sub == "compact_boundary":
                notes["compactions"] = notes.get("compactions", 0) + 1
                notes["after_boundary"] = True
        elif t == "result":
            facts = {k: ev[k] for k in _RUN_FACTS if k in ev}
            facts["record"] = i
            if isinstance(ev.get("result"), str) and ev["result"].strip():
                notes["final_text"] = (i, ev["result"], ("result",) if ev is rec else ("message", "result"))
            notes["result"] = facts

    def is_meta(self, rec: dict[str, Any], content: Any, notes: dict[str, Any]) -> bool:
        after = notes.pop("after_boundary", False)
        if rec.get("type") == "user" and after:
            only_results = isinstance(content, list) and content and all(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
            if not only_results:
                return True  # the run's own summary of what it compacted
            notes["after_boundary"] = True
        return bool(rec.get("isSynthetic")) or super().is_meta(rec, content, notes)

    def finish(self, doc: Document, notes: dict[str, Any]) -> None:
        facts: dict[str, Any] = dict(notes.get("result") or {})
        sub = facts.get("subtype")
        if facts:
            stop = _STOPS.get(sub) if isinstance(sub, str) else None
            if stop is None:
                stop = "stopped by an error" if facts.get("is_error") or (isinstance(sub, str) and sub.startswith("error")) \
                    else "finished"
            elif sub == "success" and facts.get("is_error"):
                stop = "stopped by an error"
        else:
            stop = "cut off"
        facts["stop"] = stop
        for k in ("init", "compactions", "mcp_failed"):
            if k in notes:
                facts[k] = notes[k]
        doc.state.run = facts
        bits = [f"the run {stop}" if stop != "cut off" else "the stream has no result event: the run was cut off"]
        if "num_turns" in facts:
            bits.append(f"after {facts['num_turns']} turns")
        if isinstance(facts.get("total_cost_usd"), (int, float)):
            bits.append(f"cost ${facts['total_cost_usd']:.2f}")
        if isinstance(sub, str):
            bits.append(f"(result subtype {sub})")
        severity = Severity.info if stop in ("finished", "cut off") else Severity.warning
        doc.diagnostics.append(Diagnostic(code="run-status", severity=severity, message=" ".join(bits),
                                          position=f"record {facts['record']}" if "record" in facts else None))
        final = notes.get("final_text")
        if final is not None:
            i, text, path = final
            last = next((s for s in reversed(doc.segments) if s.role == Role.assistant
                         and s.kind == SegmentKind.message), None)
            if last is None or last.text.strip() != text.strip():
                step = max((s.step for s in doc.segments), default=0) or 1
                doc.segments.append(make_segment(id=f"m{i}", index=len(doc.segments), step=step, step_id=f"s{step}",
                                                 role=Role.assistant, kind=SegmentKind.message, text=text,
                                                 origin=(i, *path)))

    def _summary_record(self, data: list[Any], near: int, text: str) -> dict[str, Any]:
        rec = super()._summary_record(data, near, text)
        rec.pop("parentUuid", None)
        uuid = rec.pop("uuid", None)
        if any(isinstance(r, dict) and "uuid" in r for r in data[:50]):
            rec["uuid"] = uuid or "compactor-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]
        return rec

    def make_message(self, role: str, text: str) -> Any:
        return {"type": role, "message": {"role": role, "content": [{"type": "text", "text": text}]}}


