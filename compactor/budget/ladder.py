"""The priority ladder: what stays verbatim as the budget tightens.

Used when folding older turns into the anchor (Level 2 / Level 3) cannot reach the budget
because the protected evidence alone is larger. A budget is a contract, so protection becomes an
order of priority instead of a reason to refuse:

1. the newest user request and the user constraints (verbatim). A long request that does not fit
   whole is kept in its place as the task's opening plus every line of the task that holds a
   constraint, an error, a trace line or a ``file:line``, and of the harness's template appended
   to it only the lines that bind (:func:`condense_request`), each gap marked ``[…]`` and the
   whole request one reference away (``[the whole request: expand c-…]``); the whole request is
   the first thing put back when the budget allows it (the harness's recommendations alone come
   with the rest, priority 6);
2. live evidence: the latest failure's error line, trace header, innermost frames with
   ``file:line``, exit code, final summary line and its other error lines, lines that differ
   only in numbers told once with their count (``… (+44 more like it, differing in numbers)``);
3. a short system prompt (the agent's standing instructions, up to about 200 tokens), then failed
   approaches: the command, its first error line, how often it failed;
4. decisions with their reasons;
5. older evidence: an error that was later resolved becomes one line
   (``… — resolved at s14 · ref c-…``); an error repeated N times is kept once with its count
   and steps; then the rest of the live failure's evidence line by line (its outer frames, and
   the lines step 2 counted instead of showing);
6. the rest: the most recent turns verbatim (newest first, whole turns), a longer system prompt, then
   the remaining anchor items (intent, changes, facts, files, open questions, next steps).

Everything else is folded: the originals of every dropped segment are saved under one reference
(the summary's first line), and each evidence line cites the reference of its own tool output,
so ``compactor expand`` gives every cut text back exactly. The report lists what was cut, by
priority (``Report.cut``).

The floor — the smallest output the ladder can write — is the newest request (condensed, when it
is long: the task and the lines that bind), the user constraints and the live error's header line (plus the one-line reference
marker). Below it the
budget cannot be met and :class:`~compactor.errors.BudgetError` names the floor.
"""

from __future__ import annotations

from ..collapse.older import evidence_spans
from ..collapse.store import content_id
from ..models import Anchor, Segment, SegmentKind, Span
from ..audit.common import newest_request
from ..lazyre import lazy_regex
from ..record import Field, Record

__all__ = ["LadderItem", "Plan", "build_items", "condense_request", "render", "render_sections", "PRIORITIES"]

PRIORITIES = {
    1: "newest request and user constraints",
    2: "live evidence",
    3: "a short system prompt and failed approaches",
    4: "decisions",
    5: "older evidence",
    6: "the rest",
}

_EVIDENCE = ("trace", "error", "exit-code", "test-failure")
# a system prompt up to this size (about 200 tokens) is put back before the failed approaches
SHORT_SYSTEM_PROMPT_CHARS = 800
_FRAME = lazy_regex(r"""(?:File "[^"\n]+", line \d+|[\w./\\-]+\.\w+:\d+|\(\S+\.\w+:\d+\)|\bat \S+:\d+)""")
_SHAPE = lazy_regex(r"0x[0-9a-fA-F]+|[0-9a-f]{8,}|\d+")

_REQUEST_FAMILIES = ("constraint", "trace", "error", "exit-code", "test-failure", "fileref")
_HEAD_CHARS = 400  # the opening of a condensed request: whole lines up to about this many characters
_MIN_SAVING = 0.25
_LONG_LINE = 160
_FLOOR_LINE = 200  # the live error's header in the floor: its first characters when longer
_SHORT_HEAD = "live error header (start)"  # a kept line longer than this keeps only its protected pieces  # condense a request only when that saves at least this share of it

_H = {
    "en": {
        "gap": "[…]",
        "whole": "[the whole request: expand {ref}]",
        "marker": "[compactor L3: {n} segments ({rng}) folded · expand {ref}]",
        1: "## User constraints",
        2: "## Live error ({step}{cmd}) · {ref}",
        3: "## Failed approaches (do not retry)",
        4: "## Decisions",
        5: "## Older evidence",
        6: "## Working state",
        "resolved": " — resolved at {step} · {ref}",
        "repeated": " (×{n}: {steps}) · {ref}",
        "once": " ({step}) · {ref}",
        "times": "×{n}",
        "similar": " (+{n} more like it, differing in numbers)",
    },
    "zh": {
        "gap": "[…]",
        "whole": "[完整请求：expand {ref}]",
        "marker": "[compactor L3：{n} 段（{rng}）已折叠 · expand {ref}]",
        1: "## 用户约束",
        2: "## 当前错误（{step}{cmd}）· {ref}",
        3: "## 已排除方案（不要再试）",
        4: "## 已做决策",
        5: "## 较早证据",
        6: "## 工作状态",
        "resolved": " — 已在 {step} 解决 · {ref}",
        "repeated": "（×{n}：{steps}）· {ref}",
        "once": "（{step}）· {ref}",
        "times": "×{n}",
        "similar": "（另有 {n} 行相同，仅数字不同）",
    },
}


class LadderItem(Record, plain=True, frozen=False):
    """One line (or block) of the ladder summary, or one kept unit of segments."""

    priority: int
    label: str
    text: str = ""
    step_id: str = ""
    ref: str | None = None
    section: str = ""
    unit_ids: tuple[str, ...] = ()  # a kept unit (priority 6 turns, the system prompt)
    whole_request: bool = False  # the newest request whole, in place of its condensed form
    request_more: bool = False  # the condensed request with the harness's recommendations too
    floor: bool = False  # part of the floor: never cut
    originals: dict[str, str] = Field(default_factory=dict)  # ref -> original text to store


class Plan(Record, plain=True, frozen=False):
    items: list[LadderItem]
    request_ids: tuple[str, ...]  # segment ids of the newest request (always kept)
    live_ref: str | None
    # (segment id, condensed text, reference to the whole) when the newest request is long: the
    # condensed text is written unless the ``whole_request`` item is chosen
    condensed: tuple[str, str, str] | None = None
    # the condensed request with the recommendations of the harness's instructions put back (written
    # when the ``request_more`` item is chosen and the whole one is not); None when it is the same
    condensed_more: str | None = None


def _ref(text: str) -> str:
    return content_id(text.encode("utf-8", errors="surrogatepass"))


def _first_line(text: str) -> str:
    for ln in text.split("\n"):
        if ln.strip():
            return ln.rstrip()
    return ""


def _failing(seg: Segment, spans: list[Span]) -> bool:
    if seg.kind != SegmentKind.tool_result or seg.meta:
        return False
    if evidence_spans(seg, spans):
        return True
    return bool(seg.is_error) or (seg.exit_code not in (None, 0))


def _cmd_key(seg: Segment) -> str:
    return " ".join((seg.command or "").split())[:300]


def _error_head(seg: Segment, spans: list[Span]) -> str:
    """The header line of a failing output: the first line of its first error / trace span."""
    ev = sorted((sp for sp in spans if sp.family in _EVIDENCE and sp.family != "exit-code"),
                key=lambda sp: (sp.start, sp.rule_id))
    for sp in ev:
        line = _first_line(sp.text)
        if line:
            return line.strip()
    for sp in spans:
        if sp.family == "exit-code":
            return _first_line(sp.text).strip()
    if seg.exit_code not in (None, 0):
        return f"exit code {seg.exit_code}"
    return _first_line(seg.text).strip()[:300]


def _older_line(seg: Segment, spans: list[Span]) -> str:
    """One line for an older failure: its error header, the exception / message line and the
    innermost frame of its trace, each verbatim, joined by `` | ``."""
    return " | ".join(_older_parts(seg, spans))


def _older_parts(seg: Segment, spans: list[Span]) -> list[str]:
    parts = [_error_head(seg, spans)]
    for sp in sorted(spans, key=lambda sp: (sp.start, sp.rule_id)):
        if sp.family != "trace":
            continue
        lines = [ln.strip() for ln in sp.text.split("\n") if ln.strip()]
        frames = [ln for ln in lines if _FRAME.search(ln)]
        py = "Traceback" in sp.text or 'File "' in sp.text
        msg = lines[-1] if py and lines else (lines[0] if lines else "")
        inner = frames[-1] if py and frames else (frames[0] if frames else "")
        for p in (msg, inner):
            if p and p not in parts:
                parts.append(p)
        break
    return parts


def _shape(line: str) -> str:
    return _SHAPE.sub("#", " ".join(line.split()))


def _live_lines(seg: Segment, spans: list[Span], lang: str = "en") -> tuple[list[tuple[str, str]], set[str]]:
    """(label, line) of the live error, most important first: error header, innermost frames,
    exit code, final summary line, other error lines (lines differing only in numbers once, with
    their count); and those lines, whitespace-normalised."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()

    def add(label: str, line: str) -> None:
        line = line.rstrip()
        if line.strip() and line not in seen:
            seen.add(line)
            out.append((label, line))

    head = _error_head(seg, spans)
    add("live error header", head)
    ordered = sorted(spans, key=lambda sp: (sp.start, sp.rule_id))
    for sp in ordered:
        if sp.family == "trace":
            lines = [ln for ln in sp.text.split("\n") if ln.strip()]
            frames = [ln for ln in lines if _FRAME.search(ln)]
            # innermost frames: Python / most runtimes print them last; Java / JS / Go first
            inner = frames[-2:] if "Traceback" in sp.text or 'File "' in sp.text else frames[:2]
            for ln in inner:
                add("innermost frame", ln)
            if lines and "Traceback" in sp.text:
                add("trace message", lines[-1])
            elif lines:
                add("trace message", lines[0])
                # a title line without a message (jest prints "● suite › test", then
                # "Name: message", then the frames): the message is the next line
                if len(lines) > 1 and ":" not in lines[0] and not _FRAME.search(lines[1]):
                    add("trace message", lines[1])
    for sp in ordered:
        if sp.family == "exit-code":
            add("exit code", _first_line(sp.text))
    if seg.exit_code not in (None, 0) and not any(sp.family == "exit-code" for sp in spans):
        add("exit code", f"exit code {seg.exit_code}")
    for sp in ordered:
        if sp.family == "test-failure":
            for ln in sp.text.split("\n")[-1:]:
                add("final summary line", ln)
    for sp in ordered:
        if sp.family in ("error", "test-failure"):
            for ln in sp.text.split("\n"):
                add("error line", ln)
    # messages and error lines that differ only in numbers (a compiler's warning for every line of
    # one file) once, with their count, so that distinct errors printed later still fit
    grouped: list[tuple[str, str]] = []
    first_of: dict[str, list[int]] = {}
    for label, line in out:
        if label in ("trace message", "error line"):
            key = _shape(line)
            if key in first_of:
                first_of[key][1] += 1
                continue
            first_of[key] = [len(grouped), 0]
        grouped.append((label, line))
    told = {" ".join(line.split()) for _label, line in grouped}
    for i, n in first_of.values():
        if n:
            grouped[i] = (grouped[i][0], grouped[i][1] + _H[lang]["similar"].format(n=n))
    return grouped, told


def condense_request(text: str, spans: list[Span], ref: str, lang: str = "en", *, harness_at: int | None = None,
                     keep_advice: bool = False, min_saving: float = _MIN_SAVING) -> str | None:
    """The newest request shortened for a tight budget, in reading order:

    - its opening: the task's first lines up to about ``_HEAD_CHARS`` characters (the line that
      runs past that keeps its start, cut at a space, and ends in ``[…]``);
    - every other line that holds a constraint (a constraint span, or a sentence the anchor's
      constraint cue recognises: "pass X to keep the old behavior"), an error, a trace line or a
      ``file:line``: whole when it is short, else only those pieces, verbatim, joined by ``[…]``;
    - except, in the harness's instructions appended to the task (from ``harness_at``, see
      :func:`compactor.anchor.build.harness_start`; the same template in every run, not the
      user's words), a worked example (``<example_response>``) and a recommendation that does
      not bind (``cue.advisory``: "you should ...", "always ..."; kept with ``keep_advice``).
      The rest of the template (how to format a reply, the workflow) has no such line and is
      cut; the harness's lines never count towards the opening;
    - ``[…]`` for every gap, and the reference to the whole request on the last line.

    None when that would not save at least ``min_saving`` of the text."""
    from ..anchor import cues as C
    from ..anchor._text import _TAG_BLOCK, sentences
    from ..anchor.cues import CUES

    h = _H.get(lang, _H["en"])
    gap_mark = h["gap"]
    lines = text.split("\n")
    starts: list[int] = []
    pos = 0
    for ln in lines:
        starts.append(pos)
        pos += len(ln) + 1
    found_pieces: set[str] = set()
    for sp in spans:
        if sp.family not in _REQUEST_FAMILIES:
            continue
        for ln in sp.text.split("\n"):
            ln = ln.strip()
            if sp.family == "fileref" and len(ln) > _LONG_LINE:  # a long line: its file:line only
                found_pieces.update(m.group(0) for m in _FRAME.finditer(ln))
            elif len(ln) >= 4:
                found_pieces.add(ln)
    cue = CUES["constraint"]
    for ln in lines:
        if not ln.strip():
            continue
        low = ln.lower()
        if not cue.possible(low):
            continue
        for sent in sentences(ln):
            if len(sent) >= 4 and cue.search(sent):
                found_pieces.add(sent)
    pieces = sorted(found_pieces)
    # in the harness's part, a worked example (``<example_response>``) is not an instruction
    examples = [(m.start(), m.end()) for m in _TAG_BLOCK.finditer(text, harness_at)] if harness_at is not None else []
    out: list[str] = []
    used = 0
    in_head = True
    dropped_any = False

    def gap() -> None:
        nonlocal dropped_any
        if out and not out[-1].endswith(gap_mark):
            out.append(gap_mark)
        dropped_any = True

    for ln, at in zip(lines, starts):
        s = ln.strip()
        harness = harness_at is not None and at >= harness_at
        if harness:
            in_head = False
        head_cut = 0  # the start of the line that runs past the opening: kept, cut at a space
        if in_head:
            if used + len(ln) <= _HEAD_CHARS:
                out.append(ln)
                used += len(ln) + 1
                continue
            in_head = False
            room = _HEAD_CHARS - used
            if room >= _HEAD_CHARS // 5 and s:
                lead_ws = len(ln) - len(ln.lstrip())
                cut = s.rfind(" ", 0, room)
                head_cut = cut if cut > room // 2 else room
        if harness and (any(a <= at < b for a, b in examples) or (not keep_advice and C.ADVISORY.search(s))):
            gap()  # an example, or a recommendation ("you should ..."): not a line that binds
            continue
        found = [p for p in pieces if p in s] if s else []
        if not found and not head_cut:
            gap()
            continue
        if len(ln) <= _LONG_LINE and found:
            out.append(ln)
            continue
        # a long line (or the line that ends the opening): only its pieces, in the order they
        # appear (nested pieces once)
        spans_at: list[tuple[int, int]] = [(0, head_cut)] if head_cut else []
        for p in found:
            i = s.find(p)
            spans_at.append((i, i + len(p)))
        spans_at.sort()
        merged: list[list[int]] = []
        for a, b in spans_at:
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        if merged[0][0] <= 4 and not s[: merged[0][0]].strip(" -*•0123456789.)"):
            merged[0][0] = 0  # a list bullet or number before the first piece stays with it
        parts = [s[a:b].strip() for a, b in merged]
        lead = "" if merged[0][0] == 0 else gap_mark + " "
        if head_cut and merged[0][0] == 0:
            lead = ln[:lead_ws]
        tail = "" if merged[-1][1] >= len(s) else " " + gap_mark
        out.append(lead + f" {gap_mark} ".join(parts) + tail)
        if tail or len(merged) > 1 or lead.startswith(gap_mark):
            dropped_any = True
    if not dropped_any:
        return None
    out.append(h["whole"].format(ref=ref))
    short = "\n".join(out)
    if len(short) > len(text) * (1 - min_saving):
        return None
    return short


def build_items(segments: list[Segment], spans_by_seg: dict[str, list[Span]], texts: dict[str, str],
                anchor: Anchor, units, lang: str = "en", request_spans: list[Span] | None = None) -> Plan:
    """Every ladder item, in priority order (within a priority: most important first).
    ``spans_by_seg``: the protected spans; ``request_spans``: every span of the newest request
    (a condensed request also keeps its ``file:line`` lines)."""
    h = _H.get(lang, _H["en"])
    items: list[LadderItem] = []
    req = newest_request(segments, anchor)
    request_ids: tuple[str, ...] = ()
    if req is not None:
        for u in units:
            if req.id in u.ids:
                request_ids = tuple(u.ids)
                break
        else:
            request_ids = (req.id,)
    # 1 ------------------------------------------------------------- the request, constraints
    condensed = None
    more = None
    if req is not None:
        from ..anchor.build import harness_start

        rref = _ref(req.text)
        rspans = request_spans if request_spans is not None else spans_by_seg.get(req.id, [])
        rtext = texts.get(req.id, req.text)
        at = harness_start(rtext)
        # the floor holds the user's task (its opening, constraints, errors, frames) and the lines
        # of the harness's instructions that bind; the whole request is the first thing put back,
        # the harness's recommendations alone come with the rest (priority 6)
        short = condense_request(rtext, rspans, rref, lang, harness_at=at)
        if short is not None:
            condensed = (req.id, short, rref)
            if at is not None:
                more = condense_request(rtext, rspans, rref, lang, harness_at=at, keep_advice=True, min_saving=0.0)
                if more is None or more == short:
                    more = None
            items.append(LadderItem(1, "newest request (whole; kept condensed)", "", req.step_id, rref,
                                    whole_request=True))
    for c in anchor.user_constraints:
        if c.status == "active" and c.text.strip():
            items.append(LadderItem(1, "user constraint", f"- {' '.join(c.text.split())}", c.source_step,
                                    section=h[1], floor=True))
    # 2 ------------------------------------------------------------- live evidence
    failing = [s for s in segments if _failing(s, spans_by_seg.get(s.id, []))]
    live = failing[-1] if failing else None
    live_ref = None
    whole_head = None
    if live is not None:
        sp = evidence_spans(live, spans_by_seg.get(live.id, []))
        live_ref = _ref(live.text)
        cmd = _first_line(live.command or "")
        cmd = f", `{cmd[:120]}`" if cmd else ""
        section = h[2].format(step=live.step_id, cmd=cmd, ref=live_ref)
        live_lines, live_told = _live_lines(live, sp, lang if lang in _H else "en")
        for i, (label, line) in enumerate(live_lines):
            if i == 0 and len(line) > _FLOOR_LINE:
                # the floor holds the header's start; the whole line is the last live item
                cut = line.rfind(" ", 0, _FLOOR_LINE)
                short = line[: cut if cut > _FLOOR_LINE // 2 else _FLOOR_LINE].rstrip() + " " + h["gap"]
                items.append(LadderItem(2, _SHORT_HEAD, short, live.step_id, live_ref, section=section, floor=True,
                                        originals={live_ref: live.text}))
                whole_head = LadderItem(6, label, line, live.step_id, live_ref, section=section,
                                        originals={live_ref: live.text})
                continue
            items.append(LadderItem(2, label, line, live.step_id, live_ref, section=section, floor=(i == 0),
                                    originals={live_ref: live.text}))

    # 3 ------------------------------------------------------------- the system prompt, failed approaches
    # the agent's standing instructions come back before the history's details: without them the
    # rest is read by an agent that no longer knows its tools and rules (the live evidence before
    # them stays: it is what the next step acts on)
    # (a short one: a long prompt waits with the rest, priority 6, so that it never crowds out the
    # history's evidence)
    sys_units = [u for u in units if u.pinned and u.why_pinned == "system prompt" and not set(u.ids) & set(request_ids)]
    short_sys = [u for u in sys_units
                 if sum(len(texts.get(sid, "")) for sid in u.ids) <= SHORT_SYSTEM_PROMPT_CHARS]
    for u in short_sys:
        items.append(LadderItem(3, "system prompt", "", "", unit_ids=tuple(u.ids)))
    # one line per failed command: the command, its first error line, the innermost frame of its
    # trace, how often and where it failed, and the reference to its last failing output (an
    # older failure told this way is not repeated under "older evidence")
    failing_at: dict[str, list[Segment]] = {}
    for s in failing:
        failing_at.setdefault(s.step_id, []).append(s)
    covered: set[str] = set()
    for a in reversed(anchor.failed_attempts):
        step = a.last_step or a.source_step
        if live is not None and step == live.step_id and a.count == 1:
            continue  # told by the live error's section (its command, its header, its reference)
        cands = failing_at.get(step, [])
        out_seg = next((s for s in cands if a.command and _first_line(s.command or "").startswith(a.command[:60])),
                       cands[0] if len(cands) == 1 else None)
        line = f"- `{a.command}`"
        if a.error:
            line += f" → {a.error}"
        ref = None
        originals: dict[str, str] = {}
        if out_seg is not None:
            # what "older evidence" would say of this output: its error header, message, frame
            for part in _older_parts(out_seg, evidence_spans(out_seg, spans_by_seg.get(out_seg.id, []))):
                bare = part.strip().lstrip("-*• ").strip()
                if len(bare) <= 8 or bare in line:  # a bare 'ERROR:' head, or said already
                    continue
                line += f" | {part}" if " → " in line else f" → {part}"
            ref = _ref(out_seg.text)
            originals = {ref: out_seg.text}
            if a.count == 1:
                covered.add(out_seg.id)
        tail = []
        if a.count > 1:
            tail.append(h["times"].format(n=a.count))
        if step:
            tail.append(step)
        if tail:
            line += f" ({', '.join(tail)})"
        if ref:
            line += f" · {ref}"
        items.append(LadderItem(3, "failed attempt", line, step, ref, section=h[3], originals=originals))
    for d in reversed(anchor.dead_ends):
        if d.status != "excluded":
            continue
        line = f"- {' '.join(d.approach.split())}" + (f": {' '.join(d.why.split())}" if d.why and d.why not in d.approach else "")
        items.append(LadderItem(3, "excluded approach", line, d.source_step, section=h[3]))
    # 4 ------------------------------------------------------------- decisions
    for d in reversed(anchor.decisions_made):
        if d.status != "active":
            continue
        line = f"- {' '.join(d.decision.split())}" + (f": {' '.join(d.reason.split())}" if d.reason else "")
        items.append(LadderItem(4, "decision", line, d.source_step, section=h[4]))
    # 5 ------------------------------------------------------------- older evidence
    older = [s for s in failing if s is not live and s.id not in covered]
    groups: dict[str, list[Segment]] = {}
    heads: dict[str, str] = {}
    for s in older:
        head = _older_line(s, evidence_spans(s, spans_by_seg.get(s.id, [])))
        key = _SHAPE.sub("#", head)
        groups.setdefault(key, []).append(s)
        heads.setdefault(key, head)
    later_ok: dict[str, str] = {}  # command -> step of its last run without an error
    for s in segments:
        if s.kind == SegmentKind.tool_result and not s.meta and s.command:
            if not _failing(s, spans_by_seg.get(s.id, [])):
                later_ok[_cmd_key(s)] = s.step_id
    order = {s.id: i for i, s in enumerate(segments)}
    ok_index: dict[str, int] = {}
    for s in segments:
        if s.kind == SegmentKind.tool_result and s.command and not _failing(s, spans_by_seg.get(s.id, [])):
            ok_index[_cmd_key(s)] = order[s.id]
    entries: list[tuple[int, LadderItem]] = []
    for key, segs in groups.items():
        first, last = segs[0], segs[-1]
        ref = _ref(first.text)
        head = heads[key]
        if len(segs) > 1:
            steps = ", ".join(dict.fromkeys(s.step_id for s in segs))
            line = f"- {head}" + h["repeated"].format(n=len(segs), steps=steps, ref=ref)
            label = "repeated error"
        else:
            ck = _cmd_key(last)
            ok_at = ok_index.get(ck) if ck else None
            if ok_at is not None and ok_at > order[last.id]:
                line = f"- {head}" + h["resolved"].format(step=later_ok[ck], ref=ref)
                label = "resolved error"
            else:
                line = f"- {head}" + h["once"].format(step=last.step_id, ref=ref)
                label = "older error"
        entries.append((order[last.id], LadderItem(5, label, line, last.step_id, ref, section=h[5],
                                                   originals={ref: first.text})))
    for _, it in sorted(entries, key=lambda t: -t[0]):  # newest first
        items.append(it)
    # the rest of the live failure's evidence, line by line in the order printed (a log is one
    # output: its other error lines and the outer frames of its trace), each while it fits
    if live is not None:
        told = set(live_told)
        section = h[2].format(step=live.step_id, cmd=cmd, ref=live_ref)
        # first one line per shape not told yet, then the lines that differ only in numbers from
        # one already told (a compiler's warning for every line of a file comes last)
        shapes = {_shape(t) for t in told}
        firsts: list[str] = []
        repeats: list[str] = []
        for sp in sorted(evidence_spans(live, spans_by_seg.get(live.id, [])), key=lambda x: (x.start, x.rule_id)):
            for ln in sp.text.split("\n"):
                key = " ".join(ln.split())
                if len(key) < 4 or key in told:
                    continue
                told.add(key)
                shape = _shape(key)
                (repeats if shape in shapes else firsts).append(ln.rstrip())
                shapes.add(shape)
        for ln in firsts + repeats:
            items.append(LadderItem(5, "more live evidence", ln, live.step_id, live_ref,
                                    section=section, originals={live_ref: live.text}))
    # 6 ------------------------------------------------------------- the rest
    if live is not None and whole_head is not None:
        items.append(whole_head)  # the live header's whole line, when the floor holds only its start
    if condensed is not None and more is not None:
        # the harness's recommendations ("you should ...") in the request: the first of the rest
        items.append(LadderItem(6, "newest request: the harness's recommendations (kept condensed)", "",
                                req.step_id, condensed[2], request_more=True))
    free = []
    long_sys = []
    for u in units:
        if set(u.ids) & set(request_ids):
            continue
        segs_u = [s for s in segments if s.id in set(u.ids)]
        if u in short_sys:
            continue  # put back at priority 3
        if u.pinned and u.why_pinned == "system prompt":
            long_sys.append(u)
        elif segs_u:
            free.append(u)
    for u in reversed(free):  # recent turns, newest first
        items.append(LadderItem(6, "turn", "", u.step_ids[0] if u.step_ids else "", unit_ids=tuple(u.ids)))
    for u in long_sys:
        items.append(LadderItem(6, "system prompt", "", "", unit_ids=tuple(u.ids)))
    covered = {c.id for c in anchor.user_constraints} | {a.id for a in anchor.failed_attempts} \
        | {d.id for d in anchor.dead_ends} | {d.id for d in anchor.decisions_made} | {e.id for e in anchor.key_evidence}
    from ..anchor.render import render_lines

    for _section, key, text in render_lines(anchor, lang):
        if not key or key in covered or not text.strip():
            continue
        items.append(LadderItem(6, "anchor item", text.rstrip(), section=h[6]))
    return Plan(items, request_ids, live_ref, condensed, more)


def render(items: list[LadderItem], marker: str) -> str:
    """The summary text: the marker line, then each section's kept lines in ladder order."""
    return marker + "\n" + render_sections(items)


def render_sections(items: list[LadderItem]) -> str:
    """Each section's lines in ladder order (a blank line and the heading before each section)."""
    out: list[str] = []
    sections: dict[str, list[str]] = {}
    order: list[str] = []
    for it in items:
        if it.unit_ids or not it.text:
            continue
        if it.section not in sections:
            sections[it.section] = []
            order.append(it.section)
        sections[it.section].append(it.text)
    for sec in order:
        out.append("")
        if sec:
            out.append(sec)
        out.extend(sections[sec])
    return "\n".join(out) + "\n" if out else ""


def marker_line(lang: str, n: int, rng: str, ref: str) -> str:
    return _H.get(lang, _H["en"])["marker"].format(n=n, rng=rng, ref=ref)
