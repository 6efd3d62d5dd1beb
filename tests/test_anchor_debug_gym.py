"""debug-gym runs in the anchor: the step limit ends the run, a refused rewrite is no change, an
evaluation whose tests fail is a failure (the reader says what the environment reports)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from compactor.anchor import build_anchor, build_run, to_markdown
from compactor.formats import Edits, get_format, load_document

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "trajectories" / "stats-median.debug-gym.json"
REAL = ROOT.parent / "shared" / "trajectories-extra" / "debug-gym" / "debug-gym.astropy-6938.o1.jsonl"

FAILING_EVAL = ("============================= test session starts ==============================\n"
                "collected 0 items / 2 errors\n"
                "!!!!!!!!!!!!!!!!!!! Interrupted: 2 errors during collection !!!!!!!!!!!!!!!!!!!!\n"
                "=========================== 2 error in 0.31 seconds ============================\n")


def _step(i: int, name: str | None, args: dict | None, obs: str) -> dict:
    action = None if name is None else {"id": f"call_{i}", "name": name, "arguments": args or {}}
    return {"step_id": i, "action": action, "obs": obs, "prompt_response_pairs": None}


def _run(tmp_path: Path, *, max_steps: int, success: bool, steps: list[dict]) -> Path:
    data = {"problem": "stats-median", "config": {"max_steps": max_steps}, "success": success,
            "log": [_step(0, None, None, "2 failed, 3 passed")] + steps}
    p = tmp_path / "run.debug-gym.json"
    p.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return p


def _limit_steps() -> list[dict]:
    return [_step(1, "rewrite", {"path": "stats.py", "start": 3, "end": 4, "new_code": "return sorted(xs)[n // 2]"},
                  "Rewriting done."),
            _step(2, "eval", {}, FAILING_EVAL),
            _step(3, "rewrite", {"path": "tests/test_stats.py", "start": 1, "end": 1, "new_code": "import math"},
                  "Error while rewriting the file: File tests/test_stats.py is not editable.\nRewrite failed."),
            _step(4, "eval", {}, FAILING_EVAL)]


def test_step_limit_reached_without_success_is_stopped_limit(tmp_path):
    doc = load_document(_run(tmp_path, max_steps=4, success=False, steps=_limit_steps()))
    run = build_run(doc.segments)
    assert run.status == "stopped-limit"
    md = to_markdown(build_anchor(doc.segments))
    assert md.split("**Status**: ", 1)[1].startswith("Stopped by a step or cost limit")
    assert "max_steps 4" in md


@pytest.mark.parametrize("max_steps, success", [(5, False), (4, True), (0, False)])
def test_no_limit_note_below_the_limit_or_on_success(tmp_path, max_steps, success):
    doc = load_document(_run(tmp_path, max_steps=max_steps, success=success, steps=_limit_steps()))
    assert not any(s.id == "limit" for s in doc.segments)
    assert build_run(doc.segments).status != "stopped-limit"


def test_refused_rewrite_is_no_change_and_failing_eval_is_live(tmp_path):
    doc = load_document(_run(tmp_path, max_steps=4, success=False, steps=_limit_steps()))
    a = build_anchor(doc.segments)
    md = to_markdown(a)
    done = md.split("**Done**:", 1)[1].split("**Decisions**", 1)[0]
    assert "stats.py (lines 3-4 → `return sorted(xs)[n // 2]`)" in done
    assert "tests/test_stats.py" not in done  # the environment refused it: nothing changed
    live = md.split("**Live failure**: ", 1)[1].split("\n", 1)[0]
    assert "2 error" in live and "from `eval`" in live
    assert "is not editable" in md.split("**Excluded approaches**:", 1)[1].split("**Open", 1)[0]


def test_a_passing_eval_is_no_failure(tmp_path):
    steps = _limit_steps()[:1] + [_step(2, "eval", {}, "==== 5 passed in 0.10 seconds ====\n")]
    doc = load_document(_run(tmp_path, max_steps=20, success=True, steps=steps))
    a = build_anchor(doc.segments)
    assert a.cursor.run.status != "stopped-limit"
    assert to_markdown(a).split("**Live failure**: ", 1)[1].startswith("none")


def test_the_limit_line_is_derived_and_never_written_back(tmp_path):
    p = _run(tmp_path, max_steps=4, success=False, steps=_limit_steps())
    doc = load_document(p)
    seg = next(s for s in doc.segments if s.id == "limit")
    assert seg.origin == () and seg.meta
    before = json.loads(p.read_text(encoding="utf-8"))
    fmt = get_format(doc.format)
    for edits in (Edits(), Edits(replace={"limit": "[elided]"}), Edits(drop={"limit"})):
        out = json.loads(fmt.dumps(fmt.write(doc, edits)))
        assert out == before  # nothing of the derived line reaches the file, nothing else moves


def test_bundled_fixture_reached_no_limit():
    doc = load_document(FIXTURE)
    assert not any(s.id == "limit" for s in doc.segments)


@pytest.mark.skipif(not REAL.is_file(), reason="shared trajectories-extra not present")
def test_real_run_stopped_at_its_step_limit_keeps_its_rewrite():
    doc = load_document(REAL)
    a = build_anchor(doc.segments)
    md = to_markdown(a)
    assert a.cursor.run.status == "stopped-limit"
    assert "max_steps 50" in md
    assert "output_field = output_field.replace" in md
    assert to_markdown(build_anchor(copy.copy(doc.segments))) == md


def _task_anchor(task: str):
    from compactor.models import Role, Segment, SegmentKind
    segs = [Segment(id="m0", index=0, step=1, step_id="s1", role=Role.user, kind=SegmentKind.message, text=task)]
    return build_anchor(segs)


def test_a_task_sent_as_a_json_object_has_its_problem_as_the_goal():
    task = ('{\n  "Overall task": "Your goal is to debug a Python program so that it passes the tests. '
            'At every step, use one of the tools.",\n  "Instructions": {\n    "Problem description": '
            '"Median of an even-length list is wrong\n\tstats.median([1, 2, 3, 4]) returns 3, expected 2.5."\n  },\n'
            '  "Repo directory tree": "' + "stats.py\\n" * 200 + '"\n}')
    goal = to_markdown(_task_anchor(task)).split("**Goal**: ", 1)[1].split("\n", 1)[0]
    assert goal.startswith("Median of an even-length list is wrong")
    # no problem field: its first text field; not JSON at all: the first line as before
    goal = to_markdown(_task_anchor('{"task_text": "Add a --dry-run flag to the CLI.", "id": 3}')).split(
        "**Goal**: ", 1)[1].split("\n", 1)[0]
    assert goal == "Add a --dry-run flag to the CLI."
    goal = to_markdown(_task_anchor("{braces} are not JSON: fix the parser's error on them")).split(
        "**Goal**: ", 1)[1].split("\n", 1)[0]
    assert goal.startswith("{braces} are not JSON")
