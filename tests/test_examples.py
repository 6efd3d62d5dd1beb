"""The runnable examples under ``examples/``: each runs to the end with no network (in a network
namespace of its own where the machine allows one) and prints what it promises."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _no_network_prefix() -> list[str]:
    """``unshare -n``: a new network namespace with only a loopback that is down (root, or user
    namespaces); an example that reaches for the network fails there."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-n", "true"], capture_output=True).returncode == 0:
        return [unshare, "-n"]
    return []


def _run(name: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "COMPACTOR_STORE": str(tmp_path / "s.sqlite"),
           # a key in the environment is what makes the SDK's default tracing upload a run
           "OPENAI_API_KEY": "sk-example-not-a-key", "TMPDIR": str(tmp_path)}
    return subprocess.run([*_no_network_prefix(), sys.executable, str(ROOT / "examples" / name)], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=300)


def test_openai_agents_example(tmp_path: Path):
    pytest.importorskip("agents", reason="the 'openai-agents' extra is part of .[dev]")
    p = _run("openai_agents_offline.py", tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "Tracing" not in p.stderr and "request failed" not in p.stderr  # nothing tried to upload a trace
    out = p.stdout
    assert "model calls: 3; final answer: The pool is never released" in out
    assert "placeholder the model saw: [npm install: completed, 234 packages added" in out
    assert "the failing test reached it verbatim: True" in out
    assert "gives back the original: True" in out and "keeps every item in full: True" in out
    assert not list(tmp_path.rglob("sessions.sqlite*"))  # its temporary session store went away with it


def test_langchain_example(tmp_path: Path):
    pytest.importorskip("langchain", reason="the 'langchain' extra is part of .[dev]")
    p = _run("langchain_offline.py", tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = {line.split(" last request")[0].strip(): line for line in p.stdout.splitlines() if "last request" in line}
    assert set(lines) == {"no compactor", "Level1Edit", "CompactorMiddleware(1500)"}
    sizes = {k: int(v.split("last request")[1].split("characters")[0]) for k, v in lines.items()}
    assert sizes["Level1Edit"] * 10 < sizes["no compactor"]
    # a budget is filled by priority up to its size (it is not left unused): the middleware's request
    # is bounded by its 1,500 tokens (at most about 4 characters a token in this English text)
    assert sizes["CompactorMiddleware(1500)"] <= 1500 * 4 < sizes["no compactor"]
    assert all(v.endswith("failing test verbatim: True") for v in lines.values())
    assert "gives back the original: True" in p.stdout
