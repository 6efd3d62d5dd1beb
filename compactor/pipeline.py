"""The pipeline: one ordered list of named stages over one private, mutable state.

    read → normalise → detect → level1 → anchor → budget → refine → selfcheck → redact → write

Each stage is a method ``_stage_<name>(state)`` of :class:`Compactor`, listed in
:data:`STAGES`; ``Compactor.stages`` is the ordered mapping actually run, so a stage can be
replaced or disabled by name (``comp.stages["refine"] = my_refine``; ``read`` and ``write`` are
required). Only frozen results leave the state.

:class:`Compactor` holds configuration and what is expensive to build (compiled rules, the store,
the token counter) and a memo of per-segment detection keyed by content (a pure function of the
text and the rules, shared safely). What belongs to one conversation (the Level 3 counter, the
incrementally merged anchor, the collapse decisions) lives in a :class:`Conversation`: a fresh one
for every :meth:`Compactor.compact` call, a lasting one in a :class:`~compactor.session.Session`.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from itertools import chain, compress
from typing import Any, Callable

from .collapse.level1 import Level1, SegmentOutcome
from .collapse.store import Store, open_store
from .config import CompactorConfig, make_config
from .detect import DetectResult, Detector
from .engine import Classifier, load_rules
from .formats import Document, Edits, get_format, load_document
from .models import (Anchor, CompactionResult, Diagnostic, Placeholder, Report, Segment, SegmentKind, SelfCheck,
                     Severity, Span)
from .normalize import normalize
from .record import Field, Record
from .segments import OutcomeLog, changed, differing, segment_index
from .tokens import get_counter

__all__ = ["STAGES", "Compactor", "Conversation", "PipelineState", "Plan", "collapse_boundary", "compact",
           "levels_available", "unique_diagnostics"]

STAGES: tuple[str, ...] = ("read", "normalise", "detect", "level1", "anchor", "budget", "refine", "selfcheck",
                           "redact", "write")
REQUIRED_STAGES = frozenset({"read", "write"})
CACHE_SIZE = 20_000
COUNT_CACHE_SIZE = 4096  # token counts a conversation keeps by text (see Compactor._counter_for)


def collapse_boundary(results: int, keep_recent: int, batch: int = 1) -> int:
    """Tool results ``[0, boundary)`` may be collapsed; the newer ones stay raw.

    The last ``keep_recent`` results always stay raw. With ``batch`` > 1 the boundary only moves
    in steps of ``batch`` results, so an agent compacting every turn sees older outputs collapse
    a batch at a time (its previous output stays a byte prefix of the next one in between) instead
    of one per turn. A pure function of the count: a one-shot compaction and a session agree, and
    whatever the count, the newest ``keep_recent`` are never before the boundary (a lone output is
    not collapsed to come back raw once a second one arrives)."""
    if not keep_recent:
        return results
    return (max(0, results - keep_recent) // max(1, batch)) * max(1, batch)


def recent_kept(config: CompactorConfig, doc_format: str) -> int:
    """How many of the newest tool outputs stay raw: ``config.keep_recent`` in a conversation;
    none in a plain-text document (a log), which is one output with no newer one to keep it for."""
    return 0 if doc_format == "text" else config.keep_recent


class Plan(Record, plain=True, frozen=True):
    """The decisions of a fitted compaction, re-applied as they are by a session under its budget
    (what was dropped, the summary, how far outputs collapsed): new messages are appended."""

    config: CompactorConfig
    boundary: int
    dropped: frozenset[str]
    summary: str | None
    level: int
    self_check: SelfCheck | None
    texts: tuple[tuple[str, str], ...] = ()  # segment texts the budget rewrote (a condensed request)


class Conversation:
    """What belongs to one conversation, never to a configuration: the Level 3 counter (the exit
    signal), the incrementally merged anchor, per-segment detection and Level 1 results. The
    budget stage reads the shared machinery (token counter, store) through it."""

    def __init__(self, compactor: "Compactor"):
        self.config = compactor.config
        self.counter = compactor.counter
        self.store = compactor.store
        self.level3_count = 0
        self._policy_anchor_cache = None  # the budget stage's incrementally merged anchor
        self.harden_memo = None  # Level 1's older-output pass, resumed on the settled prefix
        self.text_memo = None  # the self-check's normalised texts
        self.bound_memo = None  # (bound, the anchor, its bounded form) of the last compaction
        # (the segments' SegmentIndex.mark, normalised texts, detections) of the last compaction (the
        # maps grow in place); detection depends on no per-call option (the detector is the Compactor's)
        self.detect_memo = None
        self.level1_memo = None  # the last Level 1 pass (per-segment outcomes)
        self.tokens_before = None  # (the segments' SegmentIndex.mark, their tokens) of the last compaction
        self.continuation_memo = None  # what the continuation check read of each segment
        self.span_memo = None  # the protected spans, per segment
        self.segment_index = None  # lists over the segments (tool results, ids), extended as they grow
        self.count_memo = None  # (the written texts, their token counts) of the last compaction
        self.replace_memo = None  # (SegmentIndex.mark, the replaced texts) of a session's last spliced write
        self.render_memo = None  # the anchor's rendered sections (its size bound renders it every turn)
        self.placeholder_memo = None  # (placeholders, their keys, kept or not, dropped ids, kept keys) of the last report
        self.count_cache = None  # text -> its token count (the last few thousand counted)
        self.outcome_log = None  # the Level 1 outcomes by position, and where each run changed them

    def memo(self, name: str, make):
        """The conversation's memo NAME (one of the fields above), made by ``make()`` the first time."""
        found = getattr(self, name)
        if found is None:
            found = make()
            setattr(self, name, found)
        return found


class OverTime(Exception):
    """The compaction ran past its time limit (``config.time_limit``); ``args[0]``: where."""


class PipelineState(Record, plain=True, frozen=False):
    """Private, mutable working state of one compaction. Only frozen results leave it."""

    doc: Document
    config: CompactorConfig
    conversation: Conversation | None = None
    source: Any = None                      # what ``read`` reads (when ``doc`` is not given)
    format: str = "auto"
    todo: list[Segment] = Field(default_factory=list)              # segments whose detection is not memoised
    normalized: dict[str, str] = Field(default_factory=dict)       # segment id -> normalised text (todo only)
    detections: dict[str, DetectResult] = Field(default_factory=dict)
    outcomes: dict[str, SegmentOutcome] = Field(default_factory=dict)
    texts: dict[str, str] = Field(default_factory=dict)  # segment id -> current text
    dropped: set[str] = Field(default_factory=set)
    summary: str | None = None
    anchor: Anchor | None = None
    full_anchor: Anchor | None = None  # the anchor stage's anchor of the whole original (the budget stage's input)
    level: int = 0
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    placeholders: list[Placeholder] = Field(default_factory=list)
    stages: list[str] = Field(default_factory=list)
    self_check: SelfCheck | None = None
    exit_signal: bool = False
    recommend_new_session: bool = False
    handoff: str | None = None
    level1: Level1 | None = None
    cache_tag: str = ""
    budget_info: dict[str, Any] = Field(default_factory=dict)  # the budget stage's report fields (floor, cut, tokens sent)
    budget_texts: dict[str, str] = Field(default_factory=dict)  # segment texts the budget rewrote (a condensed request)
    boundary: int | None = None  # collapse boundary (count of tool results); None: from the config
    plan: Plan | None = None  # re-apply these decisions instead of running Level 2/3
    redacted: dict[str, int] = Field(default_factory=dict)
    redactor: Any = None
    refined: bool = False
    writer: Callable[[Document, Edits], Any] | None = None  # a session's incremental writer
    llm_report: dict[str, Any] | None = None
    result: CompactionResult | None = None
    deadline: float | None = None  # time.monotonic() past which the input passes through (config.time_limit)
    _spans_for: tuple | None = Field(default=None, repr=False)  # what the span memo was last brought up to date with

    def check_time(self, where: str) -> None:
        """Raise :class:`OverTime` when the call's time limit has passed."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise OverTime(where)

    @property
    def segments(self) -> list[Segment]:
        return self.doc.segments

    def spans(self, *, copy: bool = True) -> list[Span]:
        """The protected spans of every segment, in document order. ``copy=False``: the
        conversation's own list when it keeps one (read it during this compaction only, never
        change it: the next compaction brings it up to date in place)."""
        memo = self._span_memo()
        if memo is not None:
            return list(memo.spans) if copy else memo.spans
        out: list[Span] = []
        for s in self.doc.segments:
            o = self.outcomes.get(s.id)
            if o is not None:
                out.extend(o.spans)
        return out

    def spans_sorted(self) -> list[Span]:
        """The protected spans ordered by (segment index, start, rule id), as the report lists them."""
        memo = self._span_memo()
        if memo is not None and memo.ordered:
            if memo.sorted is None:
                memo.sorted = list(chain.from_iterable(memo.parts))
            return list(memo.sorted)
        index = {s.id: s.index for s in self.doc.segments}
        return sorted(self.spans(), key=lambda s: (index.get(s.segment_id, -1), s.start, s.rule_id))

    def _span_memo(self) -> "_SpanMemo | None":
        conv = self.conversation
        if conv is None:
            return None
        memo = conv.memo("span_memo", _SpanMemo)
        segs = self.doc.segments
        # brought up to date once per compaction: after the Level 1 stage no stage writes the
        # outcomes (checked again only if the segment list or the outcomes dict was swapped)
        seen = self._spans_for
        if seen is None or seen[0] is not segs or seen[1] is not self.outcomes or seen[2] != len(segs) \
                or seen[3] != len(self.outcomes):
            memo.update(segs, segment_index(conv, segs), self.outcomes, conv.outcome_log)
            self._spans_for = (segs, self.outcomes, len(segs), len(self.outcomes))
        return memo


class _SpanMemo:
    """A conversation's protected spans, kept per segment and extended from the first segment
    whose Level 1 outcome changed (a session's segments and outcomes are the same objects from
    turn to turn: nothing to compare by content)."""

    def __init__(self) -> None:
        self.mark: tuple[int, int] | None = None  # the segments it holds (SegmentIndex.mark)
        self.outs: list[Any] = []
        self.ends: list[int] = []  # spans through each segment
        self.spans: list[Span] = []
        self.parts: list[list[Span]] = []  # each segment's spans by (start, rule id)
        self.ordered = True  # every span names its own segment and segment indexes are positions
        self.sorted: list[Span] | None = None  # ``parts`` flattened, while they stay as they are
        self.runs: int | None = None  # the outcome log's runs when it was last brought up to date

    def update(self, segs: list[Segment], index, outcomes: dict[str, Any], log: "OutcomeLog | None" = None) -> None:
        old_outs = self.outs
        n = len(old_outs) if index.extends(self.mark) else 0
        since = log.since(self.runs, index) if log is not None and n and log.outs is not None else None
        if since is not None and len(log.outs) == len(segs):
            # the Level 1 stage says from where the outcomes may differ: the rest is the same objects
            k = min(n, since)
            if k < n:
                moved = changed(old_outs[k:n], log.outs[k:n])
                k = k + moved[0] if moved else n
            outs = log.outs
            del old_outs[k:]
            old_outs.extend(outs[k:])  # the outcomes as they are now, brought up to date from k
        else:
            outs = list(map(outcomes.get, index.ids))
            k = min([n, len(segs), *changed(old_outs, outs)[:1]]) if n else 0
            self.outs = outs
        self.runs = log.runs if log is not None else None
        if k == n == len(segs):
            return
        end = self.ends[k - 1] if k else 0
        del self.spans[end:], self.ends[k:], self.parts[k:]
        if self.sorted is not None:  # the flattened parts through segment k - 1 hold: ``end`` spans
            del self.sorted[end:]
        if not k:
            self.ordered = True
        for i in range(k, len(segs)):
            o = outs[i]
            sp = o.spans if o is not None else ()
            self.spans.extend(sp)
            self.ends.append(len(self.spans))
            seg = segs[i]
            if seg.index != i or any(x.segment_id != seg.id for x in sp):
                self.ordered = False
            self.parts.append(sorted(sp, key=_span_order) if len(sp) > 1 else list(sp))
        if self.sorted is not None:
            self.sorted.extend(chain.from_iterable(self.parts[k:]))
        self.mark = index.mark()


def _span_order(sp: Span) -> tuple:
    return (sp.start, sp.rule_id)


class _Level1Memo:
    """A conversation's last Level 1 pass: per-segment outcomes and where each segment's
    diagnostics and placeholders end (counted from the stage's own first one)."""

    def __init__(self, tag: tuple, boundary: int):
        self.tag = tag
        self.boundary = boundary
        self.mark: tuple[int, int] | None = None  # the segments it holds (SegmentIndex.mark)
        self.outcomes: dict[str, SegmentOutcome] = {}
        self.texts: dict[str, str] = {}
        self.diagnostics: list[Diagnostic] = []
        self.placeholders: list[Placeholder] = []
        self.diag_at: list[int] = []
        self.ph_at: list[int] = []
        self.level_at: list[int] = []


# options a Compactor acts on when it is built; a call cannot change them
BUILD_OPTIONS = ("rules", "encoding", "store")


def _detect_key(seg: Segment) -> tuple:
    # spans carry the segment id and step id: both are part of the key
    return (seg.text, seg.role.value, seg.id, seg.step_id)


class Compactor:
    """Configuration plus the compiled machinery. Build once, call :meth:`compact` as often as you
    like: every call is a conversation of its own (for an agent compacting every turn, a
    :class:`~compactor.Session` does only the new work)."""

    def __init__(self, config: CompactorConfig | None = None, *, store: Store | str | None = None, **options):
        if isinstance(store, (str, os.PathLike)):
            options["store"] = str(store)
            store = None
        self.config = make_config(config, **options)
        # the stages' module-level patterns are rebuilt from the engine's cached programs on first use
        from .engine.programs import compile_pattern
        from .lazyre import use_compiler

        use_compiler("regex", compile_pattern)
        self.ruleset = load_rules(list(self.config.rules))
        self.detector = Detector(self.ruleset)
        self.classifier = Classifier(self.ruleset.records("classify"))
        self.store = store if store is not None else open_store(self.config.store)
        self.counter = get_counter(self.config.encoding)
        self.level1 = Level1(self.detector, self.classifier, self.store, self.config)
        # memo of pure per-segment functions (content-keyed; never conversation state)
        self._detected: OrderedDict[tuple, tuple[str, DetectResult]] = OrderedDict()
        self._collapsed: OrderedDict[tuple, SegmentOutcome] = OrderedDict()
        self._anchor_memo = None
        self.stages: dict[str, Callable[[PipelineState], None]] = {name: getattr(self, f"_stage_{name}")
                                                                    for name in STAGES}

    # ------------------------------------------------------------------ public API
    def compact(self, data: Any, *, format: str = "auto", **overrides) -> CompactionResult:
        """Compact a path, text, bytes, parsed messages or a Document. Stateless: nothing of this
        conversation is kept for the next call. ``overrides`` are options of this call only; the
        ones the Compactor acts on when built (``rules``, ``encoding``, ``store``) cannot be changed
        here (:class:`~compactor.ConfigError`)."""
        conversation = Conversation(self)
        conversation._policy_anchor_cache = self._anchor_memo  # a pure memo (keyed by every segment)
        result = self.run(data, conversation, format=format, **overrides)
        memo = conversation._policy_anchor_cache
        # without the anchor's working state: that is continued (mutated) by the next merge, which
        # only a conversation of its own may do (calls of one Compactor may run side by side)
        self._anchor_memo = (*memo[:4], None) if memo is not None and len(memo) >= 5 else memo
        return result

    def run(self, data: Any, conversation: Conversation, **kw) -> CompactionResult:
        """Run the stage list once for ``conversation`` (the low-level entry :class:`Session` uses)."""
        return self.run_state(data, conversation, **kw).result

    def run_state(self, data: Any, conversation: Conversation, *, format: str = "auto", doc: Document | None = None,
                  boundary: int | None = None, writer: Callable[[Document, Edits], Any] | None = None,
                  plan: Plan | None = None, **overrides) -> PipelineState:
        config = make_config(self.config, **overrides) if overrides else self.config
        if config is not self.config:
            fixed = [f for f in BUILD_OPTIONS if f in overrides and getattr(config, f) != getattr(self.config, f)]
            if fixed:
                from .errors import ConfigError

                raise ConfigError(f"option {fixed[0]} is set when the Compactor is built (it compiles the rules, opens "
                                  f"the store and the tokenizer then): pass it to Compactor(...) or Session(...), "
                                  f"not to a call")
        state = PipelineState(doc, config, conversation, source=data, format=format, boundary=boundary,
                              writer=writer, plan=plan)
        if config is self.config:
            state.level1, state.cache_tag = self.level1, ""
        else:
            state.level1 = Level1(self.detector, self.classifier, self.store, config)
            state.cache_tag = config.model_dump_json()
        idx = getattr(conversation, "segment_index", None)
        if idx is not None:
            idx.forget()  # the segment lists are checked again once per compaction
        missing = REQUIRED_STAGES - set(self.stages)
        if missing:
            from .errors import ConfigError

            raise ConfigError(f"the pipeline needs the stage(s) {', '.join(sorted(missing))}")
        if config.time_limit is not None:
            state.deadline = time.monotonic() + config.time_limit
        try:
            for name, stage in self.stages.items():
                if name == "write":
                    state.check_time("before writing")
                stage(state)
                if name != "write":
                    state.check_time(f"after the {name} stage")
        except OverTime as exc:
            self._pass_through(state, exc.args[0])
        assert state.result is not None
        return state

    def _pass_through(self, state: PipelineState, where: str) -> None:
        """The result of a compaction that ran past its time limit: the input as it is."""
        doc = state.doc
        if doc is None:  # (the limit is checked once the input is read)
            raise AssertionError("no document to pass through")
        conv = state.conversation
        if conv is not None:
            conv.replace_memo = None  # the next write of a session rewrites every record
        replace, redacted = _raw_texts(doc, state.config.redact)  # what the caller asked never to send stays out
        writer = state.writer or get_format(doc.format).write
        messages = writer(doc, Edits(replace=replace, in_place=doc.disposable and state.writer is None))
        doc.disposable = False
        before = self._tokens_before(state)
        limit = state.config.time_limit
        diag = Diagnostic(code="time-limit", severity="warning",
                          message=f"compaction ran past its time limit of {limit:g} s ({where}): the input "
                                  f"passes through as it is" + (" (secrets redacted)" if redacted else ""))
        report = Report(format=doc.format, tokens_before=before, tokens_after=before, token_counter=self.counter.name,
                        level=0, levels_available=levels_available(), budget=state.config.budget,
                        diagnostics=unique_diagnostics([*state.diagnostics, diag]), segments=len(doc.segments),
                        stages=[*state.stages, "time-limit"], redacted=redacted)
        state.result = CompactionResult(format=doc.format, messages=messages, anchor=None, report=report,
                                        layout=doc.style, unchanged=not replace)

    def level1_texts(self, doc: Document) -> dict[str, str]:
        """Segment id -> its Level 1 text under this configuration (memoised per segment)."""
        state = self._level1_only(doc)
        return dict(state.texts)

    def level1_spans(self, doc: Document) -> list[Span]:
        """The protected spans of every segment, in document order (memoised per segment)."""
        return self._level1_only(doc).spans()

    def expand(self, ref: str) -> str:
        return self.store.get(ref).decode("utf-8", errors="surrogatepass")

    def scan(self, text: str, *, role: str = "tool", segment_id: str | None = None, step_id: str | None = None,
             diagnostics: list[Diagnostic] | None = None) -> list[Span]:
        """The protected spans of one text (what Level 1 keeps verbatim). A rule that ran out of
        time is reported in ``diagnostics`` when a list is given."""
        det = self.detector.detect(normalize(text), role=role, segment_id=segment_id, step_id=step_id)
        if diagnostics is not None:
            diagnostics.extend(det.diagnostics)
        return list(det.spans)

    def _level1_only(self, doc: Document) -> PipelineState:
        state = PipelineState(doc, self.config, Conversation(self), level1=self.level1)
        for name in ("normalise", "detect", "level1"):
            self.stages[name](state)
        return state

    def _tokens_before(self, state: PipelineState) -> int:
        """Tokens of the original segments; a conversation adds only its new segments' count."""
        segs = state.segments
        conv = state.conversation
        held = getattr(conv, "tokens_before", None)
        start, total = 0, 0
        idx = segment_index(conv, segs) if conv is not None else None
        if held is not None and idx is not None and idx.extends(held[0]):
            start, total = held[0][1], held[1]
        total += sum(map(self._counter_for(conv), [s.text for s in segs[start:]]))
        if idx is not None:
            conv.tokens_before = (idx.mark(), total)
        return total

    def _counter_for(self, conv: "Conversation | None") -> Callable[[str], int]:
        """The token count, remembering a conversation's last few thousand counts by text (a new
        message is counted as read and, unchanged, as written: once)."""
        if conv is None:
            return self.counter.count
        cache = conv.memo("count_cache", dict)
        count = self.counter.count

        def counted(text: str) -> int:
            n = cache.get(text)
            if n is None:
                if len(cache) >= COUNT_CACHE_SIZE:
                    cache.clear()
                n = cache[text] = count(text)
            return n

        return counted

    def _count_pieces(self) -> Callable[[str], int]:
        """The token count for texts re-rendered every turn (the anchor): piece by piece, cached."""
        fn = self.__dict__.get("_pieces")
        if fn is None:
            from .tokens import piecewise

            fn = self._pieces = piecewise(self.counter)
        return fn

    # ------------------------------------------------------------------ stages
    def _stage_read(self, state: PipelineState) -> None:
        if state.doc is None:
            state.doc = load_document(state.source, format=state.format, max_json_depth=state.config.max_json_depth)
            if not isinstance(state.source, (list, dict, Document)):
                state.doc.disposable = True  # parsed here from a path, text or bytes: no caller holds its data
        state.source = None
        state.diagnostics.extend(state.doc.diagnostics)

    def _stage_normalise(self, state: PipelineState) -> None:
        """Normalise (ANSI, CR redraws, CRLF) once per segment whose detection is not memoised.
        A conversation's segments seen by its previous compaction are taken as they were."""
        memo = self._detected
        segs = state.segments
        start = 0
        held = getattr(state.conversation, "detect_memo", None)
        if held is not None and segment_index(state.conversation, segs).extends(held[0]):
            start = held[0][1]
            # the conversation's maps, extended in place with the new segments (no stage writes
            # an entry of a segment seen before)
            state.normalized = held[1]
            state.detections = held[2]
        for seg in segs[start:] if start else segs:
            if seg.kind == SegmentKind.tool_call:
                continue  # the action always stays verbatim: nothing to protect or collapse in it
            hit = memo.get(_detect_key(seg))
            if hit is not None:
                state.normalized[seg.id], state.detections[seg.id] = hit
            else:
                state.todo.append(seg)
                state.normalized[seg.id] = normalize(seg.text)

    def _stage_detect(self, state: PipelineState) -> None:
        from .engine import TextView

        memo = self._detected
        check = state.check_time if state.deadline is not None else None
        for seg in state.todo:
            if check is not None:
                check("while detecting")
            norm = state.normalized[seg.id]
            det = state.level1.detector.detect_view(TextView(norm), role=seg.role.value, segment_id=seg.id,
                                                    step_id=seg.step_id)
            state.detections[seg.id] = det
            memo[_detect_key(seg)] = (norm, det)
            if len(memo) > CACHE_SIZE:
                memo.popitem(last=False)
        state.todo = []
        conv = state.conversation
        if conv is not None:  # the maps (the memo's own, or fresh ones) are the conversation's from now on
            conv.detect_memo = (segment_index(conv, state.segments).mark(), state.normalized,
                                state.detections)

    def _stage_level1(self, state: PipelineState) -> None:
        cfg = state.config
        segs = state.segments
        idx = segment_index(state.conversation, segs)
        results = idx.results
        boundary = state.boundary
        if boundary is None:
            boundary = collapse_boundary(len(results), recent_kept(cfg, state.doc.format), cfg.collapse_batch)
        state.boundary = boundary
        apply = cfg.level == "auto" or (isinstance(cfg.level, int) and cfg.level >= 1)
        memo = self._collapsed
        prose = state.doc.format == "text"  # plain text: paragraphs of human or assistant prose stay
        # a conversation's previous compaction: its per-segment outcomes hold up to the first
        # segment whose collapse decision moved (the outputs the boundary passed since)
        conv = state.conversation
        held: _Level1Memo | None = getattr(conv, "level1_memo", None)
        tag = (state.cache_tag, apply, prose)
        start = 0
        seen = 0  # segments of the last pass: their outcome holds unless their collapse decision moved
        lo = hi = 0
        if held is not None and held.tag == tag and idx.extends(held.mark):
            start = seen = held.mark[1]
            lo, hi = sorted((held.boundary, boundary))
            if lo < hi and lo < len(results):
                first = results[lo]
                pos = first.index if 0 <= first.index < len(segs) and segs[first.index] is first else 0
                start = min(start, pos)
            if start:
                state.outcomes.update(held.outcomes)
                state.texts.update(held.texts)
                state.diagnostics.extend(held.diagnostics[:held.diag_at[start - 1]])
                state.placeholders.extend(held.placeholders[:held.ph_at[start - 1]])
                state.level = max(state.level, held.level_at[start - 1])
        if conv is not None:
            d0, p0 = len(state.diagnostics), len(state.placeholders)
            new = _Level1Memo(tag, boundary)
            if start:
                new.diag_at = held.diag_at[:start]
                new.ph_at = held.ph_at[:start]
                new.level_at = held.level_at[:start]
        pos = idx.result_pos
        kept = held.outcomes if seen and not idx.rebinds else None  # (an id naming two segments: not by id)
        for i, seg in enumerate(segs[start:] if start else segs, start):
            if i < seen and kept is not None and not lo <= pos.get(seg.id, -1) < hi and seg.id in kept:
                o = kept[seg.id]  # seen last time, and its collapse decision did not move
            elif seg.kind == SegmentKind.tool_call:
                o = SegmentOutcome(seg.text, False)
            else:
                det = state.detections[seg.id]
                # among the outputs before the boundary
                collapse = apply and pos.get(seg.id, boundary) < boundary and not seg.meta
                if not collapse:
                    o = SegmentOutcome(seg.text, False, list(det.spans), [], list(det.diagnostics))
                else:
                    key = (state.cache_tag, *_detect_key(seg), seg.command, seg.exit_code, prose)
                    o = memo.get(key)
                    if o is None:
                        state.check_time("while collapsing")
                        o = state.level1.collapse_detected(seg.text, state.normalized[seg.id], det,
                                                           role=seg.role.value, segment_id=seg.id,
                                                           command=seg.command, exit_code=seg.exit_code,
                                                           prose=prose)
                        memo[key] = o
                        if len(memo) > CACHE_SIZE:
                            memo.popitem(last=False)
                    else:
                        memo.move_to_end(key)
            state.outcomes[seg.id] = o
            state.texts[seg.id] = o.text
            state.diagnostics.extend(o.diagnostics)
            state.placeholders.extend(o.placeholders)
            if o.changed:
                state.level = max(state.level, 1)
            if conv is not None:
                new.diag_at.append(len(state.diagnostics) - d0 + (held.diag_at[start - 1] if start else 0))
                new.ph_at.append(len(state.placeholders) - p0 + (held.ph_at[start - 1] if start else 0))
                new.level_at.append(state.level)
        if conv is not None:
            new.mark = idx.mark()
            new.outcomes = state.outcomes  # shared: no stage after this one writes the outcomes
            new.texts = dict(state.texts)  # copied: the later stages rewrite texts
            nd = new.diag_at[-1] if new.diag_at else 0
            npl = new.ph_at[-1] if new.ph_at else 0
            new.diagnostics = state.diagnostics[len(state.diagnostics) - nd:] if nd else []
            new.placeholders = state.placeholders[len(state.placeholders) - npl:] if npl else []
            conv.level1_memo = new
            conv.memo("outcome_log", OutcomeLog).record(idx, state.outcomes, start)
        if apply:
            from .collapse.older import HardenMemo, harden

            conv = state.conversation
            memo = None if conv is None else conv.memo("harden_memo", HardenMemo)
            harden(state, self.store, self.counter, memo)
        state.normalized = {}
        state.stages.append("level1" if apply else "detect")

    def _stage_anchor(self, state: PipelineState) -> None:
        """The anchor of the whole original, merged incrementally into the conversation's previous
        one when its segments are a prefix of these. A failure here is not fatal: the budget stage
        meets it again and keeps the Level 1 result with a diagnostic."""
        if state.config.level == 0:
            return
        from .budget import escalate as esc

        try:
            state.anchor = state.full_anchor = esc.full_anchor(state.conversation, state)
        except Exception:  # noqa: BLE001 - reported by the budget stage, which fails toward preservation
            state.anchor = state.full_anchor = None

    def _stage_budget(self, state: PipelineState) -> None:
        """Level 2 (anchor) and Level 3 (budget), with the self-check of every candidate."""
        plan = state.plan
        if plan is not None:
            state.dropped = set(plan.dropped)
            state.summary = plan.summary
            state.level = max(state.level, plan.level)
            state.self_check = plan.self_check
            for sid, text in plan.texts:
                if sid in state.texts:
                    state.texts[sid] = state.budget_texts[sid] = text
            state.stages.append("budget-kept")
            return
        from .budget.escalate import escalate

        escalate(state.conversation, state)

    def _stage_refine(self, state: PipelineState) -> None:
        """The optional LLM pass: polish the anchor, guarded; on any failure the deterministic
        anchor stays and the report says why. It works on this state (the segments as read and
        their Level 1 texts): nothing is re-read or compacted again."""
        config = state.config
        if not config.llm:
            return
        from .llm import refine_from_config, refine_inputs

        anchor = state.anchor
        if anchor is None:
            from .anchor import build_anchor

            anchor = build_anchor(state.segments, state.spans(), objective=config.objective)
        level1 = {sid: o.text for sid, o in state.outcomes.items()}
        inputs = refine_inputs(state.segments, level1, anchor, counter=self.counter, objective=config.objective)
        outcome = refine_from_config(inputs.anchor, inputs.steps, inputs.context, inputs.objective, None, config,
                                     counter=self.counter)
        state.anchor = outcome.anchor
        state.refined = outcome.anchor != anchor
        state.diagnostics.extend(outcome.diagnostics)
        state.llm_report = outcome.report.model_dump(mode="json")
        state.stages.append("refine")

    def _stage_selfcheck(self, state: PipelineState) -> None:
        """The seed-001 self-check. The budget stage checks every candidate it renders; what is
        left to check here is an anchor the refine stage changed (it must still hold every
        protected item: anything missing is put back)."""
        if state.anchor is not None:
            # the continuation questions: what the anchor cannot answer is back-filled from the
            # trajectory, and the self-check report says so
            from .anchor.continuation import ContinuationMemo, continuation_check

            conv = state.conversation
            memo = None if conv is None else conv.memo("continuation_memo", ContinuationMemo)
            index = None if conv is None else segment_index(conv, state.segments)
            state.anchor, filled = continuation_check(state.anchor, state.segments, memo, index)
            if filled and state.self_check is not None:
                state.self_check = state.self_check.model_copy(update={
                    "backfilled": [*state.self_check.backfilled, *(f"continuation:{x}" for x in filled)]})
        if state.config.level == 0 or not state.refined:
            return
        from .audit.selfcheck import check_state

        check_state(state, full_anchor=state.anchor)
        state.stages.append("self-check")

    def _stage_redact(self, state: PipelineState) -> None:
        if not state.config.redact:
            return
        from .secrets import Redactor

        red = state.redactor = Redactor()
        for seg in state.segments:
            if seg.id in state.dropped:
                continue
            new, found = red.redact(state.texts[seg.id])
            if found:
                state.texts[seg.id] = new
        if state.summary:
            state.summary, _ = red.redact(state.summary)
        if state.anchor is not None:
            state.anchor, _ = _redact_anchor(state.anchor, red)
        if state.handoff:
            from .secrets import redact

            state.handoff, _ = redact(state.handoff)
        state.redacted = red.counts()
        if state.redacted:
            state.diagnostics.append(Diagnostic(
                code="secrets-redacted", severity=Severity.info,
                message=f"{sum(state.redacted.values())} secret(s) redacted with typed placeholders"))

    def _stage_write(self, state: PipelineState) -> None:
        doc = state.doc
        conv = state.conversation
        idx = segment_index(conv, doc.segments)
        ids = idx.ids
        texts = state.texts
        vals = list(map(texts.__getitem__, ids))
        dropped = state.dropped
        orig = idx.texts
        # the positions whose text differs from the last write's (the token counts and a
        # session's replacements are brought up to date there only)
        held = getattr(conv, "count_memo", None)
        moved = differing(held[0], vals) if held is not None else None
        spliced = conv is not None and state.writer is not None and not dropped and not state.summary
        last = getattr(conv, "replace_memo", None)
        if conv is not None:
            conv.replace_memo = None  # (set again below, once this write went through)
        if spliced and last is not None and held is not None and not idx.rebinds and idx.extends(last[0]) \
                and last[0][1] == len(held[0]):
            replace = last[1]
            touched = set()
            for i in chain(moved, range(len(held[0]), len(vals))):
                touched.add(ids[i])
                if vals[i] != orig[i]:
                    replace[ids[i]] = vals[i]
                else:
                    replace.pop(ids[i], None)
        else:
            touched = None
            # the texts that are not the original object (found by one identity scan), and of them the changed ones
            replace = {ids[i]: vals[i] for i in changed(orig, vals) if vals[i] != orig[i] and ids[i] not in dropped}
        in_place = doc.disposable and state.writer is None
        edits = Edits(replace=replace, drop=set(state.dropped), summary=state.summary, in_place=in_place,
                      touched=touched)
        count = self._counter_for(conv)
        before = self._tokens_before(state)
        # the tokens of every text, counted again only where the text changed since the last turn
        if held is not None:
            counts = held[1][:len(vals)]
            for i in moved:
                counts[i] = count(vals[i])
            counts.extend(map(count, vals[len(counts):]))
        else:
            counts = list(map(count, vals))
        if conv is not None:
            conv.count_memo = (vals, counts)
            if spliced:
                conv.replace_memo = (idx.mark(), replace)
        after = sum([c for sid, c in zip(ids, counts) if sid not in dropped] if dropped else counts)
        if state.summary:
            after += count(state.summary)
        if after > before:
            # never larger than what came in: the input passes through (redacted when asked), and why
            raw, redacted = _raw_texts(doc, state.config.redact)
            state.diagnostics.append(Diagnostic(
                code="not-smaller", severity=Severity.info,
                message=f"the compacted result ({after} tokens) would be larger than the input ({before} tokens): "
                        f"the input passes through as it is"))
            edits = Edits(replace=raw, in_place=in_place)
            after = before if not raw else sum(map(count, [raw.get(sid, t) for sid, t in zip(ids, orig)]))
            state.placeholders, state.level, state.summary, state.dropped = [], 0, None, set()
            state.redacted = redacted
            dropped = state.dropped
            if conv is not None:
                conv.replace_memo = None  # the next write of a session rewrites every record
        writer = state.writer or get_format(doc.format).write
        messages = writer(doc, edits)
        if in_place:
            doc.disposable = False  # its data is the output now
        placeholders = _unique_placeholders(state.placeholders, state.dropped, conv)
        protected = state.spans_sorted()
        red = state.redactor
        if red is not None:
            protected = [sp.model_copy(update={"text": red.redact(sp.text)[0]}) for sp in protected]
            placeholders = [p.model_copy(update={"summary": red.redact(p.summary)[0]}) for p in placeholders]
        report = Report(
            format=doc.format,
            tokens_before=before,
            tokens_after=after,
            token_counter=self.counter.name,
            level=state.level,
            levels_available=levels_available(),
            budget=state.config.budget,
            protected=protected,
            placeholders=placeholders,
            diagnostics=unique_diagnostics(state.diagnostics),
            self_check=state.self_check,
            exit_signal=state.exit_signal,
            recommend_new_session=state.recommend_new_session,
            segments=len(doc.segments),
            stages=state.stages,
            redacted=state.redacted,
            llm=state.llm_report,
            **state.budget_info,
        )
        anchor = state.anchor
        if anchor is not None and state.config.anchor_max_tokens:
            from .anchor import bound_anchor  # the anchor's default size bound, filled by priority

            conv = state.conversation
            key = (state.config.anchor_max_tokens, state.config.lang)
            memo = getattr(conv, "bound_memo", None)
            if memo is not None and memo[0] == key and memo[1] is anchor:
                anchor = memo[2]  # the anchor did not change since the last turn: nor did its bounded form
            else:
                full = anchor
                render_memo = None
                if conv is not None:
                    from .anchor.render import RenderMemo

                    render_memo = conv.memo("render_memo", RenderMemo)
                anchor = bound_anchor(anchor, state.config.anchor_max_tokens, self._count_pieces(),
                                      lang=state.config.lang, memo=render_memo)
                if conv is not None:
                    conv.bound_memo = (key, full, anchor)
        state.result = CompactionResult(format=doc.format, messages=messages, anchor=anchor, report=report,
                                        handoff=state.handoff, layout=doc.style, unchanged=edits.is_empty())


def _raw_texts(doc: Document, redact: bool) -> tuple[dict[str, str], dict[str, int]]:
    """What the input passing through as it is replaces: nothing, or (``redact``) every text with a
    secret, redacted; and the secrets redacted per rule."""
    if not redact:
        return {}, {}
    from .secrets import Redactor

    red = Redactor()
    replace: dict[str, str] = {}
    for seg in doc.segments:
        new, found = red.redact(seg.text)
        if found:
            replace[seg.id] = new
    return replace, red.counts()


def _redact_anchor(anchor: Anchor, redactor=None) -> tuple[Anchor, int]:
    """Redact every string in the anchor (same numbering as the document when a redactor is given)."""
    from .secrets import Redactor

    red = redactor or Redactor()
    count = 0

    def walk(v):
        nonlocal count
        if isinstance(v, str):
            new, found = red.redact(v)
            count += len(found)
            return new
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v

    data = walk(anchor.model_dump(mode="json"))
    return (Anchor.model_validate(data) if count else anchor), count


def levels_available() -> list[int]:
    """The compaction levels the report lists as available."""
    return [1, 2, 3]


def _unique_placeholders(phs: list[Placeholder], dropped: set[str], conv: Conversation | None = None
                         ) -> list[Placeholder]:
    """Each placeholder once (by id and segment), none of a dropped segment, in order. With a
    conversation the verdicts of the last call hold up to the first placeholder that changed."""
    held = getattr(conv, "placeholder_memo", None)
    k = 0
    if held is not None and held[3] == dropped:
        k = min([len(held[0]), len(phs), *differing(held[0], phs)[:1]])
    if k:
        conv.placeholder_memo = None  # (its lists are brought up to date in place, and stored again below)
        keys, keep, seen = held[1], held[2], held[4]
        # the verdicts from k on are made again: their keys leave the set of the ones kept
        seen.difference_update(compress(keys[k:], keep[k:]))
        del keys[k:], keep[k:]
    else:
        keys, keep, seen = [], [], set()
    for p in phs[k:]:
        key = (p.id, p.segment_id)
        ok = key not in seen and p.segment_id not in dropped
        if ok:
            seen.add(key)
        keys.append(key)
        keep.append(ok)
    if conv is not None:
        conv.placeholder_memo = (list(phs), keys, keep, frozenset(dropped), seen)
    return list(compress(phs, keep))


def unique_diagnostics(diags: list[Diagnostic]) -> list[Diagnostic]:
    """Each diagnostic once (by code, message, rule, segment and position), in order."""
    seen = set()
    out = []
    for d in diags:
        k = (d.code, d.message, d.rule_id, d.segment_id, d.position)
        if k in seen:
            continue
        seen.add(k)
        out.append(d)
    return out


_DEFAULT: dict[str, Compactor] = {}


def compact(data: Any, *, format: str = "auto", config: CompactorConfig | None = None, **options) -> CompactionResult:
    """Compact a trajectory, log or message list: a path, text, bytes, or parsed messages."""
    cfg = make_config(config, **options)
    key = cfg.model_dump_json()
    comp = _DEFAULT.get(key)
    if comp is None:
        if len(_DEFAULT) > 8:
            _DEFAULT.clear()
        comp = _DEFAULT[key] = Compactor(cfg)
    # the compiled machinery is shared; what belongs to a conversation is not: every call is a
    # conversation of its own (a Level 3 in one file never counts towards another's exit signal)
    return comp.compact(data, format=format)
