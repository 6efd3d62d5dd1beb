"""Property tests of the anchor (Hypothesis; profiles "ci"/"dev" are set in conftest.py).

- merge equivalence: folding a trajectory in any number of chunks (with a JSON round trip of
  the anchor between chunks) gives exactly the anchor built from the whole trajectory;
- determinism: the same input gives the same anchor, JSON and Markdown;
- budget: ``fit_budget`` either fits, goes at most 1.2x over with a warning, or raises
  BudgetError only when the critical items alone are more than 1.2x the budget; critical items
  are never dropped and nothing is invented.
"""

from __future__ import annotations

import json
from functools import lru_cache

from hypothesis import given
from hypothesis import strategies as st

from compactor.anchor import build_anchor, merge, to_markdown, to_seed_json
from compactor.budget.anchor_fit import anchor_tokens, drop_order, fit_budget
from compactor.errors import BudgetError
from compactor.models import Anchor, Role, Segment, SegmentKind
from compactor.normalize import normalize
from compactor.pipeline import Compactor
from compactor.tokens import get_counter

COMP = Compactor()
COUNTER = get_counter()

USER = [
    "Fix the flaky upload test in tests/test_upload.py.",
    "Our API workers crash under load. Do not change the public API of app/db/pool.py.",
    "Now add a regression test for it.",
    "No, leave streaming for later.",
    "I mean only the rows visible in the current filter.",
    "Yes.",
    "Thanks, now update the changelog.",
    "Actually you can use pandas now.",
    "帮我设计会员积分系统，不要直接写代码。",
    "不对，退款要扣回积分。用流水表，因为财务要对账。",
    "可以，接下来把建表 SQL 写出来。",
    "Port the parser to Go instead, the team knows Go.",
]
ASSISTANT = [
    "I'll reproduce the failure first.",
    "Increasing pool_size didn't help: the pool still runs out.",
    "That didn't work.",
    "I'll use the context manager instead of release() calls, because early returns leak.",
    "Should the export stream rows?",
    "I'm assuming the old messages can be reworded.",
    "Next, I need to run the full suite.",
    "Plan:\n- [x] move http.py\n- [ ] update docs/api.md\n- [ ] add a changelog entry",
    "决定采用流水表，因为退款需要冲正。",
    "用事件调度器这条路行不通。",
    "It is unclear whether the cache is shared between workers.",
    "The file looks fine.",
]
CALLS = [
    ("bash", '{"command": "python -m pytest -q"}', "python -m pytest -q",
     "F.\nFAILED tests/test_upload.py::test_retry - assert 2 == 3\n1 failed, 1 passed in 0.12s\n", 1),
    ("bash", '{"command": "python -m pytest -q"}', "python -m pytest -q", "..\n2 passed in 0.10s\n", 0),
    ("bash", '{"command": "sed -i \'s/POOL_SIZE = 20/POOL_SIZE = 50/\' app/config.py"}',
     "sed -i 's/POOL_SIZE = 20/POOL_SIZE = 50/' app/config.py", "", 0),
    ("bash", '{"command": "cat app/db/pool.py"}', "cat app/db/pool.py", "class Pool:\n    size = 20\n", 0),
    ("bash", '{"command": "python load.py"}', "python load.py",
     "Traceback (most recent call last):\n  File \"load.py\", line 3, in <module>\n    run()\n"
     "ConnectionPoolExhausted: pool_size=20, queue_depth=347\n", 1),
    ("bash", '{"command": "cat > notes.md <<\'EOF\'\\nhello\\nEOF"}', "cat > notes.md <<'EOF'\nhello\nEOF", "", 0),
    ("bash", '{"command": "rm -f notes.md && git mv a.py b.py"}', "rm -f notes.md && git mv a.py b.py", "", 0),
    ("bash", '{"command": "pip install numpy"}', "pip install numpy", "Successfully installed numpy-1.26.4\n", 0),
    ("str_replace_editor", '{"command": "view", "path": "/repo/app/handlers/report.py"}', None,
     "     1\tfrom app.db import pool\n", None),
    ("str_replace_editor", '{"command": "str_replace", "path": "/repo/app/handlers/report.py", "old_str": "a", "new_str": "b"}',
     None, "The file /repo/app/handlers/report.py has been edited.", None),
    ("str_replace_editor", '{"command": "str_replace", "path": "/repo/docs/api.md", "old_str": "x", "new_str": "y"}',
     None, "No replacement was performed, old_str `x` did not appear verbatim in /repo/docs/api.md.", None),
    ("str_replace_editor", '{"command": "create", "path": "app/handlers/report.py", "file_text": "x\\n"}', None,
     "File created successfully at: app/handlers/report.py", None),
    ("open", "open src/marshmallow/fields.py 1474", "open src/marshmallow/fields.py 1474", "[File: fields.py]", None),
    ("edit", "edit 12:14\n    return x\nend_of_edit", "edit 12:14\n    return x\nend_of_edit",
     "Your proposed edit has introduced new syntax error(s).", None),
    ("search", "search('Starship 2025 orbital')", "search('Starship 2025 orbital')",
     "Reports vary; need a primary source to confirm.", None),
    ("search", "search('IFT-3')", "search('IFT-3')",
     "IFT-3 reached space but did not complete a full orbit in March 2024.", None),
]

EVENT = st.one_of(
    st.tuples(st.just("user"), st.integers(0, len(USER) - 1)),
    st.tuples(st.just("assistant"), st.integers(0, len(ASSISTANT) - 1)),
    st.tuples(st.just("call"), st.integers(0, len(CALLS) - 1), st.booleans(), st.booleans()),
)


def make_segments(events) -> list[Segment]:
    segs: list[Segment] = []
    step = 0
    for n, ev in enumerate(events):
        step += 1
        sid = f"s{step}"
        if ev[0] == "user":
            segs.append(Segment(id=f"m{n}", index=len(segs), step=step, step_id=sid, role=Role.user,
                                kind=SegmentKind.message, text=USER[ev[1]]))
        elif ev[0] == "assistant":
            segs.append(Segment(id=f"m{n}", index=len(segs), step=step, step_id=sid, role=Role.assistant,
                                kind=SegmentKind.message, text=ASSISTANT[ev[1]]))
        else:
            name, text, cmd, out, rc = CALLS[ev[1]]
            with_id, with_result = ev[2], ev[3]
            cid = f"call_{n}" if with_id else None
            segs.append(Segment(id=f"m{n}.c0", index=len(segs), step=step, step_id=sid, role=Role.assistant,
                                kind=SegmentKind.tool_call, text=text, call_id=cid, tool_name=name, command=cmd))
            if with_result:
                segs.append(Segment(id=f"m{n}.r0", index=len(segs), step=step, step_id=sid, role=Role.tool,
                                    kind=SegmentKind.tool_result, text=out, call_id=cid, tool_name=name, command=cmd,
                                    exit_code=rc, is_error=(rc != 0) if rc is not None else None))
    return segs


@lru_cache(maxsize=4096)
def _detect(text: str, role: str, seg_id: str, step_id: str):
    return COMP.detector.detect(normalize(text), role=role, segment_id=seg_id, step_id=step_id).spans


def spans_of(segs):
    return [sp for s in segs for sp in _detect(s.text, s.role.value, s.id, s.step_id)]


TRAJ = st.lists(EVENT, min_size=0, max_size=24)


@given(events=TRAJ, cuts=st.lists(st.integers(0, 60), max_size=5), roundtrip=st.booleans())
def test_merge_in_chunks_equals_build(events, cuts, roundtrip):
    segs = make_segments(events)
    spans = spans_of(segs)
    whole = build_anchor(segs, spans)
    points = sorted({c % (len(segs) + 1) for c in cuts} | {0, len(segs)})
    a = build_anchor([], [])
    for lo, hi in zip(points, points[1:]):
        a = merge(a, segs[lo:hi], spans)
        if roundtrip:
            a = Anchor.model_validate_json(a.model_dump_json())
    assert a.model_dump() == whole.model_dump()


@given(events=TRAJ)
def test_build_is_deterministic_and_ids_unique(events):
    segs = make_segments(events)
    spans = spans_of(segs)
    a, b = build_anchor(segs, spans), build_anchor(list(segs), list(reversed(spans)))
    assert a.model_dump_json() == b.model_dump_json()
    assert to_markdown(a, "zh") == to_markdown(b, "zh") and to_markdown(a) == to_markdown(b)
    assert json.dumps(to_seed_json(a), sort_keys=True) == json.dumps(to_seed_json(b), sort_keys=True)
    for lst in (a.facts_learned, a.decisions_made, a.dead_ends, a.changes_made, a.key_evidence,
                a.user_constraints, a.open_questions, a.next_steps, a.intent.history):
        ids = [x.id for x in lst]
        assert len(ids) == len(set(ids))
    # the newest request is never marked finished
    reqs = [h for h in a.intent.history if h.kind in ("initial", "request")]
    if reqs:
        newest = reqs[-1]
        assert newest.text == a.intent.newest_request and newest.status == "active"
        assert a.intent.current.startswith(newest.text)


def _critical_ids(a: Anchor) -> set[str]:
    return ({e.id for e in a.key_evidence} | {c.id for c in a.user_constraints if c.status == "active"}
            | {x.id for x in a.dead_ends if x.status == "excluded"}
            | {h.id for h in a.intent.history if h.kind == "rejected" and h.status == "active"})


def _all_ids(a: Anchor) -> set[str]:
    out = set()
    for lst in (a.facts_learned, a.decisions_made, a.dead_ends, a.changes_made, a.key_evidence,
                a.user_constraints, a.open_questions, a.next_steps, a.intent.history):
        out |= {x.id for x in lst}
    return out | {f"file:{f.path}" for f in a.files_touched}


def _floor(a: Anchor) -> int:
    """Tokens of the anchor with every droppable item gone: what BudgetError is about."""
    from compactor.budget.anchor_fit import _without

    drop: dict[str, set[str]] = {}
    for _, attr, k in drop_order(a):
        drop.setdefault(attr, set()).add(k)
    return anchor_tokens(_without(a, drop), COUNTER)


@given(events=st.lists(EVENT, min_size=1, max_size=24), frac=st.floats(0.02, 1.3))
def test_fit_budget_properties(events, frac):
    segs = make_segments(events)
    a = build_anchor(segs, spans_of(segs))
    full = anchor_tokens(a, COUNTER)
    budget = max(1, int(full * frac))
    try:
        b, diags = fit_budget(a, budget, COUNTER)
    except BudgetError as exc:
        assert _floor(a) > budget * 1.2
        assert "could not fit" in str(exc)
        return
    n = anchor_tokens(b, COUNTER)
    assert n <= budget * 1.2
    if n > budget:
        assert any(d.code == "anchor-over-budget" for d in diags)
    if full <= budget:
        assert b is a and not diags
    assert _critical_ids(b) == _critical_ids(a)  # never dropped
    assert _all_ids(b) <= _all_ids(a)  # nothing invented
    assert b.intent.current == a.intent.current and b.intent.newest_request == a.intent.newest_request
    # fitting is deterministic
    b2, diags2 = fit_budget(a, budget, COUNTER)
    assert b2 == b and diags2 == diags
