"""compactor: deterministic context compaction for agent trajectories and logs.

Keeps every error, trace, ``file:line``, key number, user constraint, decision and failed
approach verbatim; collapses benign tool output into semantic placeholders that expand back;
builds a structured anchor memory; an LLM is optional and guarded.

>>> import compactor
>>> result = compactor.compact("run.traj.json")          # doctest: +SKIP
>>> result.report.tokens_before, result.report.tokens_after  # doctest: +SKIP
"""

from __future__ import annotations

from .version import __version__

from typing import TYPE_CHECKING

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

# Everything else is imported on first use (PEP 562): ``import compactor`` stays cheap, and a
# command that only trims a log never loads the anchor, the LLM or the layout readers.
_LAZY: dict[str, tuple[str, str]] = {
    "CompactorConfig": (".config", "CompactorConfig"),
    "Document": (".formats", "Document"),
    "Edits": (".formats", "Edits"),
    "FORMATS": (".formats", "REGISTRY"),
    "load_document": (".formats", "load_document"),
    "Anchor": (".models", "Anchor"),
    "CompactionResult": (".models", "CompactionResult"),
    "Diagnostic": (".models", "Diagnostic"),
    "Placeholder": (".models", "Placeholder"),
    "Report": (".models", "Report"),
    "Segment": (".models", "Segment"),
    "Span": (".models", "Span"),
    "ToolCall": (".models", "ToolCall"),
    "CallKind": (".models", "CallKind"),
    "Compactor": (".pipeline", "Compactor"),
    "compact": (".pipeline", "compact"),
    "Session": (".session", "Session"),
    "load_rules": (".engine", "load_rules"),
    "get_counter": (".tokens", "get_counter"),
    "build_anchor": (".anchor", "build_anchor"),
    "merge": (".anchor", "merge"),
    "to_markdown": (".anchor", "to_markdown"),
    "to_seed_json": (".anchor", "to_seed_json"),
    "TriggerDecision": (".tools", "TriggerDecision"),
    "should_compact": (".tools", "should_compact"),
    "trim": (".collapse.trim", "trim"),
    "Baseline": (".collapse.trim", "Baseline"),
    "TrimOptions": (".collapse.trim", "TrimOptions"),
    "TrimResult": (".collapse.trim", "TrimResult"),
    "TrimStats": (".collapse.trim", "TrimStats"),
    "github_summary": (".collapse.trim", "github_summary"),
    "default_store_path": (".collapse.store", "default_store_path"),
    "open_store": (".collapse.store", "open_store"),
    "Store": (".collapse.store", "Store"),
    "trim_to": (".collapse.trim", "trim_to"),
    "render": (".emit", "render"),
    "render_to": (".emit", "write"),
    "stream_compact": (".streaming", "stream_compact"),
    "check_rule_dir": (".engine", "check_rule_dir"),
}


def __getattr__(name: str):
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'compactor' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(target[0], __name__), target[1])
    globals()[name] = value  # later look-ups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly
    from .anchor import build_anchor, merge, to_markdown, to_seed_json
    from .collapse.store import Store, default_store_path, open_store
    from .collapse.trim import Baseline, TrimOptions, TrimResult, TrimStats, github_summary, trim, trim_to
    from .emit import render
    from .emit import write as render_to
    from .config import CompactorConfig
    from .engine import check_rule_dir, load_rules
    from .formats import REGISTRY as FORMATS, Document, Edits, load_document
    from .models import Anchor, CallKind, CompactionResult, Diagnostic, Placeholder, Report, Segment, Span, ToolCall
    from .pipeline import Compactor, compact
    from .session import Session
    from .streaming import stream_compact
    from .tokens import get_counter
    from .tools import TriggerDecision, should_compact

__all__ = [
    "Anchor",
    "Baseline",
    "BudgetError",
    "CallKind",
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
    "Session",
    "Span",
    "Store",
    "StoreError",
    "ToolCall",
    "TriggerDecision",
    "TrimOptions",
    "TrimResult",
    "TrimStats",
    "__version__",
    "build_anchor",
    "check_rule_dir",
    "compact",
    "default_store_path",
    "get_counter",
    "github_summary",
    "load_document",
    "load_rules",
    "merge",
    "open_store",
    "render",
    "render_to",
    "should_compact",
    "stream_compact",
    "to_markdown",
    "to_seed_json",
    "trim",
    "trim_to",
    "__version__",
]
