"""The rule engine: rule files (data) run by engines (code)."""

from __future__ import annotations

from typing import TYPE_CHECKING

_LAZY: dict[str, str] = {
    "Classification": ".classify", "Classifier": ".classify", "render_summary": ".classify",
    "ExampleResult": ".examples", "check_rule": ".examples", "check_rules": ".examples", "check_rule_dir": ".examples",
    "RuleSet": ".loader", "builtin_rules_dir": ".loader", "load_rules": ".loader",
    "CompiledRule": ".matchers", "RuleTimeout": ".matchers", "TextView": ".matchers", "compile_rule": ".matchers",
    "resolve_spans": ".matchers", "scan": ".matchers",
    "FAMILIES": ".schema", "Rule": ".schema",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):  # imported on first use: a command pays only for what it runs
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(target, __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from .classify import Classification, Classifier, render_summary
    from .examples import ExampleResult, check_rule, check_rule_dir, check_rules
    from .loader import RuleSet, builtin_rules_dir, load_rules
    from .matchers import CompiledRule, RuleTimeout, TextView, compile_rule, resolve_spans, scan
    from .schema import FAMILIES, Rule
