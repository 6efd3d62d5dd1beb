"""codeview: what a tool output shows (source view, diff, listing, search hits, log).

Real outputs come from the trajectories of ../shared/corpus (skipped when it is absent); the
adversarial ones are written here."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from compactor.codeview import CHROME, CODE, DIFF, ENTRY, LISTING, LOG, SEARCH, SOURCE, TEXT, classify, language_of, split_commands
from compactor.pipeline import load_document

from conftest import ROOT, corpus_path


def _result(rel: str, seg_id: str):
    doc = load_document(corpus_path(*rel.split("/")))
    seg = next(s for s in doc.segments if s.id == seg_id)
    return seg, classify(seg.text, command=seg.command, tool=seg.tool_name)


def _lines_with(seg, view, needle: str) -> list[str]:
    return [view.role(i) for i, ln in enumerate(seg.text.split("\n")) if needle in ln]


DJANGO = "mini-swe-agent/django__django-11099.deepseek_chat_test_1-100.traj.json"
PVLIB = "mini-swe-agent/pvlib__pvlib-python-1072.deepseek_reasoner_dev.traj.json"
PONY = "openhands-v0/ponylang__ponyc-4593.json"
PYDICOM = "swe-agent/pydicom__pydicom-1458.gpt4.traj"
MARSH = "swe-agent/marshmallow-1867.function_calling_replace_from_source.traj"
CLAUDE = "claude-code/coverage-test-fix.jsonl"
SAFETY = "openhands-v1/safety-corrupt-transactions.gpt-4o.json"
BASIC = "openhands-v0/runtime-trajs-basic.json"


# ------------------------------------------------------------------ real corpus outputs


def test_cat_of_a_python_file_is_source_and_its_raise_lines_are_code():
    seg, v = _result(DJANGO, "m5")  # cat ./django/contrib/auth/validators.py
    assert (v.kind, v.language, v.numbered) == (SOURCE, "Python", False)
    assert _lines_with(seg, v, "class ASCIIUsernameValidator") == [CODE]
    assert _lines_with(seg, v, "<returncode>0</returncode>") == [CHROME]
    assert [d.name for d in v.definitions()] == ["ASCIIUsernameValidator", "UnicodeUsernameValidator"]
    assert {d.kind for d in v.definitions()} == {"class"}


def test_truncated_cat_keeps_harness_warning_as_chrome_and_the_file_as_code():
    seg, v = _result(DJANGO, "m19")  # cat of a long test file, cut by the harness
    assert v.kind == SOURCE
    assert set(_lines_with(seg, v, "The output of your last command was too long")) == {CHROME}
    assert _lines_with(seg, v, "class PasswordValidationTest(SimpleTestCase):") == [CODE]
    assert "with self.assertRaises(ValidationError) as cm:" in seg.text
    assert set(_lines_with(seg, v, "with self.assertRaises(ValidationError) as cm:")) == {CODE}
    assert not any(v.evidence_ok(i) for i in range(len(v.roles)) if seg.text.split("\n")[i].strip())


def test_sed_n_view_is_source_with_definitions():
    seg, v = _result(PVLIB, "m7")  # sed -n '470,620p' ./pvlib/temperature.py
    assert (v.kind, v.language) == (SOURCE, "Python")
    assert [d.name for d in v.definitions()] == ["_hydraulic_diameter", "fuentes"]
    assert _lines_with(seg, v, "timedelta_hours = np.diff(poa_global.index)") == [CODE]


def test_python_traceback_of_a_run_stays_evidence():
    seg, v = _result(DJANGO, "m11")  # python test_username_validator.py -> Traceback
    assert v.kind == LOG
    assert not v.shows_code
    assert set(_lines_with(seg, v, "Traceback (most recent call last)")) == {TEXT}


def test_grep_n_hits_in_a_python_file_are_code():
    seg, v = _result(PVLIB, "m25")  # grep -n "timedelta_hours = np.diff" ./pvlib/temperature.py
    assert v.kind == SEARCH
    assert _lines_with(seg, v, "602:    timedelta_hours") == [CODE]


def test_recursive_grep_hits_are_code_by_their_file_name():
    seg, v = _result(DJANGO, "m7")  # grep -r ... --include="*.py" . | grep -v ... | head -20
    assert v.kind == SEARCH
    assert set(_lines_with(seg, v, "./django/contrib/auth/validators.py:class")) == {CODE}


def test_ls_error_is_evidence_and_ls_entries_are_not():
    seg, v = _result(PONY, "m7")  # ls src/lib -> "ls: cannot access ..."
    assert v.kind == LISTING
    assert _lines_with(seg, v, "ls: cannot access 'src/lib'") == [TEXT]
    seg, v = _result(PONY, "m21")  # ls src/libponyc
    assert v.kind == LISTING
    assert set(_lines_with(seg, v, "ponyc.c")) == {ENTRY}


def test_openhands_editor_view_is_numbered_source_in_pony():
    seg, v = _result(PONY, "m40")  # str_replace_editor view of command_parser.pony
    assert (v.kind, v.language, v.numbered) == (SOURCE, "Pony", True)
    assert _lines_with(seg, v, "Here's the result of running `cat -n`") == [CHROME]
    names = [d.name for d in v.definitions()]
    assert names[:2] == ["CommandParser", "create"] and "parse" in names
    first = v.definitions()[0]
    assert first.line > 0 and f"{first.line}\t" in seg.text


def test_editor_error_message_is_evidence_not_code():
    seg, v = _result(PONY, "m50")  # str_replace: "No replacement was performed, old_str ..."
    assert not v.shows_code
    assert set(_lines_with(seg, v, "No replacement was performed")) == {TEXT}
    assert v.definitions() == ()


def test_editor_view_of_a_missing_path_is_evidence():
    seg, v = _result(SAFETY, "m1")
    assert set(_lines_with(seg, v, "Invalid `path` parameter")) == {TEXT}


def test_editor_directory_view_is_a_listing():
    seg, v = _result(SAFETY, "m9")
    assert v.kind == LISTING
    assert _lines_with(seg, v, "Here's the files and directories") == [CHROME]


def test_claude_code_read_is_source_and_the_system_reminder_is_chrome():
    seg, v = _result(CLAUDE, "m7.r0")  # Read src/math_utils.py
    assert (v.kind, v.language, v.numbered) == (SOURCE, "Python", True)
    assert [d.name for d in v.definitions()] == ["add_numbers"]
    assert set(_lines_with(seg, v, "considered malware")) == {CHROME}


def test_claude_code_edit_snippet_shows_the_new_function():
    seg, v = _result(CLAUDE, "m12.r0")
    assert v.kind == SOURCE
    assert "multiply_numbers" in [d.name for d in v.definitions()]


def test_swe_agent_edit_with_syntax_error_keeps_the_error_as_evidence():
    seg, v = _result(PYDICOM, "m14")
    assert v.kind == SOURCE and v.language == "Python" and v.numbered
    assert _lines_with(seg, v, "E999 SyntaxError: unmatched ']'") == [TEXT]
    raise_lines = _lines_with(seg, v, "raise AttributeError(")
    assert raise_lines and set(raise_lines) == {CODE}


def test_swe_agent_open_path_comes_from_its_header():
    seg, v = _result(MARSH, "m11")  # insert: command names no file; header says /testbed/reproduce.py
    assert v.path == "/testbed/reproduce.py" and v.language == "Python"
    assert _lines_with(seg, v, "bash-$") == [CHROME]


def test_submit_patch_and_editor_create_diff_are_diffs():
    seg, v = _result(MARSH, "m27")
    assert (v.kind, v.language) == (DIFF, "Python")
    assert [d.name for d in v.definitions()] == ["_deserialize"]
    seg, v = _result(BASIC, "m2")
    assert v.kind == DIFF and "Game2048" in [d.name for d in v.definitions()]


def test_git_diff_redirected_into_a_file_shows_nothing_and_cat_of_the_patch_is_a_diff():
    seg, v = _result(DJANGO, "m83")  # cat patch.txt
    assert v.kind == DIFF
    assert set(_lines_with(seg, v, "@deconstructible")) == {CODE}


def test_every_corpus_tool_output_classifies_fast_and_deterministically(corpus):
    outputs = []
    for layout in ("aider", "claude-code", "codex-rollout", "mini-swe-agent", "openhands-v0", "openhands-v1", "swe-agent"):
        for p in sorted((corpus / layout).iterdir()):
            for s in load_document(p).segments:
                if s.kind.value == "tool_result":
                    outputs.append((s.text, s.command, s.tool_name))
    assert len(outputs) > 100
    first = [classify(t, command=c, tool=n) for t, c, n in outputs]
    second = [classify(t, command=c, tool=n) for t, c, n in outputs]
    assert first == second
    assert all(len(v.roles) == len(t.split("\n")) for v, (t, _, _) in zip(first, outputs))


# ------------------------------------------------------------------ adversarial


def test_numbered_error_list_in_a_log_is_not_code():
    out = "1: error: cannot find symbol\n2: error: missing return\n5: warning: unused"
    v = classify(out, command="make 2>&1 | nl")
    assert v.kind == LOG and not v.shows_code


def test_timestamps_are_not_line_numbers():
    out = "12:30:01 ERROR boom\n12:30:02 ERROR again\n12:30:03 ERROR third"
    assert not classify(out, command="./run.sh").shows_code


def test_cat_of_a_log_file_is_a_log():
    v = classify("ERROR: connection refused\nat pool.py:142", command="tail -n 50 /var/log/app.log")
    assert v.kind == LOG and v.evidence_ok(0)


def test_cat_of_a_missing_file_is_evidence():
    v = classify("cat: src/errors.py: No such file or directory", command="cat src/errors.py")
    assert v.evidence_ok(0)


def test_cat_then_run_is_a_log():
    v = classify("def f():\n    raise ValueError('x')\nTraceback (most recent call last):", command="cat a.py && python a.py")
    assert v.kind == LOG


def test_heredoc_write_then_run_is_a_log_and_heredoc_bodies_are_no_commands():
    cmd = "cat > t.py << 'EOF'\nimport os\ncat evil.py\nEOF\npython t.py"
    assert split_commands(cmd) == [["cat", ">", "t.py"], ["python", "t.py"]]
    assert classify("ValueError: bad", command=cmd).kind == LOG


def test_unclosed_heredoc_does_not_hang():
    cmd = "cat <<A\n" * 5000 + "x" * 100_000
    t = time.perf_counter()
    split_commands(cmd)
    assert time.perf_counter() - t < 1.0


def test_grep_over_a_log_file_hits_are_evidence():
    v = classify("build.log:12:ERROR: linker failed", command="grep -n ERROR build.log")
    assert v.kind == SEARCH and v.evidence_ok(0)


def test_ls_line_naming_errors_py_is_an_entry():
    v = classify("errors.py\nexceptions.py\n__init__.py", command="ls compactor")
    assert v.kind == LISTING and not any(v.evidence_ok(i) for i in range(3))


def test_diff_removed_sql_comment_is_code_not_a_header():
    out = "--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1,2 @@\n--- old comment\n+-- new comment\n select 1;"
    v = classify(out, command="git diff")
    assert v.kind == DIFF
    assert [v.role(i) for i in range(6)] == [CHROME, CHROME, CHROME, CODE, CODE, CODE]
    assert v.language.endswith("SQL")


def test_sed_in_place_output_is_not_a_source_view():
    v = classify("sed: -e expression #1, char 5: unterminated `s' command", command="sed -i 's/a/b' x.py")
    assert v.kind == LOG and v.evidence_ok(0)


def test_long_adversarial_lines_are_fast():
    lines = ["a/" * 20_000 + "x.py", "1" * 50_000 + ":", "The file " + "x" * 100_000, "./" + "a." * 30_000,
             "[File: " + "(" * 50_000, "   " + "9" * 60_000 + "\t"]
    t = time.perf_counter()
    for ln in lines:
        for cmd in ("grep -rn foo .", "cat x.py", "python run.py", "ls"):
            classify(ln + "\n" + ln, command=cmd)
    assert time.perf_counter() - t < 2.0


def test_empty_and_odd_inputs():
    assert classify("").kind == "empty"
    assert classify("x", command="'unbalanced").kind == LOG
    assert classify("x", tool="weird_tool").kind == LOG
    assert language_of("Makefile") == "Makefile"
    assert language_of("notes.txt") == "" and language_of("pkg-0.1") == ""


def test_definitions_are_bounded_and_do_not_count_calls():
    code = "".join(f"    {i}\tfoo_{i}(x)\n" for i in range(1, 50))
    v = classify(code, tool="str_replace_editor", command="view /w/a.py")
    assert v.definitions() == ()
    big = "".join(f"{i}\tdef f{i}(): pass\n" for i in range(1, 30_001))
    v = classify(big, tool="Read", command="/w/big.py")
    defs = v.definitions()
    assert 0 < len(defs) < 30_000 and defs[0].name == "f1" and defs[0].line == 1


def test_output_does_not_depend_on_hash_seed():
    script = ("from compactor.codeview import classify;"
              "v=classify(open(%r).read(), command='cat compactor/codeview.py');"
              "print(v.kind, v.language, len(v.code_lines), [(d.name,d.line) for d in v.definitions()])"
              % str(ROOT / "compactor" / "codeview.py"))
    outs = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(outs) == 1 and "source Python" in outs.pop()


@pytest.mark.parametrize("cmd,kind", [
    ("cd /testbed && cat -n src/a.py", SOURCE),
    ("nl -ba src/a.py | sed -n '10,20p'", SOURCE),
    ("head -30 ./pvlib/temperature.py", SOURCE),
    ("awk 'NR>=10 && NR<=20' src/a.py", SOURCE),
    ("git show HEAD:src/a.py", SOURCE),
    ("git show HEAD", DIFF),
    ("diff -u a.py b.py", DIFF),
    ("find . -name '*.py' | head", LISTING),
    ("tree -L 2", LISTING),
    ("rg -n foo src/", SEARCH),
    ("python -m pytest -x", LOG),
    ("pip install -e .", LOG),
])
def test_command_kinds(cmd, kind):
    out = "x = 1\ny = 2" if kind not in (DIFF,) else "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y"
    assert classify(out, command=cmd).kind == kind
