"""compactor batch: the pure record core, the CLI over files, resume, bad files, determinism."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sys
from pathlib import Path

import pytest

from compactor import cli
from compactor.batch import RESULT_COLUMNS, BatchConfig, compact_batch, compact_record, discover, iter_jsonl

from conftest import CORPUS, ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from batch_records import make_records  # noqa: E402

FIX = ROOT / "fixtures"


def _tree(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _batch(args: list[str], capsys) -> tuple[int, str, str]:
    rc = cli.main(["batch", *args, "--no-progress"])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _compact_one(path: str, out: Path, store: Path, capsys) -> tuple[int, bytes | None, str]:
    rc = cli.main(["compact", path, "--emit", "messages", "-o", str(out), "--store", str(store)])
    err = capsys.readouterr().err
    return rc, (out.read_bytes() if rc == 0 else None), err


# ---------------------------------------------------------------------------- whole corpus


@pytest.mark.slow
@pytest.mark.corpus
def test_corpus_same_bytes_with_1_and_2_workers_and_as_one_file_compaction(tmp_path, capsys, monkeypatch):
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus not available")
    store = tmp_path / "store.sqlite"
    a, b = tmp_path / "w1", tmp_path / "w2"
    rc1, out1, err1 = _batch([str(CORPUS), "--out", str(a), "--workers", "1", "--store", str(store)], capsys)
    rc2, out2, err2 = _batch([str(CORPUS), "--out", str(b), "--workers", "2", "--store", str(store)], capsys)
    ta, tb = _tree(a), _tree(b)
    assert ta == tb  # every output and the report, byte for byte
    assert rc1 == rc2
    assert sorted(err1.splitlines()) == sorted(err2.replace(str(b), str(a)).splitlines())
    assert "Traceback" not in err1 + err2
    entries = list(iter_jsonl(a / "report.jsonl"))
    files = sorted(p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*")
                   if p.is_file() and not any(part.startswith(".") for part in p.relative_to(CORPUS).parts))
    assert [e["input"] for e in entries] == files  # every file once, in name order
    failed = [e for e in entries if not e["ok"]]
    assert rc1 == (2 if failed else 0)
    assert len(failed) < len(entries) // 2
    assert "total" in out1 and f"{len(entries)} files" in out1
    # one-file compaction of each input (run from the corpus root so error texts name the same path)
    monkeypatch.chdir(CORPUS)
    single = tmp_path / "single.out"
    for e in entries:
        rc, data, err = _compact_one(e["input"], single, store, capsys)
        if e["ok"]:
            assert rc == 0, (e["input"], err)
            assert ta[e["output"]] == data, e["input"]
            assert e["output_sha256"] and e["tokens_before"] > 0 and e["tokens_after"] > 0
            assert e["layout"] and e["level"] in (0, 1, 2, 3)
            assert e["protected"] == sum(e["evidence"].values())
        else:
            assert rc == e["error_code"] == 2, e["input"]
            assert err.strip() == f"compactor: {e['error']}"
            assert e["output"] is None and e["input"] not in ta
            assert f"compactor: {e['error']}" in err1
    # the report counts tokens on the written files, not internally
    from compactor import get_counter

    counter = get_counter("cl100k_base")
    for e in [x for x in entries if x["ok"]][:5]:
        assert e["tokens_after"] == counter.count(ta[e["output"]].decode("utf-8"))
        assert e["tokens_before"] == counter.count((CORPUS / e["input"]).read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------- resume


def _small_inputs(d: Path) -> list[str]:
    d.mkdir()
    (d / "sub").mkdir()
    shutil.copy(FIX / "demo" / "debug-session.openai.json", d / "debug-session.openai.json")
    shutil.copy(FIX / "anchor" / "refactor.swe-agent.traj", d / "sub" / "refactor.swe-agent.traj")
    shutil.copy(FIX / "fatal" / "crlf-progress.log", d / "sub" / "crlf-progress.log")
    recs = make_records(5, seed=3, scale=0.5)
    (d / "rollout.json").write_text(recs[0]["text"], encoding="utf-8")
    (d / "ci.log").write_text(recs[4]["text"], encoding="utf-8")
    return sorted(["ci.log", "debug-session.openai.json", "rollout.json", "sub/crlf-progress.log", "sub/refactor.swe-agent.traj"])


def test_resume_skips_finished_inputs_by_content_hash(tmp_path, capsys, monkeypatch):
    import compactor.batch as batch

    src, out = tmp_path / "in", tmp_path / "out"
    names = _small_inputs(src)
    store = str(tmp_path / "store")
    calls: list[str] = []
    real = batch.compact_record

    def counting(record, config=None):
        calls.append(record["id"])
        return real(record, config)

    monkeypatch.setattr(batch, "compact_record", counting)
    args = [str(src), "--out", str(out), "--workers", "1", "--store", store, "-q"]

    assert _batch(args, capsys)[0] == 0
    assert sorted(calls) == names
    first = _tree(out)
    report = [json.loads(x) for x in first["report.jsonl"].decode().splitlines()]
    assert [e["input"] for e in report] == names and not any(e["skipped"] for e in report)
    mtimes = {n: (out / n).stat().st_mtime_ns for n in names}

    # 1. nothing changed: nothing is compacted again, outputs untouched
    calls.clear()
    assert _batch(args, capsys)[0] == 0
    assert calls == []
    again = [json.loads(x) for x in (out / "report.jsonl").read_text().splitlines()]
    assert all(e["skipped"] for e in again)
    assert [{**e, "skipped": False} for e in again] == report
    assert {n: (out / n).stat().st_mtime_ns for n in names} == mtimes

    # 2. one input changed, one output deleted, one output tampered with: exactly those three redone
    (src / "ci.log").write_text((src / "ci.log").read_text() + "Error: one more line\n", encoding="utf-8")
    (out / "rollout.json").unlink()
    with open(out / "sub" / "crlf-progress.log", "a") as fh:
        fh.write("x")
    calls.clear()
    assert _batch(args, capsys)[0] == 0
    assert sorted(calls) == ["ci.log", "rollout.json", "sub/crlf-progress.log"]
    now = _tree(out)
    assert now["rollout.json"] == first["rollout.json"] and now["sub/crlf-progress.log"] == first["sub/crlf-progress.log"]
    assert b"Error: one more line" in now["ci.log"]

    # 3. an interrupted run: the report holds one finished entry and half a line
    lines = (out / "report.jsonl").read_text().splitlines()
    (out / "report.jsonl").write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2], encoding="utf-8")
    calls.clear()
    assert _batch(args, capsys)[0] == 0
    assert sorted(calls) == names[1:]
    assert len((out / "report.jsonl").read_text().splitlines()) == len(names)

    # 4. other options (a different output) or --no-resume: everything again
    calls.clear()
    assert _batch([*args, "--level", "0"], capsys)[0] == 0
    assert sorted(calls) == names
    calls.clear()
    assert _batch([*args, "--no-resume"], capsys)[0] == 0
    assert sorted(calls) == names
    assert _tree(out)["debug-session.openai.json"] == first["debug-session.openai.json"]


# ---------------------------------------------------------------------------- bad files


def test_bad_files_are_reported_and_the_rest_complete(tmp_path, capsys, monkeypatch):
    src, out = tmp_path / "in", tmp_path / "out"
    good = _small_inputs(src)
    shutil.copy(FIX / "fatal" / "truncated.jsonl", src / "truncated.jsonl")
    shutil.copy(FIX / "fatal" / "deep-nesting.json", src / "deep-nesting.json")
    (src / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    (src / "empty.json").write_bytes(b"")
    (src / "broken.json").write_text('[{"role": "user", "content": "hi"}, {"role": ', encoding="utf-8")
    bad = ["broken.json", "deep-nesting.json", "empty.json", "image.png", "truncated.jsonl"]
    store = str(tmp_path / "store")
    rc, stdout, err = _batch([str(src), "--out", str(out), "--workers", "2", "--store", store], capsys)
    assert rc == 2
    assert "Traceback" not in err
    err_lines = [x for x in err.splitlines() if x.startswith("compactor: ")]
    for name in bad:
        assert sum(1 for x in err_lines if x.startswith(f"compactor: {name}")) == 1, (name, err)
    assert "5 of 10 inputs failed" in err
    entries = {e["input"]: e for e in iter_jsonl(out / "report.jsonl")}
    assert sorted(entries) == sorted(good + bad)
    for name in bad:
        assert not entries[name]["ok"] and entries[name]["error"].startswith(name) and entries[name]["error_code"] == 2
        assert not (out / name).exists()
    assert "line 2" in entries["truncated.jsonl"]["error"] and "byte" in entries["image.png"]["error"]
    monkeypatch.chdir(src)
    for name in good:
        assert entries[name]["ok"]
        rc1, data, _ = _compact_one(name, tmp_path / "one.out", Path(store), capsys)
        assert rc1 == 0 and (out / name).read_bytes() == data
    assert "(failed)" in stdout and "5" in stdout
    # a rerun retries the bad ones only
    (src / "broken.json").write_text('[{"role": "user", "content": "hi"}]', encoding="utf-8")
    rc, _, err = _batch([str(src), "--out", str(out), "--workers", "1", "--store", store, "-q"], capsys)
    entries = {e["input"]: e for e in iter_jsonl(out / "report.jsonl")}
    assert rc == 2 and entries["broken.json"]["ok"] and not entries["broken.json"]["skipped"]
    assert all(entries[n]["skipped"] for n in good)


def test_usage_errors_are_one_line_exit_2(tmp_path, capsys):
    rc, _, err = _batch([str(tmp_path / "missing"), "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and err.count("\n") == 1 and "missing" in err and "no such file" in err
    rc, _, err = _batch([str(tmp_path / "*.nothing"), "--out", str(tmp_path / "o")], capsys)
    assert rc == 2 and "no file matches" in err
    (tmp_path / "a.log").write_text("error: x\n")
    rc, _, err = _batch([str(tmp_path / "a.log"), "--out", str(tmp_path / "o"), "--workers", "0"], capsys)
    assert rc == 2 and "--workers" in err
    (tmp_path / "report.jsonl").write_text("ok\n")
    rc, _, err = _batch([str(tmp_path / "report.jsonl"), "--out", str(tmp_path)], capsys)
    assert rc == 2 and "would overwrite the report" in err


def test_discover_names_globs_and_exclusions(tmp_path):
    (tmp_path / "a" / "x").mkdir(parents=True)
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "x" / "run.json").write_text("[]")
    (tmp_path / "a" / "notes.md").write_text("hi")
    (tmp_path / "a" / ".hidden.json").write_text("[]")
    (tmp_path / "b" / "run.json").write_text("[]")
    got = discover([str(tmp_path / "b"), str(tmp_path / "a")])
    assert [n for _, n in got] == ["a/notes.md", "a/x/run.json", "b/run.json"]
    got = discover([str(tmp_path / "a")], include=["*.json"])
    assert [n for _, n in got] == ["x/run.json"]
    got = discover([str(tmp_path / "**" / "*.json")])
    assert [n for _, n in got] == ["a/x/run.json", "b/run.json"]
    got = discover([str(tmp_path)], exclude_dirs=[tmp_path / "a"])
    assert [n for _, n in got] == ["b/run.json"]
    # the same file twice is one input
    assert len(discover([str(tmp_path / "b" / "run.json"), str(tmp_path / "b")])) == 1


# ---------------------------------------------------------------------------- the pure core


def test_compact_record_payload_kinds_agree(tmp_path):
    text = (FIX / "demo" / "debug-session.openai.json").read_text(encoding="utf-8")
    path = tmp_path / "run.json"
    path.write_text(text, encoding="utf-8")
    cfg = BatchConfig()
    rows = compact_batch([{"id": "t", "text": text}, {"id": "t", "data": text.encode()},
                          {"id": "t", "bytes": bytearray(text.encode())}, {"id": "t", "path": str(path)},
                          {"path": "t", "text": text}], cfg)
    assert all(list(r) == list(RESULT_COLUMNS) for r in rows)
    assert all(r == rows[0] for r in rows), [r["error"] for r in rows]
    assert rows[0]["ok"] and rows[0]["level"] >= 1 and rows[0]["tokens_after"] < rows[0]["tokens_before"]
    parsed = compact_record({"id": "t", "messages": json.loads(text)}, cfg)
    # the same messages; written in the file's own layout for its text (escaped non-ASCII, no final
    # newline), in the layout's default for objects
    assert not text.endswith("\n") and not rows[0]["output"].endswith("\n") and rows[0]["output"].isascii()
    assert parsed["ok"] and json.loads(parsed["output"]) == json.loads(rows[0]["output"])
    assert parsed["output"] == json.dumps(json.loads(rows[0]["output"]), ensure_ascii=False, indent=2) + "\n"


def test_compact_record_never_raises_on_bad_records():
    cfg = BatchConfig()
    bad = [None, "just a string", {}, {"id": "x"}, {"id": "x", "text": 3}, {"id": "x", "data": "str"},
           {"id": "x", "messages": "nope"}, {"id": "x", "path": "/nonexistent/file.json"},
           {"id": "x", "text": ""}, {"id": "x", "text": "[" * 5000}, {"id": "x", "data": b"\x00\x01\x02" * 100}]
    rows = compact_batch(bad, cfg)
    for rec, row in zip(bad, rows):
        assert row["ok"] is False and row["error"] and row["output"] is None, rec
        assert row["error_code"] in (1, 2)
    assert rows[-1]["error"].startswith("x") and rows[-1]["input_sha256"]


def test_record_output_does_not_depend_on_what_the_worker_did_before():
    recs = make_records(30, seed=11, scale=0.3)
    cfg = BatchConfig()
    fwd = compact_batch(recs, cfg)
    back = compact_batch(list(reversed(recs)), cfg)[::-1]
    assert fwd == back
    # Level 3 with a hand-off counter: each record is its own conversation
    text = (FIX / "demo" / "debug-session.openai.json").read_text(encoding="utf-8")
    tight = BatchConfig.from_options(budget=700, emit="json")
    a, b, c = compact_batch([{"id": "r", "text": text}] * 3, tight)
    assert a["ok"] and a["level"] == 3, a["error"]
    assert a == b == c
    # a record that continues another one (the compactor caches the earlier anchor): same result
    # whichever comes first
    msgs = json.loads(text)
    short, full = {"id": "s", "messages": msgs[: len(msgs) // 2]}, {"id": "f", "messages": msgs}
    as_json = BatchConfig.from_options(emit="json", level=2)
    x1, y1 = compact_batch([short, full], as_json)
    y2, x2 = compact_batch([full, short], as_json)
    import compactor.batch as batch

    alone = []
    for r in (short, full):
        batch._WORKERS.clear()  # a fresh process
        alone.append(compact_record(r, as_json))
    assert x1 == x2 and y1 == y2 and [x1, y1] == alone and x1["ok"] and y1["ok"]


def test_config_is_frozen_validated_and_picklable():
    cfg = BatchConfig.from_options(level=1, keep_recent=1, emit="messages")
    assert pickle.loads(pickle.dumps(cfg)) == cfg
    assert pickle.loads(pickle.dumps(compact_record)) is compact_record
    with pytest.raises(Exception):
        cfg.emit = "json"  # type: ignore[misc]
    from compactor import ConfigError

    with pytest.raises(ConfigError, match="keep_recent"):
        BatchConfig.from_options(keep_recent=-1)
    with pytest.raises(Exception):
        BatchConfig(emit="pdf")  # type: ignore[arg-type]
    assert cfg.fingerprint() == BatchConfig.from_options(level=1, keep_recent=1, store="/elsewhere").fingerprint()
    assert cfg.fingerprint() != BatchConfig.from_options(level=1, keep_recent=2).fingerprint()


def test_emit_kinds_get_distinct_names(tmp_path, capsys):
    src = tmp_path / "in"
    _small_inputs(src)
    out = tmp_path / "out"
    rc, _, _ = _batch([str(src / "debug-session.openai.json"), "--out", str(out), "--emit", "markdown", "-q",
                       "--store", str(tmp_path / "s")], capsys)
    assert rc == 0
    md = (out / "debug-session.openai.json.anchor.md").read_text()
    assert md.startswith("#") or "##" in md
    assert not (out / "debug-session.openai.json").exists()
    assert sorted(os.listdir(out)) == ["debug-session.openai.json.anchor.md", "report.jsonl"]


def test_report_inside_an_input_dir_is_not_an_input(tmp_path, capsys):
    src = tmp_path / "in"
    names = _small_inputs(src)
    args = [str(src), "--out", str(tmp_path / "out"), "--report", str(src / "report.jsonl"), "-q",
            "--store", str(tmp_path / "s"), "--workers", "1"]
    assert _batch(args, capsys)[0] == 0
    assert _batch(args, capsys)[0] == 0
    assert [e["input"] for e in iter_jsonl(src / "report.jsonl")] == names


def test_errors_without_a_source_still_name_the_record():
    text = (FIX / "demo" / "debug-session.openai.json").read_text(encoding="utf-8")
    row = compact_record({"id": "runs/a.json", "text": text}, BatchConfig.from_options(level=0, emit="anchor"))
    assert not row["ok"] and row["error"].startswith("runs/a.json: ") and "anchor" in row["error"]


@pytest.mark.corpus
def test_trim_mode_over_ci_logs_equals_compactor_trim(tmp_path, capsys, monkeypatch):
    root = CORPUS / "ci-breakages"
    if not root.is_dir():
        pytest.skip("../shared/corpus not available")
    logs = sorted(str(p) for p in root.glob("*/fail.log"))
    assert len(logs) > 5
    bad = tmp_path / "core.bin"
    bad.write_bytes(b"\x7fELF" + b"\x00" * 4000)
    a, b = tmp_path / "a", tmp_path / "b"
    rc1, _, err1 = _batch([*logs, str(bad), "--trim", "--out", str(a), "--workers", "1", "-q"], capsys)
    rc2, _, _ = _batch([*logs, str(bad), "--trim", "--out", str(b), "--workers", "2", "-q"], capsys)
    assert rc1 == rc2 == 2 and "binary data" in err1
    assert _tree(a) == _tree(b)
    entries = {e["input"]: e for e in iter_jsonl(a / "report.jsonl")}
    base = Path(os.path.commonpath([str(Path(p).resolve().parent) for p in [*logs, str(bad)]]))
    assert not entries[bad.resolve().relative_to(base).as_posix()]["ok"]
    monkeypatch.chdir(tmp_path)
    for log in logs:
        name = Path(log).resolve().relative_to(base).as_posix()
        e = entries[name]
        assert e["ok"] and e["layout"] == "log" and e["tokens_after"] < e["tokens_before"], name
        assert cli.main(["trim", log, "-o", str(tmp_path / "one.log")]) == 0
        assert (a / name).read_bytes() == (tmp_path / "one.log").read_bytes(), name
    capsys.readouterr()
