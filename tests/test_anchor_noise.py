"""One test per noise class of the anchor (issue: "distil, don't dump"), on real lines of the kinds
found in ../shared/corpus: the lines below are copied from the corpus trajectories, or the test
reads the trajectory itself (skipped when the corpus is absent)."""

from __future__ import annotations

import json

import pytest

from compactor import compact
from compactor.anchor import SEED_FIELDS, build_anchor, to_json, to_markdown, to_seed_json
from compactor.anchor.render import render_lines
from compactor.models import Role, Segment, SegmentKind

from conftest import corpus_path


def _seg(i: int, role: str, kind: str, text: str, step: int, **kw) -> Segment:
    return Segment(id=f"m{i}", index=i, step=step, step_id=f"s{step}", role=Role(role), kind=SegmentKind(kind),
                   text=text, **kw)


def _call(i: int, step: int, command: str, tool: str = "bash", cid: str = "") -> Segment:
    return _seg(i, "assistant", "tool_call", json.dumps({"command": command}), step, call_id=cid or f"c{i}",
                tool_name=tool, command=command)


def _res(i: int, step: int, text: str, command: str, cid: str, exit_code: int | None = None, tool: str = "bash"):
    return _seg(i, "tool", "tool_result", text, step, call_id=cid, tool_name=tool, command=command,
                exit_code=exit_code, is_error=None if exit_code is None else exit_code != 0)


def _anchor(rel: str):
    return compact(str(corpus_path(*rel.split("/")))).anchor


def _texts(items, attr: str) -> list[str]:
    return [getattr(x, attr) for x in items]


# 1. source code and listings taken for error evidence ---------------------------------------


def test_source_lines_and_listings_are_not_error_evidence():
    view = ('import re\n\nfrom django.core import validators\n\n\nclass ASCIIUsernameValidator(validators.RegexValidator):\n'
            '    regex = r\'^[\\w.@+-]+$\'\n    def __call__(self, value):\n'
            '        raise ValidationError(self.message, code=self.code)\n')
    segs = [
        _seg(0, "user", "message", "Fix the username validator.", 1),
        _call(1, 2, "cat ./django/contrib/auth/validators.py", cid="a"),
        _res(2, 2, view, "cat ./django/contrib/auth/validators.py", "a", 0),
        _call(3, 3, "ls src/app", cid="b"),
        _res(4, 3, "__init__.py\nerrors.py\nexceptions.py\npool.py", "ls src/app", "b", 0),
    ]
    a = build_anchor(segs)
    assert a.key_evidence == [] and a.failed_attempts == []


def test_editor_view_of_a_source_file_gives_no_evidence_on_the_corpus():
    a = _anchor("swe-agent/marshmallow-1867.function_calling_replace_from_source.traj")
    ev = " ".join(e.text for e in a.key_evidence)
    assert "except OverflowError as error:" not in ev and "Cannot find version information" not in ev


# 2. the agent's thinking filed as questions, decisions or next steps --------------------------


def test_rhetorical_questions_and_observations_are_not_questions_or_decisions():
    segs = [
        _seg(0, "user", "message", "Make total() handle an empty cart.", 1),
        _seg(1, "assistant", "message", "But wait, what if the list is empty? Let me check.", 2),
        _call(2, 2, "python -m pytest tests/test_cart.py -q", cid="a"),
        _res(3, 2, "3 passed in 0.10s", "python -m pytest tests/test_cart.py -q", "a", 0),
        _seg(4, "assistant", "message", "Now the test prints 3 instead of 2.", 3),
        _seg(5, "assistant", "message",
             "I see that `django/core/validators.py` already uses `\\Z` instead of `$` for slug validators.", 4),
    ]
    a = build_anchor(segs)
    assert [q.text for q in a.open_questions if q.status == "open"] == []
    assert a.decisions_made == []
    assert not a.next_action_hint.startswith("But wait")


# 3. chrome taken for content ---------------------------------------------------------------


def test_tool_banners_apt_lines_prompt_headings_and_issue_prose_are_not_content():
    banner = ("Aider v0.86.1\nMain model: gemini/gemini-2.5-pro-preview-06-05 with diff-fenced edit format, 32k think tokens\n"
              "Git repo: .git with 360 files\nRepo-map: using 4096 tokens, auto refresh")
    apt = ("Get:1 http://archive.ubuntu.com/ubuntu jammy InRelease [270 kB]\n"
           "Get:2 http://archive.ubuntu.com/ubuntu jammy-updates InRelease [128 kB]\nFetched 398 kB in 1s (402 kB/s)")
    segs = [
        _seg(0, "user", "message", "<pr_description>\nUsernameValidator allows trailing newline in usernames\n"
             "Filling in of default options would occur later, on line 147, but we never get that far.\n"
             "</pr_description>\n\n<instructions>\n**CRITICAL REQUIREMENTS:**\n"
             "- Your response MUST include AT LEAST ONE bash tool call.\n</instructions>", 1),
        _call(1, 2, "aider --model gemini", cid="a"),
        _res(2, 2, banner, "aider --model gemini", "a", 0),
        _call(3, 3, "apt-get update", cid="b"),
        _res(4, 3, apt, "apt-get update", "b", 0),
    ]
    a = build_anchor(segs)
    facts = " ".join(f.text for f in a.facts_learned)
    assert "Main model" not in facts and "Git repo" not in facts and "Get:1" not in facts and "Fetched" not in facts
    assert a.user_constraints == []
    # the reporter's sentence that says where the bug is stays as a location (not a failure, not a
    # constraint); the prompt's headings are nothing
    assert [(e.text, e.family) for e in a.key_evidence] == [
        ("Filling in of default options would occur later, on line 147, but we never get that far.", "location")]


def test_harness_instructions_are_not_user_constraints_on_the_corpus():
    a = _anchor("mini-swe-agent/django__django-11099.deepseek_chat_test_1-100.traj.json")
    cons = " ".join(c.text for c in a.user_constraints)
    assert "MUST include AT LEAST ONE bash tool call" not in cons and "CRITICAL" not in cons


# 4. non-failures filed as failed attempts ----------------------------------------------------


@pytest.mark.parametrize("command,output", [
    ('grep -n "username" ./django/core/validators.py -i', "<returncode>1</returncode>\n<output>\n</output>"),
    ("diff expected.txt actual.txt", "2c2\n< 3\n---\n> 2"),
    ("test -f build/output.bin", ""),
    ('find src -name "*.pony" | grep -i command', ""),
])
def test_exit_1_of_search_and_compare_is_not_a_failure(command, output):
    segs = [_seg(0, "user", "message", "Find where usernames are validated.", 1),
            _call(1, 2, command, cid="a"), _res(2, 2, output, command, "a", 1)]
    a = build_anchor(segs)
    assert a.failed_attempts == [] and a.key_evidence == []


def test_commit_with_nothing_to_commit_is_not_a_failure_on_the_corpus():
    a = _anchor("claude-code/coverage-test-fix.jsonl")
    assert not any("git add .gitignore" in f.command for f in a.failed_attempts)


# 5. stale evidence -------------------------------------------------------------------------


def test_an_error_fixed_later_is_marked_resolved_on_the_corpus():
    a = _anchor("swe-agent/pydicom__pydicom-1458.gpt4.traj")
    fixed = "AttributeError: Unable to convert the pixel data as the following required elements are missing"
    items = [e for e in a.key_evidence if fixed in e.text]
    assert items and all(e.status == "resolved" and e.resolved_at for e in items)
    md = to_markdown(a)
    assert "resolved at" in md


def test_transient_failures_are_not_excluded_approaches_on_the_corpus():
    a = _anchor("mini-swe-agent/pvlib__pvlib-python-1072.deepseek_reasoner_dev.traj.json")
    assert a.dead_ends == []  # the timeouts are failed attempts, not approaches ruled out
    assert any("timed out after 60 seconds" in f.error for f in a.failed_attempts)


# 6. templates instead of state -------------------------------------------------------------


def test_no_template_next_step_after_the_work_was_submitted():
    a = _anchor("swe-agent/marshmallow-1867.function_calling_replace_from_source.traj")
    assert a.next_action_hint == ""
    assert [n for n in a.next_steps if n.status == "pending"] == []
    assert "Consider continuing" not in json.dumps(to_seed_json(a))


# 7. missing pieces -------------------------------------------------------------------------


def test_editor_tool_fixes_are_changes_with_the_new_line():
    a = _anchor("swe-agent/marshmallow-1867.function_calling_replace_from_source.traj")
    assert any("return int(round(value.total_seconds() / base_unit.total_seconds()))" in c.description
               for c in a.changes_made)
    b = _anchor("openhands-v0/ponylang__ponyc-4593.json")  # an OpenHands insert
    assert any("// Correctly handle parent default options" in c.description for c in b.changes_made)


def test_applied_edit_of_a_chat_tool_is_a_change():
    segs = [_seg(0, "user", "message", "Count images as 256 tokens for gemini.", 1),
            _seg(1, "tool", "tool_result", "Applied edit to utils/token_utils.py\nCommit 3f2a1b9 fix: gemini image tokens",
                 2)]
    a = build_anchor(segs)
    assert any(c.files == ["utils/token_utils.py"] for c in a.changes_made)


def test_first_request_of_an_aider_history_and_a_long_first_message_are_the_intent():
    a = _anchor("aider/zen-mcp-server.aider.chat.history.md")
    assert a.intent.initial and not a.intent.initial.startswith("/add")
    b = _anchor("openhands-v1/safety-corrupt-transactions.gpt-4o.json")
    assert "rate_limiter.py" in b.intent.current and '"-dup"' in b.intent.current


# 8. duplication ----------------------------------------------------------------------------


def test_no_item_twice_in_any_rendering():
    a = _anchor("mini-swe-agent/django__django-11099.deepseek_chat_test_1-100.traj.json")
    seed = to_seed_json(a)
    assert list(seed) == list(SEED_FIELDS)
    full = to_json(a)
    ids = [x["id"] for k, v in full.items() if isinstance(v, list) for x in v if isinstance(x, dict) and "id" in x]
    assert len(ids) == len(set(ids))
    for lang in ("en", "zh"):
        rows = [i for _, i, _ in render_lines(a, lang) if i]
        assert len(rows) == len(set(rows))
    assert [i for _, i, _ in render_lines(a, "en") if i] == [i for _, i, _ in render_lines(a, "zh") if i]


def test_the_cues_come_from_the_rule_files():
    from compactor.anchor import cues as C
    from compactor.engine import load_rules

    ids = sorted(r.id for r in load_rules().stage("cue"))
    assert sorted(C.LOADED_FROM_RULES) == ids and len(ids) >= 20
    assert C.CUES["decision"].pattern is C.DECISION  # the compiled rule, not the literal in code
