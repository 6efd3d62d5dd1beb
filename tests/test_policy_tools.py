"""Policy tools and their CLI: check, audit (seed-000 fidelity), memory export, budget errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import compactor
from compactor.cli import main
from compactor.models import Anchor, Decision, ExcludedApproach, Fact
from compactor.tools.fidelity import audit_anchor, audit_paths, format_table
from compactor.tools.memory import MemoryEntries, export_memory, extract_memory, merge_markdown

from test_policy import REQUEST_Y, session

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo" / "debug-session.openai.json"
TRAJ_DIRS = ("aider", "claude-code", "codex-rollout", "mini-swe-agent", "openhands-v0", "openhands-v1", "swe-agent")


@pytest.fixture(autouse=True)
def _store(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTOR_STORE", str(tmp_path / "store.sqlite"))


def run(argv, capsys):
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def session_file(tmp_path) -> Path:
    p = tmp_path / "session.json"
    p.write_text(json.dumps(session(30)), encoding="utf-8")
    return p


# ============================================================================ check


def test_check_cli_text_and_json(session_file, capsys):
    rc, out, err = run(["check", str(session_file), "--context-window", "20000"], capsys)
    assert rc == 0, err
    assert out.startswith("compact: yes — start at level")
    assert "- turns:" in out
    rc, out, _ = run(["check", str(session_file), "--context-window", "20000", "--json"], capsys)
    d = json.loads(out)
    assert d["compact"] is True and {r["code"] for r in d["reasons"]} >= {"turns"}
    assert all({"code", "message", "value", "threshold"} <= set(r) for r in d["reasons"])
    rc, out, _ = run(["check", str(DEMO)], capsys)
    assert rc == 0 and out.startswith("compact: no")
    rc, _, _ = run(["check", str(session_file), "--exit-code"], capsys)
    assert rc == 3


def test_check_cli_bad_input(tmp_path, capsys):
    rc, out, err = run(["check", str(tmp_path / "missing.json")], capsys)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1


# ============================================================================ budget through the CLI


def test_compact_budget_too_small_exit_1_one_line(session_file, capsys):
    rc, out, err = run(["compact", str(session_file), "--budget", "50"], capsys)
    assert rc == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "budget of 50 tokens cannot be met" in lines[0]
    assert "raise the budget to at least" in lines[0]


def test_compact_budget_emits(session_file, capsys):
    rc, out, err = run(["compact", str(session_file), "--budget", "3000", "--emit", "report"], capsys)
    assert rc == 0, err
    rep = json.loads(out)
    assert rep["level"] >= 2 and rep["tokens_after"] <= 3000 and rep["self_check"] is not None
    rc, out, _ = run(["compact", str(session_file), "--level", "3", "--emit", "handoff"], capsys)
    assert rc == 0 and out.startswith("# Hand-off") and REQUEST_Y in out
    rc, out, _ = run(["compact", str(session_file), "--level", "2", "--emit", "messages"], capsys)
    msgs = json.loads(out)
    assert msgs[1]["content"].startswith("[compactor: level 2")


# ============================================================================ audit


def test_audit_flags_unsupported_items():
    doc = compactor.load_document(str(DEMO))
    good = Fact(id="fa-1", source_step="s3", text="ConnectionPoolExhausted: pool_size=20, queue_depth=347")
    wrong_number = Fact(id="fa-2", source_step="s3", text="ConnectionPoolExhausted: pool_size=20, queue_depth=999")
    wrong_step = Fact(id="fa-3", source_step="s2", text="ConnectionPoolExhausted: pool_size=20, queue_depth=347")
    missing_step = Fact(id="fa-4", source_step="s99", text="anything")
    invented = Fact(id="fa-5", source_step="s3", text="The database migration completed successfully on staging")
    laundered = Decision(id="de-1", source_step="s5", decision="We decided to rewrite the service in Rust")
    real = Decision(id="de-2", source_step="s5", decision="release connections in a finally block")
    dead_ok = ExcludedApproach(id="ex-1", source_step="s4", approach="raising pool_size from 20 to 50 in config/db.json")
    dead_stale = ExcludedApproach(id="ex-2", source_step="s2", approach="installing dependencies with npm install")
    a = Anchor(facts_learned=[good, wrong_number, wrong_step, missing_step, invented],
               decisions_made=[laundered, real], dead_ends=[dead_ok, dead_stale])
    fa = audit_anchor(a, doc.segments)
    assert [i.ok for i in fa.items] == [True, False, False, False, False, False, True, True, False]
    assert fa.unsupported == 4 and fa.untraced_decisions == 1 and fa.untraced_dead_ends == 1
    assert fa.error_rate == pytest.approx(6 / 9)
    why = {i.text + i.source_step: i.why for i in fa.items}
    assert "999" in why[wrong_number.text + "s3"]
    assert "does not exist" in why[missing_step.text + "s99"]


def test_audit_corpus_error_rate_below_5_percent(corpus, capsys):
    dirs = [str(corpus / d) for d in TRAJ_DIRS if (corpus / d).is_dir()]
    if not dirs:
        pytest.skip("no trajectories in the corpus")
    rep = audit_paths(dirs + [str(ROOT / "fixtures" / "trajectories"), str(DEMO)])
    table = format_table(rep)
    with capsys.disabled():
        print(f"\naudit: {len(rep.audited)} files, {rep.total} items, {rep.errors} errors, "
              f"error rate {rep.error_rate:.2%}")
    assert len(rep.audited) >= 10
    assert rep.total > 0
    assert rep.error_rate < 0.05, table
    assert "overall" in table and "error rate" in table


def test_audit_cli(capsys, tmp_path):
    rc, out, err = run(["audit", str(DEMO), str(ROOT / "fixtures" / "trajectories")], capsys)
    assert rc == 0, err
    assert out.splitlines()[0].split()[:3] == ["file", "format", "facts"]
    assert "overall (" in out and out.rstrip().splitlines()[-1].startswith("error rate ")
    rc, out, _ = run(["audit", str(DEMO), "--json"], capsys)
    d = json.loads(out)
    assert d["overall"]["files"] == 1 and "error_rate" in d["overall"]
    rc, out, err = run(["audit", str(tmp_path / "nope")], capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1


# ============================================================================ memory


EXISTING = """# AGENTS.md

Build with `make`. Keep this paragraph.

## compactor memory

### Decisions
- Hand-written decision — keep me

Free text written by a human, also kept.

## Testing

Run `pytest -q`.
"""


def test_memory_entries_from_trajectory():
    m = extract_memory(str(DEMO))
    assert any("finally block" in d for d in m.decisions)
    assert any("pool_size" in d for d in m.dead_ends)
    assert any("TypeScript" in c for c in m.constraints)


def test_memory_export_markdown_merge_idempotent(tmp_path):
    p = tmp_path / "AGENTS.md"
    p.write_text(EXISTING, encoding="utf-8")
    up = export_memory(str(DEMO), p)
    assert up.changed and up.added["decisions"] == 1 and up.added["dead_ends"] >= 1
    text = p.read_text(encoding="utf-8")
    # other content untouched, in place
    assert text.startswith("# AGENTS.md\n\nBuild with `make`. Keep this paragraph.\n\n## compactor memory\n")
    assert text.endswith("## Testing\n\nRun `pytest -q`.\n")
    assert "- Hand-written decision — keep me" in text and "Free text written by a human, also kept." in text
    sec = text.split("## compactor memory")[1].split("## Testing")[0]
    assert "### Dead ends" in sec and "### User constraints" in sec
    assert sec.index("Hand-written decision") < sec.index("finally block") < sec.index("Free text")
    # idempotent: nothing changes the second time, byte for byte
    up2 = export_memory(str(DEMO), p)
    assert not up2.changed and up2.total_added == 0
    assert p.read_text(encoding="utf-8") == text
    # a new file gets only the section
    q = tmp_path / "CLAUDE.md"
    export_memory(str(DEMO), q)
    assert q.read_text(encoding="utf-8").startswith("## compactor memory\n")


def test_memory_merge_dedupes_case_and_spacing():
    m = MemoryEntries(decisions=["Use  tomllib — stdlib"], constraints=["Don't use TypeScript."])
    text, added = merge_markdown("", m)
    again, added2 = merge_markdown(text, MemoryEntries(decisions=["use tomllib — because stdlib"],
                                                       constraints=["don't use typescript"]))
    assert again == text and sum(added2.values()) == 0 and sum(added.values()) == 2


def test_memory_export_json(tmp_path):
    p = tmp_path / "memory.json"
    p.write_text(json.dumps({"owner": "team-a", "compactor_memory": {"decisions": ["Old one"]}}), encoding="utf-8")
    up = export_memory(str(DEMO), p)
    d = json.loads(p.read_text(encoding="utf-8"))
    assert d["owner"] == "team-a" and d["compactor_memory"]["decisions"][0] == "Old one"
    assert len(d["compactor_memory"]["decisions"]) == 2 and up.format == "json"
    before = p.read_text(encoding="utf-8")
    assert not export_memory(str(DEMO), p).changed and p.read_text(encoding="utf-8") == before


def test_memory_cli(tmp_path, capsys):
    p = tmp_path / "AGENTS.md"
    rc, out, err = run(["memory", "export", str(DEMO), "--to", str(p)], capsys)
    assert rc == 0, err and "added" in out
    rc, out, _ = run(["memory", "export", str(DEMO), "--to", str(p)], capsys)
    assert rc == 0 and "up to date" in out
    rc, out, _ = run(["memory", "export", str(DEMO), "--to", str(tmp_path / "m.json"), "--format", "json"], capsys)
    assert rc == 0 and json.loads((tmp_path / "m.json").read_text())["compactor_memory"]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    rc, out, err = run(["memory", "export", str(DEMO), "--to", str(bad)], capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1


# ============================================================================ determinism across processes


_RUNNER = """
import contextlib, io, json, sys
from compactor.cli import main
cmds, mem = json.loads(sys.argv[1]), sys.argv[2]
outs = []
for c in cmds:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(c)
    outs.append([rc, buf.getvalue()])
with contextlib.redirect_stdout(io.StringIO()):
    main(["memory", "export", cmds[0][1], "--to", mem])
outs.append(open(mem, encoding="utf-8").read())
sys.stdout.write(json.dumps(outs))
"""


def test_outputs_identical_across_hash_seeds(session_file, tmp_path):
    """Every policy output is byte-identical under different PYTHONHASHSEED values."""
    cmds = [
        ["compact", str(session_file), "--budget", "3000"],
        ["compact", str(session_file), "--level", "3", "--emit", "handoff"],
        ["compact", str(session_file), "--level", "2", "--emit", "markdown", "--lang", "zh"],
        ["check", str(session_file), "--json", "--context-window", "20000"],
        ["audit", str(DEMO), str(session_file), "--json"],
    ]
    procs = []
    for seed in ("1", "4242"):  # both at once: half the wall time
        env = dict(os.environ, PYTHONHASHSEED=seed, COMPACTOR_STORE=str(tmp_path / f"store{seed}"))
        procs.append(subprocess.Popen([sys.executable, "-c", _RUNNER, json.dumps(cmds), str(tmp_path / f"mem{seed}.md")],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT))
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err.decode()
        res = json.loads(out)
        assert all(rc == 0 for rc, _ in res[:-1]), res
        outs.append(res)
    assert outs[0] == outs[1]
