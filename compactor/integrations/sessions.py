"""One :class:`compactor.Session` per conversation, for integrations that only see messages.

An agent framework's hook (an input filter, a model-call middleware) gets the whole conversation
on every call and usually no id for it. :class:`SessionPool` finds the conversation by content:
a call continues the session whose messages are a prefix of its own (equal message by message),
so only the new messages are appended and compacted, and the output keeps the prefix of the
previous one byte for byte (prompt caches stay valid). A call that is no such extension (another
conversation, or a history that was edited) starts a new session.

Memory is bounded: at most ``max_sessions`` sessions are kept, the least recently used is dropped
first (its next call simply starts again from the full conversation: the output is the same, only
the work is not incremental). Each kept session holds references to its conversation's messages
and the per-message results, so the bound is ``max_sessions`` conversations.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from compactor import Compactor, Session

__all__ = ["DEFAULT_MAX_SESSIONS", "SessionPool"]

#: conversations kept at once by default (least recently used dropped first)
DEFAULT_MAX_SESSIONS = 32


class SessionPool:
    """Sessions sharing one :class:`~compactor.Compactor`, found by conversation prefix."""

    def __init__(self, compactor: Compactor, max_sessions: int = DEFAULT_MAX_SESSIONS):
        if max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        self.compactor = compactor
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[int, Session] = OrderedDict()
        self._next = 0
        self.lock = threading.RLock()  # a Session is not thread-safe: hold it around session use
        self.reused = 0  # calls that continued an existing session (for inspection and tests)
        self.started = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def session_for(self, messages: Sequence[Any]) -> Session:
        """The session of this conversation with ``messages`` appended (a new one if none
        continues it). Call with :attr:`lock` held when threads share the pool."""
        n_msgs = len(messages)
        for key in reversed(self._sessions):
            s = self._sessions[key]
            old = s.messages
            n = len(old)
            if n == 0 or n > n_msgs or old[0] != messages[0] or old[n - 1] != messages[n - 1]:
                continue
            if any(old[i] != messages[i] for i in range(1, n - 1)):
                continue
            self._sessions.move_to_end(key)
            if n < n_msgs:
                s.append(list(messages[n:]))
            self.reused += 1
            return s
        s = Session(self.compactor)
        s.append(list(messages))
        self._sessions[self._next] = s
        self._next += 1
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        self.started += 1
        return s
