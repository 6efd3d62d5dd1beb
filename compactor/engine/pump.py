"""ReDoS pump test: run a rule against long adversarial lines built from its own examples and
from known evil shapes, and fail when it is slow per megabyte. Used by the test suite for the
built-in rules and by ``compactor rules test`` for user rule folders."""

from __future__ import annotations

import time

from .matchers import RuleTimeout, TextView, compile_rule
from .schema import Rule

__all__ = ["PUMP_BYTES", "PUMP_LIMIT_S_PER_MB", "adversarial_inputs", "pump_rule"]

PUMP_BYTES = 128 * 1024
PUMP_LIMIT_S_PER_MB = 2.0  # CPU seconds per MiB of adversarial input (the engines' budget, matchers.PER_MB, is the same)
_EVIL = ["a", " ", "\t", "0", "/", "(", "[", "=", ":", "x.", "a ", "ab", "-", "\\", "'", '"', "at ", "#", "%"]


def adversarial_inputs(rule: Rule, size: int = PUMP_BYTES) -> list[tuple[str, str]]:
    """(name, text) pairs: one long line each."""
    seeds = list(rule.prefilter) or [""]
    if rule.literal is not None:
        seeds = list(rule.literal.words[:3])
    out: list[tuple[str, str]] = []
    for ex in (rule.examples.match + rule.examples.no_match)[:6]:
        line = ex.replace("\n", " ")
        if line:
            out.append((f"example-repeated:{line[:20]!r}", (line + " ") * (size // (len(line) + 1) + 1)))
            mid = line[len(line) // 2]
            out.append((f"example-pumped:{line[:20]!r}", line[: len(line) // 2] + mid * size + line[len(line) // 2:]))
    for seed in seeds[:3]:
        for evil in _EVIL:
            out.append((f"evil:{seed!r}+{evil!r}*N", seed + evil * (size // len(evil)) + "!"))
    return [(n, t[: size + 200]) for n, t in out]


def pump_rule(rule: Rule, size: int = PUMP_BYTES, limit_s_per_mb: float = PUMP_LIMIT_S_PER_MB) -> str | None:
    """Return None when the rule is fast on every adversarial input, else what was slow."""
    if rule.stage == "classify":
        return _pump_classify(rule, size, limit_s_per_mb)
    cr = compile_rule(rule).warm()  # time matching, not compiling
    limit = limit_s_per_mb * size / 1_048_576
    for name, text in adversarial_inputs(rule, size):
        view = TextView(text)
        t0 = time.process_time()
        try:
            cr.find(view, budget=limit * 2)
        except RuleTimeout:
            return f"timed out on {name}"
        dt = time.process_time() - t0
        if dt > limit:
            return f"{dt:.2f}s on {len(text)} bytes of {name} (limit {limit:.2f}s)"
    return None


def _pump_classify(rule: Rule, size: int, limit_s_per_mb: float) -> str | None:
    from .classify import Classifier

    c = Classifier([rule])
    limit = limit_s_per_mb * size / 1_048_576
    for name, text in adversarial_inputs(rule, size):
        t0 = time.process_time()
        c.classify(text + "\n" + text[:1000] + "\nend", command=text[:4096])
        dt = time.process_time() - t0
        if dt > limit * 3:  # classify runs several capture patterns over the text
            return f"{dt:.2f}s on {len(text)} bytes of {name}"
    return None
