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

from dataclasses import dataclass, field

from ..models import Anchor, Evidence, ExcludedApproach, Intent, Role, SegmentKind, SelfCheck, Segment, Span
from ..normalize import normalize
from .common import bf_id, content_words, last_assistant, newest_request, present, shorten, squash, word_set

__all__ = ["Missing", "SelfCheckResult", "TextMemo", "run_selfcheck", "backfill_markdown", "apply_to_anchor", "check_state"]

_PREFIX = 60  # characters of a (possibly shortened) item that must appear


@dataclass(frozen=True)
class Missing:
    check: str  # continuity | anti_repeat | evidence_chain
    kind: str  # newest-request | intent | state | next-step | excluded | evidence
    key: str  # what goes in SelfCheck.backfilled
    text: str
    step: str = ""
    extra: str = ""  # why (excluded), rule id (evidence)
    verbatim: bool = False


@dataclass
class SelfCheckResult:
    continuity: bool = True
    anti_repeat: bool = True
    evidence_chain: bool = True
    missing: list[Missing] = field(default_factory=list)

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
        self.in_own: dict[int, tuple[Span, str]] = {}  # span found verbatim in this text of its own segment
        self.held: dict[int, tuple[Span, Segment, bool]] = {}  # protected_spans' verdict per span
        self.file_reads: dict[str, tuple[Segment, Segment | None, bool]] = {}  # result -> (it, its call, read/edit?)

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
        if len(self.in_own) + len(self.held) > 64 * live + 4096:
            self.in_own.clear()
            self.held.clear()


class _Output:
    """The compacted output as the checks see it: kept texts (per segment) plus the summary.

    The output is never joined into one text: the squashed (whitespace-collapsed) output is built
    piece by piece, a raw text is looked for in each piece, and across pieces only when it holds a
    line break (only then can it straddle two of them)."""

    def __init__(self, kept: dict[str, str], summary: str | None, memo: TextMemo | None = None):
        self.memo = memo
        if memo is not None:
            memo.trim(len(kept))
            norm = memo.normalize
            self.kept = {sid: norm(t) for sid, t in kept.items()}
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
        own = self.kept.get(sp.segment_id or "")
        memo = self.memo
        if memo is not None and own is not None:
            hit = memo.in_own.get(id(sp))
            if hit is not None and hit[0] is sp and hit[1] is own:
                return True
        t = sp.text
        if not t.strip() or (own is not None and t in own):
            if memo is not None and own is not None:
                memo.in_own[id(sp)] = (sp, own)
            return True
        return False

    def _in_output(self, t: str) -> bool:
        if "\n" in t:
            return t in self.blob
        return any(t in p for p in self._pieces())

    def has_span(self, sp: Span) -> bool:
        if self.memo is not None and self.in_own(sp):
            return True
        t = sp.text
        if not t.strip():
            return True
        own = self.kept.get(sp.segment_id or "")
        if own is not None and t in own:
            return True
        if t in self.summary or self._in_output(t):
            return True
        return squash(t) in self.squashed  # re-indented or re-wrapped by a renderer, same words

    def has(self, text: str, prefix: int = _PREFIX, own: str | None = None) -> bool:
        """Is ``text`` in the output? ``own``: the id of the segment it comes from, looked at first
        (the squashed output holds every squashed segment whole, so a hit there is a hit)."""
        if own is not None and own in self.kept:
            part = self.memo.squash(self.kept[own]) if self.memo is not None else squash(self.kept[own])
            if present(text, part, prefix=prefix):
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


def _file_tool_results(segments: list[Segment], memo: TextMemo | None = None) -> set[str]:
    """Ids of tool results that are file reads / edits (their numbers are file contents, not
    observations), as the anchor's own call reader classifies the paired call."""
    try:
        from ..anchor.files import call_effects
        from ..formats.calls import NOT_JSON, call_of, make_call
    except ImportError:  # pragma: no cover
        return set()
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
        # the paired call's arguments under the result's tool name and command (a reader may pair a
        # result with a call of the same id but another command: SWE-agent replays); an unpaired
        # result: its tool name and command
        if c is None:
            call = make_call(s.tool_name, s.command or "", s.command)
        else:
            cc = call_of(c)
            if (cc.name, cc.command) != (s.tool_name, s.command):
                cc = make_call(s.tool_name, cc.raw, s.command, cc.arguments if cc.arguments is not None else NOT_JSON)
            call = cc
        try:
            kind = call_effects(call).kind
        except Exception:  # noqa: BLE001 - classification is best effort
            continue
        if memo is not None:
            memo.file_reads[s.id] = (s, c, kind in ("read", "edit"))
        if kind in ("read", "edit"):
            out.add(s.id)
    return out


def protected_spans(segments: list[Segment], spans: list[Span], memo: TextMemo | None = None) -> list[Span]:
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

    With a conversation's ``memo`` a span's verdict is kept while its segment is the same.
    """
    by_id = {s.id: s for s in segments}
    file_results: set[str] | None = None
    out: list[Span] = []
    held = memo.held if memo is not None else None
    for sp in spans:
        seg = by_id.get(sp.segment_id or "")
        if held is not None:
            hit = held.get(id(sp))
            if hit is not None and hit[0] is sp and hit[1] is seg:
                if hit[2]:
                    out.append(sp)
                continue
        if seg is None or seg.meta or seg.role == Role.system or not sp.text.strip():
            continue
        fam = sp.family
        if fam in _EVIDENCE:
            ok = seg.role != Role.assistant
        elif fam == "constraint":
            ok = seg.role == Role.user
        elif fam in _LOOSE:
            ok = seg.role in (Role.user, Role.assistant) and seg.kind == SegmentKind.message
        elif fam == "number":
            if seg.kind == SegmentKind.tool_call:
                ok = False  # the arguments of a call: code and data, recorded as the change made
            elif seg.role in (Role.user, Role.assistant):
                ok = True
            else:
                if file_results is None:
                    file_results = _file_tool_results(segments, memo)
                ok = seg.id not in file_results
        else:
            ok = fam == "placeholder"
        if held is not None and not (fam == "number" and seg.kind == SegmentKind.tool_result):
            held[id(sp)] = (sp, seg, ok)  # (whether a result is a file read depends on its call: not kept)
        if ok:
            out.append(sp)
    return out


def run_selfcheck(segments: list[Segment], spans: list[Span], full_anchor: Anchor | None,
                  kept: dict[str, str], summary: str | None, *, folded: bool | None = None,
                  protected: list[Span] | None = None, memo: TextMemo | None = None) -> SelfCheckResult:
    """Ask the three questions of an output; return what failed and what is missing.

    ``segments`` and ``spans`` are the original's; ``kept`` maps the ids of the segments still in
    the output to their current text; ``summary`` is the inserted summary (or None). ``folded``
    says whether turns were folded away (default: some segment is not in ``kept``). ``memo``
    (a conversation's :class:`TextMemo`) saves normalising the texts seen before.
    """
    out = _Output(kept, summary, memo)
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
    req = newest_request(segments)
    if req is not None and not out.has(req.text, prefix=300, own=req.id):
        add(Missing("continuity", "newest-request", f"newest-request:{req.step_id}", req.text, req.step_id))
    cursor = getattr(a, "cursor", None)
    intent_text = (getattr(cursor, "objective", "") or a.intent.current or a.intent.newest_request)
    if req is not None:
        rq = squash(req.text)
        stale = False
        if a.intent.newest_request and len(rq) >= 15:
            an = squash(a.intent.newest_request).rstrip("…").rstrip()
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
