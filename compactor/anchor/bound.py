"""The anchor's default size bound: at most ``max_tokens`` (1,500 by default) in its written form.

The anchor is filled by priority (:data:`compactor.anchor.sections.PRIORITY`), never cut in the
middle of an item. The status line and the live failure head the rendering and are always kept;
then 1. the evidence of the live failure, 2. constraints (the user's and the harness's binding
rules), 3. changes, 4. failed attempts (unresolved first), 5. next steps, then the rest
(decisions, intent, open questions, excluded approaches, facts, resolved or stale evidence, the
files trail).

Within a section the newest items come first (user constraints keep their order: they all
bind). What does not fit is counted per section in ``Anchor.overflow`` with the items' ids and
source steps, so it stays reachable: the trajectory (or the store of the compaction) holds the
originals at those steps.

Size is measured on the written form that a model is sent: the Markdown rendering
(:func:`~compactor.anchor.render.render_lines`), counted with the configured token counter. This
is separate from Level 3 fitting (``budget``), which shortens the anchor further when a whole
output has to fit a budget.
"""

from __future__ import annotations

from collections.abc import Callable

from ..models import Anchor, Intent, Overflow
from .ledger import FactLedger
from .render import RenderMemo, render_lines, to_markdown
from .sections import PRIORITY as SECTION_PRIORITY

__all__ = ["DEFAULT_MAX_TOKENS", "PRIORITY", "bound_anchor"]

DEFAULT_MAX_TOKENS = 1500
# the sections' order (sections.PRIORITY) as the groups this module fills
_GROUPS = {"live_failure": "live_evidence", "constraints": "user_constraints", "changes": "changes_made",
           "failed_approaches": "failed_attempts", "next_step": "next_steps", "decisions": "decisions_made",
           "intent": "intent", "open_questions": "open_questions", "excluded_approaches": "dead_ends",
           "facts": "facts_learned", "resolved_evidence": "resolved_evidence", "files": "files_touched"}
PRIORITY = tuple(_GROUPS[name] for name in SECTION_PRIORITY if name in _GROUPS)
_LISTS = ("key_evidence", "user_constraints", "failed_attempts", "decisions_made", "changes_made", "next_steps",
          "open_questions", "dead_ends", "facts_learned", "files_touched")


def _candidates(a: Anchor) -> list[tuple[str, str, str]]:
    """(priority group, list field, item key) in fill order."""
    out: list[tuple[str, str, str]] = []
    live = [e for e in a.key_evidence if e.status == "live"]
    resolved = [e for e in a.key_evidence if e.status != "live"]
    failed = [f for f in a.failed_attempts if f.status == "failed"] + \
             [f for f in a.failed_attempts if f.status != "failed"]
    groups: dict[str, list[tuple[str, str]]] = {
        "live_evidence": [("key_evidence", e.id) for e in reversed(live)],
        "user_constraints": [("user_constraints", c.id) for c in a.user_constraints],
        "failed_attempts": [("failed_attempts", f.id) for f in reversed(failed)],
        "decisions_made": [("decisions_made", d.id) for d in reversed(a.decisions_made)],
        "changes_made": [("changes_made", c.id) for c in reversed(a.changes_made)],
        "intent": [("intent", h.id) for h in reversed(a.intent.history)],
        "next_steps": [("next_steps", n.id) for n in a.next_steps],
        "open_questions": [("open_questions", q.id) for q in reversed(a.open_questions)],
        "dead_ends": [("dead_ends", x.id) for x in reversed(a.dead_ends)],
        "facts_learned": [("facts_learned", f.id) for f in reversed(a.facts_learned)],
        "resolved_evidence": [("key_evidence", e.id) for e in reversed(resolved)],
        "files_touched": [("files_touched", f"file:{f.path}") for f in reversed(a.files_touched)
                          if any(x != "read" for x in f.actions)]
                         + [("files_touched", f"file:{f.path}") for f in reversed(a.files_touched)
                            if all(x == "read" for x in f.actions)],
    }
    for g in PRIORITY:
        out.extend((g, field, key) for field, key in groups[g])
    return out


def _key(field: str, item) -> str:
    return f"file:{item.path}" if field == "files_touched" else item.id


def _keep(a: Anchor, keep: set[tuple[str, str]]) -> Anchor:
    upd: dict = {}
    for field in _LISTS:
        items = getattr(a, field)
        upd[field] = [x for x in items if (field, _key(field, x)) in keep]
    hist = [h for h in a.intent.history if ("intent", h.id) in keep]
    upd["intent"] = a.intent.model_copy(update={"history": hist}) if isinstance(a.intent, Intent) else a.intent
    return a.model_copy(update=upd)


def bound_anchor(a: Anchor, max_tokens: int | None = DEFAULT_MAX_TOKENS, count: Callable[[str], int] | None = None,
                 *, lang: str = "en", memo: RenderMemo | None = None, facts: FactLedger | None = None) -> Anchor:
    """The anchor filled by priority up to ``max_tokens`` of its Markdown rendering; what did not
    fit is recorded in ``overflow``. ``None`` or ``0``: no bound. ``memo``: a conversation's
    :class:`~compactor.anchor.render.RenderMemo` (the anchor's sections rendered again only when
    their items changed). ``facts``: the ledger of a fold that held only the facts this bound
    can show (:class:`~compactor.anchor.ledger.FactLedger`, built with the same ``max_tokens``,
    ``count`` and ``lang``): the overflow lists every fact it saw."""
    if not max_tokens:
        return a
    if count is None:
        from ..tokens import get_counter

        count = get_counter().count
    md = to_markdown(a, lang, memo)
    if memo is not None:
        last = memo.counted  # the rendering is often the same as the last turn's: so is its count
        if last is not None and last[0] is count and last[1] == md:
            n = last[2]
        else:
            n = count(md)
            memo.counted = (count, md, n)
    else:
        n = count(md)
    del md  # (only its count is needed: not held beside the rows below, on a large anchor as large)
    if facts is not None:
        facts.check_overflowing(n)
    if n <= max_tokens:
        return a if not a.overflow else a.model_copy(update={"overflow": []})
    rows = render_lines(a, lang)
    cost: dict[str, int] = {}
    for _, iid, text in rows:
        if iid:
            cost[iid] = cost.get(iid, 0) + count(text) + 1
    del rows  # (a row per item: not held beside what follows)
    empty = _keep(a, set())
    used = count(to_markdown(empty, lang))
    keep: set[tuple[str, str]] = set()
    for _, field, key in _candidates(a):
        c = cost.get(key, 0)
        if used + c <= max_tokens:
            keep.add((field, key))
            used += c
    out = _keep(a, keep)
    # the per-item costs are an estimate of the joined text: check the real rendering and drop
    # from the end of the priority order until it fits
    order = [(f, k) for _, f, k in _candidates(a) if (f, k) in keep]
    while order and count(to_markdown(out, lang)) > max_tokens:
        keep.discard(order.pop())
        out = _keep(a, keep)
    overflow: dict[str, list] = {}
    for _, field, key in _candidates(a):
        if (field, key) not in keep:
            overflow.setdefault(field, []).append(key)
    notes = []
    steps_of = _steps(a, overflow)
    for field in (*_LISTS, "intent"):
        if field == "facts_learned" and facts is not None:
            keys, steps = [], set()
            for key, step in facts.ids_newest_first():
                if (field, key) not in keep:
                    keys.append(key)
                    steps.add(step)
            if keys:
                notes.append(Overflow(section=field, count=len(keys), ids=keys,
                                      steps=sorted(steps - {""}, key=_step_key)))
            continue
        keys = overflow.get(field)
        if keys:
            notes.append(Overflow(section=field, count=len(keys), ids=keys,
                                  steps=sorted({steps_of.get((field, k), "") for k in keys} - {""}, key=_step_key)))
    return out.model_copy(update={"overflow": notes})


def _steps(a: Anchor, overflow: dict[str, list]) -> dict[tuple[str, str], str]:
    """The source step of each item in ``overflow`` (field -> keys)."""
    out: dict[tuple[str, str], str] = {}
    for field in _LISTS:
        keys = overflow.get(field)
        if not keys:
            continue
        keys = set(keys)
        for x in getattr(a, field):
            key = _key(field, x)
            if key in keys:
                out[(field, key)] = getattr(x, "source_step", "") or getattr(x, "first_step", "")
    keys = set(overflow.get("intent", ()))
    for h in a.intent.history:
        if h.id in keys:
            out[("intent", h.id)] = h.source_step
    return out


def _step_key(s: str) -> tuple[int, str]:
    digits = "".join(ch for ch in s if ch.isdigit())
    return (int(digits) if digits else 0, s)
