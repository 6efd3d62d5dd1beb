"""The continuation check: the anchor is asked the six questions; what it cannot answer is
back-filled from the trajectory and reported."""

from __future__ import annotations

from compactor import compact
from compactor.anchor import continuation_check
from compactor.models import Anchor, Role, Segment, SegmentKind


def _seg(i, role, kind, text, step, **kw):
    return Segment(id=f"m{i}", index=i, step=step, step_id=f"s{step}", role=Role(role), kind=SegmentKind(kind),
                   text=text, **kw)


SEGS = [
    _seg(0, "user", "message", "Fix the failing export. Don't change the public API.", 1),
    _seg(1, "assistant", "tool_call", '{"command": "python -m pytest -q"}', 2, call_id="a", tool_name="bash",
         command="python -m pytest -q"),
    _seg(2, "tool", "tool_result", "E   KeyError: 'rows'\n1 failed, 3 passed in 0.2s", 2, call_id="a", tool_name="bash",
         command="python -m pytest -q", exit_code=1, is_error=True),
]


def test_an_empty_anchor_is_back_filled_and_the_report_names_each_item():
    a, filled = continuation_check(Anchor(), SEGS)
    kinds = [f.split(":", 1)[0] for f in filled]
    assert "task" in kinds and "constraints" in kinds and "next_step" in kinds
    assert "what_failed" in kinds or "live_error" in kinds
    assert a.intent.current.startswith("Fix the failing export")
    assert any("KeyError: 'rows'" in e.text for e in a.key_evidence)
    assert [c.text for c in a.user_constraints] == ["Don't change the public API."]
    assert all(f.split(":")[2] in ("s1", "s2") for f in filled)  # each names its source step


def test_the_check_is_idempotent_on_the_corpus(corpus):
    from compactor.pipeline import load_document

    for rel in ("swe-agent/pydicom__pydicom-1458.gpt4.traj", "openhands-v0/ponylang__ponyc-4593.json",
                "claude-code/coverage-test-fix.jsonl"):
        a = compact(str(corpus / rel), anchor_max_tokens=0).anchor
        b, filled = continuation_check(a, load_document(corpus / rel).segments)
        assert filled == [] and b == a, (rel, filled)


MESSAGES = [
    {"role": "user", "content": "Fix the failing export. Don't change the public API."},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "a", "type": "function", "function": {
        "name": "bash", "arguments": '{"command": "python -m pytest -q"}'}}]},
    {"role": "tool", "tool_call_id": "a", "content": "E   KeyError: 'rows'\n1 failed, 3 passed in 0.2s"},
]


def test_the_pipeline_reports_what_was_back_filled():
    from compactor import Compactor

    plain = compact(MESSAGES)
    assert plain.report.self_check is not None and plain.report.self_check.backfilled == []

    # a stage before the self-check (the optional refine stage, replaced by name) leaves an anchor
    # that answers none of the questions: the self-check fills it from the trajectory and says so
    comp = Compactor()

    def lose_the_anchor(state):
        state.anchor = Anchor()

    comp.stages["refine"] = lose_the_anchor
    r = comp.compact(MESSAGES)
    filled = r.report.self_check.backfilled
    assert filled and all(x.startswith("continuation:") for x in filled), filled
    kinds = {x.split(":")[1] for x in filled}
    assert {"task", "constraints"} <= kinds, filled
    assert r.anchor.intent.current.startswith("Fix the failing export")
    assert [c.text for c in r.anchor.user_constraints] == ["Don't change the public API."]


def test_a_rule_restated_every_turn_is_one_constraint_with_its_first_step():
    # a harness re-sends the same reminder after each malformed response (and once in other case)
    nudge = "Your reply had no command. Every reply MUST contain one fenced command."
    segs = [_seg(0, "user", "message", "Fix the failing export.", 1)]
    for i, step in ((1, 2), (2, 3), (3, 4)):
        segs.append(_seg(i, "user", "message", nudge if step != 4 else nudge.upper(), step))
    a, filled = continuation_check(Anchor(), segs)
    texts = [c.text for c in a.user_constraints]
    assert len(texts) == 1, texts
    assert texts[0].lower() == "every reply must contain one fenced command."
    assert [c.source_step for c in a.user_constraints] == ["s2"]
    assert len([f for f in filled if f.startswith("constraints:")]) == 1
