"""The blind-gold scorer (benchmarks/l1_gold_score.py) on a small synthetic gold folder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "l1_gold_score.py"

pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="benchmarks/ not present")

TRACE = "\n".join([
    "Traceback (most recent call last):",
    '  File "/app/src/billing/invoice.py", line 88, in total',
    "    return sum(line.cents for line in self.lines) / self.rate",
    "ZeroDivisionError: division by zero",
])


def _run_file(path: Path) -> None:
    """An OpenAI chat run: a user constraint, a long benign install log, a failing test run."""
    install = "\n".join(f"Collecting package{i}==1.{i}.0\n  Downloading package{i}-1.{i}.0-py3-none-any.whl (12 kB)"
                        for i in range(60)) + "\nSuccessfully installed " + " ".join(f"package{i}-1.{i}.0" for i in range(60))
    msgs = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the invoice total. Do not change the public API of billing.invoice."},
    ]
    outputs = [("pip install -r requirements.txt", install), ("ls src/billing", "__init__.py\ninvoice.py\nledger.py"),
               ("git status --short", " M src/billing/invoice.py"), ("python -m pytest tests/test_invoice.py", TRACE)]
    for k, (cmd, out) in enumerate(outputs):
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{k}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": cmd})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"call_{k}", "content": out})
    msgs.append({"role": "assistant", "content": "The rate is zero when no currency is set."})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(msgs, indent=1), encoding="utf-8")


def _gold(dirpath: Path, name: str, body) -> None:
    dirpath.mkdir(parents=True, exist_ok=True)
    (dirpath / name).write_text(body if isinstance(body, str) else json.dumps(body), encoding="utf-8")


def _score(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=str(ROOT), capture_output=True, text=True,
                          timeout=240)


def test_scores_tokens_and_recall(tmp_path):
    root = tmp_path / "shared"
    _run_file(root / "runs" / "invoice.openai.json")
    golds = tmp_path / "gold"
    _gold(golds, "invoice.json", {
        "run": "runs/invoice.openai.json", "layout": "openai-chat",
        # whitespace differs from the run's: the comparison is normalised
        "error_lines": ["ZeroDivisionError:   division by zero", "ZeroDivisionError: division by zero"],
        "frames": ['File "/app/src/billing/invoice.py", line 88, in total',
                   'File "/app/src/billing/ledger.py", line 12, in post'],  # not in the run: a miss
        "constraints": ["Do not change the public API of billing.invoice."],
    })
    out = tmp_path / "score.json"
    p = _score(["--gold", str(golds), "--root", str(root), "--json", str(out)])
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(out.read_text(encoding="utf-8"))
    (row,) = res["runs"]
    assert row["run"] == "runs/invoice.openai.json" and row["layout"] == "openai-chat"
    assert row["format"] == row["L1_format"] == row["fit_format"]
    # the install log is masked by nothing (only 4 outputs) and collapsed by Level 1 (it is older
    # than the 3 recent outputs)
    assert row["raw"] > 0 and row["mask"] == row["raw"]
    assert 0 < row["L1"] < row["raw"] * 0.5, row
    assert row["fit"] <= row["mask"]
    # duplicates after normalisation count once
    assert row["L1_recall"] == {"error_lines": [1, 1], "frames": [1, 2], "constraints": [1, 1]}
    assert row["raw_recall"]["frames"] == [1, 2]
    assert row["L1_missed"] == {"frames": ['File "/app/src/billing/ledger.py", line 12, in post']}
    assert "missed by L1 in runs/invoice.openai.json [frames]" in p.stderr
    tot = res["summary"]
    assert list(tot) == ["openai-chat", "all"]
    assert tot["all"]["runs"] == 1 and tot["all"]["L1"] == row["L1"]
    assert "| openai-chat | 1 |" in p.stdout and "50.0% (1/2)" in p.stdout


def test_escaped_form_counts(tmp_path):
    """An item inside tool-call arguments reads with its quotes escaped: it still counts."""
    from importlib import util

    spec = util.spec_from_file_location("l1_gold_score", SCRIPT)
    mod = util.module_from_spec(spec)
    sys.path.insert(0, str(SCRIPT.parent))
    spec.loader.exec_module(mod)
    counts, missed = mod.recall({"frames": ['File "a.py", line 3'], "constraints": ["keep   it"]},
                                ['{"cmd": "grep \'File \\"a.py\\", line 3\' log"}', "please keep\nit"])
    assert counts == {"frames": [1, 1], "constraints": [1, 1]} and not missed
    counts, missed = mod.recall({"frames": ['File "b.py", line 3']}, ['File "a.py", line 3'])
    assert counts == {"frames": [0, 1]} and missed == {"frames": ['File "b.py", line 3']}


@pytest.mark.parametrize("body, needle", [
    ("[1, 2]", "expected a JSON object"),
    ('{"run": "runs/nope.json", "layout": "x"}', "not found"),
    ('{"run": "runs/invoice.openai.json"}', "'layout'"),
    ('{"run": "runs/invoice.openai.json", "layout": "x", "frames": "a"}', "'frames'"),
    ('{"run": ', "not JSON"),
])
def test_bad_gold_is_one_line_exit_2(tmp_path, body, needle):
    root = tmp_path / "shared"
    _run_file(root / "runs" / "invoice.openai.json")
    golds = tmp_path / "gold"
    _gold(golds, "a-good.json", {"run": "runs/invoice.openai.json", "layout": "openai-chat"})
    _gold(golds, "b-bad.json", body)
    p = _score(["--gold", str(golds), "--root", str(root)])
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "b-bad.json" in lines[0] and needle in lines[0], p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""
