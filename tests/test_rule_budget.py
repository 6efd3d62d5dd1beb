"""The rules' time budget is a safety net against runaway patterns and never fires on input a
rule handles in linear time.

A budget in CPU seconds fires at different points on a busy machine than on an idle one, so a
budget that linear work can reach makes the same input give different output. These inputs are
the worst linear cases known (1 MB lines of rule bait, long traces where a rule matches every
line): with every literal engine, no rule may run out of time on them, and the spans are the
same whichever engine found the literals.
"""

from __future__ import annotations

import pytest

from compactor.engine import load_rules
from compactor.engine.classify import CAPTURE_BUDGET, CAPTURE_PER_MB
from compactor.engine.literals import available_engines
from compactor.engine.matchers import BASE_BUDGET, PER_MB, TextView, find_all
from compactor.engine.pump import PUMP_LIMIT_S_PER_MB
from compactor.detect import Detector

RULES = Detector(load_rules()).rules
ENGINES = available_engines()
MB = 1 << 20


def _rep(s: str, n: int) -> str:
    return (s * (n // len(s) + 1))[:n]


def _inputs() -> dict[str, str]:
    frames = 30_000
    py = ["Traceback (most recent call last):"]
    for k in range(frames):
        py += [f'  File "/srv/app/mod{k % 97}.py", line {k % 900 + 1}, in f{k}', f"    f{k + 1}(x)"]
    py.append("RecursionError: maximum recursion depth exceeded")
    go = ["panic: runtime error: stack overflow", "", "goroutine 1 [running]:"]
    for k in range(frames):
        go += [f"main.f{k % 50}(0x{k:x})", f"\t/app/main.go:{k % 900 + 1} +0x{k % 4096:x}"]
    return {
        # the slowest linear cases measured: a path-and-line rule matching every few characters
        "gcc": _rep("x:1:1: ", MB),
        "js-colons": "    at " + _rep("1:2:", MB),
        "colons": _rep("a:", MB),
        "error-words": _rep("error: ", MB),
        "panic": _rep("panic: ", MB),
        "exit-codes": _rep("exit code ", MB),
        "python-trace": "\n".join(py),
        "java-trace": "\n".join(['Exception in thread "main" java.lang.StackOverflowError']
                                + [f"\tat com.acme.Rec.f{k % 50}(Rec.java:{k % 900 + 1})" for k in range(frames)]),
        "go-trace": "\n".join(go),
        "native-trace": "\n".join(
            ["==1==ERROR: AddressSanitizer: stack-overflow on address 0x7ffca4df4b38 (pc 0x467236 bp 0x7ffc sp 0x7ffd T0)"]
            + [f"    #{k} 0x{0x400000 + k:x} in f{k % 50} /src/rec.c:{k % 900 + 1}:5" for k in range(frames)]),
    }


INPUTS = _inputs()


def test_the_budget_is_the_pump_tests_limit():
    # a rule the pump test accepts (at most PUMP_LIMIT_S_PER_MB on its worst inputs) cannot reach
    # the budget at run time on linear work
    assert PER_MB >= PUMP_LIMIT_S_PER_MB
    assert CAPTURE_PER_MB >= PUMP_LIMIT_S_PER_MB
    assert BASE_BUDGET >= 0.25 and CAPTURE_BUDGET >= 0.25


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_no_rule_runs_out_of_time_on_linear_worst_cases(name):
    text = INPUTS[name]
    spans = {}
    for engine in ENGINES:
        found, timeouts = find_all(TextView(text), RULES, role="tool", engine=engine)
        assert timeouts == [], f"{engine}: {timeouts} ran out of time on {name}"
        spans[engine] = sorted((cr.id, a, b) for cr, a, b, *_ in found)
    ref = spans[ENGINES[-1]]
    for engine in ENGINES[:-1]:
        assert spans[engine] == ref, engine
