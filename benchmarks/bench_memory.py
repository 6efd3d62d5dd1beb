"""Peak memory of ``compactor compact FILE`` on large JSON trajectories, as a ratio to the input size.

Two inputs are generated (in a temporary directory, deleted afterwards), both OpenAI chat
trajectories with tool calls, the layout of most agent harnesses:

- **small**: many small messages: an assistant turn with one ``bash`` tool call and its tool
  output (a few hundred bytes to a few KB of test runs, installs, listings, greps, tracebacks),
  with a user message now and then;
- **large**: few large messages: tool outputs of about 1 MB each (long build logs), with short
  assistant turns between them;
- **oneline**: a log that is one line (no line break at all: a minified bundle, a progress bar
  that never redraws, a JSON blob printed raw), compacted as plain text; its goal is 3x
  (``--oneline-goal``), as the text is held once as read and once as written.

Each input is compacted by the command line (``python -m compactor compact FILE -o OUT``) in a
fresh child process; its peak RSS is the child's own ``ru_maxrss`` from ``os.wait4``. The figure
is peak RSS / input size (the whole process, interpreter and compiled rules included). As a
baseline measured in the same run, the same child machinery runs ``json.load`` of the same file
(the cost of just holding the parsed document).

    python benchmarks/bench_memory.py            # 200 MB inputs (the issue's size)
    python benchmarks/bench_memory.py --mb 20    # a quick run
    python benchmarks/bench_memory.py --mb 20 --stream both   # streamed and read whole, same inputs
    python benchmarks/bench_memory.py --mb 30 --kind oneline  # a 30 MB log on one line
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parent.parent
MB = 1024 * 1024

_WORDS = ("config", "parser", "session", "request", "handler", "cache", "token", "buffer", "index",
          "module", "client", "server", "worker", "schema", "record", "stream", "report", "option")


def _pytest_output(rng: random.Random) -> str:
    n = rng.randint(3, 12)
    lines = ["============================= test session starts ==============================",
             f"platform linux -- Python 3.11.{rng.randint(0, 9)}, pytest-8.{rng.randint(0, 3)}.0",
             f"collected {n * 4} items", ""]
    for i in range(n):
        mod = rng.choice(_WORDS)
        lines.append(f"tests/test_{mod}_{i}.py {'.' * rng.randint(2, 9)}{' ' * 20}[{(i + 1) * 100 // n:3d}%]")
    if rng.random() < 0.15:
        mod = rng.choice(_WORDS)
        lines += ["", "=================================== FAILURES ===================================",
                  f"_____________________________ test_{mod}_roundtrip _____________________________",
                  f"    def test_{mod}_roundtrip():",
                  f">       assert load_{mod}(dump_{mod}(x)) == x",
                  f"E       AssertionError: assert {rng.randint(1, 999)} == {rng.randint(1, 999)}",
                  f"tests/test_{mod}.py:{rng.randint(10, 400)}: AssertionError",
                  f"FAILED tests/test_{mod}.py::test_{mod}_roundtrip - AssertionError",
                  f"========================= 1 failed, {n * 4 - 1} passed in {rng.random() * 9:.2f}s ========================="]
    else:
        lines.append(f"============================== {n * 4} passed in {rng.random() * 9:.2f}s ==============================")
    return "\n".join(lines)


def _pip_output(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(2, 10)):
        pkg = rng.choice(_WORDS) + rng.choice(("", "lib", "-py", "tools"))
        ver = f"{rng.randint(0, 5)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"
        lines.append(f"Collecting {pkg}=={ver}")
        lines.append(f"  Downloading {pkg}-{ver}-py3-none-any.whl ({rng.randint(10, 900)} kB)")
    lines.append("Installing collected packages: " + ", ".join(rng.sample(_WORDS, 3)))
    lines.append("Successfully installed " + " ".join(f"{w}-{rng.randint(1, 9)}.{rng.randint(0, 9)}"
                                                      for w in rng.sample(_WORDS, 3)))
    return "\n".join(lines)


def _listing(rng: random.Random) -> str:
    return "\n".join(f"-rw-r--r-- 1 user user {rng.randint(100, 99999):6d} Jan {rng.randint(1, 28):2d} "
                     f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} {rng.choice(_WORDS)}_{i}.py"
                     for i in range(rng.randint(3, 20)))


def _grep(rng: random.Random) -> str:
    return "\n".join(f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py:{rng.randint(1, 900)}:    "
                     f"{rng.choice(_WORDS)} = get_{rng.choice(_WORDS)}({rng.randint(0, 99)})"
                     for _ in range(rng.randint(1, 12)))


def _traceback(rng: random.Random) -> str:
    frames = []
    for _ in range(rng.randint(2, 6)):
        frames.append(f'  File "/repo/src/{rng.choice(_WORDS)}.py", line {rng.randint(1, 800)}, in {rng.choice(_WORDS)}')
        frames.append(f"    return self.{rng.choice(_WORDS)}[{rng.randint(0, 9)}]")
    return "Traceback (most recent call last):\n" + "\n".join(frames) + \
        f"\nKeyError: '{rng.choice(_WORDS)}_{rng.randint(0, 999)}'"


_OUTPUTS = (_pytest_output, _pip_output, _listing, _grep, _traceback)
_COMMANDS = ("python -m pytest -q tests/", "pip install -e .", "ls -la src/", "grep -rn 'get_' src/",
             "python reproduce.py")


def _small_messages(rng: random.Random) -> Iterator[dict[str, Any]]:
    step = 0
    while True:
        step += 1
        k = rng.randrange(len(_OUTPUTS))
        call_id = f"call_{step:08d}"
        thought = (f"Step {step}: check the {rng.choice(_WORDS)} of the {rng.choice(_WORDS)} "
                   f"({rng.randint(1, 9999)}) before changing it.")
        yield {"role": "assistant", "content": thought,
               "tool_calls": [{"id": call_id, "type": "function",
                               "function": {"name": "bash",
                                            "arguments": json.dumps({"command": _COMMANDS[k] + f"  # {step}"})}}]}
        yield {"role": "tool", "tool_call_id": call_id, "content": _OUTPUTS[k](rng)}
        if rng.random() < 0.05:
            yield {"role": "user", "content": f"Keep the {rng.choice(_WORDS)} API stable; do not touch "
                                              f"{rng.choice(_WORDS)}.py (ticket {rng.randint(100, 9999)})."}


def _big_log(rng: random.Random, size: int) -> str:
    parts: list[str] = []
    n = 0
    i = 0
    while n < size:
        i += 1
        if i % 97 == 0:
            line = f"[{i:06d}] WARNING: deprecated {rng.choice(_WORDS)} option in {rng.choice(_WORDS)}.cfg"
        else:
            line = (f"[{i:06d}] compiling src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}_{rng.randint(0, 999)}.c "
                    f"-> build/obj/{rng.randint(0, 99999)}.o ({rng.randint(1, 999)} ms)")
        parts.append(line)
        n += len(line) + 1
    return "\n".join(parts)


def _large_messages(rng: random.Random) -> Iterator[dict[str, Any]]:
    step = 0
    while True:
        step += 1
        call_id = f"call_{step:08d}"
        yield {"role": "assistant", "content": f"Step {step}: build again with {rng.choice(_WORDS)} enabled.",
               "tool_calls": [{"id": call_id, "type": "function",
                               "function": {"name": "bash", "arguments": json.dumps({"command": f"make -j4 V=1 # {step}"})}}]}
        yield {"role": "tool", "tool_call_id": call_id, "content": _big_log(rng, MB)}


def generate_oneline(path: Path, size: int, seed: int = 12) -> int:
    """Write a log of about ``size`` bytes on one line (no line break), an error in its middle."""
    rng = random.Random(seed)
    written = i = 0
    with open(path, "w", encoding="utf-8") as fh:
        while written < size:
            s = f"[INFO] step {i} processing item {rng.randrange(100000)} ok; "
            if i == 200_000:
                s += "ERROR: connection refused at db/pool.py:42; "
            fh.write(s)
            written += len(s)
            i += 1
    return path.stat().st_size


def generate(path: Path, kind: str, size: int, seed: int = 12) -> int:
    """Write a chat trajectory of about ``size`` bytes (a system prompt and a task first, a final
    request last), streamed to disk in the layout ``compactor`` writes (indent 2)."""
    if kind == "oneline":
        return generate_oneline(path, size, seed)
    rng = random.Random(seed)
    msgs = _small_messages(rng) if kind == "small" else _large_messages(rng)
    head = [{"role": "system", "content": "You are a helpful assistant that can run bash commands."},
            {"role": "user", "content": "Fix the failing tests in the repository; keep the public API unchanged."}]
    tail = {"role": "user", "content": "Now run the whole test suite once more and report the result."}
    written = 0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("[")
        first = True

        def put(m: dict[str, Any]) -> int:
            nonlocal first
            s = ("\n  " if first else ",\n  ") + json.dumps(m, ensure_ascii=False, indent=2).replace("\n", "\n  ")
            first = False
            fh.write(s)
            return len(s.encode("utf-8"))

        for m in head:
            written += put(m)
        for m in msgs:
            if written >= size:
                break
            written += put(m)
        written += put(tail)
        fh.write("\n]\n")
    return path.stat().st_size


def run_child(cmd: list[str]) -> dict[str, Any]:
    """Run a command in a fresh process; its own peak RSS comes from ``os.wait4``."""
    with tempfile.TemporaryFile() as fe:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=fe, cwd=str(ROOT))
        try:
            _, status, ru = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            raise
        code = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        fe.seek(0)
        err = fe.read().decode("utf-8", "replace").strip()
    out: dict[str, Any] = {"peak_rss_mb": round(ru.ru_maxrss / 1024, 1), "seconds": round(wall, 2), "exit": code}
    if code != 0:
        out["error"] = (err.splitlines() or ["?"])[-1]
    return out


def measure(path: Path, workdir: Path, stream: str = "auto") -> dict[str, Any]:
    size = path.stat().st_size
    out_path = workdir / (path.stem + ".out.json")
    res = run_child([sys.executable, "-m", "compactor", "compact", str(path), "-o", str(out_path),
                     "--store", str(workdir / "store"), "--stream", stream])
    load = "json.load(open(sys.argv[1], encoding='utf-8'))" if path.suffix == ".json" else \
        "open(sys.argv[1], encoding='utf-8').read()"
    base = run_child([sys.executable, "-c", f"import json,sys; {load}", str(path)])
    idle = run_child([sys.executable, "-c", "import compactor.cli"])
    row = {"input_mb": round(size / MB, 1), "stream": stream, "compact": res, "json_load": base, "import_only": idle,
           "output_bytes": out_path.stat().st_size if out_path.exists() else None}
    row["compact_ratio"] = round(res["peak_rss_mb"] * MB / size, 2)
    row["json_load_ratio"] = round(base["peak_rss_mb"] * MB / size, 2)
    if out_path.exists():
        out_path.unlink()
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200.0, help="input size in MB (default 200)")
    ap.add_argument("--kind", choices=("small", "large", "oneline", "both", "all"), default="both",
                    help="both: small and large; all: those and oneline")
    ap.add_argument("--tmp", default=None, help="directory for the generated inputs (default: the system temp dir)")
    ap.add_argument("--goal", type=float, default=2.0, help="peak RSS / input size goal (default 2)")
    ap.add_argument("--oneline-goal", type=float, default=3.0, help="the goal of the one-line log (default 3)")
    ap.add_argument("--json", default=None, metavar="FILE", help="also write the results as JSON")
    ap.add_argument("--stream", choices=("auto", "never", "both"), default="auto",
                    help="the CLI's --stream: auto (default: message by message when it gives the same output), "
                         "never (read whole, in memory), both (each, one after the other)")
    args = ap.parse_args(argv)
    streams = ("auto", "never") if args.stream == "both" else (args.stream,)
    kinds = {"both": ("small", "large"), "all": ("small", "large", "oneline")}.get(args.kind, (args.kind,))
    workdir = Path(tempfile.mkdtemp(prefix="compactor-mem-", dir=args.tmp))
    results: dict[str, Any] = {"mb": args.mb, "goal": args.goal, "inputs": {}}
    try:
        for kind in kinds:
            path = workdir / (f"{kind}.log" if kind == "oneline" else f"{kind}.json")
            generate(path, kind, int(args.mb * MB))
            goal = args.oneline_goal if kind == "oneline" else args.goal
            for stream in streams:
                row = measure(path, workdir, stream)
                row["goal"] = goal
                results["inputs"][kind if len(streams) == 1 else f"{kind}/{stream}"] = row
                c, b = row["compact"], row["json_load"]
                status = "error: " + c["error"] if "error" in c else \
                    ("meets" if row["compact_ratio"] <= goal else "MISSES") + f" the {goal:g}x goal"
                print(f"{kind:<6} --stream {stream:<5} input {row['input_mb']:7.1f} MB | compact peak RSS "
                      f"{c['peak_rss_mb']:8.1f} MB = {row['compact_ratio']:5.2f}x input ({c['seconds']:.1f} s) | "
                      f"json.load alone {b['peak_rss_mb']:8.1f} MB = {row['json_load_ratio']:5.2f}x | import only "
                      f"{row['import_only']['peak_rss_mb']:.1f} MB | {status}", flush=True)
            path.unlink()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    ok = all("error" not in r["compact"] for r in results["inputs"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
