"""What ``compactor trim`` loads at start-up (a hook runs it on every tool call of an agent): no
typed models, no token counter, no store, no compiled literal automaton for a short log. How fast
that is lives in ``benchmarks/bench_startup.py``; this checks what is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HEAVY = ("pydantic", "tiktoken", "sqlite3", "hyperscan", "ahocorasick_rs", "tomllib", "compactor.models",
         "compactor.engine.schema", "compactor.pipeline", "compactor.anchor")

PROBE = """
import json, sys
from compactor.cli import main
rc = main(sys.argv[1:])
sys.stdout.flush()
sys.stderr.write(json.dumps([rc, sorted(m for m in sys.modules)]) + "\\n")
"""


def _run(args, tmp_path, stdin: str | None = None):
    env = {**os.environ, "COMPACTOR_CACHE": str(tmp_path / "cache"), "COMPACTOR_STORE": str(tmp_path / "store.sqlite")}
    p = subprocess.run([sys.executable, "-c", PROBE, *args], input=stdin, capture_output=True, text=True, env=env)
    rc, modules = json.loads(p.stderr.strip().splitlines()[-1])
    return rc, p.stdout, set(modules)


def _heavy(modules: set[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_trim_loads_no_typed_models_once_the_catalog_is_warm(tmp_path):
    log = tmp_path / "one.log"
    log.write_text("ok: build finished\n")
    rc, out, cold = _run(["trim", str(log)], tmp_path)
    assert rc == 0 and out == "ok: build finished\n"
    assert "pydantic" in cold  # the first run validates the rule files and writes the catalog
    rc, out, warm = _run(["trim", str(log)], tmp_path)
    assert rc == 0 and out == "ok: build finished\n"
    assert _heavy(warm) == []


def test_trim_of_a_failing_log_with_annotations_stays_light(tmp_path):
    lines = [f"step {i}: compiling module_{i}.c" for i in range(60)]
    lines += ["Traceback (most recent call last):", '  File "app/util.py", line 12, in run',
              "    return parse(x)", "ValueError: bad input", "src/app.c:12:5: error: expected ';' after expression",
              "Error: Process completed with exit code 1."]
    lines += [f"cleanup {i}" for i in range(40)]
    log = tmp_path / "fail.log"
    log.write_text("\n".join(lines) + "\n")
    _run(["trim", str(log)], tmp_path)  # warm the catalog
    rc, out, modules = _run(["trim", str(log), "--github", "--context", "1"], tmp_path)
    assert rc == 0
    assert "ValueError: bad input" in out and 'File "app/util.py", line 12' in out
    assert "::error file=src/app.c,line=12" in out
    assert len(out.splitlines()) < len(lines)  # something was folded
    assert _heavy(modules) == []
    # the same from standard input
    rc, out2, modules = _run(["trim", "--github", "--context", "1"], tmp_path, stdin=log.read_text())
    assert rc == 0 and out2 == out and _heavy(modules) == []
