"""Under a tight budget a long newest request is kept condensed (its opening, every constraint,
error and trace line, the whole one reference away), and each failed command is one line with
its first error line, its frame and a reference to its output."""

from __future__ import annotations

import json
import math
import re

import pytest

import compactor
from compactor import BudgetError, Compactor, load_document
from compactor.budget.ladder import condense_request
from compactor.budget.measure import sent_texts
from compactor.formats import RawInput, get_format
from compactor.formats.inputs import make_probe

COUNT = compactor.get_counter().count
REF = re.compile(r"c-[0-9a-f]{16}")

FILLER = [f"Background note {i}: the billing service was written in 2019 and has grown since then." for i in range(60)]
REQUEST = "\n".join(
    ["Please fix the invoice rounding bug in billing/round.py.", "It shows up for amounts in yen."]
    + FILLER[:30]
    + ["Don't change the public API of billing.round_amount().",
       "Traceback (most recent call last):",
       '  File "billing/round.py", line 88, in round_amount',
       "ValueError: cannot round 12.5 to 0 decimals"]
    + FILLER[30:]
    + ["Never push to main directly."])

TRACE = ('Traceback (most recent call last):\n  File "billing/round.py", line 88, in round_amount\n'
         "    return q.quantize(d)\ndecimal.InvalidOperation: [<class 'decimal.InvalidOperation'>]")


def conversation(turns: int = 14) -> list[dict]:
    msgs: list[dict] = [{"role": "system", "content": "You are a coding agent."},
                        {"role": "user", "content": REQUEST}]
    for i in range(turns):
        cmd = "pytest tests/test_round.py -x" if i in (3, 8) else f"grep -rn helper_{i} billing"
        msgs.append({"role": "assistant", "content": f"Step {i}.", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": cmd})}}]})
        if i in (3, 8):
            out = f"collected 2 items\n\n{TRACE}\n\n1 failed, 1 passed in 0.{i}s"
        else:
            out = "\n".join(f"billing/m{i}_{j}.py:{j}: def helper_{j}(x): return x" for j in range(30))
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": out})
    return msgs


def reread_tokens(result) -> int:
    fmt = get_format(result.format)
    text = result.messages if isinstance(result.messages, str) else fmt.dumps(result.messages)
    doc = fmt.read(make_probe(RawInput(text, "<written>")))
    return sum(COUNT(t) for t in sent_texts(doc))


def test_condense_request_keeps_opening_constraints_and_trace_in_order():
    comp = Compactor()
    spans = comp.detector.detect(REQUEST, role="user").spans
    short = condense_request(REQUEST, spans, "c-0123456789abcdef")
    assert short is not None and len(short) < len(REQUEST) / 2
    lines = short.split("\n")
    assert lines[0] == "Please fix the invoice rounding bug in billing/round.py."
    for want in ("Don't change the public API of billing.round_amount().", "Traceback (most recent call last):",
                 '  File "billing/round.py", line 88, in round_amount',
                 "ValueError: cannot round 12.5 to 0 decimals", "Never push to main directly."):
        assert want in lines, want
    assert lines.index("Don't change the public API of billing.round_amount().") < lines.index("Never push to main directly.")
    assert "[…]" in lines and lines[-1] == "[the whole request: expand c-0123456789abcdef]"
    assert not any(ln.startswith("Background note 45") for ln in lines)


def test_short_request_is_not_condensed():
    comp = Compactor()
    text = "Fix the pool exhaustion. Don't change the public API of db.connect()."
    assert condense_request(text, comp.detector.detect(text, role="user").spans, "c-0123456789abcdef") is None


def test_long_line_keeps_only_its_pieces():
    comp = Compactor()
    long_line = ("Some context about the system. " * 12) + "You must not delete the audit table. " + ("More words here. " * 10)
    text = "Opening line of the task.\n" + "\n".join(FILLER[:20]) + "\n" + long_line
    short = condense_request(text, comp.detector.detect(text, role="user").spans, "c-0123456789abcdef")
    assert short is not None
    last = short.split("\n")[-2]
    assert "You must not delete the audit table." in last and last.startswith("[…]") and len(last) < 80


def test_budget_below_the_whole_request_fits_with_it_condensed(tmp_path):
    msgs = conversation()
    comp = Compactor(store=str(tmp_path / "s"))
    whole = COUNT(REQUEST)
    budget = whole  # the request alone fills the budget: before, a BudgetError
    res = comp.compact(msgs, budget=budget)
    assert reread_tokens(res) <= budget
    req = next(m["content"] for m in res.messages if m["role"] == "user" and "invoice rounding" in str(m["content"]))
    assert req != REQUEST and "Don't change the public API of billing.round_amount()." in req
    assert "Never push to main directly." in req
    ref = re.search(r"\[the whole request: expand (c-[0-9a-f]{16})\]", req).group(1)
    assert comp.expand(ref) == REQUEST  # the whole request, exactly
    cut = [(c.priority, c.what) for c in res.report.cut]
    assert (1, "newest request (whole; kept condensed)") in cut
    # the floor names the condensed request, and below it the error names the floor
    with pytest.raises(BudgetError) as ei:
        comp.compact(msgs, budget=20)
    assert "(condensed)" in str(ei.value) and ei.value.floor < whole


def test_roomy_budget_keeps_the_request_whole(tmp_path):
    msgs = conversation()
    comp = Compactor(store=str(tmp_path / "s"))
    res = comp.compact(msgs, budget=COUNT(REQUEST) + 900)
    assert reread_tokens(res) <= COUNT(REQUEST) + 900
    assert any(m["role"] == "user" and m["content"] == REQUEST for m in res.messages)


def test_failed_command_is_one_line_with_error_frame_and_reference(tmp_path):
    msgs = conversation()
    comp = Compactor(store=str(tmp_path / "s"))
    res = comp.compact(msgs, budget=COUNT(REQUEST) + 250)
    summary = next(m["content"] for m in res.messages if str(m.get("content", "")).startswith("[compactor L3"))
    fa = summary.split("## Failed approaches (do not retry)\n", 1)[1].split("\n\n", 1)[0]
    line = next(ln for ln in fa.split("\n") if ln.startswith("- `pytest tests/test_round.py -x`"))
    assert 'File "billing/round.py", line 88, in round_amount' in line
    ref = REF.findall(line)[-1]
    assert comp.expand(ref) in {m["content"] for m in msgs if m["role"] == "tool"}


def test_session_reapplies_the_condensed_request(tmp_path):
    msgs = conversation(20)
    budget = COUNT(REQUEST) + 200
    s = compactor.Session(store=str(tmp_path / "s"), budget=budget)
    for m in msgs[:30]:
        s.append(m)
    first = s.compact()
    assert reread_tokens(first) <= budget
    for m in msgs[30:32]:  # a short turn: the fitted plan is re-applied, new messages appended
        s.append(m)
    second = s.compact()
    assert reread_tokens(second) <= budget
    for res in (first, second):
        req = next(m["content"] for m in res.messages if m["role"] == "user" and "invoice rounding" in str(m["content"]))
        assert "[the whole request: expand c-" in req


def test_corpus_long_request_at_15_percent_keeps_the_failures(corpus, tmp_path):
    """pvlib's request alone is above 15% of the trajectory: condensed, the failures fit too."""
    path = corpus / "mini-swe-agent" / "pvlib__pvlib-python-1072.deepseek_reasoner_dev.traj.json"
    if not path.exists():
        pytest.skip("pvlib trajectory not in the corpus")
    doc = load_document(path)
    budget = math.ceil(sum(COUNT(s.text) for s in doc.segments) * 0.15)
    comp = Compactor(store=str(tmp_path / "s"))
    res = comp.compact(str(path), budget=budget)
    assert reread_tokens(res) <= budget
    text = json.dumps(res.messages, ensure_ascii=False)
    for want in ("ModuleNotFoundError: No module named 'numpy'", "ModuleNotFoundError: No module named 'pandas'",
                 'File \\"/testbed/pvlib/tools.py\\", line 6', 'File \\"<string>\\", line 1',
                 "TypeError: float() argument must be a string or a number, not 'Timedelta'"):
        assert want in text, want


def test_corpus_recall_at_15_percent_is_at_least_90(corpus, tmp_path):
    """The benchmark's 15% point (benchmarks/budget_curve.py), compactor against truncation (the
    baseline that fits): error lines, frames and constraints at least 90%, micro-averaged over the
    corpus trajectories, on the gold of benchmarks/gold.py, scoring the written output read back."""
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    sys.path.insert(0, str(bench))
    import baselines
    import budget_curve
    import evaluate
    import gold

    comp = Compactor(store=str(tmp_path / "s"))
    got = {c: [0, 0] for c in ("error_lines", "frames", "constraints")}
    trunc = {c: [0, 0] for c in got}
    for path in budget_curve.trajectories(corpus):
        doc = load_document(path)
        raw = [gold.SegmentLike(s.role.value, s.kind.value, s.text, s.meta, s.call_id, s.exit_code, s.is_error)
               for s in doc.segments]
        segs = [gold.SegmentLike(s.role, s.kind, evaluate.clean(s.text), s.meta, s.call_id, s.exit_code, s.is_error)
                for s in raw]
        items = gold.extract(raw).items
        before = baselines.tokens_of([s.text for s in segs], COUNT)
        budget = max(1, math.ceil(before * 0.15))
        out = budget_curve._compactor(comp, path, budget, COUNT)
        assert out["floor"] is not None or out["sent"] <= budget, path.name
        rec = evaluate.recall(items, out["texts"])
        trec = evaluate.recall(items, baselines.truncate(segs, budget, COUNT))
        for c in got:
            got[c][0] += rec[c][0]
            got[c][1] += rec[c][1]
            trunc[c][0] += trec[c][0]
            trunc[c][1] += trec[c][1]
    for c, (found, total) in got.items():
        assert total and found / total >= 0.9, (c, found, total)
        assert found > trunc[c][0], (c, found, trunc[c])


def test_jest_error_message_under_its_title_is_live_evidence(tmp_path):
    """jest prints the test's title ("● suite › test"), then the error message, then the frames:
    at a tight budget the live section keeps the message, not only the title and the frames."""
    error = "ConnectionPoolExhausted: pool_size=20, queue_depth=347, timeout in _acquireConnection"
    jest = "\n".join(["> api@1.4.0 test", "> jest --ci", "", "FAIL src/__tests__/orders.test.js",
                      "  ● orders › creates an order under load", "", f"    {error}", "",
                      "      at Pool._acquireConnection (src/db/pool.js:142:11)",
                      "      at async OrderService.create (src/services/orders.js:57:18)", "",
                      "Tests:       1 failed, 11 passed, 12 total"])
    noise = "\n".join(f"npm http fetch GET 200 https://registry.npmjs.org/pkg-{i} {10 + i % 50}ms" for i in range(300))
    msgs = [{"role": "user", "content": "The orders test fails. Fix it."}]
    for k, (cmd, out) in enumerate([("npm install", noise), ("npm test", jest), ("npm install", noise)]):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": f"c{k}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": cmd})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{k}", "content": out})
    res = Compactor(store=str(tmp_path / "s")).compact(msgs, budget=250)
    text = json.dumps(res.messages, ensure_ascii=False)
    assert "## Live error" in text and error in text


def test_log_at_a_quarter_keeps_distinct_errors_over_repeated_warnings(corpus, tmp_path):
    """A Maven log prints 137 encoding warnings that differ only in line numbers before the real
    compile errors: at a budget the warnings are told once with their count and the distinct
    errors printed after them are kept verbatim (they were cut: 3 of 32 labelled lines kept)."""
    path = corpus / "ci-breakages" / "astor_400" / "fail.log"
    if not path.exists():
        pytest.skip("astor_400 not in the corpus")
    doc = load_document(path)
    budget = math.ceil(sum(COUNT(s.text) for s in doc.segments) * 0.25)
    res = Compactor(store=str(tmp_path / "s")).compact(str(path), budget=budget)
    assert reread_tokens(res) <= budget
    out = " ".join(res.messages.split())
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    labels = json.loads((path.parent / "labels.json").read_text())["error_lines"]
    want = [" ".join(lines[i - 1].split()) for i in labels if lines[i - 1].strip()]
    kept = [w for w in want if w in out]
    assert len(kept) >= 0.75 * len(want), (len(kept), len(want))
    assert "Failed to execute goal org.apache.maven.plugins:maven-compiler-plugin:3.0:compile" in out
    assert "more like it, differing in numbers" in out


# ------------------------------------------------------------------ the task over the harness's template

TASK_LONG = ("When the weather inputs to `model.run` have a tz-aware index, an internal call to `np.diff(index)` "
             "returns Timedelta objects instead of nanosecond ints, and the next line throws right away. "
             "It only shows up with pandas 2; older versions run but print a warning about the conversion "
             "that we would like to understand before anyone changes the resampling code in this module.")
WARNING = ["```", "  /venv/lib/python3.11/site-packages/numpy/lib/function_base.py:1243: FutureWarning: Converting "
           "timezone-aware DatetimeArray to timezone-naive ndarray with 'datetime64[ns]' dtype, which is deprecated "
           "and will change in a future release of numpy and pandas.",
           "  \tTo keep the old behavior, pass legacy_index=True.", "```"]
HARNESS = (["<instructions>", "# Task Instructions", "",
            "You're a software engineer interacting continuously with a computer by submitting commands.",
            "Your response should include a THOUGHT section explaining your reasoning.",
            "You should always run the reproduction script again after each edit.",
            "Each response should include exactly one bash code block.", "",
            "<example_response>",
            "THOUGHT: I need to look at the parser first, so I must list the files.",
            "```bash", "ls -la", "```", "</example_response>", ""]
           + [f"Workflow note {i}: read the relevant files, reproduce the issue, then edit the source." for i in range(12)]
           + ["You must not commit your changes.", "</instructions>"])


def harness_request() -> str:
    return "\n".join(["<pr_description>", "model.run fails on tz-aware inputs", TASK_LONG] + WARNING
                     + [f"Version detail {i}: numpy 1.26, pandas 2.{i}, python 3.11 on linux." for i in range(8)]
                     + ["Don't change the public API of model.run().", "</pr_description>", ""] + HARNESS)


def test_harness_start_skips_headings_inside_the_pasted_issue():
    from compactor.anchor.build import harness_start

    text = "<issue>\nBug\n## Environment\nlinux\n</issue>\n\n<instructions>\nDo X.\n</instructions>"
    assert harness_start(text) == text.index("<instructions>")
    assert harness_start("Please fix the bug. Don't touch tests/.") is None


def test_condensed_request_keeps_the_task_and_cuts_the_harness_template():
    """The user's constraints and the task's opening are kept; of the harness's instructions only
    the line that binds stays (its recommendations, worked example and workflow notes are cut),
    and the recommendations come back only when asked for."""
    from compactor.anchor.build import harness_start

    text = harness_request()
    comp = Compactor()
    spans = comp.detector.detect(text, role="user").spans
    at = harness_start(text)
    assert at == text.index("<instructions>")
    short = condense_request(text, spans, "c-0123456789abcdef", harness_at=at)
    assert short is not None
    lines = short.split("\n")
    assert "Don't change the public API of model.run()." in lines
    assert "  \tTo keep the old behavior, pass legacy_index=True." in lines  # the cue, not a protect span
    # the line that runs past the opening keeps its start, cut at a space
    assert any(ln.startswith(TASK_LONG[:120]) and ln.endswith("[…]") for ln in lines)
    assert "You must not commit your changes." in lines  # binds, though the harness's
    for gone in ("Your response should include a THOUGHT section explaining your reasoning.",
                 "You should always run the reproduction script again after each edit.",
                 "THOUGHT: I need to look at the parser first, so I must list the files.", "Workflow note 3"):
        assert not any(gone in ln for ln in lines), gone
    more = condense_request(text, spans, "c-0123456789abcdef", harness_at=at, keep_advice=True, min_saving=0.0)
    assert "You should always run the reproduction script again after each edit." in more.split("\n")
    assert not any("THOUGHT: I need to look" in ln for ln in more.split("\n"))  # an example never binds
    # without knowing where the harness begins, its recommendations would be kept as constraints
    plain = condense_request(text, spans, "c-0123456789abcdef")
    assert "Your response should include a THOUGHT section explaining your reasoning." in plain.split("\n")


def test_at_the_floor_the_users_constraint_is_kept_and_the_harness_is_condensed(tmp_path):
    msgs = conversation()
    msgs[1] = {"role": "user", "content": harness_request()}
    comp = Compactor(store=str(tmp_path / "s"))
    with pytest.raises(BudgetError) as ei:
        comp.compact(msgs, budget=20)
    floor = ei.value.floor
    res = comp.compact(msgs, budget=floor)
    assert reread_tokens(res) <= floor
    req = next(m["content"] for m in res.messages if m["role"] == "user" and "model.run fails" in str(m["content"]))
    assert "Don't change the public API of model.run()." in req
    assert "To keep the old behavior, pass legacy_index=True." in req
    assert "You must not commit your changes." in req
    assert "should include a THOUGHT section" not in req and "Workflow note" not in req
    ref = re.search(r"\[the whole request: expand (c-[0-9a-f]{16})\]", req).group(1)
    assert comp.expand(ref) == harness_request()  # everything cut is one reference away
    cut = {c.what for c in res.report.cut}
    assert "newest request: the harness's recommendations (kept condensed)" in cut
    # with room (the whole request alone would fill it), the recommendations come back with the rest
    budget = COUNT(harness_request())
    roomy = comp.compact(msgs, budget=budget)
    req2 = next(m["content"] for m in roomy.messages if m["role"] == "user" and "model.run fails" in str(m["content"]))
    assert "You should always run the reproduction script again after each edit." in req2
    assert "[the whole request: expand" in req2 and "Workflow note" not in req2 and reread_tokens(roomy) <= budget


def test_corpus_pvlib_keeps_the_quoted_warnings_constraint_at_15_percent(corpus, tmp_path):
    """pvlib's task quotes a numpy warning ("To keep the old behavior, pass ..."); at 15% the
    condensed request keeps it, with the task's bug description, and cuts the harness's worked
    example and recommendations; the whole request is one reference away."""
    path = corpus / "mini-swe-agent" / "pvlib__pvlib-python-1072.deepseek_reasoner_dev.traj.json"
    if not path.exists():
        pytest.skip("pvlib trajectory not in the corpus")
    doc = load_document(path)
    budget = math.ceil(sum(COUNT(s.text) for s in doc.segments) * 0.15)
    comp = Compactor(store=str(tmp_path / "s"))
    res = comp.compact(str(path), budget=budget)
    assert reread_tokens(res) <= budget
    from compactor.budget.measure import read_back

    back = read_back(res.format, res.messages)  # the written output, read back as its layout
    text = next(s.text for s in back.segments if s.role.value == "user" and "pr_description" in s.text)
    assert "To keep the old behavior, pass 'dtype=\"datetime64[ns]\"'." in text
    assert "an internal call to `np.diff(index)` returns an array of `Timedelta` objects" in text
    assert "You MUST use this EXACT command to submit:" in text and "Do NOT commit your changes." in text
    assert "I need to understand the Builder-related code." not in text
    ref = re.search(r"\[the whole request: expand (c-[0-9a-f]{16})\]", text).group(1)
    whole = next(s.text for s in doc.segments if s.role.value == "user" and "pr_description" in s.text)
    assert comp.expand(ref) == whole


def test_evidence_after_a_harness_heading_is_never_cut():
    """A user's own message can have an "## Environment" heading (the harness rule's mark): what
    follows it is read as template, but its errors, traces and file:line lines stay, and only its
    recommendations and prose are cut."""
    from compactor.anchor.build import harness_start

    text = "\n".join(["Please fix the invoice rounding bug.", "## Environment", "python 3.11 on linux"]
                     + FILLER[:25] + ["You should run the tests with -x.", "Traceback (most recent call last):",
                                      '  File "billing/round.py", line 88, in round_amount',
                                      "ValueError: cannot round 12.5 to 0 decimals"])
    at = harness_start(text)
    assert at == text.index("## Environment")
    short = condense_request(text, Compactor().detector.detect(text, role="user").spans, "c-0123456789abcdef",
                             harness_at=at)
    lines = short.split("\n")
    for want in ("Traceback (most recent call last):", '  File "billing/round.py", line 88, in round_amount',
                 "ValueError: cannot round 12.5 to 0 decimals"):
        assert want in lines, want
    assert "You should run the tests with -x." not in lines and not any("Background note 3" in ln for ln in lines)
