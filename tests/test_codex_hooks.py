"""Codex CLI hooks on payloads Codex 0.171.0 really sent (tests/fixtures/codex/): PreCompact
stores the anchor of the rollout and prints nothing (Codex reads no instructions from it),
SessionStart after compaction re-injects it."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import compactor
from compactor.integrations import claude_code as hooks

FIX = Path(__file__).resolve().parent / "fixtures" / "codex"
EXE = str(Path(sys.executable).with_name("compactor"))


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTOR_STORE", str(tmp_path / "store.sqlite"))
    monkeypatch.setenv("COMPACTOR_HOOK_DIR", str(tmp_path / "anchors"))


def payload(name: str, **changes) -> dict:
    d = json.loads((FIX / f"{name}.json").read_text().replace("{FIXTURES}", str(FIX)))
    d.update(changes)
    return d


def run(event: str, data: dict) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    assert hooks.run_hook(event, io.StringIO(json.dumps(data)), out, err, host="codex") == 0
    return out.getvalue(), err.getvalue()


def test_codex_0_171_rollouts_are_read():
    types = {json.loads(line)["type"] for line in (FIX / "rollout.jsonl").read_text().splitlines()}
    assert {"world_state", "token_usage_record", "compacted"} <= types  # record types new in 0.171
    result = compactor.compact(str(FIX / "rollout.jsonl"), level=1)
    assert result.format == "codex" and result.report.segments > 3


def test_pre_compact_stores_the_anchor_and_prints_nothing(tmp_path):
    d = payload("pre_compact")
    assert d["hook_event_name"] == "PreCompact" and d["trigger"] == "auto"
    out, err = run("pre-compact", d)
    assert out == "" and err == ""
    md = (tmp_path / "anchors" / "codex" / f"{d['session_id']}.anchor.md").read_text()
    assert "No module named 'nosuchmodule_cx'" in md  # evidence and the failed attempt
    assert "never touch the vendor/ directory" in md  # the constraint
    assert "Restored by compactor" not in md  # the anchor re-injected earlier is not read back into it


def test_session_start_after_compaction_re_injects_it():
    run("pre-compact", payload("pre_compact"))
    s = payload("session_start_compact")
    out, _ = run("session-start", s)
    hso = json.loads(out)["hookSpecificOutput"]
    assert hso["hookEventName"] == "SessionStart"
    assert "nosuchmodule_cx" in hso["additionalContext"] and len(hso["additionalContext"]) < hooks.CONTEXT_LIMIT
    for other in ("session_start_startup", "session_start_resume"):
        assert run("session-start", payload(other)) == ("", "")


def test_codex_has_no_output_rewriting_hook():
    p = subprocess.run([EXE, "hook", "codex", "post-tool-use"], input="{}", capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "cannot replace" in p.stderr and p.stderr.count("\n") == 1


def test_codex_snippet_matches_the_docs():
    readme = (Path(__file__).resolve().parents[1] / "docs" / "codex.md").read_text()
    block = re.search(r"<!-- codex-hooks -->\s*```json\n(.*?)```", readme, re.S)
    assert block, "docs/codex.md lacks the Codex hooks.json snippet"
    assert json.loads(block.group(1)) == hooks.codex_hooks_snippet("compactor")
