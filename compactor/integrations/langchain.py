"""compactor for LangChain v1 agents (``create_agent``): three pieces, use any of them.

- :class:`AnchorSummarizer`: pass as ``SummarizationMiddleware(summarizer=...)``. The
  conversation part being summarised becomes compactor's deterministic anchor (intent, changes,
  decisions, excluded approaches, next steps, key evidence verbatim, user constraints, files)
  instead of an LLM summary: no model call, same input → same text.
- :class:`Level1Edit`: pass in ``ContextEditingMiddleware(edits=[...])``. Once the request is
  over ``trigger`` tokens, old tool results get compactor's Level 1 (benign output becomes a
  semantic placeholder, errors and traces stay verbatim) instead of being cleared to ``[cleared]``.
- :class:`CompactorMiddleware`: a middleware (``wrap_model_call``) that compacts what is sent
  to the model to a token budget (Level 1 → 2 → 3). The agent's state keeps the full history.
  It keeps one :class:`compactor.Session` per conversation (thread), found by content (see
  :mod:`compactor.integrations.sessions`; at most ``max_sessions``, least recently used dropped
  first): each model call compacts only the messages added since the previous one, and once the
  request is over the budget it is compacted well under it, then grows by plain appends until
  the budget is exceeded again, so the sent prefix stays the same (prompt caches stay valid).

Messages are handed to compactor in the OpenAI chat layout (``convert_to_openai_messages``) and
read back with ``convert_to_messages``. Install with ``pip install 'context-compactor[langchain]'``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from compactor import BudgetError, Compactor, CompactorError, to_markdown

from .sessions import DEFAULT_MAX_SESSIONS, SessionPool
from ..lazyre import lazy_re

try:
    from langchain.agents.middleware import AgentMiddleware
    from langchain.agents.middleware.types import ModelRequest, ModelResponse
    from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.messages.utils import convert_to_messages, convert_to_openai_messages
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("the LangChain integration needs langchain 1.x: pip install 'context-compactor[langchain]'") from exc

__all__ = ["AnchorSummarizer", "CompactorMiddleware", "Level1Edit", "to_openai", "from_openai"]

EDIT_STRATEGY = "compactor_level1"


def to_openai(messages: Sequence[BaseMessage], system: BaseMessage | None = None) -> list[dict[str, Any]]:
    """LangChain messages as OpenAI chat messages (the layout compactor reads)."""
    msgs = ([system] if system is not None else []) + list(messages)
    return list(convert_to_openai_messages(msgs))


def from_openai(messages: Sequence[dict[str, Any]]) -> list[AnyMessage]:
    return list(convert_to_messages(list(messages)))


def _compactor(compactor: Compactor | None, **options) -> Compactor:
    return compactor if compactor is not None else Compactor(**options)


_HISTORY = lazy_re(r"\[compactor: anchor of (\d+) earlier messages · ref (c-[0-9a-f]{16})\]")


class AnchorSummarizer:
    """A ``summarizer`` for ``SummarizationMiddleware``: the anchor, rendered as Markdown.

    The messages it replaces are kept in the compactor's store, and the summary ends with their
    reference (``[compactor: anchor of N earlier messages · ref c-…]``). When a later
    summarization meets that summary again, the stored messages take its place, so the new
    anchor is built over the whole conversation (the goal, constraints and dead ends of the
    first turns survive any number of summarizations). If the reference cannot be expanded
    (another store, evicted), the summary message is summarised like any other message.

    Pass ``trim_tokens_to_summarize=None`` to the middleware so compactor sees every message
    it replaces (the anchor is built without a model, so length is no concern).
    """

    def __init__(self, *, compactor: Compactor | None = None, lang: str = "en"):
        self.compactor = _compactor(compactor)
        self.lang = lang

    def _history(self, messages: list[AnyMessage]) -> list[dict[str, Any]]:
        chat: list[dict[str, Any]] = []
        for m in messages:
            hit = _HISTORY.search(m.content) if isinstance(m, HumanMessage) and isinstance(m.content, str) else None
            if hit is not None:
                try:
                    earlier = json.loads(self.compactor.expand(hit.group(2)))
                except (CompactorError, ValueError):
                    earlier = None
                if isinstance(earlier, list) and len(earlier) == int(hit.group(1)):
                    chat.extend(earlier)
                    continue
            chat.extend(to_openai([m]))
        return chat

    def __call__(self, messages: list[AnyMessage]) -> str:
        if not messages:
            return "No previous conversation history."
        chat = self._history(messages)
        result = self.compactor.compact(chat, format="openai-chat", level=1, lang=self.lang)
        if result.anchor is None:  # pragma: no cover - Level 1 always builds the anchor
            raise RuntimeError("compactor built no anchor")
        ref = self.compactor.store.put(json.dumps(chat, ensure_ascii=False, sort_keys=True).encode("utf-8"))
        return to_markdown(result.anchor, lang=self.lang).strip() + f"\n\n[compactor: anchor of {len(chat)} earlier messages · ref {ref}]"


class Level1Edit:
    """A ``ContextEdit`` for ``ContextEditingMiddleware``: Level 1 on old tool results.

    When the request is over ``trigger`` tokens (the middleware's counter), every tool result
    but the newest ``keep`` is replaced by compactor's Level 1 of it, in place. Tool results
    that Level 1 leaves unchanged (errors, traces, short outputs) stay as they are; the
    originals of placeholders stay expandable (``Compactor.expand``) from the compactor's store.
    One :class:`compactor.Session` per conversation (``self.sessions``, at most ``max_sessions``)
    does the work, so each call compacts only the messages added since the previous one; the
    result is the same as a one-shot Level 1.
    """

    def __init__(self, *, trigger: int = 100_000, keep: int = 3, compactor: Compactor | None = None,
                 max_sessions: int = DEFAULT_MAX_SESSIONS):
        self.trigger = trigger
        self.keep = keep
        self.compactor = _compactor(compactor)
        self.sessions = SessionPool(self.compactor, max_sessions)

    def apply(self, messages: list[AnyMessage], *, count_tokens: Callable[[Sequence[BaseMessage]], int]) -> None:
        if count_tokens(messages) <= self.trigger:
            return
        tools = [i for i, m in enumerate(messages) if isinstance(m, ToolMessage)]
        if len(tools) <= self.keep:
            return
        old = set(tools[: len(tools) - self.keep]) if self.keep else set(tools)
        oa = to_openai(messages)
        if len(oa) != len(messages):  # pragma: no cover - the converter is one-to-one
            return
        with self.sessions.lock:
            result = self.sessions.session_for(oa).compact(level=1, keep_recent=self.keep)
        out = result.messages
        if len(out) != len(messages):  # pragma: no cover - Level 1 never drops messages
            return
        for i in sorted(old):
            msg = messages[i]
            new = out[i].get("content")
            if not isinstance(msg.content, str) or not isinstance(new, str) or new == msg.content:
                continue
            messages[i] = msg.model_copy(update={
                "content": new,
                "artifact": None,
                "response_metadata": {**msg.response_metadata,
                                      "context_editing": {"compacted": True, "strategy": EDIT_STRATEGY}},
            })


class CompactorMiddleware(AgentMiddleware):
    """Compact the model request to ``budget`` tokens (compactor's count of the messages).

    Below the budget the request goes through untouched (prompt caches stay valid). Above it,
    compactor escalates Level 1 → 2 → 3: older turns are replaced by the anchor, the newest
    turns, the newest request and the user constraints stay. If even the protected evidence
    does not fit, the Level 1 result is sent (larger than the budget, nothing lost).
    The agent's state is not changed: only what the model is sent.

    Each conversation has its :class:`compactor.Session` (``self.sessions``): over the budget
    the request is compacted to ``low_water`` × budget (0.6 by default), then later calls append
    to that until the budget is exceeded again. Older tool outputs collapse ``collapse_batch``
    at a time.
    """

    def __init__(self, budget: int, *, keep_recent: int = 3, compactor: Compactor | None = None,
                 collapse_batch: int = 1, max_sessions: int = DEFAULT_MAX_SESSIONS):
        super().__init__()
        if budget < 1:
            raise ValueError("budget must be a positive number of tokens")
        self.budget = budget
        self.keep_recent = keep_recent
        self.collapse_batch = collapse_batch
        self.compactor = _compactor(compactor)
        self.sessions = SessionPool(self.compactor, max_sessions)
        self.last_report = None  # the Report of the last compaction, for inspection

    def compact_messages(self, messages: Sequence[BaseMessage]) -> list[AnyMessage] | None:
        """The compacted messages, or ``None`` when they already fit the budget."""
        oa = to_openai(messages)
        options = {"keep_recent": self.keep_recent, "collapse_batch": self.collapse_batch}
        with self.sessions.lock:
            session = self.sessions.session_for(oa)
            try:
                result = session.compact(budget=self.budget, **options)
            except BudgetError:  # the protected evidence alone is over budget: send Level 1, lose nothing
                result = session.compact(**options)
        self.last_report = result.report
        if result.report.tokens_before <= self.budget:
            return None
        return from_openai(result.messages)

    def _rewrite(self, request: ModelRequest) -> ModelRequest:
        if not request.messages:
            return request
        new = self.compact_messages(request.messages)
        if new is None:
            return request
        return request.override(messages=new)

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse | AIMessage:
        return handler(self._rewrite(request))

    async def awrap_model_call(self, request: ModelRequest,
                               handler: Callable[[ModelRequest], Awaitable[ModelResponse]]) -> ModelResponse | AIMessage:
        return await handler(self._rewrite(request))
