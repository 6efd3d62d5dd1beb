"""The priority ladder: what stays verbatim as the budget tightens.

Used when folding older turns into the anchor (Level 2 / Level 3) cannot reach the budget
because the protected evidence alone is larger. A budget is a contract, so protection becomes an
order of priority instead of a reason to refuse:

1. the newest user request (its message stays as it is) and the user constraints (verbatim);
2. live evidence: the latest failure's error line, trace header, innermost frames with
   ``file:line``, exit code and final summary line;
3. failed approaches: the command, its first error line, how often it failed;
4. decisions with their reasons;
5. older evidence: an error that was later resolved becomes one line
   (``… — resolved at s14 · ref c-…``); an error repeated N times is kept once with its count
   and steps;
6. the rest: the most recent turns verbatim (newest first, whole turns), the system prompt, then
   the remaining anchor items (intent, changes, facts, files, open questions, next steps).

Everything else is folded: the originals of every dropped segment are saved under one reference
(the summary's first line), and each evidence line cites the reference of its own tool output,
so ``compactor expand`` gives every cut text back exactly. The report lists what was cut, by
priority (``Report.cut``).

The floor — the smallest output the ladder can write — is the newest request, the user
constraints and the live error's header line (plus the one-line reference marker). Below it the
budget cannot be met and :class:`~compactor.errors.BudgetError` names the floor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import regex

from ..collapse.older import evidence_spans
from ..collapse.store import content_id
from ..models import Anchor, Role, Segment, SegmentKind, Span
from ..audit.common import newest_request

__all__ = ["LadderItem", "Plan", "build_items", "PRIORITIES"]

PRIORITIES = {
    1: "newest request and user constraints",
    2: "live evidence",
    3: "failed approaches",
    4: "decisions",
    5: "older evidence",
    6: "the rest",
}

_EVIDENCE = ("trace", "error", "exit-code", "test-failure")
_FRAME = regex.compile(r"""(?:File "[^"\n]+", line \d+|[\w./\\-]+\.\w+:\d+|\(\S+\.\w+:\d+\)|\bat \S+:\d+)""")
_SHAPE = regex.compile(r"0x[0-9a-fA-F]+|[0-9a-f]{8,}|\d+")

_H = {
    "en": {
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
    },
    "zh": {
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
    },
}


@dataclass
class LadderItem:
    """One line (or block) of the ladder summary, or one kept unit of segments."""

    priority: int
    label: str
    text: str = ""
    step_id: str = ""
    ref: str | None = None
    section: str = ""
    unit_ids: tuple[str, ...] = ()  # a kept unit (priority 6 turns, the system prompt)
    floor: bool = False  # part of the floor: never cut
    originals: dict[str, str] = field(default_factory=dict)  # ref -> original text to store


@dataclass
class Plan:
    items: list[LadderItem]
    request_ids: tuple[str, ...]  # segment ids of the newest request (always kept)
    live_ref: str | None


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
    return " | ".join(parts)


def _live_lines(seg: Segment, spans: list[Span]) -> list[tuple[str, str]]:
    """(label, line) of the live error, most important first: error header, innermost frames,
    exit code, final summary line, other error lines."""
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
            if lines:
                add("trace message", lines[-1] if "Traceback" in sp.text else lines[0])
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
    return out


def build_items(segments: list[Segment], spans_by_seg: dict[str, list[Span]], texts: dict[str, str],
                anchor: Anchor, units, lang: str = "en") -> Plan:
    """Every ladder item, in priority order (within a priority: most important first)."""
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
    # 1 ------------------------------------------------------------- constraints
    for c in anchor.user_constraints:
        if c.status == "active" and c.text.strip():
            items.append(LadderItem(1, "user constraint", f"- {' '.join(c.text.split())}", c.source_step,
                                    section=h[1], floor=True))
    # 2 ------------------------------------------------------------- live evidence
    failing = [s for s in segments if _failing(s, spans_by_seg.get(s.id, []))]
    live = failing[-1] if failing else None
    live_ref = None
    if live is not None:
        sp = evidence_spans(live, spans_by_seg.get(live.id, []))
        live_ref = _ref(live.text)
        cmd = _first_line(live.command or "")
        cmd = f", `{cmd[:120]}`" if cmd else ""
        section = h[2].format(step=live.step_id, cmd=cmd, ref=live_ref)
        for i, (label, line) in enumerate(_live_lines(live, sp)):
            items.append(LadderItem(2, label, line, live.step_id, live_ref, section=section, floor=(i == 0),
                                    originals={live_ref: live.text}))
    # 3 ------------------------------------------------------------- failed approaches
    for a in reversed(anchor.failed_attempts):
        line = f"- `{a.command}`"
        if a.error:
            line += f" → {a.error}"
        tail = []
        if a.count > 1:
            tail.append(h["times"].format(n=a.count))
        if a.last_step or a.source_step:
            tail.append(a.last_step or a.source_step)
        if tail:
            line += f" ({', '.join(tail)})"
        items.append(LadderItem(3, "failed attempt", line, a.last_step or a.source_step, section=h[3]))
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
    older = [s for s in failing if s is not live]
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
    # 6 ------------------------------------------------------------- the rest
    pinned_sys = []
    free = []
    for u in units:
        if set(u.ids) & set(request_ids):
            continue
        segs_u = [s for s in segments if s.id in set(u.ids)]
        if u.pinned and u.why_pinned == "system prompt":
            pinned_sys.append(u)
        elif segs_u:
            free.append(u)
    for u in reversed(free):  # recent turns, newest first
        items.append(LadderItem(6, "turn", "", u.step_ids[0] if u.step_ids else "", unit_ids=tuple(u.ids)))
    for u in pinned_sys:
        items.append(LadderItem(6, "system prompt", "", "", unit_ids=tuple(u.ids)))
    covered = {c.id for c in anchor.user_constraints} | {a.id for a in anchor.failed_attempts} \
        | {d.id for d in anchor.dead_ends} | {d.id for d in anchor.decisions_made} | {e.id for e in anchor.key_evidence}
    from ..anchor.render import render_lines

    for _section, key, text in render_lines(anchor, lang):
        if not key or key in covered or not text.strip():
            continue
        items.append(LadderItem(6, "anchor item", text.rstrip(), section=h[6]))
    return Plan(items, request_ids, live_ref)


def render(items: list[LadderItem], marker: str) -> str:
    """The summary text: the marker line, then each section's kept lines in ladder order."""
    out = [marker]
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
    return "\n".join(out) + "\n"


def marker_line(lang: str, n: int, rng: str, budget: int, ref: str) -> str:
    return _H.get(lang, _H["en"])["marker"].format(n=n, rng=rng, budget=budget, ref=ref)


def is_user(seg: Segment) -> bool:
    return seg.role == Role.user
