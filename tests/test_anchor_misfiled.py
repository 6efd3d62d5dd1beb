"""Failed approaches are calls that failed: a call the tool reported as a success (exit 0, or its
own passed / success flag) is not one, whatever its output prints."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_anchor_runmodel import Run

from compactor.anchor import build_anchor, to_markdown

E2E = ("bun test v1.3.3\n[HudServer] Message handler error: 367 |\nerror: Handler error\n"
       "      at <anonymous> (/workspace/src/hud/hud.e2e.test.ts:372:21)\n"
       "      at message (/workspace/src/hud/server.ts:99:17)\n"
       "Traceback (most recent call last):\n  File \"srv.py\", line 3, in <module>\nValueError: handler raised\n"
       " 401 pass\n 0 fail\nRan 401 tests across 23 files. [4.21s]\n")


def _excluded(md: str) -> str:
    return md.split("**Excluded approaches**:", 1)[1].split("**Open", 1)[0]


def test_the_same_output_with_a_failing_exit_is_a_failed_attempt():
    md = to_markdown(build_anchor(Run().call("bun run test:container", E2E, exit_code=1).segs))
    assert "bun run test:container" in _excluded(md)


REAL = Path(__file__).resolve().parent.parent.parent / "shared" / "trajectories-extra" / "atif"


@pytest.mark.skipif(not REAL.is_dir(), reason="shared trajectories-extra not present")
def test_atif_verification_that_passed_is_not_a_failed_attempt():
    from compactor import compact
    md = to_markdown(compact(REAL / "openagents.orchestrator-ebphxk.atif.jsonl").anchor)
    assert "`bun run test:container`" not in _excluded(md)
    # the check the harness reports as passed is the verification
    assert "verification) `Ran 401 tests across 37 files." in md


def test_lead_in_sentences_are_no_decisions_and_cut_sentences_no_constraints():
    from compactor.anchor import sections as S
    from compactor.models import Decision, UserConstraint
    ds = [Decision(id=f"d{i}", source_step="s1", decision=t, reason="r") for i, t in enumerate(
        ["The cleanest approach would be to:", "I will do the following:",
         "Let me use that instead of adding it to AppState:", "Use crypto.getRandomValues instead of Math.random"])]
    assert [d.decision for d in S.decisions(ds)] == ["Let me use that instead of adding it to AppState:",
                                                     "Use crypto.getRandomValues instead of Math.random"]
    cs = [UserConstraint(id=f"c{i}", source_step="s1", text=t) for i, t in enumerate(
        ["it should", "Then stop.", "no deprecation alias!", "不要用 eval", "you must", "it's important, i need to be able to reason about it"])]
    assert [c.text for c in S.constraints(cs)] == ["Then stop.", "no deprecation alias!", "不要用 eval",
                                                   "it's important, i need to be able to reason about it"]


RUNS = REAL.parent


@pytest.mark.skipif(not REAL.is_dir(), reason="shared trajectories-extra not present")
def test_real_runs_lose_the_lead_ins_and_keep_the_rules():
    from compactor import compact
    md = to_markdown(compact(RUNS / "claude-code" / "random.session.jsonl").anchor)
    cons = md.split("**Constraints**:", 1)[1].split("**Files**", 1)[0]
    assert "- it should (s1)" not in cons
    assert "i don't think we need a Dockerfile" in cons
    md = to_markdown(compact(RUNS / "pi-coding-agent" / "pi-mono.compact-issue288.jsonl").anchor)
    dec = md.split("**Decisions**:", 1)[1].split("**Excluded", 1)[0]
    assert "would be to:" not in dec
    assert "no deprecation alias!" in md


@pytest.mark.skipif(not REAL.is_dir(), reason="shared trajectories-extra not present")
def test_reading_a_path_that_is_not_there_is_looking_around_not_a_failed_approach():
    from compactor import compact
    md = to_markdown(compact(RUNS / "claude-code-chat-json" / "openshrooly.prime.chat.json").anchor)
    ex = _excluded(md)
    assert "File does not exist" not in ex
    assert "BLOCKED: Dangerous rm command" in ex  # a refused command is still one
    md = to_markdown(compact(RUNS / "claude-agent-sdk-stream" / "openagents.autopilot-170100.jsonl").anchor)
    ex = _excluded(md)
    assert "Path does not exist" not in ex
    assert "exceeds maximum allowed tokens" in ex  # a read that failed for another reason stays


def test_a_missing_file_a_run_command_needed_stays_a_failed_attempt():
    r = Run().call("python scripts/migrate.py", "python: can't open file 'scripts/migrate.py': [Errno 2] "
                   "No such file or directory\n", exit_code=2)
    assert "python scripts/migrate.py" in _excluded(to_markdown(build_anchor(r.segs)))
