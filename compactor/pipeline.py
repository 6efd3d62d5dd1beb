"""The pipeline: read → normalise/detect → collapse (Level 1) → anchor (Level 2) → budget
(Level 3) → self-check → write.

:class:`Compactor` holds everything that is expensive to build (compiled rules, the store, the
token counter) and a per-segment cache keyed by content hash, so an agent calling
``compact()`` every turn on its growing message list only pays for the new messages.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .collapse.level1 import Level1, SegmentOutcome
from .collapse.store import Store, open_store
from .config import CompactorConfig, make_config
from .detect import Detector
from .engine import Classifier, load_rules
from .formats import Document, Edits, get_format, load_document
from .models import Anchor, CompactionResult, Diagnostic, Placeholder, Report, Segment, SegmentKind, Severity, Span
from .tokens import get_counter

__all__ = ["Compactor", "PipelineState", "compact", "load_document"]

CACHE_SIZE = 20_000


@dataclass
class PipelineState:
    """Private, mutable working state of one compaction. Only frozen results leave it."""

    doc: Document
    config: CompactorConfig
    outcomes: dict[str, SegmentOutcome] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)  # segment id -> current text
    dropped: set[str] = field(default_factory=set)
    summary: str | None = None
    anchor: Anchor | None = None
    level: int = 0
    diagnostics: list[Diagnostic] = field(default_factory=list)
    placeholders: list[Placeholder] = field(default_factory=list)
    stages: list[str] = field(default_factory=list)
    self_check: Any = None
    exit_signal: bool = False
    recommend_new_session: bool = False
    handoff: str | None = None
    level1: Any = None
    cache_tag: str = ""

    @property
    def segments(self) -> list[Segment]:
        return self.doc.segments

    def spans(self) -> list[Span]:
        out: list[Span] = []
        for s in self.doc.segments:
            o = self.outcomes.get(s.id)
            if o is not None:
                out.extend(o.spans)
        return out


def _key(*parts: Any) -> tuple:
    """Cache key: the parts themselves (str hashes are cached by Python, so a growing
    conversation re-uses them at no cost)."""
    return parts


class Compactor:
    """Reusable compactor. Build once, call :meth:`compact` as often as you like."""

    def __init__(self, config: CompactorConfig | None = None, *, store: Store | str | None = None, **options):
        if isinstance(store, (str, os.PathLike)):
            options["store"] = str(store)
            store = None
        self.config = make_config(config, **options)
        self.ruleset = load_rules(list(self.config.rules))
        self.detector = Detector(self.ruleset)
        self.classifier = Classifier(self.ruleset.stage("classify"))
        self.store = store if store is not None else open_store(self.config.store)
        self.counter = get_counter(self.config.encoding)
        self.level1 = Level1(self.detector, self.classifier, self.store, self.config)
        self._cache: OrderedDict[tuple, SegmentOutcome] = OrderedDict()
        self._fingerprint = self.ruleset.fingerprint() + self.config.model_dump_json()
        self._conversation = _Conversation(self)  # what compact() calls on this instance share

    @property
    def level3_count(self) -> int:
        """How many compactions on this instance needed Level 3 (the exit signal)."""
        return self._conversation.level3_count

    # ------------------------------------------------------------------ public API
    def compact(self, data: Any, *, format: str = "auto", **overrides) -> CompactionResult:
        return self._compact(data, self._conversation, format=format, **overrides)

    def _compact(self, data: Any, conversation: "_Conversation", *, format: str = "auto",
                 **overrides) -> CompactionResult:
        config = make_config(self.config, **overrides) if overrides else self.config
        doc = load_document(data, format=format, max_json_depth=config.max_json_depth)
        state = PipelineState(doc, config)
        state.diagnostics.extend(doc.diagnostics)
        if config is self.config:
            state.level1, state.cache_tag = self.level1, ""
        else:
            state.level1 = Level1(self.detector, self.classifier, self.store, config)
            state.cache_tag = config.model_dump_json()
        self._level1(state)
        self._higher_levels(state, conversation)
        result = self._finish(state)
        if config.llm:
            result = self._refine(state, result, config)
        return result

    def level1_texts(self, doc: Document) -> dict[str, str]:
        """Segment id -> its Level 1 text under this configuration (cached per segment)."""
        state = PipelineState(doc, self.config)
        state.level1 = self.level1
        self._level1(state)
        return dict(state.texts)

    def level1_spans(self, doc: Document) -> list[Span]:
        """The protected spans of every segment, in document order (cached per segment)."""
        state = PipelineState(doc, self.config)
        state.level1 = self.level1
        self._level1(state)
        return state.spans()

    def expand(self, ref: str) -> str:
        return self.store.get(ref).decode("utf-8", errors="surrogatepass")

    def scan(self, text: str, *, role: str = "tool") -> list[Span]:
        from .normalize import normalize

        return list(self.detector.detect(normalize(text), role=role).spans)

    # ------------------------------------------------------------------ stages
    def _outcome(self, seg: Segment, collapse: bool, state: PipelineState | None = None) -> SegmentOutcome:
        level1 = state.level1 if state is not None and state.level1 is not None else self.level1
        tag = state.cache_tag if state is not None else ""
        key = _key(tag, seg.text, seg.role.value, seg.kind.value, seg.command, seg.exit_code,
                   collapse, seg.id, seg.step_id)
        if seg.kind == SegmentKind.tool_call:
            # the action always stays verbatim: nothing to protect or collapse in it
            return SegmentOutcome(seg.text, False)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        out = level1.collapse(seg.text, role=seg.role.value, segment_id=seg.id, step_id=seg.step_id,
                                   command=seg.command, exit_code=seg.exit_code, collapse=collapse)
        self._cache[key] = out
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return out

    def _level1(self, state: PipelineState) -> None:
        cfg = state.config
        segs = state.segments
        results = [s for s in segs if s.kind == SegmentKind.tool_result]
        recent = {s.id for s in results[len(results) - cfg.keep_recent:]} if cfg.keep_recent and len(results) > 1 else set()
        apply = cfg.level == "auto" or (isinstance(cfg.level, int) and cfg.level >= 1)
        for seg in segs:
            collapse = apply and seg.kind == SegmentKind.tool_result and seg.id not in recent and not seg.meta
            if seg.kind == SegmentKind.tool_call:
                collapse = False
            o = self._outcome(seg, collapse, state)
            state.outcomes[seg.id] = o
            state.texts[seg.id] = o.text
            state.diagnostics.extend(o.diagnostics)
            state.placeholders.extend(o.placeholders)
            if o.changed:
                state.level = max(state.level, 1)
        state.stages.append("level1" if apply else "detect")

    def _higher_levels(self, state: PipelineState, conversation: "_Conversation") -> None:
        """Level 2 (anchor) and Level 3 (budget), when the modules providing them are present."""
        try:
            from .budget.escalate import escalate
        except ImportError:
            return
        escalate(conversation, state)

    def _refine(self, state: PipelineState, result: CompactionResult, config: CompactorConfig) -> CompactionResult:
        """The optional LLM pass: polish the anchor, guarded; on any failure the deterministic
        anchor stays and the report says why. It works on the state this compaction built (the
        segments as read and their Level 1 texts): nothing is re-read or compacted again."""
        from .llm import refine_from_config, refine_inputs

        anchor = result.anchor
        if anchor is None:
            from .anchor import build_anchor

            anchor = build_anchor(state.segments, state.spans(), objective=config.objective)
        level1 = {sid: o.text for sid, o in state.outcomes.items()}
        inputs = refine_inputs(state.segments, level1, anchor, counter=self.counter, objective=config.objective)
        outcome = refine_from_config(inputs.anchor, inputs.steps, inputs.context, inputs.objective, None, config,
                                     counter=self.counter)
        anchor = outcome.anchor
        if config.redact:
            anchor, _ = _redact_anchor(anchor)
        report = result.report.model_copy(update={
            "diagnostics": _unique_diags([*result.report.diagnostics, *outcome.diagnostics]),
            "llm": outcome.report.model_dump(mode="json"),
        })
        return result.model_copy(update={"anchor": anchor, "report": report})

    def _finish(self, state: PipelineState) -> CompactionResult:
        doc = state.doc
        fmt = get_format(doc.format)
        originals = {s.id: s.text for s in doc.segments}
        replace = {sid: t for sid, t in state.texts.items()
                   if sid not in state.dropped and t != originals[sid]}
        redacted: dict[str, int] = {}
        summary = state.summary
        anchor = state.anchor
        if state.config.redact:
            from .secrets import Redactor

            red = Redactor()
            for seg in doc.segments:
                if seg.id in state.dropped:
                    continue
                text = replace.get(seg.id, seg.text)
                new, found = red.redact(text)
                if found:
                    replace[seg.id] = new
                    state.texts[seg.id] = new
            if summary:
                summary, _ = red.redact(summary)
            redacted = red.counts()
            if anchor is not None:
                anchor, _ = _redact_anchor(anchor, red)
            if redacted:
                state.diagnostics.append(Diagnostic(
                    code="secrets-redacted", severity=Severity.info,
                    message=f"{sum(redacted.values())} secret(s) redacted with typed placeholders"))
        edits = Edits(replace=replace, drop=set(state.dropped), summary=summary)
        messages = fmt.write(doc, edits)
        before = sum(self.counter.count(s.text) for s in doc.segments)
        after = sum(self.counter.count(state.texts[s.id]) for s in doc.segments if s.id not in state.dropped)
        if summary:
            after += self.counter.count(summary)
        placeholders = _unique_placeholders(state.placeholders, state.dropped)
        protected = sorted(state.spans(), key=lambda s: (_seg_index(doc, s.segment_id), s.start, s.rule_id))
        if state.config.redact:
            protected = [sp.model_copy(update={"text": red.redact(sp.text)[0]}) for sp in protected]
            placeholders = [p.model_copy(update={"summary": red.redact(p.summary)[0]}) for p in placeholders]
        report = Report(
            format=doc.format,
            tokens_before=before,
            tokens_after=after,
            token_counter=self.counter.name,
            level=state.level,
            levels_available=_levels_available(),
            budget=state.config.budget,
            protected=protected,
            placeholders=placeholders,
            diagnostics=_unique_diags(state.diagnostics),
            self_check=state.self_check,
            exit_signal=state.exit_signal,
            recommend_new_session=state.recommend_new_session,
            segments=len(doc.segments),
            stages=state.stages,
            redacted=redacted,
        )
        handoff = state.handoff
        if handoff and state.config.redact:
            from .secrets import redact

            handoff, _ = redact(handoff)
        return CompactionResult(format=doc.format, messages=messages, anchor=anchor, report=report,
                                handoff=handoff)


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


def _seg_index(doc: Document, sid: str | None) -> int:
    if sid is None:
        return -1
    idx = doc.state.get("_index")
    if idx is None:
        idx = doc.state["_index"] = {s.id: s.index for s in doc.segments}
    return idx.get(sid, -1)


def _levels_available() -> list[int]:
    levels = [1]
    try:
        from . import anchor as _a  # noqa: F401

        if hasattr(_a, "build_anchor"):
            levels.append(2)
    except ImportError:
        pass
    try:
        from .budget import escalate as _e  # noqa: F401

        levels.append(3)
    except ImportError:
        pass
    return levels


def _unique_placeholders(phs: list[Placeholder], dropped: set[str]) -> list[Placeholder]:
    seen: set[tuple[str, str | None]] = set()
    out = []
    for p in phs:
        k = (p.id, p.segment_id)
        if k in seen or (p.segment_id in dropped):
            continue
        seen.add(k)
        out.append(p)
    return out


def _unique_diags(diags: list[Diagnostic]) -> list[Diagnostic]:
    seen = set()
    out = []
    for d in diags:
        k = (d.code, d.message, d.rule_id, d.segment_id, d.position)
        if k in seen:
            continue
        seen.add(k)
        out.append(d)
    return out


class _Conversation:
    """What belongs to one conversation, never to a configuration: the Level 3 counter (the exit
    signal) and the incrementally merged anchor. The budget stage reads the shared machinery
    (token counter, store) through it."""

    def __init__(self, compactor: Compactor):
        self.counter = compactor.counter
        self.store = compactor.store
        self.level3_count = 0
        self._policy_anchor_cache = None


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
    return comp._compact(data, _Conversation(comp), format=format)
