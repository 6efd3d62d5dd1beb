"""The optional LLM pass, end to end through the real SDKs against a scripted loopback server.

A real HTTP server on 127.0.0.1 (ephemeral port, stdlib http.server, in a thread) speaks the
OpenAI Chat Completions API and the Anthropic Messages API and replays scripted answers: a good
one, malformed JSON, hallucinated facts, a dropped error line, an answer 3x over budget, a slow
answer (timeout), an HTTP 500. Every case must end in a correct anchor with the right
diagnostics, for both providers. A canary test proves no planted secret reaches the server.
"""

from __future__ import annotations

import json
import random
import string
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("openai")
pytest.importorskip("anthropic")

from compactor.config import CompactorConfig  # noqa: E402
from compactor.errors import ConfigError, LLMError  # noqa: E402
from compactor.llm import (  # noqa: E402
    AnthropicProvider,
    CallableProvider,
    OpenAIProvider,
    build_prompt,
    provider_from_spec,
    refine_anchor,
    refine_from_config,
    render_steps,
    build_context,
)
from compactor.models import (  # noqa: E402
    Anchor,
    Decision,
    Evidence,
    ExcludedApproach,
    Fact,
    UserConstraint,
)
from compactor.secrets import find_secrets  # noqa: E402
from compactor.tokens import get_counter  # noqa: E402

# ----------------------------------------------------------------------------- fake server



@dataclass
class Reply:
    text: str = ""
    status: int = 200
    delay: float = 0.0
    raw: str | None = None  # a raw body instead of a well-formed API answer


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: bytes


class FakeLLMServer:
    def __init__(self):
        self.script: list[Reply] = []
        self.requests: list[Recorded] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with server._lock:
                    server.requests.append(Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    reply = server.script.pop(0) if server.script else Reply(status=500, raw='{"error": "no script"}')
                if reply.delay:
                    server.stop.wait(reply.delay)
                if self.path.endswith("/chat/completions"):
                    payload = reply.raw if reply.raw is not None else _openai_body(reply, body)
                elif self.path.endswith("/messages"):
                    payload = reply.raw if reply.raw is not None else _anthropic_body(reply, body)
                else:
                    reply = Reply(status=404)
                    payload = '{"error": {"message": "not found"}}'
                data = payload.encode("utf-8")
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self):
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def bodies(self) -> list[str]:
        return [r.body.decode("utf-8", errors="replace") for r in self.requests]

    def prompts(self) -> list[str]:
        out = []
        for r in self.requests:
            msgs = json.loads(r.body)["messages"]
            out.append("".join(m["content"] if isinstance(m["content"], str) else
                               "".join(b.get("text", "") for b in m["content"]) for m in msgs))
        return out


def _error_body(reply: Reply) -> str:
    return json.dumps({"error": {"type": "server_error", "message": f"scripted HTTP {reply.status}"}})


def _openai_body(reply: Reply, req: bytes) -> str:
    if reply.status >= 400:
        return _error_body(reply)
    model = json.loads(req or b"{}").get("model", "m")
    return json.dumps({
        "id": "chatcmpl-fake0001", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": len(req) // 4, "completion_tokens": len(reply.text) // 4,
                  "total_tokens": len(req) // 4 + len(reply.text) // 4},
    })


def _anthropic_body(reply: Reply, req: bytes) -> str:
    if reply.status >= 400:
        return json.dumps({"type": "error", "error": {"type": "api_error", "message": f"scripted HTTP {reply.status}"}})
    model = json.loads(req or b"{}").get("model", "m")
    return json.dumps({
        "id": "msg_fake0001", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": reply.text}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": len(req) // 4, "output_tokens": len(reply.text) // 4},
    })


@pytest.fixture
def server():
    srv = FakeLLMServer()
    yield srv
    srv.close()


OPENAI_KEY = "test-openai-key-" + "q7Zr2Lm9Xw4Kp1Vb"
ANTHROPIC_KEY = "test-anthropic-key-" + "N3c8Hs5Tg0Ye6Ju2"


@pytest.fixture(autouse=True)
def _keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    for var in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "HTTP_PROXY", "HTTPS_PROXY",
                "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


def make_provider(kind: str, srv: FakeLLMServer, *, timeout: float = 5.0, retries: int = 0):
    if kind == "openai":
        return OpenAIProvider("gpt-test", srv.openai_base_url, timeout=timeout, retries=retries, backoff=0.001)
    return AnthropicProvider("claude-test", srv.anthropic_base_url, timeout=timeout, retries=retries, backoff=0.001)


PROVIDERS = ["openai", "anthropic"]

# ----------------------------------------------------------------------------- the trajectory

STEPS = {
    "s1": "user: Fix the failing test in tests/test_parser.py. Do not modify the public API of parse_config(). "
          "Keep Python 3.8 compatibility.",
    "s2": "tool_call: pytest tests/test_parser.py -q\ntool_result: F.\n"
          "FAILED tests/test_parser.py::test_empty_file - AssertionError: assert {} == None\n"
          "1 failed, 1 passed in 0.12s",
    "s3": "assistant: Let me read the parser.\ntool_call: cat src/parser.py\ntool_result: def parse_config(path):\n"
          "    text = open(path).read()\n    if not text:\n        return {}\n    return _parse(text)",
    "s4": "assistant: I tried changing the test to expect {} but that doesn't work: the user said the test is the "
          "spec. Ruled out: editing the test.",
    "s5": "tool_call: pip install -e .\ntool_result: ERROR: Could not install packages: connection timed out "
          "while fetching setuptools (network)",
    "s6": "assistant: I decided to return None for empty files instead of {}, because the test expects None.\n"
          "tool_call: edit src/parser.py",
    "s7": "tool_call: pytest tests/test_parser.py -q\ntool_result: ..\n2 passed in 0.10s",
}

ERROR_LINE = "FAILED tests/test_parser.py::test_empty_file - AssertionError: assert {} == None"

DET = Anchor(
    objective_state="Fixing tests/test_parser.py::test_empty_file.",
    facts_learned=[
        Fact(id="f-err", text=ERROR_LINE, source_step="s2"),
        Fact(id="f-empty", text="parse_config() returns {} for an empty file", source_step="s3"),
        Fact(id="f-pass", text="2 passed in 0.10s", source_step="s7"),
    ],
    decisions_made=[Decision(id="d-none", decision="return None for empty files instead of {}",
                             reason="the test expects None", source_step="s6")],
    dead_ends=[ExcludedApproach(id="x-test", approach="Changing the test to expect {}",
                                why="the test is the spec", source_step="s4")],
    key_evidence=[Evidence(id="e-err", text=ERROR_LINE, source_step="s2", rule_id="test.failure", family="test-failure"),
                  Evidence(id="e-sum", text="1 failed, 1 passed in 0.12s", source_step="s2", rule_id="test.summary",
                           family="test-failure")],
    user_constraints=[UserConstraint(id="c-api", text="Do not modify the public API of parse_config().", source_step="s1"),
                      UserConstraint(id="c-py", text="Keep Python 3.8 compatibility.", source_step="s1")],
)
OBJECTIVE = "Fix the failing test in tests/test_parser.py"
CONTEXT = build_context(DET, render_steps(STEPS))

GOOD = {
    "objective_state": "test_empty_file in tests/test_parser.py now passes (2 passed) after parse_config() "
                       "was changed to return None for empty files.",
    "facts_learned": [
        {"text": "tests/test_parser.py::test_empty_file failed with AssertionError: assert {} == None.",
         "source_step": "s2"},
        {"text": "parse_config() returned {} for an empty file.", "source_step": "s3"},
        {"text": "After the fix, 2 passed in 0.10s.", "source_step": "s7"},
    ],
    "decisions_made": [{"decision": "Return None for empty files instead of {}", "reason": "the test expects None"}],
    "open_questions": [],
    "dead_ends": ["Changing the test to expect {} — ruled out, the test is the spec."],
    "next_action_hint": "Consider running the whole test suite to see whether other callers rely on the {} result.",
}


def good_text() -> str:
    return json.dumps(GOOD)


def protected_present(anchor: Anchor):
    """Every protected item of the deterministic anchor is in ``anchor`` verbatim."""
    ev = [e.text for e in anchor.key_evidence]
    uc = [c.text for c in anchor.user_constraints]
    de = [d.approach for d in anchor.dead_ends]
    for e in DET.key_evidence:
        assert e.text in ev
    for c in DET.user_constraints:
        assert c.text in uc
    for d in DET.dead_ends:
        assert d.approach in de


def codes(outcome) -> list[str]:
    return [d.code for d in outcome.diagnostics]


def run(kind, srv, *, budget=400, **kw):
    provider = make_provider(kind, srv, **kw)
    return refine_anchor(DET, steps=STEPS, context=CONTEXT, objective=OBJECTIVE, budget=budget,
                         provider=provider, counter=get_counter())


def assert_fallback(out, code):
    assert out.anchor == DET
    assert out.report.fallback and out.report.fallback_code == code
    assert code in codes(out) and "llm-fallback" in codes(out)
    protected_present(out.anchor)


# ----------------------------------------------------------------------------- scripted cases

@pytest.mark.parametrize("kind", PROVIDERS)
def test_good_answer_is_used(server, kind):
    server.script = [Reply(good_text())]
    out = run(kind, server)
    assert not out.report.fallback and out.report.used_llm
    assert out.report.calls == 1 and len(server.requests) == 1
    assert [f.text for f in out.anchor.facts_learned] == [f["text"] for f in GOOD["facts_learned"]]
    assert [f.source_step for f in out.anchor.facts_learned] == ["s2", "s3", "s7"]
    assert out.anchor.decisions_made[0].decision == "Return None for empty files instead of {}"
    assert out.anchor.decisions_made[0].source_step == "s6"
    assert out.anchor.objective_state == GOOD["objective_state"]
    assert out.anchor.next_action_hint == GOOD["next_action_hint"]
    protected_present(out.anchor)
    assert not out.report.rejected
    assert {c["section"] for c in out.report.reworded} >= {"facts_learned", "decisions_made", "objective_state"}
    assert out.report.tokens_sent > 0 and out.report.tokens_received > 0
    assert out.report.provider_tokens_in > 0  # the provider's usage was read through the SDK
    assert not [d for d in out.diagnostics if d.severity.value == "warning"]
    # the request: seed-000 prompt shape, low temperature, the model, a bounded max_tokens
    req = json.loads(server.requests[0].body)
    assert req["temperature"] <= 0.2 and req["max_tokens"] >= 400
    prompt = server.prompts()[0]
    for part in ("Current objective:", "Trajectory so far:", "Approximate token budget", "facts_learned",
                 "[s2]", OBJECTIVE):
        assert part in prompt
    path = "/v1/chat/completions" if kind == "openai" else "/v1/messages"
    assert server.requests[0].path == path


@pytest.mark.parametrize("kind", PROVIDERS)
def test_malformed_json_falls_back(server, kind):
    server.script = [Reply('{"objective_state": "half an answer", "facts_learned": [{"text": ')]
    out = run(kind, server)
    assert_fallback(out, "llm-bad-json")


@pytest.mark.parametrize("kind", PROVIDERS)
def test_not_an_object_falls_back(server, kind):
    server.script = [Reply('["just", "a", "list"]')]
    out = run(kind, server)
    assert_fallback(out, "llm-invalid-schema")


@pytest.mark.parametrize("kind", PROVIDERS)
def test_hallucinations_are_rejected(server, kind):
    bad = json.loads(good_text())
    bad["facts_learned"] += [
        {"text": "The parser also supports YAML anchors.", "source_step": "s9"},          # no such step
        {"text": "pytest reported 5 failed tests.", "source_step": "s2"},                 # s2 says 1 failed
        {"text": "The CI pipeline runs on GitHub Actions.", "source_step": "s3"},         # s3 never says it
        {"text": "parse_config() returns an empty dict for missing files.", "source_step": ""},  # untraceable
    ]
    bad["decisions_made"].append({"decision": "Migrate the configuration format to TOML", "reason": "simpler"})
    bad["dead_ends"].append("pip install -e . failed with a network timeout, so installing is not possible.")
    server.script = [Reply(json.dumps(bad))]
    out = run(kind, server)
    assert not out.report.fallback
    texts = [f.text for f in out.anchor.facts_learned]
    assert "pytest reported 5 failed tests." not in texts
    assert "The parser also supports YAML anchors." not in texts
    assert "The CI pipeline runs on GitHub Actions." not in texts
    assert all(f.source_step in STEPS for f in out.anchor.facts_learned)
    assert [f["text"] for f in GOOD["facts_learned"]] == texts  # the supported ones are kept
    rejected = {r["text"]: r["reason"] for r in out.report.rejected}
    assert rejected["The parser also supports YAML anchors."] == "llm-unknown-step"
    assert rejected["pytest reported 5 failed tests."] == "llm-unsupported-fact"
    assert rejected["The CI pipeline runs on GitHub Actions."] == "llm-unsupported-fact"
    assert rejected["parse_config() returns an empty dict for missing files."] == "llm-unknown-step"
    assert rejected["Migrate the configuration format to TOML"] == "llm-laundered-decision"
    assert rejected["pip install -e . failed with a network timeout, so installing is not possible."] == \
        "llm-stale-dead-end"
    assert all(d.decision != "Migrate the configuration format to TOML" for d in out.anchor.decisions_made)
    assert len(out.anchor.dead_ends) == 1
    c = codes(out)
    for code in ("llm-unknown-step", "llm-unsupported-fact", "llm-laundered-decision", "llm-stale-dead-end"):
        assert code in c
    protected_present(out.anchor)


@pytest.mark.parametrize("kind", PROVIDERS)
def test_dropped_error_line_is_put_back(server, kind):
    dropped = json.loads(good_text())
    dropped["facts_learned"] = [f for f in dropped["facts_learned"] if f["source_step"] != "s2"]
    dropped["key_evidence"] = ["1 failed, 1 passed in 0.12s"]      # the FAILED line is gone
    dropped["dead_ends"] = []                                       # and the excluded approach
    server.script = [Reply(json.dumps(dropped))]
    out = run(kind, server)
    assert not out.report.fallback
    protected_present(out.anchor)
    assert ERROR_LINE in [e.text for e in out.anchor.key_evidence]
    assert ERROR_LINE in [f.text for f in out.anchor.facts_learned]          # s2's fact is back
    assert out.anchor.facts_learned[0].source_step == "s2"                   # in step order
    restored = {(r["section"], r["text"]) for r in out.report.restored}
    assert ("key_evidence", ERROR_LINE) in restored
    assert ("facts_learned", ERROR_LINE) in restored
    assert ("dead_ends", "Changing the test to expect {}") in restored
    assert "llm-protected-restored" in codes(out) and "llm-fact-restored" in codes(out)


@pytest.mark.parametrize("kind", PROVIDERS)
def test_bloated_answer_is_re_asked_tighter(server, kind):
    budget = 150
    counter = get_counter()
    bloated = json.loads(good_text())
    bloated["open_questions"] = [f"Does test case number {i} of the parser suite still pass?" for i in range(60)]
    text = json.dumps(bloated)
    assert counter.count(text) > 3 * budget and counter.count(good_text()) <= 2 * budget
    server.script = [Reply(text), Reply(good_text())]
    out = run(kind, server, budget=budget)
    assert not out.report.fallback and out.report.used_llm
    assert out.report.calls == 2 and len(server.requests) == 2
    assert "llm-over-budget" in codes(out)
    second = server.prompts()[1]
    assert "HARD LIMIT" in second and f"at most {budget // 2} tokens" in second
    assert json.loads(server.requests[1].body)["max_tokens"] < json.loads(server.requests[0].body)["max_tokens"]
    protected_present(out.anchor)


@pytest.mark.parametrize("kind", PROVIDERS)
def test_still_bloated_falls_back(server, kind):
    bloated = json.loads(good_text())
    bloated["open_questions"] = [f"Does test case number {i} of the parser suite still pass?" for i in range(60)]
    server.script = [Reply(json.dumps(bloated)), Reply(json.dumps(bloated))]
    out = run(kind, server, budget=150)
    assert_fallback(out, "llm-over-budget")
    assert out.report.calls == 2  # asked once more, then gave up


@pytest.mark.parametrize("kind", PROVIDERS)
def test_slow_answer_times_out(server, kind):
    server.script = [Reply(good_text(), delay=3.0)]
    out = run(kind, server, timeout=0.4, retries=0)
    assert_fallback(out, "llm-timeout")


@pytest.mark.parametrize("kind", PROVIDERS)
def test_timeout_then_retry_succeeds(server, kind):
    server.script = [Reply(good_text(), delay=3.0), Reply(good_text())]
    out = run(kind, server, timeout=0.4, retries=1)
    assert not out.report.fallback and out.report.used_llm
    assert len(server.requests) == 2


@pytest.mark.parametrize("kind", PROVIDERS)
def test_http_500_falls_back(server, kind):
    server.script = [Reply(status=500)]
    out = run(kind, server, retries=0)
    assert_fallback(out, "llm-http-error")
    assert "500" in next(d.message for d in out.diagnostics if d.code == "llm-http-error")


@pytest.mark.parametrize("kind", PROVIDERS)
def test_http_500_retried_with_backoff(server, kind):
    server.script = [Reply(status=500), Reply(status=503), Reply(good_text())]
    out = run(kind, server, retries=2)
    assert not out.report.fallback and out.report.used_llm
    assert len(server.requests) == 3


@pytest.mark.parametrize("kind", PROVIDERS)
def test_auth_error_is_not_retried_and_never_shows_the_key(server, kind):
    server.script = [Reply(status=401), Reply(good_text())]
    out = run(kind, server, retries=3)
    assert_fallback(out, "llm-auth-error")
    assert len(server.requests) == 1
    dump = json.dumps([d.model_dump() for d in out.diagnostics]) + out.report.model_dump_json()
    assert OPENAI_KEY not in dump and ANTHROPIC_KEY not in dump


# ----------------------------------------------------------------------------- secrets never leave

def _rand(alphabet: str, n: int, rng: random.Random) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def planted_secrets(seed: int = 0) -> dict[str, str]:
    """One fresh value per secret family, generated at test time (nothing realistic is committed)."""
    rng = random.Random(seed)
    an = string.ascii_letters + string.digits
    up = string.ascii_uppercase + "234567"
    return {
        "openai": "sk-proj-" + _rand(an, 40, rng) + "T3BlbkFJ" + _rand(an, 40, rng) + "7",
        "anthropic": "sk-ant-api03-" + _rand(an + "-_", 90, rng) + "AA",
        "github": "ghp_" + _rand(an, 36, rng),
        "github_pat": "github_pat_" + _rand(an, 22, rng) + "_" + _rand(an, 59, rng),
        "gitlab": "glpat-" + _rand(an, 20, rng),
        "slack": "xoxb-" + _rand(string.digits, 12, rng) + "-" + _rand(string.digits, 12, rng) + "-" + _rand(an, 24, rng),
        "aws_id": "AKIA" + _rand(up, 16, rng),
        "aws_secret": _rand(an, 38, rng) + "/+",
        "google": "AIza" + _rand(an + "-_", 35, rng),
        "hf": "hf_" + _rand(string.ascii_letters, 34, rng),
        "npm": "npm_" + _rand(an, 36, rng),
        "stripe": "sk_live_" + _rand(an, 24, rng),
        "url_password": "p4ss" + _rand(an, 12, rng),
        "bearer": _rand(an, 30, rng) + "9",
        "db_password": "Zq9" + _rand(an, 13, rng),
        "pem_body": "MIIE" + _rand(an + "+/", 60, rng),
    }


def secret_steps(s: dict[str, str]) -> dict[str, str]:
    return {
        "s1": "user: Deploy the service. Never print credentials.",
        "s2": "tool_call: env\ntool_result: "
              f"OPENAI_API_KEY={s['openai']}\nANTHROPIC_API_KEY={s['anthropic']}\nGITHUB_TOKEN={s['github']}\n"
              f"GITLAB_TOKEN={s['gitlab']}\nSLACK_BOT_TOKEN={s['slack']}\nAWS_ACCESS_KEY_ID={s['aws_id']}\n"
              f"AWS_SECRET_ACCESS_KEY={s['aws_secret']}\nGEMINI_API_KEY={s['google']}\nHF_TOKEN={s['hf']}\n"
              f"NPM_TOKEN={s['npm']}\nSTRIPE_KEY={s['stripe']}\nDB_PASSWORD={s['db_password']}",
        "s3": f"tool_call: git remote -v\ntool_result: origin https://deploy:{s['url_password']}@git.example.com/app.git (fetch)",
        "s4": f'tool_call: curl -H "Authorization: Bearer {s["bearer"]}" https://api.example.com/v1/deploy\n'
              "tool_result: {\"status\": \"queued\", \"id\": \"call_0nLxnjHHxwCHwdweFIGir75l\"}",
        "s5": "tool_call: cat deploy/key.pem\ntool_result: -----BEGIN RSA PRIVATE KEY-----\n"
              f"{s['pem_body']}\n{s['pem_body'][::-1]}\n-----END RSA PRIVATE KEY-----",
        "s6": f"assistant: The fine-grained token {s['github_pat']} worked; the deploy was queued.",
    }


@pytest.mark.parametrize("kind", PROVIDERS)
def test_planted_secrets_never_reach_the_endpoint(server, kind):
    secrets = planted_secrets(7 if kind == "openai" else 11)
    steps = secret_steps(secrets)
    det = Anchor(objective_state="Deploying the service.",
                 facts_learned=[Fact(id="f1", text=f"GITHUB_TOKEN is {secrets['github']}", source_step="s2")],
                 key_evidence=[Evidence(id="e1", text=f"AWS_SECRET_ACCESS_KEY={secrets['aws_secret']}", source_step="s2")])
    context = build_context(det, render_steps(steps))
    objective = f"Deploy using {secrets['stripe']} and {secrets['openai']}"
    answer = {"objective_state": "The deploy was queued.",
              "facts_learned": [{"text": "The deploy was queued.", "source_step": "s4"}]}
    server.script = [Reply(json.dumps(answer))]
    provider = make_provider(kind, server)
    out = refine_anchor(det, steps=steps, context=context, objective=objective, budget=300, provider=provider,
                        counter=get_counter())
    assert len(server.requests) == 1
    assert not out.report.fallback
    req = server.requests[0]
    wire = req.path + "\n" + req.body.decode("utf-8") + "\n" + json.dumps(req.headers)
    for name, value in secrets.items():
        assert value not in wire, f"{name} reached the endpoint"
        assert value[:24] not in wire, f"part of {name} reached the endpoint"
    # ids are not secrets: they must survive redaction
    assert "call_0nLxnjHHxwCHwdweFIGir75l" in req.body.decode("utf-8")
    # typed placeholders, and the re-scan of what was sent is clean
    prompt = server.prompts()[0]
    assert "[REDACTED:github-token#1]" in prompt and "[REDACTED:private-key#1]" in prompt
    assert "https://deploy:[REDACTED:url-credentials#1]@git.example.com" in prompt
    assert find_secrets(prompt) == [] and find_secrets(req.body.decode("utf-8")) == []
    # the API key travels only in its auth header
    key = OPENAI_KEY if kind == "openai" else ANTHROPIC_KEY
    carrying = [k for k, v in req.headers.items() if key in v]
    assert carrying in (["authorization"], ["x-api-key"])  # SDK releases differ on which one
    assert req.headers[carrying[0]] in (key, f"Bearer {key}")
    assert key not in req.body.decode("utf-8")
    # the report counts findings per rule, never values
    assert out.report.secrets_redacted.get("secret.github-token", 0) >= 2
    dump = out.report.model_dump_json() + json.dumps([d.model_dump() for d in out.diagnostics])
    for value in secrets.values():
        assert value not in dump
    assert "llm-secrets-redacted" in codes(out)


def test_egress_gate_blocks_when_redaction_misses(server, monkeypatch):
    """If anything still matches after redaction, nothing is sent."""
    import compactor.llm.refine as refine_mod

    class NoRedaction:
        def __init__(self, scanner=None):
            pass

        def redact(self, text):
            return text, []

        def counts(self):
            return {}

    monkeypatch.setattr(refine_mod, "Redactor", NoRedaction)
    secrets = planted_secrets(3)
    steps = secret_steps(secrets)
    server.script = [Reply(good_text())]
    out = refine_anchor(DET, steps=steps, context=render_steps(steps), objective="deploy", budget=300,
                        provider=make_provider("openai", server), counter=get_counter())
    assert server.requests == []
    assert_fallback(out, "llm-egress-blocked")
    msg = next(d.message for d in out.diagnostics if d.code == "llm-egress-blocked")
    assert "nothing was sent" in msg
    for value in secrets.values():
        assert value not in msg


def test_userinfo_in_base_url_is_not_leaked():
    """A base_url with credentials must not show up in diagnostics (connection refused here)."""
    import socket

    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = OpenAIProvider("m", f"http://admin:hunter2pass99@127.0.0.1:{port}/v1", timeout=0.5, retries=1,
                              backoff=0.001)
    out = refine_anchor(DET, steps=STEPS, context=CONTEXT, objective=OBJECTIVE, budget=300, provider=provider,
                        counter=get_counter())
    assert_fallback(out, "llm-connection-error")
    dump = json.dumps([d.model_dump() for d in out.diagnostics]) + out.report.model_dump_json()
    assert "hunter2pass99" not in dump and OPENAI_KEY not in dump
    assert "after 2 attempts" in dump


# ----------------------------------------------------------------------------- config entry point

@pytest.mark.parametrize("kind", PROVIDERS)
def test_refine_from_config(server, kind):
    base = server.openai_base_url if kind == "openai" else server.anthropic_base_url
    cfg = CompactorConfig(llm=f"{kind}:test-model", llm_base_url=base, llm_timeout=5.0, llm_retries=0)
    server.script = [Reply(good_text())]
    out = refine_from_config(DET, STEPS, CONTEXT, OBJECTIVE, 400, cfg)
    assert out.report.used_llm and out.report.provider == f"{kind}:test-model"
    assert json.loads(server.requests[0].body)["model"] == "test-model"


def test_refine_from_config_without_llm_sends_nothing():
    out = refine_from_config(DET, STEPS, CONTEXT, OBJECTIVE, 400, CompactorConfig())
    assert out.anchor == DET and out.diagnostics == [] and not out.report.fallback and out.report.calls == 0


def test_refine_from_config_missing_key_falls_back(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    out = refine_from_config(DET, STEPS, CONTEXT, OBJECTIVE, 400, CompactorConfig(llm="anthropic:claude-x"))
    assert out.anchor == DET and out.report.fallback
    assert "ANTHROPIC_API_KEY" in out.diagnostics[0].message


def test_provider_spec_parsing(monkeypatch):
    p = provider_from_spec("openai:llama3:8b", base_url="http://127.0.0.1:1/v1", timeout=3, retries=1)
    assert isinstance(p, OpenAIProvider) and p.model == "llama3:8b" and p.timeout == 3 and p.retries == 1
    assert OPENAI_KEY not in repr(p)
    assert isinstance(provider_from_spec("anthropic:claude-x"), AnthropicProvider)
    for bad in ("gpt-4o", "cohere:command", "openai:", ""):
        with pytest.raises(ConfigError):
            provider_from_spec(bad)
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(LLMError):
        provider_from_spec("openai:gpt-4o")  # no key and no local base_url
    assert provider_from_spec("openai:qwen", base_url="http://127.0.0.1:1/v1").name == "openai:qwen"


def test_sdks_not_imported_until_a_provider_is_built():
    import subprocess
    import sys

    code = ("import sys, compactor.llm, compactor.secrets; "
            "print('openai' in sys.modules, 'anthropic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


# ----------------------------------------------------------------------------- without HTTP

def scripted(*answers):
    calls = []

    def fn(prompt, *, max_tokens, temperature):
        calls.append((prompt, max_tokens, temperature))
        return answers[len(calls) - 1] if len(calls) <= len(answers) else answers[-1]

    return CallableProvider(fn), calls


def test_temperature_is_clamped():
    provider, calls = scripted(good_text())
    out = refine_anchor(DET, steps=STEPS, context=CONTEXT, objective=OBJECTIVE, budget=400, provider=provider,
                        temperature=0.9)
    assert calls[0][2] == 0.2 and out.report.temperature == 0.2


def test_long_input_is_chunked_then_merged():
    part = json.dumps({"facts_learned": [{"text": "2 passed in 0.10s", "source_step": "s7"}]})
    provider, calls = scripted(part, part, part, part, part, good_text())
    long_context = CONTEXT + "\n" + "\n".join(f"filler line {i} of a long tool output" for i in range(400))
    counter = get_counter()
    out = refine_anchor(DET, steps=STEPS, context=long_context, objective=OBJECTIVE, budget=400, provider=provider,
                        counter=counter, chunk_tokens=1000)
    n_chunks = out.report.chunks
    assert n_chunks >= 3
    assert len(calls) == n_chunks + 1
    assert all(f"(part {i} of {n_chunks}" in calls[i - 1][0] for i in range(1, n_chunks + 1))
    assert "memory records of its consecutive parts" in calls[-1][0]
    assert all(counter.count(c[0]) < 1000 + 1500 for c in calls[:-1])  # each chunk prompt stays small
    assert out.report.used_llm and not out.report.fallback


def test_recency_bias_puts_early_facts_back():
    tail_only = {"facts_learned": [{"text": "After the fix, 2 passed in 0.10s.", "source_step": "s7"}],
                 "decisions_made": GOOD["decisions_made"]}
    provider, _ = scripted(json.dumps(tail_only))
    out = refine_anchor(DET, steps=STEPS, context=CONTEXT, objective=OBJECTIVE, budget=400, provider=provider)
    texts = [f.text for f in out.anchor.facts_learned]
    assert ERROR_LINE in texts and "parse_config() returns {} for an empty file" in texts
    assert texts[-1] == "After the fix, 2 passed in 0.10s."
    assert "llm-recency-bias" in codes(out)


def test_overconfident_hint_and_unsupported_prose_are_rejected():
    ans = json.loads(good_text())
    ans["next_action_hint"] = "You must rewrite the parser in Rust."
    ans["objective_state"] = "Release 4.2.0 shipped to PyPI."
    provider, _ = scripted(json.dumps(ans))
    out = refine_anchor(DET, steps=STEPS, context=CONTEXT, objective=OBJECTIVE, budget=400, provider=provider)
    assert out.anchor.next_action_hint == DET.next_action_hint
    assert out.anchor.objective_state == DET.objective_state
    assert "llm-overconfident-hint" in codes(out) and "llm-unsupported-claim" in codes(out)


def test_provider_exceptions_never_escape():
    def boom(prompt, **kw):
        raise RuntimeError("kaput with sk-proj-should-never-appear-123456789012345")

    out = refine_anchor(DET, steps=STEPS, context=CONTEXT, objective=OBJECTIVE, budget=400,
                        provider=CallableProvider(boom))
    assert_fallback(out, "llm-error")
    assert "kaput" not in json.dumps([d.model_dump() for d in out.diagnostics])


def test_plain_string_provider_and_prompt_shape():
    seen = []

    class Plain:
        name = "plain"

        def complete(self, prompt, *, max_tokens, temperature):
            seen.append(prompt)
            return good_text()  # a str is accepted too (DESIGN §5: complete(...) -> str)

    out = refine_anchor(DET, steps=STEPS, context=CONTEXT, objective=OBJECTIVE, budget=None, provider=Plain())
    assert out.report.used_llm and out.report.budget >= 200
    assert seen[0] == build_prompt(OBJECTIVE, CONTEXT, out.report.budget)


def test_refine_is_deterministic():
    a = refine_anchor(DET, steps=STEPS, context=CONTEXT, objective=OBJECTIVE, budget=400,
                      provider=scripted(good_text())[0])
    b = refine_anchor(DET, steps=STEPS, context=CONTEXT, objective=OBJECTIVE, budget=400,
                      provider=scripted(good_text())[0])
    assert a.anchor.model_dump_json() == b.anchor.model_dump_json()
    assert a.report.model_dump_json() == b.report.model_dump_json()
