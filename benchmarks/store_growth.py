"""How big the placeholder store gets when the Claude Code PostToolUse hook runs on many large
Bash outputs, without a cap and with one; and what ``prune`` gives back.

    python benchmarks/store_growth.py [--calls 60] [--cap-mb 1]

Each call is the captured 80 KB payload (tests/fixtures/claude_code) with its output made
distinct, as in a long session of builds; the hook runs in-process (its start-up is measured by
benchmarks/hook_startup.py).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "claude_code"
MB = 1024 * 1024


def fill(store: Path, cap_mb: float, calls: int, work: Path) -> None:
    os.environ["COMPACTOR_STORE"] = str(store)
    os.environ["COMPACTOR_STORE_MAX_MB"] = str(cap_mb)
    from compactor.integrations import claude_code as cc

    cc._compactor_cache.clear()
    base = json.loads((FIX / "post_tool_use_toolu_e2e_2.json").read_text().replace("{FIXTURES}", str(FIX)))
    full = (FIX / "post_tool_use_toolu_e2e_2.persisted.txt").read_text()
    for i in range(calls):
        f = work / f"out{i}.txt"
        f.write_text(full.replace("processing record", f"job {i} record"))
        d = json.loads(json.dumps(base))
        d["tool_response"]["persistedOutputPath"] = str(f)
        out, err = io.StringIO(), io.StringIO()
        cc.run_hook("post-tool-use", io.StringIO(json.dumps(d)), out, err)
        if not out.getvalue() or err.getvalue():
            raise SystemExit(f"hook call {i} did not answer: {err.getvalue()}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--cap-mb", type=float, default=1.0)
    args = ap.parse_args()
    from compactor.collapse.store import SqliteStore

    work = Path(tempfile.mkdtemp())
    rows = []
    for name, cap in (("no cap (1e6 MB)", 1e6), (f"cap {args.cap_mb:g} MB", args.cap_mb)):
        path = work / f"{len(rows)}.sqlite"
        fill(path, cap, args.calls, work)
        st = SqliteStore(path, max_bytes=int(cap * MB)).stats()
        rows.append((name, st.entries, st.evicted, st.bytes / MB, st.disk_bytes / MB))
    res = SqliteStore(work / "0.sqlite", max_bytes=None).prune(int(args.cap_mb * MB))
    print(f"{args.calls} PostToolUse calls on distinct 80 KB Bash outputs")
    print(f"{'store':<18} {'entries':>7} {'evicted':>7} {'MB originals':>12} {'MB on disk':>10}")
    for name, n, ev, b, d in rows:
        print(f"{name:<18} {n:>7} {ev:>7} {b:>12.2f} {d:>10.2f}")
    st = res.stats
    print(f"{'no cap, pruned':<18} {st.entries:>7} {st.evicted:>7} {st.bytes / MB:>12.2f} {st.disk_bytes / MB:>10.2f}"
          f"   (prune --to-mb {args.cap_mb:g}: {res.evicted} evicted)")


if __name__ == "__main__":
    main()
