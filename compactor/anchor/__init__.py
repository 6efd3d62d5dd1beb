"""Level 2: the anchor — the agent's working memory, extracted by rules (no LLM).

The anchor answers seed 001's five questions (intent, changes made, decisions taken, excluded
approaches, next steps) and holds seed 000's memory record (objective state, facts learned with
their source step, decisions with reasons, open questions, dead ends, a non-binding next-action
hint), plus key evidence (verbatim protected spans), user constraints (verbatim) and the trail of
files read / created / modified / deleted.

Public API:

- :func:`build_anchor` — the anchor of a whole trajectory;
- :func:`merge` — evolve an existing anchor with the segments that came after it (merging step
  by step gives the same anchor as building at once);
- :func:`to_seed_json` / :func:`to_markdown` — seed-000 JSON, Markdown in English or in seed
  001's Chinese layout.

Fitting the anchor into a token budget lives in :mod:`compactor.budget`.
"""

from __future__ import annotations

from .build import EVIDENCE_FAMILIES, build_anchor, merge
from .render import SEED_FIELDS, to_markdown, to_seed_json

__all__ = [
    "EVIDENCE_FAMILIES",
    "SEED_FIELDS",
    "build_anchor",
    "merge",
    "to_markdown",
    "to_seed_json",
]
