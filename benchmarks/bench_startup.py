"""Start-up cost of the command line, whole process, as ratios against ``python -c pass`` measured
in the same run (interleaved, median of ``--runs``): wall time and CPU time (user + system of the
child).

- ``compactor trim`` of a one-line log (what a hook pays on every tool call), goal at most 3x;
- ``compactor compact`` of a one-message conversation, goal at most 6x.

The package is byte-compiled first (as an installed wheel is), and the rule catalog is warmed
by one untimed run (as after the first use). Then one ``python -X importtime`` run of each
command prints the modules that cost the most to import, and ``--profile`` adds the top
functions of an in-process profile.

    python benchmarks/bench_startup.py [--runs 20] [--profile]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOALS = {"trim_one_line": 3.0, "compact_one_message": 6.0}


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.decode()[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def importtime(cmd: list[str], env: dict[str, str], top: int) -> list[tuple[float, str]]:
    """(cumulative ms, module) of the costliest top-level imports of one run."""
    proc = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, env=env, text=True)
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        parts = line[len("import time:"):].split("|")
        try:
            cum = int(parts[1])
        except ValueError:
            continue
        name = parts[2].rstrip()
        depth = (len(name) - len(name.lstrip())) // 2
        if depth <= 1:
            rows.append((cum / 1000, name.strip() if depth == 0 else "  " + name.strip()))
    return sorted(rows, reverse=True)[:top]


def measure(runs: int, tmp: Path) -> tuple[dict[str, list[str]], dict[str, str], dict[str, float], dict[str, float]]:
    """(commands, environment, median wall s, median CPU s) of ``python -c pass``, ``trim`` of a
    one-line log and ``compact`` of a one-message conversation (inputs written to ``tmp``):
    byte-compiled, warmed by one untimed run, then ``runs`` interleaved runs."""
    compileall.compile_dir(str(ROOT / "compactor"), quiet=1)
    log = tmp / "one.log"
    log.write_text("ok: build finished\n", encoding="utf-8")
    conv = tmp / "one.json"
    conv.write_text(json.dumps([{"role": "user", "content": "Fix the failing test in app/util.py."}]),
                    encoding="utf-8")
    env = {**os.environ, "COMPACTOR_STORE": str(tmp / "store.sqlite")}
    cmds = {
        "python_pass": [sys.executable, "-c", "pass"],
        "trim_one_line": [sys.executable, "-m", "compactor", "trim", str(log)],
        "compact_one_message": [sys.executable, "-m", "compactor", "compact", str(conv)],
    }
    for cmd in cmds.values():  # warm: the rule catalog, the page cache
        _run(cmd, env)
    walls: dict[str, list[float]] = {k: [] for k in cmds}
    cpus: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(runs):
        for k, cmd in cmds.items():
            w, c = _run(cmd, env)
            walls[k].append(w)
            cpus[k].append(c)
    return (cmds, env, {k: statistics.median(v) for k, v in walls.items()},
            {k: statistics.median(v) for k, v in cpus.items()})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--top", type=int, default=12, help="imports listed per command")
    ap.add_argument("--profile", action="store_true", help="also print an in-process profile of each command")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "startup.json")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        cmds, env, wall, cpu = measure(args.runs, Path(tmp))
        res = {"runs": args.runs, "loadavg_1min": round(os.getloadavg()[0], 2),
               "median_wall_ms": {k: round(v * 1e3, 1) for k, v in wall.items()},
               "median_cpu_ms": {k: round(v * 1e3, 1) for k, v in cpu.items()},
               "wall_vs_python": {k: round(wall[k] / wall["python_pass"], 2) for k in GOALS},
               "cpu_vs_python": {k: round(cpu[k] / cpu["python_pass"], 2) for k in GOALS if cpu["python_pass"] > 0}}
        res["goals"] = {f"{k}_le_{g:g}x": res["wall_vs_python"][k] <= g and res["cpu_vs_python"].get(k, 0) <= g
                        for k, g in GOALS.items()}
        print(f"{'command':<22} {'wall ms':>8} {'x pass':>7} {'cpu ms':>8} {'x pass':>7}  goal")
        for k in cmds:
            goal = f"<= {GOALS[k]:g}x" if k in GOALS else ""
            print(f"{k:<22} {wall[k] * 1e3:>8.1f} {wall[k] / wall['python_pass']:>7.2f} {cpu[k] * 1e3:>8.1f} "
                  f"{cpu[k] / max(cpu['python_pass'], 1e-9):>7.2f}  {goal}")
        res["imports_ms"] = {}
        for k in GOALS:
            rows = importtime(cmds[k], env, args.top)
            res["imports_ms"][k] = [[name, round(ms, 1)] for ms, name in rows]
            print(f"\npython -X importtime, {k} (cumulative ms, top-level imports and their direct children):")
            for ms, name in rows:
                print(f"  {ms:>7.1f}  {name}")
        if args.profile:
            for k in GOALS:
                code = ("import cProfile, pstats, sys; sys.argv = " + repr(["compactor", *cmds[k][3:]])
                        + "; from compactor.cli import main; p = cProfile.Profile(); p.runcall(main); "
                          "pstats.Stats(p).sort_stats('cumtime').print_stats(25)")
                print(f"\nprofile, {k}:")
                sys.stdout.flush()
                subprocess.run([sys.executable, "-c", code], env=env)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    print("\n" + json.dumps({"wall_vs_python": res["wall_vs_python"], "cpu_vs_python": res["cpu_vs_python"],
                             "goals": res["goals"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
