"""The self-check's conversation memo gives the verdicts of a check without it.

A session's self-check looks again only at the spans it could not settle last time, the spans
found in a text that changed since, and the new spans (``TextMemo.unsettled``). Driven here
through many rounds of a growing conversation whose texts are rewritten (a span's text taken out
of its segment, put back, moved into another segment) against the same check without a memo.
"""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from compactor.audit.selfcheck import TextMemo, run_selfcheck
from compactor.models import Role, Segment, SegmentKind, Span
from compactor.segments import SegmentIndex

WORDS = ["ValueError: bad input", "exit code 2", "FAILED test_x", "timeout after 30 s", "no such file"]

# one round: append k new tool outputs; rewrite some texts (segment, variant); maybe a user request
# after them; maybe the segment list read again (other objects); ask the check
rounds = st.lists(st.tuples(st.integers(0, 3), st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3)),
                                                        max_size=4), st.booleans(), st.booleans()),
                  min_size=1, max_size=12)


def _text(i: int, variant: int) -> str:
    """Variant 0: the segment's own evidence line; 1: none of it; 2: another segment's; 3: both."""
    own = WORDS[i % len(WORDS)] + f" #{i}"
    other = WORDS[(i + 1) % len(WORDS)] + f" #{i + 1}"
    return {0: f"run {i}\n{own}\n", 1: f"run {i}\nall good\n", 2: f"run {i}\n{other}\n",
            3: f"run {i}\n{own}\n{other}\n"}[variant]


@settings(max_examples=60, deadline=None)
@given(plan=rounds)
def test_memo_verdicts_equal_a_check_without_memo(plan):
    segs: list[Segment] = []
    spans: list[Span] = []
    texts: dict[str, str] = {}
    memo = TextMemo()
    index = SegmentIndex()
    for new, rewrites, request, reread in plan:
        if reread:  # the conversation read again (other objects), without its trailing requests
            while segs and segs[-1].role == Role.user:
                texts.pop(segs.pop().id)
            segs = [s.model_copy() for s in segs]
        for _ in range(new):
            i = len(segs)
            sid = f"m{i}"
            seg = Segment(id=sid, index=i, step=i + 1, step_id=f"s{i + 1}", role=Role.tool,
                          kind=SegmentKind.tool_result, text=_text(i, 0))
            segs.append(seg)
            texts[sid] = seg.text
            line = WORDS[i % len(WORDS)] + f" #{i}"
            spans.append(Span(rule_id="error.line", family="error", segment_id=sid, start=0, end=len(line),
                              line_start=2, line_end=2, text=line, step_id=seg.step_id))
        if request:
            i = len(segs)
            segs.append(Segment(id=f"m{i}", index=i, step=i + 1, step_id=f"s{i + 1}", role=Role.user,
                                kind=SegmentKind.message, text=f"now fix case {i} too"))
            texts[f"m{i}"] = segs[-1].text
        for pos, variant in rewrites:
            if segs:
                s = segs[pos % len(segs)]
                texts[s.id] = _text(s.index, variant)
        if not segs:
            continue
        index.update(segs)
        ids = index.ids
        cur = [texts[i] for i in ids]
        normalized = memo.normalize_kept(ids, cur, index)
        got = run_selfcheck(segs, spans, None, None, None, folded=False, protected=list(spans), memo=memo,
                            normalized=normalized, index=index)
        want = run_selfcheck(segs, spans, None, dict(zip(ids, cur)), None, folded=False, protected=list(spans))
        assert [m.key for m in got.missing] == [m.key for m in want.missing]
        assert got.to_model() == want.to_model()
