"""Fitting the anchor into a token budget (Level 3 of the anchor itself).

Items are dropped by priority, least important first; the rendered Markdown is what is
counted. Key evidence, user constraints, excluded approaches, the directions the user rejected
and the current request are *critical*: they are never dropped. If the critical items alone do
not fit, going slightly over (up to 1.2x the budget) is allowed and reported; further over
raises :class:`~compactor.errors.BudgetError` naming what could not fit.

Only items that are visible in the rendering are dropped: superseded / resolved / done items cost
nothing to show and are what keeps a settled decision from being re-opened by a later merge.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import BudgetError
from ..models import Anchor, Diagnostic, Severity
from ..tokens import TokenCounter
from ..anchor.render import render_lines, to_markdown

__all__ = ["OVERRUN", "anchor_tokens", "fit_budget", "drop_order"]

OVERRUN = 1.2  # how far over the budget critical items may go

# (category, list attribute, predicate): the drop order, least important first
_TIERS: list[tuple[str, str, Callable[[Any], bool]]] = [
    ("read-only file", "files_touched", lambda f: all(a == "read" for a in f.actions)),
    ("finished request", "intent.history", lambda it: it.kind in ("initial", "request") and it.status == "done"),
    ("change", "changes_made", lambda c: c.status == "applied"),
    ("changed file", "files_touched", lambda f: not f.unfinished and any(a != "read" for a in f.actions)),
    ("change", "changes_made", lambda c: c.status != "applied"),
    ("fact", "facts_learned", lambda f: True),
    ("next step", "next_steps", lambda n: n.status == "pending"),
    ("assumption", "intent.history", lambda it: it.kind == "assumption" and it.status == "active"),
    ("open question", "open_questions", lambda q: q.status == "open"),
    ("unfinished file", "files_touched", lambda f: f.unfinished),
    ("decision", "decisions_made", lambda d: d.status == "active"),
    ("failed attempt", "failed_attempts", lambda a: True),
]
_CRITICAL: list[tuple[str, str, Callable[[Any], bool]]] = [
    ("key evidence", "key_evidence", lambda e: True),
    ("user constraint", "user_constraints", lambda c: c.status == "active"),
    ("excluded approach", "dead_ends", lambda x: x.status == "excluded"),
    ("rejected direction", "intent.history", lambda it: it.kind == "rejected" and it.status == "active"),
]


def anchor_tokens(anchor: Anchor, counter: TokenCounter, *, lang: str = "en") -> int:
    """Tokens of the anchor as it is shown to an agent (its Markdown rendering)."""
    return counter.count(to_markdown(anchor, lang))


def _items(anchor: Anchor, attr: str) -> list[Any]:
    if attr == "intent.history":
        return list(anchor.intent.history)
    return list(getattr(anchor, attr))


def _key(attr: str, item: Any) -> str:
    return f"file:{item.path}" if attr == "files_touched" else item.id


def drop_order(anchor: Anchor) -> list[tuple[str, str, str]]:
    """(category, attribute, key) of every droppable item, in the order they are dropped."""
    out: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for cat, attr, pred in _TIERS:
        for it in _items(anchor, attr):  # oldest first
            k = _key(attr, it)
            if k not in seen and pred(it):
                seen.add(k)
                out.append((cat, attr, k))
    return out


def _without(anchor: Anchor, drop: dict[str, set[str]]) -> Anchor:
    update: dict[str, Any] = {}
    for attr, keys in drop.items():
        if not keys:
            continue
        if attr == "intent.history":
            hist = [it for it in anchor.intent.history if it.id not in keys]
            update["intent"] = anchor.intent.model_copy(update={"history": hist})
        else:
            update[attr] = [it for it in getattr(anchor, attr) if _key(attr, it) not in keys]
    return anchor.model_copy(update=update) if update else anchor


def fit_budget(anchor: Anchor, budget: int, counter: TokenCounter, *,
               lang: str = "en") -> tuple[Anchor, list[Diagnostic]]:
    """Shorten ``anchor`` to ``budget`` tokens by priority. Returns the anchor and diagnostics.

    Raises BudgetError when the critical items alone need more than 1.2x the budget.
    """
    if budget < 1:
        raise BudgetError(f"the budget must be a positive number of tokens, got {budget}")
    total = anchor_tokens(anchor, counter, lang=lang)
    if total <= budget:
        return anchor, []
    cost: dict[str, int] = {}
    for _, key, text in render_lines(anchor, lang):
        if key:
            cost[key] = cost.get(key, 0) + counter.count(text) + 1
    order = [(cat, attr, k) for cat, attr, k in drop_order(anchor) if cost.get(k, 0) > 0]
    drop: dict[str, set[str]] = {}
    dropped: dict[str, int] = {}
    i = 0
    current = anchor
    while total > budget and i < len(order):
        deficit = total - budget
        freed = 0
        while i < len(order) and freed < deficit:
            cat, attr, k = order[i]
            i += 1
            drop.setdefault(attr, set()).add(k)
            dropped[cat] = dropped.get(cat, 0) + 1
            freed += cost[k]
        current = _without(anchor, drop)
        total = anchor_tokens(current, counter, lang=lang)
    diags: list[Diagnostic] = []
    if dropped:
        what = ", ".join(f"{n} {cat}{'s' if n > 1 else ''}" for cat, n in dropped.items())
        diags.append(Diagnostic(code="anchor-trimmed", severity=Severity.info,
                                message=f"anchor shortened to fit {budget} tokens: dropped {what}"))
    if total <= budget:
        return current, diags
    limit = int(budget * OVERRUN)
    if total <= limit:
        diags.append(Diagnostic(
            code="anchor-over-budget", severity=Severity.warning,
            message=(f"the anchor needs {total} tokens, {total - budget} over the budget of {budget}: kept to "
                     f"preserve critical items (key evidence, constraints, excluded approaches); allowed up to "
                     f"{OVERRUN}x = {limit}")))
        return current, diags
    raise BudgetError(_explain(current, counter, lang, total, budget, limit))


def _explain(anchor: Anchor, counter: TokenCounter, lang: str, total: int, budget: int, limit: int) -> str:
    rows = render_lines(anchor, lang)
    cost: dict[str, int] = {}
    for _, key, text in rows:
        if key:
            cost[key] = cost.get(key, 0) + counter.count(text) + 1
    crit: list[tuple[int, str]] = []
    for cat, attr, pred in _CRITICAL:
        for it in _items(anchor, attr):
            if pred(it):
                k = _key(attr, it)
                crit.append((cost.get(k, 0), f"{cat} {k} ({getattr(it, 'source_step', '') or '?'}, {cost.get(k, 0)} tokens)"))
    crit.sort(key=lambda t: (-t[0], t[1]))
    named = "; ".join(t[1] for t in crit[:8])
    more = f"; and {len(crit) - 8} more" if len(crit) > 8 else ""
    return (f"the anchor's critical items need {total} tokens, more than {OVERRUN}x the budget of {budget} "
            f"({limit}); could not fit: {named}{more}. Raise the budget, or start a new session with this "
            f"anchor as the handoff")
