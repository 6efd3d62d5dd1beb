"""Batch throughput: records/s against worker count, and Ray Data against the stdlib pool, on the
same generated records in the same run.

Input: ``batch_records.make_records(N)`` (OpenAI-chat and Anthropic trajectories, CI logs, a
corrupt record in 250), each a ``{"id", "text"}`` record. Every engine runs the same pure
function, :func:`compactor.batch.compact_batch`, and the outputs of all engines are checked to
be identical (sha256 over every result row) before any figure is printed.

- ``serial``: ``compact_batch`` in this process (the catalog already loaded): the baseline. It
  runs last: pool workers are forked from this process and would inherit its warm per-segment
  cache.
- ``pool xN``: ``concurrent.futures.ProcessPoolExecutor(N)``, chunks of ``--chunk`` records,
  pool start and per-worker catalog load included.
- ``ray xN``: ``compactor.integrations.ray.compact_dataset`` on ``ray.data.from_items`` with N
  actors, ``materialize()``; ``ray.init`` is timed separately and shown next to it.

    python benchmarks/bench_batch.py                  # 1000 records -> benchmarks/out/batch.json
    python benchmarks/bench_batch.py --records 200 --no-ray   # quick, stdlib only
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import json
import logging
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from batch_records import make_records  # noqa: E402

from compactor.batch import RESULT_COLUMNS, BatchConfig, compact_batch, warm  # noqa: E402


def _digest(rows) -> str:
    h = hashlib.sha256()
    for r in rows:
        h.update(json.dumps([r[c] for c in RESULT_COLUMNS], ensure_ascii=False).encode())
    return h.hexdigest()


def _pool(records, config, workers, chunk):
    parts = [records[i:i + chunk] for i in range(0, len(records), chunk)]
    with cf.ProcessPoolExecutor(workers, initializer=warm, initargs=(config,)) as pool:
        return [row for part in pool.map(compact_batch, parts, [config] * len(parts)) for row in part]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--scale", type=float, default=0.5, help="size of the tool outputs (1.0: ~10 KB per record)")
    ap.add_argument("--workers", default=None, help="comma-separated worker counts (default 1..CPUs)")
    ap.add_argument("--chunk", type=int, default=25)
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--out", default=str(HERE / "out" / "batch.json"))
    args = ap.parse_args(argv)

    cpus = os.cpu_count() or 1
    counts = [int(x) for x in args.workers.split(",")] if args.workers else list(range(1, cpus + 1))
    records = make_records(args.records, seed=1, scale=args.scale)
    mb = sum(len(r["text"].encode()) for r in records) / 1e6
    config = BatchConfig()
    warm(config)
    runs = []

    # Pools and Ray run first: a forked worker inherits this process's per-segment cache, so this
    # process compacts nothing before them (the in-process baseline runs last, on a cold cache).
    digest = None
    for n in counts:
        t = time.perf_counter()
        rows = _pool(records, config, n, args.chunk)
        runs.append({"engine": "pool", "workers": n, "seconds": time.perf_counter() - t})
        digest = digest or _digest(rows)
        assert _digest(rows) == digest, f"pool x{n} output differs"

    if not args.no_ray:
        import ray
        import ray.data

        from compactor.integrations.ray import compact_dataset

        t = time.perf_counter()
        ray.init(num_cpus=max(counts), include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
        init = time.perf_counter() - t
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        for n in counts:
            t = time.perf_counter()
            ds = compact_dataset(ray.data.from_items(records, override_num_blocks=max(1, len(records) // args.chunk)),
                                 config, concurrency=n, batch_size=args.chunk).materialize()
            took = time.perf_counter() - t
            rows = ds.take_all()
            runs.append({"engine": "ray", "workers": n, "seconds": took, "ray_init_seconds": init})
            assert _digest([{c: r[c] for c in RESULT_COLUMNS} for r in rows]) == digest, f"ray x{n} output differs"
        ray.shutdown()

    t = time.perf_counter()
    ref = compact_batch(records, config)
    serial = time.perf_counter() - t
    assert _digest(ref) == digest, "in-process output differs"
    runs.insert(0, {"engine": "serial", "workers": 1, "seconds": serial})

    for r in runs:
        r["records_per_s"] = len(records) / r["seconds"]
        r["vs_serial"] = serial / r["seconds"]
    result = {"records": len(records), "mb": round(mb, 2), "cpus": cpus, "python": platform.python_version(),
              "output_sha256": digest, "runs": runs}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"{len(records)} records, {mb:.1f} MB, {cpus} CPUs; every engine gave the same output ({digest[:16]})")
    print(f"{'engine':<8} {'workers':>7} {'seconds':>8} {'records/s':>10} {'vs serial':>9}")
    for r in runs:
        extra = f"  (+ ray.init {r['ray_init_seconds']:.1f} s)" if "ray_init_seconds" in r else ""
        print(f"{r['engine']:<8} {r['workers']:>7} {r['seconds']:>8.2f} {r['records_per_s']:>10.1f} {r['vs_serial']:>8.2f}x{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
