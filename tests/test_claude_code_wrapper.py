"""The PreToolUse Bash wrapper, run by bash exactly the way Claude Code runs a command
(``eval '<command>' && pwd -P >| <cwd file>``), against the same command run unwrapped: same exit
code, same output for short outputs, same directory afterwards; and a long failing output shown
as a Level 1 compaction that holds its final error. Fails open when compactor is missing."""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compactor.integrations import claude_code as cc

EXE = str(Path(sys.executable).with_name("compactor"))
BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed")


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTOR_STORE", str(tmp_path / "store.sqlite"))
    monkeypatch.setenv("COMPACTOR_HOOK_DIR", str(tmp_path / "hookdir"))
    cc._compactor_cache.clear()


def claude_code_shell(command: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, Path]:
    """Run one Bash tool call as Claude Code 2.1.332 does; returns (exit code, output, cwd after)."""
    cwd_file = cwd.parent / f"{cwd.name}.cwd-after"
    cwd_file.unlink(missing_ok=True)
    script = f"eval {shlex.quote(command)} && pwd -P >| {shlex.quote(str(cwd_file))}"
    p = subprocess.run([BASH, "-c", script], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120, stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    after = Path(cwd_file.read_text().strip()) if cwd_file.exists() else cwd
    return p.returncode, p.stdout, after  # one stream in time order, as Claude Code shows it


def wrapped(command: str, tool_use_id: str = "toolu_w_1", exe: str = EXE) -> str:
    ans = cc.pre_tool_use({"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": tool_use_id,
                           "tool_input": {"command": command, "description": "d"}}, exe=exe)
    out = ans["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse"
    assert "permissionDecision" not in out  # the hook grants nothing: Claude Code's rules still judge
    assert out["updatedInput"]["description"] == "d"
    return out["updatedInput"]["command"]


CASES = [
    "echo 'single \"quoted\" $HOME' \"double 'q' $((1+2))\"",
    "printf '%s\\n' a b c | sort -r | head -2",
    "cat <<'EOF'\nline one $NOT_EXPANDED\n  indented `tick`\nEOF",
    "cat <<EOF | tr a-z A-Z\nhello $((6*7))\nEOF",
    "true && echo and-ran || echo or-ran",
    "false && echo no || echo fallback",
    "(cd / && pwd); pwd | sed 's|.*/||'",
    "FOO=bar sh -c 'echo $FOO'; echo \"[${FOO:-unset}]\"",
    "X=1; export Y=2; echo $X$Y",
    "echo to-stderr >&2; echo to-stdout",
    "for i in 1 2 3; do echo $i; done # trailing comment",
    "case x in x) echo matched ;; *) echo no ;; esac",
    "echo $'tab\\there'; echo \"$(echo nested $(echo deeper))\"",
    "f() { echo in-function \"$1\"; }; f arg",
    "exit 3",
    "echo before; exit 0",
    "echo partial; false",
    "sh -c 'exit 7'",
    "echo '__weird }' ; echo ')' ",
    "ls does-not-exist-dir",
    "set -e; echo one; false; echo never",
    "exec sh -c 'echo replaced; exit 5'",
    "printf 'caf\\303\\251 \\342\\234\\223 %s\\n' ok; printf 'no newline at end'",
    "trap 'echo their-trap' EXIT; echo body",
]


@pytest.mark.parametrize("command", CASES)
def test_wrapper_behaves_like_the_command(command, tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    rc0, out0, _ = claude_code_shell(command, work)
    rc1, out1, _ = claude_code_shell(wrapped(command), work)
    assert rc1 == rc0, (command, out0, out1)
    assert out1 == out0, (command, out0, out1)
    assert not list((tmp_path / "hookdir" / "runs").glob("*.out")), "capture file left behind"


@pytest.mark.parametrize("command, rel", [
    ("mkdir -p sub/dir && cd sub/dir", "sub/dir"),
    ("cd sub2 2>/dev/null || { mkdir sub2; cd sub2; }; echo here", "sub2"),
    ("mkdir -p a && cd a && false", "."),  # a failing command keeps no directory (as unwrapped)
    ("mkdir -p b && cd b && exit 0", "."),  # exit skips Claude Code's pwd as well
])
def test_cd_persists_exactly_as_unwrapped(command, rel, tmp_path):
    for name in ("plain", "wrapped"):
        (tmp_path / name).mkdir()
    _, _, after0 = claude_code_shell(command, tmp_path / "plain")
    _, _, after1 = claude_code_shell(wrapped(command), tmp_path / "wrapped")
    assert after0 == (tmp_path / "plain" / rel).resolve()
    assert after1 == (tmp_path / "wrapped" / rel).resolve()


JOB = """\
import sys
for i in range(3000):
    print(f"processing record {i}: ok")
print("Traceback (most recent call last):")
print('  File "/srv/job/run.py", line 88, in <module>')
print("    main()")
print("ValueError: boom: record 3000 has no checksum", file=sys.stderr)
sys.exit(1)
"""
FINAL_ERROR = "ValueError: boom: record 3000 has no checksum"


def test_long_failing_command_shows_its_final_error(tmp_path):
    (tmp_path / "job.py").write_text(JOB)
    rc0, out0, _ = claude_code_shell("python3 job.py", tmp_path)
    rc, out, _ = claude_code_shell(wrapped("python3 job.py"), tmp_path)
    assert rc == rc0 == 1
    assert len(out0) > 75_000
    assert out.startswith("[compactor: ")
    assert FINAL_ERROR in out and "Traceback (most recent call last):" in out
    assert 'File "/srv/job/run.py", line 88' in out
    assert len(out) <= cc.FAILURE_INLINE_LIMIT  # shown whole by Claude Code for a failure
    assert "processing record 1500: ok" not in out
    ref = next(w for w in out.replace("]", " ").split() if w.startswith("c-"))
    exp = subprocess.run([EXE, "expand", ref], capture_output=True, text=True, timeout=60)
    assert exp.returncode == 0 and "processing record 1500: ok" in exp.stdout


def test_long_succeeding_output_is_compacted_under_the_inline_limit(tmp_path):
    cmd = "for i in $(seq 1 4000); do echo \"copying file $i of 4000 ... done\"; done; echo 'summary: 4000 files, 0 errors'"
    rc, out, _ = claude_code_shell(wrapped(cmd), tmp_path)
    assert rc == 0 and out.startswith("[compactor: ") and len(out) < cc.INLINE_LIMIT
    assert "summary: 4000 files, 0 errors" in out


def test_fails_open_when_compactor_is_missing(tmp_path):
    (tmp_path / "job.py").write_text(JOB)
    rc0, out0, _ = claude_code_shell("python3 job.py", tmp_path)
    rc, out, _ = claude_code_shell(wrapped("python3 job.py", exe=str(tmp_path / "no-such-compactor")), tmp_path)
    assert (rc, out) == (rc0, out0)


def test_fails_open_when_compactor_breaks(tmp_path):
    broken = tmp_path / "broken-compactor"
    broken.write_text("#!/bin/sh\necho 'compactor: crashed' >&2\nexit 70\n")
    broken.chmod(0o755)
    (tmp_path / "job.py").write_text(JOB)
    rc0, out0, _ = claude_code_shell("python3 job.py", tmp_path)
    rc, out, _ = claude_code_shell(wrapped("python3 job.py", exe=str(broken)), tmp_path)
    assert rc == rc0 and out == "compactor: crashed\n" + out0


def test_fails_open_when_the_capture_file_cannot_be_written(tmp_path):
    cmd = wrapped("mkdir -p sub && cd sub && echo out; echo err >&2; exit 4")
    (out_file,) = (tmp_path / "hookdir" / "runs").glob("*.out")
    out_file.unlink()
    out_file.mkdir()  # not writable as a file, even for root
    rc0, out0, _ = claude_code_shell("mkdir -p sub && cd sub && echo out; echo err >&2; exit 4", tmp_path / "hookdir")
    rc, out, _ = claude_code_shell(cmd, tmp_path)
    assert (rc, out) == (rc0, out0) == (4, "out\nerr\n")


def test_output_refuses_paths_it_did_not_make(tmp_path, capsys):
    secret = tmp_path / "secret"
    secret.write_text("x" * 10)
    (tmp_path / "secret.out").write_text("not ours")
    buf = io.BytesIO()
    err = io.StringIO()
    assert cc.print_captured(str(secret), "0", stdout=buf, stderr=err) == 1
    assert buf.getvalue() == b"" and "not a capture file" in err.getvalue()


def test_left_alone():
    base = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "t"}
    for p in ({**base, "tool_name": "Read", "tool_input": {"file_path": "/x"}},
              {**base, "tool_input": {"command": "sleep 100", "run_in_background": True}},
              {**base, "tool_input": {"command": "   "}},
              {**base, "tool_input": {"command": wrapped("echo once")}}):
        with pytest.raises(cc.HookSkip):
            cc.pre_tool_use(p, exe=EXE)


def test_opt_out_by_environment(monkeypatch):
    monkeypatch.setenv("COMPACTOR_HOOK_WRAP", "0")
    with pytest.raises(cc.HookSkip):
        cc.pre_tool_use({"tool_name": "Bash", "tool_input": {"command": "echo"}}, exe=EXE)


def test_hook_command_end_to_end_json(tmp_path):
    payload = {"session_id": "s1", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "toolu_9",
               "tool_input": {"command": "echo hi", "description": "say hi", "timeout": 5000}}
    env = {**os.environ, "COMPACTOR_HOOK_DIR": str(tmp_path / "hd")}
    p = subprocess.run([EXE, "hook", "claude-code", "pre-tool-use"], input=json.dumps(payload), env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stderr == ""
    ans = json.loads(p.stdout)["hookSpecificOutput"]
    assert ans["updatedInput"]["timeout"] == 5000 and "echo hi" in ans["updatedInput"]["command"]
    rc, out, _ = claude_code_shell(ans["updatedInput"]["command"], tmp_path, env={"COMPACTOR_HOOK_DIR": str(tmp_path / "hd")})
    assert (rc, out) == (0, "hi\n")
    # a broken payload: nothing on stdout (the command runs unchanged), the reason on stderr, exit 0
    p = subprocess.run([EXE, "hook", "claude-code", "pre-tool-use"], input="{not json", env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout == "" and "left the" in p.stderr



def test_install_adds_the_pre_tool_use_hook_next_to_others(tmp_path):
    cfg = tmp_path / "claude-config"
    cfg.mkdir()
    theirs = {"matcher": "Bash", "hooks": [{"type": "command", "command": "/usr/local/bin/guard-rm"}]}
    (cfg / "settings.json").write_text(json.dumps({"permissions": {"deny": ["Bash(rm -rf:*)"]},
                                                   "hooks": {"PreToolUse": [theirs]}}))
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(cfg)}
    for _ in range(2):  # the second install changes nothing
        p = subprocess.run([EXE, "hook", "claude-code", "install", "--user"], env=env, capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0, p.stderr
    s = json.loads((cfg / "settings.json").read_text())
    assert s["permissions"] == {"deny": ["Bash(rm -rf:*)"]}
    assert s["hooks"]["PreToolUse"][0] == theirs
    ours = s["hooks"]["PreToolUse"][1]
    assert ours["matcher"] == "Bash" and ours["hooks"][0]["command"] == f"{EXE} hook claude-code pre-tool-use"
    assert len(s["hooks"]["PreToolUse"]) == 2 and "already installed" in p.stdout
