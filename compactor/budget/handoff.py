"""The hand-off document: what a human or a fresh agent needs to take over a session.

Produced when Level 3 has been needed ``handoff_after`` times on one
:class:`~compactor.Compactor` (the exit signal, seed 001), and on demand with
``compactor compact … --emit handoff``. Sections: goal, newest request, current state, done,
decisions, excluded approaches (do not retry), user constraints, key evidence (verbatim),
files, open questions, next steps, and how to resume. English or Chinese headings.
"""

from __future__ import annotations

from typing import Any

from ..models import Anchor
from ..audit.common import shorten

__all__ = ["handoff_document"]

_H = {
    "en": {
        "title": "# Hand-off: continue this task in a new session",
        "why": "This session needed extreme compaction (Level 3) {n} time(s); continue in a fresh session from this document.",
        "why0": "Everything a new session needs to take over, from the compacted trajectory.",
        "goal": "## Goal", "request": "## Newest user request", "state": "## Current state",
        "done": "## Done", "decisions": "## Decisions (keep them: do not re-litigate)",
        "excluded": "## Excluded approaches (do NOT retry)", "constraints": "## User constraints",
        "evidence": "## Key evidence (verbatim)", "files": "## Files", "open": "## Open questions",
        "next": "## Next steps", "resume": "## How to resume",
        "none": "(none recorded)", "unfinished": "unfinished", "stale": "read before a later edit: re-read",
        "hint": "Suggested (not binding): ",
        "resume_lines": [
            "1. Start a new session with this document as the first user message.",
            "2. Re-read the files listed above before editing them; do not trust earlier reads.",
            "3. Do not retry anything under 'Excluded approaches'; the evidence says why each failed.",
            "4. Work on the newest user request; earlier requests may be done or superseded.",
            "5. The original turns are in the compactor store: `compactor expand <ref>` prints any of them{refs}.",
        ],
        "stats": "Compaction: {before} → {after} tokens, level {level}.",
    },
    "zh": {
        "title": "# 交接：在新会话中继续此任务",
        "why": "本会话已 {n} 次触发极限压缩（Level 3），请基于本文档在新会话中继续。",
        "why0": "新会话接手所需的全部信息，取自压缩后的轨迹。",
        "goal": "## 目标", "request": "## 用户最新请求", "state": "## 当前状态", "done": "## 已完成",
        "decisions": "## 已做决策（不要推翻）", "excluded": "## 已排除方案（不要再试）", "constraints": "## 用户约束",
        "evidence": "## 关键证据（原文）", "files": "## 涉及文件", "open": "## 待确认问题", "next": "## 待解决",
        "resume": "## 如何继续", "none": "（无记录）", "unfinished": "未完成", "stale": "读取后又被修改：需重新读取",
        "hint": "建议（非强制）：",
        "resume_lines": [
            "1. 以本文档作为新会话的第一条用户消息。",
            "2. 修改上面列出的文件前先重新读取，不要依赖之前读到的内容。",
            "3. 不要再尝试“已排除方案”中的任何方案；证据说明了失败原因。",
            "4. 以用户最新请求为准；更早的请求可能已完成或已被取代。",
            "5. 原始对话保存在 compactor 存储中：`compactor expand <ref>` 可取回原文{refs}。",
        ],
        "stats": "压缩：{before} → {after} tokens，级别 {level}。",
    },
}


def _fence(text: str) -> str:
    n = 3
    while "`" * n in text:
        n += 1
    f = "`" * n
    return f"{f}\n{text}\n{f}"


def _parts(obj: Any) -> tuple[Anchor | None, dict[str, Any]]:
    """(anchor, info) from a CompactionResult or a PipelineState."""
    info: dict[str, Any] = {}
    if hasattr(obj, "report"):  # CompactionResult
        rep = obj.report
        info.update(before=rep.tokens_before, after=rep.tokens_after, level=rep.level,
                    refs=[p.id for p in rep.placeholders if p.rule_id == "policy.fold-turns"])
        return obj.anchor, info
    # PipelineState
    info.update(level=getattr(obj, "level", 0),
                refs=[p.id for p in getattr(obj, "placeholders", []) if p.rule_id == "policy.fold-turns"])
    return getattr(obj, "anchor", None), info


def handoff_document(result_or_state: Any, lang: str = "en", *, level3_count: int | None = None) -> str:
    """Markdown hand-off document from a :class:`~compactor.models.CompactionResult` or a pipeline
    state. Deterministic: the same input gives the same text."""
    h = _H.get(lang, _H["en"])
    anchor, info = _parts(result_or_state)
    a = anchor or Anchor()
    out: list[str] = [h["title"], ""]
    out.append(h["why"].format(n=level3_count) if level3_count else h["why0"])
    if "before" in info:
        out.append(h["stats"].format(before=info["before"], after=info["after"], level=info["level"]))
    none = h["none"]

    def section(title: str, lines: list[str]) -> None:
        out.extend(["", title])
        out.extend(lines if lines else [f"- {none}"])

    goal = a.intent.current or a.intent.initial or a.objective_state
    section(h["goal"], [goal.strip()] if goal else [])
    if a.intent.newest_request:
        step = f" ({a.intent.newest_request_step})" if a.intent.newest_request_step else ""
        section(h["request"], [f"{step.strip()} {a.intent.newest_request.strip()}".strip()])
    else:
        section(h["request"], [])
    section(h["state"], [a.objective_state.strip()] if a.objective_state else [])
    section(h["done"], [f"- {c.description}" + (f" ({', '.join(c.files)})" if c.files else "")
                        + (f" [{c.source_step}]" if c.source_step else "") for c in a.changes_made])
    section(h["decisions"], [f"- {d.decision}" + (f": {d.reason}" if d.reason else "")
                             + (f" [{d.source_step}]" if d.source_step else "")
                             for d in a.decisions_made if d.status == "active"])
    ex: list[str] = []
    for d in a.dead_ends:
        if d.status != "excluded":
            continue
        ex.append(f"- {d.approach}" + (f": {d.why}" if d.why else "") + (f" [{d.source_step}]" if d.source_step else ""))
        if d.evidence and d.evidence not in (d.approach, d.why):
            ex.append(_fence(d.evidence))
    section(h["excluded"], ex)
    section(h["constraints"], [f"- {c.text}" for c in a.user_constraints if c.status == "active"])
    section(h["evidence"], [f"- [{e.source_step or '?'}{(' ' + e.rule_id) if e.rule_id else ''}]\n{_fence(e.text)}"
                            for e in a.key_evidence])
    files = []
    for f in a.files_touched:
        flags = []
        if f.unfinished:
            flags.append(h["unfinished"])
        if f.read_superseded:
            flags.append(h["stale"])
        rel = f" → {', '.join(f.related)}" if f.related else ""
        files.append(f"- `{f.path}`: {', '.join(f.actions) or '-'}"
                     + (f" ({'; '.join(flags)})" if flags else "") + rel)
    section(h["files"], files)
    section(h["open"], [f"- {q.text}" for q in a.open_questions if q.status == "open"])
    nxt = [f"- {n.text}" for n in a.next_steps if n.status == "pending"]
    if a.next_action_hint:
        nxt.append(f"- {h['hint']}{shorten(a.next_action_hint, 300)}")
    section(h["next"], nxt)
    refs = info.get("refs") or []
    ref_text = (" (" + ", ".join(refs) + ")") if refs else ""
    section(h["resume"], [ln.format(refs=ref_text) for ln in h["resume_lines"]])
    return "\n".join(out).rstrip() + "\n"

