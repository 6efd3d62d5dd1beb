"""Renderings of the one anchor model: the canonical JSON (:func:`to_json`), seed 000's memory
record (:func:`to_seed_json`, exactly its six fields) and Markdown (English, or seed 001's Chinese
layout). Each rendering shows every item once."""

from __future__ import annotations

import operator
from itertools import chain
from typing import Any

from ..models import Anchor, Evidence, Fact, FileTouch

__all__ = ["JSON_SECTIONS", "SEED_FIELDS", "RenderMemo", "fact_line", "to_json", "to_markdown", "to_seed_json", "render_lines"]

SEED_FIELDS = ("objective_state", "facts_learned", "decisions_made", "open_questions", "dead_ends", "next_action_hint")

_LABELS = {
    "en": {
        "title": "## Current working state", "status": "**Status**", "live": "**Live failure**", "harness": "Harness rule", "goal": "**Goal**", "done": "**Done**", "decisions": "**Decisions**",
        "excluded": "**Excluded approaches**", "open": "**Open / next**", "evidence": "**Key evidence**",
        "constraints": "**Constraints**", "files": "**Files**", "none": "- (none)", "failed": "failed",
        "pending": "no result yet", "request_done": "Finished request", "rejected": "Rejected by the user",
        "question": "Open question", "next": "Next", "assumption": "Unconfirmed assumption",
        "unfinished": "Unfinished", "hint": "Next action (hint, not binding)", "fact": "Fact",
        "evidence_label": "evidence", "read": "read", "created": "created", "modified": "modified",
        "deleted": "deleted", "stale": "read before a later edit (stale)", "related": "related",
        "unfinished_file": "unfinished (last edit failed)", "sep": ": ", "attempt": "Failed attempt",
        "times": "times", "overflow": "**Not shown (size bound; by source step)**", "resolved": "resolved at", "stale_since": "stale since",
        "sec_key_evidence": "key evidence", "sec_user_constraints": "constraints",
        "sec_failed_attempts": "failed attempts", "sec_decisions_made": "decisions", "sec_changes_made": "changes",
        "sec_intent": "requests", "sec_next_steps": "next steps", "sec_open_questions": "open questions",
        "sec_dead_ends": "excluded approaches", "sec_facts_learned": "facts", "sec_files_touched": "files",
    },
    "zh": {
        "title": "## 当前工作状态", "status": "**状态**", "live": "**当前失败**", "harness": "运行环境规则", "goal": "**目标**", "done": "**已完成**", "decisions": "**已做决策**",
        "excluded": "**已排除方案**", "open": "**待解决**", "evidence": "**关键证据**",
        "constraints": "**用户约束**", "files": "**涉及文件**", "none": "- 无", "failed": "失败",
        "pending": "尚无结果", "request_done": "已完成的需求", "rejected": "用户否定", "question": "待确认问题",
        "next": "下一步", "assumption": "尚未确认的假设", "unfinished": "未完成",
        "hint": "下一步建议（不具约束力）", "fact": "事实", "evidence_label": "证据", "read": "读取",
        "created": "新建", "modified": "修改", "deleted": "删除", "stale": "读取后又被修改（内容已过期）",
        "related": "相关", "unfinished_file": "未完成（最后一次修改失败）", "sep": "：", "attempt": "失败的尝试",
        "times": "次", "overflow": "**未显示（超出大小上限；见来源步骤）**", "resolved": "已解决于", "stale_since": "已过期于",
        "sec_key_evidence": "关键证据", "sec_user_constraints": "用户约束", "sec_failed_attempts": "失败的尝试",
        "sec_decisions_made": "已做决策", "sec_changes_made": "已完成", "sec_intent": "需求",
        "sec_next_steps": "下一步", "sec_open_questions": "待确认问题", "sec_dead_ends": "已排除方案",
        "sec_facts_learned": "事实", "sec_files_touched": "涉及文件",
    },
}


# ------------------------------------------------------------------ seed 000 JSON


def _dead_end_text(approach: str, why: str, sep: str = ": ") -> str:
    if not why or why.strip() == approach.strip() or why in approach:
        return approach
    return f"{approach}{sep}{why}"


def to_seed_json(anchor: Anchor) -> dict[str, Any]:
    """Seed 000's memory record: exactly its six fields. Dead ends are the excluded approaches;
    the next-action hint is the first pending next step (non-binding)."""
    state = anchor.objective_state
    if anchor.status:
        state = f"{anchor.status}. {state}" if state else anchor.status
    return {
        "objective_state": state,
        "facts_learned": [{"text": f.text, "source_step": f.source_step} for f in anchor.facts_learned],
        "decisions_made": [{"decision": d.decision, "reason": d.reason}
                           for d in anchor.decisions_made if d.status == "active"],
        "open_questions": [q.text for q in anchor.open_questions if q.status == "open"],
        "dead_ends": [_dead_end_text(x.approach, x.why) for x in anchor.dead_ends if x.status == "excluded"],
        "next_action_hint": anchor.next_action_hint,
    }


JSON_SECTIONS = ("status", "live_failure", "intent", "user_constraints", "changes_made", "decisions_made", "excluded_approaches",
                 "failed_attempts", "key_evidence", "open_questions", "next_steps", "facts_learned", "files_touched",
                 "overflow")


def to_json(anchor: Anchor) -> dict[str, Any]:
    """The canonical JSON of the anchor: every section once, every item once, with its id, source
    step and status. Derived text (seed 000's objective state and next-action hint) is not
    repeated here; :func:`to_seed_json` renders it."""
    it = anchor.intent
    intent: dict[str, Any] = {"initial": it.initial}
    if it.current and it.current != it.initial:
        intent["current"] = it.current
    shown = {it.initial, it.current}
    # a request already quoted in the initial or current wording (the current one lists what is
    # still open) is not shown again
    others = [h.model_dump(mode="json") for h in it.history
              if h.kind != "initial" and not any(h.text in t for t in shown if t)]
    if others:
        intent["history"] = others
    dump = anchor.model_dump(mode="json", include={"changes_made", "decisions_made", "failed_attempts",
                                                   "key_evidence", "open_questions", "next_steps", "facts_learned",
                                                   "user_constraints", "files_touched", "overflow"})
    out: dict[str, Any] = {"schema_version": anchor.schema_version, "status": anchor.status,
                           "live_failure": anchor.live_failure, "intent": intent}
    for name in JSON_SECTIONS[3:]:
        if name == "excluded_approaches":
            out[name] = [x.model_dump(mode="json") for x in anchor.dead_ends]
        else:
            out[name] = dump[name]
    out["harness_constraints"] = list(anchor.cursor.run.harness_rules)
    out["steps_seen"] = anchor.steps_seen
    return out


# ------------------------------------------------------------------ Markdown


def _code(text: str) -> str:
    if "\n" in text:
        return ""
    if "`" not in text:
        return f"`{text}`"
    if "``" not in text:
        return f"`` {text} ``"
    return text


def _evidence_block(prefix: str, text: str) -> str:
    if "\n" not in text:
        return f"- {prefix}{_code(text)}"
    fence = "```"
    while fence in text:
        fence += "`"
    body = "\n".join("  " + ln if ln else "" for ln in text.split("\n"))
    return f"- {prefix.rstrip()}\n  {fence}\n{body}\n  {fence}"


def _step(s: str) -> str:
    return f" ({s})" if s else ""


def _file_line(f: FileTouch, L: dict[str, str]) -> str:
    acts = ", ".join(L.get(a, a) for a in f.actions)
    span = f.first_step if f.first_step == f.last_step else f"{f.first_step}–{f.last_step}"
    parts = [f"- {_code(f.path) or f.path} — {acts}" + (f" ({span})" if span else "")]
    notes = []
    if f.read_superseded:
        notes.append(L["stale"])
    if f.unfinished:
        notes.append(L["unfinished_file"])
    if f.related:
        notes.append(f"{L['related']}{L['sep']}" + ", ".join(f.related[:8]) + (" …" if len(f.related) > 8 else ""))
    if notes:
        parts.append("; ".join(notes))
    return "; ".join(parts)


class RenderMemo:
    """Rendered sections of a conversation's anchor, kept while what each section shows is the same
    (the same item objects, the same texts): an anchor that grows every turn re-renders only the
    sections whose items changed. The rows are the ones :func:`render_lines` gives without it."""

    def __init__(self) -> None:
        self.sections: dict[tuple[str, str], tuple[tuple, list[tuple[str, str, str]]]] = {}
        self.counted: tuple | None = None  # (the count function, a rendering, its count): the size bound's
        self.markdown: tuple | None = None  # (title rows, each section's rows, the Markdown) of the last rendering
        self.row_counts: tuple = (None, {})  # (the count function, row text -> its count): the size bound's


def _same_deps(a: tuple, b: tuple) -> bool:
    """Do two sections' inputs show the same? Lists of items compare with ``==``: the same item
    objects are equal without a call to their ``__eq__`` (a C loop), and an equal item renders
    the same rows."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, list):
            if not (isinstance(y, list) and x == y):
                return False
        elif not (x is y or (type(x) is type(y) and x == y)):
            return False
    return True


def render_lines(anchor: Anchor, lang: str = "en", memo: RenderMemo | None = None) -> list[tuple[str, str, str]]:
    """The Markdown as (section, item id, text) rows: ``item id`` is '' for headings and fixed text.

    :func:`to_markdown` joins the texts; the budget fitter uses the rows to cost each item.
    """
    return list(chain.from_iterable(_row_groups(anchor, lang, memo)))


def _row_groups(anchor: Anchor, lang: str, memo: RenderMemo | None) -> list[list[tuple[str, str, str]]]:
    """The rows of :func:`render_lines`, as the title group and then one list per section (with a
    memo, a section whose items did not change is the same list object as the last time)."""
    lang = "zh" if lang == "zh" else "en"
    L = _LABELS[lang]
    a = anchor
    goal = a.cursor.objective or a.intent.current or a.intent.newest_request
    head = [("title", "", L["title"])]
    status, live = _status_texts(a, lang)
    if status:
        head.append(("status", "", f"{L['status']}: {status}"))
        head.append(("live", "", f"{L['live']}: {live}"))
    head.append(("goal", "", f"{L['goal']}: {goal}" if goal else f"{L['goal']}:"))
    groups: list[list[tuple[str, str, str]]] = [head]
    hist = a.intent.history
    for name, deps, build in (
            ("done", (hist, a.changes_made), _done_rows),
            ("decisions", (a.decisions_made,), _decision_rows),
            ("excluded", (a.dead_ends, hist, a.failed_attempts), _excluded_rows),
            ("open", (a.open_questions, hist, a.next_steps, a.files_touched, a.next_action_hint, a.cursor.run.status),
             _open_rows),
            ("evidence", (a.key_evidence, a.facts_learned), _evidence_rows),
            ("constraints", (a.user_constraints, a.cursor.run.harness_rules), _constraint_rows),
            ("files", (a.files_touched,), _file_rows),
            ("overflow", (a.overflow,), _overflow_rows)):
        if memo is None:
            groups.append(build(a, L))
            continue
        hit = memo.sections.get((lang, name))
        if hit is None or not _same_deps(hit[0], deps):
            hit = memo.sections[(lang, name)] = (deps, build(a, L))
        groups.append(hit[1])
    return groups


def _status_texts(a: Anchor, lang: str) -> tuple[str, str]:
    """The status line and the live failure, in ``lang`` (from the run model when the anchor
    carries it, so both languages render the same facts)."""
    if lang == "zh" and a.status and a.cursor.run.calls:
        from .sections import live_failure_line, status_line

        return status_line(a.cursor.run, "zh"), live_failure_line(a.cursor.run, "zh")
    return a.status, a.live_failure


def _section(name: str, label: str, items: list[tuple[str, str]], L: dict[str, str]) -> list[tuple[str, str, str]]:
    rows = [(name, "", f"{label}:")]
    if not items:
        rows.append((name, "", L["none"]))
    for iid, text in items:
        rows.append((name, iid, text))
    return rows


def _done_rows(anchor: Anchor, L: dict[str, str]) -> list[tuple[str, str, str]]:
    done: list[tuple[str, str]] = []
    for it in anchor.intent.history:
        if it.kind in ("initial", "request") and it.status == "done":
            done.append((it.id, f"- {L['request_done']}{_step(it.source_step)}{L['sep']}{it.text}"))
    for c in anchor.changes_made:
        if c.status == "failed":
            continue  # it changed nothing: the failed approaches hold it
        flag = f" — {L['pending']}" if c.status == "pending" else ""
        done.append((c.id, f"- {c.description}{_step(c.source_step)}{flag}"))
    return _section("done", L["done"], done, L)


def _decision_rows(anchor: Anchor, L: dict[str, str]) -> list[tuple[str, str, str]]:
    return _section("decisions", L["decisions"], [
        (d.id, f"- {d.decision}" + (f"{L['sep']}{d.reason}" if d.reason else "") + _step(d.source_step))
        for d in anchor.decisions_made if d.status == "active"], L)


def _excluded_rows(anchor: Anchor, L: dict[str, str]) -> list[tuple[str, str, str]]:
    excluded: list[tuple[str, str]] = []
    for x in anchor.dead_ends:
        if x.status != "excluded":
            continue
        line = f"- {_dead_end_text(x.approach, x.why, L['sep'])}{_step(x.source_step)}"
        if x.evidence and x.evidence not in x.approach and x.evidence not in x.why:
            ev = _code(x.evidence) or x.evidence.replace("\n", " ")
            line += f" — {L['evidence_label']}{L['sep']}{ev}"
        excluded.append((x.id, line))
    for it in anchor.intent.history:
        if it.kind == "rejected" and it.status == "active":
            excluded.append((it.id, f"- {L['rejected']}{_step(it.source_step)}{L['sep']}{it.text}"))
    for fa in anchor.failed_attempts:
        where = fa.source_step if fa.count == 1 else f"{fa.source_step}…{fa.last_step}, {fa.count} {L['times']}"
        if fa.exit_code not in (None, 0):
            where += f", exit {fa.exit_code}"
        line = f"- {L['attempt']} ({where}){L['sep']}{_code(fa.command) or fa.command}"
        if fa.error:
            line += f" → {fa.error}"
        if fa.status == "resolved":
            line += f" ({L['resolved']} {fa.resolved_at})"
        excluded.append((fa.id, line))
    return _section("excluded", L["excluded"], excluded, L)


def _words(text: str) -> str:
    return " ".join(text.replace("\\n", " ").split())


def _open_rows(anchor: Anchor, L: dict[str, str]) -> list[tuple[str, str, str]]:
    from .sections import step_text  # the derived steps' wording, in the rendering's language

    lang = "zh" if L is _LABELS["zh"] else "en"
    open_rows: list[tuple[str, str]] = []
    for q in anchor.open_questions:
        if q.status == "open":
            open_rows.append((q.id, f"- {L['question']}{_step(q.source_step)}{L['sep']}{q.text}"))
    for it in anchor.intent.history:
        if it.kind == "assumption" and it.status == "active":
            open_rows.append((it.id, f"- {L['assumption']}{_step(it.source_step)}{L['sep']}{it.text}"))
    for n in anchor.next_steps:
        if n.status == "pending":
            open_rows.append((n.id, f"- {L['next']}{_step(n.source_step)}{L['sep']}{step_text(n.text, lang)}"))
    submitted = anchor.cursor.run is not None and anchor.cursor.run.status == "submitted"
    for f in anchor.files_touched:
        if f.unfinished and not submitted:  # (after a submission nothing is open: the file says it)
            open_rows.append(("", f"- {L['unfinished']}{L['sep']}{f.path}"))
    # the hint restates a listed step when their words agree (the hint is shortened and squashed:
    # compared with spacing and escaped newlines ignored)
    shown_steps = {_words(n.text) for n in anchor.next_steps if n.status == "pending"} | \
        {_words(q.text) for q in anchor.open_questions if q.status == "open"}
    hint = _words(anchor.next_action_hint.rstrip("…").rstrip()) if anchor.next_action_hint else ""
    if anchor.next_action_hint and not any(t.startswith(hint) for t in shown_steps):
        open_rows.append(("", f"- {L['hint']}{L['sep']}{step_text(anchor.next_action_hint, lang)}"))
    return _section("open", L["open"], open_rows, L)


def _evidence_rows(anchor: Anchor, L: dict[str, str]) -> list[tuple[str, str, str]]:
    ev_rows: list[tuple[str, str]] = []
    for e in anchor.key_evidence:
        ev_rows.append((e.id, _evidence_block(f"{_ev_prefix(e, L)} ", e.text)))
    for fact in anchor.facts_learned:
        ev_rows.append((fact.id, _fact_row(fact, L)))
    return _section("evidence", L["evidence"], ev_rows, L)


def _fact_row(fact: Fact, L: dict[str, str]) -> str:
    return f"- {L['fact']}{_step(fact.source_step)}{L['sep']}{fact.text}"


def fact_line(fact: Fact, lang: str = "en") -> str:
    """The Markdown row of one fact (its line in :func:`render_lines`, as the size bound costs it)."""
    return _fact_row(fact, _LABELS["zh" if lang == "zh" else "en"])


def _constraint_rows(anchor: Anchor, L: dict[str, str]) -> list[tuple[str, str, str]]:
    rows = [(c.id, f"- {c.text}{_step(c.source_step)}") for c in anchor.user_constraints if c.status == "active"]
    # the binding lines of the harness's instructions (the run model keeps them; always shown)
    shown = [c.text for c in anchor.user_constraints]
    rows += [("", f"- {L['harness']}{L['sep']}{line}") for line in anchor.cursor.run.harness_rules
             if not any(line in t or t in line for t in shown)]
    return _section("constraints", L["constraints"], rows, L)


def _file_rows(anchor: Anchor, L: dict[str, str]) -> list[tuple[str, str, str]]:
    return _section("files", L["files"], [(f"file:{f.path}", _file_line(f, L)) for f in anchor.files_touched], L)


def _overflow_rows(anchor: Anchor, L: dict[str, str]) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    if anchor.overflow:
        rows.append(("overflow", "", f"{L['overflow']}:"))
        for o in anchor.overflow:
            steps = ", ".join(o.steps[:12]) + (" …" if len(o.steps) > 12 else "")
            rows.append(("overflow", "", f"- {L.get('sec_' + o.section, o.section)}{L['sep']}{o.count}"
                                         + (f" ({steps})" if steps else "")))
    return rows


def _ev_prefix(e: Evidence, L: dict[str, str]) -> str:
    bits = [b for b in (e.source_step, e.family) if b]
    if e.status == "resolved":
        bits.append(f"{L['resolved']} {e.resolved_at}".strip())
    elif e.status == "stale":
        bits.append(f"{L['stale_since']} {e.resolved_at}".strip())
    return f"({', '.join(bits)})" if bits else ""


def to_markdown(anchor: Anchor, lang: str = "en", memo: RenderMemo | None = None) -> str:
    """The anchor as Markdown: seed 001's layout (``lang="zh"``) or its English equivalent.
    ``memo``: a conversation's :class:`RenderMemo` (the same text, sections re-rendered only when
    their items changed)."""
    groups = _row_groups(anchor, lang, memo)
    if memo is not None:
        # every section the same list of rows as last time (and the same title and goal): the same text
        held = memo.markdown
        if held is not None and held[0] == groups[0] and len(held[1]) == len(groups) - 1 \
                and all(map(operator.is_, held[1], groups[1:])):
            return held[2]
    out: list[str] = []
    prev_section = None
    for section, _, text in chain.from_iterable(groups):
        if prev_section is not None and section != prev_section:
            out.append("")
        out.append(text)
        prev_section = section
    md = "\n".join(out) + "\n"
    if memo is not None:
        memo.markdown = (groups[0], groups[1:], md)
    return md

