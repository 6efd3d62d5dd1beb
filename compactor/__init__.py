"""compactor: deterministic context compaction for agent trajectories and logs.

Keeps every error, trace, ``file:line``, key number, user constraint, decision and failed
approach verbatim; collapses benign tool output into semantic placeholders that expand back;
builds a structured anchor memory; an LLM is optional and guarded.

>>> import compactor
>>> result = compactor.compact("run.traj.json")          # doctest: +SKIP
>>> result.report.tokens_before, result.report.tokens_after  # doctest: +SKIP
"""

from __future__ import annotations

__version__ = "0.1.0"

from .config import CompactorConfig
from .errors import (
    BudgetError,
    CompactorError,
    ConfigError,
    InputError,
    LimitError,
    LLMError,
    RuleError,
    StoreError,
)
from .formats import Document, Edits, REGISTRY as FORMATS, load_document
from .models import (
    Anchor,
    CompactionResult,
    Diagnostic,
    Placeholder,
    Report,
    Segment,
    Span,
)
from .pipeline import Compactor, compact
from .collapse.store import default_store_path
from .engine import load_rules
from .tokens import get_counter
from .anchor import build_anchor, merge, to_markdown, to_seed_json
from .tools import TriggerDecision, should_compact

from .collapse.trim import Baseline, TrimOptions, TrimResult, TrimStats, github_summary, trim

__all__ = [
    "Anchor",
    "Baseline",
    "BudgetError",
    "CompactionResult",
    "Compactor",
    "CompactorConfig",
    "CompactorError",
    "ConfigError",
    "Diagnostic",
    "Document",
    "Edits",
    "FORMATS",
    "InputError",
    "LLMError",
    "LimitError",
    "Placeholder",
    "Report",
    "RuleError",
    "Segment",
    "Span",
    "StoreError",
    "TriggerDecision",
    "TrimOptions",
    "TrimResult",
    "TrimStats",
    "build_anchor",
    "compact",
    "default_store_path",
    "get_counter",
    "github_summary",
    "load_document",
    "load_rules",
    "merge",
    "should_compact",
    "to_markdown",
    "to_seed_json",
    "trim",
    "__version__",
]
