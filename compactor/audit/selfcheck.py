"""The seed-001 self-check ("压缩质量自检"), mechanised, with automatic back-fill.

Three questions, asked of the compacted output (the kept messages plus the inserted summary):

1. **continuity** — could a new agent resume from the output alone? The newest user request is
   present; the intent is known (and is the *newest* request, not an older one — the "do X, then
   Y, compaction, agent resumes X" failure); when turns were folded away, the current state or
   the next steps are present (or the last turn is still raw).
2. **anti-repeat** — every failed approach of the original (the ``failed-approach`` spans and the
   excluded approaches of the anchor built from the FULL original) is in the output's excluded
   list or raw text.
3. **evidence chain** — every protected span of the original is present verbatim in the output
   (an elided long trace counts via its kept text).

"If any answer is no, the compaction went too far and information must be put back": every
missing item is back-filled from the original — appended to the summary (a short section, the
evidence in fences, verbatim) and added to the anchor. :class:`~compactor.models.SelfCheck`
records what failed *before* back-fill and what was put back.
"""

from __future__ import annotations

import operator
from itertools import compress, repeat
from typing import Any, Callable

from ..models import Anchor, Evidence, ExcludedApproach, Intent, Role, SegmentKind, SelfCheck, Segment, Span
from ..normalize import normalize
from ..record import Field, Record
from ..segments import differing
from .common import (PREFIX, bf_id, content_words, last_assistant, newest_request, present, present_squashed, shorten,
                     squash, word_set)

__all__ = ["Missing", "SelfCheckResult", "TextMemo", "run_selfcheck", "backfill_markdown", "apply_to_anchor", "check_state",
           "protected_spans", "span_held", "is_file_result"]

_PREFIX = PREFIX  # characters of a (possibly shortened) item that must appear


class Missing(Record, plain=True, frozen=True):
    check: str  # continuity | anti_repeat | evidence_chain
    kind: str  # newest-request | intent | state | next-step | excluded | evidence
    key: str  # what goes in SelfCheck.backfilled
    text: str
    step: str = ""
    extra: str = ""  # why (excluded), rule id (evidence)
    verbatim: bool = False


class SelfCheckResult(Record, plain=True, frozen=False):
    continuity: bool = True
    anti_repeat: bool = True
    evidence_chain: bool = True
    missing: list[Missing] = Field(default_factory=list)

    def to_model(self) -> SelfCheck:
        return SelfCheck(continuity=self.continuity, anti_repeat=self.anti_repeat,
                         evidence_chain=self.evidence_chain, backfilled=[m.key for m in self.missing])


class TextMemo:
    """Normalised and squashed forms of the texts a conversation's self-check has seen, kept by
    its :class:`~compactor.pipeline.Conversation`: a check on the grown output only normalises
    what is new. Pure functions of the text, so the result is the same with or without it."""

    def __init__(self) -> None:
        self.norm: dict[str, str] = {}
        self.squashed: dict[str, str] = {}
        self.held: dict[int, tuple[Span, Segment, bool]] = {}  # protected_spans' verdict per span
        # span -> (it, the segment id, that segment's kept text) it was found verbatim in: while
        # that text is the one kept, the span is in the output
        self.found: dict[int, tuple[Span, str, str]] = {}
        self.file_reads: dict[str, tuple[Segment, Segment | None, bool]] = {}  # result -> (it, its call, read/edit?)
        self._request_at: tuple = (None, None)  # (SegmentIndex.mark of the segments seen, the newest request)
        self.protected: tuple | None = None  # protected_spans' last (spans, verdicts, volatile ones, map, version)
        self._kept: tuple | None = None  # normalize_kept's last (index mark, the texts, their normalised map)
        # normalize_kept's calls, and the ids whose text it changed in the last one (None: unknown)
        self._kept_seq = 0
        self._kept_moved: list[str] | None = None
        # unsettled's last (spans, positions not settled, segment id -> positions found there, the
        # kept map, normalize_kept's call then, how many positions the id map holds)
        self._unsettled: tuple | None = None

    def normalize(self, text: str) -> str:
        v = self.norm.get(text)
        if v is None:
            v = self.norm[text] = normalize(text)
        return v

    def squash(self, norm: str) -> str:
        v = self.squashed.get(norm)
        if v is None:
            v = self.squashed[norm] = squash(norm)
        return v

    def trim(self, live: int) -> None:
        """Forget everything once it holds far more than the ``live`` texts in use."""
        if len(self.norm) > 4 * live + 256:
            self.norm.clear()
            self.squashed.clear()
        if len(self.held) + len(self.found) > 64 * live + 4096:
            self.held.clear()
            self.found.clear()
            self._unsettled = None

    def newest_request(self, segments: list[Segment], index=None) -> Segment | None:
        """:func:`newest_request` of ``segments``. ``index``: the conversation's
        :class:`~compactor.segments.SegmentIndex`; while it says the segments seen last time are
        the first ones, only the new ones are looked at (without one, all of them are)."""
        if index is None:
            return newest_request(segments)
        index.update(segments)  # (at once when it checked this list in this compaction)
        mark, req = self._request_at
        if index.extends(mark):
            new = newest_request(segments[mark[1]:])
            req = new if new is not None else req
        else:
            req = newest_request(segments)
        self._request_at = (index.mark(), req)
        return req

    def normalize_all(self, kept: dict[str, str]) -> dict[str, str]:
        """``{sid: normalize(text)}`` for every kept text (looked up in one pass; only texts not
        seen before are normalised)."""
        vals = list(kept.values())
        got = list(map(self.norm.get, vals))
        for i in compress(range(len(got)), map(operator.is_, got, repeat(None))):
            got[i] = self.normalize(vals[i])
        return dict(zip(kept, got))

    def normalize_kept(self, ids: list[str], texts: list[str], index) -> dict[str, str]:
        """``normalize_all(dict(zip(ids, texts)))`` for a conversation's segments in order (``ids``
        the segment index's, ``texts`` their current texts): while the index holds the segments of
        the last call (and no id names two segments), the map of the last call is brought up to
        date where a text changed and for the new segments, instead of being built again."""
        held = self._kept
        self._kept_seq += 1
        if held is not None and not index.rebinds and index.extends(held[0]) and len(texts) >= held[0][1]:
            n, old, out = held[0][1], held[1], held[2]
            moved = []
            for i in differing(old, texts):
                out[ids[i]] = self.normalize(texts[i])
                moved.append(ids[i])
            for i in range(n, len(texts)):
                out[ids[i]] = self.normalize(texts[i])
            self._kept_moved = moved
        else:
            out = self.normalize_all(dict(zip(ids, texts)))
            self._kept_moved = None
        self._kept = (index.mark(), list(texts), out)
        return out

    def unsettled(self, spans: list[Span], kept: dict[str, str]) -> list[Span]:
        """The spans (in order) not known to be verbatim in the kept texts ``kept`` (normalised).

        While ``kept`` is the map :meth:`normalize_kept` keeps up to date (the same map as the last
        call, brought up to date once since), a span of the last call that was settled then is
        still settled unless the text it was found in changed: only the spans not settled last
        time, the ones found in a changed text and the new ones are looked at."""
        found, get = self.found.get, kept.get

        def settled(sp: Span) -> str | None:  # the id of the text it was found in, or None
            h = found(id(sp))
            return h[1] if h is not None and h[0] is sp and get(h[1]) is h[2] else None

        last = self._unsettled
        moved = self._kept_moved
        if last is not None and last[3] is kept and moved is not None and last[4] == self._kept_seq - 1 \
                and last[5] <= 4 * len(spans) + 64:
            old, bad, where, size = last[0], last[1], last[2], last[5]
            n = len(old)
            k = min([n, len(spans), *differing(old, spans)[:1]])
            look = {p for p in bad if p < k}
            for sid in moved:
                look.update(p for p in where.get(sid, ()) if p < k)
            look.update(range(k, len(spans)))
        else:
            bad, where, size = [], {}, 0
            look = range(len(spans))
            k = 0
        out: list[int] = []
        for p in sorted(look):
            sid = settled(spans[p])
            if sid is None:
                out.append(p)
            else:
                where.setdefault(sid, []).append(p)
                size += 1
        out.sort()
        self._unsettled = (list(spans), out, where, kept, self._kept_seq, size)
        return [spans[p] for p in out]


class _Output:
    """The compacted output as the checks see it: kept texts (per segment) plus the summary.

    The output is never joined into one text: the squashed (whitespace-collapsed) output is built
    piece by piece, a raw text is looked for in each piece, and across pieces only when it holds a
    line break (only then can it straddle two of them)."""

    def __init__(self, kept: dict[str, str], summary: str | None, memo: TextMemo | None = None,
                 normalized: dict[str, str] | None = None):
        self.memo = memo
        if normalized is not None:  # the kept texts normalised already (TextMemo.normalize_kept)
            if memo is not None:
                memo.trim(len(normalized))
            self.kept = normalized
        elif memo is not None:
            memo.trim(len(kept))
            self.kept = memo.normalize_all(kept)
        else:
            self.kept = {sid: normalize(t) for sid, t in kept.items()}
        self.summary = normalize(summary or "")
        self._blob: str | None = None
        self._sq: str | None = None
        self._low: str | None = None
        self._words: set[str] | None = None

    def _pieces(self):
        yield from self.kept.values()
        yield self.summary

    @property
    def blob(self) -> str:
        if self._blob is None:
            self._blob = "\n".join(self.kept.values()) + "\n" + self.summary
        return self._blob

    @property
    def squashed(self) -> str:
        """``squash`` of the whole output (the pieces are normalised already; a line break between
        two pieces is whitespace like any other)."""
        if self._sq is None:
            if self.memo is None:
                self._sq = " ".join(q for q in (" ".join(p.split()) for p in self._pieces()) if q)
            else:
                # the pieces are whitespace-separated: the squashed output is the squashed pieces
                # joined by one space (the empty ones left out), each remembered by the memo
                sq = self.memo.squash
                self._sq = " ".join([p for p in (*map(sq, self.kept.values()), squash(self.summary)) if p])
        return self._sq

    def in_own(self, sp: Span) -> bool:
        """The span is verbatim in its own segment's kept text (remembered per span and text)."""
        sid = sp.segment_id or ""
        own = self.kept.get(sid)
        memo = self.memo
        if memo is not None and own is not None:
            hit = memo.found.get(id(sp))
            if hit is not None and hit[0] is sp and hit[2] is own:
                return True
        t = sp.text
        if not t.strip() or (own is not None and t in own):
            if memo is not None and own is not None:
                memo.found[id(sp)] = (sp, sid, own)
            return True
        return False

    def _in_output(self, t: str) -> bool:
        if "\n" in t:
            return t in self.blob
        return any(t in p for p in self._pieces())

    def _found_elsewhere(self, sp: Span) -> bool:
        """The span is verbatim in the kept text of some segment (remembered per span: while that
        segment's kept text is the same, so is the answer)."""
        memo = self.memo
        hit = memo.found.get(id(sp))
        if hit is not None and hit[0] is sp and self.kept.get(hit[1]) is hit[2]:
            return True
        t = sp.text
        for sid, p in self.kept.items():
            if t in p:
                memo.found[id(sp)] = (sp, sid, p)
                return True
        return False

    def has_span(self, sp: Span) -> bool:
        memo = self.memo
        if memo is not None and self.in_own(sp):
            return True
        t = sp.text
        if not t.strip():
            return True
        own = self.kept.get(sp.segment_id or "")
        if own is not None and t in own:
            return True
        if t in self.summary:
            return True
        if memo is not None:
            # every kept text is looked at (the answer remembered); across two of them only when
            # the span holds a line break
            if self._found_elsewhere(sp) or ("\n" in t and t in self.blob):
                return True
        elif self._in_output(t):
            return True
        return squash(t) in self.squashed  # re-indented or re-wrapped by a renderer, same words

    def has(self, text: str, prefix: int = _PREFIX, own: str | None = None) -> bool:
        """Is ``text`` in the output? ``own``: the id of the segment it comes from, looked at first
        (the squashed output holds every squashed segment whole, so a hit there is a hit)."""
        if self.memo is not None:
            n = self.memo.squash(text)
            if own is not None and own in self.kept and present_squashed(n, self.memo.squash(self.kept[own]),
                                                                         prefix=prefix):
                return True
            return present_squashed(n, self.squashed, prefix=prefix)
        if own is not None and own in self.kept:
            if present(text, squash(self.kept[own]), prefix=prefix):
                return True
        return present(text, self.squashed, prefix=prefix)

    def has_words(self, text: str, share: float = 0.8) -> bool:
        """Most content words of ``text`` are in the output (for items a renderer re-phrases
        mechanically, e.g. 'X because Y' → 'X: Y')."""
        if self.has(text, prefix=0):
            return True
        ws = content_words(text)
        if not ws:
            return True
        if self._words is None:
            self._words = set()
            for p in self._pieces():
                self._words |= word_set(p)
        if self._low is None:
            self._low = self.squashed.casefold()
        low = self._low
        return sum(1 for w in ws if w in self._words or w in low) / len(ws) >= share


_EVIDENCE = ("trace", "error", "exit-code", "test-failure")
_LOOSE = ("decision", "failed-approach")  # the anchor splits 'X because Y' into 'X: Y': compare words


def is_file_result(seg: Segment, call: Segment | None) -> bool:
    """Is the tool output ``seg`` a file read or edit (its numbers are file contents, not
    observations), as the anchor's own call reader classifies ``call``, the call of its id (None:
    unpaired)?"""
    if seg.kind != SegmentKind.tool_result:
        return False
    from ..anchor.files import call_effects
    from ..formats.calls import NOT_JSON, call_of, make_call

    # the paired call's arguments under the result's tool name and command (a reader may pair a
    # result with a call of the same id but another command: SWE-agent replays); an unpaired
    # result: its tool name and command
    if call is None:
        tc = make_call(seg.tool_name, seg.command or "", seg.command)
    else:
        tc = call_of(call)
        if (tc.name, tc.command) != (seg.tool_name, seg.command):
            tc = make_call(seg.tool_name, tc.raw, seg.command, tc.arguments if tc.arguments is not None else NOT_JSON)
    try:
        kind = call_effects(tc).kind
    except Exception:  # noqa: BLE001 - classification is best effort
        return False
    return kind in ("read", "edit")


def _file_tool_results(segments: list[Segment], memo: TextMemo | None = None) -> set[str]:
    """Ids of the tool results among ``segments`` that are file reads / edits (:func:`is_file_result`)."""
    calls = {s.call_id: s for s in segments if s.kind == SegmentKind.tool_call and s.call_id}
    out: set[str] = set()
    for s in segments:
        if s.kind != SegmentKind.tool_result:
            continue
        c = calls.get(s.call_id) if s.call_id else None
        if memo is not None:
            hit = memo.file_reads.get(s.id)
            if hit is not None and hit[0] is s and hit[1] is c:
                if hit[2]:
                    out.add(s.id)
                continue
        ok = is_file_result(s, c)
        if memo is not None:
            memo.file_reads[s.id] = (s, c, ok)
        if ok:
            out.add(s.id)
    return out


def span_held(sp: Span, seg: Segment | None, file_result: Callable[[Segment], bool]) -> bool:
    """Is the protected span ``sp`` of segment ``seg`` held to the output (see
    :func:`protected_spans`)? ``file_result(seg)``: is the tool output a file read or edit (asked
    only of a number in a tool output)."""
    if seg is None or seg.meta or seg.role == Role.system or not sp.text.strip():
        return False
    fam = sp.family
    if fam in _EVIDENCE:
        return seg.role != Role.assistant
    if fam == "constraint":
        return seg.role == Role.user
    if fam in _LOOSE:
        return seg.role in (Role.user, Role.assistant) and seg.kind == SegmentKind.message
    if fam == "number":
        if seg.kind == SegmentKind.tool_call:
            return False  # the arguments of a call: code and data, recorded as the change made
        if seg.role in (Role.user, Role.assistant):
            return True
        return not file_result(seg)
    return fam == "placeholder"


def protected_spans(segments: list[Segment], spans: list[Span], memo: TextMemo | None = None,
                    by_id: dict[str, Segment] | None = None, version: Any = None) -> list[Span]:
    """The spans the evidence chain and anti-repeat checks hold the output to (seed 001's
    absolute protection zone), each in the role where it means what its family says:

    - harness text (system prompt, demonstrations, hook output) is not the trajectory's evidence;
    - errors / traces / exit codes / test failures: from tool output and user messages (an agent
      restating an error is not evidence);
    - constraints: from the user; decisions and failed approaches: from user and agent prose;
    - key numbers: stated in messages, or observed in tool output that is not a file read/edit
      (not in the arguments of a call: that is code, recorded as the change made);
    - compactor references: everywhere. Bare ``file:line`` references outside a trace and
      secrets are not held.

    Each span's verdict is :func:`span_held`'s. With a conversation's ``memo`` a span's verdict is
    kept while its segment is the same. ``by_id``: ``{s.id: s for s in segments}`` when the caller
    holds it; ``version`` names that map's state (a conversation's segment index: the same map, ids
    only added). With both and a memo, the verdicts of the last call hold up to the first span that
    changed.
    """
    if by_id is None:
        by_id = {s.id: s for s in segments}
    file_results: set[str] | None = None
    held = memo.held if memo is not None else None

    def file_result(seg: Segment) -> bool:
        nonlocal file_results
        if file_results is None:
            file_results = _file_tool_results(segments, memo)
        return seg.id in file_results

    def judge(sp: Span) -> tuple[bool, bool]:
        """(held to the output?, is the verdict the same next time while the span and its segment are?)"""
        seg = by_id.get(sp.segment_id or "")
        if held is not None:
            hit = held.get(id(sp))
            if hit is not None and hit[0] is sp and hit[1] is seg:
                return hit[2], True
        ok = span_held(sp, seg, file_result)
        # whether a result is a file read depends on its call: not kept
        lasting = (seg is None or not (sp.family == "number" and seg.kind == SegmentKind.tool_result)
                   or seg.meta or seg.role == Role.system or not sp.text.strip())
        if held is not None and lasting:
            held[id(sp)] = (sp, seg, ok)
        return ok, lasting

    k, flags, volatile = 0, [], []
    last = memo.protected if memo is not None and version is not None else None
    if last is not None and last[3] is by_id and last[4] == version:
        k = min([len(last[0]), len(spans), *differing(last[0], spans)[:1]])
        flags = last[1][:k]
        volatile = [i for i in last[2] if i < k]
        for i in volatile:
            flags[i] = judge(spans[i])[0]
    for i in range(k, len(spans)):
        ok, lasting = judge(spans[i])
        flags.append(ok)
        if not lasting:
            volatile.append(i)
    if memo is not None and version is not None:
        memo.protected = (list(spans), flags, volatile, by_id, version)
    return list(compress(spans, flags))


def run_selfcheck(segments: list[Segment], spans: list[Span], full_anchor: Anchor | None,
                  kept: dict[str, str] | None, summary: str | None, *, folded: bool | None = None,
                  protected: list[Span] | None = None, memo: TextMemo | None = None,
                  normalized: dict[str, str] | None = None, output: Any = None, index=None) -> SelfCheckResult:
    """Ask the three questions of an output; return what failed and what is missing.

    ``segments`` and ``spans`` are the original's; ``kept`` maps the ids of the segments still in
    the output to their current text; ``summary`` is the inserted summary (or None). ``folded``
    says whether turns were folded away (default: some segment is not in ``kept``). ``memo``
    (a conversation's :class:`TextMemo`) saves normalising the texts seen before; ``normalized``:
    the kept texts normalised already, in place of ``kept``. ``output``: what answers ``has`` /
    ``has_span`` / ``has_words`` of the output instead of the kept texts (a reader that streams the
    output answers from its own pass over it). ``index``: the conversation's segment index, with
    a ``memo`` (the newest request is then looked for in the new segments only).
    """
    if kept is None:
        kept = normalized
    out = output if output is not None else _Output(kept, summary, memo, normalized)
    res = SelfCheckResult()
    seen: set[str] = set()

    def add(m: Missing) -> None:
        if m.key in seen:
            return
        seen.add(m.key)
        res.missing.append(m)
        setattr(res, m.check, False)

    if folded is None:
        folded = any(s.id not in kept for s in segments)
    a = full_anchor or Anchor()

    # 1. continuity -----------------------------------------------------------------
    req = memo.newest_request(segments, index) if memo is not None else newest_request(segments)
    if req is not None and not out.has(req.text, prefix=300, own=req.id):
        add(Missing("continuity", "newest-request", f"newest-request:{req.step_id}", req.text, req.step_id))
    cursor = getattr(a, "cursor", None)
    intent_text = (getattr(cursor, "objective", "") or a.intent.current or a.intent.newest_request)
    sq = memo.squash if memo is not None else squash  # (the memo's squash is squash, remembered)
    if req is not None:
        rq = sq(req.text)
        stale = False
        if a.intent.newest_request and len(rq) >= 15:
            an = sq(a.intent.newest_request).rstrip("…").rstrip()
            stale = not (an[:_PREFIX] in rq or rq[:_PREFIX] in an)
        if not intent_text or stale:
            add(Missing("continuity", "intent", f"intent:{req.step_id}", req.text, req.step_id))
        elif folded and not out.has(intent_text):
            add(Missing("continuity", "intent", f"intent:{a.intent.newest_request_step or req.step_id}",
                        intent_text, a.intent.newest_request_step or req.step_id))
    elif folded and intent_text and not out.has(intent_text):
        add(Missing("continuity", "intent", "intent", intent_text))
    if folded:
        last = last_assistant(segments)
        last_raw = last is None or last.id in kept
        pending = [n for n in a.next_steps if n.status == "pending"]
        if pending and not out.has(pending[-1].text):
            n = pending[-1]
            add(Missing("continuity", "next-step", f"next-step:{n.id}", n.text, n.source_step))
        if not last_raw:
            marks = [n.text for n in pending] + [a.next_action_hint, a.objective_state]
            marks += [c.description for c in a.changes_made[-1:]]
            if not any(m and out.has(m) for m in marks):
                add(Missing("continuity", "state", f"state:{last.step_id}", last.text, last.step_id))

    # 2. anti-repeat ---------------------------------------------------------------
    held = protected if protected is not None else protected_spans(segments, spans)
    if memo is not None:
        # a span found verbatim in a kept text that is still kept is present: neither loop below
        # can report it, so only the others are asked (in the same order)
        held = memo.unsettled(held, out.kept)
    for sp in held:
        if sp.family == "failed-approach" and not (out.has_span(sp) or out.has_words(sp.text)):
            add(Missing("anti_repeat", "excluded", f"excluded:{bf_id('x', sp.text)}",
                        sp.text, sp.step_id or "", verbatim=True))
    for d in a.dead_ends:
        if d.status == "excluded" and not out.has(d.approach):
            add(Missing("anti_repeat", "excluded", f"excluded:{d.id}", d.approach, d.source_step, d.why))

    # 3. evidence chain --------------------------------------------------------------
    for sp in held:
        if sp.family == "failed-approach":
            continue
        if out.has_span(sp) or (sp.family in _LOOSE and out.has_words(sp.text)):
            continue
        add(Missing("evidence_chain", "evidence", f"evidence:{bf_id('e', sp.text)}",
                    sp.text, sp.step_id or "", sp.rule_id, verbatim=True))
    return res


_LABELS = {
    "en": {"head": "**Back-filled by the self-check** (missing from the compacted context; copied from the original):",
           "newest-request": "Newest user request", "intent": "Current intent (the newest request)",
           "state": "Last state", "next-step": "Next step", "excluded": "Excluded approach — do not retry",
           "evidence": "Evidence"},
    "zh": {"head": "**自检回补**（压缩后缺失，已从原文补回）：",
           "newest-request": "用户最新请求", "intent": "当前目标（最新请求）", "state": "最近状态",
           "next-step": "下一步", "excluded": "已排除方案（不要再试）", "evidence": "关键证据"},
}


def _fence(text: str) -> tuple[str, str]:
    n = 3
    while "`" * n in text:
        n += 1
    return "`" * n, "`" * n


def backfill_markdown(missing: list[Missing], lang: str = "en") -> str:
    """The section appended to the summary: verbatim items fenced, the others on one line each."""
    if not missing:
        return ""
    lab = _LABELS.get(lang, _LABELS["en"])
    lines = [lab["head"]]
    for m in missing:
        where = f" ({m.step})" if m.step else ""
        label = lab[m.kind]
        if m.verbatim or "\n" in m.text.strip():
            o, c = _fence(m.text)
            extra = f" [{m.extra}]" if m.extra and m.kind == "evidence" else ""
            lines.append(f"- {label}{where}{extra}:")
            lines.append(o)
            lines.append(m.text)
            lines.append(c)
        else:
            body = m.text.strip() if m.kind in ("newest-request", "intent") else shorten(m.text, 600)
            why = f" — {m.extra}" if m.extra else ""
            lines.append(f"- {label}{where}: {body}{why}")
    return "\n".join(lines)


def apply_to_anchor(anchor: Anchor, missing: list[Missing], full_anchor: Anchor | None = None) -> Anchor:
    """Add the back-filled items to an anchor (evidence, excluded approaches, the intent)."""
    if not missing:
        return anchor
    evidence = list(anchor.key_evidence)
    have_ev = {e.text for e in evidence}
    dead = list(anchor.dead_ends)
    have_dead = {d.id for d in dead}
    full_dead = {d.id: d for d in (full_anchor.dead_ends if full_anchor else [])}
    intent = anchor.intent
    for m in missing:
        if m.kind == "evidence" and m.text not in have_ev:
            evidence.append(Evidence(id=bf_id("ev", m.text), source_step=m.step, text=m.text, rule_id=m.extra,
                                     family=""))
            have_ev.add(m.text)
        elif m.kind == "excluded":
            did = m.key.split(":", 1)[1]
            if did in full_dead and did not in have_dead:
                dead.append(full_dead[did])
                have_dead.add(did)
            elif did not in full_dead:
                xid = bf_id("de", m.text)
                if xid not in have_dead:
                    dead.append(ExcludedApproach(id=xid, source_step=m.step, approach=shorten(m.text, 300),
                                                 why="", evidence=m.text))
                    have_dead.add(xid)
        elif m.kind in ("intent", "newest-request") and m.step:
            if squash(intent.newest_request) != squash(m.text) or not intent.current:
                intent = Intent(initial=intent.initial or m.text, current=m.text, newest_request=m.text,
                                newest_request_step=m.step, history=list(intent.history))
    return anchor.model_copy(update={"key_evidence": evidence, "dead_ends": dead, "intent": intent})


def check_state(state, *, full_anchor: Anchor | None = None, lang: str | None = None) -> SelfCheck:
    """Run the self-check on a finished :class:`~compactor.pipeline.PipelineState` and back-fill
    it in place (summary and anchor). Returns the :class:`SelfCheck` also stored on the state."""
    lang = lang or state.config.lang
    full = full_anchor if full_anchor is not None else state.anchor
    kept = {s.id: state.texts.get(s.id, s.text) for s in state.segments if s.id not in state.dropped}
    res = run_selfcheck(state.segments, state.spans(), full, kept, state.summary)
    if res.missing:
        section = backfill_markdown(res.missing, lang)
        state.summary = (state.summary.rstrip() + "\n\n" + section) if state.summary else section
        if state.anchor is not None:
            state.anchor = apply_to_anchor(state.anchor, res.missing, full)
    sc = res.to_model()
    state.self_check = sc
    return sc
