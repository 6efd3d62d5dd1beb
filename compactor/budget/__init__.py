"""Level 2 / Level 3: fitting the result into a token budget.

- :mod:`.escalate` (``escalate.escalate``) — after Level 1: fold older turns into the anchor (Level 2), then shorten the
  anchor by priority (Level 3) until the output fits;
- :func:`fit_budget` / :func:`anchor_tokens` — fit the anchor itself into a token budget;
- :func:`fit` — fit a pipeline state into a target below the budget (hysteresis);
- :func:`handoff_document` — the hand-off document produced with the exit signal.
"""

from __future__ import annotations

from .anchor_fit import anchor_tokens, fit_budget
from .escalate import fit
from .handoff import handoff_document

__all__ = ["anchor_tokens", "fit", "fit_budget", "handoff_document"]
