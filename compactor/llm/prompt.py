"""The seed-000 prompt (objective, trajectory, budget → one JSON memory record), chunking for
long inputs, and the helpers that build what the LLM sees from the deterministic result.

The LLM never sees the raw history: it sees the deterministic Level 1 output plus the
deterministic anchor (the ``context``), redacted (see :mod:`compactor.llm.refine`).
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from ..models import Anchor

__all__ = [
    "CHUNK_TOKENS",
    "anchor_seed_json",
    "anchor_view",
    "build_context",
    "context_budget",
    "digest_steps",
    "llm_context",
    "build_merge_prompt",
    "build_prompt",
    "render_steps",
    "split_context",
    "steps_from_segments",
]

CHUNK_TOKENS = 30_000  # inputs over this are chunked, then the summaries are summarised
SEED_FIELDS = ("objective_state", "facts_learned", "decisions_made", "open_questions", "dead_ends", "next_action_hint")
EVIDENCE_LINE_CHARS = 200

_HEAD = """You compress an agent's trajectory into a structured memory record.
Goal: keep enough information that the agent can resume working toward
its objective without re-reading the full trajectory."""

_RULES = """Rules:
1. Preserve concrete facts learned from observations (numbers, names,
   dates, citations). These are why the trajectory existed.
2. Preserve decisions made — and WHY — so the agent does not re-litigate
   them.
3. Preserve unresolved questions and dead ends. The agent should not
   re-walk paths it already ruled out.
4. Drop verbatim tool outputs, formatting noise, and redundant
   restatements.
5. Aim for the token budget; going slightly over is acceptable to
   preserve a critical fact, going far over defeats the purpose.
6. Every facts_learned item must cite in source_step the id of the step
   whose text states it (the ids in square brackets, e.g. "s3"). Facts
   that no step states are discarded. Keep facts from the whole
   trajectory, not only the last steps.
7. Only list decisions the trajectory states; do not infer decisions
   that were never made.
8. Only list dead ends the trajectory explicitly concluded were wrong,
   not paths that failed once because of a transient error (timeout,
   network, rate limit).
9. The deterministic memory's key evidence, user constraints and
   excluded approaches are kept verbatim by the caller; do not reword
   or contradict them.
10. Text like [REDACTED:type#n] stands for a removed secret: keep it as
   is and never guess what it was.
11. next_action_hint is a suggestion, not an order."""

_SCHEMA = """Return ONLY this JSON object:
{
  "objective_state": "<one short paragraph: where we are relative to the objective>",
  "facts_learned": [
    {"text": "<concrete fact>", "source_step": "<step id or short reference, or empty if not traceable>"}
  ],
  "decisions_made": [
    {"decision": "<what was decided>", "reason": "<one short phrase>"}
  ],
  "open_questions": ["<one per question still blocking progress>"],
  "dead_ends": ["<short description: what was tried and why it didn't work>"],
  "next_action_hint": "<one sentence suggesting the next reasonable action; not binding on the agent>"
}"""


def build_prompt(objective: str, trajectory: str, budget: int, *, part: tuple[int, int] | None = None,
                 previous_tokens: int | None = None) -> str:
    """The seed-000 prompt. ``part=(i, n)`` marks a chunk; ``previous_tokens`` makes it the
    one tighter re-ask after a bloated answer."""
    title = "Trajectory so far:"
    if part is not None:
        title = f"Trajectory so far (part {part[0]} of {part[1]}; summarise only this part):"
    budget_block = f"Approximate token budget for the produced summary:\n{budget}"
    if previous_tokens is not None:
        budget_block += (f"\nHARD LIMIT: your previous answer was about {previous_tokens} tokens, far over "
                         f"the budget. Answer in at most {budget} tokens: keep only the facts, decisions "
                         "and dead ends that matter most, one short line each.")
    return "\n\n".join([
        _HEAD,
        f"Current objective:\n{objective.strip() or '(not stated)'}",
        f"{title}\n{trajectory}",
        budget_block,
        _RULES,
        _SCHEMA,
    ]) + "\n"


def build_merge_prompt(objective: str, summaries: list[str], budget: int, *,
                       previous_tokens: int | None = None) -> str:
    """Summary of summaries: the chunk answers (JSON) are the trajectory."""
    parts = [f"[part {i} of {len(summaries)}]\n{s}" for i, s in enumerate(summaries, 1)]
    trajectory = ("The trajectory was too long to read at once. These are memory records of its "
                  "consecutive parts, in order; merge them into one record (later parts may "
                  "supersede earlier ones; keep every step id as cited):\n\n" + "\n\n".join(parts))
    return build_prompt(objective, trajectory, budget, previous_tokens=previous_tokens)


def split_context(text: str, counter, max_tokens: int) -> list[str]:
    """Split at line boundaries into pieces of at most ``max_tokens`` (a single longer line is
    cut by characters). Deterministic."""
    if counter.count(text) <= max_tokens:
        return [text]
    lines = text.split("\n")
    chunks: list[str] = []
    cur: list[str] = []
    cur_tokens = 0
    char_cap = max(64, max_tokens * 3)
    for line in lines:
        pieces = [line] if len(line) <= char_cap else [line[i:i + char_cap] for i in range(0, len(line), char_cap)]
        for piece in pieces:
            n = counter.count(piece) + 1
            if cur and cur_tokens + n > max_tokens:
                chunks.append("\n".join(cur))
                cur, cur_tokens = [], 0
            cur.append(piece)
            cur_tokens += n
    if cur:
        chunks.append("\n".join(cur))
    return chunks


def render_steps(steps: dict[str, str]) -> str:
    """``[s1] text`` blocks, in the dict's order: a trajectory the LLM can cite by step id."""
    return "\n\n".join(f"[{sid}] {text.strip()}" for sid, text in steps.items())


def anchor_seed_json(anchor: Anchor) -> dict[str, Any]:
    """The anchor as seed-000 JSON plus the protected sections. Uses ``compactor.anchor``'s
    ``to_seed_json`` when that module provides it."""
    try:
        from ..anchor import to_json, to_seed_json  # type: ignore[attr-defined]
    except ImportError:
        to_seed_json = to_json = None
    if to_seed_json is not None and to_json is not None:
        try:
            seed = to_seed_json(anchor)
            full = to_json(anchor)
            full.pop("excluded_approaches", None)  # seed 000's dead_ends are the excluded approaches
            return {**seed, **full}
        except Exception:
            pass
    out: dict[str, Any] = {
        "objective_state": anchor.objective_state,
        "facts_learned": [{"text": f.text, "source_step": f.source_step} for f in anchor.facts_learned],
        "decisions_made": [{"decision": d.decision, "reason": d.reason} for d in anchor.decisions_made
                           if d.status == "active"],
        "open_questions": [q.text for q in anchor.open_questions if q.status == "open"],
        "dead_ends": [d.approach + (f" — {d.why}" if d.why else "") for d in anchor.dead_ends
                      if d.status == "excluded"],
        "next_action_hint": anchor.next_action_hint,
    }
    if anchor.key_evidence:
        out["key_evidence"] = [e.text for e in anchor.key_evidence]
    if anchor.user_constraints:
        out["user_constraints"] = [c.text for c in anchor.user_constraints if c.status == "active"]
    return out


def build_context(anchor: Anchor | None, trajectory_text: str) -> str:
    """What the LLM sees: the deterministic (Level 1) trajectory text, then the deterministic
    anchor as JSON."""
    parts = [trajectory_text.rstrip()]
    if anchor is not None and not anchor.is_empty():
        parts.append("Deterministic memory built from it (JSON):\n"
                     + json.dumps(anchor_seed_json(anchor), ensure_ascii=False, indent=1))
    return "\n\n".join(p for p in parts if p)


def steps_from_segments(segments: Iterable[Any], texts: dict[str, str] | None = None) -> dict[str, str]:
    """Group segments by ``step_id`` (in order) into one text per step: the guards check every
    cited fact against these. ``texts`` overrides a segment's text (e.g. Level 1 output)."""
    steps: dict[str, list[str]] = {}
    for seg in segments:
        sid = getattr(seg, "step_id", None) or f"s{getattr(seg, 'step', 0)}"
        text = (texts or {}).get(seg.id, seg.text)
        role = getattr(getattr(seg, "role", None), "value", "") or ""
        kind = getattr(getattr(seg, "kind", None), "value", "") or ""
        label = role if kind == "message" else kind
        cmd = getattr(seg, "command", None)
        if kind == "tool_call" and cmd and not text.strip():
            text = cmd
        steps.setdefault(sid, []).append(f"{label}: {text}" if label else text)
    return {sid: "\n".join(parts) for sid, parts in steps.items()}


# ----------------------------------------------------------------------------- the bounded LLM view


def context_budget(budget: int) -> int:
    """Default size of what the LLM sees (steps + anchor view): 6x the answer budget, at least
    1,500 tokens. The guards check every answer against the full step texts locally, so a smaller
    view can only make the LLM add less, never make it wrong."""
    return max(1500, 6 * int(budget))


VIEW_SHARE = 0.4  # at most this part of the context goes to the anchor view


def anchor_view(anchor: Anchor, counter=None, max_tokens: int | None = None, *,
                steps_shown_whole: bool = False) -> dict[str, Any]:
    """The deterministic anchor as the LLM needs it: the seed-000 fields, the user constraints
    (verbatim), the changes made, and the first line of each key evidence (the caller keeps the
    full evidence verbatim; the LLM only needs to know it exists)."""
    seed = anchor_seed_json(anchor)
    out: dict[str, Any] = {k: seed[k] for k in SEED_FIELDS if k in seed}
    constraints = [c.text for c in anchor.user_constraints if c.status == "active"]
    if constraints and not steps_shown_whole:
        out["user_constraints"] = constraints
    changes = [c.description for c in anchor.changes_made]
    if changes:
        out["changes_made"] = changes
    evidence = []
    for e in anchor.key_evidence:
        first = next((ln.strip() for ln in e.text.splitlines() if ln.strip()), "")
        if len(first) > EVIDENCE_LINE_CHARS:
            first = first[:EVIDENCE_LINE_CHARS] + "…"
        if first:
            evidence.append(f"[{e.source_step}] {first}" if e.source_step else first)
    if evidence and not steps_shown_whole:
        out["key_evidence_first_lines"] = list(dict.fromkeys(evidence))
    if steps_shown_whole and (constraints or evidence):
        out["note"] = "key evidence and user constraints appear verbatim in the steps above; the caller keeps them"
    if counter is not None and max_tokens is not None:
        out = _fit_view(out, counter, max_tokens)
    return out


_VIEW_TRIM_ORDER = ("key_evidence_first_lines", "changes_made", "user_constraints", "facts_learned",
                    "decisions_made", "open_questions", "dead_ends")


def _fit_view(view: dict[str, Any], counter, max_tokens: int) -> dict[str, Any]:
    """Shorten the longest lists (oldest items first go last) until the view fits; a note says
    how many items were left out (the caller keeps them all)."""
    def size(v):
        return counter.count(json.dumps(v, ensure_ascii=False))

    view = dict(view)
    for key in _VIEW_TRIM_ORDER:
        if size(view) <= max_tokens:
            break
        items = view.get(key)
        if not isinstance(items, list) or len(items) <= 2:
            continue
        total = len(items)
        keep = total
        while keep > 2 and size({**view, key: items[:keep]}) > max_tokens:
            keep = max(2, keep * 2 // 3)
        if keep < total:
            view[key] = items[:keep] + [f"(+{total - keep} more, kept by the caller)"]
    return view


def _clip(text: str, counter, max_tokens: int) -> str:
    """Head and tail lines of ``text`` within ``max_tokens`` (a marker says what was left out)."""
    if counter.count(text) <= max_tokens:
        return text
    lines = text.split("\n")
    head: list[str] = []
    tail: list[str] = []
    used = 12  # the marker
    i, j = 0, len(lines) - 1
    take_head = True
    while i <= j:
        line = lines[i] if take_head else lines[j]
        if len(line) > 400:
            line = line[:400] + "…"
        n = counter.count(line) + 1
        if used + n > max_tokens:
            if take_head and i == 0 and not head:  # at least part of the first line
                room = max(4, max_tokens - used)
                part = line[: 4 * room]
                while len(part) > 16 and counter.count(part) > room:
                    part = part[: len(part) * 2 // 3]
                head.append(part + "…")
                i += 1
            break
        used += n
        if take_head:
            head.append(line)
            i += 1
        else:
            tail.append(line)
            j -= 1
        take_head = not take_head if tail or len(head) >= 2 else take_head
    omitted = j - i + 1
    if omitted <= 0:
        return "\n".join(head + tail[::-1])
    return "\n".join(head + [f"… [{omitted} lines not shown] …"] + tail[::-1])


def digest_steps(steps: dict[str, str], counter, max_tokens: int) -> dict[str, str]:
    """Every step, in order, within ``max_tokens`` in total: short steps are kept whole, long ones
    are clipped to an equal share (head and tail lines). Every step stays visible, so the LLM
    is not pushed toward the last steps (recency bias)."""
    sizes = {sid: counter.count(t) for sid, t in steps.items()}
    if sum(sizes.values()) <= max_tokens:
        return dict(steps)
    cap: dict[str, int] = {}
    left = max_tokens
    pending = sorted(steps, key=lambda s: (sizes[s], list(steps).index(s)))
    while pending:
        share = max(24, left // len(pending))
        sid = pending[0]
        if sizes[sid] <= share:
            cap[sid] = sizes[sid]
            left -= sizes[sid]
            pending.pop(0)
        else:
            for sid in pending:
                cap[sid] = share
            break
    return {sid: (t if sizes[sid] <= cap[sid] else _clip(t, counter, cap[sid])) for sid, t in steps.items()}


def llm_context(anchor: Anchor | None, steps: dict[str, str], counter, *, max_tokens: int) -> str:
    """What the LLM sees, within about ``max_tokens``: the deterministic anchor's view
    (:func:`anchor_view`, at most 40%), then every (Level 1) step as ``[sid] text`` in the rest."""
    view_text = ""
    head = "Deterministic memory built from it (JSON):\n"
    if anchor is not None and not anchor.is_empty():
        # every step fits whole: evidence and constraints are visible verbatim, do not repeat them
        small = anchor_view(anchor, counter, int(max_tokens * VIEW_SHARE), steps_shown_whole=True)
        small_text = head + json.dumps(small, ensure_ascii=False)
        if sum(counter.count(t) + 4 for t in steps.values()) + counter.count(small_text) <= max_tokens:
            return "\n\n".join(p for p in (render_steps(steps), small_text) if p)
        view = anchor_view(anchor, counter, int(max_tokens * VIEW_SHARE))
        view_text = head + json.dumps(view, ensure_ascii=False)
    left = max(200, max_tokens - counter.count(view_text))
    parts = [render_steps(digest_steps(steps, counter, left)), view_text]
    return "\n\n".join(p for p in parts if p)
