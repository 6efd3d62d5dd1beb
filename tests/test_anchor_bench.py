"""Smoke test of benchmarks/bench_anchor.py: --quick runs, writes its JSON, and the numbers are sane."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_anchor.py"


@pytest.mark.slow
@pytest.mark.skipif(not SCRIPT.exists(), reason="benchmarks/bench_anchor.py not present")
def test_bench_anchor_quick(tmp_path):
    out = tmp_path / "bench_anchor.json"
    p = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--reps", "1", "--out", str(out)], cwd=str(ROOT),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "| trajectory |" in p.stdout
    res = json.loads(out.read_text(encoding="utf-8"))
    assert res["benchmark"] == "bench_anchor" and res["rows"]
    for r in res["rows"] + res["synthetic"]:
        assert r["build_ms"] > 0 and r["json_dumps_ms"] > 0 and r["build_vs_dumps"] > 0
        assert r["turns"] >= 1 and r["merge_turn_mean_ms"] >= 0
    one = [r for r in res["synthetic"] if r["trajectory"].startswith("synthetic 1 MB")]
    assert one and one[0]["bytes"] >= 1_000_000
    # how fast it builds is the benchmark's to report (ratios in one run), not a wall-clock bar
    # here: shared CI machines make absolute times noise
