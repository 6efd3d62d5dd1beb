"""Regressions found by the benchmark run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import compactor
from compactor import BudgetError, Compactor

ROOT = Path(__file__).resolve().parents[1]
CI_LINT = ROOT / "fixtures" / "trajectories" / "ci-lint.steps.json"


@pytest.mark.parametrize("budget", [205, 230, 300, 1000])
def test_forced_level3_never_enlarges_the_output(budget):
    before = Compactor().compact(str(CI_LINT), level=1)
    res = Compactor(level=3).compact(str(CI_LINT), budget=budget)
    assert res.report.tokens_after <= max(before.report.tokens_after, 1)
    assert res.report.tokens_after <= budget


def test_budget_error_never_promises_a_budget_that_fails():
    # a budget is a contract down to the floor: 120 tokens is above it and fits; below it the
    # error names the floor, and the floor it names fits
    res = Compactor(level=3).compact(str(CI_LINT), budget=120)
    assert res.report.tokens_after <= 120 and res.report.tokens_sent <= 120
    with pytest.raises(BudgetError) as exc:
        Compactor(level=3).compact(str(CI_LINT), budget=20)
    m = re.search(r"raise the budget to at least (\d+)", str(exc.value))
    assert m and int(m.group(1)) == exc.value.floor
    res = Compactor(level=3).compact(str(CI_LINT), budget=int(m.group(1)))
    assert res.report.tokens_after <= int(m.group(1))


def test_jsonl_layouts_accept_parsed_records_and_their_own_output():
    recs = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s", "message": {"role": "user", "content": "Run the tests."}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "s",
         "message": {"id": "msg_1", "role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "pytest -q"}}]}},
        {"type": "user", "uuid": "u2", "parentUuid": "a1", "sessionId": "s",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Exit code 1\nFAILED tests/test_x.py::test_y - AssertionError", "is_error": True}]}},
    ]
    res = compactor.compact(recs)
    assert res.format == "claude-code"
    again = compactor.compact(res.messages)
    assert again.format == "claude-code" and again.messages == res.messages


def test_failed_commands_survive_level2_in_the_anchor():
    msgs = [{"role": "user", "content": "Fix the import error."}]
    for i in range(8):
        prose = " ".join(f"I am now looking at module number {i} and thinking about step {k} of the plan." for k in range(12))
        msgs.append({"role": "assistant", "content": f"Attempt {i}. {prose}", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"python run_{i}.py --fast"})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"<returncode>1</returncode>\n<output>\nModuleNotFoundError: No module named 'pytz{i}'\n</output>"})
    msgs.append({"role": "user", "content": "Now try a different approach."})
    res = Compactor(keep_recent_turns=2).compact(msgs, level=2)
    assert res.report.level == 2
    out = json.dumps(res.messages)
    for i in range(8):
        assert f"python run_{i}.py --fast" in out


def test_trim_region_with_ascii_and_non_ascii_lines_of_equal_counts():
    """A folded region whose most frequent line shapes tie and mix ASCII and non-ASCII text."""
    from compactor.collapse.trim import TrimOptions, trim_text
    from compactor.detect import Detector
    from compactor.engine import load_rules

    lines = []
    for i in range(40):
        lines.append(f"Downloading part {i} of 40")
        lines.append(f"━━━━━━━━━━ {i}/40 kB 正在下载")
    out, stats = trim_text(Detector(load_rules()), "\n".join(lines) + "\n", TrimOptions(receipt=False))
    assert stats.folded_lines > 0
    # 80 lines: 2 kept at each end, 76 folded, 38 of each shape (the summary counts folded lines only)
    assert '38× "Downloading part # of #"' in out and '38× "━━━━━━━━━━ # kB 正在下载"' in out


def test_claude_code_slash_command_echoes_are_not_user_requests():
    # `/compact` leaves user lines holding <command-name>… and <local-command-stdout>… (what the
    # command printed to the user). They are harness records, not the user's words: they must not
    # become the current request, request history or user constraints of the anchor.
    path = ROOT / "tests" / "fixtures" / "claude_code" / "transcript.jsonl"
    from compactor.anchor.render import to_json

    anchor = to_json(Compactor().compact(str(path), level=2).anchor)
    intent = anchor["intent"]
    assert intent["current"] == "What should we do next? (E2E-STEP-3)"
    shown = json.dumps(intent) + json.dumps(anchor["user_constraints"])
    assert "<command-name>" not in shown and "Compacted (ctrl+o" not in shown
    assert "PreCompact [" not in shown
    assert [c["text"] for c in anchor["user_constraints"]] == ["Constraint: do not modify anything under tests/."]


def test_steps_output_folded_whole_reads_back_as_steps(tmp_path):
    # at a tight budget every step of a bare step array is folded into the summary step: the
    # output must still read back in its own layout (it was refused: "no step has an 'action'")
    res = Compactor(store=str(tmp_path / "s")).compact(str(CI_LINT), budget=90)
    assert [r.get("step") for r in res.messages] == ["summary"]
    doc = compactor.load_document(res.messages, format="steps")
    assert doc.segments and doc.segments[0].text.startswith("[compactor L3:")
    again = compactor.load_document(json.dumps(res.messages))  # and it is recognised without a hint
    assert again.format == "steps"
