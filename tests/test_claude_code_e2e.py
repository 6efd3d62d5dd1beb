"""End to end: the real Claude Code (pinned npm package, installed at test time) with compactor's
hooks installed, against a loopback fake of the Anthropic Messages API.

Scenario: the user states a constraint; the model runs a failing import (a dead end), then a
command printing 3,000 lines that end in a Python traceback, twice: piped through ``cat`` (exit 0)
and as it is (exit 1). Without the hooks Claude Code shows the model only a ~2 KB head preview of
the first and about 10,000 characters from the start of the second; with them (the PreToolUse
wrapper), the next model request must hold the final ``ValueError`` of both. Then ``/compact`` (the fake summariser answers with a useless summary)
and a follow-up: the request after compaction must hold the anchor (evidence, dead end,
constraint), re-injected by the SessionStart hook.

Skipped (with the reason) only when npm or the registry cannot be reached.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fake_anthropic import FakeAnthropic, request_text, text_reply, tool_reply

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CLAUDE_CODE_VERSION = "2.1.332"
ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "claude_code"

CONSTRAINT = "Constraint: do not modify anything under tests/."
DEAD_END_CMD = "python3 -c 'import nosuchmodule_e2e'"
JOB = """\
import sys
for i in range(3000):
    print(f"processing record {i}: ok")
print("Traceback (most recent call last):")
print('  File "/srv/job/run.py", line 88, in <module>')
print("    main()")
print("ValueError: boom: record 3000 has no checksum")
sys.exit(1)
"""
LONG_CMD = "python3 job.py 2>&1 | cat"
FAIL_CMD = "python3 job.py"  # exits 1: Claude Code's PostToolUseFailure, whose output no hook can replace
FINAL_ERROR = "ValueError: boom: record 3000 has no checksum"
NETWORK_ERRORS = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ECONNRESET", "network", "getaddrinfo")


def _claude_binary() -> Path:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: cannot fetch @anthropic-ai/claude-code")
    base = Path(os.environ.get("COMPACTOR_E2E_CACHE")
                or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "compactor-e2e")
    prefix = base / f"claude-code-{CLAUDE_CODE_VERSION}"
    exe = prefix / "node_modules" / ".bin" / "claude"
    if exe.exists():
        return exe
    prefix.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix),
                           f"@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}"],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        out = proc.stdout + proc.stderr
        if any(k in out for k in NETWORK_ERRORS):
            pytest.skip(f"npm registry unreachable: {out.strip().splitlines()[-1][:200]}")
        raise AssertionError(f"npm install failed:\n{out[-3000:]}")
    assert exe.exists(), f"npm installed no claude binary under {prefix}"
    return exe


def _conversation(body: dict) -> list[dict]:
    return [m for m in body.get("messages", []) if m.get("role") in ("user", "assistant")]


def _last_user_text(body: dict) -> str:
    msgs = _conversation(body)
    if not msgs or msgs[-1]["role"] != "user":
        return ""
    c = msgs[-1]["content"]
    return c if isinstance(c, str) else json.dumps(c)


def _tool_result(body: dict, tool_id: str) -> str:
    for m in _conversation(body):
        if isinstance(m["content"], list):
            for b in m["content"]:
                if b.get("type") == "tool_result" and b.get("tool_use_id") == tool_id:
                    c = b["content"]
                    return c if isinstance(c, str) else "".join(x.get("text", "") for x in c)
    return ""


_SENT: set[tuple[str, str]] = set()


def script(body: dict):
    """One scripted turn per request; each tool call is made once per conversation (the anchor
    re-injected later quotes the first prompt, which must not start the scenario again)."""
    last = _last_user_text(body)
    session = str(body.get("metadata", {}).get("user_id", ""))
    if "Your task is to create" in last and "summary" in last:
        return text_reply("<analysis>ok</analysis>\n<summary>The user and the assistant worked on a job.</summary>")
    if '"tool_use_id": "toolu_e2e_3"' in last:
        return text_reply("The job output was read.")
    if '"tool_use_id": "toolu_e2e_2"' in last and (session, "3") not in _SENT:
        _SENT.add((session, "3"))
        return tool_reply("toolu_e2e_3", "Bash", {"command": FAIL_CMD, "description": "run the job as it is"})
    if '"tool_use_id": "toolu_e2e_1"' in last and (session, "2") not in _SENT:
        _SENT.add((session, "2"))
        return tool_reply("toolu_e2e_2", "Bash", {"command": LONG_CMD, "description": "run the job"})
    if "E2E-STEP-1" in last and (session, "1") not in _SENT:
        _SENT.add((session, "1"))
        return tool_reply("toolu_e2e_1", "Bash", {"command": DEAD_END_CMD, "description": "try the module"})
    return text_reply("Continuing.")


def _env(home: Path, cfg: Path, tmp_path: Path) -> dict[str, str]:
    exe = Path(sys.executable).with_name("compactor")
    return {"PATH": f"{exe.parent}:{os.environ['PATH']}", "HOME": str(home), "CLAUDE_CONFIG_DIR": str(cfg),
            "ANTHROPIC_API_KEY": "sk-ant-test-0000", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_ERROR_REPORTING": "1", "TERM": "dumb",
            "COMPACTOR_STORE": str(tmp_path / "store.sqlite"), "COMPACTOR_HOOK_DIR": str(tmp_path / "anchors")}


def _claude_p(claude: Path, proj: Path, env: dict[str, str], *args: str) -> None:
    p = subprocess.run([str(claude), "-p", *args, "--output-format", "json"], cwd=proj, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"claude {args} exited {p.returncode}: {p.stderr[-2000:]}"


@pytest.fixture(scope="module")
def claude():
    return _claude_binary()


def test_claude_code_hooks_end_to_end(claude, tmp_path):
    home = tmp_path / "home"
    cfg = home / ".claude"
    proj = tmp_path / "proj"
    dump = tmp_path / "dump"
    for d in (cfg, proj, dump):
        d.mkdir(parents=True)
    (proj / "job.py").write_text(JOB)
    # A hook of someone else's that must survive the install: it records every payload.
    other = {"type": "command", "command": f"cat > {dump}/$(date +%s%N)-$$.json"}
    (cfg / "settings.json").write_text(json.dumps({"model": "claude-fake", "hooks": {
        ev: [{"matcher": "*", "hooks": [other]}] for ev in ("PostToolUse", "PostToolUseFailure", "PreCompact",
                                                             "SessionStart")}}))
    env = _env(home, cfg, tmp_path)
    with FakeAnthropic(script) as fake:  # control: without compactor's hooks the error is lost
        env["ANTHROPIC_BASE_URL"] = fake.url
        _claude_p(claude, proj, env, f"Run the job. {CONSTRAINT} (E2E-STEP-1)", "--allowedTools", "Bash")
        seen = next(_tool_result(r, "toolu_e2e_2") for r in fake.requests if _tool_result(r, "toolu_e2e_2"))
        assert "<persisted-output>" in seen and FINAL_ERROR not in seen, seen[-500:]
        failed = next(_tool_result(r, "toolu_e2e_3") for r in fake.requests if _tool_result(r, "toolu_e2e_3"))
        assert failed.startswith("Exit code 1") and FINAL_ERROR not in failed, failed[-500:]
        print(f"\nwithout compactor: exit-0 result {len(seen):,} characters, failing result {len(failed):,} "
              f"characters, final error present: {FINAL_ERROR in seen}, {FINAL_ERROR in failed}")
    for f in dump.iterdir():
        f.unlink()
    exe = Path(sys.executable).with_name("compactor")
    assert exe.exists(), "the compactor console script is not installed next to the interpreter"

    inst = subprocess.run([str(exe), "hook", "claude-code", "install", "--user"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert inst.returncode == 0, inst.stderr
    settings = json.loads((cfg / "settings.json").read_text())
    assert settings["model"] == "claude-fake"
    for ev in ("PostToolUse", "PreCompact", "SessionStart"):
        cmds = [h["command"] for g in settings["hooks"][ev] for h in g["hooks"]]
        assert other["command"] in cmds and any("hook claude-code" in c for c in cmds), cmds
    assert [h["command"] for g in settings["hooks"]["PreToolUse"] for h in g["hooks"]][-1].endswith(
        "hook claude-code pre-tool-use")
    assert settings["hooks"]["PostToolUseFailure"] == [{"matcher": "*", "hooks": [other]}]

    with FakeAnthropic(script) as fake:
        env["ANTHROPIC_BASE_URL"] = fake.url

        def claude_p(*args: str) -> None:
            _claude_p(claude, proj, env, *args)

        claude_p(f"Run the job and tell me why it fails. {CONSTRAINT} (E2E-STEP-1)", "--allowedTools", "Bash")
        after_tool = [r for r in fake.requests if _tool_result(r, "toolu_e2e_2")]
        assert after_tool, "Claude Code never sent the long command's result to the model"
        seen = _tool_result(after_tool[0], "toolu_e2e_2")
        assert FINAL_ERROR in seen, f"the final error did not reach the model; it saw:\n{seen[-1500:]}"
        assert "<persisted-output>" not in seen and len(seen) < 30_000
        assert "ref c-" in seen  # the folded lines are a placeholder that expands from the store

        failed = _tool_result(after_tool[-1], "toolu_e2e_3")
        assert failed, "Claude Code never sent the failing command's result to the model"
        assert failed.startswith("Exit code 1\n[compactor: "), failed[:300]  # the exit code is the command's
        assert FINAL_ERROR in failed, f"the failing command's final error did not reach the model:\n{failed[-1500:]}"
        assert 'File "/srv/job/run.py", line 88' in failed and "processing record 1500: ok" not in failed
        assert len(failed) < 10_000 and "characters truncated" not in failed
        ref = re.search(r"ref (c-[0-9a-f]{16})", failed).group(1)
        exp = subprocess.run([str(Path(sys.executable).with_name("compactor")), "expand", ref], env=env,
                             capture_output=True, text=True, timeout=60)
        assert exp.returncode == 0 and "processing record 1500: ok" in exp.stdout
        print(f"with compactor: exit-0 result {len(seen):,} characters, failing result {len(failed):,} "
              f"characters, final error present: {FINAL_ERROR in seen}, {FINAL_ERROR in failed}")

        n_before = len(fake.requests)
        claude_p("/compact", "--continue")
        compaction = [r for r in fake.requests[n_before:] if "Your task is to create" in _last_user_text(r)]
        assert compaction, "no compaction request was sent"
        assert "compactor (deterministic anchor of this session)" in request_text(compaction[-1]), \
            "PreCompact's instructions were not appended to the compaction prompt"

        n_before = len(fake.requests)
        claude_p("What should we do next? (E2E-STEP-3)", "--continue")
        follow = [r for r in fake.requests[n_before:] if "E2E-STEP-3" in request_text(r)]
        assert follow, "the follow-up request was not sent"
        text = request_text(follow[-1])
        assert "The user and the assistant worked on a job." in text  # it is the compacted conversation
        assert "Restored by compactor after compaction" in text
        assert FINAL_ERROR in text  # key evidence
        assert "nosuchmodule_e2e" in text  # the dead end
        assert "do not modify anything under tests/" in text  # the user's constraint
        assert "processing record 1500: ok" not in text  # and not the noise

    _save_fixtures(dump, tmp_path)


def _save_fixtures(dump: Path, tmp_path: Path) -> None:
    """With COMPACTOR_E2E_SAVE_FIXTURES=1, keep the payloads Claude Code really sent (paths made
    relative to the fixture directory) for the unit tests."""
    if os.environ.get("COMPACTOR_E2E_SAVE_FIXTURES") != "1":
        return
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for f in sorted(dump.iterdir()):
        d = json.loads(f.read_text())
        ev = d["hook_event_name"]
        name = {"PostToolUse": f"post_tool_use_{d.get('tool_use_id')}",
                "PostToolUseFailure": f"post_tool_use_failure_{d.get('tool_use_id')}",
                "PreCompact": "pre_compact", "SessionStart": f"session_start_{d.get('source')}"}[ev]
        resp = d.get("tool_response")
        if isinstance(resp, dict) and resp.get("persistedOutputPath"):
            src = Path(resp["persistedOutputPath"])
            shutil.copyfile(src, FIXTURES / f"{name}.persisted.txt")
            resp["persistedOutputPath"] = f"{{FIXTURES}}/{name}.persisted.txt"
        if d.get("transcript_path") and ev == "PreCompact":
            shutil.copyfile(d["transcript_path"], FIXTURES / "transcript.jsonl")
        text = json.dumps(d, indent=1, ensure_ascii=False).replace(str(tmp_path), "{TMP}")
        (FIXTURES / f"{name}.json").write_text(text + "\n")
