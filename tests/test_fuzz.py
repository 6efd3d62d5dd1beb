"""Fuzz and property tests: readers never raise outside the error tree; compaction keeps every
protected span verbatim, expands exactly, is idempotent, never grows, and is deterministic."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from compactor import CompactorError, Compactor, load_document
from compactor.syntax import PLACEHOLDER_RE

ROOT = Path(__file__).resolve().parents[1]
SEEDS = sorted((ROOT / "fixtures").rglob("*.json")) + sorted((ROOT / "fixtures").rglob("*.jsonl"))
SEED_BYTES = [p.read_bytes() for p in SEEDS[:12]] or [b'[{"role":"user","content":"hi"}]']

COMP = Compactor(keep_recent=0)


def _mutate(data: bytes, ops) -> bytes:
    b = bytearray(data)
    for kind, pos, val in ops:
        if not b:
            b = bytearray(b"{")
        p = pos % (len(b) + 1)
        if kind == "flip" and p < len(b):
            b[p] ^= 1 << (val % 8)
        elif kind == "cut":
            b = b[:p]
        elif kind == "nul":
            b[p:p] = b"\x00"
        elif kind == "surrogate":
            b[p:p] = b'"\\ud83d"'
        elif kind == "deep":
            b[p:p] = b"[" * (val * 40) + b"]" * (val * 40)
        elif kind == "bad-utf8":
            b[p:p] = b"\xff\xc3("
    return bytes(b)


OPS = st.lists(st.tuples(st.sampled_from(["flip", "cut", "nul", "surrogate", "deep", "bad-utf8"]),
                         st.integers(0, 10**7), st.integers(1, 30)), min_size=1, max_size=4)


@given(seed=st.sampled_from(SEED_BYTES), ops=OPS)
def test_readers_only_raise_the_error_tree(seed, ops):
    data = _mutate(seed, ops)
    try:
        doc = load_document(data)
    except CompactorError:
        return
    # whatever was read compacts and writes back without crashing
    res = COMP.compact(doc)
    json.dumps(res.to_json_dict(), ensure_ascii=False).encode("utf-8")


@given(st.binary(max_size=2000))
def test_random_bytes(data):
    try:
        doc = load_document(data)
    except CompactorError:
        return
    COMP.compact(doc)


BENIGN = st.sampled_from([
    "Downloading package-{n}.tar.gz ({n} kB)", "  Compiling crate-{n} v0.{n}.1", "[INFO] Building module {n}",
    "npm http fetch GET 200 https://registry.npmjs.org/pkg-{n} {n}ms", "ok {n} - test case {n}",
    "PASSED tests/test_mod_{n}.py::test_case", "progress {n}%", "", "  random text {n} here",
])
EVIDENCE = st.sampled_from([
    "Traceback (most recent call last):\n  File \"/app/db.py\", line {n}, in acquire\n    conn = pool.get()\nTimeoutError: pool_size={n}",
    "src/main.c:{n}:5: error: expected ';' before '}}' token",
    "npm ERR! code E{n}",
    "panic: runtime error: index out of range [{n}] with length 3\n\ngoroutine 1 [running]:\nmain.main()\n\t/app/main.go:{n} +0x1d",
    "Exception in thread \"main\" java.lang.IllegalStateException: bad {n}\n\tat com.x.App.run(App.java:{n})\n\tat com.x.App.main(App.java:3)",
])


@st.composite
def log_texts(draw):
    lines = []
    for _ in range(draw(st.integers(1, 120))):
        tmpl = draw(st.one_of(BENIGN, EVIDENCE)) if draw(st.integers(0, 9)) == 0 else draw(BENIGN)
        lines.append(tmpl.format(n=draw(st.integers(0, 999))))
    return "\n".join(lines)


def _conv(text: str, command: str) -> list[dict]:
    return [
        {"role": "user", "content": "please build it"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
                                                             "function": {"name": "bash", "arguments": json.dumps({"command": command})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": text},
    ]


@settings(max_examples=60)
@given(text=log_texts(), command=st.sampled_from(["npm install", "pip install -r req.txt", "make", "cargo build", "ls -R"]))
def test_compaction_properties(text, command):
    comp = Compactor(keep_recent=0)
    res = comp.compact(_conv(text, command))
    out = res.messages[2]["content"]
    # every protected span survives verbatim
    for span in res.report.protected:
        if span.segment_id == "m2":
            assert span.text in out
    # every placeholder expands to exact original bytes
    for ph in res.report.placeholders:
        original = comp.expand(ph.id)
        import hashlib

        assert hashlib.sha256(original.encode()).hexdigest() == ph.sha256
        assert original in text.replace("\r\n", "\n") or original in text
    # never longer
    assert res.report.tokens_after <= res.report.tokens_before
    # idempotent
    again = comp.compact(res.messages)
    assert again.messages == res.messages
    # deterministic
    assert Compactor(keep_recent=0).compact(_conv(text, command)).messages == res.messages


def test_fatal_corpus_regressions():
    """Every input in fixtures/fatal/ once broke something; each must end in a result or a clean error."""
    files = sorted((ROOT / "fixtures" / "fatal").glob("*"))
    files = [f for f in files if f.name != "README.md"]
    assert files, "fixtures/fatal is empty"
    import hashlib

    # what each must end in: these three are refused with one line naming the file and the place
    refused = {"deep-nesting.json", "nul-in-log.txt", "truncated.jsonl"}
    assert refused <= {f.name for f in files}
    for f in files:
        data = f.read_bytes()
        try:
            res = COMP.compact(load_document(data, source=f.name))
        except CompactorError as exc:
            assert f.name in refused, (f.name, str(exc))
            assert "\n" not in str(exc) and str(exc).startswith(f.name), str(exc)
            continue
        assert f.name not in refused, f"{f.name} was read: it must be refused"
        out = json.dumps(res.to_json_dict(), ensure_ascii=False, sort_keys=True).encode("utf-8")
        assert res.report.tokens_after <= res.report.tokens_before, f.name
        # every reference in the output is one of the report's placeholders, and each expands to
        # the exact original text, which is in the input
        shown = set(PLACEHOLDER_RE.findall(json.dumps(res.messages, ensure_ascii=False)))
        ids = {ph.id for ph in res.report.placeholders}
        assert shown <= ids, f.name
        text = data.decode("utf-8", "replace").replace("\r\n", "\n")
        for ph in res.report.placeholders:
            original = COMP.expand(ph.id)
            assert hashlib.sha256(original.encode("utf-8", "surrogatepass")).hexdigest() == ph.sha256
            assert original.replace("\r\n", "\n") in text or original in text, f.name
        # deterministic: a second compaction of the same bytes writes the same result
        again = COMP.compact(load_document(data, source=f.name))
        assert json.dumps(again.to_json_dict(), ensure_ascii=False, sort_keys=True).encode("utf-8") == out, f.name
