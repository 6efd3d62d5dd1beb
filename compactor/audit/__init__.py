"""The self-check (seed 001, mechanised): could a new agent resume from the output, is every
failed approach listed, is every protected span present verbatim. Runs on the pipeline state;
never imports the pipeline back."""

from __future__ import annotations

from .selfcheck import apply_to_anchor, backfill_markdown, check_state, protected_spans, run_selfcheck

__all__ = ["apply_to_anchor", "backfill_markdown", "check_state", "protected_spans", "run_selfcheck"]
