"""What a tool call did (compactor.anchor.files) and the cue prefilters (compactor.anchor.cues)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compactor.anchor import cues as C
from compactor.anchor._text import item_id, sentences, split_reason
from compactor.anchor.files import call_effects, looks_like_file, shell_effects
from compactor.formats.calls import make_call


def ops(tool, args=None, command=None, open_file=""):
    text = json.dumps(args) if isinstance(args, dict) else (args or "")
    e = call_effects(make_call(tool, text, command), open_file)
    return sorted(e.ops), e.kind


@pytest.mark.parametrize("tool,args,command,open_file,want,kind", [
    # file-editor tools (OpenHands, SWE-agent 1.x, Anthropic text editor)
    ("str_replace_editor", {"command": "view", "path": "/w/a.py"}, None, "", [("/w/a.py", "read")], "read"),
    ("str_replace_editor", {"command": "view", "path": "/w"}, None, "", [], "read"),  # a directory
    ("str_replace_editor", {"command": "create", "path": "/w/n.py", "file_text": "x"}, None, "", [("/w/n.py", "write")], "edit"),
    ("str_replace_editor", {"command": "str_replace", "path": "a.py", "old_str": "a", "new_str": "b"}, None, "",
     [("a.py", "modify")], "edit"),
    ("str_replace_editor", {"command": "insert", "path": "a.py", "insert_line": 3, "new_str": "b"}, None, "",
     [("a.py", "modify")], "edit"),
    # OpenHands V0 read / edit actions keep no sub-command
    ("str_replace_editor", {"path": "/w/a.py", "start": 0, "end": -1}, None, "", [("/w/a.py", "read")], "read"),
    ("str_replace_editor", {"path": "/w/g.py", "content": "", "translated_ipython_code":
                            "print(file_editor(**{'command': 'create', 'path': '/w/g.py'}))"}, None, "",
     [("/w/g.py", "write")], "edit"),
    # Claude Code / Gemini tools
    ("Read", {"file_path": "/w/a.py"}, None, "", [("/w/a.py", "read")], "read"),
    ("Write", {"file_path": "/w/b.py", "content": "x\n"}, None, "", [("/w/b.py", "write")], "edit"),
    ("Edit", {"file_path": "/w/b.py", "old_string": "x", "new_string": "y"}, None, "", [("/w/b.py", "modify")], "edit"),
    ("MultiEdit", {"file_path": "/w/b.py", "edits": [{}, {}]}, None, "", [("/w/b.py", "modify")], "edit"),
    ("read_file", {"absolute_path": "/w/c.ts"}, None, "", [("/w/c.ts", "read")], "read"),
    ("write_file", {"file_path": "/w/c.ts", "content": ""}, None, "", [("/w/c.ts", "write")], "edit"),
    ("Bash", {"command": "rm -f build/out.o"}, None, "", [("build/out.o", "deleted")], "shell"),
    # SWE-agent 1.x: edit/insert act on the open file
    ("open", {"path": "src/f.py", "line_number": 3}, None, "", [("src/f.py", "read")], "read"),
    ("edit", {"search": "a", "replace": "b"}, None, "src/f.py", [("src/f.py", "modify")], "edit"),
    ("create", {"filename": "r.py"}, None, "", [("r.py", "write")], "edit"),
    # SWE-agent 0.x text commands
    ("edit", None, "edit 12:14\n    x = 1\nend_of_edit", "pkg/m.py", [("pkg/m.py", "modify")], "edit"),
    ("open", None, "open pkg/m.py 120", "", [("pkg/m.py", "read")], "read"),
    ("create", None, "create repro.py", "", [("repro.py", "write")], "edit"),
    ("edit", None, "edit 1:1\nx\nend_of_edit", "", [], "edit"),  # nothing open: nothing known
    ("find_file", None, 'find_file "h.py"', "", [], "other"),
    # SWE-agent's file editor run as a command (its tool bundle's CLI), quotes and all
    ("str_replace_editor", None, "str_replace_editor view /testbed/pkg/m.py  --view_range 1 20", "",
     [("/testbed/pkg/m.py", "read")], "read"),
    ("str_replace_editor", None, "str_replace_editor create /testbed/repro.py --file_text 'print(\"it\\'s\")\n'", "",
     [("/testbed/repro.py", "write")], "edit"),
    ("str_replace_editor", None, "str_replace_editor str_replace /testbed/pkg/m.py   --old_str 'a = 1' --new_str 'a = 2'",
     "", [("/testbed/pkg/m.py", "modify")], "edit"),
    ("str_replace_editor", None, "str_replace_editor str_replace /testbed/pkg/m.py --old_str 'it's' --new_str 'x'",
     "", [("/testbed/pkg/m.py", "modify")], "edit"),  # an unbalanced quote: the path still counts
    ("str_replace_editor", None, "str_replace_editor undo_everything /testbed/pkg/m.py", "", [], "shell"),
    # Codex apply_patch
    ("apply_patch", {"input": "*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n*** Add File: b.py\n+z\n"
                              "*** Delete File: c.py\n*** End Patch"}, None, "",
     [("a.py", "modify"), ("b.py", "write"), ("c.py", "deleted")], "edit"),
    # a pseudo function call (seed-000 step actions) is not a shell command
    ("search", None, "search('Starship 2025 orbital')", "", [], "other"),
])
def test_call_effects(tool, args, command, open_file, want, kind):
    got, k = ops(tool, args, command, open_file)
    assert got == sorted(want)
    assert k == kind


@pytest.mark.parametrize("cmd,want,state", [
    ("cat > t.py << 'EOF'\nprint(open('x.txt').read()) > y.txt\nEOF\npython t.py", [("t.py", "write")], ""),
    ("sed -n '470,620p' ./pvlib/temperature.py", [("pvlib/temperature.py", "read")], ""),
    ("sed -i 's/a/b/' x.py y.py", [("x.py", "modify"), ("y.py", "modify")], ""),
    ("sed -i.bak -e 's/a/b/' x.py", [("x.py", "modify")], ""),
    ("head -n 30 a.py 2>&1 | tail -5", [("a.py", "read")], ""),
    ("mv a.py lib/ && rm -rf build c.txt", [("a.py", "deleted"), ("lib/a.py", "write"), ("c.txt", "deleted")], ""),
    ("cp a.py b.py", [("a.py", "read"), ("b.py", "write")], ""),
    ("git diff -- a.py > patch.txt", [("patch.txt", "write")], ""),
    ("echo x >> notes.md; git commit -am 'msg'", [("notes.md", "write")], "git commit -am msg"),
    ("pip install numpy pandas 2>&1 | tail -5", [], "pip install numpy pandas"),
    ("python -c \"import x; print(x.__version__)\" 2>/dev/null || echo none", [], ""),
    ("git checkout -- app/config.py && git status --short", [("app/config.py", "modify")], "git checkout -- app/config.py"),
    ("git mv src/a.py src/b.py", [("src/a.py", "deleted"), ("src/b.py", "write")], "git mv src/a.py src/b.py"),
    ("echo \"unbalanced > q.txt", [("q.txt", "write")], ""),
    ("grep -rn 'pool.acquire()' app/ | head", [], ""),
    ("touch src/acme/net/__init__.py # comment > z.txt", [("src/acme/net/__init__.py", "write")], ""),
])
def test_shell_effects(cmd, want, state):
    e = shell_effects(cmd)
    assert sorted(e.ops) == sorted(want)
    assert e.state_change == state


@given(st.text(max_size=300))
def test_shell_effects_never_raises(cmd):
    e = shell_effects(cmd)
    for path, op in e.ops:
        assert op in ("read", "write", "modify", "deleted") and path


@pytest.mark.parametrize("p,ok", [("a.py", True), ("./pkg/m.py", True), ("Makefile", True), (".gitignore", True),
                                  ("1.5", False), ("3.10.2", False), ("src/", False), ("src", False),
                                  ("/dev/null", False), ("*.py", False), ("$HOME/x.py", False), ("a.tar.gz", True)])
def test_looks_like_file(p, ok):
    assert looks_like_file(p) is ok


# --------------------------------------------------------------------------- cues

POSITIVE = {
    "decision": [
        "I'll use the context manager instead of release() calls, because early returns leak.",
        "We decided to keep SQLite for the cache.",
        "Let's go with PostgreSQL.",
        "The best approach is to move retry() into acme.net.",
        "I'm going to pin numpy since 2.0 breaks the C API.",
        "决定采用 points_ledger 流水表，因为退款需要冲正。",
        "选 A 方案因为 B 有性能问题。",
        "没有用 JSON 列，因为 MySQL 5.7 不能建索引。",
    ],
    "dead_end": [
        "Increasing pool_size didn't help.",
        "That didn't work.",
        "The test still fails with the same error.",
        "This approach won't work because the API is async.",
        "Raising the timeout had no effect.",
        "Caching is not the root cause.",
        "调大 pool_size 无效，问题是连接未释放。",
        "这条路行不通。",
        "改了配置还是报错。",
    ],
    "constraint": [
        "Don't use TypeScript.",
        "It must stay compatible with IE11.",
        "You must not modify the tests.",
        "Please keep the public API unchanged.",
        "Only use the standard library.",
        "不要用 TypeScript。",
        "必须兼容 IE11。",
    ],
    "question": ["It is unclear whether the cache is shared.", "I'm not sure why the worker exits.", "这个字段的含义待确认。"],
    "assumption": ["I'm assuming the old messages can be reworded.", "我先假设积分只在下单时发放。"],
    "next_step": ["Next, I need to run the full suite.", "Then I'll update the docs.", "接下来需要确认执行时间。"],
    "hedge": ["Reports vary; need a primary source to confirm.", "The date is unconfirmed.", "各方说法不一。"],
    "relax": ["Actually you can use pandas now.", "现在可以用 TypeScript 了。"],
}
NEGATIVE = {
    "decision": ["Let's run the tests.", "The parser looks fine."],
    "dead_end": ["The tests pass now.", "Let me open the file."],
    "constraint": ["The function returns a list.", "I can't figure out why."],
}


@pytest.mark.parametrize("name", sorted(POSITIVE))
def test_cue_examples_survive_the_prefilter(name):
    cue = C.CUES[name]
    for s in POSITIVE[name]:
        assert cue.pattern.search(s), (name, s)
        assert cue.possible(s.lower()), (name, s)  # the prefilter never hides a match
        assert cue.search(s), (name, s)
    for s in NEGATIVE.get(name, []):
        assert not cue.search(s), (name, s)


WORDS = sorted({w for c in C.CUES.values() for t in c.triggers for w in t.split()} | {
    "I", "we", "the", "this", "it", "is", "was", "not", "to", "of", "X", "Y", "a", "fix", "approach", ".", "didn't",
    "doesn't", "won't", "can't", "work", "help", "solve", "still", "fails", "failing", "same", "error", "again",
    "persists", "effect", "luck", "root", "cause", "wrong", "a", "mistake", "I'll", "let's", "go", "with", "use",
    "instead", "rather", "than", "because", "since", "decided", "best", "way", "is", "must", "you", "don't",
    "please", "only", "never", "unclear", "whether", "assume", "assuming", "next,", "then", "need", "reports",
    "vary", "primary", "source", "confirm", "can", "may", "no", "longer", "没", "效果", "行", "不通", "用", "因为"})


@given(st.lists(st.sampled_from(WORDS), max_size=14))
def test_prefilter_is_sound(words):
    """Whatever the pattern finds, the prefilter lets through."""
    s = " ".join(words)
    for name, cue in C.CUES.items():
        if cue.pattern.search(s):
            assert cue.possible(s.lower()), (name, s)


def test_split_reason_and_sentences():
    assert split_reason("I'll use X because Y is slow.") == ("I'll use X", "Y is slow")
    assert split_reason("选 A 方案，因为 B 有性能问题。") == ("选 A 方案", "B 有性能问题")
    assert split_reason("Nothing to split here.") == ("Nothing to split here.", "")
    assert sentences("One. Two! 三个字。四个字？\n- five") == ["One.", "Two!", "三个字。", "四个字？", "five"]


def test_ids_are_stable_and_content_derived():
    a = item_id("fa", "Pool  size is 20.")
    assert a == item_id("fa", "pool size is 20") and len(a.split("-")[1]) == 16
    assert item_id("ev", "unmatched ']'", exact=True) != item_id("ev", "unmatched ')'", exact=True)
