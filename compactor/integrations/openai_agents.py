"""compactor for the OpenAI Agents SDK (``openai-agents``).

- :class:`CompactorInputFilter`: a ``RunConfig(call_model_input_filter=...)``. Before every
  model call, the input items are compacted: Level 1 on older tool outputs (benign output
  becomes a semantic placeholder, errors and traces stay verbatim), and with ``budget`` older
  turns are replaced by the anchor until the input fits. Only what the model is sent changes;
  the run's items and the session keep the full history.
  The filter keeps one :class:`compactor.Session` per conversation (found by content, see
  :mod:`compactor.integrations.sessions`; at most ``max_sessions``, least recently used dropped
  first), so each model call compacts only the items added since the previous one and the
  output extends the previous output (prompt caches stay valid).
- :class:`CompactorSession`: a ``Session`` kept in compactor's SQLite store file, next to the
  placeholders' originals (one file holds the conversation and everything needed to expand
  what the model was shown). ``session.input_filter(...)`` gives a filter whose placeholders go
  to that same store.

Responses API items are handed to compactor as OpenAI chat messages; items compactor does not
read (reasoning, hosted tool calls, ...) travel with the message that follows them and are
never altered. Install with ``pip install 'context-compactor[openai-agents]'``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from compactor import BudgetError, Compactor, StoreError

from .sessions import DEFAULT_MAX_SESSIONS, SessionPool

try:
    from agents.memory.session import SessionABC
    from agents.run_config import CallModelData, ModelInputData
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("the OpenAI Agents integration needs openai-agents: pip install 'context-compactor[openai-agents]'") from exc

__all__ = ["CompactorInputFilter", "CompactorSession", "compact_items", "items_to_chat"]

_KEY = "x_compactor_items"  # carries item indices through compactor (unknown keys are kept as they are)
_TRAIL = "x_compactor_trailing"  # marks the stand-in for items after the last message
#: older tool outputs collapse one at a time by default (the most compression); pass
#: ``collapse_batch=10`` (a ``compactor.Session``'s own default) to extend the previous output byte
#: for byte on most calls instead
COLLAPSE_BATCH = 1


def _text_of(content: Any) -> str | None:
    """Plain text of a message's content, or None when it holds anything but text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") not in ("input_text", "output_text", "text"):
                return None
            out.append(part.get("text") or "")
        return "\n".join(out)
    return None


def items_to_chat(items: Sequence[Any]) -> list[dict[str, Any]]:
    """Responses input items as OpenAI chat messages, each tagged with the item indices it stands for."""
    chat: list[dict[str, Any]] = []
    pending: list[int] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            pending.append(i)
            continue
        kind = item.get("type")
        role = item.get("role")
        if kind in (None, "message") and role in ("user", "assistant", "system", "developer"):
            text = _text_of(item.get("content"))
            if text is None:
                text = ""  # images/files: the message keeps its place, nothing of it is rewritten
            chat.append({"role": "system" if role == "developer" else role, "content": text, _KEY: pending + [i]})
        elif kind == "function_call":
            call = {"id": str(item.get("call_id") or item.get("id") or f"call_{i}"), "type": "function",
                    "function": {"name": str(item.get("name") or ""), "arguments": str(item.get("arguments") or "")}}
            prev = chat[-1] if chat else None
            if prev is not None and prev["role"] == "assistant" and not pending and (
                    prev.get("tool_calls") is not None or prev[_KEY][-1] == i - 1):
                prev.setdefault("tool_calls", []).append(call)
                prev[_KEY].append(i)
            else:
                chat.append({"role": "assistant", "content": None, "tool_calls": [call], _KEY: pending + [i]})
        elif kind == "function_call_output":
            out = item.get("output")
            text = out if isinstance(out, str) else _text_of(out)
            chat.append({"role": "tool", "tool_call_id": str(item.get("call_id") or ""),
                         "content": text if text is not None else "", _KEY: pending + [i]})
        else:
            pending.append(i)
            continue
        pending = []
    if pending:  # trailing items: kept as they are, whatever the budget (see _merge_back)
        chat.append({"role": "assistant", "content": "", _KEY: pending, _TRAIL: True})
    return chat


def _merge_back(items: Sequence[Any], before: list[dict[str, Any]], after: list[Any]) -> list[Any]:
    """Rebuild the item list from compactor's output: kept messages give back their original
    items (tool outputs with their new text), dropped ones vanish, new ones (the anchor summary)
    become user messages."""
    by_first = {tuple(m[_KEY]): m for m in before}
    out: list[Any] = []
    seen: set[int] = set()
    for msg in after:
        idx = msg.get(_KEY) if isinstance(msg, dict) else None
        if not idx:
            text = msg.get("content") if isinstance(msg, dict) else None
            if isinstance(text, str) and text:
                out.append({"role": "user", "content": text})
            continue
        orig = by_first.get(tuple(idx))
        seen.update(idx)
        for i in idx:
            item = items[i]
            if orig is not None and isinstance(item, dict) and isinstance(msg.get("content"), str) \
                    and msg.get("content") != orig.get("content"):
                if item.get("type") == "function_call_output" and isinstance(item.get("output"), str):
                    item = {**item, "output": msg["content"]}
                elif item.get("type") in (None, "message") and isinstance(item.get("content"), str):
                    item = {**item, "content": msg["content"]}
            out.append(item)
    last = before[-1][_KEY] if before else []
    if last and before[-1]["role"] == "assistant" and before[-1]["content"] == "" and not set(last) & seen:
        out.extend(items[i] for i in last)  # items after the last message are never dropped
    return out


def compact_items(items: Sequence[Any], compactor: Compactor, *, budget: int | None = None,
                  keep_recent: int = 3, collapse_batch: int = 1, pool: SessionPool | None = None):
    """Compact Responses input items; returns ``(items, report)``. Items compactor does not
    read are kept whole with the message that follows them.

    With ``pool`` the conversation's :class:`compactor.Session` does the work (incremental, and
    with ``budget`` the session's hysteresis keeps the output a prefix of the next one); without
    budget the items are the same as without ``pool``."""
    chat = items_to_chat(items)
    if not chat:
        return list(items), None
    options: dict[str, Any] = {"keep_recent": keep_recent, "collapse_batch": collapse_batch}
    if budget is not None:
        options["budget"] = budget
    trailing: list[int] = []
    if pool is not None:
        if chat[-1].get(_TRAIL):  # items after the last message change shape as the run goes on:
            trailing = chat.pop()[_KEY]  # they stay out of the session and are sent as they are
        if not chat:
            return list(items), None
        with pool.lock:
            session = pool.session_for(chat)
            try:
                result = session.compact(**options)
            except BudgetError:  # the protected evidence alone is over budget: send Level 1, lose nothing
                options.pop("budget")
                result = session.compact(**options)
    else:
        try:
            result = compactor.compact(chat, format="openai-chat", **options)
        except BudgetError:
            options.pop("budget")
            result = compactor.compact(chat, format="openai-chat", **options)
    if budget is not None and result.report.tokens_before <= budget:
        return list(items), result.report  # fits already: the input goes out untouched
    out = _merge_back(items, chat, result.messages)
    out.extend(items[i] for i in trailing)
    return out, result.report


class CompactorInputFilter:
    """``call_model_input_filter`` that compacts what the model is sent.

    ``budget=None``: Level 1 on tool outputs older than the newest ``keep_recent``.
    ``budget=N``: the input untouched while it fits N tokens, else Level 1 → 2 → 3 until it
    does (or Level 1 when even the protected evidence is larger). ``last_report`` holds the
    report of the last call.

    One :class:`compactor.Session` per conversation (``self.sessions``, at most
    ``max_sessions``): each call compacts only what was added since the previous call of the
    same conversation. Older tool outputs collapse ``collapse_batch`` at a time: with 1 (the
    default) every output collapses as soon as it leaves the newest ``keep_recent``, the most
    compression, but the cached prefix breaks where it collapsed; with 10 most calls send the
    previous input unchanged plus the new items. With ``budget`` the session compacts well under
    the budget once and then appends until it is exceeded again (hysteresis).
    """

    def __init__(self, *, budget: int | None = None, keep_recent: int = 3, compactor: Compactor | None = None,
                 store: str | os.PathLike[str] | None = None, collapse_batch: int = COLLAPSE_BATCH,
                 max_sessions: int = DEFAULT_MAX_SESSIONS):
        if budget is not None and budget < 1:
            raise ValueError("budget must be a positive number of tokens")
        self.budget = budget
        self.keep_recent = keep_recent
        self.collapse_batch = collapse_batch
        self.compactor = compactor if compactor is not None else Compactor(store=str(store) if store else None)
        self.sessions = SessionPool(self.compactor, max_sessions)
        self.last_report = None
        self._lock = threading.Lock()

    def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        md = data.model_data
        with self._lock:
            items, report = compact_items(md.input, self.compactor, budget=self.budget, keep_recent=self.keep_recent,
                                          collapse_batch=self.collapse_batch, pool=self.sessions)
            self.last_report = report
        return ModelInputData(input=items, instructions=md.instructions)

    def expand(self, ref: str) -> str:
        return self.compactor.expand(ref)


class CompactorSession(SessionABC):
    """A ``Session`` whose items live in compactor's SQLite store file.

    The items are kept whole (the model-side compaction is the filter's job) in a table of
    their own next to the placeholders' originals, in WAL mode with a busy timeout, so several
    processes can share the file. ``path`` must end in ``.sqlite``/``.sqlite3``/``.db``.
    """

    def __init__(self, session_id: str, path: str | os.PathLike[str], *, busy_timeout_ms: int = 10_000):
        p = Path(path).expanduser()
        if p.suffix not in (".sqlite", ".sqlite3", ".db"):
            raise StoreError("a session store must be a .sqlite, .sqlite3 or .db file", source=str(p))
        self.session_id = session_id
        self.session_settings = None
        self.path = p
        self._timeout = busy_timeout_ms
        self._lock = threading.Lock()
        self.compactor = Compactor(store=str(p))  # creates the file (owner-only) and the blob table
        with self._connect() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS session_items (session_id TEXT NOT NULL, "
                         "seq INTEGER PRIMARY KEY AUTOINCREMENT, data TEXT NOT NULL)")
            conn.execute("CREATE INDEX IF NOT EXISTS session_items_by_id ON session_items (session_id, seq)")

    def _connect(self) -> "_Closing":
        try:
            conn = sqlite3.connect(self.path, timeout=self._timeout / 1000, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout={int(self._timeout)}")
            conn.execute("PRAGMA journal_mode=WAL")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the session store: {exc}", source=str(self.path)) from None
        return _Closing(conn)

    # ------------------------------------------------------------------ sync bodies
    def _get(self, limit: int | None) -> list[Any]:
        with self._connect() as conn:
            if limit is None:
                rows = conn.execute("SELECT data FROM session_items WHERE session_id = ? ORDER BY seq",
                                    (self.session_id,)).fetchall()
            else:
                rows = conn.execute("SELECT data FROM (SELECT seq, data FROM session_items WHERE session_id = ? "
                                    "ORDER BY seq DESC LIMIT ?) ORDER BY seq", (self.session_id, max(0, limit))).fetchall()
        return [json.loads(r[0]) for r in rows]

    def _add(self, items: list[Any]) -> None:
        rows = [(self.session_id, json.dumps(it, ensure_ascii=False, sort_keys=True)) for it in items]
        with self._lock, self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany("INSERT INTO session_items (session_id, data) VALUES (?, ?)", rows)
            conn.execute("COMMIT")

    def _pop(self) -> Any | None:
        with self._lock, self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute("SELECT seq, data FROM session_items WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
                               (self.session_id,)).fetchone()
            if row is not None:
                conn.execute("DELETE FROM session_items WHERE seq = ?", (row[0],))
            conn.execute("COMMIT")
        return json.loads(row[1]) if row is not None else None

    def _clear(self) -> None:
        with self._lock, self._connect() as conn:
            conn.execute("DELETE FROM session_items WHERE session_id = ?", (self.session_id,))

    # ------------------------------------------------------------------ Session protocol
    async def get_items(self, limit: int | None = None) -> list[Any]:
        return await asyncio.to_thread(self._get, limit)

    async def add_items(self, items: list[Any]) -> None:
        if items:
            await asyncio.to_thread(self._add, list(items))

    async def pop_item(self) -> Any | None:
        return await asyncio.to_thread(self._pop)

    async def clear_session(self) -> None:
        await asyncio.to_thread(self._clear)

    # ------------------------------------------------------------------ compactor side
    def input_filter(self, *, budget: int | None = None, keep_recent: int = 3,
                     collapse_batch: int = COLLAPSE_BATCH) -> CompactorInputFilter:
        """A ``call_model_input_filter`` writing placeholders' originals into this session's file."""
        return CompactorInputFilter(budget=budget, keep_recent=keep_recent, compactor=self.compactor,
                                    collapse_batch=collapse_batch, max_sessions=1)

    def expand(self, ref: str) -> str:
        return self.compactor.expand(ref)


class _Closing:
    """``with conn:`` that closes the connection (sqlite3's own context manager only commits)."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        return self.conn

    def __exit__(self, *exc) -> None:
        if exc[0] is not None and self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
        self.conn.close()
