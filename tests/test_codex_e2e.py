"""End to end: the real Codex CLI (pinned npm package, installed at test time) with compactor's
Codex hooks, against a loopback fake of the OpenAI Responses API.

Codex's hooks cannot replace a shell command's output, but PreCompact sees the rollout
(``transcript_path``) and SessionStart with source ``compact`` can add context: the anchor built
before an automatic compaction must be in the first request after it (evidence, dead end,
constraint), although the fake summariser answers with a useless summary.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fake_openai_responses import FakeResponses, function_call, message

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CODEX_VERSION = "0.171.0"
CONSTRAINT = "Constraint: never touch the vendor/ directory."
NETWORK_ERRORS = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ECONNRESET", "network", "getaddrinfo")


def _codex_binary() -> Path:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: cannot fetch @openai/codex")
    base = Path(os.environ.get("COMPACTOR_E2E_CACHE")
                or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "compactor-e2e")
    prefix = base / f"codex-{CODEX_VERSION}"
    exe = prefix / "node_modules" / ".bin" / "codex"
    if exe.exists():
        return exe
    prefix.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix),
                           f"@openai/codex@{CODEX_VERSION}"], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        out = proc.stdout + proc.stderr
        if any(k in out for k in NETWORK_ERRORS):
            pytest.skip(f"npm registry unreachable: {out.strip().splitlines()[-1][:200]}")
        raise AssertionError(f"npm install failed:\n{out[-3000:]}")
    assert exe.exists(), f"npm installed no codex binary under {prefix}"
    return exe


def _text(body: dict) -> str:
    return json.dumps(body.get("input", []), ensure_ascii=False)


def _last_user(body: dict) -> str:
    for item in reversed(body.get("input", [])):
        if item.get("type") == "message" and item.get("role") == "user":
            return json.dumps(item, ensure_ascii=False)
        if item.get("type") == "function_call_output":
            return json.dumps(item, ensure_ascii=False)
    return ""


def script(body: dict):
    last = _last_user(body)
    if "CONTEXT CHECKPOINT COMPACTION" in last:
        return [message("Summary: the user and the assistant looked at an import.")], 1000
    if "function_call_output" in last and "call_cx_1" in last:
        return [message("The module is not installed.")], 150_000  # over the limit: the next turn compacts
    if "CX-STEP-1" in last:
        return [function_call("call_cx_1", "exec_command", {"cmd": "python3 -c 'import nosuchmodule_cx'"})], 1000
    return [message("Continuing.")], 1000


def test_codex_anchor_survives_compaction(tmp_path):
    codex = _codex_binary()
    home, proj = tmp_path / "home", tmp_path / "proj"
    codex_home = home / ".codex"
    for d in (codex_home, proj):
        d.mkdir(parents=True)
    exe = Path(sys.executable).with_name("compactor")
    snippet = subprocess.run([str(exe), "hook", "codex", "settings"], capture_output=True, text=True, timeout=60)
    assert snippet.returncode == 0, snippet.stderr
    (codex_home / "hooks.json").write_text(snippet.stdout)
    with FakeResponses(script) as fake:
        (codex_home / "config.toml").write_text(f"""
model = "gpt-fake"
model_provider = "fake"
model_auto_compact_token_limit = 20000
[model_providers.fake]
name = "fake"
base_url = "{fake.url}/v1"
wire_api = "responses"
env_key = "FAKE_API_KEY"
[features]
hooks = true
""")
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "CODEX_HOME": str(codex_home), "FAKE_API_KEY": "k",
               "COMPACTOR_STORE": str(tmp_path / "store.sqlite"), "COMPACTOR_HOOK_DIR": str(tmp_path / "anchors")}
        flags = ["--dangerously-bypass-hook-trust", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check"]

        def run(*args: str) -> None:
            p = subprocess.run([str(codex), "exec", *flags, *args], cwd=proj, env=env, capture_output=True,
                               text=True, timeout=300)
            assert p.returncode == 0, p.stderr[-3000:]

        run(f"Find out why the import fails. {CONSTRAINT} (CX-STEP-1)")
        assert any("No module named 'nosuchmodule_cx'" in _text(r) for r in fake.requests), \
            "the command's error never reached the model"
        n = len(fake.requests)
        run("resume", "--last", "What should we do next? (CX-STEP-3)")
        later = fake.requests[n:]
        assert any("CONTEXT CHECKPOINT COMPACTION" in _last_user(r) for r in later), "Codex did not compact"
        follow = [r for r in later if "CX-STEP-3" in _last_user(r)]
        assert follow, "the follow-up was not sent"
        text = _text(follow[-1])
    assert "Summary: the user and the assistant looked at an import." in text  # it is the compacted history
    assert "Restored by compactor after compaction" in text
    assert "No module named" in text and "nosuchmodule_cx" in text  # evidence and the dead end
    assert "never touch the vendor/ directory" in text  # the user's constraint
    stored = list((tmp_path / "anchors" / "codex").glob("*.anchor.md"))
    assert len(stored) == 1
