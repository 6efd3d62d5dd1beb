"""Level 1, older outputs: re-runs as deltas, re-reads as diffs, file views by reference."""

from __future__ import annotations

import json
import re

from compactor import Compactor, emit, load_document

REF = re.compile(r"c-[0-9a-f]{16}")


def _pytest_out(failing: list[str], passed: int, seconds: str) -> str:
    lines = ["============================= test session starts ==============================",
             "platform linux -- Python 3.11.4, pytest-7.4.0, pluggy-1.2.0",
             "rootdir: /app", "collected 40 items", ""]
    lines += [f"tests/test_mod{i}.py ........                                            [{i * 20}%]" for i in range(1, 5)]
    if not failing:
        return "\n".join(lines + [f"============================== {passed} passed in {seconds}s =============================="])
    lines += ["", "=================================== FAILURES ==================================="]
    for t in failing:
        lines += [f"___________________________________ {t} ___________________________________",
                  f"    def {t}():", f">       assert compute_{t}() == 3",
                  f"E       AssertionError: assert 2 == 3 in {t}", "",
                  f"tests/test_core.py:{10 + len(t)}: AssertionError"]
    lines += ["=========================== short test summary info ============================"]
    lines += [f"FAILED tests/test_core.py::{t} - AssertionError: assert 2 == 3 in {t}" for t in failing]
    lines += [f"========================= {len(failing)} failed, {passed} passed in {seconds}s ========================="]
    return "\n".join(lines)


def _source(lines: list[str]) -> str:
    return "\n".join(f"{i + 1:6d}\t{ln}" for i, ln in enumerate(lines))


def _conversation(outputs: list[tuple[str, str]]) -> list[dict]:
    msgs: list[dict] = [{"role": "system", "content": "You are a coding agent."},
                        {"role": "user", "content": "Make the core tests pass."}]
    for k, (cmd, out) in enumerate(outputs):
        msgs.append({"role": "assistant", "content": f"Step {k}.", "tool_calls": [
            {"id": f"c{k}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": cmd})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{k}", "content": out})
    for k in range(3):  # the recent window: three short outputs keep everything above it older
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"r{k}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": f"echo {k}"})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"r{k}", "content": str(k)})
    return msgs


def _outputs(comp: Compactor, msgs: list[dict]) -> tuple[list[str], list[str]]:
    """(the raw tool outputs, the tool outputs of the compacted result read back)."""
    res = comp.compact(json.dumps(msgs))
    back = load_document(emit.render(res, "messages").encode("utf-8"), source="<compacted>")
    raw = [m["content"] for m in msgs if m["role"] == "tool"]
    return raw, [s.text for s in back.segments if s.kind.value == "tool_result"]


def test_rerun_is_shown_as_what_changed(tmp_path):
    comp = Compactor(store=str(tmp_path / "s.sqlite"))
    first = _pytest_out(["test_alpha", "test_beta"], 38, "1.20")
    second = _pytest_out(["test_alpha", "test_gamma"], 38, "1.31")
    msgs = _conversation([("python -m pytest tests", first), ("sed -i s/a/b/ src/core.py", ""),
                          ("python -m pytest  tests", second)])  # spacing differs: the same call
    raw, out = _outputs(comp, msgs)
    delta = out[2]
    head = delta.split("\n")[0]
    # 16 failure lines: the FAILURES block, two FAILED lines, the summary; test_gamma's 5 and the new summary are new
    assert head.startswith("[re-run of s2 (same call): 16 failure lines (6 new, 10 still failing), 1 resolved, "
                           "8 other lines (8 as in s2) · ref c-"), head
    # every failure line of the re-run stays verbatim, the new one and the still-failing one
    for t in ("test_alpha", "test_gamma"):
        assert f"FAILED tests/test_core.py::{t} - AssertionError: assert 2 == 3 in {t}" in delta
        assert f"E       AssertionError: assert 2 == 3 in {t}" in delta
    assert "tests/test_core.py:20: AssertionError" in delta  # test_gamma's location
    # the failure that is gone is named, once
    assert delta.count("resolved since s2: FAILED tests/test_core.py::test_beta") == 1
    # the summary line stays; the unchanged banner lines are counted, not shown
    assert "2 failed, 38 passed in 1.31s" in delta
    assert "platform linux" not in delta
    assert len(delta) < len(second)
    # the whole output is one reference away, exactly
    (ref,) = REF.findall(head)
    assert comp.expand(ref) == second
    # the first run has nothing to be a delta of
    assert "re-run" not in out[0]
    assert "FAILED tests/test_core.py::test_beta" in out[0]


def _verbose(failing: set[str], seconds: str) -> str:
    names = [f"test_case_{j}" for j in range(60)]
    lines = ["============================= test session starts ==============================",
             "collected 60 items", ""]
    lines += [f"tests/test_core.py::{t} {'FAILED' if t in failing else 'PASSED'} [{(j + 1) * 100 // 60:3d}%]"
              for j, t in enumerate(names)]
    if failing:
        lines += ["=========================== short test summary info ============================"]
        lines += [f"FAILED tests/test_core.py::{t} - AssertionError: expected 3, got 2" for t in sorted(failing)]
        lines += [f"========================= {len(failing)} failed, {60 - len(failing)} passed in {seconds}s ===="]
    else:
        lines += [f"============================== 60 passed in {seconds}s =============================="]
    return "\n".join(lines)


def test_fixed_rerun_names_what_was_resolved(tmp_path):
    comp = Compactor(store=str(tmp_path / "s.sqlite"))
    msgs = _conversation([("pytest -v tests/test_core.py", _verbose({"test_case_7"}, "0.90")),
                          ("pytest -v tests/test_core.py", _verbose(set(), "0.95"))])
    raw, out = _outputs(comp, msgs)
    head = out[1].split("\n")[0]
    assert head.startswith("[re-run of s2 (same call): no failure line, 1 resolved, "), out[1]
    assert "resolved since s2: FAILED tests/test_core.py::test_case_7 - AssertionError: expected 3, got 2" in out[1]
    assert "tests/test_core.py::test_case_7 PASSED [ 13%]" in out[1]  # the line that changed
    assert "60 passed in 0.95s" in out[1]
    assert "test_case_8 PASSED" not in out[1]
    assert comp.expand(REF.findall(head)[0]) == raw[1]


def test_different_calls_are_not_deltas(tmp_path):
    comp = Compactor(store=str(tmp_path / "s.sqlite"))
    msgs = _conversation([("pytest tests/test_core.py", _pytest_out(["test_alpha"], 39, "0.90")),
                          ("pytest tests/test_other.py", _pytest_out(["test_beta"], 39, "0.90"))])
    _, out = _outputs(comp, msgs)
    assert not any("re-run of" in o for o in out)
    assert "FAILED tests/test_core.py::test_beta - AssertionError: assert 2 == 3 in test_beta" in out[1]


def test_reread_after_edit_is_the_diff_since_the_last_read(tmp_path):
    comp = Compactor(store=str(tmp_path / "s.sqlite"))
    body = [f"def handler_{j}(request):" if j % 3 == 0 else f"    return respond(request, code={j})" for j in range(60)]
    edited = body[:10] + ["    # validate before responding", "    check(request)"] + body[10:30] + \
        ["    return respond(request, code=999)"] + body[31:]
    msgs = _conversation([("cat -n src/handlers.py", _source(body)), ("python edit.py", "patched"),
                          ("cat -n src/handlers.py", _source(edited))])
    raw, out = _outputs(comp, msgs)
    diff = out[2]
    head = diff.split("\n")[0]
    assert head.startswith("[src/handlers.py read again: diff since the read at s2, +3 -1 lines"), head
    assert "+    # validate before responding" in diff and "+    check(request)" in diff
    assert "-def handler_30(request):" in diff and "+    return respond(request, code=999)" in diff
    # line numbers shifted by the insertion do not make the rest of the file a change
    assert diff.count("\n") < 20
    (ref,) = REF.findall(head)
    assert comp.expand(ref) == raw[2]


def test_older_views_go_by_reference_unless_they_hold_evidence(tmp_path):
    comp = Compactor(store=str(tmp_path / "s.sqlite"))
    code = [f"    raise ValueError('bad value {j}')" if j % 7 == 0 else f"    x_{j} = compute({j})" for j in range(80)]
    listing = "\n".join(f"src/pkg/mod_{j}.py" for j in range(30))
    hits = "\n".join(f"src/pkg/mod_{j}.py:{j + 3}:    return handler_{j}(request)" for j in range(25))
    failed_view = _source(code[:20]) + "\nsed: couldn't flush stdout: Broken pipe"
    msgs = _conversation([("cat -n src/pkg/core.py", _source(code)), ("find src/pkg -name '*.py'", listing),
                          ("grep -rn handler_ src/pkg", hits), ("sed -n 1,20p src/pkg/util.py | cat -n", failed_view)])
    raw, out = _outputs(comp, msgs)
    assert re.fullmatch(r"\[view of src/pkg/core\.py: 80 lines, lines 1-80 · ref c-[0-9a-f]{16}\]", out[0]), out[0]
    assert re.fullmatch(r"\[listing of src/pkg: 30 entries · ref c-[0-9a-f]{16}\]", out[1]), out[1]
    assert re.fullmatch(r"\[search hits: 25 lines in 25 files · ref c-[0-9a-f]{16}\]", out[2]), out[2]
    for o, r in zip(out[:3], raw[:3]):
        assert comp.expand(REF.findall(o)[0]) == r
    # a view with a line that is not the file (the viewer's own error) is not only a view
    assert "sed: couldn't flush stdout: Broken pipe" in out[3]


def test_older_error_output_keeps_warning_locations(tmp_path):
    comp = Compactor(store=str(tmp_path / "s.sqlite"))
    noise = [f"step {i}/200 loss=0.{i:03d} lr=1e-4" for i in range(30)]
    warn = "/opt/conda/lib/python3.11/site-packages/torch/utils/data/dataloader.py:557: UserWarning: 8 workers"
    tb = ['Traceback (most recent call last):', '  File "/app/train.py", line 3, in <module>', "    main()",
          "RuntimeError: CUDA out of memory"]
    msgs = _conversation([("python train.py", "\n".join(noise[:10] + [warn, "  warnings.warn("] + noise[10:] + tb))])
    _, out = _outputs(comp, msgs)
    assert "[… 9 lines · ref c-" in out[0]  # it is the older error view
    assert warn in out[0] and "RuntimeError: CUDA out of memory" in out[0]


def test_deltas_are_deterministic_and_idempotent(tmp_path):
    msgs = _conversation([("python -m pytest tests", _pytest_out(["test_alpha", "test_beta"], 38, "1.20")),
                          ("python -m pytest tests", _pytest_out(["test_alpha", "test_gamma"], 38, "1.31")),
                          ("cat -n a.py", _source([f"v{j} = {j}" for j in range(40)])),
                          ("cat -n a.py", _source([f"v{j} = {j * 2}" if j == 5 else f"v{j} = {j}" for j in range(40)]))])
    text = json.dumps(msgs)
    a = emit.render(Compactor(store=str(tmp_path / "a.sqlite")).compact(text), "messages")
    b = emit.render(Compactor(store=str(tmp_path / "b.sqlite")).compact(text), "messages")
    assert a == b and "re-run of s2" in a and "read again" in a
    again = emit.render(Compactor(store=str(tmp_path / "a.sqlite")).compact(a), "messages")
    assert json.loads(again) == json.loads(a)


def test_older_edit_bodies_in_camel_case_go_by_reference(tmp_path):
    """pi's edit tool names its bodies oldText / newText: an older edit keeps its path, its bodies
    go by reference (they are in the file), like old_string / new_string."""
    comp = Compactor(store=str(tmp_path / "s.sqlite"))
    old = "\n".join(f"export const limit{j} = {j};" for j in range(12))
    new = old.replace("limit3 = 3", "limit3 = 30")
    args = {"path": "/repo/src/limits.ts", "oldText": old, "newText": new}
    msgs: list[dict] = [{"role": "user", "content": "Raise limit3."},
                        {"role": "assistant", "content": None, "tool_calls": [
                            {"id": "e1", "type": "function", "function": {"name": "edit", "arguments": json.dumps(args)}}]},
                        {"role": "tool", "tool_call_id": "e1", "content": "Successfully replaced text in /repo/src/limits.ts."}]
    msgs = msgs + _conversation([])[2:]
    res = comp.compact(json.dumps(msgs))
    back = load_document(emit.render(res, "messages").encode("utf-8"), source="<compacted>")
    call = next(s.text for s in back.segments if s.kind.value == "tool_call")
    shortened = json.loads(call)
    assert shortened["path"] == "/repo/src/limits.ts"
    for key in ("oldText", "newText"):
        assert re.fullmatch(r"\[… 12 lines · ref c-[0-9a-f]{16}\]", shortened[key]), shortened
    assert json.loads(comp.expand(REF.findall(shortened["oldText"])[0])) == args


def _tool_turns(calls: list[tuple[str, dict, str]]) -> list[dict]:
    msgs: list[dict] = [{"role": "user", "content": "Wire the flag through."}]
    for k, (name, args, out) in enumerate(calls):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"t{k}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
        msgs.append({"role": "tool", "tool_call_id": f"t{k}", "content": out})
    return msgs + _conversation([])[2:]


def test_search_tool_pagination_note_is_the_tools_framing(tmp_path):
    """Claude Code's Grep adds a pagination note and a truncation marker: they are the tool's
    framing, not evidence, so the hits still go by reference."""
    comp = Compactor(store=str(tmp_path / "s.sqlite"))
    hits = "\n".join(f"src/panes/Pane{j}.tsx:{j + 10}:  const agent = launch('claude', opts{j});" for j in range(30))
    out = hits + "\n... [12 lines truncated] ...\n\n[Showing results with pagination = limit: 100, offset: 0]"
    msgs = _tool_turns([("Grep", {"pattern": "launch\\(", "output_mode": "content", "-n": True}, out)])
    res = comp.compact(json.dumps(msgs))
    back = load_document(emit.render(res, "messages").encode("utf-8"), source="<compacted>")
    first = next(s.text for s in back.segments if s.kind.value == "tool_result")
    # the tool's own notes stay (their numbers are what it reported), the hits go by reference
    assert re.fullmatch(r"\.\.\. \[12 lines truncated\] \.\.\.\n\[Showing results with pagination = limit: 100, "
                        r"offset: 0\]\n\[search hits: 32 lines in 30 files · ref c-[0-9a-f]{16}\]", first), first


def test_two_edits_of_a_file_are_not_a_reread(tmp_path):
    comp = Compactor(store=str(tmp_path / "s.sqlite"))

    def snippet(start: int, changed: str) -> str:
        body = [f"{start + j:6d}\t    value_{start + j} = compute({start + j})" for j in range(14)]
        body[5] = f"{start + 5:6d}\t    {changed}"
        return ("The file /repo/src/config.py has been updated. Here's the result of running `cat -n` on a snippet "
                "of the edited file:\n" + "\n".join(body))

    msgs = _tool_turns([("Edit", {"file_path": "/repo/src/config.py", "old_string": "a", "new_string": "b"},
                         snippet(10, "flag = True")),
                        ("Edit", {"file_path": "/repo/src/config.py", "old_string": "c", "new_string": "d"},
                         snippet(10, "retries = 5"))])  # the same lines, one changed: a diff would be short
    res = comp.compact(json.dumps(msgs))
    back = load_document(emit.render(res, "messages").encode("utf-8"), source="<compacted>")
    outs = [s.text for s in back.segments if s.kind.value == "tool_result"]
    assert not any("read again" in o for o in outs), outs[:2]
    # each older snippet keeps the editor's confirmation, the file's lines go by reference
    assert outs[1].split("\n")[0].startswith("The file /repo/src/config.py has been updated.")
    assert re.fullmatch(r"\[view of /repo/src/config\.py: 14 lines, lines 10-23 · ref c-[0-9a-f]{16}\]",
                        outs[1].split("\n")[1]), outs[1]


def test_calls_held_for_deltas_are_bounded(tmp_path):
    """A streamed file may hold any number of distinct calls: the last older output is held for
    the 256 most recently seen calls only; a call not seen since is shown in full (its evidence
    view) again, never wrongly."""
    from compactor.collapse import older

    assert older._MAX_PREVIOUS == 256
    comp = Compactor(store=str(tmp_path / "s.sqlite"))
    first = _verbose({"test_case_7", "test_case_9"}, "1.20")
    second = _verbose({"test_case_7"}, "1.31")
    fill = [(f"python scripts/check_{j}.py", f"check {j}: ok\nall {j} items verified") for j in range(256)]
    msgs = _conversation([("pytest tests/a", first), ("pytest tests/b", first)] + fill[1:]
                         + [("pytest tests/b", second), ("pytest tests/a", _verbose({"test_case_7"}, "1.44"))])
    _, out = _outputs(comp, msgs)
    assert out[-5].startswith("[re-run of s3 (same call)"), out[-5][:200]  # tests/b: seen recently enough
    assert "re-run of" not in out[-4] and "FAILED tests/test_core.py::test_case_7" in out[-4]  # tests/a: evicted


def test_what_the_self_check_holds_is_not_cut(tmp_path):
    """Search hits with a line the self-check holds (an error statement in the code found) stay as
    Level 1 left them rather than going by reference and being put back by the self-check at the
    head of the conversation (which would break every prompt cache)."""
    comp = Compactor(store=str(tmp_path / "s.sqlite"))
    hits = "\n".join(f"src/svc/client_{j}.py:{j + 3}:    session = connect(pool_{j})" for j in range(20))
    hits += '\nsrc/svc/pool.py:88:    log.critical("ERROR: pool exhausted, giving up")'
    msgs = _conversation([("grep -rn 'connect(' src/svc", hits)])
    res = comp.compact(json.dumps(msgs))
    out = emit.render(res, "messages")
    assert "Back-filled" not in out
    assert 'log.critical(\\"ERROR: pool exhausted, giving up\\")' in out


def _lint_out(errors: list[tuple[int, int, str]]) -> str:
    """A linter that prints each diagnostic's location on a line of its own above its message."""
    lines = ["> app@1.0.0 check", "> biome check src", ""]
    lines += [f"  checked src/module_{k:02d}.ts (no diagnostics, {k % 7 + 1} rules applied)" for k in range(60)]
    for ln, col, msg in errors:
        lines += [f"src/core/session.ts:{ln}:{col} parse " + "━" * 40, "", f"  × {msg}", "",
                  f"    {ln - 1} │   private queue: string[] = [];", f"  > {ln} │   resume?: boolean", ""]
    lines += [f"Checked 42 files in 18ms. Found {len(errors)} errors.", "check ━━━━━━━━━━", "",
              "  × Some errors were emitted while running checks."]
    return "\n".join(lines)


def test_a_rerun_keeps_each_failure_with_its_location(tmp_path):
    """A linter's failure whose location is a line of its own (above the message): the re-run's
    delta keeps the location with the failure, new and still failing."""
    comp = Compactor(store=str(tmp_path / "s.sqlite"))
    first = _lint_out([(205, 2, "expected a semicolon to end the class property, but found none")])
    second = _lint_out([(205, 2, "expected a semicolon to end the class property, but found none"),
                        (218, 19, "Expected an identifier, a string literal or a number literal")])
    msgs = _conversation([("npm run check", first), ("sed -i s/a/b/ src/core/session.ts", ""),
                          ("npm run check", second)])
    _, out = _outputs(comp, msgs)
    delta = out[2]
    assert delta.startswith("[re-run of s2 (same call)"), delta[:200]
    for ln, col in ((205, 2), (218, 19)):
        assert f"src/core/session.ts:{ln}:{col} parse " + "━" * 40 in delta, delta
    assert "× Expected an identifier, a string literal or a number literal" in delta
