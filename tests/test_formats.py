"""Layout readers and writers: detection, pairing, round trips and edits.

Real files come from ../shared/corpus (skipped when absent); the small realistic fixtures in
fixtures/trajectories/ were written for these tests, one or more per layout.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from compactor.errors import InputError
from compactor.formats import REGISTRY, Document, Edits, detect, get_format
from compactor.formats.base import Format, Probe, plan_drops
from compactor.formats.inputs import make_probe, read_input
from compactor.models import Role, Segment, SegmentKind

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
FIXTURES = ROOT / "fixtures" / "trajectories"

# corpus file -> (layout, tool_call segments, tool_result segments). Checked by hand:
# pydicom: 12 text actions, the final `submit` has no observation in history;
# marshmallow 1.x: 13 calls, 13 tool messages (ids repeat, paired oldest-first);
# django-11099: 42 calls, the last (submit) answered by the `exit` message, not a tool message;
# ponyc-4593: 32 run/read/edit actions + finish (no observation), 32 observations + one
#   `observation: "error"` with no cause; basic: one edit + its observation (finish has no call);
# V1 corrupt-transactions: 6 file-editor views + finish, 7 observations;
# coverage-test-fix: 13 tool_use / 13 tool_result; stop-hook: 2 / 2;
# codex sample: truncated before any tool call; aider: console blocks only.
CORPUS_TABLE: dict[str, tuple[str, int, int]] = {
    "swe-agent/pydicom__pydicom-1458.gpt4.traj": ("swe-agent", 12, 11),
    "swe-agent/marshmallow-1867.function_calling_replace_from_source.traj": ("swe-agent", 13, 13),
    "mini-swe-agent/django__django-11099.deepseek_chat_test_1-100.traj.json": ("openai-chat", 42, 41),
    "mini-swe-agent/pvlib__pvlib-python-1072.deepseek_reasoner_dev.traj.json": ("openai-chat", 15, 15),
    "openhands-v0/ponylang__ponyc-4593.json": ("openhands", 33, 33),
    "openhands-v0/runtime-trajs-basic.json": ("openhands", 1, 1),
    "openhands-v1/safety-corrupt-transactions.gpt-4o.json": ("openhands", 7, 7),
    "claude-code/coverage-test-fix.jsonl": ("claude-code", 13, 13),
    "claude-code/stop-hook-uncommitted-changes.jsonl": ("claude-code", 2, 2),
    "codex-rollout/sample_codex_session.jsonl": ("codex", 0, 0),
    "aider/zen-mcp-server.aider.chat.history.md": ("aider", 0, 12),
}
CORPUS_DIRS = {
    "swe-agent": "swe-agent",
    "mini-swe-agent": "openai-chat",
    "openhands-v0": "openhands",
    "openhands-v1": "openhands",
    "claude-code": "claude-code",
    "codex-rollout": "codex",
    "aider": "aider",
}

# fixture -> (layout, tool calls, tool results)
FIXTURE_TABLE: dict[str, tuple[str, int, int]] = {
    "starship.steps.json": ("steps", 4, 4),
    "ci-lint.steps.json": ("steps", 4, 4),
    "textkit-slug.swe-agent-0x.traj": ("swe-agent", 8, 7),
    "textkit-deps.swe-agent-1x.traj": ("swe-agent", 6, 5),
    "web-build.openhands-v0.json": ("openhands", 6, 6),
    "nightly-report.openhands-v1.json": ("openhands", 5, 4),
    "acme-version.openai-chat.traj.json": ("openai-chat", 3, 2),
    "lodash-merge.anthropic.json": ("anthropic", 5, 5),
    "cart-total.claude-code.jsonl": ("claude-code", 7, 6),
    "cart-coupon.claude-export.md": ("claude-code-md", 4, 4),
    "pricing-page.gemini-cli.jsonl": ("gemini-cli", 6, 6),
    "rate-limit.codex.jsonl": ("codex", 4, 4),
    "config-fix.codex-tui.jsonl": ("codex-tui", 8, 8),
    "invoice.aider.chat.history.md": ("aider", 0, 7),
    "pytest-run.log": ("text", 0, 1),
    "round-cents.atif.json": ("atif", 3, 3),
    "slug-accents.gemini-contents.json": ("gemini-contents", 4, 4),
    "stats-median.debug-gym.json": ("debug-gym", 3, 4),  # step 0's evaluation answers no call
    "invoice.openhands-output.jsonl": ("openhands-output", 3, 3),  # the finish actions carry no call text
    "iso-week.cline.api_conversation_history.json": ("cline", 5, 4),  # attempt_completion's reply is feedback
    "cart-cents.roo-code.api_conversation_history.json": ("cline", 4, 4),
    "iso-week.cline.ui_messages.json": ("cline-ui", 4, 2),  # file tools show no result in the UI
    "nginx-502.conversation.json": ("conversation", 2, 2),
}


# ---------------------------------------------------------------------------- helpers


def load(path: Path) -> tuple[Probe, Format, Document]:
    probe = make_probe(read_input(path))
    fmt = detect(probe)
    return probe, fmt, fmt.read(probe)


def load_text(text: str, name: str = "<test>") -> tuple[Probe, Format, Document]:
    from compactor.formats.inputs import decode_bytes

    probe = make_probe(decode_bytes(text.encode("utf-8"), name))
    fmt = detect(probe)
    return probe, fmt, fmt.read(probe)


def parsed(probe: Probe, fmt: Format) -> Any:
    if fmt.container == "text":
        return probe.raw.text
    if fmt.container == "jsonl":
        return probe.jsonl if probe.jsonl is not None else [probe.json_value]
    return probe.json_value


def sig(doc: Document) -> list[tuple[Any, ...]]:
    return [(s.id, s.role, s.kind, s.text, s.call_id) for s in doc.segments]


def content_sig(segs: list[Segment]) -> list[tuple[Any, ...]]:
    return [(s.role, s.kind, s.text, s.call_id) for s in segs]


def counts(doc: Document) -> tuple[int, int]:
    c = Counter(s.kind for s in doc.segments)
    return c[SegmentKind.tool_call], c[SegmentKind.tool_result]


def all_strings(obj: Any):
    stack = [obj]
    while stack:
        cur = stack.pop()
        if isinstance(cur, str):
            yield cur
        elif isinstance(cur, dict):
            stack.extend(cur.values())
        elif isinstance(cur, list):
            stack.extend(cur)


def check_segments_wellformed(doc: Document) -> None:
    ids = [s.id for s in doc.segments]
    assert len(ids) == len(set(ids)), "segment ids must be unique"
    assert [s.index for s in doc.segments] == list(range(len(doc.segments)))
    for s in doc.segments:
        assert s.step >= 0 and s.step_id, s.id


def check_pairing(doc: Document) -> None:
    calls = {s.call_id for s in doc.segments if s.kind == SegmentKind.tool_call and s.call_id}
    for s in doc.segments:
        if s.kind == SegmentKind.tool_result and s.call_id:
            assert s.call_id in calls, f"{s.id}: result for {s.call_id} has no call"


def reread(fmt: Format, out: Any) -> tuple[Probe, Format, Document]:
    text = fmt.dumps(out)
    probe, fmt2, doc2 = load_text(text)
    return probe, fmt2, doc2


def corpus_file(rel: str) -> Path:
    if not CORPUS.is_dir():
        pytest.skip("shared corpus not present")
    path = CORPUS / rel
    if not path.exists():
        pytest.skip(f"{rel} not in the corpus")
    return path


# ---------------------------------------------------------------------------- registry


def test_registry_order_and_metadata() -> None:
    names = [f.name for f in REGISTRY]
    assert names == ["steps", "swe-agent", "openhands", "openhands-output", "cline", "cline-ui", "openai-chat",
                     "anthropic", "claude-sdk-stream", "claude-code", "claude-code-chat-json", "pi-session",
                     "claude-code-md", "gemini-cli", "gemini-contents", "atif", "debug-gym", "codex", "codex-tui",
                     "aider", "agent-log", "conversation", "text"]
    for f in REGISTRY:
        assert f.title and f.detection and f.container in ("json", "jsonl", "text")


# ---------------------------------------------------------------------------- corpus


def test_every_corpus_file_is_in_the_table() -> None:
    if not CORPUS.is_dir():
        pytest.skip("shared corpus not present")
    for d, layout in CORPUS_DIRS.items():
        for f in sorted((CORPUS / d).iterdir()) if (CORPUS / d).is_dir() else []:
            rel = f"{d}/{f.name}"
            _, fmt, _ = load(f)
            assert fmt.name == layout, rel
            assert rel in CORPUS_TABLE, f"{rel}: add its layout and call/result counts to CORPUS_TABLE"
            assert CORPUS_TABLE[rel][0] == layout


@pytest.mark.corpus
@pytest.mark.parametrize("rel", sorted(CORPUS_TABLE))
def test_corpus_detect_read_roundtrip(rel: str) -> None:
    layout, n_calls, n_results = CORPUS_TABLE[rel]
    probe, fmt, doc = load(corpus_file(rel))
    assert fmt.name == layout
    assert doc.segments
    check_segments_wellformed(doc)
    # pairing by id
    check_pairing(doc)
    assert counts(doc) == (n_calls, n_results)
    # round trip: no edits gives the parsed input back (a copy), and re-reads the same
    out = fmt.write(doc)
    assert out == parsed(probe, fmt)
    if fmt.container != "text":
        assert out is not doc.data
    _, fmt2, doc2 = reread(fmt, out)
    assert fmt2.name == fmt.name
    assert sig(doc2) == sig(doc)
    assert fmt.write(doc, Edits()) == out


@pytest.mark.corpus
@pytest.mark.parametrize("rel", sorted(CORPUS_TABLE))
def test_corpus_edits_reread(rel: str) -> None:
    probe, fmt, doc = load(corpus_file(rel))
    drop = {s.id for s in doc.segments if s.step in (1, 2)}
    summary = "Summary: the first steps are compacted."
    out = fmt.write(doc, Edits(drop=drop, summary=summary))
    _, fmt2, doc2 = reread(fmt, out)
    assert fmt2.name == fmt.name
    check_pairing(doc2)
    assert [s.text for s in doc2.segments].count(summary) == 1
    kept = [s for s in doc.segments if s.id not in drop]
    assert content_sig([s for s in doc2.segments if s.text != summary]) == content_sig(kept)
    results = [s for s in doc.segments if s.kind == SegmentKind.tool_result and s.origin and len(s.text) > 40]
    if results:
        target = max(results, key=lambda s: len(s.text))
        out = fmt.write(doc, Edits(replace={target.id: "[elided]"}))
        texts = [out] if fmt.container == "text" else list(all_strings(out))
        assert not any(target.text in t for t in texts), "a mirror copy of the replaced text survived"
        assert len(fmt.dumps(out)) < len(fmt.dumps(fmt.write(doc)))


def test_corpus_specifics() -> None:
    if not CORPUS.is_dir():
        pytest.skip("shared corpus not present")
    # SWE-agent 0.x: demonstration is meta, observations are tool results paired by step
    _, _, doc = load(corpus_file("swe-agent/pydicom__pydicom-1458.gpt4.traj"))
    assert doc.segment("m1").meta and doc.segment("m1").step == 0
    assert doc.segment("m8").kind == SegmentKind.tool_result and doc.segment("m8").command == "python reproduce_bug.py"
    assert "Traceback" in doc.segment("m8").text
    # 1.x: ids repeat; each tool message pairs with the call just before it
    _, _, doc = load(corpus_file("swe-agent/marshmallow-1867.function_calling_replace_from_source.traj"))
    assert doc.segment("m15").command == "ls -F" and doc.segment("m25").command == "rm reproduce.py"
    assert all(not s.origin or s.origin[0] == "history" for s in doc.segments)
    # OpenHands V0: exit codes and error observations
    _, _, doc = load(corpus_file("openhands-v0/ponylang__ponyc-4593.json"))
    assert doc.segment("m7").exit_code == 2 and doc.segment("m7").is_error
    assert doc.segment("m28").is_error and doc.segment("m28").call_id is None
    assert doc.segment("m42").is_error  # 'ERROR:' edit result without a flag
    # V1: instruction is the task, file-editor errors are flagged
    _, _, doc = load(corpus_file("openhands-v1/safety-corrupt-transactions.gpt-4o.json"))
    assert doc.segments[0].id == "instruction" and doc.segments[0].role == Role.user
    assert doc.segment("m1").is_error and doc.segment("m9").is_error is False
    # Claude Code: merged message ids, is_error and exit code, isMeta
    _, _, doc = load(corpus_file("claude-code/coverage-test-fix.jsonl"))
    assert doc.segment("m2.0").step == doc.segment("m3.c0").step
    err = doc.segment("m36.r0")
    assert err.is_error and err.exit_code == 1 and err.command.startswith("git add .gitignore")
    assert doc.segment("m15").meta
    # Codex harness messages are meta
    _, _, doc = load(corpus_file("codex-rollout/sample_codex_session.jsonl"))
    assert [s.meta for s in doc.segments] == [True, True, False]


# ---------------------------------------------------------------------------- fixtures


@pytest.mark.parametrize("name", sorted(FIXTURE_TABLE))
def test_fixture_detect_read_roundtrip(name: str) -> None:
    layout, n_calls, n_results = FIXTURE_TABLE[name]
    probe, fmt, doc = load(FIXTURES / name)
    assert fmt.name == layout
    assert doc.segments
    check_segments_wellformed(doc)
    check_pairing(doc)
    assert counts(doc) == (n_calls, n_results)
    out = fmt.write(doc)
    assert out == parsed(probe, fmt)
    if fmt.container == "text":
        assert out == (FIXTURES / name).read_text(encoding="utf-8")
    _, fmt2, doc2 = reread(fmt, out)
    assert fmt2.name == fmt.name and sig(doc2) == sig(doc)


def test_every_fixture_is_in_the_table() -> None:
    assert sorted(p.name for p in FIXTURES.iterdir() if p.is_file()) == sorted(FIXTURE_TABLE)


def _longest_result(doc: Document) -> Segment:
    results = [s for s in doc.segments if s.kind == SegmentKind.tool_result and s.origin and len(s.text) > 40]
    assert results
    return max(results, key=lambda s: len(s.text))


@pytest.mark.parametrize("name", sorted(n for n in FIXTURE_TABLE if FIXTURE_TABLE[n][0] != "text"))
def test_fixture_replace_one_result(name: str) -> None:
    probe, fmt, doc = load(FIXTURES / name)
    target = _longest_result(doc)
    new_text = "[output elided: 3 lines, exit 1]"
    out = fmt.write(doc, Edits(replace={target.id: new_text}))
    assert parsed(probe, fmt) == fmt.write(doc), "the document must not be modified in place"
    dumped = fmt.dumps(out)
    assert len(dumped) < len(fmt.dumps(fmt.write(doc)))
    # the old text is gone everywhere, mirrors included
    if fmt.container == "text":
        assert target.text not in out
    else:
        assert all(target.text not in s for s in all_strings(out))
    _, fmt2, doc2 = reread(fmt, out)
    assert fmt2.name == fmt.name
    assert len(doc2.segments) == len(doc.segments)
    for old, new in zip(doc.segments, doc2.segments):
        assert (new.role, new.kind, new.call_id) == (old.role, old.kind, old.call_id)
        assert new.text == (new_text if old.id == target.id else old.text)
    check_pairing(doc2)


@pytest.mark.parametrize("name", sorted(n for n in FIXTURE_TABLE if FIXTURE_TABLE[n][0] != "text"))
def test_fixture_drop_first_two_steps_with_summary(name: str) -> None:
    probe, fmt, doc = load(FIXTURES / name)
    drop = {s.id for s in doc.segments if s.step in (1, 2)}
    assert drop
    summary = "Summary of steps 1-2: the first test run failed (exit 1); see the anchor."
    out = fmt.write(doc, Edits(drop=drop, summary=summary))
    _, fmt2, doc2 = reread(fmt, out)
    assert fmt2.name == fmt.name
    check_segments_wellformed(doc2)
    check_pairing(doc2)
    summaries = [s for s in doc2.segments if s.text == summary]
    assert len(summaries) == 1
    assert summaries[0].role == Role.user and summaries[0].kind == SegmentKind.message
    kept = [s for s in doc.segments if s.id not in drop]
    rest = [s for s in doc2.segments if s.text != summary]
    assert content_sig(rest) == content_sig(kept)
    # the summary sits where the first dropped segment was
    first_dropped = min(s.index for s in doc.segments if s.id in drop)
    assert doc2.segments.index(summaries[0]) == sum(1 for s in kept if s.index < first_dropped)
    # calls that kept their result in the input still have it
    had_result = {s.call_id for s in kept if s.kind == SegmentKind.tool_result and s.call_id}
    now = {s.call_id for s in rest if s.kind == SegmentKind.tool_result and s.call_id}
    assert had_result <= now
    if fmt.name == "claude-code":
        uuids = {r.get("uuid") for r in out if isinstance(r, dict)}
        for r in out:
            if isinstance(r, dict) and r.get("parentUuid") is not None:
                assert r["parentUuid"] in uuids, f"broken parentUuid chain at {r.get('uuid')}"


def test_fixture_summary_only_goes_after_system_prompt() -> None:
    for name in ("lodash-merge.anthropic.json", "web-build.openhands-v0.json", "acme-version.openai-chat.traj.json",
                 "textkit-slug.swe-agent-0x.traj"):
        _, fmt, doc = load(FIXTURES / name)
        out = fmt.write(doc, Edits(summary="Earlier work: nothing yet."))
        _, _, doc2 = reread(fmt, out)
        pos = next(n for n, s in enumerate(doc2.segments) if s.text == "Earlier work: nothing yet.")
        assert all(s.step == 0 for s in doc2.segments[:pos]), name
        assert content_sig([s for s in doc2.segments if s.text != "Earlier work: nothing yet."]) == content_sig(doc.segments)


# ---------------------------------------------------------------------------- layout specifics


def test_steps_starship_seed() -> None:
    _, fmt, doc = load(FIXTURES / "starship.steps.json")
    assert doc.state.objective.startswith("Determine when SpaceX's Starship")
    assert doc.state.budget == 400
    obj = doc.segment("objective")
    assert obj.role == Role.user and obj.step == 0
    calls = [s for s in doc.segments if s.kind == SegmentKind.tool_call]
    assert [s.step_id for s in calls] == ["s1", "s2", "s3", "s4"] and [s.step for s in calls] == [1, 2, 3, 4]
    assert doc.segment("m3.r0").call_id == "s4" and doc.segment("m3.c0").text == "search('Starship 2025 orbital')"
    out = fmt.write(doc, Edits(drop={"m0.c0", "m0.r0", "m1.c0", "m1.r0"}, summary="IFT-1..3 did not orbit."))
    assert out["trajectory_so_far"][0] == {"step": "summary", "role": "user", "content": "IFT-1..3 did not orbit."}
    assert [s.get("step") for s in out["trajectory_so_far"]] == ["summary", "s3", "s4"]
    assert out["current_objective"] == doc.data["current_objective"] and out["token_budget_for_summary"] == 400


def test_swe_agent_mirrors_follow_history() -> None:
    _, fmt, doc = load(FIXTURES / "textkit-slug.swe-agent-0x.traj")
    obs = next(s for s in doc.segments if s.kind == SegmentKind.tool_result and "UnicodeEncodeError" in s.text)
    out = fmt.write(doc, Edits(replace={obs.id: "UnicodeEncodeError in slug.py:14"}))
    assert out["trajectory"][0]["observation"] == "UnicodeEncodeError in slug.py:14"
    # 1.x snapshots: every copy of the replaced message shrinks; drops remove the copies too
    _, fmt, doc = load(FIXTURES / "textkit-deps.swe-agent-1x.traj")
    pip = next(s for s in doc.segments if s.kind == SegmentKind.tool_result and "pytest-timeout" in s.text)
    out = fmt.write(doc, Edits(replace={pip.id: "pip failed: no pytest-timeout>=9.9"}))
    j = pip.origin[1]
    for st in out["trajectory"]:
        if len(st["messages"]) > j:
            assert st["messages"][j]["content"] == "pip failed: no pytest-timeout>=9.9"
    drop = {s.id for s in doc.segments if s.step == 2}
    out = fmt.write(doc, Edits(drop=drop))
    assert len(out["trajectory"]) == len(doc.data["trajectory"]) - 1
    assert all(len(st["messages"]) == len(doc.data["trajectory"][k + 1]["messages"]) - 2
               for k, st in enumerate(out["trajectory"]))


def test_openhands_pairs_by_cause_not_position() -> None:
    _, fmt, doc = load(FIXTURES / "web-build.openhands-v0.json")
    # two reads in one response; results come back in order, paired by cause
    assert doc.segment("m6.c0").step == doc.segment("m7.c0").step
    assert doc.segment("m8").call_id == "toolu_01B" and doc.segment("m9").call_id == "toolu_01C"
    assert doc.segment("m9").is_error  # 'ERROR:' with no flag
    assert doc.segment("m10").is_error and doc.segment("m10").call_id is None  # observation "error"
    assert doc.segment("m5").exit_code == 1
    assert doc.segment("m15.c0").call_id == "toolu_01F"  # unmatched call kept
    # replacing the edit result clears its mirror copies
    out = fmt.write(doc, Edits(replace={"m12": "types.ts: added retries?: number"}))
    extras = out[12]["extras"]
    assert extras["old_content"] is None and extras["new_content"] is None and extras["diff"] is None
    assert "model_response" in out[12]["tool_call_metadata"]
    # dropping a call drops its observation too
    out = fmt.write(doc, Edits(drop={"m4", "m4.c0"}))
    assert all(e.get("cause") != 5 for e in out) and all(e.get("id") != 5 for e in out)
    # V1: results out of order, paired by action_id
    _, _, doc = load(FIXTURES / "nightly-report.openhands-v1.json")
    assert doc.segment("m5").call_id == "call_r3" and doc.segment("m6").call_id == "call_r2"
    assert doc.segment("m6").is_error and doc.segment("m2").exit_code == 1 and doc.segment("m8").is_error is False
    assert doc.state.mirrors["m0"] == [("instruction",)]


def test_openai_chat_keeps_calls_and_results_together() -> None:
    _, fmt, doc = load(FIXTURES / "acme-version.openai-chat.traj.json")
    # a result dropped alone stays: its call is still there
    out = fmt.write(doc, Edits(drop={"m3"}))
    assert len(out["messages"]) == len(doc.data["messages"])
    # the call's message dropped: its result goes too
    out = fmt.write(doc, Edits(drop={"m2", "m2.c0"}))
    assert [m["role"] for m in out["messages"]][:3] == ["system", "user", "assistant"]
    assert all(m.get("tool_call_id") != "call_1" for m in out["messages"])
    # replacing a result updates extra.raw_output, the untruncated copy
    out = fmt.write(doc, Edits(replace={"m3": "ModuleNotFoundError: pkg_resources"}))
    assert out["messages"][3]["extra"]["raw_output"] == "ModuleNotFoundError: pkg_resources"


def test_swe_agent_message_type_demonstration_is_meta() -> None:
    text = json.dumps({"environment": "main", "trajectory": [], "history": [
        {"role": "system", "content": "sys", "message_type": "system_prompt"},
        {"role": "user", "content": "demo", "message_type": "demonstration"},
        {"role": "user", "content": "task", "message_type": "observation"}]})
    _, fmt, doc = load_text(text)
    assert fmt.name == "swe-agent"
    assert [(s.meta, s.step) for s in doc.segments] == [(False, 0), (True, 0), (False, 1)]


def test_anthropic_blocks_and_input_replacement() -> None:
    _, fmt, doc = load(FIXTURES / "lodash-merge.anthropic.json")
    assert doc.segment("system.0").role == Role.system
    assert not any("Run the tests first." in s.text for s in doc.segments)  # thinking is not a segment
    r = doc.segment("m2.r0")
    assert r.is_error and r.exit_code == 1 and r.command == "cd /srv/app && npm test"
    assert doc.segment("m4.r0").call_id == "toolu_01Xb" and doc.segment("m4.r1").call_id == "toolu_01Xc"
    out = fmt.write(doc, Edits(replace={"m5.c1": '{"path": "src/utils/merge.js"}', "m3.c1": "not json"}))
    assert out["messages"][5]["content"][1]["input"] == {"path": "src/utils/merge.js"}
    assert out["messages"][3]["content"][1]["input"] == {"path": "src/utils/merge.js"}  # unchanged
    # dropping only a result keeps it: the call still needs it
    out = fmt.write(doc, Edits(drop={"m8.r0"}))
    assert len(out["messages"]) == len(doc.data["messages"])
    # dropping the call message drops its results
    out = fmt.write(doc, Edits(drop={"m7.c0"}))
    assert len(out["messages"]) == len(doc.data["messages"]) - 2


def test_claude_code_records_and_mirrors() -> None:
    _, fmt, doc = load(FIXTURES / "cart-total.claude-code.jsonl")
    assert doc.segment("m4.0").step == doc.segment("m5.c0").step  # one message.id, one step
    assert doc.segment("m7.c0").step == doc.segment("m8.c0").step
    assert set(doc.state.sidechain) == {"m10", "m11.c0", "m12.r0", "m13.0"}
    assert not any(s.meta for s in doc.segments if s.id in doc.state.sidechain)
    assert doc.segment("m22").meta
    assert doc.segment("m23.c0").call_id == "toolu_01Git1"  # interrupted: no result, still a segment
    assert doc.segment("m14.r0").text.startswith("Math.floor on money")  # list content
    out = fmt.write(doc, Edits(replace={"m9.r0": "total.ts: Math.floor on cents (line 3)"}))
    assert out[9]["toolUseResult"] == "total.ts: Math.floor on cents (line 3)"
    assert [r["type"] for r in out] == [r["type"] for r in doc.data]  # non-message records kept
    # dropping everything up to the edit keeps queue-operation/snapshot/system/summary records
    drop = {s.id for s in doc.segments if s.step <= 6}
    out = fmt.write(doc, Edits(drop=drop, summary="S"))
    types = [r["type"] for r in out]
    assert types[:3] == ["queue-operation", "file-history-snapshot", "user"] and "summary" in types and "system" in types
    assert out[2]["message"]["content"] == "S" and out[2]["parentUuid"] is None
    assert out[3]["parentUuid"] == out[2]["uuid"]


def test_gemini_deltas_and_errors() -> None:
    _, fmt, doc = load(FIXTURES / "pricing-page.gemini-cli.jsonl")
    msg = doc.segment("m2")
    assert msg.text == "I'll look at the existing pages first, then fetch the frame."
    assert doc.state.chunks["m2"] == [3]
    assert doc.segment("m6").is_error and doc.segment("m12").exit_code == 1 and doc.segment("m12").is_error
    assert doc.segment("m14.e").text == "params/expected_replacements must be number"
    assert doc.segment("m16").kind == SegmentKind.tool_call  # last call never answered
    out = fmt.write(doc, Edits(replace={"m2": "Looking at pages and the frame."}))
    assert out[2]["content"] == "Looking at pages and the frame." and out[3]["content"] == ""
    assert out[3]["delta"] is True


def test_codex_mirrors_and_exit_codes() -> None:
    _, fmt, doc = load(FIXTURES / "rate-limit.codex.jsonl")
    assert [s.meta for s in doc.segments[:3]] == [True, True, False]
    assert doc.segment("m10").exit_code == 1 and doc.segment("m17").exit_code == 1  # text and JSON forms
    assert doc.segment("m15").exit_code == 0 and doc.segment("m19").is_error is False
    assert doc.segment("m8").command == "pytest -x tests/test_rate_limit.py"
    assert doc.segment("m18").command == "pytest -q"  # local_shell_call argv
    assert not any(s.origin and s.origin[0] in (4, 7, 9, 13, 21, 22) for s in doc.segments)  # no event_msg
    out = fmt.write(doc, Edits(replace={"m10": "pytest: test_burst_is_limited failed (200 != 429)"}))
    assert out[9]["payload"]["aggregated_output"] == "pytest: test_burst_is_limited failed (200 != 429)"
    assert out[9]["payload"]["stderr"] == ""
    out = fmt.write(doc, Edits(drop={"m8", "m10"}))
    assert not any(r["payload"].get("call_id") == "call_Q1" for r in out)


def test_aider_blocks_and_rewrite() -> None:
    probe, fmt, doc = load(FIXTURES / "invoice.aider.chat.history.md")
    text = probe.raw.text
    assert doc.segment("m13").text == "the invoice total test fails, fix it. don't touch the tax tables"
    assert "<<<<<<< SEARCH" in doc.segment("m15").text and doc.segment("m15").role == Role.assistant
    assert doc.segment("m55").step == 5  # a new session opens a step
    out = fmt.write(doc, Edits(replace={"m31": "1 failed: test_total_with_discount"}))
    assert "> 1 failed: test_total_with_discount  \n" in out
    assert out.count("\n") == text.count("\n") - 3
    # unedited parts are byte-identical
    assert out.startswith(text[: text.index("#### /test")])
    assert out.endswith(text[text.index("#### the discount case"):])


def test_text_fallback() -> None:
    probe, fmt, doc = load(FIXTURES / "pytest-run.log")
    assert fmt.name == "text" and doc.segments[0].text == probe.raw.text


# ---------------------------------------------------------------------------- sniff and read errors


@pytest.mark.parametrize("fmt_name", [f.name for f in REGISTRY if f.name != "text"])
def test_sniff_rejects_other_layouts_with_a_reason(fmt_name: str) -> None:
    fmt = get_format(fmt_name)
    for name, (layout, _, _) in FIXTURE_TABLE.items():
        if layout == fmt_name:
            continue
        probe = make_probe(read_input(FIXTURES / name))
        ok, why = fmt.sniff(probe)
        # layouts earlier in the detection order may accept inputs of later ones; detection
        # order makes the right one win (checked by the fixture tests)
        if ok:
            assert [f.name for f in REGISTRY].index(fmt_name) > [f.name for f in REGISTRY].index(layout), (fmt_name, name)
        else:
            assert isinstance(why, str) and 3 < len(why) < 120


@pytest.mark.parametrize("fmt_name,text,where", [
    ("steps", '{"current_objective": "x", "trajectory_so_far": [{"step": "s1", "action": "a", "observation": "o"}, 7]}',
     "trajectory_so_far[1]"),
    ("swe-agent", '{"history": [{"role": "system", "content": "s"}], "trajectory": [3]}', "trajectory[0]"),
    ("openhands", '[{"id": 0, "source": "user", "action": "message", "args": {"content": "hi"}}, {"id": 1}]', "event[1]"),
    ("anthropic", '{"system": "s", "messages": [{"role": "user", "content": 5}]}', "messages[0]"),
    ("claude-code", '{"type": "queue-operation"}\n\n{"type": "user", "uuid": "u1", "message": {"role": "user", "content": 3}}\n',
     "line 3"),
    ("gemini-cli", '{"type": "init"}\n{"type": "message", "role": "user", "content": ["x"]}\n', "line 2"),
    ("codex", '{"timestamp": "t", "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "x"}]}}\n'
              '{"timestamp": "t", "type": "response_item", "payload": 3}\n', "line 2"),
    ("aider", "#### hello\n", "aider"),
])
def test_read_rejects_broken_structure(fmt_name: str, text: str, where: str) -> None:
    from compactor.formats.inputs import decode_bytes

    probe = make_probe(decode_bytes(text.encode(), "broken"))
    with pytest.raises(InputError) as exc:
        get_format(fmt_name).read(probe)
    assert where in str(exc.value) and fmt_name in str(exc.value)


def test_detection_of_small_inputs() -> None:
    cases = {
        '[{"step": "s1", "action": "ls", "observation": "a.txt"}]': "steps",
        '[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]': "openai-chat",
        '{"system": "be brief", "messages": [{"role": "user", "content": "hi"}]}': "anthropic",
        '[{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}]': "anthropic",
        '[{"id": 1, "source": "user", "action": "message", "args": {"content": "hi"}}]': "openhands",
        '{"type":"init","session_id":"s"}\n{"type":"message","role":"user","content":"hi"}\n': "gemini-cli",
        "just some log text\nERROR: boom\n": "text",
    }
    for text, layout in cases.items():
        _, fmt, doc = load_text(text)
        assert fmt.name == layout, text
        assert doc.segments


def test_plan_drops_keeps_pairs_together() -> None:
    def seg(sid: str, kind: SegmentKind) -> Segment:
        return Segment(id=sid, index=0, step=1, step_id="s1", role=Role.tool, kind=kind, text="x")

    segs = [seg("m1.c0", SegmentKind.tool_call), seg("m2", SegmentKind.tool_result), seg("m3", SegmentKind.message)]

    def rec(s: Segment) -> int:
        return int(s.id[1:].split(".")[0])

    pairs = [("m1.c0", "m2")]
    assert plan_drops(segs, {"m1.c0"}, rec, pairs) == {1, 2}  # the result follows its call out
    assert plan_drops(segs, {"m2"}, rec, pairs) == set()  # a result alone is kept
    assert plan_drops(segs, {"m1.c0", "m2", "m3"}, rec, pairs) == {1, 2, 3}
    assert plan_drops(segs, set(), rec, pairs) == set()


def test_write_does_not_mutate_document() -> None:
    for name in FIXTURE_TABLE:
        probe, fmt, doc = load(FIXTURES / name)
        before = copy.deepcopy(doc.data)
        some = doc.segments[-1]
        fmt.write(doc, Edits(replace={some.id: "x"}, drop={doc.segments[0].id}, summary="s"))
        assert doc.data == before, name


def test_dumps_is_valid_container() -> None:
    for name in FIXTURE_TABLE:
        _, fmt, doc = load(FIXTURES / name)
        text = fmt.dumps(fmt.write(doc, Edits(summary="s")))
        if fmt.container == "json":
            json.loads(text)
        elif fmt.container == "jsonl":
            assert all(json.loads(line) is not None for line in text.splitlines() if line.strip())


@pytest.mark.parametrize("text", [
    "[INFO] Scanning for projects...\n[INFO] BUILD FAILURE\n[ERROR] Failed to execute goal\n",
    "[2018-05-17 07:01:35.506][1][critical][assert] source/common/network/address_impl.cc:87] assert failure\n",
    "[ RUN      ] Pool.Acquire\n[  FAILED  ] Pool.Acquire (12 ms)\n",
    "[Environment] ASAN_OPTIONS = redzone=32\n==1==ERROR: AddressSanitizer: heap-use-after-free\n",
    "{main} Fatal error: Uncaught TypeError\n",
])
def test_logs_opening_with_a_bracket_are_text_not_malformed_json(text: str) -> None:
    from compactor.formats.base import RawInput

    probe = make_probe(RawInput(text, "build.log"))
    assert probe.json_error is None and probe.jsonl_error is None
    assert detect(probe).name == "text"


@pytest.mark.parametrize("text", ['[\n  {"role": "user", "content": "hi"},\n  {"role": ', '{"messages": [{"role": "user"'])
def test_truncated_json_is_still_an_error(text: str) -> None:
    from compactor.formats.base import RawInput

    probe = make_probe(RawInput(text, "run.json"))
    assert probe.json_error or probe.jsonl_error
    with pytest.raises(InputError):
        detect(probe)
