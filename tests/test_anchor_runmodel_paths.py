"""The run model's per-turn shortcuts give what the plain computation gives.

The anchor is merged every turn of a session; the run model keeps what it can between turns (the
steps by id, the sections whose inputs did not change, the test summary's candidate lines). Each
shortcut is checked here against the computation it replaces, on adversarial and real inputs."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from compactor import Compactor
from compactor.anchor import build_anchor
from compactor.anchor import sections as S
from compactor.anchor.build import build_anchor_live, merge_live
from compactor.anchor.runmodel import _PYTEST_SUMMARY, RunFold, _summaries, _test_counts
from compactor.formats import load_document
from compactor.models import Role, Segment, SegmentKind
from compactor.normalize import normalize

@pytest.fixture(scope="module")
def comp():
    return Compactor()


CORPUS = Path(os.environ.get("COMPACTOR_CORPUS", "/work/shared/corpus"))


def _reference(text: str) -> list:
    return [(m.span(), m.groups()) for m in _PYTEST_SUMMARY.finditer(text)]


def _fast(text: str) -> list:
    return [(m.span(), m.groups()) for m in _summaries(text)]


# a summary the pattern reaches across blank, '=' and whitespace-only lines, split counts, indented
# code holding "in ", carriage returns and Unicode line and digit characters
SUMMARIES = [
    "===== 2 failed, 3 passed in 1.20s =====",
    "2 failed\n\n   3 passed in 0.5s",
    "=====\n\n \t\n== 4 failed in 2s ==",
    "1 failed\r\n, 2 passed in 3.0s\r\n",
    "    for x in range(3):\n        total += x\n=== 1 passed in 0.01s ===",
    "x in 1s\n5 passed in 2s\n6 failed in 3s",
    "Ran 5 tests in 0.003s\n\nOK",
    "\u2028 3 passed in 1s",
    "\x85\n٣ passed in 1s",
    "2 failed,\n\n\n  \n 7 passed in 9.9s and in 1.5s",
    "in 1s",
    "\n\n\nin 2s\n",
    "passed passed in 1s",
    "= = 1 failed in 1s",
]


@pytest.mark.parametrize("text", SUMMARIES)
def test_summary_lines_are_the_patterns_matches(text):
    assert _fast(text) == _reference(text)


def test_summary_cases_are_matched():
    assert sum(bool(_reference(t)) for t in SUMMARIES) >= len(SUMMARIES) - 1  # ('= = ...' has none)


def test_summary_lines_random_texts():
    tokens = ["\n", " ", "  ", "\t", "\r", "\x85", "\u2028", "\xa0", "=", "===", ",", "1", "23", "٣", "0.5", ".",
              "s", "in ", "in", " in 0.5s", "failed", " failed", "passed", " passed", "2 failed", ", 3 passed", "x",
              "errors", "Ran 3 tests in 0.01s", "in 1.2s ===", "ms"]
    rnd = random.Random(32)
    matched = 0
    for _ in range(4000):
        text = "".join(rnd.choice(tokens) for _ in range(rnd.randint(0, 60)))
        ref = _reference(text)
        assert _fast(text) == ref, repr(text)
        matched += bool(ref)
    assert matched > 1000  # the texts exercise the pattern, not only its absence


def test_test_counts_on_a_long_output_with_the_summary_at_its_end():
    body = "".join(f"    line {i} of a traceback in module_{i}.py\n" for i in range(400))
    text = body + "\n=========\n3 failed,\n\n 12 passed in 4.56s\n"
    assert _test_counts(text) == (12, 3)
    assert _fast(text[-6000:]) == _reference(text[-6000:])


def test_summary_lines_of_real_tool_outputs():
    if not CORPUS.is_dir():
        pytest.skip("corpus not available")
    seen = 0
    paths = [*sorted((CORPUS / "mini-swe-agent").glob("*.json")), *sorted((CORPUS / "swe-agent").glob("*.traj")),
             *sorted((CORPUS.parent / "trajectories-extra" / "mini-swe-agent").glob("*.json"))]
    for path in paths:
        for seg in load_document(path).segments:
            if seg.kind == SegmentKind.tool_result:
                tail = seg.text[-6000:]
                assert _fast(tail) == _reference(tail), (path.name, seg.id)
                seen += 1
    assert seen > 50


# ------------------------------------------------------------------ the fold's index


def _segments(calls: int, *, per_step: int = 2, fail_every: int = 5) -> list[Segment]:
    """A run of ``calls`` shell calls, ``per_step`` to a step (their results after all the step's
    calls), every ``fail_every``-th failing with a traceback, an edit now and then."""
    segs: list[Segment] = [Segment(id="m0", index=0, step=0, step_id="s0", role=Role.user, kind=SegmentKind.message,
                                   text="Fix the crash in app.py.")]

    def add(step: int, role, kind, text, **kw):
        segs.append(Segment(id=f"m{len(segs)}", index=len(segs), step=step, step_id=f"s{step}", role=role, kind=kind,
                            text=text, **kw))

    n = 0
    step = 0
    while n < calls:
        step += 1
        batch = []
        for _ in range(min(per_step, calls - n)):
            n += 1
            cmd = f"sed -i 's/{n}/{n + 1}/' app.py" if n % 7 == 0 else f"python check_{n % 4}.py"
            add(step, Role.assistant, SegmentKind.tool_call, json.dumps({"command": cmd}), call_id=f"c{n}",
                tool_name="bash", command=cmd)
            batch.append((n, cmd))
        for k, cmd in reversed(batch):  # results in another order than the calls
            bad = k % fail_every == 0
            out = (f'Traceback (most recent call last):\n  File "app.py", line {k}, in <module>\n'
                   f"ValueError: bad value {k % 3}\n") if bad else "ok\n"
            add(step, Role.tool, SegmentKind.tool_result, out, call_id=f"c{k}", tool_name="bash", command=cmd,
                exit_code=1 if bad else 0, is_error=bad)
    return segs


def test_fold_index_is_the_models_index_as_steps_come_and_go():
    fold = RunFold()
    segs = _segments(150, per_step=3)
    for seg in segs:
        fold.feed(seg)
        files, fams, by_step = fold.index()
        ref_files, ref_fams, ref_by_step = S.index(fold.model())
        assert files == ref_files and fams == ref_fams
        assert by_step == ref_by_step
        # the same step objects as the model's, in the same order
        assert all(a is b for k in ref_by_step for a, b in zip(by_step[k], ref_by_step[k]))
    assert len(fold.model().steps) == 64 and fold.calls == 150  # steps were dropped along the way
    # a fold continued from a frozen model has the same index
    again = RunFold(fold.model())
    assert again.index()[2] == ref_by_step


@pytest.mark.parametrize("per_step,fail_every", [(1, 3), (2, 5), (4, 2)])
def test_merging_message_by_message_equals_building_at_every_message(comp, per_step, fail_every):
    segs = _segments(90, per_step=per_step, fail_every=fail_every)
    # the run stops on an API error, then the user asks it to go on
    segs.append(Segment(id="x1", index=len(segs), step=999, step_id="s999", role=Role.system, kind=SegmentKind.message,
                        text="litellm.InternalServerError: overloaded", meta=True))
    segs.append(Segment(id="x2", index=len(segs), step=1000, step_id="s1000", role=Role.user,
                        kind=SegmentKind.message, text="Please continue."))
    spans = {s.id: comp.detector.detect(normalize(s.text), role=s.role.value, segment_id=s.id, step_id=s.step_id).spans
             for s in segs}
    # one merge per segment, as a session compacting after every message (a result arrives alone)
    a, live = build_anchor_live([])
    for j, seg in enumerate(segs, 1):
        a, live = merge_live(a, [seg], spans[seg.id], live)
        whole = build_anchor(segs[:j], [sp for s in segs[:j] for sp in spans[s.id]])
        assert a.model_dump() == whole.model_dump(), seg.id
    assert a.key_evidence
    assert "stopped" in a.status or a.status.startswith("Working")
