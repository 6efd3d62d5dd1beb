"""Build refine's inputs: the step texts for the guards, and the bounded context the LLM sees
(Level 1 step texts + the deterministic anchor's view).

The LLM never sees the raw history. Step ids in the context are the original document's, so
every ``source_step`` the LLM cites is checked against the right text: the original step text
plus its Level 1 text (a fact may quote a placeholder summary such as ``234 packages``).

The pipeline's refine stage calls :func:`refine_inputs` with the segments and Level 1 texts it
already holds: nothing is re-read or compacted again. :func:`prepare_refine` does the same for a
conversation outside the pipeline (a path, text, messages), given the :class:`~compactor.Compactor`
that compacted it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..models import Anchor, CompactionResult
from .prompt import context_budget, llm_context, steps_from_segments

__all__ = ["RefineInputs", "prepare_refine", "refine_inputs"]


@dataclass(frozen=True)
class RefineInputs:
    steps: dict[str, str]         # step id -> original text (+ Level 1 text when it differs): for the guards
    level1_steps: dict[str, str]  # step id -> Level 1 text: what the context is built from
    context: str                  # what the LLM sees
    objective: str
    anchor: Anchor


def refine_inputs(segments: Iterable[Any], level1_texts: Mapping[str, str], anchor: Anchor, *, counter,
                  budget: int | None = None, context_tokens: int | None = None,
                  objective: str | None = None) -> RefineInputs:
    """``segments`` as read (original texts); ``level1_texts`` segment id -> its Level 1 text."""
    segments = list(segments)
    raw_steps = steps_from_segments(segments)
    l1_steps = steps_from_segments(segments, dict(level1_texts))
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


def prepare_refine(data: Any, result: CompactionResult | None = None, *, compactor, budget: int | None = None,
                   counter=None, context_tokens: int | None = None, objective: str | None = None) -> RefineInputs:
    """``data`` is what was compacted (a path, text, bytes, messages or a Document), ``result`` its
    compaction (any level) and ``compactor`` the :class:`~compactor.Compactor` to take the Level 1
    texts from (cached per segment: the segments it already compacted cost nothing)."""
    from ..formats import load_document

    raw = load_document(data, format=result.format if result is not None else "auto")
    if counter is None:
        counter = compactor.counter
    level1 = compactor.level1_texts(raw)
    anchor = result.anchor if result is not None else None
    if anchor is None:
        from ..anchor import build_anchor

        spans = result.report.protected if result is not None else compactor.level1_spans(raw)
        anchor = build_anchor(raw.segments, spans)
    return refine_inputs(raw.segments, level1, anchor, counter=counter, budget=budget,
                         context_tokens=context_tokens, objective=objective)
