"""Handing the work in does not fix what is still failing: an error of a check or a project file
seen after the last change stays the live failure; one a later change moved past, a command the
shell could not parse, a slip typed into an interpreter's stdin, do not."""

from __future__ import annotations

import json

import pytest
from conftest import tune_run

from compactor import compact



def test_a_reproduction_failing_on_the_submitted_code_is_live():
    a = compact(tune_run("trajectories-extra/swe-agent/sympy-21612.traj")).anchor
    assert a.cursor.run.status == "submitted"
    assert "TypeError: 'NoneType' object is not callable" in a.live_failure
    assert "_parse_latex_antlr.py:73" in a.live_failure


def test_a_slip_typed_into_stdin_before_hand_in_is_not_live():
    a = compact(tune_run("trajectories-extra/mini-swe-agent/pytest-7521.gpt-5-mini.traj.json")).anchor
    assert a.cursor.run.status == "submitted"
    assert a.live_failure == "none"


def _call(cid: str, cmd: str) -> dict:
    return {"role": "assistant", "content": "Next.", "tool_calls": [{"id": cid, "type": "function", "function": {
        "name": "bash", "arguments": json.dumps({"command": cmd})}}]}


def _run(edit_after: bool) -> list[dict]:
    msgs = [{"role": "user", "content": "Fix the crash of parse() in /repo/app.py."},
            _call("c0", "sed -i 's/int(x)/int(x.strip())/' /repo/app.py"),
            {"role": "tool", "tool_call_id": "c0", "content": ""},
            _call("c1", "python /repo/repro.py"),
            {"role": "tool", "tool_call_id": "c1", "content": "Traceback (most recent call last):\n"
             "  File \"/repo/app.py\", line 3, in parse\n    return int(x)\n"
             "ValueError: invalid literal for int() with base 10: 'a'"}]
    if edit_after:
        msgs += [_call("c2", "sed -i 's/strict=True/strict=False/' /repo/config.py"),
                 {"role": "tool", "tool_call_id": "c2", "content": ""}]
    msgs += [_call("c3", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"),
             {"role": "tool", "tool_call_id": "c3", "content": "diff --git a/app.py b/app.py"}]
    return msgs


def test_an_error_a_later_change_moved_past_is_stale_at_hand_in():
    a = compact(_run(edit_after=True), format="openai-chat").anchor
    assert a.cursor.run.status == "submitted"
    assert a.live_failure == "none"
    assert [e.state for e in a.cursor.run.errors] == ["stale"]


def test_the_same_error_with_no_change_after_it_is_live_at_hand_in():
    # (the change came before the failing run: the handed-in code is what failed)
    a = compact(_run(edit_after=False), format="openai-chat").anchor
    assert a.cursor.run.status == "submitted"
    assert "ValueError: invalid literal for int()" in a.live_failure
