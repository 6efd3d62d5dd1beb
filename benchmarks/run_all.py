"""Regenerate every benchmark figure with one command.

    python benchmarks/run_all.py              # full: evaluate + speed (20 MB, 200 MB) + the others
    python benchmarks/run_all.py --quick      # small sizes (a minute)
    python benchmarks/run_all.py --trim-gb 1  # also the 1 GB constant-memory trim run

Writes ``benchmarks/out/*.json`` and ``benchmarks/RESULTS.md`` (the "Results" section for the
README: tables, goal checks, date and machine). Every script runs in its own process; other
benchmark scripts in this folder (bench_scan.py, ci_breakages.py, bench_anchor.py,
bench_llm_tokens.py, secret_fp.py, bench_agents_filter.py) are run too when present, and their printed tables are
included.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"
sys.path.insert(0, str(HERE))

OTHERS = ("bench_scan.py", "ci_breakages.py", "bench_anchor.py", "bench_llm_tokens.py", "secret_fp.py",
          "bench_agents_filter.py")


def run(cmd: list[str], timeout: float | None = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    try:
        p = subprocess.run(cmd, cwd=str(ROOT), capture_output=True, text=True, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as exc:
        rc, out, err = -1, (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or ""), f"timed out after {timeout} s"
    dt = time.perf_counter() - t0
    if rc != 0:
        print(f"  -> exit {rc}: {(err or '').strip().splitlines()[-1:]}", file=sys.stderr)
    return {"cmd": " ".join(cmd), "returncode": rc, "stdout": out, "stderr": err, "seconds": round(dt, 1)}


def supports(script: Path, flag: str) -> bool:
    try:
        p = subprocess.run([sys.executable, str(script), "--help"], cwd=str(ROOT), capture_output=True, text=True, timeout=60)
        return flag in p.stdout
    except Exception:
        return False


# --------------------------------------------------------------------------- goal checks


def _pct(agg: dict[str, Any], cat: str):
    r = agg.get("recall", {}).get(cat)
    return None if not r or not r["total"] else r["pct"]


def goals(ev: dict[str, Any] | None, sp: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    """(goal, status, detail) rows."""
    rows: list[tuple[str, str, str]] = []
    if ev:
        allg = ev["summary"].get("all", {})
        d = allg.get("default", {})
        l1 = d.get("compactor L1", {})
        for cat in ("error_lines", "frames", "constraints"):
            p = _pct(l1, cat)
            r = l1.get("recall", {}).get(cat, {})
            if p is None:
                rows.append((f"compactor L1 recall of {cat} = 100% (default settings)", "n/a", "no gold items"))
            else:
                rows.append((f"compactor L1 recall of {cat} = 100% (default settings)", "met" if p == 100 else "NOT met",
                             f"{p}% ({r['found']}/{r['total']})"))
        for gname in ("all", "trajectory", "log"):
            g = ev["summary"].get(gname)
            if not g:
                continue
            c = g["default"].get("compactor L1", {}).get("ratio")
            m = g["default"].get("mask(last 10)", {}).get("ratio")
            if c and m:
                rows.append((f"compression ≥ observation masking ({gname})", "met" if c >= m else "NOT met", f"compactor L1 {c:.2f}× vs masking {m:.2f}×"))
            for lvl in ("compactor L2", "compactor L3@25%"):
                cl = g["default"].get(lvl, {})
                if cl.get("ratio") and m and gname == "all":
                    rows.append((f"compression ≥ observation masking ({gname}, {lvl})", "met" if cl["ratio"] >= m else "NOT met", f"{cl['ratio']:.2f}× vs {m:.2f}×"))
        for bname in ("L1", "25%"):
            eb = allg.get("equal_budget", {}).get(bname, {})
            comp = eb.get("compactor", {})
            if not comp.get("files"):
                rows.append((f"equal budget ({bname}): recall higher than every baseline", "n/a", "compactor failed"))
                continue
            worse, ties, better = [], [], []
            for cat in ("error_lines", "frames", "exit_codes", "numbers", "constraints", "failed_approaches", "labelled_errors"):
                cp = _pct(comp, cat)
                if cp is None:
                    continue
                best_name, best = max(((k, _pct(v, cat) or 0.0) for k, v in eb.items() if k != "compactor"), key=lambda kv: kv[1])
                if cp > best:
                    better.append(cat)
                elif cp == best:
                    ties.append(f"{cat} ({cp}% = {best_name})")
                else:
                    worse.append(f"{cat} ({cp}% < {best_name} {best}%)")
            over = comp.get("over_budget_files", 0)
            status = "NOT met" if worse or over else ("met" if better else "tie")
            detail = f"higher on {len(better)} categor{'y' if len(better) == 1 else 'ies'} ({', '.join(better)})"
            if ties:
                detail += "; tied: " + ", ".join(ties)
            if worse:
                detail += "; lower: " + ", ".join(worse)
            if over:
                detail += f"; compactor over budget on {over}/{comp['files']} files (ratio {comp.get('ratio')}×)"
            rows.append((f"equal budget ({'size of compactor L1' if bname == 'L1' else '25% of original'}): recall ≥ every baseline in every category, higher in some", status, detail))
    if sp:
        for name, r in list(sp.get("logs", {}).get("sizes", {}).items()) + list(sp.get("logs", {}).get("real", {}).items()):
            x = r.get("ratios", {}).get("trim_vs_drain3_same_lines")
            if x is not None:
                d = r["drain3"]
                how = f"Drain3 on the first {d['bytes'] / 1e6:.0f} MB" if d.get("sampled") else "Drain3 on the whole log"
                rows.append((f"trim ≥ 10× Drain3 throughput ({name})", "met" if x >= 10 else "NOT met",
                             f"{x}× (trim {r['trim_on_drain_sample'].get('mb_per_s')} MB/s vs Drain3 {d.get('mb_per_s')} MB/s, same lines; {how})"))
        g = sp.get("logs", {}).get("trim_rss_growth")
        if g:
            rows.append(("trim peak RSS constant (largest vs smallest within 10%)", "met" if g["within_10pct"] else "NOT met",
                         f"{g['small_mb']} MB ({g['small']}) vs {g['large_mb']} MB ({g['large']}), ×{g['ratio']}"))
        gb = sp.get("trim_gb")
        if gb and gb.get("rss_vs_small"):
            rows.append(("trim peak RSS at 1 GB within 10% of the smallest run", "met" if abs(gb["rss_vs_small"] - 1) <= 0.1 else "NOT met",
                         f"{gb['trim'].get('peak_rss_mb')} MB, ×{gb['rss_vs_small']}"))
        t = sp.get("turns", {}).get("level1")
        if t:
            rows.append(("per-turn p99 below one json.dumps", "met" if t["goal_p99_below_one_dumps"] else "NOT met",
                         f"compact p99 {t['compact_ms']['p99']} ms vs json.dumps p99 {t['json_dumps_ms']['p99']} ms (×{t['p99_vs_p99_dumps']})"))
    return rows


# --------------------------------------------------------------------------- RESULTS.md


def render(ev, sp, others: list[dict[str, Any]], args, total_s: float) -> str:
    import bench_speed
    import evaluate

    m = (sp or {}).get("machine") or bench_speed.machine()
    date = (sp or {}).get("date") or time.strftime("%Y-%m-%d %H:%M:%S %Z")
    pk = ", ".join(f"{k} {v}" for k, v in m.get("packages", {}).items() if v)
    L: list[str] = []
    L.append("## Results\n")
    cmd = "python benchmarks/run_all.py" + (" --quick" if args.quick else "") + (f" --trim-gb {args.trim_gb:g}" if args.trim_gb else "")
    L.append(f"Generated by `{cmd}` on {date} ({total_s:.0f} s). Machine: {m.get('nproc')} CPU(s) `nproc`, {m.get('cpu', '?')}, "
             f"{m.get('mem_gb', '?')} GB RAM, Python {m.get('python')}, {m.get('platform', '')}. Packages: {pk}. "
             "Raw figures: `benchmarks/out/*.json`.\n")
    if m.get("loadavg_1_5_15"):
        L.append(f"Load average when the speed run started: {m['loadavg_1_5_15'][0]} (1 min), when it ended: "
                 f"{(sp or {}).get('loadavg_end', ['?'])[0]}; anything above {m.get('nproc')} means other processes shared the CPUs "
                 "and the absolute timings are pessimistic (the ratios, measured in the same run, less so).\n")
    if args.quick:
        L.append("> **Quick mode**: small inputs, for smoke testing only; do not quote these numbers.\n")
    if getattr(args, "reuse", False):
        L.append("> Fidelity re-run; speed and the other benchmarks reused from the previous full run.\n")
    rows = goals(ev, sp)
    if rows:
        L.append("### Goals\n")
        L.append("| goal | status | measured |")
        L.append("|---|---|---|")
        for g, s, d in rows:
            L.append(f"| {g} | {'✅ met' if s == 'met' else ('➖ ' + s if s in ('n/a', 'tie') else '❌ ' + s)} | {d} |")
        L.append("")
    if ev:
        L.append("### Fidelity: compression and evidence recall\n")
        L.append(("Quick subset: " if ev.get("quick") else "") + f"{len(ev['files'])} files: every trajectory and log of `../shared/corpus` (swe-agent, mini-swe-agent, openhands-v0/v1, "
                 "claude-code, codex-rollout, aider, ci-logs, ci-breakages/*/fail.log) and `fixtures/trajectories`, `fixtures/demo`. "
                 f"Tokens: `{ev['token_counter']}`, summed over the output's message texts, the same way for every method "
                 "(compactor's output is read back with its own layout reader). Ratio (Σ) = all tokens before ÷ all tokens after; "
                 "median ratio = median of per-file ratios.\n")
        L.append("Gold evidence comes from the benchmark's own extraction (`benchmarks/gold.py`, independent of compactor's rules) "
                 "plus the hand labels of `ci-breakages/*/labels.json` (`labelled_errors`). Recall = share of gold items found "
                 f"verbatim in the output: {ev['comparison']}. Inputs of every method: {ev['input_normalisation']}.\n")
        L.append(evaluate.markdown_tables(ev))
        miss = ev.get("compactor_l1_misses") or []
        if miss:
            groups: dict[tuple[str, str], list[str]] = {}
            for x in miss:
                groups.setdefault((x["file"], x["category"]), []).append(x["item"])
            L.append(f"Gold items compactor Level 1 lost ({len(miss)}), by file and category (up to 3 examples each):\n")
            for (f, cat), its in groups.items():
                ex = "; ".join("`" + i[:110].replace("`", "'") + "`" for i in its[:3])
                L.append(f"- `{f}` [{cat}] ×{len(its)}: {ex}")
            L.append("")
        L.append("Notes: for a one-segment log, masking can only mask the whole log (hence its huge ratio and 0% recall at "
                 "equal budget) and head+tail keeps the log's first and last N lines. `labelled_errors` are the human "
                 "labels of the ci-breakages logs; several folders label whole test reports (run616: 472 lines), not "
                 "only error lines.\n")
    if sp:
        L.append("### Speed\n")
        L.append("Every figure is next to a baseline measured in the same run on the same input. Generated logs: "
                 "GitHub-Actions-style noisy CI output (pip/npm/maven downloads, progress bars with `\\r`, ANSI colour, "
                 "passing tests, docker layers) with an error block (Python/Java trace, npm ERR, compiler error) about every "
                 "3,000 lines, written to disk by a streaming generator. trim, Drain3 (`TemplateMiner()` default config, "
                 "`add_log_message` per line), tiktoken (`encode_ordinary`, cl100k_base) and `str.splitlines` each run in a fresh "
                 "child process; peak RSS is that child's `ru_maxrss` from `os.wait4`. Throughput excludes interpreter start and "
                 "rule compilation (reported as `setup_seconds` in the JSON). Each figure is the best of 3 runs (1 for the 200 MB "
                 "and larger files), since the machine may be shared; every run's time is in the JSON.\n")
        L.append(bench_speed.markdown_tables(sp))
    for o in others:
        L.append(f"### {o['name']}\n")
        if o["returncode"] != 0:
            L.append(f"`{o['cmd']}` failed (exit {o['returncode']}): `{(o['stderr'] or '').strip().splitlines()[-1:] or ''}`\n")
        out = (o["stdout"] or "").strip()
        if out:
            L.append(out if "|" in out else "```\n" + out[-6000:] + "\n```")
            L.append("")
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--trim-gb", type=float, default=0)
    ap.add_argument("--skip-others", action="store_true", help="do not run the other benchmark scripts")
    ap.add_argument("--reuse", action="store_true",
                    help="development: rerun evaluate only; reuse out/speed.json and the other scripts' saved output")
    ap.add_argument("--results", type=Path, default=HERE / "RESULTS.md")
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    py = sys.executable
    q = ["--quick"] if args.quick else []
    runs = {}
    runs["evaluate"] = run([py, str(HERE / "evaluate.py"), "--out", str(OUT / "evaluate.json"), *q])
    sp_cmd = [py, str(HERE / "bench_speed.py"), "--out", str(OUT / "speed.json"), *q]
    if args.trim_gb:
        sp_cmd += ["--trim-gb", str(args.trim_gb)]
    prev = json.loads((OUT / "run_all.json").read_text(encoding="utf-8")) if args.reuse and (OUT / "run_all.json").exists() else None
    if args.reuse and (OUT / "speed.json").exists():
        runs["speed"] = {"cmd": " ".join(sp_cmd), "returncode": 0, "stdout": "", "stderr": "", "seconds": 0, "reused": True}
    else:
        runs["speed"] = run(sp_cmd)
    others = []
    if prev is not None:
        others = prev.get("others", [])
    elif not args.skip_others:
        for name in OTHERS:
            script = HERE / name
            if not script.exists():
                continue
            cmd = [py, str(script)] + (["--quick"] if args.quick and supports(script, "--quick") else []) \
                + (["--quiet"] if supports(script, "--quiet") else [])
            r = run(cmd, timeout=3 * 3600)
            r["name"] = name
            others.append(r)
    ev = json.loads((OUT / "evaluate.json").read_text(encoding="utf-8")) if runs["evaluate"]["returncode"] == 0 else None
    sp = json.loads((OUT / "speed.json").read_text(encoding="utf-8")) if runs["speed"]["returncode"] == 0 else None
    total = time.perf_counter() - t0
    text = render(ev, sp, others, args, total)
    for k, r in runs.items():
        if r["returncode"] != 0:
            text += f"\n> `{r['cmd']}` failed (exit {r['returncode']}): {(r['stderr'] or '').strip()[-800:]}\n"
    args.results.write_text(text, encoding="utf-8")
    (OUT / "run_all.json").write_text(json.dumps({"seconds": round(total, 1), "runs": {k: {kk: vv for kk, vv in v.items() if kk != "stdout"} for k, v in runs.items()},
                                                  "others": others}, indent=1) + "\n", encoding="utf-8")
    print(text)
    print(f"wrote {args.results} and {OUT}/*.json ({total:.0f} s)", file=sys.stderr)
    return 0 if all(r["returncode"] == 0 for r in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
