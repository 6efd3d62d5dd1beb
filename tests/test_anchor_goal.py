"""The goal is what the user asked for: a chat client's echo of a session command (/exit, /clear),
in whichever order the client writes its tags, is never the goal."""
from __future__ import annotations

import pytest
from test_anchor_runmodel import Run

from compactor.anchor import build_anchor, to_markdown
from compactor.models import Role

EXIT_NAME_FIRST = "<command-name>/exit</command-name>\n<command-message>exit</command-message>\n<command-args></command-args>"
EXIT_MESSAGE_FIRST = "<command-message>exit</command-message>\n<command-name>/exit</command-name>\n<command-args></command-args>"


def _goal(r: Run) -> str:
    return to_markdown(build_anchor(r.segs)).split("**Goal**:", 1)[1].split("\n", 1)[0].strip()


@pytest.mark.parametrize("echo", [EXIT_NAME_FIRST, EXIT_MESSAGE_FIRST])
def test_an_exit_echo_is_not_the_goal(echo):
    assert _goal(Run(task=echo).call("ls", "a.py\n")) == ""
    assert _goal(Run(task=echo).say("Fix the flaky test in test_io.py", role=Role.user)) == "Fix the flaky test in test_io.py"
    assert _goal(Run(task="Fix the flaky test in test_io.py").call("ls", "a\n").say(echo, role=Role.user)) == \
        "Fix the flaky test in test_io.py"


def test_a_request_command_keeps_its_arguments_as_the_goal_in_either_tag_order():
    for task in ("<command-name>/ask</command-name>\n<command-message>ask</command-message>\n"
                 "<command-args>why does the io test flake?</command-args>",
                 "<command-message>ask is running</command-message>\n<command-name>/ask</command-name>\n"
                 "<command-args>why does the io test flake?</command-args>"):
        assert _goal(Run(task=task).call("ls", "a\n")) == "why does the io test flake?"
