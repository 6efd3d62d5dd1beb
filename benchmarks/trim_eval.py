"""`compactor trim` on the labelled CI failures: share of hand-labelled error lines kept
verbatim (ANSI colour codes aside) and how much smaller the logs get, without and with the
passing run's log as ``--baseline``; plus whole-trace survival on the crash and exception traces.

    python benchmarks/trim_eval.py [--corpus ../shared/corpus] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compactor.collapse.trim import Baseline, TrimOptions, trim_text  # noqa: E402
from compactor.detect import Detector  # noqa: E402
from compactor.engine import load_rules  # noqa: E402
from compactor.normalize import strip_ansi  # noqa: E402


def evaluate(corpus: Path, with_baseline: bool = False) -> dict:
    det = Detector(load_rules())
    rows = []
    tot_lab = tot_kept = tot_in = tot_out = 0
    for folder in sorted((corpus / "ci-breakages").iterdir()):
        log = folder / "fail.log"
        if not log.is_file():
            continue
        labels = json.loads((folder / "labels.json").read_text())
        text = log.read_text(encoding="utf-8", errors="replace")
        t0 = time.perf_counter()
        base = Baseline.from_paths([folder / "pass.log"]) if with_baseline else None
        out, stats = trim_text(det, text, TrimOptions(receipt=False), baseline=base)
        dt = time.perf_counter() - t0
        lines = text.splitlines()
        missing = []
        kept = 0
        for n in labels["error_lines"]:
            want = strip_ansi(lines[n - 1]).strip()
            if not want or want in out:
                kept += 1
            else:
                missing.append(n)
        b_in, b_out = len(text.encode()), len(out.encode())
        rows.append({"log": folder.name, "labelled": len(labels["error_lines"]), "kept": kept,
                     "recall": kept / max(1, len(labels["error_lines"])), "bytes_in": b_in, "bytes_out": b_out,
                     "ratio": b_in / max(1, b_out), "seconds": dt, "missing": missing[:20]})
        tot_lab += len(labels["error_lines"])
        tot_kept += kept
        tot_in += b_in
        tot_out += b_out
    traces = []
    for sub in ("crash-traces", "exception-traces"):
        for f in sorted((corpus / sub).glob("*.txt")):
            text = f.read_text(encoding="utf-8", errors="replace")
            out, _ = trim_text(det, text, TrimOptions(receipt=False))
            lines = [strip_ansi(x).strip() for x in text.splitlines()]
            det_spans = det.detect(text.replace("\r\n", "\n")).raw_spans
            trace_lines = set()
            for s in det_spans:
                if s.family == "trace":
                    trace_lines.update(range(s.line_start - 1, s.line_end))
            lost = [i + 1 for i in sorted(trace_lines) if i < len(lines) and lines[i] and lines[i] not in out]
            traces.append({"file": f"{sub}/{f.name}", "trace_lines": len(trace_lines), "lost": lost[:10]})
    return {
        "ci_breakages": {"labelled": tot_lab, "kept": tot_kept, "recall": tot_kept / max(1, tot_lab),
                         "bytes_in": tot_in, "bytes_out": tot_out, "ratio": tot_in / max(1, tot_out), "logs": rows},
        "traces": {"files": len(traces), "files_with_trace_lines_lost": sum(1 for t in traces if t["lost"]), "rows": traces},
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    res = evaluate(Path(args.corpus))
    res_b = evaluate(Path(args.corpus), with_baseline=True)
    res["ci_breakages_with_baseline"] = res_b["ci_breakages"]
    cb, cbb = res["ci_breakages"], res_b["ci_breakages"]
    print(f"{'':<32} {'':>8} {'---- no baseline ----':>22} {'-- --baseline pass.log --':>26}")
    print(f"{'log':<32} {'labelled':>8} {'kept':>6} {'recall':>7} {'ratio':>7}   {'kept':>6} {'recall':>7} {'ratio':>7}")
    for r, rb in zip(cb["logs"], cbb["logs"]):
        print(f"{r['log']:<32} {r['labelled']:>8} {r['kept']:>6} {r['recall']:>7.1%} {r['ratio']:>6.1f}x"
              f"   {rb['kept']:>6} {rb['recall']:>7.1%} {rb['ratio']:>6.1f}x")
    print(f"{'TOTAL':<32} {cb['labelled']:>8} {cb['kept']:>6} {cb['recall']:>7.2%} {cb['ratio']:>6.1f}x"
          f"   {cbb['kept']:>6} {cbb['recall']:>7.2%} {cbb['ratio']:>6.1f}x")
    tr = res["traces"]
    print(f"crash/exception traces: {tr['files']} files, {tr['files_with_trace_lines_lost']} lost trace lines")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
