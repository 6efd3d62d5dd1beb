"""ReDoS pump test: run a rule against long adversarial lines built from its own examples and
from known evil shapes, and fail when it is slow per megabyte. Used by the test suite for the
built-in rules and by ``compactor rules test`` for user rule folders.

``pump_derived`` does the same for the patterns the engine derives from a rule and runs with a
backtracking matcher: its UTF-8 approximation (``approx.approximate_utf8``, searched with the
standard library's ``re``, which has no time limit), the branches its pattern is split into
(``branches.split_any``) and its gate's parts. Each is searched alone on the adversarial lines, cut
to the length at which the engine searches it without a time limit (``SHORT_LINE``), and, for those
the engine also searches on longer lines, on the whole line with the time limit. The approximations
hyperscan scans (``approx.approximate``, the classifier's prefilter) need no pump: hyperscan runs an
automaton, one step per byte."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager

from .matchers import WIDE_CHECK_MAX, RegexRule, RuleTimeout, TextView, _branch_table, _compile, _flags, compile_rule
from .schema import Rule

__all__ = ["PUMP_BYTES", "PUMP_LIMIT_S_PER_MB", "adversarial_inputs", "derived_searches", "pump_derived", "pump_rule"]

PUMP_BYTES = 128 * 1024
PUMP_LIMIT_S_PER_MB = 2.0  # CPU seconds per MiB of adversarial input (the engines' budget, matchers.PER_MB, is the same)
_EVIL = ["a", " ", "\t", "0", "/", "(", "[", "=", ":", "x.", "a ", "ab", "-", "\\", "'", '"', "at ", "#", "%",
         # non-ASCII characters, alone and between ASCII ones: a line of source code shown with
         # "→" after each line number, text in other scripts, an emoji (four UTF-8 bytes)
         "\u2192", "\u2192 ", "a\u2192", "\u00e9", "\u4e2d", "\U0001f600", "=\u00e9", "\u00a0"]
MIN_LIMIT_S = 0.02
SHORT_LINE = 4096  # the engine searches a line this long or shorter without a time limit (matchers)


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
        dt = _cpu_seconds(lambda: cr.find(view, budget=limit * 2), RuleTimeout)
        if dt is None:
            return f"timed out on {name}"
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


def derived_searches(rule: Rule) -> list[tuple[str, Callable[[str], object], bool]]:
    """(name, search of one line, searched on longer lines too?) for each pattern the engine
    derives from ``rule`` and runs with a backtracking matcher (see the module notes)."""
    if rule.stage == "classify":
        return []  # (its prefilter's approximations are scanned by hyperscan)
    cr = compile_rule(rule)
    if not isinstance(cr, RegexRule):
        return []
    out: list[tuple[str, Callable[[str], object], bool]] = []
    check = cr.wide_check
    if check is not None:
        out.append(("utf-8 approximation", lambda line: check.search(line.encode("utf-8", "surrogatepass")), False))
    flags = _flags(cr.spec.flags)
    for k, br in enumerate(_branch_table(cr.spec.pattern, flags) or []):
        out.append((f"branch {k}", _compile(br[1], flags).search, True))
    for k, part in enumerate(cr.gate_parts or []):
        out.append((f"gate part {k}", part.search, True))
    return out


def pump_derived(rule: Rule, size: int = PUMP_BYTES, limit_s_per_mb: float = PUMP_LIMIT_S_PER_MB) -> str | None:
    """Return None when every pattern derived from the rule (``derived_searches``) is fast on
    every adversarial input, else what was slow. A search that runs past twice its limit is
    stopped (where a CPU-time signal can be had: the main thread of a POSIX process) and reported."""
    searches = derived_searches(rule)
    if not searches:
        return None
    inputs = adversarial_inputs(rule, size)
    for name, search, long_too in searches:
        for label, text in inputs:
            runs = [(text[:SHORT_LINE], None)]
            if long_too:
                runs.append((text, True))
            for line, timed in runs:
                # (at least MIN_LIMIT_S: a search of a few KB is near the CPU clock's resolution)
                limit = max(limit_s_per_mb * len(line.encode("utf-8")) / 1_048_576, MIN_LIMIT_S)
                def run(line=line, timed=timed, limit=limit):
                    with _stopped_after(limit * 2 + 0.05):
                        return search(line, timeout=limit * 2) if timed else search(line)

                dt = _cpu_seconds(run, TimeoutError)
                if dt is None:
                    return f"{name} timed out on {len(line)} characters of {label}"
                if dt > limit:
                    return f"{name}: {dt:.3f}s on {len(line)} characters of {label} (limit {limit:.3f}s)"
    return None


def _cpu_seconds(call: Callable[[], object], timeout: type[BaseException]) -> float | None:
    """The CPU time ``call`` took; None if it raised ``timeout``."""
    t0 = time.process_time()
    try:
        call()
    except timeout:
        return None
    return time.process_time() - t0


@contextmanager
def _stopped_after(seconds: float):
    """Raise TimeoutError in the block once it has used ``seconds`` of CPU time (the standard
    library's ``re`` checks for signals while it matches); a no-op off the main thread or where
    there is no CPU-time timer."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(_sig, _frame):
        raise TimeoutError("CPU time limit")

    old = signal.signal(signal.SIGPROF, stop)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)
