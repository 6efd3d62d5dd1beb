"""The budget ladder's steps, each a small function on one escalation (:class:`.escalate._Escalation`).

When Level 1 is over the budget, :func:`.escalate.escalate` runs these in order and stops at the
first that fits:

1. :func:`fold` (Level 2) — fold the history into the anchor from the oldest end, a batch of
   turns at a time (``config.collapse_batch`` turns: one for a one-shot compaction, ten for a
   :class:`~compactor.Session`, so a prompt cache sees fewer, larger changes), and stop as soon
   as the output fits. The last ``keep_recent_turns`` turns are not folded at this level.
2. :func:`shorten` (Level 3) — the anchor shortened by priority to the room left
   (``fit_budget``), folding one more turn at a time, the recent ones too.
3. the priority ladder from the floor (:meth:`.escalate._Escalation.run_ladder`), when even every
   turn folded into the critical anchor items does not fit.

After any of them fits, :func:`fill` puts back verbatim, in the ladder's order of priority
(:mod:`.ladder`), what the folded turns held and the summary does not show yet — the live error
with its frames and exit code, the user's constraints, the failed approaches, the older errors,
every other error line, frame and exit code of the folded turns (:func:`folded_evidence`), then
the newest folded outputs whole (:func:`folded_outputs`) — while the output still fits. When it
has to leave evidence behind, :func:`fold_more` folds one batch more (that evidence ranks above
the recent turns whole) and the fill runs again. Each step is measured on the output as written
in its layout (mirror copies count), so what it returns fits.
"""

from __future__ import annotations

from ..collapse.older import EVIDENCE_FAMILIES, evidence_spans
from ..collapse.store import content_id
from ..models import Role, SegmentKind
from ..normalize import normalize
from ..record import Record
from .ladder import LadderItem, render_sections

__all__ = ["Fit", "fold_batches", "fold", "fold_more", "shorten", "fill", "fill_items", "folded_evidence", "folded_outputs",
           "longest_prefix"]

_CALL_CHARS = 1500  # a failed call up to this long is put back whole (its arguments are what was tried)
_RENDER_TRIES = 4  # renders of one fold step past the estimate before it gives up on that step
_FOLDED = {"en": "## Evidence from the folded turns (verbatim)", "zh": "## 已折叠对话中的证据（原文）"}
_OUTPUTS = {"en": "## Newest folded outputs (verbatim)", "zh": "## 最近折叠的输出（原文）"}
_DEAD = {"en": "## Failed approaches in the folded turns", "zh": "## 已折叠对话中的失败尝试"}
_FAILED = {"en": "## Failed calls in the folded turns", "zh": "## 已折叠对话中失败的调用"}


class Fit(Record, plain=True, frozen=False):
    """A candidate that fits: the dropped segment ids, the rendered candidate
    (summary text, anchor, self-check result, diagnostics), its level and tokens."""

    dropped: set
    cand: tuple
    level: int
    total: int
    passes: int = 0
    reserve: int = 0  # room kept free for the fill when the anchor was shortened (Level 3)


def fold_batches(units: list, batch: int, keep_recent: int = 0) -> list[list]:
    """The free (not pinned) units, oldest first, in batches of ``batch``; the last
    ``keep_recent`` units are left out."""
    free = [u for u in units if not u.pinned]
    free = free[: max(0, len(free) - keep_recent)]
    step = max(1, batch)
    return [free[i:i + step] for i in range(0, len(free), step)]


def fold(esc, budget: int, *, keep_recent: int, batch: int) -> Fit | None:
    """Step 1 (Level 2): fold batches from the oldest end into the (whole) anchor, and stop at
    the first that fits. The search runs on token sums (each turn's tokens as written, the
    summary's size bounded by the whole anchor's); only the candidates the sums say may fit are
    rendered. None when folding every turn but the recent ones does not fit."""
    batches = fold_batches(esc.units, batch, keep_recent)
    if not batches:
        return None
    weight = esc.weights
    kept = sum(weight.values())
    summary_est = esc.summary_estimate()
    prefixes: list[set[str]] = []
    dropped: set[str] = set()
    for b in batches:
        dropped = dropped | {sid for u in b for sid in u.ids}
        prefixes.append(dropped)

    def attempt(i: int) -> Fit | None:
        cand = esc.render(prefixes[i], 2, None)
        total = esc.written(prefixes[i], cand[0])
        esc.achieved.append(total)
        return Fit(prefixes[i], cand, 2, total, i + 1) if total <= budget else None

    tries = 0
    for i, b in enumerate(batches):
        kept -= sum(weight[sid] for u in b for sid in u.ids)
        if kept + summary_est > budget and i + 1 < len(batches):
            continue  # certainly over (or the last chance): fold on
        got = attempt(i)
        if got is None:
            tries += 1
            if tries >= _RENDER_TRIES:
                # the estimate is too low for this run (a long self-check back-fill): fold on by sums
                summary_est = max(summary_est, esc.achieved[-1] - kept)
            continue
        # the sums bound the summary from above (it repeats no evidence a kept turn shows): an
        # earlier batch may fit too; step back while it does
        while i > 0:
            back = attempt(i - 1)
            if back is None:
                break
            got, i = back, i - 1
        return got
    return None


def shorten(esc, budget: int, dropped: set[str]) -> Fit | None:
    """Step 2 (Level 3): the anchor shortened by priority to the room left, folding one more turn
    at a time (the recent turns too). None when even every turn folded does not fit."""
    order = [u for u in esc.units if not u.pinned and not all(sid in dropped for sid in u.ids)]
    weight = esc.weights
    kept = sum(w for sid, w in weight.items() if sid not in dropped)
    passes = 0
    for i in range(len(order) + 1):  # pass i: i more turns folded (finite: one per turn)
        if i:
            ids = set(order[i - 1].ids)
            dropped = dropped | ids
            kept -= sum(weight[sid] for sid in ids)
        elif not dropped:
            continue  # a summary without folding anything only adds tokens
        if kept + esc.overhead(dropped, 3) >= budget:
            continue
        passes += 1
        got = esc.try_fit(dropped, budget)
        if got is not None:
            cand, _total = got
            total = esc.written(dropped, cand[0])
            if total <= budget:
                return Fit(dropped, cand, 3, total, passes)
    return None


def fold_more(esc, fit: Fit, budget: int, *, keep_recent: int, batch: int, need: int = 0) -> Fit | None:
    """More batches folded than ``fit`` (the oldest turns not folded yet): at least one, and as
    many as it takes for their tokens as written to reach ``need`` (the room the evidence left
    behind asks for); at Level 2 while the recent turns are not reached, else with the anchor
    shortened to the room left (Level 3). None when nothing is left to fold or it does not fit.
    Used when :func:`fill` had to leave evidence of the folded turns behind: the evidence ranks
    above the recent turns whole."""
    free = [u for u in esc.units if not u.pinned and not all(sid in fit.dropped for sid in u.ids)]
    if not free and fit.level != 3:
        return None
    step = max(1, batch) if fit.level == 2 else 1
    weight = esc.weights
    n, freed = 0, 0
    while n < len(free) and (n == 0 or freed < need):
        for u in free[n:n + step]:
            freed += sum(weight[sid] for sid in u.ids if sid not in fit.dropped)
        n = min(len(free), n + step)
    more = {sid for u in free[:n] for sid in u.ids}
    dropped = fit.dropped | more
    level2_room = len(free) - n >= keep_recent
    if fit.level == 2 and level2_room:
        cand = esc.render(dropped, 2, None)
        total = esc.written(dropped, cand[0])
        if total <= budget:
            return Fit(dropped, cand, 2, total, fit.passes + 1)
    # the anchor shortened to the room left, less the room the evidence needs (a shortened
    # anchor otherwise takes all of it)
    # (when folding more does not fit, e.g. the recent turns' evidence back-filled by the
    # self-check, or every turn is folded already: only the anchor can make room)
    reserve = min(fit.reserve + need if fit.level == 3 else need, budget // 2)
    tries = [dropped] if fit.level != 3 else [dropped, fit.dropped] if more else [fit.dropped]
    for d in tries:
        if d is fit.dropped and reserve <= fit.reserve:
            continue
        got = esc.try_fit(d, budget, reserve=reserve)
        if got is None:
            continue
        cand, _ = got
        total = esc.written(d, cand[0])
        if total <= budget:
            return Fit(d, cand, 3, total, fit.passes + 1, reserve)
    return None


def longest_prefix(items: list, measure, budget: int) -> tuple[int, dict[int, int]]:
    """The longest prefix of ``items`` whose ``measure(prefix)`` is within ``budget`` (binary
    search: the measure grows with the prefix). Returns its length and the sizes measured."""
    lo, hi, best = 0, len(items), 0
    sizes: dict[int, int] = {}
    while lo <= hi:
        mid = (lo + hi) // 2
        n = sizes[mid] = measure(items[:mid])
        if n <= budget:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best, sizes


def _ref(text: str) -> str:
    return content_id(text.encode("utf-8", errors="surrogatepass"))


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.split("\n") if ln.strip()), "")


def fill_items(esc, dropped: set[str]) -> list[LadderItem]:
    """What can be put back, in the ladder's order: the ladder's items with a text (live
    evidence, constraints, failed approaches, decisions, older evidence), the evidence of the
    folded turns (:func:`folded_evidence`), then the folded tool outputs whole (newest first)."""
    plan = esc.ladder_plan()
    out = [it for it in plan.items if it.text and not it.unit_ids and not it.whole_request and not it.request_more]
    # in priority order (stable: within a priority, the ladder's order, then the folded turns'):
    # the anchor's other items (priority 6) come after the folded turns' evidence
    return sorted(out + folded_evidence(esc, dropped), key=lambda it: it.priority) + folded_outputs(esc, dropped)


def folded_evidence(esc, ids: set[str]) -> list[LadderItem]:
    """The evidence of the segments ``ids``, newest segment first: the constraint lines of user
    messages (priority 1), then every error line, frame, exit code and test failure of the tool
    outputs and of the user's messages (an error pasted in), the first line of each failing
    output's call (whole when short: an edit that did not apply, with its arguments), then the assistant's sentences the anchor's dead-end cue recognises ("X did
    not work"; last, as the cue is broad) (priority 5), each once."""
    lang = esc.lang if esc.lang in _FOLDED else "en"
    by_seg = esc.protected_by_segment()
    constraints: list[LadderItem] = []
    dead: list[LadderItem] = []
    lines: list[LadderItem] = []
    failed: list[LadderItem] = []
    seen: set[str] = set()
    calls = {s.call_id: s for s in esc.state.segments if s.kind == SegmentKind.tool_call and s.call_id}
    for s in reversed([s for s in esc.state.segments if s.id in ids]):  # newest first
        if s.meta:
            continue
        spans = by_seg.get(s.id, [])
        if s.kind == SegmentKind.tool_result:
            ev = evidence_spans(s, spans)
            for sp in sorted(ev, key=lambda x: (x.start, x.rule_id)):
                for ln in sp.text.split("\n"):
                    key = " ".join(ln.split())
                    if len(key) >= 4 and key not in seen:
                        seen.add(key)
                        lines.append(LadderItem(5, "folded evidence", ln.rstrip(), s.step_id, section=_FOLDED[lang]))
            if ev or s.is_error or s.exit_code not in (None, 0):
                # what was tried: the call whole when it is short (an edit that did not apply,
                # with its arguments), else its command's first line
                call = calls.get(s.call_id) if s.call_id else None
                tried = " ".join(call.text.split()) if call is not None and len(call.text) <= _CALL_CHARS else \
                    _first_line(s.command or (call.text if call is not None else ""))
                if tried and tried not in seen:
                    seen.add(tried)
                    failed.append(LadderItem(5, "failed call", f"- `{tried}` ({s.step_id})", s.step_id,
                                             section=_FAILED[lang]))
        elif s.role == Role.user and s.kind == SegmentKind.message:
            for sp in sorted(spans, key=lambda x: (x.start, x.rule_id)):
                if sp.family == "constraint":
                    key = " ".join(sp.text.split())
                    if len(key) >= 4 and key not in seen:
                        seen.add(key)
                        constraints.append(LadderItem(1, "folded constraint", f"- {key}", s.step_id,
                                                      section=_FOLDED[lang]))
            for sent in _binding_lines(s.text):  # "i'd rather you ...", "keep X", "(scaffolding only)"
                key = " ".join(sent.split())
                if key not in seen:
                    seen.add(key)
                    constraints.append(LadderItem(1, "folded constraint", f"- {key}", s.step_id,
                                                  section=_FOLDED[lang]))
        elif s.role == Role.assistant and s.kind == SegmentKind.message:
            for sent in _changed_approach(s.text):  # "X did not work", "revert my change", "Y instead"
                key = " ".join(sent.split())
                if key not in seen:
                    seen.add(key)
                    dead.append(LadderItem(5, "folded dead end", f"- {key}", s.step_id, section=_DEAD[lang]))
        if s.role == Role.user and s.kind == SegmentKind.message:
            for sp in sorted(spans, key=lambda x: (x.start, x.rule_id)):
                if sp.family in EVIDENCE_FAMILIES:  # an error the user pasted, with its trace
                    for ln in sp.text.split("\n"):
                        key = " ".join(ln.split())
                        if len(key) >= 4 and key not in seen:
                            seen.add(key)
                            lines.append(LadderItem(5, "folded evidence", ln.rstrip(), s.step_id,
                                                    section=_FOLDED[lang]))
    return constraints + failed + dead + lines


_LINE_CHARS = 400  # a user's line up to this long is put back whole (as written, list marker and all)


def _binding_lines(text: str) -> list[str]:
    """The lines of a user's message with a sentence that may bind (the constraint cue, or a
    binding word anywhere: "keep", "only", "without", "must", ...): each line whole as written
    when it is short, else its binding sentences."""
    from ..anchor._text import sentences
    from ..anchor.cues import BINDING, CUES

    c = CUES["constraint"]
    out = []
    for ln in text.split("\n"):
        if not ln.strip():
            continue
        low = ln.lower()
        if not (BINDING.search(ln) or c.possible(low) and c.search(ln, low)):
            continue
        if len(ln.strip()) <= _LINE_CHARS:
            out.append(ln.strip())
            continue
        for sent in sentences(ln):
            if len(sent) >= 8 and (BINDING.search(sent) or c.search(sent)):
                out.append(sent.strip())
    return out


def _changed_approach(text: str) -> list[str]:
    """The sentences of the agent's message that say an approach did not work, or that it changes
    course (the anchor's dead-end cue, and the broader ``cue.changed-approach``)."""
    from ..anchor._text import sentences
    from ..anchor.cues import CHANGED_APPROACH, CUES

    c = CUES["dead_end"]
    out = []
    for ln in text.split("\n"):
        if not ln.strip():
            continue
        low = ln.lower()
        broad = CHANGED_APPROACH.search(ln) is not None
        if not broad and not c.possible(low):
            continue
        for sent in sentences(ln):
            if len(sent) >= 8 and (CHANGED_APPROACH.search(sent) or c.search(sent)):
                out.append(sent.strip())
    return out


def folded_outputs(esc, ids: set[str]) -> list[LadderItem]:
    """The tool outputs of ``ids`` as Level 1 left them, whole, newest first, each with its
    command, step and the reference to its original (priority 6)."""
    lang = esc.lang if esc.lang in _OUTPUTS else "en"
    out: list[LadderItem] = []
    for s in reversed([s for s in esc.state.segments if s.id in ids]):
        if s.meta or s.kind != SegmentKind.tool_result:
            continue
        text = esc.state.texts[s.id]
        if text.strip():
            ref = _ref(s.text)
            head = f"`{_first_line(s.command or '')[:200]}` " if s.command else ""
            out.append(LadderItem(6, "folded output", f"{head}({s.step_id} · {ref})\n{text.rstrip()}",
                                  s.step_id, ref, section=_OUTPUTS[lang], originals={ref: s.text}))
    return out


def fill(esc, fit: Fit, budget: int) -> Fit:
    """Put back, by priority, what the folded turns held and the output does not show yet, while
    the output fits (see the module docstring). The candidate's summary gains the chosen lines,
    in sections after the anchor; nothing is put back twice."""
    text, anchor, res, diags = fit.cand
    dropped = fit.dropped
    have = normalize(text) + "\n" + "\n".join(
        normalize(esc.state.texts[s.id]) for s in esc.state.segments if s.id not in dropped)
    room = budget - fit.total
    if room <= 0:
        return fit
    count = esc.counter.count
    # a layout that keeps copies of the summary (OpenHands' ``message`` and ``args.content``)
    # writes every line put back more than once: the room is shared by the copies
    probe = "\n" + " ".join(["budget"] * 40)
    copies = max(1, round((esc.written(dropped, text + probe) - fit.total) / max(1, count(probe))))
    room //= copies
    chosen: list[LadderItem] = []
    sections: set[str] = set()
    told: set[str] = set()
    behind: list[LadderItem] = []
    for it in fill_items(esc, dropped):
        bare = _bare(it.text)
        if not bare or bare in told or (it.label != "folded output" and bare in have):
            continue
        cost = count(it.text) + 1 + (0 if it.section in sections else count(it.section) + 2)
        if cost > room:
            if it.priority <= 5:
                behind.append(it)
            continue
        room -= cost
        told.add(bare)
        chosen.append(it)
        sections.add(it.section)
    tail = _tail_item(esc, dropped, chosen, room, sections)
    if tail is not None:
        chosen.append(tail)
    esc.left_behind = behind
    if not chosen:
        return fit

    def measure(items: list) -> int:
        return esc.written(dropped, _with(text, items))

    best, sizes = longest_prefix(chosen, measure, budget)
    esc.left_behind = behind + [it for it in chosen[best:] if it.priority <= 5]
    if not best:
        return fit
    picked = chosen[:best]
    for it in picked:
        for ref, original in it.originals.items():
            esc.save(ref, original)
    esc.filled = picked
    return Fit(dropped, (_with(text, picked), anchor, res, diags), fit.level, sizes[best], fit.passes, fit.reserve)


def _tail_item(esc, dropped: set[str], chosen: list[LadderItem], room: int, sections: set[str]) -> LadderItem | None:
    """The room left after the greedy pass, filled with the last lines of the newest folded
    output not put back whole (where a run's outcome is printed), with a reference to the whole."""
    picked = {it.ref for it in chosen if it.label == "folded output"}
    count = esc.counter.count
    lang = esc.lang if esc.lang in _OUTPUTS else "en"
    for s in reversed([s for s in esc.state.segments if s.id in dropped]):
        if s.meta or s.kind != SegmentKind.tool_result:
            continue
        ref = _ref(s.text)
        shown = esc.state.texts[s.id]
        original = ref in picked
        if original:
            # put back whole as Level 1 left it (a view or a repeat by reference): the room goes to
            # the end of its original text
            if normalize(shown).rstrip() == normalize(s.text).rstrip():
                continue
            shown = normalize(s.text)
        lines = shown.rstrip().split("\n")
        cmd = f"`{_first_line(s.command or '')[:200]}` " if s.command else ""
        head = f"{cmd}({s.step_id} · {ref}, " + ("its last {k} of {n} lines)" if lang == "en" else "最后 {k} / {n} 行)")
        left = room - 4 - (0 if _OUTPUTS[lang] in sections else count(_OUTPUTS[lang]) + 2) - count(head) - 4
        k = 0
        used = 0
        while k < len(lines) and used + count(lines[-1 - k]) + 1 <= left:
            used += count(lines[-1 - k]) + 1
            k += 1
        if k == 0 or (k == len(lines) and not original):
            return None  # nothing fits, or it would have fitted whole
        text = head.format(k=k, n=len(lines)) + "\n" + "\n".join(lines[-k:])
        return LadderItem(6, "folded output (its end)", text, s.step_id, ref, section=_OUTPUTS[lang],
                          originals={ref: s.text})
    return None


def _with(text: str, items: list) -> str:
    return text.rstrip("\n") + "\n" + render_sections(items) if items else text


def _bare(line: str) -> str:
    return normalize(line.removeprefix("- ")).strip()
