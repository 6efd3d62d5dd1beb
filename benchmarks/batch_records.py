"""Generated trajectory records for batch tests and the batch benchmark.

``make_records(n, seed)`` gives ``n`` records ``{"id", "text"}`` (the same for the same
arguments): OpenAI-chat trajectories with benign installs, failing test runs with Python
tracebacks, long file reads, repeated log lines and user constraints; Anthropic-layout
conversations; plain CI logs; and, one in 250, a corrupt record (JSON cut short) that must be
reported, not dropped.
"""

from __future__ import annotations

import json
import random

__all__ = ["make_records"]

_SCALE = [1.0]  # line counts of tool outputs are multiplied by this (make_records(scale=...))


def _n(r: random.Random, lo: int, hi: int) -> int:
    return max(2, round(r.randint(lo, hi) * _SCALE[0]))

_PKGS = ["requests", "numpy", "pandas", "flask", "pydantic", "urllib3", "idna", "certifi", "click", "jinja2",
         "markupsafe", "itsdangerous", "werkzeug", "six", "attrs", "packaging", "pluggy", "iniconfig"]


def _pip(r: random.Random) -> str:
    pkgs = r.sample(_PKGS, min(len(_PKGS), _n(r, 5, 12)))
    lines = []
    for p in pkgs:
        v = f"{r.randint(1, 3)}.{r.randint(0, 30)}.{r.randint(0, 9)}"
        lines.append(f"Collecting {p}=={v}")
        lines.append(f"  Downloading {p}-{v}-py3-none-any.whl ({r.randint(10, 900)} kB)")
    lines.append("Installing collected packages: " + ", ".join(pkgs))
    lines.append("Successfully installed " + " ".join(f"{p}-1.0" for p in pkgs))
    return "\n".join(lines)


def _pytest_fail(r: random.Random, i: int) -> str:
    n = r.randint(20, 120)
    mod = r.choice(["parser", "models", "views", "utils", "cache"])
    lines = ["============================= test session starts ==============================",
             "platform linux -- Python 3.11.7, pytest-8.2.0, pluggy-1.5.0",
             f"collected {n} items", ""]
    lines += [f"tests/test_{mod}.py::test_case_{k} PASSED" for k in range(_n(r, 8, 30))]
    lines += ["", "=================================== FAILURES ===================================",
              f"___________________________ test_{mod}_{i} ___________________________", "",
              "Traceback (most recent call last):",
              f'  File "/repo/tests/test_{mod}.py", line {r.randint(10, 400)}, in test_{mod}_{i}',
              f"    assert compute({i}) == {i * 3}",
              f'  File "/repo/src/{mod}.py", line {r.randint(10, 900)}, in compute',
              "    return value * factor",
              f"AssertionError: assert {i * 2} == {i * 3}",
              f"FAILED tests/test_{mod}.py::test_{mod}_{i} - AssertionError: assert {i * 2} == {i * 3}",
              f"========================= 1 failed, {n - 1} passed in {r.randint(1, 90)}.{r.randint(10, 99)}s ========================="]
    return "\n".join(lines)


def _file_read(r: random.Random) -> str:
    return "\n".join(f"{k:>4}  {'    ' * (k % 3)}value_{k} = compute(value_{k - 1}, {r.randint(0, 999)})"
                     for k in range(1, _n(r, 50, 140)))


def _repeated(r: random.Random) -> str:
    return "\n".join(f"[worker-{k % 4}] heartbeat ok seq={k} lag={r.randint(0, 9)}ms" for k in range(_n(r, 30, 200)))


def _call(cid: str, cmd: str) -> dict:
    return {"id": cid, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": cmd})}}


def _openai(r: random.Random, i: int) -> list:
    msgs = [{"role": "system", "content": "You are a coding agent working in /repo."},
            {"role": "user", "content": f"Fix issue #{i}: compute() returns the wrong value. Do not change the public API; keep Python 3.9 support."}]
    steps = r.choice([["pip", "test", "read", "log", "test"], ["read", "test", "pip"], ["pip", "log", "read", "test", "read"]])
    for k, s in enumerate(steps):
        cid = f"call_{i}_{k}"
        cmd, out = {"pip": ("pip install -r requirements.txt", _pip(r)),
                    "test": ("python -m pytest -x", _pytest_fail(r, i)),
                    "read": (f"cat src/module_{k}.py", _file_read(r)),
                    "log": ("tail -n 200 service.log", _repeated(r))}[s]
        msgs.append({"role": "assistant", "content": f"Step {k}: running {cmd.split()[0]}.", "tool_calls": [_call(cid, cmd)]})
        msgs.append({"role": "tool", "tool_call_id": cid, "content": out})
    msgs.append({"role": "assistant", "content": f"The factor should be 3, not 2; I will patch src/module.py line {r.randint(10, 99)}."})
    return msgs


def _anthropic(r: random.Random, i: int) -> dict:
    content = [{"role": "user", "content": f"Why does job {i} fail? Don't restart the database."}]
    tid = f"toolu_{i:06d}"
    content.append({"role": "assistant", "content": [{"type": "text", "text": "Let me look at the build."},
                    {"type": "tool_use", "id": tid, "name": "bash", "input": {"command": "make test"}}]})
    content.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "is_error": True,
                    "content": _pip(r) + "\n" + _pytest_fail(r, i) + "\nmake: *** [Makefile:12: test] Error 1"}]})
    content.append({"role": "assistant", "content": [{"type": "text", "text": "The assertion in compute() fails; the factor is wrong."}]})
    return {"model": "claude", "messages": content}


def _log(r: random.Random, i: int) -> str:
    return "\n".join(["$ make ci", _pip(r), _repeated(r), _pytest_fail(r, i), f"Error: Process completed with exit code {r.choice([1, 2])}."]) + "\n"


def make_records(n: int, seed: int = 0, scale: float = 1.0) -> list[dict]:
    """``scale`` shrinks or grows the tool outputs (1.0: about 10 KB per record)."""
    _SCALE[0] = scale
    out = []
    for i in range(n):
        r = random.Random(seed * 1_000_003 + i)
        kind = i % 5
        if i % 250 == 249:
            text = json.dumps(_openai(r, i))[: r.randint(40, 400)]  # cut short: a corrupt record
        elif kind in (0, 1, 2):
            text = json.dumps(_openai(r, i), ensure_ascii=False)
        elif kind == 3:
            text = json.dumps(_anthropic(r, i), ensure_ascii=False)
        else:
            text = _log(r, i)
        out.append({"id": f"rec-{i:05d}", "text": text})
    return out
