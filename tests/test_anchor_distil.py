"""The anchor distils: what the task reports, what a resolved error leaves, the same failure on
path after path, a commit with nothing to commit, the agent's own probes, and the independent
hand-labelled gold set (``../shared/corpus/anchor-gold``) scored in-process."""

from __future__ import annotations

import importlib.util
import json

import pytest
from hypothesis import given, strategies as st

from compactor import compact
from compactor.anchor import build_anchor, to_json
from compactor.anchor.files import call_effects
from compactor.formats.calls import make_call
from compactor.models import Role, Segment, SegmentKind

from conftest import CORPUS, corpus_path


def _anchor(rel: str):
    return compact(str(corpus_path(*rel.split("/")))).anchor


def _seg(i, role, kind, text, step, **kw):
    return Segment(id=f"m{i}", index=i, step=step, step_id=f"s{step}", role=Role(role), kind=SegmentKind(kind),
                   text=text, **kw)


def test_the_error_the_task_reports_is_evidence_with_its_frame_until_a_run_reproduces_it():
    a = _anchor("mini-swe-agent/pvlib__pvlib-python-1072.deepseek_reasoner_dev.traj.json")
    rep = [e for e in a.key_evidence if e.rule_id == "anchor.reported"]
    assert len(rep) == 1 and rep[0].status == "live" and rep[0].source_step == "s1"
    assert "line 602, in fuentes" in rep[0].text and "np.diff(poa_global.index).astype(float)" in rep[0].text
    assert rep[0].text.endswith("TypeError: float() argument must be a string or a number, not 'Timedelta'")
    # the harness's instructions are not reported errors
    assert not any("CRITICAL" in e.text for e in a.key_evidence)
    assert a.intent.initial.endswith("— expected: `temperature.fuentes` should work with both tz-naive and "
                                     "tz-aware inputs.")
    # the fix was never run: re-running the reproduction is next
    assert any("run reproduce_error.py again" in n.text for n in a.next_steps if n.status == "pending")


def test_a_reported_error_that_a_run_reproduces_is_the_runs_evidence():
    task = ("Fix the crash.\n```\nTraceback (most recent call last):\n  File \"app.py\", line 3, in <module>\n"
            "    run()\nKeyError: 'user'\n```")
    out = "Traceback (most recent call last):\n  File \"/repo/app.py\", line 3, in <module>\n    run()\nKeyError: 'user'"
    segs = [_seg(0, "user", "message", task, 1),
            _seg(1, "assistant", "tool_call", json.dumps({"command": "python app.py"}), 2, call_id="a",
                 tool_name="bash", command="python app.py"),
            _seg(2, "tool", "tool_result", out, 2, call_id="a", tool_name="bash", command="python app.py", exit_code=1)]
    from compactor.pipeline import Compactor

    c = Compactor()
    spans = [sp.model_copy(update={"segment_id": s.id, "step_id": s.step_id}) for s in segs
             for sp in c.scan(s.text, role=s.role.value)]
    only_task = build_anchor(segs[:1], spans)
    assert [e.rule_id for e in only_task.key_evidence] == ["anchor.reported"]
    both = build_anchor(segs, spans)
    assert [e.rule_id for e in both.key_evidence if e.rule_id == "anchor.reported"] == []
    assert any(e.source_step == "s2" and "KeyError: 'user'" in e.text for e in both.key_evidence)


def test_where_the_task_says_the_bug_is_and_the_agents_closing_failure_are_evidence():
    a = _anchor("openhands-v0/ponylang__ponyc-4593.json")
    loc = [e.text for e in a.key_evidence if e.family == "location"]
    assert any("on line 101" in t for t in loc) and any("on line 147" in t for t in loc)
    assert not any("on line 147" in c.text for c in a.user_constraints)  # the reporter's prose binds nothing
    closing = [e for e in a.key_evidence if e.rule_id == "anchor.closing"]
    assert len(closing) == 1 and closing[0].text.startswith("Unable to make necessary changes to the file")


def test_an_issues_expected_behaviour_joins_the_intent_and_a_resolved_trace_keeps_its_line():
    a = _anchor("swe-agent/pydicom__pydicom-1458.gpt4.traj")
    assert "Float Pixel Data or Double Float Pixel Data" in a.intent.initial
    res = [e for e in a.key_evidence if e.status == "resolved"]
    assert any(e.text.startswith("AttributeError: Unable to convert the pixel data") for e in res)
    assert all("Traceback" not in e.text and "\n" not in e.text for e in res)  # frames stay at their step


def test_the_editor_failing_the_same_way_on_path_after_path_is_one_attempt():
    a = _anchor("openhands-v1/safety-corrupt-transactions.gpt-4o.json")
    assert len(a.failed_attempts) == 1
    f = a.failed_attempts[0]
    assert f.count == 4 and f.command.startswith("view /workspace/transaction-verification-service/"
                                                "transaction-service/verification/rate_limiter.py … view ")
    assert f.error.startswith("Invalid `path` parameter: /workspace/transaction-verification-service. The path")
    # the first error (the file the user named) is the evidence, the ones in between are not repeated
    assert [e.text.split(". ")[0] for e in a.key_evidence] == [
        "Invalid `path` parameter: /workspace/transaction-verification-service/transaction-service/verification/"
        "rate_limiter.py"]


def test_a_commit_with_nothing_to_commit_is_no_change_and_a_pure_addition_shows_only_what_it_adds():
    a = _anchor("claude-code/coverage-test-fix.jsonl")
    commits = [c.description for c in a.changes_made if "commit" in c.description]
    # the one commit that happened, with the id git printed for it
    assert commits == ["ran `git add src/math_utils.py tests/test_math_utils.py && git commit` — commit 6322cf4 "
                       "“Add multiply_numbers function with test”"]
    eff = call_effects(make_call("Edit", json.dumps({"file_path": "a.py", "old_string": "def f():\n    return 1",
                                           "new_string": "def f():\n    return 1\n\ndef g():\n    return 2"}), None))
    assert eff.detail == "added `def g(): ⏎ return 2`"
    eff = call_effects(make_call("Edit", json.dumps({"file_path": "a.py", "old_string": "x = 1\ny = 2",
                                           "new_string": "x = 3\ny = 2"}), None))
    assert eff.detail == "`x = 1` → `x = 3`"  # the removed line, not the start of the old text


def test_the_agents_own_probe_scripts_are_not_facts_nor_failed_attempts_before_a_change():
    a = _anchor("mini-swe-agent/django__django-11099.deepseek_chat_test_1-100.traj.json")
    assert not any("Full match length" in f.text for f in a.facts_learned)
    assert not any("validusername" in f.error for f in a.failed_attempts)
    # an environment error of the same scripts still is a failed attempt
    assert any("No module named 'sqlparse'" in f.error for f in a.failed_attempts)


def test_the_reproduction_output_changes_from_the_bug_to_the_fix():
    a = _anchor("swe-agent/marshmallow-1867.function_calling_replace_from_source.traj")
    rep = {e.text: e for e in a.key_evidence if e.family == "reproduction"}
    assert rep["344"].status == "resolved" and rep["344"].resolved_at == rep["345"].source_step
    assert rep["345"].status == "live"


def test_harness_cwd_and_chat_files_are_verbatim_facts_and_aider_launch_lines_are_not():
    a = _anchor("codex-rollout/sample_codex_session.jsonl")
    assert [f.text for f in a.facts_learned] == ["<cwd>/Users/macmini/Code/homelab-migration</cwd>"]
    b = _anchor("aider/zen-mcp-server.aider.chat.history.md")
    facts = [f.text for f in b.facts_learned]
    assert any("Added providers/gemini.py to the chat" in t for t in facts)
    assert not any("pypi" in t or "/bin/aider" in t for t in facts)
    # the request the user asked again in longer words is listed once among the pending ones
    nxt = [n.text for n in b.next_steps if n.status == "pending"]
    assert len(nxt) == 1 and "应该统一算作256 token" in nxt[0] and nxt[0].count("请你分析一下") == 2


# --------------------------------------------------------------------------- the independent gold set

GOLD = CORPUS / "anchor-gold"


def _scorer():
    spec = importlib.util.spec_from_file_location("anchor_gold_score", GOLD / "score.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_independent_gold_set_passes():
    """The thresholds of ``anchor-gold/score.py``: recall >= 0.9, violations <= 10 %, no resolved
    error presented as live, every anchor within its size limit (the scorer's own estimate)."""
    if not (GOLD / "score.py").exists():
        pytest.skip("anchor-gold not available")
    S = _scorer()
    golds = S.load_golds(str(GOLD), None, None)
    hit = total = mn = mn_hit = 0
    problems = []
    for name, gold in golds:
        anchor = to_json(compact(str(CORPUS / gold["path"])).anchor)
        r = S.score_one(gold, json.loads(json.dumps(anchor)))
        hit += sum(v["mi_hit"] for v in r["sections"].values())
        total += sum(v["mi"] for v in r["sections"].values())
        mn += sum(v["mn"] for v in r["sections"].values())
        mn_hit += sum(v["mn_hit"] for v in r["sections"].values())
        if r["resolved_live"]:
            problems.append(f"{name}: resolved shown live: {r['resolved_live']}")
        if r["size"] > r["limit"]:
            problems.append(f"{name}: size {r['size']} over {r['limit']}")
    assert not problems, problems
    assert hit / total >= 0.9, f"gold recall {hit}/{total}"
    assert mn_hit / mn <= 0.10, f"gold violations {mn_hit}/{mn}"


class _Lines:
    """A view whose evidence lines are the ones a test names."""

    def __init__(self, ok: set[int]):
        self.ok = ok

    def evidence_ok(self, i: int) -> bool:
        return i in self.ok


def _passing_reference(text: str, view) -> str:
    """The passing line as first written: every line of the last 400 looked at, the last that
    says a check passed kept; its first occurrence in the text must be evidence."""
    from compactor.anchor.build import _PASSING

    found = ""
    for ln in text.split("\n")[-400:] if text.count("\n") > 400 else text.split("\n"):
        s = ln.strip()
        if s and len(s) <= 200 and _PASSING.search(s) and not s.startswith(("Successfully installed", "WARNING")):
            found = s
    if found:
        idx = text.split("\n").index(next(ln for ln in text.split("\n") if ln.strip() == found))
        if not view.evidence_ok(idx):
            return ""
    return found


_PASS_LINES = ["3 passed in 0.1s", "  Ran 2 tests in 0.001s", "OK", "ok (skipped=1)", "WARNING: all tests passed",
               "Successfully installed x", "FAILED test_a", "collecting ...", "", "   ", "ok", "x" * 201 + " passed",
               "All checks passed", "Error: nothing passed"]


@given(st.lists(st.sampled_from(_PASS_LINES), max_size=12), st.integers(0, 2),
       st.sets(st.integers(0, 420), max_size=30))
def test_the_passing_line_is_the_last_of_the_tail_and_its_first_occurrence_must_be_evidence(lines, pad, ok):
    from compactor.anchor.build import _passing_line

    # padding before them puts the lines near, across and past the 400-line tail
    text = "\n".join(["filler"] * (pad * 200) + lines)
    view = _Lines(ok)
    assert _passing_line(text, view) == _passing_reference(text, view)


def test_the_passing_line_cases():
    from compactor.anchor.build import _passing_line

    text = "3 passed\nnoise\n2 passed\nok"
    assert _passing_line(text, _Lines({3})) == "ok"
    assert _passing_line(text, _Lines({0, 2})) == ""  # the last one is not evidence: none
    assert _passing_line("OK\nx\n  OK  ", _Lines({0})) == "OK"  # its first occurrence is looked at
    assert _passing_line("\n".join(["3 passed"] + ["x"] * 400), _Lines({0})) == ""  # outside the tail
