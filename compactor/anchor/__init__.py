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
- :func:`to_json` / :func:`to_seed_json` / :func:`to_markdown` — renderings of the one model:
  the canonical JSON, seed 000's record (exactly its six fields), Markdown in English or in seed
  001's Chinese layout; each shows every item once;
- :func:`bound_anchor` — the default size bound (1,500 tokens), filled by priority (:data:`PRIORITY`);
- :func:`continuation_check` — ask the anchor the continuation questions, back-fill the answers it
  lacks from the trajectory.

Fitting the anchor into a token budget (Level 3) lives in :mod:`compactor.budget`.
"""

from __future__ import annotations

from .bound import DEFAULT_MAX_TOKENS, bound_anchor
from .build import EVIDENCE_FAMILIES, build_anchor, merge
from .continuation import QUESTIONS, continuation_check
from .render import SEED_FIELDS, to_json, to_markdown, to_seed_json
from .runmodel import build_run
from .sections import PRIORITY

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "EVIDENCE_FAMILIES",
    "PRIORITY",
    "QUESTIONS",
    "SEED_FIELDS",
    "bound_anchor",
    "build_run",
    "build_anchor",
    "continuation_check",
    "merge",
    "to_json",
    "to_markdown",
    "to_seed_json",
]
