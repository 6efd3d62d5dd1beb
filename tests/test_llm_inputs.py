"""refine's inputs from a real compaction: step ids line up, every step stays visible, the view
is bounded, and the whole path (compact → prepare_refine → refine) works on a message list."""

from __future__ import annotations

import json

import pytest

from compactor.config import CompactorConfig
from compactor.llm import (
    CallableProvider,
    context_budget,
    digest_steps,
    llm_context,
    prepare_refine,
    refine_anchor,
    refine_from_config,
)
from compactor.models import Anchor, Evidence, UserConstraint
from compactor.pipeline import Compactor
from compactor.tokens import get_counter

GH = "ghp_" + "Zq9xW2vU7tS4" * 3  # 36 characters after the prefix


def messages(n_reads: int = 12) -> list[dict]:
    msgs = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Make the CSV export handle empty rows. Do not change the public API. "
                                    f"Use the token {GH} to push."},
    ]
    for i in range(n_reads):
        cid = f"call_{i:02d}abcdefghijklmnopqrstu"
        msgs.append({"role": "assistant", "content": f"Reading part {i} of the exporter.",
                     "tool_calls": [{"id": cid, "type": "function",
                                     "function": {"name": "bash", "arguments": json.dumps({"command": f"sed -n {i * 100},{i * 100 + 99}p src/export.py"})}}]})
        body = "\n".join(f"    line_{i}_{j} = compute_value({j}, scale={i})  # export helper" for j in range(100))
        msgs.append({"role": "tool", "tool_call_id": cid, "content": body})
    msgs += [
        {"role": "assistant", "content": "Running the tests.",
         "tool_calls": [{"id": "call_zzabcdefghijklmnopqrstuv", "type": "function",
                         "function": {"name": "bash", "arguments": json.dumps({"command": "pytest -q tests/test_export.py"})}}]},
        {"role": "tool", "tool_call_id": "call_zzabcdefghijklmnopqrstuv",
         "content": "F..\nFAILED tests/test_export.py::test_empty_rows - IndexError: list index out of range\n1 failed, 2 passed in 0.31s"},
        {"role": "assistant", "content": "I decided to skip empty rows in write_rows() instead of raising, because "
                                         "the test expects them to be ignored."},
    ]
    return msgs


@pytest.fixture(scope="module")
def compacted():
    comp = Compactor()
    data = messages()
    result = comp.compact(data)
    return comp, data, result


def test_step_ids_line_up_and_every_step_is_visible(compacted):
    comp, data, result = compacted
    counter = get_counter()
    inp = prepare_refine(data, result, compactor=comp, budget=300, counter=counter)
    assert inp.steps and set(inp.steps) == set(inp.level1_steps)
    for sid in inp.steps:
        assert f"[{sid}]" in inp.context
    assert counter.count(inp.context) <= context_budget(300) * 1.1
    # the failing test line is in the steps the guards check (verbatim) and visible to the LLM
    fail = "FAILED tests/test_export.py::test_empty_rows - IndexError: list index out of range"
    assert any(fail in t for t in inp.steps.values())
    assert fail in inp.context
    assert inp.anchor is result.anchor or result.anchor is None


def test_digest_keeps_every_step_within_budget():
    counter = get_counter()
    steps = {f"s{i}": "\n".join(f"row {i}.{j} value {j * i}" for j in range(200 if i % 3 == 0 else 3))
             for i in range(1, 31)}
    out = digest_steps(steps, counter, 2000)
    assert list(out) == list(steps)
    total = sum(counter.count(t) for t in out.values())
    assert total <= 2000 * 1.15
    for sid, text in steps.items():
        if counter.count(text) < 40:
            assert out[sid] == text  # short steps are kept whole
        else:
            assert "lines not shown" in out[sid]
            assert out[sid].splitlines()[0] == text.splitlines()[0]      # head
            assert out[sid].splitlines()[-1] == text.splitlines()[-1]    # and tail


def test_view_is_bounded_and_keeps_fields():
    counter = get_counter()
    anchor = Anchor(
        objective_state="Exporting CSV.",
        key_evidence=[Evidence(id=f"e{i}", text=f"Traceback line {i}\n  more {i}", source_step=f"s{i}") for i in range(200)],
        user_constraints=[UserConstraint(id=f"c{i}", text=f"Constraint number {i} must hold.") for i in range(100)],
    )
    steps = {f"s{i}": "x " * 400 for i in range(50)}
    ctx = llm_context(anchor, steps, counter, max_tokens=3000)
    assert counter.count(ctx) <= 3000 * 1.15
    assert "more, kept by the caller" in ctx
    assert '"objective_state": "Exporting CSV."' in ctx


def test_end_to_end_refine_on_a_compaction(compacted):
    comp, data, result = compacted
    counter = get_counter()
    inp = prepare_refine(data, result, compactor=comp, budget=300, counter=counter)
    fail_step = next(sid for sid, t in inp.steps.items() if "1 failed, 2 passed" in t)
    dec_step = next(sid for sid, t in inp.steps.items() if "I decided to skip empty rows" in t)
    sent = []

    def llm(prompt, *, max_tokens, temperature):
        sent.append(prompt)
        return json.dumps({
            "objective_state": "tests/test_export.py::test_empty_rows fails with IndexError; the fix is to skip empty rows.",
            "facts_learned": [
                {"text": "test_empty_rows failed with IndexError: list index out of range (1 failed, 2 passed).",
                 "source_step": fail_step},
                {"text": "The exporter writes rows to S3 buckets.", "source_step": fail_step},
            ],
            "decisions_made": [{"decision": "Skip empty rows in write_rows() instead of raising",
                                "reason": "the test expects them to be ignored"}],
            "open_questions": [], "dead_ends": [],
            "next_action_hint": "Implement the skip in write_rows() and re-run pytest.",
        })

    out = refine_anchor(inp.anchor, steps=inp.steps, context=inp.context, objective=inp.objective, budget=300,
                        provider=CallableProvider(llm), counter=counter)
    assert not out.report.fallback and out.report.used_llm
    texts = [f.text for f in out.anchor.facts_learned]
    assert any("IndexError" in t for t in texts)
    assert "The exporter writes rows to S3 buckets." not in texts
    assert any(d.decision.startswith("Skip empty rows") and d.source_step == dec_step for d in out.anchor.decisions_made)
    # the LLM never saw the raw history or the token; the step ids it saw are the guards' ids
    assert GH not in sent[0] and "[REDACTED:github-token#1]" in sent[0]
    assert "line_3_57 = compute_value(57, scale=3)" not in sent[0] or len(sent[0]) < 40_000
    for ev in inp.anchor.key_evidence:
        assert ev.text in [e.text for e in out.anchor.key_evidence]


def test_refine_from_config_with_a_callable_provider(compacted):
    comp, data, result = compacted
    inp = prepare_refine(data, result, compactor=comp)
    out = refine_from_config(inp.anchor, inp.steps, inp.context, inp.objective, None, CompactorConfig(),
                             provider=CallableProvider(lambda p, **kw: '{"objective_state": ""}'))
    assert not out.report.fallback and not out.report.used_llm and out.anchor == inp.anchor
