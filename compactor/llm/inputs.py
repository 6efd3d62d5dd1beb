"""Build refine's inputs from a compaction: the step texts for the guards, and the bounded
context the LLM sees (Level 1 step texts + the deterministic anchor's view).

The LLM never sees the raw history. Step ids in the context are the original document's, so
every ``source_step`` the LLM cites is checked against the right text: the original step text
plus its Level 1 text (a fact may quote a placeholder summary such as ``234 packages``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..models import Anchor, CompactionResult
from .prompt import context_budget, llm_context, steps_from_segments

__all__ = ["RefineInputs", "prepare_refine"]


@dataclass(frozen=True)
class RefineInputs:
    steps: dict[str, str]         # step id -> original text (+ Level 1 text when it differs): for the guards
    level1_steps: dict[str, str]  # step id -> Level 1 text: what the context is built from
    context: str                  # what the LLM sees
    objective: str
    anchor: Anchor


def _reread(messages: Any, fmt: str):
    from ..errors import InputError
    from ..pipeline import load_document

    try:
        return load_document(messages, format=fmt)
    except InputError:
        if isinstance(messages, list):  # JSONL layouts come back as a list of records
            text = "\n".join(json.dumps(r, ensure_ascii=False) for r in messages)
            return load_document(text, format=fmt)
        raise


def prepare_refine(data: Any, result: CompactionResult | None = None, *, compactor=None, budget: int | None = None,
                   counter=None, context_tokens: int | None = None, objective: str | None = None) -> RefineInputs:
    """``data`` is what was compacted (a path, text, bytes, messages or a Document); ``result``
    its compaction (any level). Level 1 texts come from ``result`` when it is a Level 0/1 result
    whose segments line up with the original; otherwise from a Level 1 compaction of ``data``."""
    from ..errors import InputError
    from ..pipeline import Compactor, load_document

    fmt = result.format if result is not None else "auto"
    raw = load_document(data, format=fmt)
    if counter is None:
        from ..tokens import get_counter

        counter = get_counter()
    l1doc = None
    if result is not None and result.report.level <= 1:
        try:
            l1doc = _reread(result.messages, result.format)
        except InputError:
            l1doc = None
        if l1doc is not None and [s.id for s in l1doc.segments] != [s.id for s in raw.segments]:
            l1doc = None
    if l1doc is None:
        comp = compactor or Compactor()
        l1 = comp.compact(raw, level=1)
        l1doc = _reread(l1.messages, l1.format)
        if [s.id for s in l1doc.segments] != [s.id for s in raw.segments]:
            l1doc = raw  # cannot line up: show the original texts (still bounded below)
        if result is None:
            result = l1
    anchor = result.anchor if result is not None else None
    if anchor is None:
        try:
            from ..anchor import build_anchor

            anchor = build_anchor(raw.segments, result.report.protected if result is not None else ())
        except ImportError:
            anchor = Anchor()
    raw_steps = steps_from_segments(raw.segments)
    l1_steps = steps_from_segments(l1doc.segments)
    steps = {}
    for sid, text in raw_steps.items():
        l1t = l1_steps.get(sid, "")
        steps[sid] = text if not l1t or l1t == text else f"{text}\n{l1t}"
    if budget is None:
        from .refine import default_budget

        budget = default_budget(anchor, counter)
    context = llm_context(anchor, l1_steps, counter, max_tokens=context_tokens or context_budget(budget))
    objective = objective or anchor.intent.current or anchor.objective_state or ""
    return RefineInputs(steps=steps, level1_steps=l1_steps, context=context, objective=objective, anchor=anchor)
