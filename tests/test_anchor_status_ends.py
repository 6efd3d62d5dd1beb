"""How a run ends decides its status line and its live failure: a missing tool at the end is the
live failure whatever shell reported it; the user interrupting the agent hands control back."""
from __future__ import annotations

import pytest
from test_anchor_runmodel import EDIT, Run

from compactor.anchor import build_anchor, build_run, to_markdown
from compactor.models import Role


def _head(r: Run) -> tuple[str, str]:
    md = to_markdown(build_anchor(r.segs))
    status = md.split("**Status**: ", 1)[1].split("\n", 1)[0]
    live = md.split("**Live failure**: ", 1)[1].split("\n", 1)[0]
    return status, live


@pytest.mark.parametrize("output", ["sh: 1: ./gradlew: not found\n", "/bin/sh: 3: ./gradlew: not found\n",
                                    "bash: line 1: ./gradlew: command not found\n"])
def test_a_missing_tool_at_the_end_is_the_live_failure_without_an_exit_code(output):
    status, live = _head(Run().call(EDIT, "", exit_code=0).call("./gradlew test", output, exit_code=None))
    assert "failed at s2" in status
    assert live.startswith("`") and "./gradlew" in live and "not found" in live


def test_a_not_found_line_inside_normal_output_is_not_a_failure_when_the_run_passed():
    status, live = _head(Run().call(EDIT, "", exit_code=0).call(
        "python app.py", "looking up sh: 1: x: not found in the log\nok\n", exit_code=0))
    assert "succeeded at s2" in status and live == "none"


def test_the_user_interrupting_the_agent_is_waiting_for_the_user():
    r = Run().call(EDIT, "", exit_code=0).call("python app.py", "ok\n").say("[Request interrupted by user]", role=Role.user)
    assert build_run(r.segs).status == "waiting"
    status, _ = _head(r)
    assert status.startswith("Waiting for the user at s3")
    # a message of the user after it puts the turn back to the agent
    r.say("go on, and also add a test", role=Role.user)
    assert build_run(r.segs).status == "working"


CORPUS = __import__("pathlib").Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"


@pytest.mark.skipif(not (CORPUS / "openhands-v0").is_dir(), reason="shared corpus not present")
def test_after_a_submission_nothing_is_left_to_do_but_the_live_failure_stays_on_record():
    from compactor import compact
    md = to_markdown(compact(CORPUS / "openhands-v0" / "ponylang__ponyc-4593.json").anchor)
    assert md.split("**Status**: ", 1)[1].startswith("Submitted")
    assert "did not appear verbatim" in md.split("**Live failure**: ", 1)[1].split("\n", 1)[0]
    assert md.split("**Open / next**:\n", 1)[1].startswith("- (none)")


HOOK = ("PreToolUse:Bash hook error: [uv run /home/u/.claude/hooks/pre_tool_use.py]: "
        "BLOCKED: Dangerous rm command detected and prevented")


def test_a_call_a_hook_blocked_binds_the_run_and_is_not_to_be_re_run():
    r = Run().call("rm -rf build vendor", HOOK, exit_code=None, is_error=True)
    a = build_anchor(r.segs)
    assert "BLOCKED: Dangerous rm command detected and prevented" in a.cursor.run.harness_rules
    md = to_markdown(a)
    cons = md.split("**Constraints**:", 1)[1].split("**Files**", 1)[0]
    assert "Harness rule: BLOCKED: Dangerous rm command detected and prevented" in cons
    nxt = md.split("**Open / next**:", 1)[1].split("**Key evidence**", 1)[0]
    assert "was refused (BLOCKED: Dangerous rm command detected and prevented)" in nxt
    assert "then re-run" not in nxt
    # an ordinary failure still asks for a re-run after the fix
    r2 = Run().call("python app.py", "Traceback (most recent call last):\nValueError: bad\n", exit_code=1)
    assert "then re-run `python app.py`" in to_markdown(build_anchor(r2.segs))
