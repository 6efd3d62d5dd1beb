"""The run model and the sections derived from it (issue 32's failure classes, by construction)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from compactor.anchor import PRIORITY, build_anchor, build_run, merge, to_json, to_markdown, to_seed_json
from compactor.anchor.bound import PRIORITY as BOUND_PRIORITY, DEFAULT_MAX_TOKENS
from compactor.anchor.cues import LABELS, label_sentence
from compactor.anchor.render import SEED_FIELDS
from compactor.anchor.runmodel import RunFold, command_family, error_of
from compactor.anchor.sections import live_failure, status_line
from compactor.formats import load_document
from compactor.models import Anchor, Role, Segment, SegmentKind


class Run:
    """A trajectory written step by step: calls with their results as a tool reports them."""

    def __init__(self, task: str = "Fix the crash in app.py.", system: str = "") -> None:
        self.segs: list[Segment] = []
        self.step = 0
        if system:
            self._add(Role.system, SegmentKind.message, system)
        self._add(Role.user, SegmentKind.message, task)

    def _add(self, role, kind, text, **kw) -> None:
        i = len(self.segs)
        self.segs.append(Segment(id=f"m{i}", index=i, step=self.step, step_id=f"s{self.step}", role=role, kind=kind,
                                 text=text, **kw))

    def call(self, command: str, output: str, *, exit_code: int | None = 0, tool: str = "bash",
             is_error: bool | None = None, say: str = "") -> "Run":
        self.step += 1
        if say:
            self._add(Role.assistant, SegmentKind.message, say)
        cid = f"c{self.step}"
        self._add(Role.assistant, SegmentKind.tool_call, json.dumps({"command": command}), call_id=cid,
                  tool_name=tool, command=command)
        self._add(Role.tool, SegmentKind.tool_result, output, call_id=cid, tool_name=tool, command=command,
                  exit_code=exit_code, is_error=is_error if is_error is not None else (
                      exit_code not in (0, None)))
        return self

    def say(self, text: str, role: Role = Role.assistant) -> "Run":
        self.step += 1
        self._add(role, SegmentKind.message, text)
        return self

    def meta(self, text: str) -> "Run":
        self.step += 1
        self._add(Role.system, SegmentKind.message, text, meta=True)
        return self


TRACE = ('Traceback (most recent call last):\n  File "app.py", line 12, in <module>\n    main()\n'
         '  File "app.py", line 9, in main\n    return 1 / n\nZeroDivisionError: division by zero\n')
EDIT = "cat > app.py <<'EOF'\nn = 1\nprint(1 / n)\nEOF"


def _anchor(run: Run) -> Anchor:
    return build_anchor(run.segs)


# ------------------------------------------------------------------ class 1: stale errors never live


def test_error_fixed_and_rerun_is_resolved_not_live():
    r = Run().call("python app.py", TRACE, exit_code=1).call("sed -i 's/0/1/' app.py", "").call("python app.py", "1.0\n")
    m = build_run(r.segs)
    assert [e.state for e in m.errors] == ["resolved"]
    a = _anchor(r)
    assert a.live_failure == "none"
    assert not any(e.status == "live" and "ZeroDivisionError" in e.text for e in a.key_evidence)
    assert not any("ZeroDivisionError" in n.text for n in a.next_steps if n.status == "pending")


def test_error_then_change_without_rerun_is_stale_and_next_step_reruns():
    r = Run().call("python app.py", TRACE, exit_code=1).call("sed -i 's/0/1/' app.py", "")
    a = _anchor(r)
    m = a.cursor.run
    assert m.errors[0].state == "stale" and m.errors[0].at == "s2"
    assert a.live_failure == "none"
    pending = [n.text for n in a.next_steps if n.status == "pending"]
    assert any(t.startswith("check the change of s2: re-run `python app.py`") for t in pending), pending


def test_error_live_until_changed_and_then_live_again_when_it_fails_again():
    r = Run().call("python app.py", TRACE, exit_code=1)
    assert "ZeroDivisionError: division by zero" in _anchor(r).live_failure
    assert "(app.py:9)" in _anchor(r).live_failure
    r.call("sed -i 's/0/1/' app.py", "").call("python app.py", TRACE, exit_code=1)
    m = build_run(r.segs)
    assert m.errors[0].state == "live" and m.errors[0].count == 2


def test_errors_before_submission_are_not_live():
    r = Run().call("python app.py", TRACE, exit_code=1).call(
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff", "diff --git a/app.py b/app.py\n")
    a = _anchor(r)
    assert a.cursor.run.status == "submitted"
    assert a.live_failure == "none"
    assert a.status.startswith("Submitted at s2")


def test_file_restored_from_backup_is_not_a_change_and_its_error_is_stale():
    r = Run().call("cp app.py app.py.bak && sed -i 's/n = 1/n = 0/' app.py", "").call(
        "python app.py", TRACE, exit_code=1).call("cp app.py.bak app.py", "")
    m = build_run(r.segs)
    assert {f.path: f.change for f in m.files}["app.py"] == "reverted"
    assert m.errors[0].state == "stale"
    a = _anchor(r)
    assert not any("app.py" in c.files for c in a.changes_made)  # restored: no net change
    assert any("app.py" in f.path for f in a.files_touched)  # the trail still shows it was touched


# ------------------------------------------------------------------ class 2: status from outcomes


def test_failed_install_exit_100_is_a_failed_change_never_applied():
    r = Run().call("apt-get install -y libfoo-dev", "E: Unable to locate package libfoo-dev\n", exit_code=100)
    a = _anchor(r)
    m = a.cursor.run
    assert m.steps[0].action == "install" and not m.steps[0].ok
    assert not any(c.status == "applied" and "libfoo" in c.description for c in a.changes_made)
    assert "E: Unable to locate package libfoo-dev" in a.live_failure
    # the exit code printed by the harness, and the failed attempt's error is the tool's, not chrome
    r2 = Run().call("apt-get install -y libfoo-dev", "Reading package lists...\nE: Unable to locate package libfoo-dev\n"
                    "[Command finished with exit code 100]", exit_code=None, is_error=False)
    a2 = _anchor(r2)
    assert [c.status for c in a2.changes_made if "libfoo" in c.description] == ["failed"]
    assert a2.cursor.run.steps[0].exit_code == 100
    r3 = Run().call("apt-get install -y libfoo-dev", "Reading package lists...\nE: Unable to locate package libfoo-dev\n",
                    exit_code=100)
    fa = _anchor(r3).failed_attempts
    assert fa and all(f.error == "E: Unable to locate package libfoo-dev" for f in fa)


def test_step_limit_and_api_error_are_the_status():
    r = Run().call("python app.py", TRACE, exit_code=1).meta("Exit due to cost limit: LimitsExceeded")
    a = _anchor(r)
    assert a.cursor.run.status == "stopped-limit"
    assert a.status.startswith("Stopped by a step or cost limit at s2")
    r2 = Run().call("ls", "app.py\n").meta("InternalServerError: upstream model unavailable")
    assert build_run(r2.segs).status == "stopped-error"
    # the task's own output naming a limit is not the harness stopping the run
    r3 = Run().call("python app.py", "RateLimitError: step limit reached in the client under test\n", exit_code=0)
    assert build_run(r3.segs).status == "working"


def test_call_without_result_is_pending_not_done():
    r = Run().call("python app.py", TRACE, exit_code=1)
    r.step += 1
    r._add(Role.assistant, SegmentKind.tool_call, "{}", call_id="late", tool_name="bash", command="make build")
    m = build_run(r.segs)
    assert m.steps[-1].target == "make build" and not m.steps[-1].done
    assert "no result yet" in status_line(m)


def test_finished_with_and_without_evidence():
    r = Run().call(EDIT, "").call("python -m pytest tests/test_app.py", "===== 3 passed in 0.10s =====\n")
    r.say("All tests pass. The task is complete.")
    a = _anchor(r)
    assert a.status.startswith("Finished at s3 (evidence: `python -m pytest tests/test_app.py` succeeded at s2, 3 passed")
    r2 = Run().call("python -m pytest", "===== 3 passed in 0.10s =====\n").call(EDIT, "").say("Done.")
    assert "no passing check after the last change" in _anchor(r2).status


def test_waiting_for_the_user():
    r = Run().call("ls", "app.py\n").say("I found two configs. Which one should I change, prod or staging?")
    m = build_run(r.segs)
    assert m.status == "waiting" and "Which one" in m.status_note


# ------------------------------------------------------------------ class 3: thinking aloud is not state


@pytest.mark.parametrize("text,label", [
    ("Is that really right, though?", "noise"),
    ("Hmm, why does this fail?", "noise"),
    ("Would you like me to also update the docs?", "question"),
    ("I decided to keep SQLite because the tests need no server.", "decision"),
    ("The patch did not work.", "rejected"),
    ("Next, I will run the full test suite.", "plan"),
    ("All tests pass.", "status"),
    ("# TODO: handle this later", "noise"),
    ("不要用 TypeScript。", "noise"),
])
def test_label_sentence(text, label):
    assert label_sentence(text, {"role": "assistant"}) == label
    assert label in LABELS


def test_label_sentence_user_constraints_english_and_chinese():
    assert label_sentence("Do not modify the tests.", {"role": "user"}) == "constraint"
    assert label_sentence("不要用 TypeScript，必须兼容 IE11。", {"role": "user"}) == "constraint"


def test_user_rules_given_mid_run_are_constraints_and_their_questions_are_not():
    r = Run(task="Add the export command.").call("ls", "app.py\n")
    for said in ("stop committing everything", "no deprecation alias!",
                 "i want the example to use the flash provider, so we show how to fetch another model",
                 "don't we load all entries on construction?", "No problem!",
                 "can you make sure the tests/ folder stays untouched?"):
        r.say(said, role=Role.user).call("ls", "app.py\n")
    a = _anchor(r)
    got = [c.text for c in a.user_constraints]
    for want in ("stop committing everything", "no deprecation alias!",
                 "i want the example to use the flash provider, so we show how to fetch another model",
                 "can you make sure the tests/ folder stays untouched?"):
        assert any(want in c for c in got), want
    assert not any("load all entries" in c or "No problem" in c for c in got)
    # verbatim in both languages' renderings
    for lang in ("en", "zh"):
        assert "stop committing everything" in to_markdown(a, lang)


def test_format_reminder_is_a_harness_rule_not_the_goal_nor_a_rejection():
    nudge = "No tool calls found in the response. Every response MUST include at least one tool call."
    r = Run(task="Fix the crash in app.py when n is zero.").call("ls", "app.py\n")
    r.say(nudge, role=Role.user).call("python app.py", "ok\n")
    a = _anchor(r)
    assert "Every response MUST include at least one tool call." in to_json(a)["harness_constraints"]
    md = to_markdown(a)
    goal = next(ln for ln in md.splitlines() if ln.startswith("**Goal**"))
    assert "Fix the crash in app.py" in goal and "No tool calls" not in goal
    assert not any("No tool calls" in x.text for x in a.excluded_approaches)
    assert not any("No tool calls" in c.text for c in a.user_constraints)
    # nor the newest request the self-check falls back to
    from compactor.audit.common import newest_request
    assert newest_request(r.segs).text.startswith("Fix the crash")
    # nor is a harness's label over tool results, said in the user's place
    r2 = Run(task="Wire the e2e commands into verification.").call("ls", "a\n")
    r2.say("Tool execution results", role=Role.user).call("bun test", "401 pass\n")
    assert "Wire the e2e commands" in next(ln for ln in to_markdown(_anchor(r2)).splitlines() if ln.startswith("**Goal**"))
    assert newest_request(r2.segs).text.startswith("Wire the e2e")
    # the goal is not the HTML comment of a PR template
    task = ("<!-- Please check the contributing guidelines before opening a pull request. Please be sure to read them. -->\n"
            "Parser drops the sign of negative exponents\n\nDescription\n" + "The value is parsed wrongly. " * 30)
    goal = next(ln for ln in to_markdown(_anchor(Run(task=task).call("ls", "a\n"))).splitlines()
                if ln.startswith("**Goal**"))
    assert "Parser drops the sign" in goal and "contributing" not in goal


def test_editor_view_is_a_read_and_its_edit_an_edit():
    # SWE-agent's tool bundle: the editor's call is a command line, not JSON arguments
    r = Run()
    for cmd, out in (("str_replace_editor view /w/app.py", "1\tn = 0\n"),
                     ("str_replace_editor str_replace /w/app.py --old_str 'n = 0' --new_str 'n = 1'", "edited\n")):
        r.step += 1
        cid = f"c{r.step}"
        r._add(Role.assistant, SegmentKind.tool_call, f"<function=str_replace_editor>{cmd}</function>", call_id=cid,
               tool_name="str_replace_editor", command=cmd)
        r._add(Role.tool, SegmentKind.tool_result, out, call_id=cid, tool_name="str_replace_editor", command=cmd)
    run = build_run(r.segs)
    assert [s.action for s in run.steps] == ["read", "edit"]
    assert run.last_change_step == "s2"
    assert [(f.path, f.actions) for f in _anchor(r).files_touched] == [("/w/app.py", ["read", "modified"])]


def test_a_call_the_user_refused_is_no_failure_and_an_elided_line_no_fact():
    r = Run().call("gh repo view --json url", "The user doesn't want to proceed with this tool use. The tool use was "
                   "rejected (eg. if it was a file edit, the new_string was NOT written to the file).", exit_code=None,
                   is_error=True)
    run = build_run(r.segs)
    assert live_failure(run) is None and run.errors == []
    assert "none" in to_markdown(_anchor(r)).split("**Live failure**", 1)[1].split("\n", 1)[0]
    r2 = Run().call("grep -rn acquire .", "cov.json:141:[Omitted long matching line]\napp.py:3:pool.acquire()\n")
    a2 = _anchor(r2)
    facts = [f.text for f in a2.facts_learned]
    assert any("pool.acquire()" in f for f in facts) or "Omitted long" not in to_markdown(a2)
    assert not any("Omitted long" in f for f in facts)


def test_a_commit_change_names_the_commit_id_git_printed():
    r = Run().call(EDIT, "").call("git add app.py && git commit -m 'Guard the zero divisor'",
                                  "[feat/zero 1a2b3c4d] Guard the zero divisor\n 1 file changed, 1 insertion(+)\n")
    a = _anchor(r)
    assert any("commit 1a2b3c4d “Guard the zero divisor”" in c.description for c in a.changes_made)
    for lang in ("en", "zh"):
        assert "1a2b3c4d" in to_markdown(a, lang)


def test_a_slash_command_echo_is_the_command_and_a_local_shell_echo_no_request():
    r = Run(task="Let sessions start with the skip-permissions flag.").call("ls", "a\n")
    r.say("<bash-input>pwd</bash-input>", role=Role.user).say("<bash-stdout>/w/dmux</bash-stdout><bash-stderr></bash-stderr>",
                                                             role=Role.user)
    a = _anchor(r)
    assert not any("pwd" in it.text or "bash-stdout" in it.text for it in a.intent.history)
    r.say("<command-message>git-tools:commit-and-push is running…</command-message>\n"
          "<command-name>/git-tools:commit-and-push</command-name>", role=Role.user)
    goal = next(ln for ln in to_markdown(_anchor(r)).splitlines() if ln.startswith("**Goal**"))
    assert goal == "**Goal**: /git-tools:commit-and-push"


def test_an_issue_a_task_tool_hands_out_is_the_goal_when_no_one_asked():
    r = Run.__new__(Run)
    r.segs, r.step = [], 0
    r.call("issue_ready", json.dumps({"number": 703, "title": "Add a diff viewer to the PR page", "description": "x"}),
           tool="mcp__issues__issue_ready")
    r.call("cat src/views.rs", "fn main() {}\n")
    goal = next(ln for ln in to_markdown(_anchor(r)).splitlines() if ln.startswith("**Goal**"))
    assert goal == "**Goal**: #703 Add a diff viewer to the PR page"
    # merged step by step, the same anchor
    a = build_anchor([])
    for seg in r.segs:
        a = merge(a, [seg])
    assert a.model_dump() == _anchor(r).model_dump()
    # a user's request wins; another tool's JSON with a title is not a task
    asked = Run(task="Fix the login redirect.").call("issue_view", json.dumps({"number": 9, "title": "Old bug"}),
                                                     tool="mcp__issues__issue_view")
    assert "Fix the login redirect" in next(ln for ln in to_markdown(_anchor(asked)).splitlines()
                                            if ln.startswith("**Goal**"))
    other = Run.__new__(Run)
    other.segs, other.step = [], 0
    other.call("fetch", json.dumps({"title": "Example Domain"}), tool="web_fetch")
    assert "Example Domain" not in to_markdown(_anchor(other))


def test_rhetorical_question_is_not_an_open_question():
    r = Run().call("python app.py", "1.0\n", say="Is that really right, though? Let me check the output again.")
    a = _anchor(r)
    assert not any("really right" in q.text for q in a.open_questions if q.status == "open")


# ------------------------------------------------------------------ class 4: misfiled approaches


def test_successful_call_whose_output_says_error_is_not_a_failed_attempt():
    out = "test_errors.py::test_error_message PASSED\nError handling verified\n===== 1 passed in 0.01s =====\n"
    r = Run().call("python -m pytest test_errors.py", out, exit_code=0)
    a = _anchor(r)
    assert not a.failed_attempts
    assert a.live_failure == "none"


def test_output_mentioning_error_without_exit_code_is_not_a_failure_unless_it_ends_on_one():
    r = Run().call("python check.py", "Checking...\nError: none found\nDone\n", exit_code=None, is_error=False)
    assert _anchor(r).live_failure == "none" and not _anchor(r).failed_attempts
    r2 = Run().call("python check.py", "Checking...\nError: config.yaml is missing\n", exit_code=None, is_error=False)
    assert "Error: config.yaml is missing" in _anchor(r2).live_failure


def test_no_match_search_and_nothing_to_commit_are_not_failures():
    r = Run().call("grep -rn missing_name src/", "", exit_code=1).call("git commit -am wip",
                                                                      "nothing to commit, working tree clean\n",
                                                                      exit_code=1)
    m = build_run(r.segs)
    assert all(s.ok for s in m.steps) and not m.errors


# ------------------------------------------------------------------ class 5: chrome is not an error


def test_debconf_frontend_warning_is_not_the_live_failure():
    out = ("debconf: unable to initialize frontend: Dialog\ndebconf: (TERM is not set, so the dialog frontend is not "
           "usable.)\ndebconf: falling back to frontend: Readline\nSetting up libfoo (1.2) ...\n")
    r = Run().call("apt-get install -y libfoo", out, exit_code=0)
    a = _anchor(r)
    assert a.live_failure == "none" and not a.failed_attempts
    assert error_of(out) == ("", "")
    # a failure whose output ends on a package manager's notice: the notice is not the error
    r2 = Run().call("pip download foo", "could not reach the package index\n[notice] A new release of pip is "
                    "available: 23.0 -> 24.0\n", exit_code=2)
    assert "could not reach the package index" in _anchor(r2).live_failure
    assert "[notice]" not in _anchor(r2).live_failure


# ------------------------------------------------------------------ class 6: constraints of the harness


HARNESS = ("You are a helpful assistant that can interact with a computer.\n"
           "Tips: it can be useful to look at the tests first.\n"
           "IMPORTANT: Do not modify the tests in tests/.\n"
           "Remember, YOU CAN ONLY ENTER ONE COMMAND AT A TIME. Wait for feedback after every command.\n"
           "When you are done, submit your work by running `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`.\n")


def test_binding_harness_lines_are_constraints_and_boilerplate_is_not():
    r = Run(system=HARNESS).call("ls", "app.py\n")
    a = _anchor(r)
    # kept apart from the user's own constraints, rendered in the same section
    texts = to_json(a)["harness_constraints"]
    assert a.user_constraints == [] or not any("ONE COMMAND" in c.text for c in a.user_constraints)
    assert any("Do not modify the tests" in t for t in texts)
    assert "Remember, YOU CAN ONLY ENTER ONE COMMAND AT A TIME." in texts
    assert any("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in t for t in texts)
    assert not any("Tips" in t or "helpful assistant" in t for t in texts)
    for lang, label in (("en", "- Harness rule: "), ("zh", "- 运行环境规则：")):
        md = to_markdown(a, lang)
        block = md[md.index("**Constraints**" if lang == "en" else "**用户约束**"):]
        assert f"{label}Remember, YOU CAN ONLY ENTER ONE COMMAND AT A TIME." in block


HARNESS_WIDE = """You are an assistant that works in a shell.
Your task is to make the minimal changes to non-test files in the /repo directory so the issue is fixed.
You DON'T have to modify the testing logic or any of the tests in any way.
All dependencies are installed, so you don't need to install other packages.
Only call one function at a time.
Always explain your plan in plain words BEFORE the function call.
Note that the shell does NOT support interactive session commands (e.g. python, vim), so please do not invoke them.
THE EDIT COMMAND REQUIRES PROPER INDENTATION.
## Tips
1. Read the file first.
2. You should write a reproduction script.

## Submission
When the work is complete and no further progress is possible
issue exactly the following command:

```bash
echo DONE_SUBMIT && git add -A && git diff --cached
```

This command will submit your work.
You cannot continue working in any way on this task after submitting.
"""


def test_binding_harness_lines_of_every_class_are_kept_verbatim():
    r = Run(system=HARNESS_WIDE).call("ls", "app.py\n")
    texts = to_json(_anchor(r))["harness_constraints"]
    for want in ("make the minimal changes to non-test files in the /repo directory",
                 "You DON'T have to modify the testing logic or any of the tests in any way.",
                 "so you don't need to install other packages",
                 "Only call one function at a time.",
                 "Always explain your plan in plain words BEFORE the function call.",
                 # "(e.g. python, vim)" does not end the sentence
                 "Note that the shell does NOT support interactive session commands (e.g. python, vim), "
                 "so please do not invoke them.",
                 "THE EDIT COMMAND REQUIRES PROPER INDENTATION.",
                 "You cannot continue working in any way on this task after submitting."):
        assert any(want in t for t in texts), want
    # the exact submit command, from the fenced block the prose names
    assert "echo DONE_SUBMIT && git add -A && git diff --cached" in texts
    # advice is not binding
    assert not any("Read the file first" in t or "reproduction script" in t or "assistant that works" in t
                   for t in texts)
    # the rules of a slash command's expansion: forbidding list items and numeric limits
    r3 = Run().call("git status", "clean\n").meta(
        "## Your task\nWrite the message.\n**Rules:**\n- Subject: what changed (max 60 chars)\n"
        "- Never mention the reviewer\n- No extra tools, no explanations - just run it\n- Use 1-3 bullet points maximum\n"
        "- No pending work items\n- Keep it short\n")
    got = to_json(_anchor(r3))["harness_constraints"]
    for want in ("Subject: what changed (max 60 chars)", "Never mention the reviewer",
                 "No extra tools, no explanations - just run it", "Use 1-3 bullet points maximum"):
        assert want in got, want
    assert "No pending work items" not in got and "Keep it short" not in got
    # a fenced block that the prose does not name as the submission is not a rule
    r2 = Run(system="## Example\nRun this command to list files:\n\n```bash\nls -la\n```\n").call("ls", "a\n")
    assert "ls -la" not in to_json(_anchor(r2))["harness_constraints"]


# ------------------------------------------------------------------ class 7 and the order


def test_priority_is_one_order_read_by_the_bound():
    assert PRIORITY[:6] == ("status", "live_failure", "constraints", "changes", "failed_approaches", "next_step")
    assert BOUND_PRIORITY[:5] == ("live_evidence", "user_constraints", "changes_made", "failed_attempts", "next_steps")
    assert DEFAULT_MAX_TOKENS <= 1500
    from compactor.config import CompactorConfig

    assert CompactorConfig().anchor_max_tokens == DEFAULT_MAX_TOKENS  # the pipeline's default is the same bound


# ------------------------------------------------------------------ the model itself


def test_command_family():
    assert command_family("cd /testbed && python reproduce.py --x") == "python reproduce.py"
    assert command_family("python -m pytest tests/test_a.py -x -q") == "python -m pytest tests/test_a.py"
    assert command_family("timeout 60 pip install -e .") == "pip install"


def test_fold_from_frozen_model_equals_fold_at_once():
    r = Run(system=HARNESS).call("python app.py", TRACE, exit_code=1).call(EDIT, "").call(
        "python -m pytest", "===== 2 passed in 0.1s =====\n").say("Done. The task is complete.")
    whole = build_run(r.segs)
    for cut in range(len(r.segs) + 1):
        part = build_run(r.segs[:cut])
        assert build_run(r.segs[cut:], part) == whole, cut


def test_status_and_live_failure_render_in_every_layout_and_language():
    r = Run().call("python app.py", TRACE, exit_code=1)
    a = _anchor(r)
    en, zh = to_markdown(a, "en"), to_markdown(a, "zh")
    assert en.index("**Status**") < en.index("**Live failure**") < en.index("**Goal**")
    assert zh.index("**状态**") < zh.index("**当前失败**") < zh.index("**目标**")
    # the same item in both languages: the error verbatim
    assert "`ZeroDivisionError: division by zero` (app.py:9)" in en
    assert "`ZeroDivisionError: division by zero` (app.py:9)" in zh
    seed = to_seed_json(a)
    assert tuple(seed) == SEED_FIELDS
    assert seed["objective_state"].startswith("Working: no change yet; last run: `python app.py` failed at s1. Goal: ")
    j = to_json(a)
    assert j["status"] == a.status and j["live_failure"] == a.live_failure


# ------------------------------------------------------------------ real runs

CORPUS = Path(os.environ.get("COMPACTOR_CORPUS", "/work/shared/corpus"))
EXTRA = CORPUS.parent / "trajectories-extra"
# runs of the tuning half only (the test half is kept for measuring)
RUNS = [CORPUS / "openhands-v0/ponylang__ponyc-4593.json",
        CORPUS / "swe-agent/marshmallow-1867.function_calling_replace_from_source.traj",
        CORPUS / "claude-code/stop-hook-uncommitted-changes.jsonl",
        EXTRA / "mini-swe-agent/django-16256.gpt-5-mini.traj.json"]


def _segments(path: Path):
    if not path.exists():
        pytest.skip("corpus not available")
    return load_document(path.read_text(encoding="utf-8", errors="replace")).segments


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.name)
def test_real_runs_merge_step_by_step_equals_build_and_is_deterministic(path):
    segs = _segments(path)
    whole = build_anchor(segs)
    a = build_anchor([])
    step = max(1, len(segs) // 7)
    for lo in range(0, len(segs), step):
        a = merge(a, segs[lo:lo + step])
    assert a.model_dump() == whole.model_dump()
    assert to_markdown(build_anchor(segs), "zh") == to_markdown(whole, "zh")


def test_real_runs_status():
    expect = {RUNS[0]: "submitted", RUNS[1]: "submitted", RUNS[2]: "finished", RUNS[3]: "submitted"}
    for path, status in expect.items():
        assert build_run(_segments(path)).status == status, path
    # ponyc: the agent handed in saying it could not make the change: its last failure stays live
    m = build_run(_segments(RUNS[0]))
    assert live_failure(m) is not None and live_failure(m).text.startswith("No replacement was performed")
    # marshmallow: the scratch reproduction was created and deleted again: no net change
    m = build_run(_segments(RUNS[1]))
    assert {f.path: f.change for f in m.files}.get("reproduce.py") == "created-deleted"


def test_a_commit_is_not_evidence_and_a_chat_without_calls_has_a_status():
    r = Run().call(EDIT, "").call("git add app.py && git commit -m fix", "[main 1a2b3c4] fix\n").say("Done.")
    assert "no passing check after the last change" in _anchor(r).status
    chat = Run(task="What does the retry decorator do?").say("It retries the call three times. Shall I add a test?")
    m = build_run(chat.segs)
    assert m.status == "waiting" and status_line(m).startswith("Waiting for the user at s1: Shall I add a test?")
    # the user answered: the turn is the agent's again, the chat is not finished
    chat.say("Yes, add one for the timeout case.", role=Role.user)
    assert build_run(chat.segs).status == "working"
    done = Run(task="What does the retry decorator do?").say("It retries the call three times.")
    assert build_run(done.segs).status == "finished"
    done.say("Tool execution results", role=Role.user)  # a harness's label: no new turn
    assert build_run(done.segs).status == "finished"


def test_chrome_is_never_error_evidence_nor_a_fact():
    from compactor.anchor import sections as S
    from compactor.anchor.cues import CHROME_FACT
    from compactor.models import Evidence, RunModel

    def ev(i, text, family="error"):
        return Evidence(id=f"ev-{i}", source_step=f"s{i}", text=text, family=family)

    chrome = [ev(1, "    16 except ImportError:"), ev(2, "  2180     \"the table contains invalid data\")"),
              ev(3, "(pass) status parser > rejects invalid status [0.2ms]"),
              ev(4, "tests/test_x.py::test_bad_input_raises_error PASSED"),
              ev(5, "   Compiling errno v0.3.8")]
    real = [ev(6, "E   KeyError: 'rows'"), ev(7, "  12 failed, 3 passed in 0.41s", "test-failure"),
            ev(8, "error[E0308]: mismatched types")]
    kept = S.evidence(chrome + real, RunModel())
    assert [e.text for e in kept] == [e.text for e in real]
    for line in ("Date: 2025-05-22T03:25:08", "PID: 48213", "Duration: 2.51s", "Compiling serde v1.0.197",
                 "Added src/app.py to the chat", "Numpy: 1.16.0", "sys:1: ResourceWarning: unclosed file <x>"):
        assert CHROME_FACT.match(line), line
    for line in ("The date parser rejects 2025-13-01", "Compiling the grammar fails on nested blocks",
                 "Fixed in: 2.3.1", "The cache holds 1.5 GB"):
        assert not CHROME_FACT.match(line), line


def test_a_provider_or_harness_error_at_the_end_is_stopped_error():
    for note in ("litellm.InternalServerError: VertexAIException - upstream model unavailable",
                 "openai.APIConnectionError: Connection error.",
                 "Subtask failed: the worker exited with code 137",
                 "The process was killed by the harness after 600 seconds"):
        r = Run().call("ls", "app.py\n").meta(note)
        m = build_run(r.segs)
        assert m.status == "stopped-error", note
        # the run went on after it: working again
        assert build_run(r.call("python app.py", "ok\n").segs).status == "working", note
    # a tool's output that names the same words in its prose is not the harness stopping the run
    r = Run().call("python app.py", "the process was killed\n", exit_code=0)
    assert build_run(r.segs).status == "working"


def test_a_request_the_agent_answered_afterwards_is_not_a_next_step():
    from compactor.anchor import sections as S
    from compactor.models import NextStep, RunModel

    ask = NextStep(id="ns-1", source_step="s4", text="answer the pending request: /release-notes")
    plan = NextStep(id="ns-2", source_step="s4", text="update the changelog")
    after = S.next_steps([ask, plan], RunModel(status="finished", status_step="s6"), [])
    assert [n.text for n in after] == ["update the changelog"]
    # no word of the agent after the request: still to answer
    before = S.next_steps([ask], RunModel(status="finished", status_step="s2"), [])
    assert [n.text for n in before] == [ask.text]
    assert [n.text for n in S.next_steps([ask], RunModel(status="working", status_step="s6"), [])] == [ask.text]
