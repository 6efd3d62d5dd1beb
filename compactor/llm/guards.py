"""Guards on every LLM answer: parse, validate, check against the trajectory, merge.

The answer (seed-000 JSON) is mapped onto a copy of the deterministic anchor; each LLM item
must pass its guard or it is rejected (with a diagnostic), and whatever the deterministic
anchor had that the LLM did not validly carry over is put back. So the result is never worse
than the deterministic anchor:

- **facts** (hallucinated facts): each must cite a step that exists, and that step's text must
  support it (:func:`compactor.llm.support.support`: numbers present, identifiers present,
  enough content words, same polarity). A deterministic fact is dropped only when the LLM
  validly cited its step (it merged or reworded it); facts of steps the LLM no longer cites
  are put back (this is also the recency-bias guard: an answer that only cites the last steps
  gets the earlier facts back, and a diagnostic says so);
- **decisions** (decision laundering): each must reword a deterministic decision, or be
  supported by a step (or two adjacent steps) whose text states a decision (``decided``,
  ``instead``, ``switch to``, ``决定``…). Deterministic decisions not carried over are put back;
- **dead ends** (stale dead ends): each must reword a deterministic excluded approach, or be
  supported by a step (or two adjacent steps) that *concludes* it is wrong (``doesn't work``,
  ``not the cause``, ``ruled out``, ``give up``, ``排除``…). A failure without such a conclusion
  (e.g. one timeout) is rejected as stale;
- **protected items** (key evidence, user constraints, excluded approaches) always stay verbatim:
  the LLM cannot remove or reword them; when its answer lists them and drops or rewords one,
  the original is kept and the report says so;
- **prose** (objective state, open questions, next-action hint): every number and identifier in
  it must occur in what the LLM was shown; an over-confident hint (``must``, ``definitely``…)
  is rejected (the hint is never binding).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import regex

from ..errors import AnswerError
from ..models import Anchor, Decision, Diagnostic, ExcludedApproach, Fact, OpenQuestion, Severity
from .support import SourceIndex, overlap, support
from ..lazyre import lazy_regex

__all__ = ["AnswerError", "GuardResult", "ItemChange", "Rejection", "apply_guards", "parse_answer"]

REWORD_OVERLAP = 0.5
DEAD_END_OVERLAP = 0.4

DECISION_CUES = lazy_regex(
    r"(?i)\b(?:decid\w*|decision|chose|choose|choosing|chosen|opt(?:ed|ing)?\s+(?:for|to)|instead|switch(?:ed|ing)?\s+to"
    r"|prefer\w*|rather\s+than|(?:we|i)(?:'ll|\s+will)\s+(?:use|go|keep|stick|try|switch|implement|fix|add|write|remove)"
    r"|going\s+to\s+(?:use|go|keep|implement|fix)|let'?s\s+(?:use|go\s+with|keep|switch|stick)|settled\s+on"
    r"|plan\s*:|approach\s*:|will\s+use|use\s+\S+\s+instead|not\s+going\s+to|stick\s+with|keep\s+using)\b"
    r"|决定|选择|改用|采用|不再|就用|方案")

CONCLUSION_CUES = lazy_regex(
    r"(?i)(?:does\s*n[o']t\s+work|did\s*n[o']t\s+work|do\s*n[o']t\s+work|won'?t\s+work|not\s+work(?:ing)?|no\s+luck"
    r"|not\s+(?:the\s+)?(?:root\s+)?cause|not\s+(?:the\s+)?(?:problem|issue|culprit|right\s+approach|viable|feasible|possible|helpful)"
    r"|ruled?\s+out|rule\s+(?:it|this|that)\s+out|dead[\s-]end|give\s+up|giving\s+up|gave\s+up|abandon\w*"
    r"|wrong\s+(?:approach|direction|path|fix|idea)|does\s*n[o']t\s+help|did\s*n[o']t\s+help|still\s+fail\w*"
    r"|same\s+error|revert\w*|roll(?:ed)?\s+back|back\s+out|excluded?|discard\w*|won'?t\s+fix|not\s+an?\s+option"
    r"|makes?\s+no\s+difference|no\s+effect|doesn't\s+apply|is\s+a\s+red\s+herring)"
    r"|不行|行不通|排除|放弃|无效|没用|不起作用|走不通|失败了")

TRANSIENT = lazy_regex(
    r"(?i)\b(?:time[ds]?\s*out|timeout|rate[\s-]?limit\w*|429|503|502|temporar\w*|connection\s+(?:reset|refused|error)"
    r"|network|flaky|retry(?:ing)?|try\s+again|unavailable)\b")

OVERCONFIDENT = lazy_regex(
    r"(?i)\b(?:must|definitely|certainly|guaranteed|always|the\s+only\s+(?:way|option|fix)|without\s+a\s+doubt"
    r"|undoubtedly|100\s*%|have\s+to|no\s+other\s+(?:way|option))\b|必须|一定")

SEED_LIST_FIELDS = ("facts_learned", "decisions_made", "open_questions", "dead_ends")
PROTECTED_SECTIONS = ("key_evidence", "user_constraints", "excluded_approaches")


@dataclass(frozen=True)
class ItemChange:
    section: str
    id: str
    text: str
    source_step: str = ""
    detail: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"section": self.section, "id": self.id, "text": self.text, "source_step": self.source_step,
                "detail": self.detail}


@dataclass(frozen=True)
class Rejection:
    section: str
    text: str
    reason: str  # a diagnostic code
    detail: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"section": self.section, "text": self.text, "reason": self.reason, "detail": self.detail}


@dataclass
class GuardResult:
    anchor: Anchor
    added: list[ItemChange] = field(default_factory=list)
    removed: list[ItemChange] = field(default_factory=list)
    reworded: list[ItemChange] = field(default_factory=list)
    restored: list[ItemChange] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed or self.reworded)


# ----------------------------------------------------------------------------- parsing

_FENCE = lazy_regex(r"```(?:json|JSON)?\s*\n?(.*?)```", regex.DOTALL)


def parse_answer(text: str) -> dict[str, Any]:
    """The JSON object in an answer (code fences and chatter around it are tolerated)."""
    if not text or not text.strip():
        raise AnswerError("llm-bad-json", "the answer is empty")
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    a, b = text.find("{"), text.rfind("}")
    if a != -1 and b > a:
        candidates.append(text[a:b + 1])
    candidates.append(text.strip())
    value: Any = None
    for cand in candidates:
        try:
            value = json.loads(cand)
            break
        except (ValueError, RecursionError):
            continue
    else:
        raise AnswerError("llm-bad-json", "the answer is not valid JSON")
    if not isinstance(value, dict):
        raise AnswerError("llm-invalid-schema", f"the answer is a JSON {type(value).__name__}, not an object")
    known = set(SEED_LIST_FIELDS) | {"objective_state", "next_action_hint"} | set(PROTECTED_SECTIONS)
    if not (set(value) & known):
        raise AnswerError("llm-invalid-schema", "the answer has none of the seed-000 fields")
    return value


# ----------------------------------------------------------------------------- helpers


def _hid(prefix: str, *parts: str) -> str:
    h = hashlib.sha256("\x00".join(parts).encode("utf-8", errors="surrogatepass")).hexdigest()
    return f"{prefix}-{h[:16]}"


def _as_text(v: Any) -> str:
    if isinstance(v, str):
        return v.strip()
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)
    return ""


_STEP_NUM = lazy_regex(r"(?i)^(?:step|s)?\s*#?\s*(\d+)$")
_SPLIT_REFS = lazy_regex(r"\s*(?:[,;&/]|\band\b)\s*")


class StepResolver:
    def __init__(self, steps: dict[str, str]):
        self.ids = list(steps)
        self.order = {sid: i for i, sid in enumerate(self.ids)}
        self.lower = {sid.lower(): sid for sid in self.ids}

    def resolve(self, ref: Any) -> tuple[list[str], list[str]]:
        """(resolved step ids, unresolved parts)."""
        if isinstance(ref, list):
            parts = [str(x) for x in ref]
        else:
            ref = _as_text(ref) if not isinstance(ref, str) else ref.strip()
            if not ref:
                return [], []
            if ref in self.order:
                return [ref], []
            parts = [p for p in _SPLIT_REFS.split(ref) if p.strip()]
        got: list[str] = []
        bad: list[str] = []
        for p in parts:
            p = p.strip().strip("[]()\"'` ")
            sid = self._one(p)
            if sid is None:
                bad.append(p)
            elif sid not in got:
                got.append(sid)
        return got, bad

    def _one(self, p: str) -> str | None:
        if p in self.order:
            return p
        if p.lower() in self.lower:
            return self.lower[p.lower()]
        m = _STEP_NUM.match(p)
        if m:
            n = m.group(1)
            for cand in (f"s{n}", n, f"step{n}", f"step-{n}", f"step_{n}"):
                if cand in self.order:
                    return cand
                if cand in self.lower:
                    return self.lower[cand]
        return None

    def index(self, sid: str) -> int:
        return self.order.get(sid, len(self.ids))


def _windows(steps: dict[str, str]) -> list[tuple[str, str, tuple[str, ...]]]:
    """(first step id, text, member step ids) for each step and each pair of adjacent steps."""
    ids = list(steps)
    out = [(sid, steps[sid], (sid,)) for sid in ids]
    out += [(ids[i], steps[ids[i]] + "\n" + steps[ids[i + 1]], (ids[i], ids[i + 1])) for i in range(len(ids) - 1)]
    return out


CUE_STEP_THRESHOLD = 0.4


def _best_window(claim: str, windows, step_idx: dict[str, SourceIndex], cue: regex.Pattern | None):
    """The first (in order) window that supports ``claim``, and whether it carries the cue.

    The cue (a decision, a conclusion) only counts in a step that is itself about the claim
    (coverage >= 0.4 on that step alone): a "ruled out" in the step before an unrelated failure
    does not make that failure a dead end.
    """
    best = None
    for sid, idx, members in windows:
        s = support(claim, idx)
        if not s.ok:
            continue
        if cue is None:
            return sid, idx, True
        for m in members:
            mi = step_idx[m]
            if cue.search(mi.text) and (len(members) == 1 or support(claim, mi, threshold=CUE_STEP_THRESHOLD).score
                                        >= CUE_STEP_THRESHOLD):
                return sid, idx, True
        if best is None:
            best = (sid, idx, False)
    return best


def _verbatim_in(text: str, items: list[str]) -> bool:
    t = " ".join(text.split())
    return any(t and t in " ".join(i.split()) for i in items)


# ----------------------------------------------------------------------------- the guards


def apply_guards(det: Anchor, answer: dict[str, Any], steps: dict[str, str], *, shown: str = "",
                 objective: str = "") -> GuardResult:
    """Map a parsed answer onto the deterministic anchor ``det``, guarding every item.

    ``steps`` are the step texts *as the LLM saw them* (redacted); ``shown`` is everything else
    it saw (the context), used for the prose checks.
    """
    g = GuardResult(anchor=det)
    res = StepResolver(steps)
    step_idx = {sid: SourceIndex(t) for sid, t in steps.items()}
    win_idx = [(sid, SourceIndex(t), members) for sid, t, members in _windows(steps)]
    corpus = SourceIndex("\n".join([objective, shown, *steps.values()]))

    def reject(section: str, text: str, code: str, detail: str, severity: Severity = Severity.warning):
        g.rejected.append(Rejection(section, text, code, detail))
        g.diagnostics.append(Diagnostic(code=code, severity=severity,
                                        message=f"{section}: rejected an LLM item: {detail}"))

    def field_list(name: str) -> list[Any]:
        v = answer.get(name)
        if v is None:
            return []
        if isinstance(v, list):
            return v
        if isinstance(v, (str, dict)):
            return [v]
        g.diagnostics.append(Diagnostic(code="llm-invalid-schema", severity=Severity.warning,
                                        message=f"{name}: expected a list, got {type(v).__name__}; ignored"))
        return []

    # ---------------------------------------------------------------- facts
    accepted_facts: list[tuple[Fact, list[str]]] = []
    seen_fact_texts: set[str] = set()
    for raw in field_list("facts_learned"):
        if isinstance(raw, str):
            text, ref = raw.strip(), ""
        elif isinstance(raw, dict):
            text = _as_text(raw.get("text", raw.get("fact", "")))
            ref = raw.get("source_step", raw.get("step", ""))
        else:
            reject("facts_learned", str(raw)[:200], "llm-invalid-item", "not an object or a string")
            continue
        if not text:
            continue
        key = " ".join(text.lower().split())
        if key in seen_fact_texts:
            continue
        cited, bad = res.resolve(ref)
        if not cited:
            why = f"cites step {', '.join(bad)!s} which does not exist" if bad else "cites no step"
            reject("facts_learned", text, "llm-unknown-step", why)
            continue
        src = step_idx[cited[0]] if len(cited) == 1 else SourceIndex("\n".join(steps[c] for c in cited))
        s = support(text, src)
        if not s.ok:
            detail = {"numbers": "numbers not in the cited step: ", "specific": "names/identifiers not in the cited step: ",
                      "coverage": "the cited step does not state it (missing: ", "negation": "the cited step says the opposite",
                      "empty": "no content"}[s.reason]
            if s.reason in ("numbers", "specific"):
                detail += ", ".join(s.missing[:5])
            elif s.reason == "coverage":
                detail += ", ".join(s.missing[:5]) + ")"
            reject("facts_learned", text, "llm-unsupported-fact", f"[{', '.join(cited)}] {detail}")
            continue
        seen_fact_texts.add(key)
        accepted_facts.append((Fact(id=_hid("llm-f", cited[0], text), text=text, source_step=cited[0]), cited))

    cited_steps = {c for _, cs in accepted_facts for c in cs}
    final_facts: list[tuple[int, int, Fact]] = []
    for pos, (f, _) in enumerate(accepted_facts):
        final_facts.append((res.index(f.source_step), 1000 + pos, f))
    llm_texts = {f.text for f, _ in accepted_facts}
    matched_llm: set[str] = set()
    restored_facts: list[Fact] = []
    for pos, df in enumerate(det.facts_learned):
        if df.text in llm_texts:
            matched_llm.add(df.text)
            continue  # kept as is
        counterpart = None
        for lf, cs in accepted_facts:
            if df.source_step in cs and overlap(df.text, lf.text) >= REWORD_OVERLAP:
                counterpart = lf
                break
        if counterpart is not None:
            matched_llm.add(counterpart.text)
            g.reworded.append(ItemChange("facts_learned", df.id, counterpart.text, df.source_step,
                                         f"was: {df.text}"))
        elif df.source_step and df.source_step in cited_steps:
            g.removed.append(ItemChange("facts_learned", df.id, df.text, df.source_step,
                                        "merged into the LLM's facts of the same step"))
        else:
            restored_facts.append(df)
            final_facts.append((res.index(df.source_step), pos, df))
            g.restored.append(ItemChange("facts_learned", df.id, df.text, df.source_step,
                                         "the LLM did not carry this step's facts over; put back"))
    for f, _ in accepted_facts:
        if f.text not in matched_llm:
            g.added.append(ItemChange("facts_learned", f.id, f.text, f.source_step))
    if restored_facts:
        g.diagnostics.append(Diagnostic(code="llm-fact-restored", severity=Severity.info,
                                        message=f"facts_learned: {len(restored_facts)} deterministic fact(s) put back "
                                                "(their steps are not cited by any accepted LLM fact)"))
        n = len(steps)
        if n >= 4 and accepted_facts:
            half = n // 2
            early_restored = [f for f in restored_facts if res.index(f.source_step) < half]
            llm_early = [f for f, cs in accepted_facts if any(res.index(c) < half for c in cs)]
            if early_restored and not llm_early:
                g.diagnostics.append(Diagnostic(
                    code="llm-recency-bias", severity=Severity.warning,
                    message=f"facts_learned: the LLM cited only the second half of the trajectory; "
                            f"{len(early_restored)} earlier fact(s) put back"))
    final_facts.sort(key=lambda t: (t[0], t[1]))
    facts = [f for _, _, f in final_facts]

    # ---------------------------------------------------------------- decisions
    det_decisions = list(det.decisions_made)
    accepted_dec: list[Decision] = []
    det_matched: set[str] = set()
    for raw in field_list("decisions_made"):
        if isinstance(raw, str):
            dtext, reason = raw.strip(), ""
        elif isinstance(raw, dict):
            dtext = _as_text(raw.get("decision", raw.get("text", "")))
            reason = _as_text(raw.get("reason", raw.get("why", "")))
        else:
            reject("decisions_made", str(raw)[:200], "llm-invalid-item", "not an object or a string")
            continue
        if not dtext:
            continue
        match = None
        for dd in det_decisions:
            if dd.id in det_matched:
                continue
            if overlap(dtext, dd.decision) >= REWORD_OVERLAP or support(dtext, dd.decision + "\n" + dd.reason).ok:
                match = dd
                break
        if reason and not support(reason, corpus, threshold=0.0).ok:
            g.diagnostics.append(Diagnostic(code="llm-unsupported-reason", severity=Severity.info,
                                            message="decisions_made: a reason with numbers or names the trajectory "
                                                    "does not contain was dropped"))
            reason = match.reason if match is not None else ""
        if match is not None:
            det_matched.add(match.id)
            nd = Decision(id=match.id if dtext == match.decision else _hid("llm-d", match.source_step, dtext),
                          decision=dtext, reason=reason or match.reason, source_step=match.source_step,
                          status=match.status)
            accepted_dec.append(nd)
            if dtext != match.decision or nd.reason != match.reason:
                g.reworded.append(ItemChange("decisions_made", match.id, dtext, match.source_step,
                                             f"was: {match.decision}"))
            continue
        found = _best_window(dtext, win_idx, step_idx, DECISION_CUES)
        if found is None:
            reject("decisions_made", dtext, "llm-laundered-decision", "no step states this decision")
            continue
        sid, _, has_cue = found
        if not has_cue:
            reject("decisions_made", dtext, "llm-laundered-decision",
                   f"[{sid}] mentions it but states no decision")
            continue
        nd = Decision(id=_hid("llm-d", sid, dtext), decision=dtext, reason=reason, source_step=sid)
        accepted_dec.append(nd)
        g.added.append(ItemChange("decisions_made", nd.id, dtext, sid))
    decisions = list(accepted_dec)
    for dd in det_decisions:
        if dd.id not in det_matched:
            decisions.append(dd)
            g.restored.append(ItemChange("decisions_made", dd.id, dd.decision, dd.source_step,
                                         "not carried over by the LLM; put back"))

    # ---------------------------------------------------------------- dead ends (protected)
    det_dead = list(det.dead_ends)
    det_dead_text = {d.id: (d.approach + "\n" + d.why + "\n" + d.evidence).strip() for d in det_dead}
    answer_dead_texts: list[str] = []
    new_dead: list[ExcludedApproach] = []
    reworded_dead: set[str] = set()
    for raw in field_list("dead_ends") + field_list("excluded_approaches"):
        if isinstance(raw, str):
            text = raw.strip()
        elif isinstance(raw, dict):
            text = " — ".join(x for x in (_as_text(raw.get("approach", raw.get("text", ""))),
                                          _as_text(raw.get("why", raw.get("reason", "")))) if x)
        else:
            reject("dead_ends", str(raw)[:200], "llm-invalid-item", "not an object or a string")
            continue
        if not text:
            continue
        answer_dead_texts.append(text)
        match = None
        for dd in det_dead:
            if _verbatim_in(dd.approach, [text]) or overlap(text, det_dead_text[dd.id]) >= DEAD_END_OVERLAP \
                    or support(text, det_dead_text[dd.id]).ok:
                match = dd
                break
        if match is not None:
            if not _verbatim_in(match.approach, [text]):
                reworded_dead.add(match.id)
            continue
        found = _best_window(text, win_idx, step_idx, CONCLUSION_CUES)
        if found is None:
            reject("dead_ends", text, "llm-unsupported-dead-end", "no step shows this approach failing")
            continue
        sid, idx, concluded = found
        if not concluded:
            transient = " (the failure looks transient)" if TRANSIENT.search(idx.text) else ""
            reject("dead_ends", text, "llm-stale-dead-end",
                   f"[{sid}] shows a failure but never concludes the approach is wrong{transient}")
            continue
        ea = ExcludedApproach(id=_hid("llm-x", sid, text), approach=text, source_step=sid)
        if all(ea.approach != n.approach for n in new_dead):
            new_dead.append(ea)
            g.added.append(ItemChange("dead_ends", ea.id, text, sid))
    dead_ends = det_dead + new_dead

    # ---------------------------------------------------------------- protected verbatim check
    def protected_check(section: str, det_items: list[tuple[str, str, str]], answer_items: list[str] | None):
        """det_items: (id, verbatim text, source step). answer_items None = section not in the answer."""
        if answer_items is None:
            return
        for iid, text, sstep in det_items:
            if _verbatim_in(text, answer_items):
                continue
            reworded = any(overlap(text, a) >= REWORD_OVERLAP for a in answer_items)
            detail = ("reworded by the LLM; the verbatim original is kept" if reworded
                      else "dropped by the LLM; put back verbatim")
            g.restored.append(ItemChange(section, iid, text, sstep, detail))
            g.diagnostics.append(Diagnostic(code="llm-protected-restored",
                                            severity=Severity.info if reworded else Severity.warning,
                                            message=f"{section}: a protected item was {detail.split(';')[0]}; "
                                                    "the verbatim original is kept"))

    def texts_of(name: str) -> list[str] | None:
        if name not in answer:
            return None
        out = []
        for raw in field_list(name):
            if isinstance(raw, str):
                out.append(raw)
            elif isinstance(raw, dict):
                out.append(" ".join(_as_text(v) for v in raw.values() if _as_text(v)))
        return out

    protected_check("key_evidence", [(e.id, e.text, e.source_step) for e in det.key_evidence], texts_of("key_evidence"))
    protected_check("user_constraints", [(c.id, c.text, c.source_step) for c in det.user_constraints],
                    texts_of("user_constraints"))
    if "dead_ends" in answer or "excluded_approaches" in answer:
        for dd in det_dead:
            if _verbatim_in(dd.approach, answer_dead_texts):
                continue
            detail = ("reworded by the LLM; the verbatim original is kept" if dd.id in reworded_dead
                      else "dropped by the LLM; put back verbatim")
            g.restored.append(ItemChange("dead_ends", dd.id, dd.approach, dd.source_step, detail))
        dropped = [r for r in g.restored if r.section == "dead_ends" and r.detail.startswith("dropped")]
        if dropped:
            g.diagnostics.append(Diagnostic(code="llm-protected-restored", severity=Severity.warning,
                                            message=f"dead_ends: {len(dropped)} excluded approach(es) dropped by "
                                                    "the LLM; put back verbatim"))

    # ---------------------------------------------------------------- prose
    objective_state = det.objective_state
    if "objective_state" in answer:
        text = _as_text(answer.get("objective_state"))
        if text:
            s = support(text, corpus, threshold=0.0)
            if s.ok or s.reason == "negation":
                if text != det.objective_state:
                    objective_state = text
                    g.reworded.append(ItemChange("objective_state", "objective_state", text, "",
                                                 f"was: {det.objective_state}" if det.objective_state else "was empty"))
            else:
                reject("objective_state", text, "llm-unsupported-claim",
                       f"mentions {', '.join(s.missing[:5])}, which the trajectory does not contain")

    next_hint = det.next_action_hint
    if "next_action_hint" in answer:
        text = _as_text(answer.get("next_action_hint"))
        if text:
            s = support(text, corpus, threshold=0.0)
            if OVERCONFIDENT.search(text):
                reject("next_action_hint", text, "llm-overconfident-hint",
                       "worded as an order; the hint is a non-binding suggestion")
            elif not (s.ok or s.reason == "negation"):
                reject("next_action_hint", text, "llm-unsupported-claim",
                       f"mentions {', '.join(s.missing[:5])}, which the trajectory does not contain")
            elif text != det.next_action_hint:
                next_hint = text
                g.reworded.append(ItemChange("next_action_hint", "next_action_hint", text, "",
                                             f"was: {det.next_action_hint}" if det.next_action_hint else "was empty"))

    questions: list[OpenQuestion] = []
    q_texts: list[str] = []
    for raw in field_list("open_questions"):
        text = _as_text(raw) if not isinstance(raw, dict) else _as_text(raw.get("text", raw.get("question", "")))
        if not text or text in q_texts:
            continue
        s = support(text, corpus, threshold=0.0)
        if not (s.ok or s.reason == "negation"):
            reject("open_questions", text, "llm-unsupported-claim",
                   f"mentions {', '.join(s.missing[:5])}, which the trajectory does not contain")
            continue
        q_texts.append(text)
    det_q_match: set[str] = set()
    for text in q_texts:
        match = next((q for q in det.open_questions if q.id not in det_q_match and
                      (q.text == text or overlap(q.text, text) >= REWORD_OVERLAP)), None)
        if match is not None:
            det_q_match.add(match.id)
            questions.append(OpenQuestion(id=match.id if match.text == text else _hid("llm-q", text), text=text,
                                          source_step=match.source_step, status=match.status))
            if match.text != text:
                g.reworded.append(ItemChange("open_questions", match.id, text, match.source_step, f"was: {match.text}"))
        else:
            q = OpenQuestion(id=_hid("llm-q", text), text=text)
            questions.append(q)
            g.added.append(ItemChange("open_questions", q.id, text))
    for q in det.open_questions:
        if q.id not in det_q_match:
            questions.append(q)
            if q.status == "open" and "open_questions" in answer:
                g.restored.append(ItemChange("open_questions", q.id, q.text, q.source_step,
                                             "not carried over by the LLM; put back"))

    g.anchor = det.model_copy(update={
        "objective_state": objective_state,
        "facts_learned": facts,
        "decisions_made": decisions,
        "open_questions": questions,
        "dead_ends": dead_ends,
        "next_action_hint": next_hint,
    })
    # the copy must still validate as an Anchor (model_copy does not re-validate)
    g.anchor = Anchor.model_validate(g.anchor.model_dump())
    return g
