"""Claude Code hooks on the payloads Claude Code really sent (captured by the end-to-end test into
tests/fixtures/claude_code/): the JSON they answer, failing open, the anchor across /compact,
and installing into settings.json."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from compactor.integrations import claude_code as cc

FIX = Path(__file__).resolve().parent / "fixtures" / "claude_code"
FINAL_ERROR = "ValueError: boom: record 3000 has no checksum"
EXE = str(Path(sys.executable).with_name("compactor"))


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTOR_STORE", str(tmp_path / "store.sqlite"))
    monkeypatch.setenv("COMPACTOR_HOOK_DIR", str(tmp_path / "anchors"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    cc._compactor_cache.clear()


def payload(name: str, **changes) -> dict:
    text = (FIX / f"{name}.json").read_text().replace("{FIXTURES}", str(FIX))
    d = json.loads(text)
    d.update(changes)
    return d


def run(event: str, data) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    raw = data if isinstance(data, str) else json.dumps(data)
    assert cc.run_hook(event, io.StringIO(raw), out, err) == 0  # always: hooks fail open
    return out.getvalue(), err.getvalue()


def cli(event: str, data, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env_extra or {})}
    raw = data if isinstance(data, str) else json.dumps(data)
    return subprocess.run([EXE, "hook", "claude-code", event], input=raw, capture_output=True, text=True,
                          env=env, timeout=120)


# ---------------------------------------------------------------------------- PostToolUse


def test_fixture_is_what_claude_code_sends_for_a_cut_bash_output():
    d = payload("post_tool_use_toolu_e2e_2")
    resp = d["tool_response"]
    assert d["hook_event_name"] == "PostToolUse" and d["tool_name"] == "Bash"
    assert len(resp["stdout"]) == 30_000 and FINAL_ERROR not in resp["stdout"]
    full = Path(resp["persistedOutputPath"]).read_text()
    assert resp["persistedOutputSize"] == len(full.encode()) and full.rstrip().endswith(FINAL_ERROR)


def test_post_tool_use_puts_the_final_error_inline_in_the_tools_own_shape():
    d = payload("post_tool_use_toolu_e2e_2")
    p = cli("post-tool-use", d)
    assert p.returncode == 0 and p.stderr == ""
    out = json.loads(p.stdout)
    hso = out["hookSpecificOutput"]
    assert hso["hookEventName"] == "PostToolUse"
    upd = hso["updatedToolOutput"]
    orig = d["tool_response"]
    assert set(upd) == set(orig) - {"persistedOutputPath", "persistedOutputSize"}
    assert {k: upd[k] for k in upd if k not in ("stdout",)} == {k: orig[k] for k in upd if k not in ("stdout",)}
    assert FINAL_ERROR in upd["stdout"] and 'File "/srv/job/run.py", line 88' in upd["stdout"]
    assert len(upd["stdout"]) < cc.INLINE_LIMIT
    assert orig["persistedOutputPath"] in upd["stdout"]  # the model can still read the whole file
    # the folded lines are a placeholder that expands, from the store, to exactly those lines
    ref = re.search(r"ref (c-[0-9a-f]{16})", upd["stdout"]).group(1)
    exp = subprocess.run([EXE, "expand", ref], capture_output=True, text=True, env=os.environ, timeout=60)
    assert exp.returncode == 0
    full = Path(orig["persistedOutputPath"]).read_text()
    assert exp.stdout in full and exp.stdout.count("\n") >= 2900 and "processing record 1500: ok" in exp.stdout
    # same payload, same answer, byte for byte
    assert cli("post-tool-use", d).stdout == p.stdout


def test_post_tool_use_without_the_persisted_file_compacts_what_it_has():
    d = payload("post_tool_use_toolu_e2e_2")
    d["tool_response"]["persistedOutputPath"] = str(FIX / "no-such-file.txt")
    out, err = run("post-tool-use", d)
    upd = json.loads(out)["hookSpecificOutput"]["updatedToolOutput"]
    assert "not read back" in upd["stdout"] and len(upd["stdout"]) < cc.INLINE_LIMIT
    assert "processing record 0: ok" in upd["stdout"] and err == ""


@pytest.mark.parametrize("change", [
    {"tool_name": "Read"},
    {"hook_event_name": "PostToolUseFailure"},
    {"tool_response": {"stdout": "ok\n" * 10, "stderr": "", "interrupted": False, "isImage": False}},
    {"tool_response": {"stdout": "x" * 50_000, "stderr": "", "interrupted": False, "isImage": True}},
    {"tool_response": "plain string"},
])
def test_post_tool_use_leaves_other_outputs_alone(change):
    out, err = run("post-tool-use", payload("post_tool_use_toolu_e2e_2", **change))
    assert out == "" and err == ""


def test_post_tool_use_failure_payload_is_left_alone():
    d = payload("post_tool_use_failure_toolu_e2e_1")
    assert d["hook_event_name"] == "PostToolUseFailure" and "tool_response" not in d
    assert run("post-tool-use", d) == ("", "")


def test_unfoldable_output_is_cut_in_the_middle_under_the_limit(tmp_path):
    lines = [f"ERROR: check {i} failed at src/mod_{i}.py:{i + 1}: expected {i * 7} got {i * 7 + 1}" for i in range(4000)]
    text = "\n".join(lines) + "\nFATAL: 4000 checks failed\n"
    d = payload("post_tool_use_toolu_e2e_2")
    (tmp_path / "out.txt").write_text(text)
    d["tool_response"] = {"stdout": text[:30_000], "stderr": "", "interrupted": False, "isImage": False,
                          "noOutputExpected": False, "persistedOutputPath": str(tmp_path / "out.txt"),
                          "persistedOutputSize": len(text)}
    out, _ = run("post-tool-use", d)
    s = json.loads(out)["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    assert len(s) < cc.INLINE_LIMIT
    assert "FATAL: 4000 checks failed" in s and lines[0] in s and lines[-1] in s
    assert re.search(r"\[\.\.\. \d+ lines of compacted output omitted", s)


@pytest.mark.parametrize("stdin", ["", "not json", "[1, 2]", '{"tool_name": "Bash", "tool_response": {"stdout": 5}}'])
def test_malformed_payloads_fail_open(stdin):
    out, err = run("post-tool-use", stdin)
    assert out == ""
    assert err == "" or ("left the tool output untouched" in err and err.count("\n") == 1)


def test_any_error_fails_open_with_the_reason_on_stderr(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    p = cli("post-tool-use", payload("post_tool_use_toolu_e2e_2"),
            {"COMPACTOR_STORE": str(blocker / "sub" / "store.sqlite")})
    assert p.returncode == 0 and p.stdout == ""
    assert p.stderr.startswith("compactor hook claude-code post-tool-use: ") and "untouched" in p.stderr
    assert p.stderr.count("\n") == 1


# ---------------------------------------------------------------------------- PreCompact / SessionStart


def test_transcript_fixture_holds_compactors_own_echoes_and_they_are_removed():
    raw = (FIX / "transcript.jsonl").read_bytes()
    kept = cc.own_records_removed(raw)
    assert b"Restored by compactor after compaction" in raw
    for line in kept.splitlines():
        rec = json.loads(line)
        if rec.get("type") in ("user", "assistant", "attachment"):  # what a reader turns into messages
            assert b"Restored by compactor after compaction" not in line
            assert b"compactor (deterministic anchor of this session)" not in line
    lines, kept_lines = raw.splitlines(keepends=True), kept.splitlines(keepends=True)
    assert 0 < len(lines) - len(kept_lines) <= 4
    assert all(ln in lines for ln in kept_lines)  # the rest byte for byte


def test_pre_compact_then_session_start_carry_the_anchor(tmp_path):
    d = payload("pre_compact", transcript_path=str(FIX / "transcript.jsonl"))
    out, err = run("pre-compact", d)
    assert err == ""
    assert out.startswith("compactor (deterministic anchor of this session)")
    for must in (FINAL_ERROR, "nosuchmodule_e2e", "do not modify anything under tests/"):
        assert must in out
    assert "Restored by compactor" not in out and len(out) <= cc.PRECOMPACT_LIMIT
    stored = tmp_path / "anchors" / f"{d['session_id']}.anchor.md"
    assert stored.is_file()

    s = payload("session_start_compact")
    assert s["session_id"] == d["session_id"] and s["source"] == "compact"
    out2, err2 = run("session-start", s)
    ctx = json.loads(out2)["hookSpecificOutput"]
    assert ctx["hookEventName"] == "SessionStart"
    text = ctx["additionalContext"]
    assert len(text) < cc.CONTEXT_LIMIT and text.endswith(stored.read_text())
    for must in (FINAL_ERROR, "nosuchmodule_e2e", "do not modify anything under tests/"):
        assert must in text
    # the same transcript gives the same anchor
    run("pre-compact", d)
    assert stored.read_text() == text[text.index("## "):]


@pytest.mark.parametrize("name", ["session_start_startup", "session_start_resume"])
def test_session_start_other_sources_inject_nothing(name):
    run("pre-compact", payload("pre_compact", transcript_path=str(FIX / "transcript.jsonl")))
    assert run("session-start", payload(name)) == ("", "")


def test_session_start_without_a_stored_anchor_injects_nothing():
    assert run("session-start", payload("session_start_compact")) == ("", "")


def test_long_anchor_is_shortened_by_priority_with_the_path(tmp_path):
    sections = ["## Current working state", "**Goal**: ship it",
                "**Done**:\n" + "\n".join(f"- changed file_{i}.py: refactor {i} " + "x" * 80 for i in range(200)),
                "**Key evidence**:\n- (s3, trace) `ValueError: final`",
                "**Constraints**:\n- never push to main (s1)"]
    md = "\n\n".join(sections) + "\n"
    path = tmp_path / "a.md"
    short = cc.shorten_anchor(md, 3000, path)
    assert len(short) <= 3000 and str(path) in short
    assert "never push to main" in short and "ValueError: final" in short and "**Goal**: ship it" in short
    assert short.index("**Goal**") < short.index("**Done**") < short.index("**Key evidence**")  # original order
    assert "more" in short and cc.shorten_anchor(md, 10**6, path) == md


@pytest.mark.parametrize("sid", ["../../etc/passwd", "", "a/b", "x" * 300])
def test_unsafe_session_ids_fail_open_and_write_nothing(sid, tmp_path):
    d = payload("pre_compact", transcript_path=str(FIX / "transcript.jsonl"), session_id=sid)
    out, err = run("pre-compact", d)
    assert out == "" and "not a safe file name" in err
    assert not (tmp_path / "anchors").exists() or not any((tmp_path / "anchors").iterdir())


def test_pre_compact_with_a_missing_transcript_fails_open(tmp_path):
    out, err = run("pre-compact", payload("pre_compact", transcript_path=str(tmp_path / "gone.jsonl")))
    assert out == "" and "is not a readable file" in err


# ---------------------------------------------------------------------------- install


def _install(*args: str, cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, "hook", "claude-code", "install", *args], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, **(env or {})}, timeout=60)


def test_install_merges_and_is_idempotent(tmp_path):
    cfg = tmp_path / "claude-config"
    cfg.mkdir()
    theirs = {"type": "command", "command": "audit-log.sh"}
    original = {"model": "x", "permissions": {"allow": ["Bash(ls:*)"]},
                "hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [theirs]}],
                          "Stop": [{"hooks": [{"type": "command", "command": "notify.sh"}]}]}}
    (cfg / "settings.json").write_text(json.dumps(original))
    p = _install("--user")
    assert p.returncode == 0 and "installed" in p.stdout, p.stderr
    first = (cfg / "settings.json").read_bytes()
    s = json.loads(first)
    assert s["model"] == "x" and s["permissions"] == original["permissions"] and s["hooks"]["Stop"] == original["hooks"]["Stop"]
    post = [h["command"] for g in s["hooks"]["PostToolUse"] for h in g["hooks"]]
    assert "audit-log.sh" in post and sum("hook claude-code post-tool-use" in c for c in post) == 1
    assert s["hooks"]["SessionStart"][0]["matcher"] == "compact"
    assert any("hook claude-code pre-compact" in h["command"] for g in s["hooks"]["PreCompact"] for h in g["hooks"])
    p2 = _install("--user")
    assert p2.returncode == 0 and "already installed" in p2.stdout
    assert (cfg / "settings.json").read_bytes() == first


def test_install_updates_an_old_entry_in_place(tmp_path):
    cfg = tmp_path / "claude-config"
    cfg.mkdir()
    (cfg / "settings.json").write_text(json.dumps({"hooks": {"PreCompact": [{"hooks": [
        {"type": "command", "command": "/old/venv/bin/compactor hook claude-code pre-compact"}]}]}}))
    assert _install().returncode == 0
    s = json.loads((cfg / "settings.json").read_text())
    cmds = [h["command"] for g in s["hooks"]["PreCompact"] for h in g["hooks"]]
    assert len(cmds) == 1 and "/old/venv" not in cmds[0] and cmds[0].endswith("hook claude-code pre-compact")


def test_install_project_scope(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    p = _install("--project", cwd=proj)
    assert p.returncode == 0
    s = json.loads((proj / ".claude" / "settings.json").read_text())
    assert set(s["hooks"]) == {"PreToolUse", "PostToolUse", "PreCompact", "SessionStart"}
    assert not (tmp_path / "claude-config" / "settings.json").exists()


def test_install_refuses_a_broken_settings_file(tmp_path):
    cfg = tmp_path / "claude-config"
    cfg.mkdir()
    (cfg / "settings.json").write_text('{"hooks": {,}}')
    p = _install("--user")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "settings.json:line 1 column" in p.stderr
    assert (cfg / "settings.json").read_text() == '{"hooks": {,}}'


@pytest.mark.parametrize("action", ["install", "uninstall"])
def test_install_and_uninstall_have_help(tmp_path, action):
    p = subprocess.run([EXE, "hook", "claude-code", action, "--help"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert p.stdout.startswith(f"usage: compactor hook claude-code {action} [--user | --project]")
    assert "--project-dir DIR" in p.stdout and "settings.json" in p.stdout
    assert not (tmp_path / "claude-config").exists()  # asking for help writes nothing


def _uninstall(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, "hook", "claude-code", "uninstall", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=60)


def test_uninstall_removes_exactly_what_install_added(tmp_path):
    cfg = tmp_path / "claude-config"
    cfg.mkdir()
    # the user's own hooks share compactor's events and even a group with one of its entries
    original = {"model": "x", "permissions": {"allow": ["Bash(ls:*)"]}, "hooks": {
        "PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit-log.sh"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify.sh"}]}]}}
    (cfg / "settings.json").write_text(json.dumps(original))
    assert _install("--user").returncode == 0
    installed = json.loads((cfg / "settings.json").read_text())
    assert installed != original
    p = _uninstall("--user")
    assert p.returncode == 0 and p.stdout.startswith("removed compactor hooks from"), p.stderr
    assert json.loads((cfg / "settings.json").read_text()) == original
    again = _uninstall("--user")
    assert again.returncode == 0 and again.stdout.startswith("no compactor hooks in")

    # an entry sharing a group with the user's hook: only compactor's entry goes
    mixed = {"hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "audit-log.sh"},
        {"type": "command", "command": "/v/bin/compactor hook claude-code post-tool-use", "timeout": 60}]}]}}
    (cfg / "settings.json").write_text(json.dumps(mixed))
    assert _uninstall().returncode == 0
    assert json.loads((cfg / "settings.json").read_text()) == {"hooks": {"PostToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": "audit-log.sh"}]}]}}


def test_uninstall_of_a_fresh_install_leaves_an_empty_object(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    assert _install("--project", cwd=proj).returncode == 0
    assert _uninstall("--project-dir", str(proj)).returncode == 0
    assert json.loads((proj / ".claude" / "settings.json").read_text()) == {}
    missing = _uninstall("--project-dir", str(tmp_path / "none"))
    assert missing.returncode == 0 and "no compactor hooks" in missing.stdout
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("args", [["claude-code", "install", "--global"], ["claude-code", "uninstall", "--all"],
                                  ["vscode", "post-tool-use"],
                                  ["claude-code", "bogus"], ["claude-code", "post-tool-use", "extra"]])
def test_hook_usage_errors_are_one_line_exit_2(args):
    p = subprocess.run([EXE, "hook", *args], capture_output=True, text=True, timeout=60, input="{}")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and p.stdout == ""


def test_settings_snippet_matches_the_docs():
    readme = (Path(__file__).resolve().parents[1] / "docs" / "claude-code.md").read_text()
    block = re.search(r"<!-- claude-code-settings -->\s*```json\n(.*?)```", readme, re.S)
    assert block, "docs/claude-code.md lacks the Claude Code settings snippet"
    assert json.loads(block.group(1)) == cc.settings_snippet("compactor")


def test_bad_threshold_setting_fails_open(monkeypatch):
    monkeypatch.setenv("COMPACTOR_HOOK_MIN_CHARS", "lots")
    d = payload("post_tool_use_toolu_e2e_2")
    d["tool_response"] = {"stdout": "x\n" * 20_000, "stderr": "", "interrupted": False, "isImage": False}
    out, err = run("post-tool-use", d)
    assert out == "" and "COMPACTOR_HOOK_MIN_CHARS" in err and err.count("\n") == 1


def test_small_outputs_are_compacted_above_a_lower_threshold(monkeypatch):
    monkeypatch.setenv("COMPACTOR_HOOK_MIN_CHARS", "100")
    lines = [f"Downloading package-{i} (1.{i}.0) ... done" for i in range(60)] + ["ERROR: package-60 not found"]
    d = payload("post_tool_use_toolu_e2e_2")
    d["tool_response"] = {"stdout": "\n".join(lines) + "\n", "stderr": "", "interrupted": False, "isImage": False}
    upd = json.loads(run("post-tool-use", d)[0])["hookSpecificOutput"]["updatedToolOutput"]
    assert "ERROR: package-60 not found" in upd["stdout"] and "ref c-" in upd["stdout"]
    assert "persistedOutputPath" not in upd and len(upd["stdout"]) < len(d["tool_response"]["stdout"])


def test_hook_fails_open_when_compactor_cannot_load(tmp_path):
    # a broken install: the hook module's import fails; the agent must not be blocked
    shim = tmp_path / "shim"
    (shim / "compactor" / "integrations").mkdir(parents=True)
    src = Path(cc.__file__).resolve().parents[1]
    (shim / "compactor" / "__init__.py").write_text("")
    (shim / "compactor" / "integrations" / "__init__.py").write_text("")
    (shim / "compactor" / "integrations" / "cli.py").write_text((src / "integrations" / "cli.py").read_text())
    (shim / "compactor" / "integrations" / "claude_code.py").write_text("raise ImportError('simulated broken install')\n")
    p = subprocess.run([sys.executable, "-c", "import sys; from compactor.integrations.cli import hook_main; "
                        "sys.exit(hook_main(['claude-code', 'post-tool-use']))"], input="{}", capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(shim)}, cwd=tmp_path, timeout=60)
    assert p.returncode == 0 and p.stdout == ""
    assert "simulated broken install" in p.stderr and "untouched" in p.stderr
