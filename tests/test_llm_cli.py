"""The LLM path through the public pipeline and the CLI, against a loopback server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactor import Compactor
from compactor.cli import main
from test_llm import FakeLLMServer, Reply  # the loopback server speaking both APIs

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo" / "debug-session.openai.json"

GOOD = {
    "objective_state": "The orders test fails under load with ConnectionPoolExhausted; a finally-release fix was applied.",
    "facts_learned": [
        {"text": "Tests: 1 failed, 41 passed, 42 total", "source_step": "s3"},
        {"text": "The database runs PostgreSQL 9.6 on port 5433", "source_step": "s3"},
    ],
    "decisions_made": [{"decision": "Release connections in a finally block",
                        "reason": "the order service never returns them on the error path"}],
    "open_questions": [],
    "dead_ends": ["Raising pool_size from 20 to 50: the test still fails with the same error."],
    "next_action_hint": "Consider adding the regression test for the release path.",
}


@pytest.fixture
def server(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-aaaaaaaaaaaaaaaa")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-bbbbbbbbbbbbbbbb")
    monkeypatch.setenv("COMPACTOR_STORE", str(tmp_path / "store.sqlite"))
    for var in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    srv = FakeLLMServer()
    yield srv
    srv.close()


def test_pipeline_uses_guarded_llm_answer(server):
    server.script = [Reply(json.dumps(GOOD))]
    comp = Compactor(llm="openai:gpt-test", llm_base_url=server.openai_base_url, llm_retries=0)
    res = comp.compact(str(DEMO))
    facts = [f.text for f in res.anchor.facts_learned]
    assert "Tests: 1 failed, 41 passed, 42 total" in facts
    assert not any("PostgreSQL" in f for f in facts)  # hallucinated: the step does not say it
    assert res.report.llm is not None and res.report.llm["tokens_sent"] > 0
    assert any(r for r in res.report.llm["rejected"])
    # protected items survive
    det = Compactor().compact(str(DEMO)).anchor
    for ev in det.key_evidence:
        assert ev.text in [e.text for e in res.anchor.key_evidence]
    assert len(server.requests) == 1


def test_cli_llm_http_500_falls_back_with_diagnostic(server, capsys):
    server.script = [Reply(status=500)]
    rc = main(["compact", str(DEMO), "--llm", "anthropic:claude-test", "--llm-base-url", server.anthropic_base_url,
               "--llm-timeout", "5"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    d = json.loads(out.out)
    codes = [x["code"] for x in d["report"]["diagnostics"]]
    assert "llm-fallback" in codes
    det = Compactor().compact(str(DEMO)).anchor
    from compactor.anchor import to_json

    assert d["anchor"] == to_json(det)


def test_cli_secrets_never_reach_the_endpoint(server, tmp_path, capsys):
    token = "ghp_" + "Zq8Wm2Kx7Rt4Yp1Lc9Vb3Nf6Hd5Js0Ga2QeX"
    aws = "AKIA" + "Q7ZX3M6KD2WPL5RT"
    msgs = json.loads(DEMO.read_text())
    msgs[1]["content"] += f" Use the token {token} for the registry."
    msgs[3]["content"] += f"\nAWS_ACCESS_KEY_ID={aws}\n"
    p = tmp_path / "secrets.json"
    p.write_text(json.dumps(msgs))
    server.script = [Reply(json.dumps(GOOD))]
    rc = main(["compact", str(p), "--llm", "openai:gpt-test", "--llm-base-url", server.openai_base_url, "--redact"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert server.requests, "the LLM was called"
    for body in server.bodies():
        assert token not in body and aws not in body
    assert token not in out.out and aws not in out.out
    assert "[REDACTED:github-token#1]" in out.out
