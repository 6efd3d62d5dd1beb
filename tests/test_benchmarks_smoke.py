"""Smoke test of the benchmark scripts: --quick mode, JSON shape, sane values (< 30 s)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"

pytestmark = pytest.mark.skipif(not (BENCH / "evaluate.py").exists(), reason="benchmarks/ not present")


def _run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, *args], cwd=str(ROOT), capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr[-2000:]
    return p


def test_evaluate_quick(tmp_path):
    out = tmp_path / "evaluate.json"
    p = _run([str(BENCH / "evaluate.py"), "--quick", "--out", str(out)])
    assert "#### Default settings" in p.stdout
    res = json.loads(out.read_text(encoding="utf-8"))
    assert res["benchmark"] == "evaluate" and res["quick"] is True
    assert res["files"], "no file evaluated"
    for f in res["files"]:
        assert "error" not in f, f
        assert f["tokens_before"] > 0
        assert set(f["methods"]) >= {"none", "truncate@50%", "mask(last 10)", "head+tail(20)", "compactor L1", "compactor L2", "compactor L3@25%"}
        none = f["methods"]["none"]
        assert none["tokens"] == f["tokens_before"]
        for cat, (found, total) in none["recall"].items():
            assert found == total, (f["file"], cat)  # no compaction keeps everything
        l1 = f["methods"]["compactor L1"]
        assert "tokens" in l1, l1
        assert 0 < l1["tokens"] <= f["tokens_before"]
        assert set(f["equal_budget"]) >= {"L1", "25%"}
        for name, eb in f["equal_budget"].items():
            for meth in ("truncate", "mask", "head+tail"):
                assert eb[meth]["tokens"] <= eb["budget"] or meth != "truncate", (name, meth)

    # compactor Level 1 keeps every error line of the fixtures, and compresses
    fx = [f for f in res["files"] if f["source"].startswith("fixtures")]
    assert fx
    found = sum(f["methods"]["compactor L1"]["recall"]["error_lines"][0] for f in fx)
    total = sum(f["methods"]["compactor L1"]["recall"]["error_lines"][1] for f in fx)
    assert total > 0 and found == total, [f["methods"]["compactor L1"].get("missed") for f in fx]
    summ = res["summary"]["all"]["default"]
    assert summ["compactor L1"]["ratio"] > 1.0
    assert summ["none"]["ratio"] == 1.0
    assert summ["mask(last 10)"]["files"] == len(res["files"])


def test_bench_speed_quick(tmp_path):
    out = tmp_path / "speed.json"
    p = _run([str(BENCH / "bench_speed.py"), "--quick", "--out", str(out)])
    assert "trim" in p.stdout
    res = json.loads(out.read_text(encoding="utf-8"))
    assert res["benchmark"] == "speed" and res["quick"] is True
    assert res["machine"]["nproc"] >= 1 and res["machine"]["python"]
    logs = res["logs"]["sizes"]
    assert list(logs) == ["1MB"]
    r = logs["1MB"]
    for mode in ("trim", "splitlines", "drain3", "tiktoken"):
        assert "error" not in r[mode], r[mode]
        assert r[mode]["mb_per_s"] > 0 and r[mode]["peak_rss_mb"] > 0, (mode, r[mode])
    assert r["trim"]["lines"] == r["generated"]["lines"] or r["trim"]["lines"] >= r["generated"]["lines"] - 1
    assert 0 < r["trim"]["bytes_out"] < r["trim"]["bytes"]
    assert r["ratios"]["trim_vs_drain3_same_lines"] > 0
    tr = res["trajectories"]
    assert tr["files"] and tr["compact_mb_s"] > 0
    t = res["turns"]["level1"]
    assert t["samples"] >= 10
    assert 0 < t["compact_ms"]["p50"] <= t["compact_ms"]["p99"]
    assert t["json_dumps_ms"]["p50"] > 0


def test_bench_memory_quick(tmp_path):
    out = tmp_path / "memory.json"
    p = _run([str(BENCH / "bench_memory.py"), "--mb", "1", "--kind", "large", "--tmp", str(tmp_path),
              "--json", str(out)], timeout=300)
    assert "compact peak RSS" in p.stdout
    res = json.loads(out.read_text(encoding="utf-8"))
    row = res["inputs"]["large"]
    assert row["input_mb"] >= 1.0 and (row["output_bytes"] or 0) > 1000
    assert row["compact"]["exit"] == 0 and row["compact"]["peak_rss_mb"] > row["import_only"]["peak_rss_mb"]
    assert not any(tmp_path.glob("compactor-mem-*")), "the generated inputs must be deleted"


def test_bench_memory_inputs_are_chat_trajectories(tmp_path):
    sys.path.insert(0, str(BENCH))
    try:
        from bench_memory import generate
    finally:
        sys.path.remove(str(BENCH))
    from compactor.formats import read_document
    from compactor.formats.inputs import probe_file

    for kind in ("small", "large"):
        path = tmp_path / f"{kind}.json"
        size = generate(path, kind, 300_000)
        assert size >= 300_000
        doc = read_document(probe_file(path))
        assert doc.format == "openai-chat"
        results = [s for s in doc.segments if s.kind.value == "tool_result"]
        assert results and all(s.call_id for s in results)
        longest = max(len(s.text) for s in results)
        assert (longest < 20_000) if kind == "small" else (longest > 900_000 or size < 1_000_000)
