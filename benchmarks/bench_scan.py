"""Scan throughput of the protect rules: Detector.detect vs a bare ``text.splitlines()``.

Generates (deterministically, no corpus needed) a ~30 MB noisy tool log: pip / npm / Maven /
Docker install lines, application log lines with timestamps and key=value fields, pytest and go
test output, progress lines, plus a few real-looking stack traces (Python, Java, Go, Node) and
error lines. Then times, in the same run:

- ``text.splitlines()`` (the floor: one C pass over the text);
- ``Detector(load_rules()).detect(text, role="tool")`` (every protect rule that applies to tool
  output; user-only rules such as constraints do not run on tool output);
- the same on a GitHub-Actions-style copy (a 29-character timestamp on every line);
- adversarial inputs, reported as time per MB relative to the normal log: 1 MB lines built to
  bait backtracking in each rule family, and traces of 100,000 frames (Python, Java, Go, native).

Goals: detect <= 10 x splitlines on the noisy log; adversarial time per MB <= 3 x normal.

    python benchmarks/bench_scan.py [--mb 30] [--repeat 3] [--quick]

Prints a table and writes ``benchmarks/out/bench_scan.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compactor.detect import Detector  # noqa: E402
from compactor.engine import load_rules  # noqa: E402

MB = 1_048_576

PY_TRACE = '''Traceback (most recent call last):
  File "/srv/app/worker.py", line 88, in run
    self.process(batch)
  File "/srv/app/worker.py", line 61, in process
    conn = self.pool.acquire(timeout=30)
  File "/srv/app/pool.py", line 142, in acquire
    raise PoolExhausted(f"pool_size={self.size}")
app.pool.PoolExhausted: pool_size=20, queue_depth=347'''

JAVA_TRACE = '''Exception in thread "main" java.lang.IllegalStateException: pool exhausted (pool_size=20)
\tat com.acme.db.Pool.acquire(Pool.java:142)
\tat com.acme.db.Repo.find(Repo.java:57)
\tat com.acme.App.main(App.java:12)
Caused by: java.util.concurrent.TimeoutException: timed out after 30000 ms
\tat java.base/java.util.concurrent.FutureTask.get(FutureTask.java:204)
\t... 3 more'''

GO_TRACE = '''panic: runtime error: invalid memory address or nil pointer dereference
[signal SIGSEGV: segmentation violation code=0x1 addr=0x18 pc=0x8a3f21]

goroutine 34 [running]:
github.com/acme/api/internal/server.(*Server).Serve(0x0, {0xc3e1a0, 0xc0001a2000})
\t/home/runner/work/api/internal/server/server.go:142 +0x21
created by main.main in goroutine 1
\t/home/runner/work/api/main.go:20 +0x3ad
exit status 2'''

NODE_TRACE = '''TypeError: Cannot read properties of undefined (reading 'id')
    at getUser (/app/src/users.js:14:22)
    at async handler (/app/src/server.js:41:5)
npm ERR! code 1'''

ERRORS = [
    "ERROR: Could not find a version that satisfies the requirement torch==9.9 (from versions: none)",
    "[ERROR] Failed to execute goal org.apache.maven.plugins:maven-surefire-plugin:3.2.2:test (default-test)",
    "FAILED tests/test_pool.py::test_acquire_times_out - app.pool.PoolExhausted: pool_size=2",
    "src/pool.c:142:12: error: 'struct pool' has no member named 'slot'",
    "Process exited with code 1",
]


def noise_line(rng: random.Random, i: int) -> str:
    k = rng.randrange(14)
    if k == 0:
        return f"Collecting package-{i % 997}=={i % 7}.{i % 13}.{i % 5} (from -r requirements.txt (line {i % 90 + 1}))"
    if k == 1:
        return f"  Downloading package_{i % 997}-{i % 7}.{i % 13}.{i % 5}-py3-none-any.whl ({i % 900 + 10} kB)"
    if k == 2:
        return f"     {'━' * 20} {i % 600}.{i % 10}/{i % 600 + 1}.0 kB {i % 9}.{i % 7} MB/s eta 0:00:00"
    if k == 3:
        return f"tests/test_mod{i % 50}.py::test_case_{i % 4000} PASSED{' ' * 30}[{i % 100:3d}%]"
    if k == 4:
        return "npm WARN deprecated glob@7.2.3: Glob versions prior to v9 are no longer supported"
    if k == 5:
        return f"Downloaded from central: https://repo.maven.apache.org/maven2/org/acme/lib{i % 300}/{i % 9}.{i % 4}/lib-{i % 9}.{i % 4}.jar (3.{i % 9} kB at {i % 90 + 10} kB/s)"
    if k == 6:
        return (f"2024-05-01 10:{i % 60:02d}:{(i * 7) % 60:02d},{i % 1000:03d} INFO  [worker-{i % 8}] "
                f"processed batch={i} rows={i % 5000} in {i % 1000}ms")
    if k == 7:
        return f"{(i * 2654435761) % (1 << 32):08x}: Pulling fs layer"
    if k == 8:
        return f"ok  \tgithub.com/acme/api/internal/mod{i % 40}\t0.{i % 900:03d}s"
    if k == 9:
        return f"[{i % 100:3d}%] Building CXX object src/CMakeFiles/core.dir/module_{i % 400}.cpp.o"
    if k == 10:
        return f"   Compiling crate{i % 300} v0.{i % 9}.{i % 20}"
    if k == 11:
        return f"GET /api/v1/items/{i % 10000}?page={i % 30}&limit=50 200 {i % 90 + 3}ms - \"Mozilla/5.0 (X11; Linux x86_64)\""
    if k == 12:
        return f" => => transferring context: {i % 90}.{i % 10}MB {i % 9}.{i % 10}s done"
    return f"Step {i % 30}/{40} : RUN apt-get install -y --no-install-recommends libpq-dev={i % 15}.{i % 4}"


def noisy_log(target_bytes: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    i = 0
    traces = [PY_TRACE, JAVA_TRACE, GO_TRACE, NODE_TRACE]
    while size < target_bytes:
        if i and i % 20000 == 0:  # a few traces and errors, evenly spread
            block = traces[(i // 20000) % len(traces)]
            out.append(block)
            out.append(ERRORS[(i // 20000) % len(ERRORS)])
            size += len(block) + len(out[-1]) + 2
        line = noise_line(rng, i)
        out.append(line)
        size += len(line) + 1
        i += 1
    return "\n".join(out)


def ci_prefixed(text: str) -> str:
    return "\n".join(f"2024-05-01T10:{(n // 600) % 60:02d}:{(n // 10) % 60:02d}.{n % 10_000_000:07d}Z {line}"
                     for n, line in enumerate(text.split("\n")))


def adversarial_lines(n: int = MB) -> dict[str, str]:
    """~1 MB (``n`` characters) single lines that bait backtracking: repeated trigger words,
    separators, brackets."""
    def rep(s: str) -> str:
        return (s * (n // len(s) + 1))[:n]
    return {
        "letters": "a" * n,
        "error-words": rep("error: "),
        "exception-dots": rep("java.lang.") + "Exception",
        "frame-at": "    at " + rep("a.b(") ,
        "js-colons": "    at " + rep("1:2:"),
        "python-file": '  File "' + rep("x") + '", line 1',
        "fileref-dots": rep("a.py.") + ":1",
        "number-eq": rep("a_b=") + "1",
        "number-keys": rep("pool_size ") + "=1",
        "brackets-ref": "[" + rep("[x ref c-") + "0123456789abcdef]",
        "underscores": "____ " + rep("_ "),
        "hex": "#0 0x" + rep("0"),
        "spaces": "x" + " " * (n - 2) + "x",
        "colons": rep("a:"),
        "exit-codes": rep("exit code "),
        "panic": rep("panic: "),
        "gcc": rep("x:1:1: "),
        "sanitizer": "==1==ERROR: AddressSanitizer: " + rep("0x"),
    }


def long_traces(frames: int) -> dict[str, str]:
    py = ["Traceback (most recent call last):"]
    for k in range(frames):
        py.append(f'  File "/srv/app/mod{k % 97}.py", line {k % 900 + 1}, in f{k}')
        py.append(f"    f{k + 1}(x)")
    py.append("RecursionError: maximum recursion depth exceeded")
    java = ['Exception in thread "main" java.lang.StackOverflowError']
    java += [f"\tat com.acme.Rec.f{k % 50}(Rec.java:{k % 900 + 1})" for k in range(frames)]
    go = ["panic: runtime error: stack overflow", "", "goroutine 1 [running]:"]
    for k in range(frames):
        go.append(f"main.f{k % 50}(0x{k:x})")
        go.append(f"\t/app/main.go:{k % 900 + 1} +0x{k % 4096:x}")
    native = ["==1==ERROR: AddressSanitizer: stack-overflow on address 0x7ffca4df4b38 (pc 0x467236 bp 0x7ffc sp 0x7ffd T0)"]
    native += [f"    #{k} 0x{0x400000 + k:x} in f{k % 50} /src/rec.c:{k % 900 + 1}:5" for k in range(frames)]
    native.append("SUMMARY: AddressSanitizer: stack-overflow /src/rec.c:12:5 in f1")
    return {"python": "\n".join(py), "java": "\n".join(java), "go": "\n".join(go), "native": "\n".join(native)}


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=30.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--frames", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true", help="3 MB, 1 repeat, 10k frames")
    args = ap.parse_args(argv)
    if args.quick:
        args.mb, args.repeat, args.frames = 3.0, 1, 10_000
    det = Detector(load_rules())
    rows = []

    def measure(name: str, text: str, repeat: int) -> dict:
        split_t = best_of(text.splitlines, repeat)
        res = None

        def run():
            nonlocal res
            res = det.detect(text, role="tool")
        det_t = best_of(run, repeat)
        mb = len(text.encode("utf-8")) / MB
        row = {"input": name, "mb": round(mb, 2), "lines": text.count("\n") + 1,
               "splitlines_s": round(split_t, 4), "detect_s": round(det_t, 4),
               "ratio_to_splitlines": round(det_t / split_t, 2), "s_per_mb": round(det_t / mb, 4),
               "spans": len(res.raw_spans), "timeouts": [d.rule_id for d in res.diagnostics]}
        rows.append(row)
        return row

    base = noisy_log(int(args.mb * MB))
    normal = measure("noisy log", base, args.repeat)
    measure("noisy log, CI timestamps", ci_prefixed(base), max(1, args.repeat - 1))
    adv = adversarial_lines()
    for name, line in adv.items():
        measure(f"1 MB line: {name}", line, 1)
    for name, text in long_traces(args.frames).items():
        measure(f"{args.frames:,}-frame trace: {name}", text, 1)

    print(f"python {platform.python_version()} on {platform.machine()}; "
          f"{len(det.rules)} protect rules (those for role 'tool' run)")
    print(f"{'input':34} {'MB':>6} {'splitlines':>10} {'detect':>8} {'x split':>8} {'s/MB':>7} {'x normal':>8} {'timeouts'}")
    for r in rows:
        rel = r["s_per_mb"] / normal["s_per_mb"] if normal["s_per_mb"] else 0
        r["ratio_to_normal_per_mb"] = round(rel, 2)
        print(f"{r['input']:34} {r['mb']:6.1f} {r['splitlines_s']:10.3f} {r['detect_s']:8.3f} "
              f"{r['ratio_to_splitlines']:8.1f} {r['s_per_mb']:7.3f} {rel:8.2f} {','.join(r['timeouts']) or '-'}")
    adv_rows = [r for r in rows if r["input"].startswith(("1 MB", f"{args.frames:,}"))]
    worst = max(adv_rows, key=lambda r: r["ratio_to_normal_per_mb"])
    summary = {
        "noisy_log_ratio_to_splitlines": normal["ratio_to_splitlines"],
        "noisy_log_mb_per_s": round(1 / normal["s_per_mb"], 1),
        "worst_adversarial": worst["input"],
        "worst_adversarial_ratio_per_mb": worst["ratio_to_normal_per_mb"],
        "goal_ratio_to_splitlines": 10, "goal_adversarial_ratio": 3,
    }
    print(f"noisy log: detect = {summary['noisy_log_ratio_to_splitlines']} x splitlines "
          f"({summary['noisy_log_mb_per_s']} MB/s); worst adversarial per-MB ratio "
          f"{summary['worst_adversarial_ratio_per_mb']} ({summary['worst_adversarial']})")
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_scan.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n",
                                         encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
