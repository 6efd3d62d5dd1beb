"""The aider chat-history reader on the layouts aider writes: multi-line console messages (only
their first line carries '> '), '/run' / '/test' / '!' commands and '> Running <cmd>' blocks
tied to their output, 'Applied edit to' and 'Commit' lines, byte round trip, user turns never
collapsed."""

from __future__ import annotations

import compactor
from compactor import Compactor, load_document
from compactor.budget.measure import read_back
from compactor.formats import Edits, get_format

PYTEST_OUT = "".join(f"> tests/test_m{i}.py ......                                       [{i:3d}%]  \n" for i in range(40))

HISTORY = (
    "\n# aider chat started at 2025-09-22 12:04:00\n\n"
    "> Aider v0.83.1  \n"
    "> Main model: openrouter/deepseek/deepseek-chat-v3.1 with diff edit format  \n\n"
    "#### Please write a .sh file that runs these commands. Don't touch the README.  \n\n"
    "Here's a shell script:\n\n"
    "metrics_check.sh\n```bash\n<<<<<<< SEARCH\n=======\n#!/bin/bash\necho hi\n>>>>>>> REPLACE\n```\n\n"
    "> Tokens: 3.7k sent, 1.5k received. Cost: $0.0020 message, $0.0029 session.  \n"
    "> Applied edit to metrics_check.sh  \n"
    "> Commit e14ab36 feat: add script to check repository metrics  \n"
    "> export GITHUB_TOKEN=your_github_token_here\n"
    "export OWNER=repository_owner             \n"
    "./metrics_check.sh  \n"
    "> Run shell commands? (Y)es/(N)o/(D)on't ask again [Yes]: y  \n"
    "> Running ./metrics_check.sh  \n"
    "> Error: GITHUB_TOKEN environment variable is not set.  \n\n"
    "#### /run pytest -x  \n\n"
    "> ============================= test session starts ==============================  \n"
    + PYTEST_OUT +
    "> FAILED tests/test_metrics.py::test_count - AssertionError: assert 2 == 3  \n"
    "> Add the output to the chat? (Y)es/(N)o [Yes]: y  \n\n"
    "#### Fix the failing test, but keep the bash version.  \n\n"
    "I'll fix the count.\n"
)


def test_console_continuation_running_and_run_commands():
    doc = load_document(HISTORY)
    assert doc.format == "aider"
    tools = [s for s in doc.segments if s.kind.value == "tool_result"]
    # the multi-line console message stays in the console block, not in the assistant's reply
    edit = next(s for s in tools if "Applied edit to metrics_check.sh" in s.text)
    assert "export OWNER=repository_owner" in edit.text and "./metrics_check.sh" in edit.text
    assert "Commit e14ab36 feat: add script to check repository metrics" in edit.text
    assert not any(s.role.value == "assistant" and "export OWNER" in s.text for s in doc.segments)
    # '> Running <cmd>' opens a block of its own that carries the command
    running = next(s for s in tools if s.text.startswith("Running ./metrics_check.sh"))
    assert running.command == "./metrics_check.sh" and "GITHUB_TOKEN environment variable is not set" in running.text
    assert edit.command is None
    # the output of '/run pytest -x' carries its command
    run = next(s for s in tools if "test session starts" in s.text)
    assert run.command == "pytest -x"
    users = [s.text for s in doc.segments if s.role.value == "user"]
    assert users == ["Please write a .sh file that runs these commands. Don't touch the README.", "/run pytest -x",
                     "Fix the failing test, but keep the bash version."]


def test_round_trip_and_rewrite_keep_the_blocks():
    doc = load_document(HISTORY)
    fmt = get_format("aider")
    assert fmt.write(doc) == HISTORY
    run = next(s for s in doc.segments if s.command == "pytest -x")
    out = fmt.write(doc, Edits(replace={run.id: "[pytest: 240 passed, 1 failed · ref c-0123456789abcdef]"}))
    back = read_back("aider", out)
    assert [(s.role, s.kind) for s in back.segments] == [(s.role, s.kind) for s in doc.segments]
    running = next(s for s in doc.segments if s.text.startswith("Running "))
    out = fmt.write(doc, Edits(replace={running.id: "Running ./metrics_check.sh\n[1 line]"}))
    assert next(s for s in read_back("aider", out).segments if s.text.startswith("Running ")).command == "./metrics_check.sh"


LATER = "".join(f"#### /run pytest -k part{i}  \n\n> ============================= test session starts ==============================  \n"
                + PYTEST_OUT + f"> 240 passed in 1.{i}s  \n\n" for i in range(12))


def test_compaction_collapses_the_run_output_and_keeps_user_turns(tmp_path):
    comp = Compactor(store=str(tmp_path / "s"))
    res = comp.compact(HISTORY + LATER)
    assert res.format == "aider"
    out = res.messages
    for user in ("#### Please write a .sh file that runs these commands. Don't touch the README.",
                 "#### /run pytest -x", "#### Fix the failing test, but keep the bash version."):
        assert user in out
    assert "FAILED tests/test_metrics.py::test_count - AssertionError: assert 2 == 3" in out
    assert "Error: GITHUB_TOKEN environment variable is not set." in out
    assert res.report.tokens_after < res.report.tokens_before
    # under a budget the failure is told by its command
    count = compactor.get_counter().count
    res = comp.compact(HISTORY + LATER, budget=count(HISTORY + LATER) // 10)
    assert "pytest -x" in res.messages and "./metrics_check.sh" in res.messages
    assert "#### Fix the failing test, but keep the bash version." in res.messages


def test_corpus_history_round_trips(corpus):
    path = corpus / "aider" / "zen-mcp-server.aider.chat.history.md"
    text = path.read_text(encoding="utf-8")
    doc = load_document(text)
    assert get_format("aider").write(doc) == text
    assert all("#### " not in s.text for s in doc.segments if s.role.value == "user")
