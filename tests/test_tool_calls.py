"""Typed tool calls at the reader edge (compactor.formats.calls) and typed per-layout state."""

from __future__ import annotations

import ast
import json
import pickle
from pathlib import Path

import pytest

from compactor.errors import RuleError
from compactor.formats import REGISTRY, LayoutState, get_format, load_document
from compactor.formats.base import Edits, update_state
from compactor.formats.calls import VOCABULARY_PATH, load_vocabulary, make_call, vocabulary
from compactor.models import CallKind, SegmentKind, ToolCall

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "trajectories"


def calls(doc):
    return [s.call for s in doc.segments if s.kind == SegmentKind.tool_call]


# --------------------------------------------------------------------------- the vocabulary file

def test_package_vocabulary_loads_and_covers_every_kind() -> None:
    v = load_vocabulary()
    assert v.source == str(VOCABULARY_PATH)
    for kind in CallKind:
        assert v.names(kind), kind
    assert "str_replace_editor" in v.names("edit") and "Bash" in v.names(CallKind.shell)
    assert v.spec("STR-REPLACE-EDITOR") is v.spec("str_replace_editor")  # case and punctuation ignored
    assert v.spec("frobnicate") is None and v.spec(None) is None


def _bad(tmp_path: Path, body: str) -> RuleError:
    p = tmp_path / "tools.toml"
    p.write_text(body, encoding="utf-8")
    with pytest.raises(RuleError) as info:
        load_vocabulary(p)
    return info.value


GOOD = '[[tool]]\nnames = ["bash"]\nharnesses = ["x"]\nkind = "shell"\n'


@pytest.mark.parametrize("body,where", [
    ('[[tool]]\nnames = ["bash"]\nharnesses = ["x"]\nkind = "run"\n', "tool[0] (bash).kind: 'run' is not one of"),
    ('[[tool]]\nharnesses = ["x"]\nkind = "shell"\n', "tool[0].names: missing"),
    ('[[tool]]\nnames = []\nharnesses = ["x"]\nkind = "shell"\n', "tool[0].names: must be a non-empty list"),
    ('[[tool]]\nnames = ["bash"]\nkind = "shell"\n', "tool[0] (bash).harnesses: missing"),
    ('[[tool]]\nnames = ["bash"]\nharnesses = ["x"]\nkind = "shell"\npath_key = ["p"]\n',
     "tool[0] (bash).path_key: unknown field"),
    ('[[tool]]\nnames = ["bash"]\nharnesses = ["x"]\nkind = "shell"\npath_keys = "path"\n',
     "tool[0] (bash).path_keys: must be a list"),
    ('[[tool]]\nnames = ["ed"]\nharnesses = ["x"]\nkind = "edit"\nverbs = { view = "look" }\n',
     "tool[0] (ed).verbs.view: 'look' is not one of"),
    ('[[tool]]\nnames = ["ed"]\nharnesses = ["x"]\nkind = "edit"\ncommand_path = "yes"\n',
     "tool[0] (ed).command_path: must be true or false"),
    (GOOD + '[[tool]]\nnames = ["Bash"]\nharnesses = ["y"]\nkind = "shell"\n',
     "tool[1] (Bash).names: 'Bash' is already listed in tool[0] (bash)"),
    ('[[tool]]\nnames = ["--"]\nharnesses = ["x"]\nkind = "other"\n', "has no letter or digit"),
    ('tools = 1\n' + GOOD, "unknown top-level field(s) tools"),
    ('', "tool: needs at least one [[tool]] table"),
])
def test_bad_vocabulary_entry_names_file_and_field(tmp_path: Path, body: str, where: str) -> None:
    err = _bad(tmp_path, body)
    assert any(p.startswith("tools.toml: ") and where in p for p in err.problems), err.problems
    assert str(tmp_path / "tools.toml") in str(err)  # the one-line message names the file
    assert "\n" not in str(err)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    err = _bad(tmp_path, '[[tool]]\nnames = ["a"]\nharnesses = ["x"]\nkind = "nope"\n'
                         '[[tool]]\nnames = ["b"]\nkind = "shell"\nextra = 1\n')
    assert len(err.problems) == 3, err.problems


def test_vocabulary_not_toml_names_the_file(tmp_path: Path) -> None:
    err = _bad(tmp_path, "[[tool]\nnames = ")
    assert "not valid TOML" in str(err) and "tools.toml" in str(err)


def test_parsed_vocabulary_is_cached_checked_and_never_trusted_blindly(tmp_path: Path, monkeypatch) -> None:
    """The parsed file is kept in the cache folder (no TOML parser at a later start); a damaged
    or tampered cache file is ignored, and cached data is checked like the file's."""
    import subprocess
    import sys

    monkeypatch.setenv("COMPACTOR_CACHE", str(tmp_path / "cache"))
    p = tmp_path / "tools.toml"
    p.write_text(GOOD, encoding="utf-8")
    first = load_vocabulary(p)
    (cached,) = (tmp_path / "cache" / "tools").iterdir()
    again = load_vocabulary(p)
    assert again.names(CallKind.shell) == first.names(CallKind.shell) == {"bash"}
    probe = ("import sys; from compactor.formats.calls import load_vocabulary; load_vocabulary(sys.argv[1]); "
             "print('tomllib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe, str(p)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    cached.write_bytes(cached.read_bytes()[:-3] + b"xyz")  # damaged: checksum differs, parsed again
    assert load_vocabulary(p).names(CallKind.shell) == {"bash"}
    assert load_vocabulary(p).names(CallKind.shell) == {"bash"}  # and written back whole
    assert cached.read_bytes() != b"" and not cached.read_bytes().endswith(b"xyz")
    # a cache file that checks out but holds data the checker refuses is refused like the file
    import hashlib
    import marshal

    body = marshal.dumps({"tool": [{"names": ["bash"], "harnesses": ["x"], "kind": "run"}]})
    cached.write_bytes(b"compactor-parsed-toml 1 " + hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
    with pytest.raises(RuleError, match="is not one of"):
        load_vocabulary(p)


# --------------------------------------------------------------------------- the record

def test_tool_call_is_read_only_picklable_and_compares_by_value() -> None:
    c = make_call("Edit", '{"file_path": "a.py", "old_string": "x", "new_string": "y"}', "a.py")
    assert (c.kind, c.paths, c.command) == (CallKind.edit, ("a.py",), "a.py")
    assert c.arguments == {"file_path": "a.py", "old_string": "x", "new_string": "y"}
    with pytest.raises(AttributeError):
        c.kind = CallKind.read  # type: ignore[misc]
    with pytest.raises(AttributeError):
        c.extra = 1  # type: ignore[attr-defined]
    back = pickle.loads(pickle.dumps(c))
    assert back == c and hash(back) == hash(c) and back is not c
    assert make_call("Edit", c.raw, "b.py") != c


def test_segments_carry_their_call_and_pickle() -> None:
    doc = load_document(FIXTURES / "cart-total.claude-code.jsonl")
    segs = [s for s in doc.segments if s.kind == SegmentKind.tool_call]
    assert segs and all(isinstance(s.call, ToolCall) for s in segs)
    assert all(s.call.raw == s.text and s.call.name == s.tool_name for s in segs)
    assert all(s.call is None for s in doc.segments if s.kind != SegmentKind.tool_call)
    assert pickle.loads(pickle.dumps(doc.segments)) == doc.segments


# --------------------------------------------------------------------------- each harness

# (file, call index) -> (name, kind, paths, command or None to skip)
FIXTURE_CALLS = {
    "cart-total.claude-code.jsonl": [("Read", "read", ("/home/dev/shop/src/cart/total.ts",)),
                                     ("Grep", "search", ("src",)), ("Task", "other", ()),
                                     ("Edit", "edit", ("/home/dev/shop/src/cart/total.ts",)), ("Bash", "shell", ())],
    "cart-coupon.claude-export.md": [("Read", "read", ("/repo/app/cart.py",)), ("Edit", "edit", ("/repo/app/cart.py",)),
                                     ("Bash", "shell", ())],
    "config-fix.codex-tui.jsonl": [("apply_patch", "edit", ("src/config.rs",)), ("shell", "shell", ())],
    "rate-limit.codex.jsonl": [("apply_patch", "edit", ("api/ratelimit.py",)), ("shell", "shell", ())],
    "lodash-merge.anthropic.json": [("read_file", "read", ("src/utils/merge.js",)), ("edit_file", "edit", None),
                                    ("bash", "shell", ())],
    "nightly-report.openhands-v1.json": [("str_replace_editor", "read", ("/workspace/config/report.yaml",)),
                                         ("execute_bash", "shell", ()), ("finish", "other", ())],
    "web-build.openhands-v0.json": [("str_replace_editor", "read", ("/workspace/web/src/api/types.ts",)),
                                    ("str_replace_editor", "edit", ("/workspace/web/src/api/types.ts",)),
                                    ("execute_bash", "shell", ())],
    "pricing-page.gemini-cli.jsonl": [("read_file", "read", ("src/pages/Pricing.tsx",)),
                                      ("write_file", "edit", ("src/pages/Pricing.tsx",)),
                                      ("replace", "edit", ("src/pages/Pricing.tsx",)),
                                      ("run_shell_command", "shell", ()), ("get_figma_data", "other", ())],
    "acme-version.openai-chat.traj.json": [("bash", "shell", ())],
    "starship.steps.json": [("search", "search", ())],
    "textkit-deps.swe-agent-1x.traj": [("open", "read", ("pyproject.toml",)), ("edit", "edit", ()),
                                       ("bash", "shell", ())],
    "textkit-slug.swe-agent-0x.traj": [("open", "read", ("textkit/slug.py",)), ("edit", "edit", ()),
                                       ("submit", "other", ()), ("pytest", "other", ())],
}


@pytest.mark.parametrize("name", sorted(FIXTURE_CALLS))
def test_fixture_harness_calls_are_typed(name: str) -> None:
    doc = load_document(FIXTURES / name)
    got = {(c.name, c.kind.value, c.paths) for c in calls(doc)}
    for tool, kind, paths in FIXTURE_CALLS[name]:
        hits = [g for g in got if g[0] == tool and g[1] == kind and (paths is None or paths == () or g[2] == paths)]
        assert hits, (tool, kind, paths, sorted(got))
    for c in calls(doc):
        seg = next(s for s in doc.segments if s.call is c)
        assert c.raw == seg.text and (seg.command is None or c.command == seg.command)
        if c.kind is CallKind.shell:
            assert c.command, c  # a shell call always has its command line


def test_shell_commands_and_argv_lists() -> None:
    doc = load_document(FIXTURES / "rate-limit.codex.jsonl")
    shells = [c for c in calls(doc) if c.kind is CallKind.shell]
    assert shells and all(c.command and not c.command.startswith("[") for c in shells)
    c = make_call("shell", json.dumps({"command": ["bash", "-lc", "pytest -x tests"]}), None)
    assert (c.kind, c.command) == (CallKind.shell, "pytest -x tests")
    c = make_call("exec_command", json.dumps({"cmd": ["git", "status", "--short"]}), None)
    assert c.command == "git status --short"


# corpus file -> {(name, kind): count}, and the calls with paths that must be there
CORPUS_CALLS = {
    "claude-code/coverage-test-fix.jsonl": ({("Glob", "search"): 2, ("Read", "read"): 3, ("Edit", "edit"): 3,
                                             ("Bash", "shell"): 5},
                                            [("Read", "read", "/tmp/tmpw6sk2trg/src/math_utils.py"),
                                             ("Edit", "edit", "/tmp/tmpw6sk2trg/.gitignore")]),
    "mini-swe-agent/django__django-11099.deepseek_chat_test_1-100.traj.json": ({("bash", "shell"): 42}, []),
    "openhands-v0/ponylang__ponyc-4593.json": ({("execute_bash", "shell"): 12, ("str_replace_editor", "read"): 9,
                                               ("str_replace_editor", "edit"): 11, ("finish", "other"): 1},
                                              [("str_replace_editor", "edit",
                                                "/workspace/ponylang__ponyc__0.1/packages/cli/command_parser.pony")]),
    "openhands-v1/safety-corrupt-transactions.gpt-4o.json": ({("str_replace_editor", "read"): 6, ("finish", "other"): 1},
                                                             [("str_replace_editor", "read", "/workspace")]),
    "swe-agent/marshmallow-1867.function_calling_replace_from_source.traj": (
        {("bash", "shell"): 6, ("open", "read"): 2, ("create", "edit"): 1, ("insert", "edit"): 1,
         ("find_file", "search"): 1, ("edit", "edit"): 1, ("submit", "other"): 1},
        [("open", "read", "setup.py"), ("create", "edit", "reproduce.py"), ("find_file", "search", "src")]),
    "swe-agent/pydicom__pydicom-1458.gpt4.traj": ({("create", "edit"): 1, ("edit", "edit"): 5, ("python", "other"): 2,
                                                  ("find_file", "search"): 1, ("open", "read"): 1, ("rm", "other"): 1,
                                                  ("submit", "other"): 1},
                                                 [("open", "read", "pydicom/pixel_data_handlers/numpy_handler.py")]),
}


@pytest.mark.corpus
@pytest.mark.parametrize("rel", sorted(CORPUS_CALLS))
def test_corpus_harness_calls_are_typed(corpus: Path, rel: str) -> None:
    path = corpus / rel
    if not path.exists():
        pytest.skip(f"corpus file not available: {rel}")
    doc = load_document(path)
    counts: dict[tuple[str, str], int] = {}
    for c in calls(doc):
        counts[(c.name, c.kind.value)] = counts.get((c.name, c.kind.value), 0) + 1
        seg = next(s for s in doc.segments if s.call is c)
        assert c.raw == seg.text and c.command == seg.command  # nothing rewritten at the edge
        if c.arguments is not None:
            assert json.loads(seg.text) == c.arguments
    want, with_paths = CORPUS_CALLS[rel]
    assert counts == want
    for name, kind, p in with_paths:
        assert any(c.name == name and c.kind.value == kind and p in c.paths for c in calls(doc)), (name, kind, p)
    # mini-swe-agent: the shell command is the one in the arguments
    if rel.startswith("mini-swe-agent"):
        assert all(c.command == c.arguments["command"] for c in calls(doc))


# --------------------------------------------------------------------------- adversarial input

ODD_CALLS = [
    ("c1", "bash", "{not json"),
    ("c2", "bash", "[1, 2, 3]"),
    ("c3", "bash", "null"),
    ("c4", "str_replace_editor", '{"path": 5, "command": ["view"]}'),
    ("c5", "frobnicate", '{"path": "a.py", "command": "rm -rf /"}'),
    ("c6", "Read", "{}"),
    ("c7", "apply_patch", '{"input": 17}'),
    ("c8", "", '{"command": "ls"}'),
    ("c9", "Edit", '  {"file_path": "b.py"}'),
    ("c10", "bash", '{"command": "echo \\ud800"}'),
    ("c11", "bash", "[" * 3000 + "]" * 3000),
    ("c12", "str_replace_editor", '{"command": "view", "path": "   "}'),
]


def _odd_conversation() -> str:
    msgs: list[dict] = [{"role": "user", "content": "go"}]
    for cid, name, args in ODD_CALLS:
        msgs.append({"role": "assistant", "content": None,
                     "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": args}}]})
        msgs.append({"role": "tool", "tool_call_id": cid, "content": f"output of {cid}\n" * 3})
    return json.dumps({"messages": msgs}, ensure_ascii=False, indent=2) + "\n"


def test_odd_arguments_are_typed_nothing_dropped_round_trip_identical() -> None:
    text = _odd_conversation()
    doc = load_document(text)
    fmt = get_format(doc.format)
    assert fmt.dumps(fmt.write(doc)) == text  # byte-identical round trip
    got = {s.call_id: s.call for s in doc.segments if s.kind == SegmentKind.tool_call}
    assert sorted(got) == sorted(cid for cid, _, _ in ODD_CALLS)  # every call kept
    for cid, name, args in ODD_CALLS:
        c = got[cid]
        assert c.raw == args and c.name == name
    assert got["c1"].arguments is None and got["c1"].kind is CallKind.shell and got["c1"].command == "{not json"
    assert got["c2"].arguments is None and got["c3"].arguments is None and got["c11"].arguments is None
    assert got["c4"].kind is CallKind.edit and got["c4"].paths == ()  # odd types: no path, no verb
    assert got["c5"].kind is CallKind.other and got["c5"].paths == ()  # unknown tool: other
    assert got["c6"].kind is CallKind.read and got["c6"].paths == ()
    assert got["c7"].kind is CallKind.edit and got["c7"].paths == ()
    assert got["c8"].kind is CallKind.other
    assert got["c9"].paths == ("b.py",)  # leading white space before the object
    assert got["c12"].kind is CallKind.read and got["c12"].paths == ()
    # the whole pipeline keeps every call and its text (level 1 only rewrites long bodies)
    import compactor

    res = compactor.compact(text)
    out = res.messages
    ids = [tc["id"] for m in out["messages"] for tc in (m.get("tool_calls") or [])]
    assert ids == [cid for cid, _, _ in ODD_CALLS]
    args = {tc["id"]: tc["function"]["arguments"] for m in out["messages"] for tc in (m.get("tool_calls") or [])}
    assert args == {cid: a for cid, _, a in ODD_CALLS}  # short argument texts come back as they were
    again = compactor.compact(text)
    assert json.dumps(again.messages, ensure_ascii=False) == json.dumps(res.messages, ensure_ascii=False)


# --------------------------------------------------------------------------- no parse downstream

DOWNSTREAM = ["anchor", "audit", "collapse/older.py", "tools/triggers.py"]


def test_no_argument_json_parsed_downstream() -> None:
    pkg = ROOT / "compactor"
    files: list[Path] = []
    for d in DOWNSTREAM:
        p = pkg / d
        files.extend(sorted(p.rglob("*.py")) if p.is_dir() else [p])
    for f in files:
        tree = ast.parse(f.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "loads" and \
                    isinstance(node.value, ast.Name) and node.value.id == "json":
                pytest.fail(f"{f.relative_to(ROOT)}:{node.lineno}: json.loads downstream of the readers")


# --------------------------------------------------------------------------- per-layout state

def test_each_layout_has_its_own_typed_state() -> None:
    seen = {}
    for f in FIXTURES.iterdir():
        if f.suffix == ".log":
            continue
        doc = load_document(f)
        fmt = get_format(doc.format)
        assert type(doc.state) is fmt.State, (f.name, type(doc.state))
        assert isinstance(doc.state, LayoutState)
        seen[doc.format] = type(doc.state).__name__
    assert seen["steps"] == "StepsState" and seen["claude-code"] == "ClaudeCodeState"
    assert seen["openhands"] == "OpenHandsState" and seen["swe-agent"] == "SweAgentState"
    # a layout-only field exists on its own layout's state only
    assert not hasattr(LayoutState(), "objective") and not hasattr(LayoutState(), "sidechain")
    with pytest.raises(AttributeError, match="has no field 'objective'"):
        update_state(get_format("openhands").State(), objective="x")


def test_writer_refuses_another_layouts_state() -> None:
    doc = load_document(FIXTURES / "web-build.openhands-v0.json")
    doc.state = get_format("steps").State()
    with pytest.raises(TypeError, match="openhands: the document's state is a StepsState"):
        get_format("openhands").write(doc, Edits(summary="s"))


def test_state_classes_are_distinct_per_layout_that_needs_one() -> None:
    names = {f.name: f.State for f in REGISTRY}
    own = {n for n, s in names.items() if s is not LayoutState}
    assert own >= {"aider", "claude-code", "codex", "codex-tui", "gemini-cli", "openhands", "steps", "swe-agent"}
    assert len({names[n] for n in own}) == len(own)


# --------------------------------------------------------------------------- one vocabulary downstream

def test_anchor_and_triggers_take_tool_names_from_the_vocabulary() -> None:
    from compactor.anchor.files import call_effects
    from compactor.tools.triggers import should_compact

    # a shell known only by the vocabulary's list of other agents' shells
    eff = call_effects(make_call("run_terminal_cmd", json.dumps({"command": "rm old.py && touch new.py"}), None))
    assert eff.kind == "shell" and sorted(eff.ops) == [("new.py", "write"), ("old.py", "deleted")]
    # a file editor of the vocabulary, with a sub-command
    eff = call_effects(make_call("text_editor_20250124", json.dumps({"command": "view", "path": "a/b.py"}), None))
    assert (eff.kind, eff.ops) == ("read", [("a/b.py", "read")])
    assert vocabulary().spec("search_file_content").kind is CallKind.search
    # Gemini's search tool repeated: the triggers see a repeated search (by the call's kind)
    lines = [{"type": "message", "role": "user", "content": "find where the total is computed"}]
    for i in range(4):
        lines.append({"type": "tool_use", "tool_name": "search_file_content", "tool_id": f"s{i}",
                      "parameters": {"pattern": "def total", "path": "src"}})
        lines.append({"type": "tool_result", "tool_id": f"s{i}", "status": "success", "output": "src/a.py:3"})
    text = "".join(json.dumps(x) + "\n" for x in lines)
    decision = should_compact(text, repeat_threshold=3)
    assert any(r.code == "repeat-search" for r in decision.reasons), decision.reasons
    assert not any(r.code == "repeat-command" for r in decision.reasons)
