"""The segment index a conversation keeps: the same lists as a fresh pass, and a mark that says
without a pass whether the segments it named are still the first ones."""

from __future__ import annotations

from compactor.formats import load_document
from compactor.segments import SegmentIndex


def _messages(n: int) -> list[dict]:
    out: list[dict] = [{"role": "user", "content": "fix the failing test"}]
    for i in range(n):
        out.append({"role": "assistant", "content": f"step {i}",
                    "tool_calls": [{"id": f"c{i}", "type": "function",
                                    "function": {"name": "bash", "arguments": '{"command": "pytest -x"}'}}]})
        out.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"ERROR test_{i} failed"})
    return out


def _fresh(segs) -> SegmentIndex:
    return SegmentIndex().update(list(segs))


def test_grown_list_keeps_the_mark_and_the_lists_of_a_fresh_pass():
    segs = load_document(_messages(6)).segments
    idx = SegmentIndex()
    idx.update(segs[:5])
    mark = idx.mark()
    idx.forget()
    idx.update(segs)  # the same objects, grown
    assert idx.extends(mark) and mark[1] == 5
    fresh = _fresh(segs)
    assert (idx.ids, idx.texts, idx.results, idx.result_pos, idx.live_ids) == \
        (fresh.ids, fresh.texts, fresh.results, fresh.result_pos, fresh.live_ids)


def test_a_changed_or_shorter_list_starts_a_new_generation():
    segs = load_document(_messages(6)).segments
    other = load_document(_messages(6)).segments  # equal segments, other objects
    idx = SegmentIndex()
    idx.update(segs)
    mark = idx.mark()
    idx.forget()
    idx.update(segs[:3])  # shorter
    assert not idx.extends(mark)
    idx.update(segs)
    assert not idx.extends(mark)  # grown again, but a new generation: not the list the mark named
    mark = idx.mark()
    idx.forget()
    idx.update([*segs[:4], other[4], *segs[5:]])  # one segment replaced (same length)
    assert not idx.extends(mark)
    assert idx.ids == _fresh(segs).ids
    assert not SegmentIndex().extends(None)


def test_differing_is_changed_where_equal_items_mean_the_same():
    from compactor.segments import PROBE, changed, differing

    n = 3 * PROBE
    old = [f"text {i}" for i in range(n)]
    for new in (list(old), [*old, "new"], old[:n - 5]):
        assert differing(old, new) == changed(old, new) == []
    # a replaced item is found wherever it is: in the last positions or before them
    for at in (0, PROBE, n - PROBE - 1, n - PROBE, n - 1):
        new = list(old)
        new[at] = "other"
        assert differing(old, new) == changed(old, new) == [at]
        assert differing(old, [*new, "grown"]) == [at]
    # an equal text that is another object: unchanged in the compared part, changed by identity
    # in the last positions (only an equal prefix is skipped), as ``changed`` says
    copy = [s.encode().decode() for s in old]
    assert all(a is not b for a, b in zip(old, copy))
    assert differing(old, copy) == list(range(n - PROBE, n))
    assert changed(old, copy) == list(range(n))
    # short lists are compared item by item
    assert differing(["a"], ["b"]) == [0]
