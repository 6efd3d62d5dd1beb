"""Claude Code session records in their two containers.

- ``claude-code``: the session transcript ``~/.claude/projects/<project>/<session>.jsonl``, one
  record per line (records run together on a line are read too, and written back sharing it).
- ``claude-code-chat-json``: the same records as a hook receives them and dumps them, one JSON
  array (``logs/chat.json`` of the hook examples, ``*.chat.json``). Written back as a JSON array
  in the input's own text layout: every record the compaction did not change is its original
  text, a changed one is serialised with the indentation, separators and escapes the input's
  records use, and the text around the records (the brackets, the trailing newline or its
  absence) is the input's; an untouched file comes back byte-identical.

Both read the records with :class:`~.claude_records.ClaudeRecordsFormat` (the record types,
mirrors, split API responses and sidechains are described there).
"""

from __future__ import annotations

from typing import Any

from .base import Document, Probe, array_layout, jsonl_records
from .claude_records import ClaudeCodeState, ClaudeRecordsFormat
from .registry import register

__all__ = ["ClaudeCodeChatJsonFormat", "ClaudeCodeFormat"]


@register
class ClaudeCodeFormat(ClaudeRecordsFormat):
    name = "claude-code"
    title = "Claude Code session JSONL"
    detection = ("JSONL whose records have 'type' user/assistant with an Anthropic 'message' "
                 "(plus queue-operation/summary/system records), usually with uuid/parentUuid/sessionId")
    container = "jsonl"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        return self.sniff_records(jsonl_records(probe), "JSONL", "line")


class ClaudeCodeChatJsonState(ClaudeCodeState):
    """The hook dump's state: the session's (a document of one container is not written as the other)."""


@register
class ClaudeCodeChatJsonFormat(ClaudeRecordsFormat):
    name = "claude-code-chat-json"
    State = ClaudeCodeChatJsonState
    title = "Claude Code records dumped by a hook as one JSON array (*.chat.json)"
    detection = ("a JSON array of Claude Code session records: 'type' user/assistant with an Anthropic "
                 "'message' and uuid/parentUuid/sessionId, among summary/system/file-history-snapshot records")
    container = "json"

    def records(self, probe: Probe) -> list[Any] | None:
        value = probe.json_value
        return value if probe.is_json and isinstance(value, list) else None

    def where(self, probe: Probe, i: int) -> str:
        return f"record {i}"

    def sniff(self, probe: Probe) -> tuple[bool, str]:
        return self.sniff_records(self.records(probe), "a JSON array", "item")

    def read(self, probe: Probe) -> Document:
        doc = super().read(probe)
        doc.layout = array_layout(probe)
        return doc
