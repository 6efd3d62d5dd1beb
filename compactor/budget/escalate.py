"""Level 2 (anchor) and Level 3 (budget), after the pipeline's Level 1.

Called by :meth:`compactor.Compactor._higher_levels` as ``escalate(compactor, state)``.

- The anchor is always built from the FULL original (``build_anchor``), so ``--emit anchor`` and
  ``--emit markdown`` work at every level but 0.
- ``level="auto"`` without a budget: Level 1 only (plus the self-check).
- With an explicit ``level`` 2 / 3 and no budget: Level 2 replaces the older turns (everything
  but the last ``keep_recent_turns`` turns) by the anchor rendered as Markdown (``to_markdown``,
  in ``config.lang``), one summary message where they were; Level 3 folds all but the last turn
  and halves the anchor. A turn is a step: a tool call and its result always share one, so they
  are never split. Pinned, never dropped: the system prompt, the step of the newest user request,
  and summaries of earlier compactions.
- With a budget: the ladder of :mod:`.steps` — fold from the oldest end a batch at a time and
  stop as soon as it fits (Level 2), else shorten the anchor as more turns fold (Level 3), else
  the priority ladder from the floor (:mod:`.ladder`, Level 3); after any of them, fill what is
  left by priority. Every candidate is measured as written (every text of the layout, read
  back); the passes are finite by construction (at most one per turn), and an escalation that
  cannot fit raises :class:`~compactor.errors.BudgetError` naming the floor. It never loops.

- Every compaction ends with the self-check (:mod:`compactor.audit.selfcheck`), which back-fills
  anything missing; back-filled text counts against the budget like the rest.
- Level 3 raises the exit signal; ``compactor.level3_count`` counts Level 3 compactions on that
  :class:`~compactor.Compactor`, and from ``config.handoff_after`` on a new session is recommended
  and ``state.handoff`` holds the hand-off document.

The dropped originals are saved in the store: the summary's first line carries their reference
(``compactor expand c-…`` gives them back exactly).
"""

from __future__ import annotations

from ..collapse.store import content_id
from ..errors import BudgetError, CompactorError
from ..models import Anchor, Diagnostic, Placeholder, Role, SegmentKind, Severity
from ..normalize import normalize
from ..record import Record
from ..segments import changed, segment_index
from ..audit.common import is_request, newest_request
from ..audit.selfcheck import apply_to_anchor, backfill_markdown, protected_spans, run_selfcheck
from ..syntax import is_summary_text
from . import steps

__all__ = ["escalate", "plan_units", "Unit"]

FOLD_RULE = "policy.fold-turns"
_MORE_FOLDS = 8  # batches folded past the first fit to make room for the folded turns' evidence
_MAX_RETRIES = 3


class Unit(Record, plain=True, frozen=False):
    """A group of segments that is kept or dropped as a whole: one step (turn)."""

    key: str
    ids: list[str]
    step_ids: list[str]
    pinned: bool
    why_pinned: str = ""


def plan_units(state, anchor: Anchor | None = None) -> list[Unit]:
    """The conversation as droppable units, in order. Step 0 (system prompt, demonstrations) is
    split per segment; steps ≥ 1 are whole (a call and its result share a step)."""
    segs = state.segments
    req = newest_request(segs, anchor)
    pin_ids: dict[str, str] = {}
    if req is not None:
        pin_ids[req.id] = f"newest user request ({req.step_id})"
    if anchor is not None and anchor.intent.newest_request_step:
        for s in segs:
            if s.step_id == anchor.intent.newest_request_step and is_request(s):
                pin_ids.setdefault(s.id, f"newest user request ({s.step_id})")
    # records (messages) of a step that hold only user messages can go on their own: no call or
    # result is in them, so the step's calls and results still stay together
    rec_roles: dict[tuple[int, str], set[tuple[str, str]]] = {}
    for s in segs:
        rec_roles.setdefault((s.step, _record(s.id)), set()).add((s.role.value, s.kind.value))
    units: list[Unit] = []
    by_key: dict[str, Unit] = {}
    for s in segs:
        own = rec_roles[(s.step, _record(s.id))] == {("user", "message")}
        if s.step == 0:
            key = f"0:{s.id}"
        elif own:
            key = f"u:{s.step}:{_record(s.id)}"
        else:
            key = f"s:{s.step}"
        u = by_key.get(key)
        if u is None:
            u = Unit(key, [], [], False)
            by_key[key] = u
            units.append(u)
        u.ids.append(s.id)
        if s.step_id not in u.step_ids:
            u.step_ids.append(s.step_id)
        if s.role == Role.system and not s.meta and s.kind == SegmentKind.message and not u.pinned:
            u.pinned, u.why_pinned = True, "system prompt"
        elif s.kind == SegmentKind.message and is_summary_text(s.text) and not u.pinned:
            u.pinned, u.why_pinned = True, f"summary of an earlier compaction ({s.step_id})"
        elif s.id in pin_ids and not u.pinned:
            u.pinned, u.why_pinned = True, pin_ids[s.id]
    return units


def _record(seg_id: str) -> str:
    """The record (message / event / line) a segment id belongs to: readers name segments
    ``m12``, ``m12.0``, ``m12.c0``, ``m12.r0``…"""
    return seg_id.split(".", 1)[0]


class _Escalation:
    def __init__(self, compactor, state, full: Anchor, budget: int | None = None):
        from ..anchor import to_markdown
        from .anchor_fit import fit_budget

        self.comp = compactor
        self.state = state
        self.cfg = state.config
        self.counter = compactor.counter
        self.lang = self.cfg.lang
        self.full = full
        self.to_markdown = to_markdown
        self.fit_budget = fit_budget
        self.spans = state.spans(copy=False)  # (read only, during this compaction)
        self.memo = _text_memo(compactor)  # the conversation's normalised texts (self-check)
        self.index = segment_index(getattr(state, "conversation", None), state.segments)
        self.protected = protected_spans(state.segments, self.spans, self.memo, self.index.by_id,
                                         version=self.index.rebinds)
        self.achieved: list[int] = []  # totals of rendered candidates (for the error message)
        self._units: list[Unit] | None = None
        self._tok: dict[str, int] | None = None
        self.best_over: int | None = None  # smallest total seen that did not fit (for the error)
        self.budget = budget if budget is not None else self.cfg.budget
        self.cut: list = []  # ladder items cut to fit (priority order)
        self.floor: int | None = None
        self.filled: list = []  # ladder items put back verbatim after a fold fitted (steps.fill)
        self.left_behind: list = []  # evidence items (priority <= 5) the last fill could not put back

    @property
    def tok(self) -> dict[str, int]:
        """Tokens of every segment's current text, counted on first use (Level 1 without a
        budget never needs them)."""
        if self._tok is None:
            count = self.counter.count
            texts = self.state.texts
            self._tok = {s.id: count(texts[s.id]) for s in self.state.segments}
        return self._tok

    @property
    def units(self) -> list[Unit]:
        """Droppable units, planned on first use (the no-budget path never needs them)."""
        if self._units is None:
            self._units = plan_units(self.state, self.full)
        return self._units

    @property
    def weights(self) -> dict[str, int]:
        """Tokens of every segment as written: its text plus every mirror copy the layout keeps
        of it (what folding it saves)."""
        if getattr(self, "_weights", None) is None:
            mirrors = self.state.doc.state.mirrors if self.state.doc is not None else {}
            self._weights = {sid: t * (1 + len(mirrors.get(sid, ()))) for sid, t in self.tok.items()}
        return self._weights

    def summary_estimate(self) -> int:
        """An upper bound of a Level 2 summary's tokens before the self-check's back-fill: the
        reference marker and the whole anchor as Markdown."""
        head, _, _ = self.marker({s.id for s in self.state.segments}, 2)
        return self.counter.count(head + "\n\n" + self.to_markdown(self.full, lang=self.lang).strip()) + 8

    def protected_by_segment(self) -> dict[str, list]:
        if getattr(self, "_by_seg", None) is None:
            by_seg: dict[str, list] = {}
            for sp in self.protected:
                by_seg.setdefault(sp.segment_id or "", []).append(sp)
            self._by_seg = by_seg
        return self._by_seg

    # ---------------------------------------------------------------- measuring
    def kept_tokens(self, dropped: set[str]) -> int:
        return sum(t for sid, t in self.tok.items() if sid not in dropped)

    def total(self, dropped: set[str], summary: str | None) -> int:
        return self.kept_tokens(dropped) + (self.counter.count(summary) if summary else 0)

    # ---------------------------------------------------------------- rendering
    def marker(self, dropped: set[str], level: int) -> tuple[str, str, str]:
        segs = [s for s in self.state.segments if s.id in dropped]
        steps = sorted({s.step for s in segs})
        data = "".join(f"--- {s.id} {s.role.value} {s.kind.value} {s.step_id}\n{s.text}\n" for s in segs)
        ref = content_id(data.encode("utf-8", errors="surrogatepass"))
        lo = next(s.step_id for s in segs if s.step == steps[0]) if steps else ""
        hi = next(s.step_id for s in reversed(segs) if s.step == steps[-1]) if steps else ""
        rng = lo if lo == hi else f"{lo}–{hi}"
        if self.lang == "zh":
            line = (f"[compactor: 第 {level} 级压缩 — 较早的 {len(segs)} 段对话（步骤 {rng}）已整理为下面的工作状态，"
                    f"原文可用 compactor expand 取回 · ref {ref}]")
        else:
            line = (f"[compactor: level {level} — {len(segs)} earlier segments (steps {rng}) were compacted into "
                    f"the working state below; the originals expand back · ref {ref}]")
        return line, ref, data

    def summary_anchor(self, dropped: set[str]) -> Anchor:
        """The anchor for the summary: evidence already visible verbatim in the kept messages is
        not repeated."""
        kept = "\n".join(normalize(self.state.texts[s.id]) for s in self.state.segments if s.id not in dropped)
        ev = [e for e in self.full.key_evidence if not (e.text and e.text in kept)]
        if len(ev) == len(self.full.key_evidence):
            return self.full
        return self.full.model_copy(update={"key_evidence": ev})

    def render(self, dropped: set[str], level: int, room: int | None):
        """(summary text, anchor used, self-check result, diagnostics). Raises BudgetError when
        ``fit_budget`` cannot shorten the anchor to ``room``."""
        a = self.summary_anchor(dropped)
        diags: list[Diagnostic] = []
        if room is not None:
            a, diags = self.fit_budget(a, max(1, room), self.counter, lang=self.lang)
        head, _, _ = self.marker(dropped, level)
        text = head + "\n\n" + self.to_markdown(a, lang=self.lang).strip()
        kept = {s.id: self.state.texts[s.id] for s in self.state.segments if s.id not in dropped}
        res = run_selfcheck(self.state.segments, self.spans, self.full, kept, text, folded=bool(dropped),
                            protected=self.protected, memo=self.memo, index=self.index)
        if res.missing:
            text = text + "\n\n" + backfill_markdown(res.missing, self.lang)
        return text, a, res, list(diags)

    # ---------------------------------------------------------------- levels
    def level2_drop(self) -> set[str]:
        k = self.cfg.keep_recent_turns
        free = [u for u in self.units if not u.pinned]
        old = free[: max(0, len(free) - k)] if k else free
        return {sid for u in old for sid in u.ids}

    def fold_order(self, dropped: set[str]) -> list[Unit]:
        return [u for u in self.units if not u.pinned and not all(sid in dropped for sid in u.ids)]

    def overhead(self, dropped: set[str], level: int) -> int:
        head, _, _ = self.marker(dropped, level)
        return self.counter.count(head + "\n\n") + 2

    def try_fit(self, dropped: set[str], budget: int, reserve: int = 0):
        """Level 3 on one set of dropped turns: shorten the anchor to the room left (less
        ``reserve``, kept free for the fill). Returns the rendered candidate that fits, or None.

        The reserve is held on the candidate as written, not only on the anchor: the self-check's
        back-fill comes on top of the shortened anchor, so while the candidate takes more than
        ``budget - reserve`` the anchor is shortened again by what it takes over. When the anchor
        cannot go lower (its critical items), the smallest candidate within ``budget`` is returned."""
        from .anchor_fit import anchor_tokens

        target = budget - max(0, reserve)
        room = target - self.kept_tokens(dropped) - self.overhead(dropped, 3)
        best = None
        for _ in range(_MAX_RETRIES):
            if room < 1:
                break
            try:
                cand = self.render(dropped, 3, room)
            except BudgetError:
                break
            total = self.total(dropped, cand[0])
            self.achieved.append(total)
            if total <= budget and (best is None or total < best[1]):
                best = (cand, total)
            if total <= target:
                break
            if total > budget:
                self.best_over = total if self.best_over is None else min(self.best_over, total)
            # strictly smaller room next time, from the anchor as it came out (it may be under the
            # room asked for, and then a cut by the overshoot alone would render the same)
            room = min(room, anchor_tokens(cand[1], self.counter, lang=self.lang)) - (total - target)
        return best

    def minimum(self) -> int | None:
        """The smallest output escalation can reach: every free turn folded, the anchor cut to its
        critical items (binary search on the room ``fit_budget`` accepts). None if not even that
        renders."""
        dropped = {sid for u in self.units if not u.pinned for sid in u.ids}
        from .anchor_fit import anchor_tokens

        hi = anchor_tokens(self.summary_anchor(dropped), self.counter, lang=self.lang) + 1
        lo = 1
        best = None
        for _ in range(40):
            if lo > hi:
                break
            mid = (lo + hi) // 2
            try:
                cand = self.render(dropped, 3, mid)
            except BudgetError:
                lo = mid + 1
                continue
            best = self.total(dropped, cand[0])
            hi = mid - 1
        return best

    def cannot_fit(self, budget: int, allowed: int) -> BudgetError:
        pinned = [u for u in self.units if u.pinned]
        pinned_ids = {i for u in pinned for i in u.ids}
        parts = []
        for u in pinned:
            n = sum(self.tok[sid] for sid in u.ids)
            if n:
                parts.append(f"{u.why_pinned} {n}")
        prot = {sp.text for sp in self.protected if sp.segment_id not in pinned_ids}
        ptoks = self.counter.count("\n".join(sorted(prot))) if prot else 0
        if ptoks:
            parts.append(f"protected evidence {ptoks} ({len(prot)} spans: errors, traces, numbers, constraints, "
                         f"failed approaches)")
        reach = [t for t in (self.minimum() if allowed >= 3 else None, self.best_over, *self.achieved,
                             self.total(set(), None)) if t]
        need = min(reach) if reach else sum(self.tok[sid] for sid in pinned_ids) + ptoks
        what = ", ".join(parts) if parts else "the anchor"
        if allowed >= 3:
            lead = "even with every turn folded into the anchor, what must stay verbatim"
        else:
            lead = f"at level {allowed} (the highest level allowed; allow level 3 or auto) the output"
        if need > budget:
            advice = f"raise the budget to at least {need}"
        else:  # the estimate is not a proven minimum: do not promise a number that does not work
            smallest = min([t for t in (self.best_over, *self.achieved) if t and t > budget], default=None)
            need = smallest or need
            advice = f"raise the budget (the smallest output tried was {need} tokens)"
        return BudgetError(f"budget of {budget} tokens cannot be met: {lead} needs about {need} tokens — "
                           f"{what} (tokens); {advice}, or start a new session from "
                           f"the hand-off document (--emit handoff)")

    # ---------------------------------------------------------------- main
    def run(self) -> None:
        """The ladder (see :mod:`.steps`): Level 1 when it fits; else fold a batch at a time into
        the anchor (Level 2), else shorten the anchor as more turns fold (Level 3), each followed
        by the fill by priority; else the priority ladder from the floor."""
        cfg = self.cfg
        forced = cfg.level if isinstance(cfg.level, int) else None
        budget = self.budget
        if budget is None:
            if forced is None:  # Level 1 only: nothing to measure
                self.finish(set(), None, 1, None, None)
            else:
                self.run_forced(forced)
            return
        l1_total = self.written(set(), None)
        if forced in (None, 1) and l1_total <= budget:
            self.finish(set(), None, 1, None, None)
            return
        if forced == 1:
            self.best_over = l1_total
            raise self.cannot_fit(budget, 1)
        batch = max(1, cfg.collapse_batch)
        got = None
        if forced != 3:
            got = steps.fold(self, budget, keep_recent=cfg.keep_recent_turns, batch=batch)
            if got is None and forced == 2:
                self.best_over = min(self.achieved, default=None)
                raise self.cannot_fit(budget, 2)
        if got is None:
            got = steps.shorten(self, budget, self.level2_drop())
        if got is None:
            if l1_total <= budget:  # a forced level 3 could not do better than what already fits
                self.no_gain(3, self.best_over or l1_total, l1_total)
                self.finish(set(), None, 1, None, None)
                return
            self.run_ladder(budget)
            return
        if got.total >= l1_total and l1_total <= budget:
            # a forced level 3 that would only make the output bigger is not applied
            self.no_gain(got.level, got.total, l1_total)
            self.finish(set(), None, 1, None, None)
            return
        self.state.stages.append(f"level{got.level}:{got.passes}:{got.total}")
        self.left_behind = []
        filled = steps.fill(self, got, budget)
        # evidence of the folded turns ranks above the recent turns whole: while the fill had to
        # leave some behind, fold one batch more and fill again (kept when it leaves less behind)
        for _ in range(_MORE_FOLDS):
            if not self.left_behind:
                break
            behind, was_filled = self.left_behind, self.filled
            # fold, in one step, as many batches as the evidence left behind needs room for
            need = self._behind_tokens(behind)
            more = steps.fold_more(self, got, budget, keep_recent=cfg.keep_recent_turns, batch=batch, need=need)
            if more is None:
                break
            self.filled = []
            again = steps.fill(self, more, budget)
            if self._behind_tokens(self.left_behind) >= self._behind_tokens(behind):
                self.left_behind, self.filled = behind, was_filled
                break
            got, filled = more, again
            self.state.stages.append(f"level{got.level}:{got.passes}:{got.total}")
        if filled is not got:
            self.state.stages.append(f"fill:{len(self.filled)}:{filled.total}")
        self.finish(filled.dropped, filled.cand, filled.level, l1_total, filled.total)

    def _behind_tokens(self, items: list) -> int:
        """Tokens of the evidence a fill left behind (each line and its line break)."""
        return sum(self.counter.count(it.text) + 1 for it in items)

    def run_forced(self, forced: int) -> None:
        """An explicit level without a budget: Level 2 folds every turn but the recent ones;
        Level 3 folds all but the last turn and halves the anchor. A level that would not shrink
        the output is not applied."""
        st = self.state
        l1_total = self.total(set(), None)
        if forced == 1:
            self.finish(set(), None, 1, None, None)
            return
        dropped = self.level2_drop()
        best_total = l1_total
        l2 = None
        if dropped or forced == 2:
            text, a, res, diags = self.render(dropped, 2, None)
            total = self.total(dropped, text)
            self.achieved.append(total)
            st.stages.append(f"level2:{total}")
            l2 = (dropped, (text, a, res, diags), total)
            if forced == 2:
                if total < l1_total:
                    self.finish(dropped, l2[1], 2, l1_total, total)
                else:
                    self.no_gain(2, total, l1_total)
                    self.finish(set(), None, 1, None, None)
                return
            if total < best_total:
                best_total = total
            else:
                dropped = set()  # Level 2 did not shrink: Level 3 starts from Level 1
        order = self.fold_order(dropped)
        for u in order[:-1]:
            dropped |= set(u.ids)
        a = self.summary_anchor(dropped)
        from .anchor_fit import anchor_tokens

        room = max(1, anchor_tokens(a, self.counter, lang=self.lang) // 2)
        try:
            cand = self.render(dropped, 3, room)
        except BudgetError:
            cand = self.render(dropped, 3, None)
            st.diagnostics.append(Diagnostic(code="anchor-not-shortened", severity=Severity.info,
                                             message="level 3 without a budget: the anchor could not be halved; "
                                                     "kept whole"))
        total = self.total(dropped, cand[0])
        if total < best_total:
            self.finish(dropped, cand, 3, l1_total, total)
        elif l2 is not None and l2[2] < l1_total:
            self.no_gain(3, total, l2[2])
            self.finish(l2[0], l2[1], 2, l1_total, l2[2])
        else:
            self.no_gain(3, total, l1_total)
            self.finish(set(), None, 1, None, None)

    # ---------------------------------------------------------------- the priority ladder
    def written(self, dropped: set[str], summary: str | None, texts: dict[str, str] | None = None) -> int:
        """Tokens of the output as the model sees it: written in the layout and read back.
        ``texts`` replaces segment texts for this candidate (a condensed request)."""
        from ..formats import Edits
        from .measure import sent_tokens

        st = self.state
        cur = {**st.texts, **(texts or {})}
        replace = {s.id: cur[s.id] for s in st.segments
                   if s.id not in dropped and cur[s.id] != s.text}
        return sent_tokens(st.doc, Edits(replace=replace, drop=set(dropped), summary=summary), self.counter)

    def ladder_plan(self):
        from .ladder import build_items

        if getattr(self, "_plan", None) is None:
            by_seg = self.protected_by_segment()
            from ..audit.common import newest_request

            req = newest_request(self.state.segments, self.full)
            rspans = [sp for sp in self.spans if req is not None and sp.segment_id == req.id]
            self._plan = build_items(self.state.segments, by_seg, self.state.texts, self.full, self.units, self.lang,
                                     request_spans=rspans)
        return self._plan

    def request_texts(self, chosen: list) -> dict[str, str]:
        """The condensed newest request, unless the chosen items put the whole one back."""
        plan = self.ladder_plan()
        if plan.condensed is None or any(it.whole_request for it in chosen):
            return {}
        sid, short, _ref = plan.condensed
        if plan.condensed_more is not None and any(it.request_more for it in chosen):
            return {sid: plan.condensed_more}
        return {sid: short}

    def ladder_candidate(self, chosen: list, budget: int) -> tuple[set[str], str]:
        """(dropped segment ids, summary text) for the chosen ladder items (the request's text:
        :meth:`request_texts`)."""
        from .ladder import marker_line, render

        plan = self.ladder_plan()
        keep = set(plan.request_ids)
        for it in chosen:
            keep.update(it.unit_ids)
        dropped = {s.id for s in self.state.segments if s.id not in keep}
        cur = {**self.state.texts, **self.request_texts(chosen)}
        kept_text = "\n".join(normalize(cur[s.id]) for s in self.state.segments if s.id in keep)
        from .ladder import _SHORT_HEAD

        whole_head = any(it.label == "live error header" for it in chosen)
        lines = [it for it in chosen if not it.unit_ids and not it.whole_request and not it.request_more
                 and not (whole_head and it.label == _SHORT_HEAD)
                 and not (_bare(it.text) and _bare(it.text) in kept_text)]
        segs = [s for s in self.state.segments if s.id in dropped]
        ref = self.marker(dropped, 3)[1] if dropped else ""
        rng = ""
        if segs:
            lo, hi = segs[0].step_id, segs[-1].step_id
            rng = lo if lo == hi else f"{lo}–{hi}"
        text = render(lines, marker_line(self.lang, len(segs), rng, ref))
        return dropped, text

    def ladder_floor(self, budget: int) -> int:
        plan = self.ladder_plan()
        floor_items = [it for it in plan.items if it.floor]
        dropped, text = self.ladder_candidate(floor_items, budget)
        return self.written(dropped, text, self.request_texts(floor_items))

    def run_ladder(self, budget: int) -> None:
        """Fit by priority (see :mod:`compactor.budget.ladder`): the floor first, then every item
        in ladder order while it fits; the output is measured as written. Raises BudgetError
        only below the floor."""
        plan = self.ladder_plan()
        floor_items = [it for it in plan.items if it.floor]
        floor = self.ladder_floor(budget)
        self.floor = floor
        # the evidence of every turn that may be folded, each line in its priority (before the
        # recent turns whole); a line a kept turn shows is not repeated (ladder_candidate)
        extra_ev = steps.folded_evidence(self, {s.id for s in self.state.segments if s.id not in plan.request_ids})
        items = sorted([*plan.items, *extra_ev], key=lambda it: it.priority)
        if floor > budget:
            raise BudgetError(self.floor_message(budget, floor), floor=floor)
        mirrors = self.state.doc.state.mirrors
        room = budget - floor
        chosen = list(floor_items)
        extra: list = []
        sections = {it.section for it in floor_items}
        turns_open = True
        req_now = self.counter.count(plan.condensed[1]) if plan.condensed is not None else 0
        for it in items:
            if it.floor:
                continue
            if (it.whole_request or it.request_more) and plan.condensed is not None:
                sid = plan.condensed[0]
                size = self.tok[sid] if it.whole_request else self.counter.count(plan.condensed_more or "")
                cost = (size - req_now) * (1 + len(mirrors.get(sid, ()))) + 4
            elif it.unit_ids:
                if it.label == "turn" and not turns_open:
                    continue
                cost = sum(self.tok[sid] * (1 + len(mirrors.get(sid, ()))) + 4 for sid in it.unit_ids)
            else:
                cost = self.counter.count(it.text) + 1
                if it.section not in sections:
                    cost += self.counter.count(it.section) + 2
            if cost <= room:
                room -= cost
                extra.append(it)
                if it.whole_request or it.request_more:
                    req_now = size
                elif not it.unit_ids:
                    sections.add(it.section)
            elif it.label == "turn":
                turns_open = False  # kept turns stay a contiguous tail
        # exact: the longest prefix of the greedy choice (priority order) that fits as written
        lo, hi, best = 0, len(extra), 0
        sizes: dict[int, int] = {}
        while lo <= hi:
            mid = (lo + hi) // 2
            d, text = self.ladder_candidate(chosen + extra[:mid], budget)
            n = sizes[mid] = self.written(d, text, self.request_texts(chosen + extra[:mid]))
            if n <= budget:
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        chosen = chosen + extra[:best]
        dropped, text = self.ladder_candidate(chosen, budget)
        ids = {id(it) for it in chosen}
        self.cut = [it for it in plan.items if id(it) not in ids]  # (the ladder's own items)
        condensed = self.request_texts(chosen)
        if condensed:  # the request is written condensed; its whole text expands back
            _sid, _short, rref = plan.condensed
            req = next(s for s in self.state.segments if s.id == _sid)
            self.save(rref, req.text)
            self.state.texts.update(condensed)
            self.state.budget_texts.update(condensed)
        kept = {s.id: self.state.texts[s.id] for s in self.state.segments if s.id not in dropped}
        res = run_selfcheck(self.state.segments, self.spans, self.full, kept, text, folded=True,
                            protected=self.protected, memo=self.memo, index=self.index)
        for it in chosen:
            for ref, original in it.originals.items():
                self.save(ref, original)
        total = self.written(dropped, text)
        self.state.stages.append(f"ladder:{len(chosen)}/{len(items)}:{total}")
        got = steps.Fit(dropped, (text, self.full, res, []), 3, total)
        filled = steps.fill(self, got, budget)
        if filled is not got:
            self.state.stages.append(f"fill:{len(self.filled)}:{filled.total}")
        self.finish(dropped, filled.cand, 3, None, None)

    def save(self, ref: str, original: str) -> None:
        try:
            got = self.comp.store.put(original.encode("utf-8", errors="surrogatepass"))
            assert got == ref
        except Exception as exc:  # noqa: BLE001 - best effort; the fold reference holds it too
            self.state.diagnostics.append(Diagnostic(code="store-failed", severity=Severity.warning,
                                                     message=f"could not save {ref}: {exc}"))

    def floor_message(self, budget: int, floor: int) -> str:
        plan = self.ladder_plan()
        parts = []
        if plan.request_ids:
            short = self.request_texts([])
            n = sum(self.counter.count(short[sid]) if sid in short else self.tok.get(sid, 0)
                    for sid in plan.request_ids)
            parts.append(f"the newest user request {n}" + (" (condensed)" if short else ""))
        nc = sum(self.counter.count(it.text) for it in plan.items if it.floor and it.priority == 1)
        if nc:
            parts.append(f"user constraints {nc}")
        live = [it for it in plan.items if it.floor and it.priority == 2]
        if live:
            short = " (its start)" if live[0].label != "live error header" else ""
            parts.append(f"the live error's header line{short} {self.counter.count(live[0].text)}")
        what = ", ".join(parts) or "the reference marker"
        return (f"budget of {budget} tokens cannot be met: it is below the floor of {floor} tokens ({what} tokens, plus the "
                f"reference marker, as written in the layout); raise the budget to at least {floor}")

    def finish(self, dropped: set[str], cand, level: int, before: int | None = None, after: int | None = None) -> None:
        """Apply a candidate (or, with ``cand`` None, Level 1 only) to the state. ``before`` /
        ``after`` are the totals of Level 1 and of the candidate (for the stages)."""
        st = self.state
        if cand is None:  # Level 1 only: the self-check on the raw output
            ids = self.index.update(st.segments).ids
            texts = list(map(st.texts.__getitem__, ids))
            if self.memo is not None:  # normalised where a text changed since the last turn
                res = run_selfcheck(st.segments, self.spans, self.full, None, None, folded=False,
                                    protected=self.protected, memo=self.memo, index=self.index,
                                    normalized=self.memo.normalize_kept(ids, texts, self.index))
            else:
                res = run_selfcheck(st.segments, self.spans, self.full, dict(zip(ids, texts)), None, folded=False,
                                    protected=self.protected, memo=self.memo)
            anchor = apply_to_anchor(self.full, res.missing, self.full)
            st.anchor = anchor
            if res.missing:
                st.summary = backfill_markdown(res.missing, self.lang)
            st.self_check = res.to_model()
            st.stages.append("self-check")
            self._budget_after_backfill(set())
            return
        text, _a, res, diags = cand
        st.dropped |= dropped
        st.summary = text
        st.diagnostics.extend(diags)
        st.level = max(st.level, level)
        # what leaves as result.anchor is the FULL anchor (the complete working memory, for
        # --emit anchor / markdown / handoff), with whatever the self-check put back; the
        # summary in the messages holds the (Level 3: shortened) rendering the agent sees
        st.anchor = apply_to_anchor(self.full, res.missing, self.full)
        st.self_check = res.to_model()
        if dropped:
            _, ref, data = self.marker(dropped, level)
            try:
                self.comp.store.put(data.encode("utf-8", errors="surrogatepass"))
                import hashlib

                raw = data.encode("utf-8", errors="surrogatepass")
                st.placeholders.append(Placeholder(
                    id=ref, rule_id=FOLD_RULE, summary=f"{len(dropped)} segments folded into the anchor (level {level})",
                    sha256=hashlib.sha256(raw).hexdigest(), segment_id=None,
                    tokens_before=sum(self.tok[s] for s in dropped), tokens_after=self.counter.count(text)))
            except Exception as exc:  # noqa: BLE001 - the store is best effort here; the anchor has the content
                st.diagnostics.append(Diagnostic(code="store-failed", severity=Severity.warning,
                                                 message=f"could not save the folded turns: {exc}"))
        st.stages.append(f"level{level}")
        st.stages.append("self-check")
        if level >= 3:
            st.exit_signal = True
            self.comp.level3_count = getattr(self.comp, "level3_count", 0) + 1
            if self.comp.level3_count >= self.cfg.handoff_after:
                st.recommend_new_session = True
                from .handoff import handoff_document

                st.handoff = handoff_document(st, self.lang, level3_count=self.comp.level3_count)

    def no_gain(self, level: int, total: int, best: int) -> None:
        """A forced level that would not shrink the output is not applied: the smaller output is
        kept (compaction never grows a conversation)."""
        self.state.diagnostics.append(Diagnostic(
            code="level-not-applied", severity=Severity.info,
            message=f"level {level} was requested but would not shrink the output ({total} tokens, "
                    f"{best} without it); kept the smaller output"))

    def _budget_after_backfill(self, dropped: set[str]) -> None:
        budget = self.budget
        if budget is None:
            return
        total = self.total(dropped, self.state.summary)
        if total > budget:
            self.state.diagnostics.append(Diagnostic(
                code="budget-exceeded-by-backfill", severity=Severity.warning,
                message=f"the self-check put back missing evidence; the output is {total} tokens (budget {budget})"))


def _text_memo(conversation):
    """The conversation's self-check text memo (created on first use), or None."""
    memo = getattr(conversation, "text_memo", False)
    if memo is None:
        from ..audit.selfcheck import TextMemo

        memo = conversation.text_memo = TextMemo()
    return memo or None


def _bare(line: str) -> str:
    return normalize(line.removeprefix("- ")).strip()


def _seg_key(seg, spans) -> tuple:
    return (seg.id, seg.step_id, seg.role.value, seg.kind.value, seg.meta, seg.call_id, seg.tool_name, seg.command,
            seg.exit_code, seg.is_error, seg.text,
            tuple((sp.rule_id, sp.start, sp.end, sp.elided, sp.text) for sp in spans))


def full_anchor(compactor, state) -> Anchor:
    """The anchor of the whole original. An agent calling ``compact()`` every turn on its growing
    conversation pays only for the new segments: when the previous call's segments (and their
    spans) are a prefix of this one's, the cached anchor is evolved with ``merge`` — which gives
    exactly the anchor ``build_anchor`` would (merging is building, chunk by chunk).

    The prefix is checked segment by segment, by identity first (a session's reader keeps its
    segment objects, detection its spans) and by content where identity differs; the anchor
    stage and the budget stage of one compaction share the result."""
    from ..anchor.build import build_anchor_live, merge_live

    segs = state.segments
    outcomes = state.outcomes
    none: tuple = ()
    conv = getattr(state, "conversation", None)
    index = segment_index(conv, segs)
    log = getattr(conv, "outcome_log", None)
    outs = log.outs if log is not None and len(log.outs) == len(segs) and log.since(log.runs, index) is not None \
        else list(map(outcomes.get, index.ids))

    def spans_of(s) -> tuple:
        o = outcomes.get(s.id)
        return tuple(o.spans) if o is not None else none

    cfg_key = state.config if state.config is getattr(compactor, "config", None) else state.config.model_dump_json()
    cached = getattr(compactor, "_policy_anchor_cache", None)
    anchor = live = None
    if cached is not None and len(cached) in (5, 7) and (cached[0] is cfg_key or cached[0] == cfg_key):
        _, csegs, canchor, couts, clive = cached[:5]
        n = len(csegs)
        same = n <= len(segs)
        # a session's segment index vouches that the cached segments are the first ones (the same
        # objects) and its outcome log says from where their outcomes may differ: only the rest
        # is compared
        lo = 0
        if len(cached) == 7 and log is not None and index.extends(cached[5]):
            got = log.since(cached[6], index)
            lo = min(got, n) if got is not None else 0
        if same:
            # the same segment with the same Level 1 outcome object: nothing to compare; only the
            # segments where either differs are compared by content
            moved = {*changed(csegs, segs), *changed(couts, outs)} if not lo else \
                {lo + i for i in changed(couts[lo:n], outs[lo:n])}
            for i in sorted(moved):
                s, c = segs[i], csegs[i]
                sp = spans_of(s)
                csp = tuple(couts[i].spans) if couts[i] is not None else none
                if (s is not c and _seg_key(s, sp) != _seg_key(c, csp)) or sp != csp:
                    same = False
                    break
        if same:
            rest = segs[n:]
            if not rest:
                return canchor
            # the working state the cached anchor froze from goes on with the new segments
            anchor, live = merge_live(canchor, rest, [sp for s in rest for sp in spans_of(s)], clive)
    if anchor is None:
        anchor, live = build_anchor_live(segs, [sp for s in segs for sp in spans_of(s)],
                                         objective=state.config.objective)
    try:
        if log is not None and outs is log.outs:
            compactor._policy_anchor_cache = (cfg_key, segs[:], anchor, outs[:], live, index.mark(), log.runs)
        else:
            compactor._policy_anchor_cache = (cfg_key, list(segs), anchor, outs, live)
    except AttributeError:  # pragma: no cover - a compactor that does not take attributes
        pass
    return anchor


_SNAPSHOT = ("dropped", "summary", "level", "anchor", "self_check", "exit_signal", "recommend_new_session", "handoff")


def _snapshot(compactor, state) -> tuple:
    return ({k: getattr(state, k) for k in _SNAPSHOT}, set(state.dropped), len(state.diagnostics),
            len(state.placeholders), len(state.stages), getattr(compactor, "level3_count", 0),
            dict(state.texts), dict(state.budget_texts))


def _restore(compactor, state, snap) -> None:
    fields, dropped, nd, np_, ns, l3, texts, budget_texts = snap
    state.texts.clear()  # a condensed request goes back to its Level 1 text
    state.texts.update(texts)
    state.budget_texts.clear()
    state.budget_texts.update(budget_texts)
    for k, v in fields.items():
        setattr(state, k, v)
    state.dropped = set(dropped)
    del state.diagnostics[nd:]
    del state.placeholders[np_:]
    del state.stages[ns:]
    compactor.level3_count = l3


def fit(compactor, state, target: int) -> None:
    """Fit a pipeline state (after Level 1) into ``target`` tokens as written. The entry point
    for callers that keep a margin (hysteresis): call it with a target well under the budget
    when the conversation went over, so the next turns do not compact again at once."""
    escalate(compactor, state, target=target)


def escalate(compactor, state, *, target: int | None = None) -> None:
    """Level 2 and Level 3 on a pipeline state after Level 1 (see the module docstring).

    With a budget the result is measured as written (every text of the layout, read back) and
    must fit: when the folded candidate is over (mirror copies, layout overhead), the priority
    ladder fits it exactly. ``target`` overrides ``config.budget``."""
    cfg = state.config
    if cfg.level == 0:
        return
    budget = target if target is not None else cfg.budget
    dropped, summary, level = set(state.dropped), state.summary, state.level
    # what a failure restores: without a budget no level rewrites a text (and the copy is a
    # pass over every segment each turn)
    texts = dict(state.texts) if budget is not None else None
    try:
        full = state.full_anchor if getattr(state, "full_anchor", None) is not None else full_anchor(compactor, state)
        state.anchor = full
        state.stages.append("anchor")
        if budget is None:
            _Escalation(compactor, state, full).run()
            return
        snap = _snapshot(compactor, state)
        esc = _Escalation(compactor, state, full, budget)
        try:
            esc.run()
            sent = esc.written(state.dropped, state.summary)
        except BudgetError as exc:
            esc.last_error = exc
            sent = None
        if (sent is None or sent > budget) and cfg.level in (1, 2):
            if sent is None:
                raise esc.last_error
            raise BudgetError(f"budget of {budget} tokens cannot be met at level {cfg.level} (the highest level "
                              f"allowed): the output is {sent} tokens as written; allow level 3 or auto")
        if sent is None or sent > budget:
            _restore(compactor, state, snap)
            if sent is not None:
                state.diagnostics.append(Diagnostic(
                    code="budget-refit", severity=Severity.info,
                    message=f"the folded output is {sent} tokens as written (budget {budget}: mirror copies and "
                            f"layout text count); fitted by priority instead"))
            esc = _Escalation(compactor, state, full, budget)
            esc.run_ladder(budget)
            sent = esc.written(state.dropped, state.summary)
        _report_budget(state, esc, budget, sent)
    except CompactorError:
        raise
    except Exception as exc:  # noqa: BLE001 - fail toward preservation: keep the Level 1 result
        state.dropped, state.summary, state.level = dropped, summary, level
        if texts is not None:
            state.texts.clear()
            state.texts.update(texts)
        state.budget_texts.clear()
        state.exit_signal = state.recommend_new_session = False
        state.handoff = None
        state.diagnostics.append(Diagnostic(
            code="escalation-failed", severity=Severity.warning,
            message=f"levels 2-3 failed ({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); "
                    f"the Level 1 result is kept; please report it"))
        if budget is not None:
            total = sum(compactor.counter.count(state.texts[s.id]) for s in state.segments)
            if total > budget:
                raise BudgetError(f"budget of {budget} tokens cannot be met: levels 2-3 failed "
                                  f"({type(exc).__name__}); the Level 1 output is {total} tokens") from exc


def _report_budget(state, esc: _Escalation, budget: int, sent: int) -> None:
    """What the report says about the budget: the floor, the tokens as sent, what was cut."""
    from .ladder import PRIORITIES

    info = {"tokens_sent": sent}
    try:
        info["floor"] = esc.floor if esc.floor is not None else esc.ladder_floor(budget)
    except Exception:  # noqa: BLE001 - the floor is informative here; the output already fits
        info["floor"] = None
    cut = [{"priority": it.priority, "what": it.label, "step": it.step_id, "ref": it.ref,
            "text": (it.text[:200] if it.text else f"{len(it.unit_ids)} segments ({it.step_id})" if it.unit_ids else "")}
           for it in esc.cut]
    info["cut"] = cut
    state.budget_info = info
    if cut:
        counts: dict[int, int] = {}
        for c in cut:
            counts[c["priority"]] = counts.get(c["priority"], 0) + 1
        what = "; ".join(f"priority {p} ({PRIORITIES[p]}): {n}" for p, n in sorted(counts.items()))
        state.diagnostics.append(Diagnostic(
            code="budget-cut", severity=Severity.info,
            message=f"to fit {budget} tokens (floor {info['floor']}), cut by priority — {what}; every cut item "
                    f"expands back from the references in the summary"))
