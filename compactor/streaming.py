"""The pipeline as a fold over the messages of a file: compaction of a large JSON trajectory in
bounded memory, with the output the in-memory pipeline gives, byte for byte.

The stage list is the pipeline's (``read → normalise → detect → level1 → anchor → budget →
selfcheck → write``); what changes is what is held. The file is read twice, message by message
(ijson's C backend), and never parsed whole:

1. **survey** — every message is read into its segments and dropped; what the stages need of the
   whole conversation is counted: how many tool outputs there are (Level 1's recent window counts
   from the end), the step of each (the first recent step), whether the file is one the fold reads
   exactly like the in-memory reader (the layout detection would pick this layout; every tool-call
   id names one call and at most one output, which follows it). Anything else, or any parse error,
   and :func:`stream_compact` returns None: the caller takes the in-memory path, which reads and
   reports the file as always.
2. **fold** — each message: its segments are normalised, detected and collapsed (Level 1 and its
   older-output pass), fed to the anchor (:class:`~compactor.anchor.build.AnchorFold`), held to the
   self-check's evidence chain against their own kept text, counted, and the message is written,
   edited, to a spool file. A call whose shortening depends on whether its output fails waits (with
   the messages after it) until that output is read.
3. **finish** — the anchor is frozen; the self-check's questions that no single message answers
   (a span not in its own text, the newest request, the dead ends) are answered by one pass over
   the spooled output texts; the continuation check and the anchor's size bound run as in the
   pipeline; the output is written from the spools (:func:`compactor.emit.write_parts`) to a
   temporary file next to the destination, renamed into place when complete.

What is held at once: one message, the anchor's items (its facts in full only while its size bound
can still show them, and an id and a step of every one: :class:`~compactor.anchor.ledger.FactLedger`),
a digest per older tool output (the "same as" pass), the ids of failing outputs and the
self-check's open questions. What streams:
the OpenAI chat layout as a top-level JSON array, at Level 1 (``level`` auto or 1) without a
budget, an LLM or redaction, emitting ``json`` or ``messages``. Anything else (a budget fits the
whole conversation at once) takes the in-memory path.
"""

from __future__ import annotations

import json
import os
from array import array
from pathlib import Path
from typing import Any, Callable, Iterator, TextIO

from .models import Diagnostic, Placeholder, Report, Role, Segment, SegmentKind, Span

__all__ = ["stream_compact", "streamable_config"]

STREAM_LAYOUT = "openai-chat"
STREAM_EMITS = ("json", "messages")


def streamable_config(config) -> str | None:
    """Why a configuration cannot be compacted by the fold (None: it can)."""
    if config.level not in ("auto", 1):
        return f"level {config.level}"
    if config.budget is not None:
        return "a budget (fitted over the whole conversation)"
    if config.llm:
        return "the LLM pass"
    if config.redact:
        return "redaction"
    return None


# ---------------------------------------------------------------------------- reading


class _Tail(list):
    """The reader's segment list, holding only the segments not taken yet: its length is every
    segment read (a segment's index is its position in the whole conversation)."""

    def __init__(self) -> None:
        super().__init__()
        self.offset = 0

    def __len__(self) -> int:
        return self.offset + list.__len__(self)

    def take(self) -> list[Segment]:
        out = list(list.__iter__(self))
        self.offset += len(out)
        list.clear(self)
        return out


_MESSAGES = object()  # where the message list sits among the top-level values of an object


class _Source:
    """A JSON file the fold reads: a top-level array of messages, or an object with a ``messages``
    array (request bodies, mini-swe-agent trajectories) whose other values are small."""

    def __init__(self, path: Path, start: int, backend) -> None:
        self.path, self.start, self.backend = path, start, backend
        self.top: list[tuple[str, Any]] | None = None  # an object's values in order (messages: _MESSAGES)
        self.base: tuple[str, ...] = ()

    def items(self) -> Iterator[Any]:
        with open(self.path, "rb") as fh:
            fh.seek(self.start)
            yield from self.backend.items(fh, "messages.item" if self.base else "item", use_float=True)

    def read_top(self) -> None:
        """An object's top-level values, all but the message list (which is skipped)."""
        from ijson.common import ObjectBuilder

        top: list[tuple[str, Any]] = []
        keys: set[str] = set()
        builder = None
        skipping = False
        with open(self.path, "rb") as fh:
            fh.seek(self.start)
            events = self.backend.parse(fh, use_float=True)
            prefix, event, value = next(events)
            if event != "start_map":
                raise _Unstreamable("not an object")
            for prefix, event, value in events:
                if prefix == "" and event in ("map_key", "end_map"):
                    if builder is not None:
                        top.append((key, builder.value))
                        builder = None
                    if event == "end_map":
                        break
                    key = value
                    if key in keys:
                        raise _Unstreamable("a key given twice")
                    keys.add(key)
                    skipping = key == "messages"
                    if skipping:
                        top.append((key, _MESSAGES))
                    else:
                        builder = ObjectBuilder()
                    continue
                if skipping:
                    if prefix == "messages" and event not in ("start_array", "end_array"):
                        raise _Unstreamable("'messages' is not a list")
                    continue
                builder.event(event, value)
            for _ in events:
                raise _Unstreamable("more than one value")
        if "messages" not in keys or keys & {"trajectory_so_far", "history", "system"}:
            # no message list, or another layout's keys (steps, SWE-agent, OpenHands, Anthropic)
            raise _Unstreamable("not a chat request body or trajectory")
        self.top = top
        self.base = ("messages",)


def _source(path: Path, max_depth: int) -> _Source | None:
    """The file as a :class:`_Source`; None when the file is not one the streamed reader reads
    exactly as ``json.loads`` would (the in-memory path reads it)."""
    from .formats.inputs import stream_start

    at = stream_start(path, max_depth)
    if at is None:
        return None
    backend, start, first = at
    src = _Source(path, start, backend)
    if first == b"{":
        src.read_top()
    return src


class _Unstreamable(Exception):
    """The file is not one the fold reads exactly like the in-memory path."""


def _layout_checks():
    """A per-message check: the message is an OpenAI chat message that no layout tried before it
    in the detection order claims. The whole list is then detected as OpenAI chat (each earlier
    layout's test over a list fails when it fails for one of its items alone, see below)."""
    from .formats import get_format
    from .formats.base import Probe, RawInput
    from .formats.registry import REGISTRY

    chat = get_format(STREAM_LAYOUT)
    before = []
    for fmt in REGISTRY:
        if fmt.name == STREAM_LAYOUT:
            break
        before.append(fmt)
    raw = RawInput("[...]", "<message>")

    def check(msg: Any) -> bool:
        probe = Probe(raw, json_value=[msg], is_json=True)
        if not chat.sniff(probe)[0]:
            return False
        # steps: every item must be a step and one must act; OpenHands: every item an event. A
        # list none of whose items passes alone has no item that makes the list pass (and a chat
        # message has a 'role': it is neither a step nor an event, so these fail on their own)
        return not any(fmt.sniff(probe)[0] for fmt in before)

    return check


class _Survey:
    """Pass 1: what the fold needs to know of the whole conversation before it starts."""

    def __init__(self) -> None:
        self.messages = 0
        self.segments = 0
        self.result_steps = array("q")  # the step of every tool output (meta or not), in order
        self.result_meta = bytearray()
        self.live = 0  # tool outputs that are not harness text
        self.first_role: Any = None
        # per tool call with an id, in order: has it an output (only those can fail)? One byte a
        # call, not its id: the fold counts the calls the same way
        self.answered = bytearray()


def _survey(src: _Source) -> _Survey:
    from .formats.openai_chat import ChatReader

    check = _layout_checks()
    reader = ChatReader(src.base)
    items = src.items()
    tail = reader.segments = _Tail()
    sv = _Survey()
    calls: dict[str, int] = {}  # call id -> its position among the calls with an id
    results: set[str] = set()
    n = 0
    for i, msg in enumerate(items):
        n += 1
        if not check(msg):
            raise _Unstreamable("not an OpenAI chat message")
        if i == 0:
            sv.first_role = msg.get("role")
        reader.message(i, msg)
        for seg in tail.take():
            cid = seg.call_id
            if seg.kind == SegmentKind.tool_call:
                if cid:
                    if cid in calls or cid in results:
                        raise _Unstreamable("a call id used twice, or after its output")
                    calls[cid] = len(sv.answered)
                    sv.answered.append(0)
            elif seg.kind == SegmentKind.tool_result:
                sv.result_steps.append(seg.step)
                sv.result_meta.append(1 if seg.meta else 0)
                if not seg.meta:
                    sv.live += 1
                if cid:
                    if cid in results:
                        raise _Unstreamable("two outputs of one call id")
                    results.add(cid)
                    if cid in calls:
                        sv.answered[calls[cid]] = 1
        reader.forget_answered()
    sv.messages = n
    sv.segments = len(tail)
    if not sv.messages:
        raise _Unstreamable("empty message list")
    return sv


# ---------------------------------------------------------------------------- spools


class _Spool:
    """JSON values written one per line to a temporary file and read back in order."""

    def __init__(self, dir: str | None) -> None:
        import tempfile  # here: a file left to the in-memory path never pays for it

        fd, self.path = tempfile.mkstemp(prefix="compactor-", suffix=".spool", dir=dir)
        self.fh = os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass", newline="\n")
        self.count = 0

    def put(self, value: Any) -> None:
        self.fh.write(json.dumps(value, ensure_ascii=False))
        self.fh.write("\n")
        self.count += 1

    def close_writing(self) -> None:
        if not self.fh.closed:
            self.fh.close()

    def __iter__(self) -> Iterator[Any]:
        self.close_writing()
        with open(self.path, encoding="utf-8", errors="surrogatepass", newline="\n") as fh:
            for line in fh:
                yield json.loads(line)

    def remove(self) -> None:
        self.close_writing()
        try:
            os.unlink(self.path)
        except OSError:
            pass


class _Items(list):
    """A list the JSON encoder writes item by item from a spool (``json``'s pure-Python encoder,
    which :func:`~compactor.formats.base.write_json` uses, iterates lists), with an optional item
    inserted at a position (the self-check's summary message)."""

    def __init__(self, spools: list[_Spool], insert: tuple[int, Any] | None = None):
        super().__init__()
        self._spools = spools
        self._insert = insert

    def __len__(self) -> int:
        return sum(s.count for s in self._spools) + (1 if self._insert else 0)

    def __iter__(self):
        k = 0
        ins = self._insert
        for sp in self._spools:
            for v in sp:
                if ins is not None and k == ins[0]:
                    yield ins[1]
                    ins = None
                yield v
                k += 1
        if ins is not None:
            yield ins[1]


# ---------------------------------------------------------------------------- the fold


class _Segment:
    """One segment on its way out: decided, or waiting for the failure verdict of its call's output."""

    __slots__ = ("seg", "text", "waiting", "candidate", "spans", "norm", "ph1", "held")

    def __init__(self, seg: Segment, text: str, spans: list[Span], norm: str | None, ph1: list[Placeholder]):
        self.held: list[bool] = []
        self.seg = seg
        self.text = text
        self.spans = spans
        self.norm = norm  # normalised original text (None: not normalised yet)
        self.waiting = False
        self.candidate: tuple | None = None
        self.ph1 = ph1


class _Fold:
    def __init__(self, comp, survey: _Survey, tmpdir: str | None):
        from .anchor.build import AnchorFold
        from .anchor.continuation import ContinuationMemo
        from .collapse.older import OlderPass
        from .pipeline import collapse_boundary

        self.comp = comp
        cfg = self.cfg = comp.config
        self.sv = survey
        self.count = comp.counter.count
        n = len(survey.result_steps)
        self.boundary = collapse_boundary(n, cfg.keep_recent, cfg.collapse_batch)
        self.first_recent_step = min((survey.result_steps[i] for i in range(self.boundary, n)
                                      if not survey.result_meta[i]), default=None)
        self.harden_on = survey.live > 1
        bound = None
        if cfg.anchor_max_tokens:
            from .tokens import piecewise

            # the bound the anchor goes to at the end: the facts it can never show are not held
            self.bound_count = piecewise(comp.counter)
            bound = (cfg.anchor_max_tokens, self.bound_count, cfg.lang)
        self.anchor = AnchorFold(objective=cfg.objective, bound=bound)
        self.cont = ContinuationMemo()  # fed segment by segment, never from a segment list
        self.result_pos = 0
        self.call_pos = 0  # tool calls with an id read so far (the survey's answered flags)
        self.tokens_before = 0
        self.tokens_after = 0
        self.level = 0
        self.diagnostics: list[Diagnostic] = []
        self.older = OlderPass(comp.store, comp.counter)
        self.waiting_calls: dict[str, _Segment] = {}
        self.open_calls: dict[str, Segment] = {}  # calls whose output has not been read (file reads)
        self.queue: list[tuple[int, Any, list[_Segment]]] = []
        self.messages = _Spool(tmpdir)
        self.spans = _Spool(tmpdir)
        self.ph_level1 = _Spool(tmpdir)
        self.ph_older = _Spool(tmpdir)
        self.texts = _Spool(tmpdir)  # the normalised kept texts (the self-check's last pass)
        self.pending: list[Span] = []  # protected spans not in their own kept text
        self.request: tuple[Segment, str] | None = None  # the newest request and its normalised kept text
        self.other_keys: set[tuple] = set()  # placeholder keys naming no segment or another one
        self.segments = 0
        self.mirrors: dict[str, list] = {}  # segment id -> its mirror copies' paths, until written
        self.base: tuple[str, ...] = ()  # where the message list sits in the document

    def spools(self) -> list[_Spool]:
        return [self.messages, self.spans, self.ph_level1, self.ph_older, self.texts]

    # ------------------------------------------------------------------ per segment
    def segment(self, seg: Segment) -> _Segment:
        from .audit.selfcheck import span_held
        from .engine import TextView
        from .normalize import normalize

        comp, cfg = self.comp, self.cfg
        self.segments += 1
        self.tokens_before += self.count(seg.text)
        norm = None
        ph1: list[Placeholder] = []
        if seg.kind == SegmentKind.tool_call:
            text, spans = seg.text, []
            if seg.call_id:
                self.open_calls[seg.call_id] = seg
        else:
            norm = normalize(seg.text)
            det = comp.level1.detector.detect_view(TextView(norm), role=seg.role.value, segment_id=seg.id,
                                                   step_id=seg.step_id)
            pos = None
            if seg.kind == SegmentKind.tool_result:
                pos = self.result_pos
                self.result_pos += 1
            if pos is not None and pos < self.boundary and not seg.meta:
                o = comp.level1.collapse_detected(seg.text, norm, det, role=seg.role.value, segment_id=seg.id,
                                                  command=seg.command, exit_code=seg.exit_code, prose=False)
            else:
                from .collapse.level1 import SegmentOutcome

                o = SegmentOutcome(seg.text, False, list(det.spans), [], list(det.diagnostics))
            text, spans = o.text, list(o.spans)
            self.diagnostics.extend(o.diagnostics)
            ph1 = list(o.placeholders)
            if o.changed:
                self.level = 1
        item = _Segment(seg, text, spans, norm, ph1)
        item.held = [span_held(sp, seg, self._file_result) for sp in spans]
        answered = False
        if seg.kind == SegmentKind.tool_call and seg.call_id:
            answered = bool(self.sv.answered[self.call_pos])
            self.call_pos += 1
        if self.harden_on:
            self._harden(item, pos if seg.kind == SegmentKind.tool_result else None, answered)
        self.anchor.feed(seg, spans)
        self.cont.feed(seg)
        return item

    def _harden(self, item: _Segment, pos: int | None, answered: bool) -> None:
        """Level 1's older-output pass (:class:`compactor.collapse.older.OlderPass`) on one segment.
        What :func:`~compactor.collapse.older.harden` reads of the whole list is known here from the
        survey (the boundary, the first recent step, which calls have an output) or waited for (a
        call waits for its output's verdict)."""
        from .collapse.older import call_has_body, failing_output

        seg = item.seg
        if seg.meta:
            return
        if seg.kind == SegmentKind.tool_result:
            failing = failing_output(seg, item.spans)
            if seg.call_id and seg.call_id in self.waiting_calls:
                self._decide_call(self.waiting_calls.pop(seg.call_id), failing)
            if pos is not None and pos < self.boundary:  # (a recent output is kept: see harden)
                self._apply(item, self.older.result(seg, item.text, item.spans, old=True, failing=failing))
        elif seg.kind == SegmentKind.tool_call:
            frs = self.first_recent_step
            if frs is None or seg.step >= frs or not call_has_body(item.text):
                return
            if not answered:
                self._apply(item, self.older.call(seg, item.text))  # no output of it can fail
            else:  # (its output follows it: the survey saw no call after its output)
                item.waiting = True  # until its output says whether it failed
                self.waiting_calls[seg.call_id] = item

    def _decide_call(self, item: _Segment, failing: bool) -> None:
        item.waiting = False
        if not failing:
            self._apply(item, self.older.call(item.seg, item.text))

    def _apply(self, item: _Segment, change: tuple[str, Placeholder] | None) -> None:
        if change is not None:
            item.text, ph = change
            item.candidate = (ph,)
            self.level = 1

    # ------------------------------------------------------------------ per message
    def message(self, i: int, msg: Any, items: list[_Segment]) -> None:
        self.queue.append((i, msg, items))
        self._flush()

    def _flush(self, final: bool = False) -> None:
        q = self.queue
        k = 0
        while k < len(q) and (final or not any(it.waiting for it in q[k][2])):
            i, msg, items = q[k]
            self._write(i, msg, items)
            k += 1
        if k:
            del q[:k]

    def _write(self, i: int, msg: Any, items: list[_Segment]) -> None:
        from .audit.common import is_request
        from .formats.base import put_text
        from .normalize import normalize

        holder: dict = {i: msg}
        if self.base:
            holder = {self.base[0]: holder}
        for it in items:
            seg = it.seg
            text = it.text
            # each placeholder once (by id and segment), Level 1's first, then the older-output pass's
            seen: set[tuple] = set()
            for ph in it.ph1:
                if self._first(ph, seg, seen):
                    self.ph_level1.put(ph.model_dump(mode="json"))
            if it.candidate is not None and self._first(it.candidate[0], seg, seen):
                self.ph_older.put(it.candidate[0].model_dump(mode="json"))
            if text != seg.text:
                put_text(holder, seg.origin, text)
                for mp in self.mirrors.get(seg.id, ()):
                    put_text(holder, mp, text)
            self.mirrors.pop(seg.id, None)
            self.tokens_after += self.count(text)
            norm = it.norm if (it.norm is not None and text is seg.text) else normalize(text)
            self.texts.put(norm)
            for sp in sorted(it.spans, key=_span_order) if len(it.spans) > 1 else it.spans:
                self.spans.put(sp.model_dump(mode="json"))
            # the evidence chain asks of every held span whether the output has it: in its own kept
            # text settles it here, the others are asked of the whole output at the end (in order)
            for sp, held in zip(it.spans, it.held):
                if held and sp.text.strip() and sp.text not in norm:
                    self.pending.append(sp)
            if is_request(seg):
                self.request = (seg, norm)
        self.messages.put(msg)

    def _first(self, ph: Placeholder, seg: Segment, seen: set[tuple]) -> bool:
        key = (ph.id, ph.segment_id)
        where = seen if ph.segment_id == seg.id else self.other_keys
        if key in where:
            return False
        where.add(key)
        return True

    def _file_result(self, s: Segment) -> bool:
        """Is the tool output a file read or edit, as its call (read before it) says?"""
        from .audit.selfcheck import is_file_result

        return is_file_result(s, self.open_calls.get(s.call_id) if s.call_id else None)


def _span_order(sp: Span) -> tuple:
    return (sp.start, sp.rule_id)


# ---------------------------------------------------------------------------- driver


# the size from which the command line compacts a file by the fold. The fold costs about a third
# more CPU time than the in-memory pipeline on a file of many small messages (two passes, one
# message at a time: 12.3 vs 9.2 s on 4 MB), and reading whole peaks at about 18x the file: below
# this size that is a few hundred MB, above it the memory is what matters
FOLD_MIN_BYTES = 16 * 1024**2


def stream_compact(comp, path: str | os.PathLike[str], write: Callable[[str], Any] | None = None, *,
                   emit: str = "json", format: str = "auto", min_bytes: int | None = 0) -> Report | None:
    """Compact the JSON file at ``path`` with the compactor ``comp`` as a fold over its messages and
    write what ``compactor compact --emit EMIT`` writes through ``write``; return the report. None
    (nothing written) when the file or the settings are not ones the fold compacts exactly like
    the in-memory pipeline: the caller compacts it in memory. ``min_bytes``: a smaller file is left
    to the in-memory path too (None: :data:`FOLD_MIN_BYTES`, the command line's choice)."""
    from .formats import get_format
    from .formats.openai_chat import ChatReader

    cfg = comp.config
    if emit not in STREAM_EMITS or format not in ("auto", STREAM_LAYOUT) or streamable_config(cfg):
        return None
    if tuple(comp.stages) != _stage_names() or any(
            getattr(fn, "__self__", None) is not comp
            or getattr(fn, "__func__", None) is not getattr(type(comp), f"_stage_{name}", None)
            for name, fn in comp.stages.items()):
        return None  # a replaced or disabled stage: only the pipeline runs it
    p = Path(path)
    try:
        if not p.is_file():
            return None
        if min_bytes is None:
            min_bytes = FOLD_MIN_BYTES
        if min_bytes and p.stat().st_size < min_bytes:
            return None
        src = _source(p, cfg.max_json_depth)
        if src is None:
            return None
        survey = _survey(src)
    except _Unstreamable:
        return None
    except Exception:  # noqa: BLE001 - any parse error: the in-memory path reads and names it
        return None
    tmpdir = None
    fold = _Fold(comp, survey, tmpdir)
    try:
        fold.base = src.base
        reader = ChatReader(src.base)
        tail = reader.segments = _Tail()
        for i, msg in enumerate(src.items()):
            reader.message(i, msg)
            segs = tail.take()
            if reader.mirrors:
                fold.mirrors.update(reader.mirrors)
                reader.mirrors.clear()
            fold.message(i, msg, [fold.segment(s) for s in segs])
            for s in segs:
                if s.kind == SegmentKind.tool_result and s.call_id:
                    fold.open_calls.pop(s.call_id, None)
            reader.forget_answered()
        fold._flush(final=True)
        from .anchor.ledger import LedgerOverrun

        try:
            report, anchor, summary = _finish(fold)
        except LedgerOverrun:
            return None  # (nothing written yet) the in-memory path holds every fact
        if report.tokens_after > report.tokens_before:
            return None  # (nothing written yet) larger than the input: the pipeline passes the input through
        insert = None
        if summary:
            at = 1 if fold.sv.first_role in ("system", "developer") else 0
            insert = (at, get_format(STREAM_LAYOUT).make_message("user", summary))
        messages: Any = _Items([fold.messages], insert)
        if src.top is not None:
            messages = {k: (messages if v is _MESSAGES else v) for k, v in src.top}
        if write is not None:
            from .emit import write_parts

            from .formats.style import detect_file_style

            write_parts(report, anchor, emit, write, messages=messages, style=detect_file_style(p, "json"),
                        lists={"protected": _Items([fold.spans]), "placeholders": _Items([fold.ph_level1, fold.ph_older])})
        return report
    finally:
        for sp in fold.spools():
            sp.remove()


def _stage_names() -> tuple[str, ...]:
    from .pipeline import STAGES

    return STAGES


def _finish(fold: _Fold):
    """The stages after the fold: the anchor frozen, the budget stage's Level 1 self-check, the
    continuation check, the report and the anchor's size bound."""
    from .anchor.continuation import continuation_check
    from .audit.scan import OutputScan, ScannedOutput
    from .audit.selfcheck import apply_to_anchor, backfill_markdown, run_selfcheck
    from .pipeline import levels_available, unique_diagnostics

    comp, cfg = fold.comp, fold.cfg
    for sp in fold.spools():
        sp.close_writing()
    stages = ["level1", "anchor"]
    full = fold.anchor.freeze()
    # the self-check: first to learn what it asks of the whole output, then with the answers
    own: dict[str, str] = {}
    req = fold.request
    if req is not None:
        own[req[0].id] = req[1]
    finder = OutputScan()
    out = ScannedOutput(own, finder)
    segs = [req[0]] if req is not None else []
    run_selfcheck(segs, [], full, {}, None, folded=False, protected=fold.pending, output=out)
    if not finder.empty():
        finder.scan(iter(fold.texts))
    res = run_selfcheck(segs, [], full, {}, None, folded=False, protected=fold.pending, output=out)
    anchor = apply_to_anchor(full, res.missing, full)
    summary = backfill_markdown(res.missing, cfg.lang) if res.missing else None
    self_check = res.to_model()
    stages.append("self-check")
    # the selfcheck stage: the continuation questions
    anchor, filled = continuation_check(anchor, [], fold.cont)
    if filled:
        self_check = self_check.model_copy(update={
            "backfilled": [*self_check.backfilled, *(f"continuation:{x}" for x in filled)]})
    after = fold.tokens_after + (comp.counter.count(summary) if summary else 0)
    report = Report(
        format=STREAM_LAYOUT, tokens_before=fold.tokens_before, tokens_after=after,
        token_counter=comp.counter.name, level=fold.level, levels_available=levels_available(),
        budget=cfg.budget, protected=[], placeholders=[], diagnostics=unique_diagnostics(fold.diagnostics),
        self_check=self_check, exit_signal=False, recommend_new_session=False, segments=fold.segments,
        stages=stages, redacted={}, llm=None)
    if anchor is not None and cfg.anchor_max_tokens:
        from .anchor import bound_anchor

        anchor = bound_anchor(anchor, cfg.anchor_max_tokens, fold.bound_count, lang=cfg.lang, facts=fold.anchor.facts)
    return report, anchor, summary
