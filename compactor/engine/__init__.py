"""The rule engine: rule files (data) run by engines (code)."""

from __future__ import annotations

from .classify import Classification, Classifier, render_summary
from .examples import ExampleResult, check_rule, check_rules
from .loader import RuleSet, builtin_rules_dir, load_rules
from .matchers import CompiledRule, RuleTimeout, TextView, compile_rule, resolve_spans, scan
from .schema import FAMILIES, Rule

__all__ = [
    "Classification",
    "Classifier",
    "FAMILIES",
    "CompiledRule",
    "ExampleResult",
    "Rule",
    "RuleSet",
    "RuleTimeout",
    "TextView",
    "builtin_rules_dir",
    "check_rule",
    "check_rules",
    "compile_rule",
    "render_summary",
    "load_rules",
    "resolve_spans",
    "scan",
]
