"""The run-model sections as a user gets them (compact, a continued working state) are the sections
derived again from the run model without any memo: a change whose call failed is never 'applied'."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import tune_run

from compactor import Compactor, compact
from compactor.anchor import continuation_check, sections as S
from compactor.anchor.build import build_anchor_live, merge_live
from compactor.formats import load_document
from compactor.models import Anchor, SegmentKind
from compactor.normalize import normalize

ROOT = Path(__file__).resolve().parent.parent
# runs of the tuning half only (the test half is never read by a test)
TUNE_RUNS = ("corpus/claude-code/stop-hook-uncommitted-changes.jsonl",
             "corpus/openhands-v0/ponylang__ponyc-4593.json",
             "corpus/swe-agent/marshmallow-1867.function_calling_replace_from_source.traj",
             "trajectories-extra/mini-swe-agent/astropy-13033.live-swe-agent.traj.json")

REJECTED_EDIT = [
    {"role": "user", "content": "Update docs/api.md to the new module path acme.net.client."},
    {"role": "assistant", "content": "I'll edit the docs.", "tool_calls": [{"id": "e1", "type": "function", "function": {
        "name": "str_replace_editor", "arguments": json.dumps({
            "command": "str_replace", "path": "/repo/docs/api.md", "old_str": "acme.utils.http.Session",
            "new_str": "acme.net.client.Session"})}}]},
    {"role": "tool", "tool_call_id": "e1",
     "content": "No replacement was performed, old_str `acme.utils.http.Session` did not appear verbatim in "
                "/repo/docs/api.md."},
]


def _failed_call_changes(a: Anchor) -> list:
    """The changes shown as applied although every call of their step that wrote their files failed."""
    by_step: dict[str, list] = {}
    for st in a.cursor.run.steps:
        by_step.setdefault(st.step, []).append(st)
    out = []
    for c in a.changes_made:
        steps = [s for s in by_step.get(c.source_step, ()) if set(s.files) & set(c.files)]
        if c.status == "applied" and steps and all(s.done and not s.ok for s in steps):
            out.append(c)
    return out


def _check_against_unmemoised(a: Anchor) -> None:
    run = a.cursor.run
    assert run.calls
    # each section derived again from what the anchor shows, without memo, is what it shows
    assert S.changes(list(a.changes_made), run) == a.changes_made
    assert S.failed_approaches(list(a.failed_attempts), run, a.changes_made) == a.failed_attempts
    assert S.evidence(list(a.key_evidence), run, failed=list(a.failed_attempts)) == a.key_evidence
    assert _failed_call_changes(a) == []


def test_a_rejected_edit_in_the_refactor_fixture_is_no_applied_change():
    a = compact(ROOT / "fixtures" / "anchor" / "refactor.swe-agent.traj", format="swe-agent").anchor
    _check_against_unmemoised(a)
    # the tool rejected the s13 edit of docs/api.md: it changed nothing (a failed attempt, the
    # file trail says its last edit failed), as the anchor built without the self-check says
    assert not any("/repo/docs/api.md" in c.files and c.status == "applied" for c in a.changes_made)
    assert any("/repo/docs/api.md" in fa.command for fa in a.failed_attempts)
    assert next(f for f in a.files_touched if f.path == "/repo/docs/api.md").unfinished


def test_a_rejected_edit_as_the_last_step_of_a_chat_is_no_applied_change():
    r = compact(REJECTED_EDIT, format="openai-chat")
    a = r.anchor
    [st] = a.cursor.run.steps
    assert st.action == "edit" and st.done and not st.ok and st.files == ("/repo/docs/api.md",)
    _check_against_unmemoised(a)
    assert [c for c in a.changes_made if "/repo/docs/api.md" in c.files and c.status == "applied"] == []
    assert not any(x.startswith("continuation:files_changed") for x in r.report.self_check.backfilled)
    # the same edit accepted is a change (the check does not drop what did happen)
    ok = [*REJECTED_EDIT[:2], {**REJECTED_EDIT[2], "content": "The file /repo/docs/api.md has been edited."}]
    b = compact(ok, format="openai-chat").anchor
    assert [c.status for c in b.changes_made if "/repo/docs/api.md" in c.files] == ["applied"]
    # and the back-fill still answers for a file whose edit the run model saw succeed
    bare = b.model_copy(update={"changes_made": []})
    back, filled = continuation_check(bare, load_document(ok, format="openai-chat").segments)
    assert [c.status for c in back.changes_made if "/repo/docs/api.md" in c.files] == ["applied"], filled
    assert any(x.startswith("files_changed:") for x in filled)


def _turns(segments, spans):
    """The run-model sections of a continued working state frozen after every tool call and every
    tool result (a call read before its result, as a live session may)."""
    out = []
    a, live = build_anchor_live([], [])
    by_seg: dict[str, list] = {}
    for sp in spans:
        by_seg.setdefault(sp.segment_id, []).append(sp)
    pending = []
    for s in segments:
        pending.append(s)
        if s.kind not in (SegmentKind.tool_call, SegmentKind.tool_result) and s is not segments[-1]:
            continue
        a, live = merge_live(a, pending, [sp for x in pending for sp in by_seg.get(x.id, ())], live)
        pending = []
        out.append((a.changes_made, a.failed_attempts, a.key_evidence))
    return out, a


def _unmemoised_turns(segments, spans, monkeypatch):
    """:func:`_turns` with every per-item memo and fold stamp of the sections left out."""
    for name in ("changes", "failed_approaches", "evidence"):
        orig = getattr(S, name)
        if name == "changes":
            monkeypatch.setattr(S, name, lambda items, run, memo=None, idx=None, fold=None, _o=orig:
                                _o(items, run, None, idx, None))
        elif name == "failed_approaches":
            monkeypatch.setattr(S, name, lambda items, run, net, memo=None, idx=None, _o=orig:
                                _o(items, run, net, None, idx))
        else:
            monkeypatch.setattr(S, name, lambda items, run, memo=None, searched=None, failed=None, idx=None, _o=orig:
                                _o(items, run, None, searched, failed, idx))
    try:
        return _turns(segments, spans)[0]
    finally:
        monkeypatch.undo()


# a change the run model later takes back (a revert), a failed install retried with success, an
# edit the tool rejected: each turn's sections must follow the run model, not an earlier turn
LATER = [
    {"role": "user", "content": "Fix the crash in app.py."},
    *[m for i, (name, args, out) in enumerate([
        ("str_replace_editor", {"command": "str_replace", "path": "/repo/app.py", "old_str": "a", "new_str": "b"},
         "The file /repo/app.py has been edited."),
        ("str_replace_editor", {"command": "str_replace", "path": "/repo/docs/api.md", "old_str": "x", "new_str": "y"},
         "No replacement was performed, old_str `x` did not appear verbatim in /repo/docs/api.md."),
        ("bash", {"command": "pip install requests"}, "ERROR: Could not find a version that satisfies the "
                                                       "requirement requests\nExit code: 1"),
        ("bash", {"command": "git checkout -- /repo/app.py"}, "Updated 1 path from the index\nExit code: 0"),
        ("bash", {"command": "pip install requests"}, "Successfully installed requests-2.31.0\nExit code: 0"),
    ]) for m in (
        {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}", "type": "function", "function": {
            "name": name, "arguments": json.dumps(args)}}]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": out})],
]


def test_memoised_sections_follow_later_results_turn_by_turn(monkeypatch):
    segments = load_document(LATER, format="openai-chat").segments
    memoised, last = _turns(segments, [])
    plain = _unmemoised_turns(segments, [], monkeypatch)
    assert memoised == plain
    # the revert took the first edit back, and the rejected edit is no change
    assert not any({"/repo/app.py", "/repo/docs/api.md"} & set(c.files) for c in last.changes_made)
    assert any("/repo/app.py" in c.files for turn in memoised[:3] for c in turn[0])  # (it was one, turns before)
    _check_against_unmemoised(last)


@pytest.mark.parametrize("rel", TUNE_RUNS)
def test_memoised_sections_are_the_unmemoised_ones_on_tuning_runs(rel, monkeypatch):
    path = tune_run(rel)
    segments = load_document(path).segments
    comp = Compactor()
    spans = [sp for s in segments for sp in comp.detector.detect(
        normalize(s.text), role=s.role.value, segment_id=s.id, step_id=s.step_id).spans]
    memoised, last = _turns(segments, spans)
    plain = _unmemoised_turns(segments, spans, monkeypatch)
    assert len(memoised) == len(plain) > 1
    for i, (m, p) in enumerate(zip(memoised, plain)):
        assert m == p, (rel, i)
    _check_against_unmemoised(last)
    # what a user gets from compact is the same derivation (the self-check adds no applied change
    # the run model says failed)
    _check_against_unmemoised(compact(path).anchor)
