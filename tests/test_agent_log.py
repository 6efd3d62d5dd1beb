"""The terminal agent-log reader (mini-swe-agent console output / agent.log): detection, byte
round trip, observations paired with their actions, harness feedback marked, the human's
request never collapsed, budgets met as written."""

from __future__ import annotations

import ast
import json
import re

import pytest

import compactor
from compactor import Compactor, InputError, load_document
from compactor.budget.measure import read_back, sent_texts
from compactor.formats import Edits, get_format

COUNT = compactor.get_counter().count
RULE = "─" * 60 + "\n"

SAMPLE = f"""System:
You are a helpful assistant that can interact with a computer.

User:
Please solve this issue: the CSV export drops the last row.
Don't modify the tests.

{RULE}mini-swe-agent (step 1, $0.01):
THOUGHT: Let me look at the exporter first.

```bash
grep -n "def export" src/export.py
```

User:
<returncode>0</returncode>
<output>
12:def export(rows):
</output>

{RULE}mini-swe-agent (step 2, $0.02):
THOUGHT: Run the tests to see the failure.

```bash
python -m pytest tests/test_export.py -x
```

User:
<returncode>1</returncode>
<output>
Traceback (most recent call last):
  File "src/export.py", line 14, in export
    for i in range(len(rows) - 1):
IndexError: list index out of range
</output>

{RULE}mini-swe-agent (step 3, $0.03):
THOUGHT: I forgot the action.

User:
Please always provide EXACTLY ONE action in triple backticks, found 0 actions.
"""


def render_log(messages: list[dict]) -> str:
    """A mini-swe-agent trajectory's messages as the agent prints them (its documented console
    layout: a role line or a 'mini-swe-agent (step N, $X):' line, then the text; actions in
    ```bash fences)."""
    out: list[str] = []
    step = 0
    for m in messages:
        content = m.get("content") or ""
        if not isinstance(content, str):
            content = json.dumps(content)
        if m["role"] == "system":
            out.append(f"System:\n{content}\n")
        elif m["role"] in ("user", "tool"):
            out.append(f"User:\n{content}\n")
        elif m["role"] == "assistant":
            step += 1
            cmds = []
            extra = m.get("extra")
            if isinstance(extra, str):
                try:
                    extra = ast.literal_eval(extra)
                except (ValueError, SyntaxError):
                    extra = None
            if isinstance(extra, dict):
                cmds = [a["command"] for a in extra.get("actions", []) if isinstance(a, dict) and "command" in a]
            body = content + "".join(f"\n\n```bash\n{c}\n```" for c in cmds)
            out.append(RULE + f"mini-swe-agent (step {step}, $0.{step:02d}):\n{body}\n")
    return "\n".join(out)


def test_sample_is_detected_and_segmented():
    doc = load_document(SAMPLE)
    assert doc.format == "agent-log"
    kinds = [(s.role.value, s.kind.value) for s in doc.segments]
    assert kinds == [("system", "message"), ("user", "message"),
                     ("assistant", "message"), ("assistant", "tool_call"), ("tool", "tool_result"),
                     ("assistant", "message"), ("assistant", "tool_call"), ("tool", "tool_result"),
                     ("assistant", "message"), ("user", "message")]
    calls = [s for s in doc.segments if s.kind.value == "tool_call"]
    results = [s for s in doc.segments if s.kind.value == "tool_result"]
    assert [c.text for c in calls] == ['grep -n "def export" src/export.py', "python -m pytest tests/test_export.py -x"]
    assert [r.call_id for r in results] == [c.call_id for c in calls]
    assert [r.exit_code for r in results] == [0, 1]
    assert doc.segments[1].text == "Please solve this issue: the CSV export drops the last row.\nDon't modify the tests."
    assert not doc.segments[1].meta and doc.segments[-1].meta  # the harness's format feedback is not the human
    assert [s.step for s in doc.segments] == [0, 1, 1, 1, 1, 2, 2, 2, 3, 3]


def test_round_trip_is_byte_identical():
    doc = load_document(SAMPLE)
    assert get_format("agent-log").write(doc) == SAMPLE
    assert get_format("agent-log").write(doc, Edits()) == SAMPLE


def test_edits_rewrite_only_their_ranges_and_read_back():
    doc = load_document(SAMPLE)
    fmt = get_format("agent-log")
    first_result = next(s for s in doc.segments if s.kind.value == "tool_result")
    out = fmt.write(doc, Edits(replace={first_result.id: "[output collapsed · ref c-0123456789abcdef]"}))
    back = read_back("agent-log", out)
    assert [(s.role, s.kind) for s in back.segments] == [(s.role, s.kind) for s in doc.segments]
    assert next(s for s in back.segments if s.kind.value == "tool_result").text.startswith("[output collapsed")
    # a replacement that reads as a header line does not open a message
    out = fmt.write(doc, Edits(replace={doc.segments[2].id: "User:\nsneaky"}))
    assert len(read_back("agent-log", out).segments) == len(doc.segments)
    # dropping a whole turn and adding a summary
    turn = {s.id for s in doc.segments if s.step == 1 and s.role.value != "user"}
    out = fmt.write(doc, Edits(drop=turn, summary="[compactor: summary]"))
    back = read_back("agent-log", out)
    assert "grep -n" not in out and "[compactor: summary]" in out
    assert any(s.role.value == "user" and s.text == "[compactor: summary]" for s in back.segments)
    assert sum(1 for s in back.segments if s.kind.value == "tool_result") == 1


def test_plain_logs_and_aider_are_not_agent_logs():
    assert load_document("User: alice logged in\nINFO ok\nAssistant: none\n").format == "text"
    aider = "# aider chat started at 2025-01-01 10:00:00\n\n#### fix it\n\nOk.\n"
    assert load_document(aider).format == "aider"
    with pytest.raises(InputError):
        load_document("just a log line\n", format="agent-log")


def test_compact_keeps_the_request_and_collapses_tool_output(tmp_path):
    listing = "\n".join(f"src/mod_{i}.py" for i in range(400))
    log = SAMPLE.replace("12:def export(rows):", listing)
    steps = "".join(f"{RULE}mini-swe-agent (step {i}, $0.1):\nTHOUGHT: look again.\n\n```bash\nfind src -name '*.py'\n```\n\n"
                    f"User:\n<returncode>0</returncode>\n<output>\n{listing}\n</output>\n\n" for i in range(4, 20))
    log = log + "\n" + steps
    comp = Compactor(store=str(tmp_path / "s"))
    res = comp.compact(log)
    assert res.format == "agent-log"
    back = read_back("agent-log", res.messages)
    texts = [s.text for s in back.segments]
    assert "Please solve this issue: the CSV export drops the last row.\nDon't modify the tests." in texts
    assert "IndexError: list index out of range" in res.messages
    assert res.report.tokens_after < res.report.tokens_before / 2
    # a budget is met as written
    before = sum(COUNT(t) for t in sent_texts(load_document(log)))
    budget = before // 10
    res = comp.compact(log, budget=budget)
    assert sum(COUNT(t) for t in sent_texts(read_back("agent-log", res.messages))) <= budget
    for ref in set(re.findall(r"c-[0-9a-f]{16}", res.messages)):
        assert comp.expand(ref)


def test_real_mini_swe_agent_run_as_its_console_log(corpus):
    """The corpus' mini-swe-agent trajectories, printed the way the agent prints them, read back
    as the same conversation: the task, every action and every observation with its exit code."""
    for path in sorted((corpus / "mini-swe-agent").glob("*.traj.json")):
        msgs = json.loads(path.read_text(encoding="utf-8"))["messages"]
        log = render_log(msgs)
        doc = load_document(log)
        assert doc.format == "agent-log", path.name
        assert get_format("agent-log").write(doc) == log
        users = [s for s in doc.segments if s.role.value == "user" and not s.meta]
        assert users and users[0].text == msgs[1]["content"].rstrip("\n")
        obs = [s for s in doc.segments if s.kind.value == "tool_result"]
        tool_msgs = [m for m in msgs if m["role"] == "tool"]
        assert len(obs) == len(tool_msgs), path.name
        for seg, m in zip(obs, tool_msgs):
            code = re.search(r"<returncode>(-?\d+)</returncode>", m["content"])
            assert seg.exit_code == (int(code.group(1)) if code else None)
            assert seg.call_id is not None
        res = Compactor().compact(log)
        assert res.report.tokens_after < res.report.tokens_before
        assert msgs[1]["content"].rstrip("\n") in res.messages  # the human's request is never collapsed
