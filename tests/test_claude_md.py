"""Claude Code sessions exported to Markdown: read, written back, compacted, within a budget."""

from __future__ import annotations

import math
from pathlib import Path

import compactor
from compactor import Compactor, load_document
from compactor.budget.measure import read_back, sent_texts

ROOT = Path(__file__).resolve().parents[1]
EXPORT = ROOT / "fixtures" / "trajectories" / "cart-coupon.claude-export.md"
COUNT = compactor.get_counter().count


def test_read_sections_blocks_and_pairs():
    doc = load_document(str(EXPORT))
    assert doc.format == "claude-code-md"
    kinds = [(s.role.value, s.kind.value) for s in doc.segments]
    assert kinds[0] == ("user", "message") and ("assistant", "tool_call") in kinds and ("tool", "tool_result") in kinds
    first_result = next(s for s in doc.segments if s.kind.value == "tool_result")
    assert first_result.call_id == "toolu_01" and first_result.is_error is True and first_result.exit_code == 1
    assert first_result.command == "pytest tests/test_cart.py -q"
    call = next(s for s in doc.segments if s.call_id == "toolu_01" and s.kind.value == "tool_call")
    assert call.step == first_result.step
    # a '---' line inside a plain-text body does not split the section
    last = doc.segments[-1]
    assert last.text.startswith("All 31 tests pass.") and "Summary: coupon codes" in last.text


def test_unchanged_output_is_byte_identical_and_compacted_output_reads_back():
    text = EXPORT.read_text(encoding="utf-8")
    fmt = compactor.FORMATS[[f.name for f in compactor.FORMATS].index("claude-code-md")]
    doc = load_document(text)
    assert fmt.write(doc) == text
    res = Compactor().compact(str(EXPORT))
    back = load_document(res.messages)
    assert back.format == "claude-code-md"
    assert "don't change the public signature of Cart.total()" in res.messages
    assert "ValueError: unknown coupon 'SPRING25'" in res.messages
    assert [s.role for s in back.segments][:1] == [doc.segments[0].role]


def test_budget_contract_on_the_export(tmp_path):
    doc = load_document(str(EXPORT))
    before = sum(COUNT(s.text) for s in doc.segments)
    comp = Compactor(store=str(tmp_path / "s"))
    for frac in (0.5, 0.25, 0.15):
        budget = max(1, math.ceil(before * frac))
        try:
            res = comp.compact(str(EXPORT), budget=budget)
        except compactor.BudgetError as exc:
            budget = exc.floor
            res = comp.compact(str(EXPORT), budget=budget)
        assert sum(COUNT(t) for t in sent_texts(read_back(res.format, res.messages))) <= budget


def test_other_markdown_is_not_taken_for_an_export():
    notes = "# Notes\n\n### User\n\nsome text\n\n### Assistant\n\nmore text\n"
    assert load_document(notes).format == "text"
    aider = (ROOT / "fixtures" / "trajectories" / "invoice.aider.chat.history.md").read_text(encoding="utf-8")
    assert load_document(aider).format == "aider"
