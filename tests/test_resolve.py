"""Overlap resolution: the chunked structure gives the same choice as the plain definition, and
detection builds the same spans from plain tuples as from models."""

from __future__ import annotations

from hypothesis import given, strategies as st

from compactor.detect import Detector
from compactor.engine import load_rules
from compactor.engine.matchers import _Disjoint, _make_span, resolve_found, resolve_spans


def _reference(spans):
    # the definition: by (priority desc, length desc, start, rule id), keep what overlaps nothing kept
    kept = []
    for s in sorted(spans, key=lambda s: (-s.priority, -(s.end - s.start), s.start, s.rule_id)):
        if s.start == s.end:
            continue
        if all(s.end <= k.start or k.end <= s.start for k in kept):
            kept.append(s)
    return sorted(kept, key=lambda s: (s.start, s.end, s.rule_id))


class _Rule:
    def __init__(self, rid, prio):
        self.id, self.priority, self.family = rid, prio, "error"


_span = st.tuples(st.integers(0, 300), st.integers(0, 12), st.sampled_from([("a", 80), ("b", 40), ("c", 40)]))


@given(st.lists(_span, max_size=120))
def test_resolve_matches_the_definition(items):
    spans = [_make_span(r, "error", None, a, a + n, 1, 1, "", p, None) for a, n, (r, p) in items]
    assert resolve_spans(spans) == _reference(spans)
    rules = {r: _Rule(r, p) for _a, _n, (r, p) in items}
    found = [(rules[r], a, a + n, 0, 0, False) for a, n, (r, _p) in items]
    got = [(f[0].id, f[1], f[2]) for f in resolve_found(found)]
    assert got == [(s.rule_id, s.start, s.end) for s in _reference(spans)]


def test_resolve_beyond_the_flat_size(monkeypatch):
    from compactor.engine import matchers

    spans = [_make_span("r" + str(i % 3), "error", None, (i * 7919) % 5000, (i * 7919) % 5000 + 1 + i % 9, 1, 1, "",
                        40 + i % 2 * 40, None) for i in range(3000)]
    flat = resolve_spans(spans)
    monkeypatch.setattr(matchers, "FLAT_MAX", 10)
    assert resolve_spans(spans) == flat == _reference(spans)


def test_chunks_split_and_stay_sorted():
    d = _Disjoint()
    # interleaved inserts across many chunks, then every overlap refused
    order = list(range(0, 20_000, 2))
    order = order[::2] + order[1::2][::-1]
    for a in order:
        assert d.add_if_free(a * 10, a * 10 + 5)
    assert len(d.firsts) > 10
    flat = [x for c in d.starts for x in c]
    assert flat == sorted(flat) and len(flat) == len(order)
    assert d.firsts == [c[0] for c in d.starts]
    for a in order[:500]:
        assert not d.add_if_free(a * 10 + 4, a * 10 + 12)
        assert not d.add_if_free(a * 10 - 3, a * 10 + 1)
    assert d.add_if_free(35, 40)  # a gap between two accepted intervals


def test_raw_spans_and_protected_lines_agree():
    det = Detector(load_rules())
    text = "\n".join(["ok", "Traceback (most recent call last):", '  File "a.py", line 3, in f', "    f()",
                      "ValueError: bad", "x.py:12: error: boom", "done"])
    res = det.detect(text, role="tool")
    assert res.raw_spans and res.spans
    assert list(res.raw_spans) == sorted(res.raw_spans, key=lambda s: (s.start, s.end, s.rule_id))
    lines = set()
    for s in res.raw_spans:
        lines.update(range(s.line_start - 1, s.line_end))
    assert res.protected_lines() == lines
    assert res.protected_lines(context=1, nlines=7) >= lines
    assert set(res.spans) <= set(res.raw_spans)
    assert res == det.detect(text, role="tool")
