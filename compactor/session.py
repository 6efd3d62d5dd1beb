"""One conversation, compacted turn after turn.

>>> import compactor
>>> session = compactor.Session(keep_recent=3)                 # doctest: +SKIP
>>> session.append(new_messages)                                # doctest: +SKIP
>>> result = session.compact()                                  # doctest: +SKIP

A :class:`Session` holds the parsed messages, the anchor, the Level 3 counter and the
per-segment results of its conversation, so :meth:`Session.compact` does work proportional to
what was appended since the last call: messages are read once (OpenAI chat messages, the layout
agents hold in memory; other layouts are re-read), each tool output is detected once (also when
it leaves the recent window and collapses), the anchor is merged, not rebuilt, and the output is
spliced: messages nothing changed in are shallow copies of what was appended (their nested
values are shared: treat ``result.messages`` as read-only), and the same copies from one turn to
the next while they are equal to what they copy (a message the caller changed is copied again).
The passes every compaction makes over the whole conversation (the self-check, the continuation
check, the anchor's rendering for its size bound, the token count of the output, the report's
spans and placeholders) start from what the previous compaction kept and look again only at what
changed since.

Without a budget the output equals ``Compactor.compact`` of the same messages under the same
configuration (note that a session built from options collapses older outputs in batches of
:data:`SESSION_COLLAPSE_BATCH`, see ``collapse_batch``). With a budget the
session keeps the prompt-cache prefix stable: when the conversation is over the budget it
compacts to ``low_water`` × budget, then appends new messages untouched (Level 1 only, older
outputs do not collapse further) until the budget is exceeded again.
"""

from __future__ import annotations

import marshal
import operator
from itertools import compress
from typing import Any

from .config import CompactorConfig, make_config
from .errors import BudgetError
from .formats import Document, Edits, load_document
from .formats.base import put_text
from .models import CompactionResult
from .pipeline import Compactor, Conversation, Plan, collapse_boundary, recent_kept
from .segments import segment_index

__all__ = ["SESSION_COLLAPSE_BATCH", "Session"]

# A session built from options collapses older outputs ten at a time (unless told otherwise): on
# the corpus's longest run 96% of turns then extend the previous output byte for byte (86% when
# outputs collapse one per turn) and 98.7% of the cached prefix stays valid. A one-shot
# Compactor keeps collapse_batch=1 (the most compression); ``Session(Compactor(...))`` uses
# that compactor's configuration as it is.
SESSION_COLLAPSE_BATCH = 10
COPY_RUN = 32  # output copies compared with their sources this many at a time (see _copies_of)


class Session:
    """The state of one conversation. ``Session(compactor)`` shares an existing
    :class:`~compactor.Compactor` (its configuration, rules and store); ``Session(**options)``
    builds one."""

    def __init__(self, compactor: Compactor | None = None, *, format: str = "auto",
                 config: CompactorConfig | None = None, **options):
        if compactor is not None and (config is not None or options):
            from .errors import ConfigError

            raise ConfigError("pass either a Compactor or configuration options to Session, not both")
        if compactor is None and config is None:
            options.setdefault("collapse_batch", SESSION_COLLAPSE_BATCH)
        self.compactor = compactor if compactor is not None else Compactor(config, **options)
        self.config = self.compactor.config
        # a session lives for many turns: the token counter's full encoder is built now, not in
        # the middle of a turn (a one-shot compaction of a short text never builds it)
        warm = getattr(self.compactor.counter, "warm", None)
        if warm is not None:
            warm()
        # likewise detection's literal scanners: their engine is loaded now, so the first turns'
        # texts are not scanned the slower way a short process uses (the same lines either way)
        for part in (self.compactor.detector, self.compactor.classifier):  # (and the classifier's prefilter)
            prepare = getattr(part, "prepare", None)
            if prepare is not None:
                prepare()
        self.format = format
        self.conversation = Conversation(self.compactor)
        self._records: list[Any] = []
        self._reader = None          # the incremental chat reader, once the layout is known to be chat
        self._doc: Document | None = None
        self._doc_count = -1         # records the current document was read from
        self._copies: dict[int, tuple[tuple, Any]] = {}  # record index -> (its replaced texts, the edited copy)
        self._seg_index: tuple[dict[str, Any], int] = ({}, 0)  # segment id -> segment, and how many are in
        self._record_segments: dict[int, list[str]] = {}  # record index -> its segments' ids
        # (the segment index it was written with, the replacement map of the last write, record index -> its edited copy)
        self._edited: tuple[dict, dict[str, str] | None, dict[int, Any]] | None = None
        self._base: list[Any] = []  # record index -> the message or its edited copy (what the output copies)
        self._out: list[dict] = []  # record index -> its copy in the last output (see _copies_of)
        self._plan: Plan | None = None  # budget hysteresis: the last fitted compaction's decisions
        self.last: CompactionResult | None = None

    # ------------------------------------------------------------------ public API
    @property
    def messages(self) -> list[Any]:
        """Everything appended so far (the session's own list; do not mutate)."""
        return self._records

    @property
    def level3_count(self) -> int:
        """How many compactions of this conversation needed Level 3 (the exit signal)."""
        return self.conversation.level3_count

    def append(self, messages: Any) -> None:
        """Add one message (a dict) or several (a list) to the conversation."""
        if isinstance(messages, dict):
            self._records.append(messages)
        elif isinstance(messages, (list, tuple)):
            self._records.extend(messages)
        else:
            from .errors import InputError

            raise InputError(f"Session.append takes a message (dict) or a list of messages, not a "
                             f"{type(messages).__name__}")

    def compact(self, **overrides) -> CompactionResult:
        """Compact the conversation so far. Work is proportional to what was appended since the
        previous call (plus the output splice)."""
        if not self._records:
            from .errors import InputError

            raise InputError("empty session: append messages before compacting")
        comp = self.compactor
        config = make_config(comp.config, **overrides) if overrides else comp.config
        doc = self._document(config)
        writer = self._write if self._reader is not None else None
        if config.budget is not None and config.level == "auto":
            result = self._compact_with_budget(doc, config, overrides, writer)
        else:
            result = comp.run(None, self.conversation, doc=doc, writer=writer, **overrides)
        self.last = result
        return result

    # ------------------------------------------------------------------ budget hysteresis
    def _compact_with_budget(self, doc: Document, config: CompactorConfig, overrides: dict,
                             writer) -> CompactionResult:
        """Over the budget: compact to ``low_water`` × budget. Under it: keep the last fitted
        compaction's decisions (what was dropped, the summary, how far outputs collapsed) and
        append the new messages untouched, so the output stays a byte prefix of the next one."""
        comp = self.compactor
        plan = self._plan
        budget = config.budget
        results = len(segment_index(self.conversation, doc.segments).results)
        if plan is not None and plan.config == config:
            state = comp.run_state(None, self.conversation, doc=doc, writer=writer, boundary=plan.boundary,
                                   plan=plan, **overrides)
        else:  # first call: Level 1 may be enough
            boundary = collapse_boundary(results, recent_kept(config, doc.format), config.collapse_batch)
            state = comp.run_state(None, self.conversation, doc=doc, writer=writer, boundary=boundary,
                                   **{**overrides, "budget": None})
            if state.result.report.tokens_after <= budget:
                self._plan = _plan_of(state, config)
        if state.result.report.tokens_after > budget:
            # over: compact well under the budget (low-water mark), so the next turns can append;
            # when the protected evidence does not fit that low, take the lowest mark that fits
            boundary = collapse_boundary(results, recent_kept(config, doc.format), config.collapse_batch)
            marks = sorted({max(1, int(budget * f)) for f in (config.low_water, (config.low_water + 1) / 2, 0.9)
                            if f < 1} | {budget})
            for target in marks:
                try:
                    state = comp.run_state(None, self.conversation, doc=doc, writer=writer, boundary=boundary,
                                           **{**overrides, "budget": target})
                    break
                except BudgetError:
                    if target == budget:
                        raise
            self._plan = _plan_of(state, config)
        # the report states the session's budget, not the low-water mark it compacted to
        report = state.result.report.model_copy(update={"budget": budget})
        return state.result.model_copy(update={"report": report})

    # ------------------------------------------------------------------ read and write
    def _document(self, config: CompactorConfig) -> Document:
        n = len(self._records)
        if self._doc is not None and self._doc_count == n:
            return self._doc
        if self._reader is None and self._doc is None and self.format in ("auto", "openai-chat") \
                and _still_chat(self._records, 0):
            from .formats.openai_chat import ChatReader

            self._reader = ChatReader(())
            self._reader.feed(self._records)
            doc = self._reader.document(self._records, "<session>")
        elif self._reader is not None and _still_chat(self._records, self._reader.count):
            self._reader.feed(self._records)
            doc = self._reader.document(self._records, "<session>")
        else:
            # the new messages are not chat messages (e.g. Anthropic blocks after a first plain
            # message): read the whole conversation again and let detection decide
            self._reader = None
            self._copies.clear()
            self._seg_index = ({}, 0)
            self._record_segments = {}
            self._edited = None
            self._base = []
            self._out = []
            doc = load_document(self._records, format=self.format, max_json_depth=config.max_json_depth)
        self._doc, self._doc_count = doc, n
        return doc

    def _write(self, doc: Document, edits: Edits) -> Any:
        """The chat layout's writer, spliced: a record nothing changed in is a shallow copy of the
        appended message; an edited record is copied once per distinct set of replaced texts."""
        if edits.drop or edits.summary:
            from .formats import get_format

            return get_format(doc.format).write(doc, edits)
        mirrors = doc.state.mirrors
        index = self._index(doc)
        replace = edits.replace
        held = self._edited
        if held is None or held[0] is not index:
            held = self._edited = (index, None, {})
            self._base = []
            self._out = []
        _, last, edited = held
        if edits.touched is not None and replace is last:
            # the same map as the last write, changed since only where the pipeline says
            dirty = {index[sid].origin[0] for sid in edits.touched if sid in index and index[sid].origin}
        else:
            # every record with a replaced text, and every record edited before (its replacements
            # may be gone)
            dirty = {index[sid].origin[0] for sid in replace if sid in index and index[sid].origin}
            dirty.update(edited)
        copies = self._copies
        records = self._records
        base = self._base  # what each record's output is a copy of: the message, or its edited copy
        base.extend(records[len(base):])
        for i in sorted(dirty):
            changes = [(sid, replace[sid]) for sid in self._record_segments[i] if sid in replace]  # in segment order
            if not changes:
                edited.pop(i, None)
                base[i] = records[i]
                continue
            rec = records[i]
            sig = tuple(changes)
            hit = copies.get(i)
            if hit is None or hit[0] != sig:
                data = marshal.loads(marshal.dumps(rec))
                holder = {i: data}
                for sid, text in changes:
                    origin = index[sid].origin
                    put_text(holder, origin, text)
                    for mp in mirrors.get(sid, []):
                        put_text(holder, mp, text)
                hit = copies[i] = (sig, holder[i])
            edited[i] = base[i] = hit[1]
        self._edited = (index, replace, edited)
        if not all(isinstance(rec, dict) for rec in base[len(self._out):]):  # (the new records)
            self._out = []
            return [dict(rec) if isinstance(rec, dict) else rec for rec in base]
        return list(self._copies_of(base))

    def _copies_of(self, base: list[dict]) -> list[dict]:
        """A plain dict copy of each record's output (chat messages are dicts), so a caller that
        changes an output message (a cache marker added to it) changes neither the session's
        messages nor the next turns' output. The copy of the last turn is given again while it is
        still equal to what it copies (compared in one C loop, which takes a value as equal to
        itself): a conversation of hundreds of messages is not copied again on every turn."""
        out = self._out
        n = len(out)
        if n > len(base):
            out.clear()
            n = 0
        # compared a run of COPY_RUN pairs at a time, each in one C loop, and only a run with a
        # difference pair by pair (a whole-list comparison that met a difference near the end,
        # an output collapsed there, would be followed by a second pass over every pair)
        for a in range(0, n, COPY_RUN):
            b = a + COPY_RUN
            if out[a:b] != base[a:b]:
                for i in compress(range(a, min(b, n)), map(operator.ne, out[a:b], base[a:b])):
                    out[i] = dict.copy(base[i])
        out.extend(map(dict.copy, base[n:]))
        return out

    def _index(self, doc: Document) -> dict[str, Any]:
        """Segment id -> segment of the incrementally read document (extended as it grows), and
        the ids of each record's segments (``_record_segments``, in document order)."""
        index, seen = self._seg_index
        segs = doc.segments
        if seen > len(segs) or (seen and segs[seen - 1] is not index.get(segs[seen - 1].id)):
            index, seen = {}, 0
            self._record_segments = {}
        by_record = self._record_segments
        for seg in segs[seen:]:
            index[seg.id] = seg
            if seg.origin:
                by_record.setdefault(seg.origin[0], []).append(seg.id)
        self._seg_index = (index, len(segs))
        return index


def _plan_of(state, config: CompactorConfig) -> Plan:
    return Plan(config=config, boundary=state.boundary, dropped=frozenset(state.dropped), summary=state.summary,
                level=state.level, self_check=state.self_check, texts=tuple(sorted(state.budget_texts.items())))


def _still_chat(records: list[Any], start: int) -> bool:
    """Do the messages appended since ``start`` still read as OpenAI chat messages (what the
    layout's sniffer asks of each message)?"""
    from .formats.openai_chat import not_chat

    return start >= len(records) or not_chat(records[start:]) is None
