"""Run a rule's own examples: the test suite and ``compactor rules test`` are built on this."""

from __future__ import annotations

from dataclasses import dataclass

from .matchers import RuleTimeout, TextView, compile_rule
from .schema import Rule

__all__ = ["ExampleResult", "check_rule", "check_rules"]

EXAMPLE_BUDGET = 0.5  # seconds of CPU: examples are small, this only catches runaway patterns


@dataclass(frozen=True)
class ExampleResult:
    rule_id: str
    kind: str  # match | no_match | xfail
    index: int
    text: str
    ok: bool
    detail: str = ""

    @property
    def test_id(self) -> str:
        if self.kind == "pump":
            return f"{self.rule_id}:pump"
        return f"{self.rule_id}:{self.kind}[{self.index}]"


def _found(rule: Rule, text: str):
    if rule.stage == "classify":
        from .classify import classify_example

        return classify_example(rule, text)
    cr = compile_rule(rule)
    view = TextView(text)
    return [(a, b, ls, le) for a, b, ls, le, _ in cr.find(view, EXAMPLE_BUDGET)], view


def _covers_whole(spans, view: TextView) -> tuple[bool, str]:
    lines = {i for i, line in enumerate(view.lines) if line.strip()}
    covered = set()
    for _, _, ls, le in spans:
        covered.update(range(ls, le + 1))
    missing = sorted(lines - covered)
    if missing:
        return False, f"lines not covered: {[m + 1 for m in missing[:5]]}"
    return True, ""


def check_rule(rule: Rule) -> list[ExampleResult]:
    results: list[ExampleResult] = []
    for i, text in enumerate(rule.examples.match):
        try:
            found = _found(rule, text)
        except RuleTimeout:
            results.append(ExampleResult(rule.id, "match", i, text, False, "timed out"))
            continue
        if rule.stage == "classify":
            ok, detail = found
            if ok and i < len(rule.examples.expect_summary) and rule.examples.expect_summary[i]:
                want = rule.examples.expect_summary[i]
                ok = detail == want
                detail = f"summary {detail!r} != expected {want!r}" if not ok else detail
            results.append(ExampleResult(rule.id, "match", i, text, ok, "" if ok else str(detail)))
            continue
        spans, view = found
        ok, detail = bool(spans), "" if spans else "no match"
        if ok and rule.kind == "line-block":
            ok, detail = _covers_whole(spans, view)
        if ok and i < len(rule.examples.expect) and rule.examples.expect[i]:
            want = rule.examples.expect[i]
            texts = [view.text[a:b] for a, b, _, _ in spans]
            ok = want in texts
            detail = "" if ok else f"expected span {want!r}, got {texts!r}"
        results.append(ExampleResult(rule.id, "match", i, text, ok, detail))
    for i, text in enumerate(rule.examples.no_match):
        try:
            found = _found(rule, text)
        except RuleTimeout:
            results.append(ExampleResult(rule.id, "no_match", i, text, False, "timed out"))
            continue
        if rule.stage == "classify":
            hit, detail = found
            results.append(ExampleResult(rule.id, "no_match", i, text, not hit, f"classified as {detail!r}" if hit else ""))
            continue
        spans, view = found
        texts = [view.text[a:b] for a, b, _, _ in spans]
        results.append(ExampleResult(rule.id, "no_match", i, text, not spans, f"matched {texts!r}" if spans else ""))
    for i, text in enumerate(rule.examples.xfail):
        try:
            found = _found(rule, text)
            hit = bool(found[0])
        except RuleTimeout:
            hit = False
        # strict xfail: a known gap that starts passing must be promoted to examples.match
        results.append(ExampleResult(rule.id, "xfail", i, text, not hit,
                                     "now matches: move it to examples.match" if hit else ""))
    return results


def check_rules(rules) -> list[ExampleResult]:
    out: list[ExampleResult] = []
    for r in rules:
        out.extend(check_rule(r))
    return out


def check_rule_dir(directory) -> list[ExampleResult]:
    """Test the rules of one directory (without the built-in ones, read afresh, not from the
    catalog): every example of every rule, then a timing check of each rule on adversarial input
    and of the patterns the engine derives from it (``kind == "pump"`` results, failing when one is
    slow per megabyte). Bad rule files raise
    :class:`~compactor.RuleError` listing every problem."""
    from pathlib import Path

    from .loader import load_uncached
    from .pump import pump_derived, pump_rule

    rs = load_uncached((str(Path(directory).resolve()),), False)
    out = check_rules(rs)
    for rule in rs:
        msg = pump_rule(rule) or pump_derived(rule)  # (the patterns the engine derives from it too)
        if msg:
            out.append(ExampleResult(rule.id, "pump", 0, "", False, msg))
    return out
