"""No real input hangs the engine: every run of ``../shared/corpus`` and ``../shared/trajectories-extra``
is compacted (``compactor compact FILE -o OUT``, as a user runs it) under a wall-time limit per file.

The files are compacted one after another by one worker process, which reports each file as it
finishes; a file that takes longer than ``LIMIT_S`` fails the test (naming it) instead of blocking
the run: the worker is killed and a new one goes on with the next file. The limit is generous on
purpose (the slowest file takes a few seconds): it catches hangs, not slowness, which the
benchmarks measure."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CORPUS, ROOT

EXTRA = Path(os.environ.get("COMPACTOR_EXTRA_CORPUS", ROOT.parent / "shared" / "trajectories-extra"))
LIMIT_S = 60.0
# what the corpora hold beside the runs: their descriptions and manifests, gold labels, a scorer
NOT_RUNS = {"README.md", "SOURCES.md", "manifest.json", "score.py"}
NOT_RUN_DIRS = {"anchor-gold"}

_WORKER = r"""
import sys, time
from compactor.cli import main
out = sys.argv[1]
for line in sys.stdin:
    path = line.rstrip("\n")
    t0 = time.perf_counter()
    try:
        rc = main(["compact", path, "-o", out, "--store", sys.argv[2]])
    except SystemExit as e:
        rc = e.code
    print(f"{rc}\t{time.perf_counter() - t0:.3f}\t{path}", flush=True)
"""


def runs(*roots: Path) -> list[Path]:
    out: list[Path] = []
    for root in roots:
        if root.is_dir():
            out += sorted(p for p in root.rglob("*") if p.is_file() and p.name not in NOT_RUNS
                          and not NOT_RUN_DIRS & set(p.relative_to(root).parts))
    return out


def compact_each(files: list[Path], tmp: Path, limit_s: float = LIMIT_S) -> tuple[dict[Path, tuple[int, float]], list[Path]]:
    """({file: (exit code, seconds)}, the files that ran past ``limit_s``): each file compacted by
    a worker process, which is replaced when a file runs too long."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COMPACTOR_STORE": str(tmp / "store.sqlite")}
    done: dict[Path, tuple[int, float]] = {}
    hung: list[Path] = []
    todo = list(files)
    while todo:
        proc = subprocess.Popen([sys.executable, "-c", _WORKER, str(tmp / "out"), str(tmp / "store.sqlite")],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True, env=env, cwd=str(tmp))
        try:
            proc.stdin.write("".join(f"{p}\n" for p in todo))
            proc.stdin.close()
            while todo:
                start = time.monotonic()
                ready, _, _ = select.select([proc.stdout], [], [], limit_s)
                line = proc.stdout.readline() if ready else ""
                if not line:  # ran past the limit (or the worker died): this file is the one
                    if time.monotonic() - start >= limit_s:
                        hung.append(todo.pop(0))
                    else:
                        done[todo.pop(0)] = (-1, time.monotonic() - start)
                    break
                rc, secs, path = line.rstrip("\n").split("\t", 2)
                done[Path(path)] = (int(rc) if rc.lstrip("-").isdigit() else 1, float(secs))
                todo.remove(Path(path))
        finally:
            proc.kill()
            proc.wait()
    return done, hung


@pytest.mark.slow
@pytest.mark.corpus
def test_every_real_run_is_compacted_in_time(tmp_path):
    files = runs(CORPUS, EXTRA)
    if not files:
        pytest.skip("../shared/corpus and ../shared/trajectories-extra not available")
    done, hung = compact_each(files, tmp_path)
    assert not hung, f"ran past {LIMIT_S:.0f} s: {[str(p) for p in hung]}"
    # a result, or a clean refusal of a corrupt file (exit 2: two pi sessions hold two records on
    # one line); never an internal error
    failed = {str(p): rc for p, (rc, _s) in done.items() if rc not in (0, 2)}
    assert not failed, failed
    assert sum(rc == 0 for rc, _s in done.values()) >= len(files) - 4
    assert len(done) == len(files)


def test_a_hung_file_fails_instead_of_blocking(tmp_path, monkeypatch):
    """The watchdog itself: a worker that never answers is killed after the limit and the file
    is reported, and the files after it are still compacted."""

    slow = tmp_path / "slow.log"
    slow.write_text("ok\n", encoding="utf-8")
    fine = tmp_path / "fine.log"
    fine.write_text("FAILED tests/test_x.py::test_y - AssertionError\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "_WORKER", _WORKER.replace(
        "    t0 = time.perf_counter()", "    t0 = time.perf_counter()\n    if path.endswith('slow.log'): time.sleep(30)"))
    done, hung = compact_each([slow, fine], tmp_path, limit_s=3.0)
    assert hung == [slow]
    assert done == {fine: (0, done[fine][1])}
