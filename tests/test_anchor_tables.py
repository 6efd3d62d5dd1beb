"""The fold's indexed item tables (``compactor.anchor._tables``): after any sequence of
assignments, deletions and pops, every index equals the one recomputed from the table's items by
walking them all (what the fold did on every output before it had the indexes), and the table is
the same dict, in the same order, as a plain dict given the same operations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactor.anchor._tables import (
    NOT_FAILURE,
    TOOL_ERROR,
    EvidenceTable,
    FailedTable,
    evidence_line,
    missing_modules,
)
from compactor.models import Evidence, FailedAttempt

_TEXTS = ("ValueError: bad", "- ValueError: bad", "  ValueError: bad  ", "E   assert 1 == 2",
          "ModuleNotFoundError: No module named 'yaml'", "No module named 'a' and No module named 'b.c'",
          "No module named 'No module named 'x'", "Traceback (most recent call last):\nKeyError: 'k'",
          "No module named 'unterminated", "ok")
_RULES = ("anchor.reported", TOOL_ERROR, "anchor.verification", "error.exception-line", "trace.python")
_FAMILIES = ("error", "trace", "verification", "location", "reproduction", "test-failure")
_STEPS = ("s1", "s2", "s3")
_IDS = tuple(f"ev-{i}" for i in range(6))

_evidence = st.builds(
    lambda i, text, rule, fam, step, live: Evidence(id=i, source_step=step, text=text, rule_id=rule, family=fam,
                                                    status="live" if live else "resolved"),
    st.sampled_from(_IDS), st.sampled_from(_TEXTS), st.sampled_from(_RULES), st.sampled_from(_FAMILIES),
    st.sampled_from(_STEPS), st.booleans())
_ops = st.lists(st.one_of(st.tuples(st.just("set"), _evidence),
                          st.tuples(st.just("del"), st.sampled_from(_IDS)),
                          st.tuples(st.just("pop"), st.sampled_from(_IDS))), max_size=40)


def _apply(table: dict, plain: dict, ops) -> None:
    for op, arg in ops:
        if op == "set":
            table[arg.id] = arg
            plain[arg.id] = arg
        elif op == "del":
            if arg in plain:
                del table[arg]
                del plain[arg]
            else:
                with pytest.raises(KeyError):
                    del table[arg]
        else:
            assert table.pop(arg, None) is plain.pop(arg, None)


def _naive_modules(text: str, module: str) -> bool:
    return f"No module named '{module}'" in text


@settings(max_examples=300, deadline=None)
@given(_ops)
def test_evidence_indexes_equal_a_walk_of_every_item(ops):
    table, plain = EvidenceTable(), {}
    _apply(table, plain, ops)
    assert list(table.items()) == list(plain.items())
    items = list(plain.values())
    assert set(table.live) == {e.id for e in items if e.status == "live"}
    assert set(table.resolvable) == {e.id for e in items if e.status == "live" and e.family not in NOT_FAILURE
                                     and e.rule_id != TOOL_ERROR}
    for rule, ids in table.by_rule.items():
        assert set(ids) == {e.id for e in items if e.rule_id == rule}
    for step in _STEPS:
        n = sum(1 for e in items if e.family == "verification" and e.source_step == step)
        assert table.verified_steps.get(step, 0) == n
    assert all(table.verified_steps.values())
    one_line = [e for e in items if e.family != "verification" and "\n" not in evidence_line(e.text)]
    assert {k: set(v) for k, v in table.by_line.items()} == \
        {line: {e.id for e in one_line if evidence_line(e.text) == line} for line in {evidence_line(e.text) for e in one_line}}
    for module in ("yaml", "a", "b.c", "x", "No module named ", "unterminated"):
        assert set(table.live_by_module.get(module, ())) == \
            {e.id for e in items if e.status == "live" and _naive_modules(e.text, module)}
    assert all(table.live_by_module.values())
    # every item assigned and not deleted since the last take is in the changed set
    assert set(table.take_changed()) <= set(plain)
    assert table.take_changed() == []


_failed = st.builds(
    lambda i, err, step, failing: FailedAttempt(id=i, source_step=step, command="pytest", error=err,
                                                status="failed" if failing else "resolved"),
    st.sampled_from(_IDS), st.sampled_from(_TEXTS + ("", "ValueError: bad … KeyError: 'k'", " … ")),
    st.sampled_from(_STEPS), st.booleans())
_fops = st.lists(st.one_of(st.tuples(st.just("set"), _failed),
                           st.tuples(st.just("del"), st.sampled_from(_IDS)),
                           st.tuples(st.just("pop"), st.sampled_from(_IDS))), max_size=40)


@settings(max_examples=300, deadline=None)
@given(_fops, st.integers(0, 40))
def test_failed_indexes_equal_a_walk_of_every_attempt(ops, cut):
    table, plain = FailedTable(), {}
    _apply(table, plain, ops[:cut])
    before = {p for f in plain.values() if f.error for p in (f.error, *f.error.split(" … "))}
    table.take_new_carried()
    _apply(table, plain, ops[cut:])
    carried = {p for f in plain.values() if f.error for p in (f.error, *f.error.split(" … "))}
    assert set(table.carried) == carried
    assert all(table.carried.values())
    # every text carried now and not before is reported as newly carried
    assert carried - before <= set(table.take_new_carried())
    for module in ("yaml", "a", "b.c", "x"):
        assert set(table.failing_by_module.get(module, ())) == \
            {f.id for f in plain.values() if f.status == "failed" and _naive_modules(f.error, module)}


@given(st.text(alphabet="No mduleamd'xy. ", max_size=60))
def test_missing_modules_is_the_phrase_search(text):
    found = missing_modules(text)
    for m in found:
        assert _naive_modules(text, m)
    # every quote-free module the phrase names is found (overlapping occurrences included)
    for i in range(len(text)):
        for j in range(i, len(text) + 1):
            m = text[i:j]
            if "'" not in m and _naive_modules(text, m):
                assert m in found


def test_mutations_other_than_assignment_del_and_pop_are_refused():
    t = EvidenceTable([Evidence(id="ev-1", source_step="s1", text="x")])
    for call in (lambda: t.update({}), lambda: t.setdefault("k", None), lambda: t.popitem(), lambda: t.clear()):
        with pytest.raises(TypeError):
            call()
    with pytest.raises(KeyError):
        t.pop("missing")
    assert list(t) == ["ev-1"]


# ------------------------------------------------------------------ the fold with the tables
from test_anchor_props import CALLS, EVENT, make_segments, spans_of  # noqa: E402  (tests/ is on sys.path)

from compactor.anchor.build import _State  # noqa: E402
from compactor.models import Anchor, AnchorCursor  # noqa: E402


class _WalkEveryItem(_State):
    """The dedupe of carried error lines as it was before the indexes: every failed attempt's
    errors against every evidence item, on every failed output."""

    def _dedupe_evidence(self, step: str) -> None:
        carried: set[str] = set()
        for f in self.failed.values():
            if f.error:
                carried.add(f.error)
                carried.update(f.error.split(" … "))
        if not carried:
            return
        for eid, e in list(self.evidence.items()):
            t = evidence_line(e.text)
            if t in carried and e.source_step != step and "\n" not in t and e.family != "verification":
                del self.evidence[eid]


def _fold(cls, segs, spans):
    by_seg: dict[str, list] = {}
    for sp in spans:
        by_seg.setdefault(sp.segment_id, []).append(sp)
    st = cls(Anchor(cursor=AnchorCursor()))
    for seg in segs:
        st.feed(seg, sorted(by_seg.get(seg.id, ()), key=lambda sp: (sp.start, sp.end, sp.rule_id)))
    return st.freeze()


# failures of the same commands again and again, passes between them, and outputs with several
# error lines in turn (a later failure's error line can be an earlier output's second line)
_ERRORS = ("ValueError: bad input", "KeyError: 'user_id'", "ConnectionError: refused", "AssertionError: 2 != 3")
_OUTPUT = st.lists(st.sampled_from(_ERRORS), min_size=0, max_size=3).map(lambda ls: "\n".join(ls))
_SHELL = st.tuples(st.sampled_from(("python run.py", "python -m pytest -q", "make check")), _OUTPUT,
                   st.sampled_from((0, 1)), st.booleans())


def _segments(events) -> list:
    from compactor.models import Role, Segment, SegmentKind

    # the generated events first, then the shell runs (one step each, or sharing the previous one)
    out = make_segments([e for e in events if e[0] != "shell"])
    step = len(events) + 1
    for n, ev in enumerate(events):
        if ev[0] != "shell":
            continue
        _, (cmd, text, rc, same_step) = ev
        step += 0 if same_step else 1
        sid = f"s{step}"
        out.append(Segment(id=f"x{n}.c", index=len(out), step=step, step_id=sid, role=Role.assistant,
                           kind=SegmentKind.tool_call, text=cmd, call_id=f"x{n}", tool_name="bash", command=cmd))
        out.append(Segment(id=f"x{n}.r", index=len(out), step=step, step_id=sid, role=Role.tool,
                           kind=SegmentKind.tool_result, text=text, call_id=f"x{n}", tool_name="bash", command=cmd,
                           exit_code=rc, is_error=rc != 0))
    return out


_FAILING = st.tuples(st.just("call"), st.sampled_from([i for i, c in enumerate(CALLS) if c[4] or "No " in c[3]
                                                      or "error" in c[3]]), st.booleans(), st.just(True))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(EVENT, _FAILING, st.tuples(st.just("shell"), _SHELL), st.tuples(st.just("shell"), _SHELL)),
                max_size=40))
def test_fold_dedupe_equals_the_walk_of_every_item(events):
    segs = _segments(events)
    spans = spans_of(segs)
    assert _fold(_State, segs, spans).model_dump() == _fold(_WalkEveryItem, segs, spans).model_dump()


@settings(max_examples=50, deadline=None)
@given(_ops, _fops)
def test_pickle_and_copy_rebuild_the_indexes(ops, fops):
    import copy
    import pickle

    ev, failed = EvidenceTable(), FailedTable()
    _apply(ev, {}, ops)
    _apply(failed, {}, fops)
    fresh_ev, fresh_failed = EvidenceTable(ev.values()), FailedTable(failed.values())
    for clone in (pickle.loads(pickle.dumps(ev)), copy.copy(ev), copy.deepcopy(ev)):
        assert type(clone) is EvidenceTable and list(clone.items()) == list(ev.items())
        for attr in EvidenceTable.__slots__:
            assert getattr(clone, attr) == getattr(fresh_ev, attr), attr
    for clone in (pickle.loads(pickle.dumps(failed)), copy.copy(failed), copy.deepcopy(failed)):
        assert type(clone) is FailedTable and list(clone.items()) == list(failed.items())
        for attr in FailedTable.__slots__:
            assert getattr(clone, attr) == getattr(fresh_failed, attr), attr
