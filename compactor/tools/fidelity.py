"""Fidelity audit of the anchor (seed 000, "信息忠实度审计": compare facts_learned with the
trajectory; the error rate should be under 5 %).

For each trajectory the anchor is built (deterministically, as ``compact`` builds it) and every
item is traced back to the original text:

- a **fact** is supported when its ``source_step`` exists and that step's text contains every
  number of the fact and most (``min_words``, default 70 %) of its content words;
- a **decision** is traced when a step (its ``source_step`` when given) states it: most of the
  decision's content words are in that step's text;
- a **dead end** is traced when its step (or the next one) both mentions the approach (half of
  its content words) and holds explicit failure text (an error, "failed", "did not work",
  "not the problem", "无效", …), or its recorded evidence is verbatim in the original and itself
  says it failed. A path that merely ran (a warning, a deprecation) is not a dead end.

The error rate is (unsupported facts + untraced decisions + untraced dead ends) / items.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable


from ..models import Anchor, Segment
from ..audit.common import content_words as _words, word_set as _word_set
from ..normalize import normalize
from ..lazyre import lazy_regex

__all__ = ["AuditItem", "FileAudit", "AuditReport", "audit_anchor", "audit_file", "audit_paths", "format_table"]

_NUM = lazy_regex(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w])")
_FAIL = lazy_regex(
    r"""(?ix)
    \b(?:error|errors|errored|exception|traceback|fail(?:s|ed|ing|ure)?|crash(?:ed|es)?|panic(?:ked)?|fatal|abort(?:ed)?|
       segfault|timed\s+out|refused|
       (?:did\s+not|didn't|does\s+not|doesn't|won't|will\s+not)\s+(?:work|help|fix|change\s+anything)|not\s+working|
       no\s+(?:effect|luck|difference)|not\s+the\s+(?:problem|cause|issue|fix)|dead\s+end|ruled\s+out|gave\s+up|
       still\s+(?:fails|failing|broken|errors?|the\s+same|happens|crashes))\b
    | 无效|失败|错误|报错|异常|不行|不可行|没用|行不通|放弃|排除
    """
)


def _numbers(text: str) -> list[str]:
    return [m.group(0) for m in _NUM.finditer(text)]


def _coverage(item_text: str, words: set[str], blob: str) -> float:
    ws = _words(item_text)
    if not ws:
        return 1.0
    hit = sum(1 for w in ws if w in words or w in blob)
    return hit / len(ws)


def _nums_ok(item_text: str, blob: str) -> tuple[bool, list[str]]:
    missing = []
    for n in _numbers(item_text):
        if n in blob or n.replace(",", "") in blob:
            continue
        missing.append(n)
    return not missing, missing


@dataclass(frozen=True)
class AuditItem:
    kind: str  # fact | decision | dead_end
    text: str
    source_step: str
    ok: bool
    why: str = ""


@dataclass
class FileAudit:
    path: str
    format: str = ""
    facts: int = 0
    unsupported: int = 0
    decisions: int = 0
    untraced_decisions: int = 0
    dead_ends: int = 0
    untraced_dead_ends: int = 0
    items: list[AuditItem] = field(default_factory=list)
    error: str = ""

    @property
    def total(self) -> int:
        return self.facts + self.decisions + self.dead_ends

    @property
    def errors(self) -> int:
        return self.unsupported + self.untraced_decisions + self.untraced_dead_ends

    @property
    def error_rate(self) -> float:
        return self.errors / self.total if self.total else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "format": self.format, "facts": self.facts, "unsupported": self.unsupported,
                "decisions": self.decisions, "untraced_decisions": self.untraced_decisions,
                "dead_ends": self.dead_ends, "untraced_dead_ends": self.untraced_dead_ends,
                "items": self.total, "errors": self.errors, "error_rate": round(self.error_rate, 4),
                "error": self.error or None,
                "failures": [{"kind": i.kind, "text": i.text, "source_step": i.source_step, "why": i.why}
                             for i in self.items if not i.ok]}


@dataclass
class AuditReport:
    files: list[FileAudit]

    @property
    def audited(self) -> list[FileAudit]:
        return [f for f in self.files if not f.error]

    @property
    def total(self) -> int:
        return sum(f.total for f in self.audited)

    @property
    def errors(self) -> int:
        return sum(f.errors for f in self.audited)

    @property
    def error_rate(self) -> float:
        return self.errors / self.total if self.total else 0.0

    def to_json(self) -> dict[str, Any]:
        a = self.audited
        return {"files": [f.to_json() for f in self.files],
                "overall": {"files": len(a), "skipped": len(self.files) - len(a),
                            "facts": sum(f.facts for f in a), "unsupported": sum(f.unsupported for f in a),
                            "decisions": sum(f.decisions for f in a),
                            "untraced_decisions": sum(f.untraced_decisions for f in a),
                            "dead_ends": sum(f.dead_ends for f in a),
                            "untraced_dead_ends": sum(f.untraced_dead_ends for f in a),
                            "items": self.total, "errors": self.errors, "error_rate": round(self.error_rate, 4)}}


def audit_anchor(anchor: Anchor, segments: list[Segment], *, min_words: float = 0.7,
                 path: str = "", format: str = "") -> FileAudit:
    """Trace every fact, decision and dead end of ``anchor`` back to ``segments``."""
    steps: dict[str, list[str]] = {}
    for s in segments:
        steps.setdefault(s.step_id, []).append(normalize(s.text))
        if s.command:
            steps[s.step_id].append(s.command)
    blobs = {k: "\n".join(v) for k, v in steps.items()}
    wsets: dict[str, set[str]] = {}

    def words_of(step: str) -> set[str]:
        if step not in wsets:
            wsets[step] = _word_set(blobs[step])
        return wsets[step]

    fa = FileAudit(path=path, format=format)
    for f in anchor.facts_learned:
        fa.facts += 1
        ok, why = True, ""
        if not f.source_step:
            ok, why = False, "no source_step"
        elif f.source_step not in blobs:
            ok, why = False, f"source_step {f.source_step} does not exist"
        else:
            blob = blobs[f.source_step]
            nums_ok, missing = _nums_ok(f.text, blob)
            cov = _coverage(f.text, words_of(f.source_step), blob.casefold())
            if not nums_ok:
                ok, why = False, f"numbers not in {f.source_step}: {', '.join(missing[:5])}"
            elif cov < min_words:
                ok, why = False, f"only {cov:.0%} of the fact's words are in {f.source_step}"
        if not ok:
            fa.unsupported += 1
        fa.items.append(AuditItem("fact", f.text, f.source_step, ok, why))

    for d in anchor.decisions_made:
        fa.decisions += 1
        cand = [d.source_step] if d.source_step in blobs else list(blobs)
        best = max((_coverage(d.decision, words_of(k), blobs[k].casefold()) for k in cand), default=0.0)
        ok = best >= min_words
        why = "" if ok else (f"no step states it (best {best:.0%} of its words)" +
                             ("" if not d.source_step or d.source_step in blobs else f"; source_step {d.source_step} does not exist"))
        if not ok:
            fa.untraced_decisions += 1
        fa.items.append(AuditItem("decision", d.decision, d.source_step, ok, why))

    order = list(blobs)
    for x in anchor.dead_ends:
        fa.dead_ends += 1
        ok, why = False, ""
        if x.evidence and _FAIL.search(x.evidence) and any(x.evidence.strip() in b for b in blobs.values()):
            ok = True
        else:
            if x.source_step in blobs:
                i = order.index(x.source_step)
                cand = order[i: i + 2]  # the step, or the next one (the agent's conclusion)
            else:
                cand = order
            for k in cand:  # one step must both name the approach and say it failed
                if _FAIL.search(blobs[k]) and _coverage(x.approach, words_of(k), blobs[k].casefold()) >= 0.5:
                    ok = True
                    break
            if not ok:
                why = ("no explicit failure text around the step" if x.source_step in blobs
                       else f"source_step {x.source_step or '(none)'} does not exist and no step states the failure")
        if not ok:
            fa.untraced_dead_ends += 1
        fa.items.append(AuditItem("dead_end", x.approach, x.source_step, ok, why))
    return fa


_COMP = None


def _anchor_for(doc, objective: str | None = None) -> Anchor:
    global _COMP
    from ..anchor import build_anchor
    from ..pipeline import Compactor

    if _COMP is None:
        _COMP = Compactor(level=0)
    spans = []
    for s in doc.segments:
        spans.extend(_COMP.level1.detect(s.text, role=s.role.value, segment_id=s.id, step_id=s.step_id)[2].spans)
    return build_anchor(doc.segments, spans, objective=objective)


def audit_file(path: str | os.PathLike[str], *, min_words: float = 0.7, format: str = "auto") -> FileAudit:
    from ..errors import CompactorError
    from ..formats import load_document

    p = str(path)
    try:
        doc = load_document(Path(p), format=format)
    except CompactorError as exc:
        return FileAudit(path=p, error=exc.one_line())
    anchor = _anchor_for(doc)
    return audit_anchor(anchor, doc.segments, min_words=min_words, path=p, format=doc.format)


def expand_paths(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Files of the arguments: directories are walked (sorted, hidden entries skipped)."""
    out: list[str] = []
    for p in paths:
        p = str(p)
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for f in sorted(files):
                    if not f.startswith("."):
                        out.append(os.path.join(root, f))
        else:
            out.append(p)
    return out


def audit_paths(paths: Iterable[str | os.PathLike[str]], *, min_words: float = 0.7, format: str = "auto") -> AuditReport:
    from ..errors import InputError

    files = expand_paths(paths)
    if not files:
        raise InputError("nothing to audit: no files found", source=", ".join(str(p) for p in paths) or None)
    for f in files:
        if not os.path.exists(f):
            raise InputError("no such file or directory", source=f)
    return AuditReport([audit_file(f, min_words=min_words, format=format) for f in files])


def format_table(report: AuditReport, *, verbose: bool = False) -> str:
    rows = [("file", "format", "facts", "unsupported", "decisions", "untraced", "dead ends", "untraced", "error rate")]
    for f in report.files:
        if f.error:
            rows.append((f.path, "-", "-", "-", "-", "-", "-", "-", "skipped"))
            continue
        rows.append((f.path, f.format, str(f.facts), str(f.unsupported), str(f.decisions), str(f.untraced_decisions),
                     str(f.dead_ends), str(f.untraced_dead_ends), f"{f.error_rate:.1%}" if f.total else "-"))
    a = report.audited
    rows.append((f"overall ({len(a)} files)", "", str(sum(f.facts for f in a)), str(sum(f.unsupported for f in a)),
                 str(sum(f.decisions for f in a)), str(sum(f.untraced_decisions for f in a)),
                 str(sum(f.dead_ends for f in a)), str(sum(f.untraced_dead_ends for f in a)),
                 f"{report.error_rate:.1%}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, r in enumerate(rows):
        cells = [r[0].ljust(widths[0]), r[1].ljust(widths[1])] + [c.rjust(w) for c, w in zip(r[2:], widths[2:])]
        lines.append("  ".join(cells).rstrip())
        if n == 0 or n == len(rows) - 2:
            lines.append("  ".join("-" * w for w in widths))
    if verbose:
        for f in report.files:
            if f.error:
                lines.append(f"{f.path}: skipped: {f.error}")
            for i in f.items:
                if not i.ok:
                    lines.append(f"{f.path}: {i.kind} [{i.source_step or '-'}] {' '.join(i.text.split())[:120]!r}: {i.why}")
    verdict = "ok" if report.error_rate < 0.05 else "over the 5% target"
    lines.append(f"error rate {report.error_rate:.2%} ({report.errors} of {report.total} items): {verdict}")
    return "\n".join(lines) + "\n"
