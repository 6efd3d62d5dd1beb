"""The streaming form of the pipeline (``compactor.streaming``): the same bytes as the in-memory
path on generated conversations and on the corpus, the in-memory path whenever it could differ,
and the command line's bad-input and partial-output behaviour."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from compactor import Compactor, load_document, render_to, stream_compact
from compactor.streaming import streamable_config

ROOT = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------------------- generated conversations

_FAILING = (
    "============================= test session starts ==============================\n"
    "collected 12 items\n\ntests/test_parser.py ....F.......                          [100%]\n\n"
    "=================================== FAILURES ===================================\n"
    "    def test_roundtrip():\n>       assert load(dump(x)) == x\nE       AssertionError: assert 3 == {n}\n"
    "tests/test_parser.py:{n}: AssertionError\nFAILED tests/test_parser.py::test_roundtrip - AssertionError\n"
    "========================= 1 failed, 11 passed in 0.{n}s =========================")
_TRACE = ('Traceback (most recent call last):\n  File "/repo/src/cache.py", line {n}, in get\n'
          '    return self.items[key]\nKeyError: \'token_{n}\'')
_PIP = "\n".join([f"Collecting pkg{i}==1.{i}.0\n  Downloading pkg{i}-1.{i}.0-py3-none-any.whl ({{n}} kB)"
                  for i in range(8)] + ["Successfully installed " + " ".join(f"pkg{i}-1.{i}.0" for i in range(8))])
_LISTING = "\n".join(f"-rw-r--r-- 1 user user {{n}} Jan  3 10:0{i} module_{i}.py" for i in range(9))
_GREP = "\n".join(f"src/server/handler.py:{{n}}:    value = get_option({i})" for i in range(4))
_RC = "<returncode>{rc}</returncode>\n<output>\nmake: *** [all] Error {rc}\ncc: fatal error: no input files\n</output>"
_CAT = "\n".join(f"{i:4d}  def helper_{i}(x):  # {{n}}" for i in range(50))
_OUTPUTS = (_FAILING, _TRACE, _PIP, _LISTING, _GREP, _RC, _CAT, "ok", "")
_USER = ("Fix the failing test; do not touch the public API of cache.py.",
         "Please keep the old behaviour: never delete user files. 不要修改 setup.py。",
         "Now run the whole test suite once more and report the result.",
         "You MUST use this exact command to submit: echo COMPLETE",
         "Use port 8080 and a timeout of 30 seconds.")
_ASSISTANT = ("I will read cache.py first.",
              "That approach did not work because the key is missing; instead I will add a default.",
              "I decided to keep the parser unchanged since the tests depend on it.",
              "Next I will run the tests again.", "")
_HEREDOC = "cat <<'EOF' > src/cache.py\n" + "\n".join(f"def f{i}():\n    return {i}" for i in range(12)) + "\nEOF"


@st.composite
def conversations(draw):
    n = draw(st.integers(0, 99))
    msgs: list[dict] = []
    first = draw(st.sampled_from(["system", "developer", "user", None]))
    if first in ("system", "developer"):
        msgs.append({"role": first, "content": "You are a helpful assistant that can run bash commands."})
    msgs.append({"role": "user", "content": draw(st.sampled_from(_USER))})
    waiting: list[str] = []
    for step in range(draw(st.integers(1, 9))):
        kind = draw(st.integers(0, 9))
        call_id = f"call_{step}"
        if kind <= 5:
            long_call = draw(st.booleans()) and kind <= 2
            args = json.dumps({"command": _HEREDOC if long_call else f"python -m pytest -q  # {step}"})
            if draw(st.booleans()):
                args = json.loads(args)  # arguments as an object
            content = draw(st.sampled_from(_ASSISTANT))
            msg: dict = {"role": "assistant", "content": content if content or draw(st.booleans()) else None,
                         "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "bash", "arguments": args}}]}
            msgs.append(msg)
            if draw(st.integers(0, 4)) == 0:
                waiting.append(call_id)  # its output comes later (or never)
            else:
                msgs.append(_result(draw, call_id, n + step))
            if waiting and draw(st.booleans()):
                msgs.append(_result(draw, waiting.pop(0), n + step))
        elif kind == 6:
            msgs.append({"role": "user", "content": [{"type": "text", "text": draw(st.sampled_from(_USER))},
                                                     {"type": "text", "text": "see above"}]})
        elif kind == 7:
            # mini-swe-agent: the action in the assistant's text, the output as a user message
            msgs.append({"role": "assistant", "content": f"THOUGHT: check it\n\n```bash\nls -la src/ # {step}\n```"})
            out = draw(st.sampled_from(_OUTPUTS)).format(n=n + step, rc=step % 3)
            msgs.append({"role": "user", "content": f"<returncode>{step % 2}</returncode>\n<output>\n{out}\n</output>"})
        elif kind == 8:
            msgs.append({"role": "tool", "content": draw(st.sampled_from(_OUTPUTS)).format(n=n, rc=1)})  # no call
        else:
            msgs.append({"role": "user", "content": draw(st.sampled_from(_USER)), "is_demo": draw(st.booleans())})
    if draw(st.booleans()):
        msgs.append({"role": "user", "content": "Now run the whole test suite once more and report the result."})
    return msgs


def _result(draw, call_id: str, n: int) -> dict:
    text = draw(st.sampled_from(_OUTPUTS)).format(n=draw(st.sampled_from([n, 7])), rc=draw(st.integers(0, 2)))
    msg: dict = {"role": "tool", "tool_call_id": call_id, "content": text}
    if draw(st.integers(0, 3)) == 0:
        msg["extra"] = {"raw_output": text, "returncode": draw(st.integers(0, 2))}
    return msg


def _in_memory(path: Path, store: Path, emit: str, **options) -> str:
    comp = Compactor(store=str(store), **options)
    doc = load_document(path, max_json_depth=comp.config.max_json_depth)
    doc.disposable = True
    out = io.StringIO()
    render_to(comp.compact(doc), emit, out, lang=comp.config.lang)
    return out.getvalue()


def _streamed(path: Path, store: Path, emit: str, **options) -> str | None:
    comp = Compactor(store=str(store), **options)
    out = io.StringIO()
    report = stream_compact(comp, path, out.write, emit=emit)
    if report is None:
        assert out.getvalue() == ""  # nothing written when the file goes the in-memory way
        return None
    return out.getvalue()


_OPTIONS = st.sampled_from([{}, {"keep_recent": 0}, {"keep_recent": 1}, {"collapse_batch": 4},
                            {"anchor_max_tokens": 0}, {"lang": "zh"}, {"objective": "make the tests pass"},
                            {"level": 1}, {"min_collapse_lines": 2, "keep_recent": 2},
                            {"anchor_max_tokens": 40}, {"anchor_max_tokens": 150, "lang": "zh"}])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(msgs=conversations(), wrap=st.sampled_from(["list", "body", "traj"]), emit=st.sampled_from(["json", "messages"]),
       options=_OPTIONS)
def test_streamed_output_is_the_in_memory_output(tmp_path_factory, msgs, wrap, emit, options):
    tmp = tmp_path_factory.mktemp("s")
    data: object = msgs
    if wrap == "body":
        data = {"model": "gpt-4o", "temperature": 0.5, "messages": msgs, "tools": [{"type": "function"}]}
    elif wrap == "traj":
        data = {"info": {"exit_status": "Submitted", "cost": 0.25}, "messages": msgs,
                "trajectory_format": "mini-swe-agent-1.1"}
    path = tmp / "t.json"
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    got = _streamed(path, tmp / "store", emit, **options)
    if got is None:  # only a result larger than its input goes the in-memory way: it passes the input through
        res = Compactor(store=str(tmp / "store"), **options).compact(load_document(path))
        assert "not-smaller" in [d.code for d in res.report.diagnostics], \
            "a chat conversation with unique call ids streams"
        return
    assert got == _in_memory(path, tmp / "store", emit, **options)


def _exercised() -> list[dict]:
    """A conversation that reaches the fold's harder paths (see below)."""
    msgs = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Fix the failing test; do not touch the public API of cache.py."}]
    for step in range(8):
        cid = f"c{step}"
        msgs.append({"role": "assistant", "content": "Trying again.",
                     "tool_calls": [{"id": cid, "type": "function",
                                     "function": {"name": "bash", "arguments": json.dumps({"command": _HEREDOC})}}]})
        if step % 3 == 0:
            msgs.append({"role": "assistant", "content": "meanwhile", "tool_calls": []})
        msgs.append({"role": "tool", "tool_call_id": cid, "content": _FAILING.format(n=step) if step % 2 else _PIP.format(n=3)})
    msgs.append({"role": "user", "content": "Now run the whole test suite once more and report the result."})
    return msgs


def test_the_fold_is_exercised_beyond_the_plain_path(tmp_path):
    """The generated features reach the fold's harder paths: an older output folded into an earlier
    identical one, an older error output cut to its evidence, a long call shortened after its
    output was read, the self-check asking the whole output, a summary message inserted."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_exercised(), indent=2), encoding="utf-8")
    got = _streamed(path, tmp_path / "store", "json")
    assert got is not None and got == _in_memory(path, tmp_path / "store", "json")
    rules = {p["rule_id"] for p in json.loads(got)["report"]["placeholders"]}
    assert {"collapse.same-as", "collapse.old-error", "collapse.call-body"} <= rules


@pytest.mark.parametrize("options", [{}, {"anchor_max_tokens": 300}, {"anchor_max_tokens": 700, "lang": "zh"}])
def test_a_long_run_lets_facts_go_and_writes_the_same_bytes(tmp_path, monkeypatch, options):
    """A run of many small tool outputs (the memory benchmark's kind) states thousands of facts:
    the fold holds only those the anchor's bound can still show, and writes what the in-memory
    path writes (the overflow names every fact not shown)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_memory
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    from compactor.anchor.ledger import FactLedger

    ledgers: list[FactLedger] = []
    settle = FactLedger.settle

    def spy(self):
        ledgers.append(self)
        settle(self)

    monkeypatch.setattr(FactLedger, "settle", spy)
    path = tmp_path / "t.json"
    # (about a third of such a run's fact-like lines are facts, the rest grep hits and listings)
    bench_memory.generate(path, "small", 3_000_000)
    got = _streamed(path, tmp_path / "store", "json", **options)
    assert got is not None and got == _in_memory(path, tmp_path / "store", "json", **options)
    (ledger,) = ledgers
    assert len(ledger) > 1000 and ledger.dropped > len(ledger) // 2
    anchor = json.loads(got)["anchor"]
    over = {o["section"]: o for o in anchor["overflow"]}["facts_learned"]
    assert over["count"] + len(anchor["facts_learned"]) == len(ledger)
    assert len(set(over["ids"])) == over["count"] and over["steps"]


def test_a_ledger_overrun_goes_the_in_memory_way(tmp_path, monkeypatch):
    """Were the anchor to fit its bound without facts the fold let go (the ledger's guard), the
    fold writes nothing and leaves the file to the in-memory path, which holds every fact."""
    from compactor.anchor.ledger import FactLedger, LedgerOverrun

    def overrun(self, tokens):
        raise LedgerOverrun("test")

    monkeypatch.setattr(FactLedger, "check_overflowing", overrun)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_exercised(), indent=2), encoding="utf-8")
    assert _streamed(path, tmp_path / "store", "json") is None


def test_both_paths_take_the_rooms_own_steps(tmp_path, monkeypatch):
    """One copy of each room's logic: the older-output pass's steps (``OlderPass``) and the
    self-check's verdict on a span (``span_held``) decide for the in-memory pipeline and for the
    fold alike, on the same segments, with the same answers."""
    from compactor.audit import selfcheck
    from compactor.collapse import older

    log: dict[str, list] = {"memory": [], "stream": []}
    now = ["memory"]
    result, call, held = older.OlderPass.result, older.OlderPass.call, selfcheck.span_held

    def result_step(self, seg, text, spans, **kw):
        out = result(self, seg, text, spans, **kw)
        log[now[0]].append(("result", seg.id, kw["old"], kw["failing"], out))
        return out

    def call_step(self, seg, text):
        out = call(self, seg, text)
        if out is not None:  # (the fold asks only of calls with a body: the others give None)
            log[now[0]].append(("call", seg.id, out))
        return out

    def verdict(sp, seg, file_result):
        ok = held(sp, seg, file_result)
        log[now[0]].append(("held", sp.segment_id, sp.start, sp.rule_id, ok))
        return ok

    monkeypatch.setattr(older.OlderPass, "result", result_step)
    monkeypatch.setattr(older.OlderPass, "call", call_step)
    monkeypatch.setattr(selfcheck, "span_held", verdict)
    path = tmp_path / "t.json"
    msgs = _exercised()
    # an error an agent restates is not evidence (a verdict of False)
    msgs.insert(-1, {"role": "assistant", "content": "It failed with:\n" + _TRACE.format(n=41)})
    path.write_text(json.dumps(msgs, indent=2), encoding="utf-8")
    mem = _in_memory(path, tmp_path / "store", "json")
    now[0] = "stream"
    assert _streamed(path, tmp_path / "store", "json") == mem
    m, s = log["memory"], log["stream"]
    assert [x for x in m if x[0] == "result"] == [x for x in s if x[0] == "result"]
    assert sum(1 for x in m if x[0] == "result" and x[-1] is not None) >= 3
    assert sorted(x for x in m if x[0] == "call") == sorted(x for x in s if x[0] == "call") != []
    assert set(x for x in m if x[0] == "held") == set(x for x in s if x[0] == "held")
    assert any(x[-1] for x in s if x[0] == "held") and not all(x[-1] for x in s if x[0] == "held")


# ---------------------------------------------------------------------------- what does not stream


def _write(tmp_path: Path, data, name="t.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return p


_CHAT = [{"role": "user", "content": "Fix it."},
         {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "type": "function",
                                                              "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
         {"role": "tool", "tool_call_id": "a", "content": "x.py"}]


@pytest.mark.parametrize("case", ["call id twice", "two outputs", "output first", "budget", "anthropic", "steps",
                                  "empty", "trailing garbage", "not chat", "redact", "level 2", "system key"])
def test_what_could_differ_goes_the_in_memory_way(tmp_path, case):
    data: object = [dict(m) for m in _CHAT]
    options: dict = {}
    if case == "call id twice":
        data.append(dict(_CHAT[1]))
    elif case == "two outputs":
        data.append(dict(_CHAT[2]))
    elif case == "output first":
        data = [_CHAT[0], _CHAT[2], _CHAT[1]]
    elif case == "budget":
        options["budget"] = 50
    elif case == "anthropic":
        data[1] = {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "bash", "input": {}}]}
    elif case == "steps":
        data = [{"step": 1, "action": "ls", "observation": "x.py", "role": "assistant"}]
    elif case == "empty":
        data = []
    elif case == "not chat":
        data = [{"speaker": "user", "text": "hi"}]
    elif case == "redact":
        options["redact"] = True
    elif case == "level 2":
        options["level"] = 2
    elif case == "system key":
        data = {"system": "be brief", "messages": data}
    path = _write(tmp_path, data)
    if case == "trailing garbage":
        path.write_text(path.read_text() + "\n[1]\n")
    assert _streamed(path, tmp_path / "store", "json", **options) is None
    assert streamable_config(Compactor(**options).config) is None or options


def test_a_replaced_stage_goes_the_in_memory_way(tmp_path):
    path = _write(tmp_path, _CHAT)
    comp = Compactor(store=str(tmp_path / "store"))
    comp.stages["refine"] = lambda state: None
    assert stream_compact(comp, path, io.StringIO().write) is None


# ---------------------------------------------------------------------------- the corpus


def _chat_corpus(corpus: Path) -> list[Path]:
    return sorted(p for p in (corpus / "mini-swe-agent").glob("*.json"))


def test_corpus_chat_trajectories_stream_to_the_same_bytes(corpus, tmp_path):
    files = _chat_corpus(corpus)
    assert files
    for path in files:
        for emit in ("json", "messages"):
            got = _streamed(path, tmp_path / "store", emit)
            assert got is not None, path
            assert got == _in_memory(path, tmp_path / "store", emit), path
        # and as a bare message list
        bare = _write(tmp_path, json.loads(path.read_text(encoding="utf-8"))["messages"], "bare.json")
        got = _streamed(bare, tmp_path / "store", "json", keep_recent=1)
        assert got is not None and got == _in_memory(bare, tmp_path / "store", "json", keep_recent=1), path


# ---------------------------------------------------------------------------- the command line


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor", *args], capture_output=True, text=True, cwd=str(cwd))


def test_cli_streams_and_matches_the_in_memory_run(tmp_path, corpus, monkeypatch):
    """A JSON chat trajectory of at least ``FOLD_MIN_BYTES`` is compacted by the fold, a smaller
    one in memory (the fold costs CPU time a small file's memory does not repay); the bytes are the
    in-memory run's either way. The threshold is lowered to 1 MB here (16 MB by default): the
    choice is the same comparison."""
    import compactor
    from compactor import cli, streaming

    STREAM_MIN_BYTES = 1024**2
    monkeypatch.setattr(streaming, "FOLD_MIN_BYTES", STREAM_MIN_BYTES)

    data = json.loads(_chat_corpus(corpus)[0].read_text(encoding="utf-8"))
    small = tmp_path / "small.json"
    small.write_text(json.dumps(data), encoding="utf-8")
    big = tmp_path / "big.json"
    msgs = []
    for k in range(STREAM_MIN_BYTES // small.stat().st_size + 1):  # the conversation again, its call ids renamed
        for m in data["messages"]:
            m = json.loads(json.dumps(m))
            for c in m.get("tool_calls") or []:
                c["id"] = f"{c['id']}-{k}"
            if m.get("tool_call_id"):
                m["tool_call_id"] = f"{m['tool_call_id']}-{k}"
            msgs.append(m)
    data["messages"] = msgs
    big.write_text(json.dumps(data), encoding="utf-8")
    assert small.stat().st_size < STREAM_MIN_BYTES <= big.stat().st_size
    streamed: list = []
    real = streaming.stream_compact

    def spy(*a, **k):
        report = real(*a, **k)
        streamed.append(report is not None)
        return report

    monkeypatch.setattr(streaming, "stream_compact", spy)
    monkeypatch.setattr(compactor, "stream_compact", spy, raising=False)
    store = str(tmp_path / "store")
    for src, fold in ((big, True), (small, False)):
        a, b = tmp_path / "a.json", tmp_path / "b.json"
        streamed.clear()
        assert cli.main(["compact", str(src), "-o", str(a), "--store", store]) == 0
        assert streamed == [fold]
        r2 = _cli("compact", str(src), "-o", str(b), "--store", store, "--stream", "never")
        assert r2.returncode == 0, r2.stderr
        assert a.read_bytes() == b.read_bytes()
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize("cut", [0.5, 0.999])
def test_truncated_json_names_the_place_and_leaves_no_output(tmp_path, cut):
    msgs = [{"role": "user", "content": f"message {i} " + "x" * 50} for i in range(200)]
    text = json.dumps(msgs, indent=2)
    bad = tmp_path / "bad.json"
    bad.write_text(text[:int(len(text) * cut)], encoding="utf-8")
    out = tmp_path / "out.json"
    out.write_text("previous output\n")
    r = _cli("compact", str(bad), "-o", str(out), "--store", str(tmp_path / "store"))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "line " in lines[0] and "column " in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert out.read_text() == "previous output\n"  # the old output is left whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json", "out.json", "store"] or \
        sorted(p.name for p in tmp_path.iterdir()) == ["bad.json", "out.json"]


def test_a_failed_write_leaves_no_half_file(tmp_path, monkeypatch):
    """A compaction that fails after output began (here: the encoder raises mid-way) leaves neither
    the half-written output nor its temporary file."""
    from compactor import cli, emit

    src = _write(tmp_path, _CHAT)
    out = tmp_path / "out.json"
    calls = {"n": 0}
    real = emit.write_json

    def failing(obj, write, piece_size=1 << 20):
        def w(text):
            calls["n"] += 1
            write(text)
            raise OSError(28, "No space left on device")
        real(obj, w, piece_size)

    monkeypatch.setattr(emit, "write_json", failing)
    code = cli.main(["compact", str(src), "-o", str(out), "--store", str(tmp_path / "store")])
    assert code != 0 and calls["n"] == 1
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []


# ---------------------------------------------------------------------------- the self-check's pass over the output

_WORDS = st.sampled_from(["error", "Error:", "KeyError", "x", "line 12", "  ", "\n", "\t", "src/a.py:3", "ß", "SS",
                          "Σ", "naïve", "…", "\x1b[31m", "\r\n", "token_7", "the", "failed", "retry"])
_TEXT = st.lists(_WORDS, max_size=12).map("".join)


@settings(max_examples=150, deadline=None)
@given(pieces=st.lists(_TEXT, min_size=1, max_size=6), needles=st.lists(_TEXT, min_size=1, max_size=5),
       prefix=st.sampled_from([0, 3, 60]))
def test_the_output_pass_answers_as_the_in_memory_output(pieces, needles, prefix):
    """``has``, ``has_span`` and ``has_words`` over the spooled texts (asked, scanned, asked again)
    give the answers of the self-check's in-memory view of the same output."""
    from compactor.audit.selfcheck import _Output
    from compactor.models import Span
    from compactor.normalize import normalize
    from compactor.audit.scan import OutputScan, ScannedOutput

    kept = {f"m{i}": p for i, p in enumerate(pieces)}
    mem = _Output(kept, None)
    norm = {sid: normalize(t) for sid, t in kept.items()}
    spans = [Span(rule_id="error.keyword", family="error", segment_id=f"m{i % (len(pieces) + 1)}", start=0,
                  end=max(1, len(t)), line_start=1, line_end=1, text=t) for i, t in enumerate(needles)]
    finder = OutputScan()
    own = {sid: norm[sid] for sid in list(norm)[:1]}  # the streamed side knows only the request's own text

    def ask(out):
        return ([out.has(t, prefix=prefix, own="m0") for t in needles] + [out.has(t, prefix=prefix) for t in needles]
                + [out.has_span(sp) if sp.segment_id in own or sp.segment_id not in norm else None for sp in spans]
                + [out.has_words(t) for t in needles])

    streamed = ScannedOutput(own, finder)
    elsewhere = ScannedOutput({}, finder)  # a span not in its own text: asked of the whole output
    ask(streamed)
    for sp in spans:
        elsewhere.has_span(sp)
    finder.scan(iter(norm.values()))
    got = ask(streamed)
    want = ask(mem)
    # has_span of a span whose own text the streamed side does not hold is asked only after its own
    # text failed (the fold's check): compare those on the spans the fold would pass on
    for i, sp in enumerate(spans):
        k = 2 * len(needles) + i
        if got[k] is None:
            o = norm.get(sp.segment_id)
            if o is not None and sp.text in o:
                continue
            got[k] = ScannedOutput({}, finder).has_span(sp)
            want[k] = mem.has_span(sp)
    assert got == want


def test_the_fold_reaches_no_private_name_of_another_room():
    """The fold calls the rooms' public steps: no ``_private`` name imported from another module of
    the package, nor read off an imported module (``older._digest``) or the compactor it is given."""
    import ast

    import compactor.streaming as streaming

    tree = ast.parse(Path(streaming.__file__).read_text(encoding="utf-8"))
    modules: set[str] = set()
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("compactor")):
            for alias in node.names:
                if alias.name.startswith("_"):
                    bad.append(f"line {node.lineno}: imports {alias.name}")
                modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                and isinstance(node.value, ast.Name) and (node.value.id in modules or node.value.id == "comp"):
            bad.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    assert not bad, "\n".join(bad)
