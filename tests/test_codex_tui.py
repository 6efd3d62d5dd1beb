"""Codex TUI session recordings: prompts rebuilt from key events, commands and patches paired."""

from __future__ import annotations

import json
import math
from pathlib import Path

import compactor
from compactor import Compactor, load_document
from compactor.budget.measure import read_back, sent_texts

ROOT = Path(__file__).resolve().parents[1]
REC = ROOT / "fixtures" / "trajectories" / "config-fix.codex-tui.jsonl"
COUNT = compactor.get_counter().count


def test_prompt_is_rebuilt_from_key_presses_with_backspace():
    doc = load_document(str(REC))
    assert doc.format == "codex-tui"
    user = [s for s in doc.segments if s.role.value == "user"]
    assert [s.text for s in user] == [
        "Fix the failing cargo test. Don't change the public API of parse_config(), and keep MSRV 1.70."]
    res = next(s for s in doc.segments if s.call_id == "c1" and s.kind.value == "tool_result")
    assert res.exit_code == 101 and res.is_error and res.command == "cargo test"
    assert "error[E0599]" in res.text and "Compiling dep-0" in res.text
    patch = next(s for s in doc.segments if s.call_id == "c2" and s.kind.value == "tool_result")
    assert patch.is_error is False


def test_constraint_survives_and_replaced_output_leaves_no_copies(tmp_path):
    comp = Compactor(store=str(tmp_path / "s"))
    res = comp.compact(str(REC))
    text = "\n".join(json.dumps(r, ensure_ascii=False) for r in res.messages)
    back = load_document(text)
    assert back.format == "codex-tui"
    assert any("Don't change the public API of parse_config()" in s.text for s in back.segments)
    assert "error[E0599]: no method named `get_or_default`" in text and "src/config.rs:42:18" in text
    # the delta records of a replaced command are gone with its old text
    c1 = [r for r in res.messages if r.get("kind") == "codex_event"
          and r["payload"]["msg"].get("call_id") == "c1"]
    assert not any(r["payload"]["msg"]["type"] == "exec_command_output_delta" for r in c1)


def test_budget_contract_on_the_recording(tmp_path):
    doc = load_document(str(REC))
    before = sum(COUNT(s.text) for s in doc.segments)
    comp = Compactor(store=str(tmp_path / "s"))
    for frac in (0.5, 0.25, 0.1):
        budget = max(1, math.ceil(before * frac))
        try:
            res = comp.compact(str(REC), budget=budget)
        except compactor.BudgetError as exc:
            budget = exc.floor
            res = comp.compact(str(REC), budget=budget)
        back = read_back(res.format, res.messages)
        assert sum(COUNT(t) for t in sent_texts(back)) <= budget
        # a dropped prompt takes all of its key lines with it; a kept one keeps them all
        prompts = [s for s in back.segments if s.role.value == "user" and s.text.startswith("Fix the failing")]
        keys = [r for r in res.messages if r.get("kind") == "key_event"]
        assert (len(prompts) == 1) == bool(keys)
