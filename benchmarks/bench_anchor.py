"""Anchor (Level 2) speed: build time per corpus trajectory and per-turn merge cost.

Every figure is set against ``json.dumps`` of the same trajectory (the parsed input document),
measured in the same run on the same machine, so the ratios travel between machines:

- ``build``: ``build_anchor(segments, spans)`` of the whole trajectory (median of N runs);
- ``merge/turn``: the trajectory replayed one turn (step) at a time through ``merge``, as an
  agent calling ``compact()`` every turn would; mean and max per turn. ``merge/turn ÷ dumps``
  compares one turn's merge with serialising the whole trajectory once;
- a synthetic ~1 MB trajectory (corpus turns repeated with fresh step ids) for the
  "well under a second for 1 MB" goal.

Spans come from the protect rules beforehand (not timed: that is the detect stage's cost).

    python benchmarks/bench_anchor.py            # -> benchmarks/out/bench_anchor.json
    python benchmarks/bench_anchor.py --quick    # fewer repetitions
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from compactor.anchor import build_anchor, merge
from compactor.budget import anchor_tokens  # noqa: E402
from compactor.models import Segment, SegmentKind  # noqa: E402
from compactor.normalize import normalize  # noqa: E402
from compactor.pipeline import Compactor, load_document  # noqa: E402

CORPUS = Path(os.environ.get("COMPACTOR_CORPUS", ROOT.parent / "shared" / "corpus"))
TRAJECTORIES = [
    "swe-agent/pydicom__pydicom-1458.gpt4.traj",
    "swe-agent/marshmallow-1867.function_calling_replace_from_source.traj",
    "mini-swe-agent/pvlib__pvlib-python-1072.deepseek_reasoner_dev.traj.json",
    "mini-swe-agent/django__django-11099.deepseek_chat_test_1-100.traj.json",
    "openhands-v0/ponylang__ponyc-4593.json",
    "openhands-v0/runtime-trajs-basic.json",
    "openhands-v1/safety-corrupt-transactions.gpt-4o.json",
    "claude-code/coverage-test-fix.jsonl",
    "claude-code/stop-hook-uncommitted-changes.jsonl",
]
FIXTURES = ["debugging.openai.json", "refactor.swe-agent.traj", "requirements.zh.steps.json", "starship.steps.json"]


def _median_time(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _spans(comp: Compactor, segments: list[Segment]):
    out = []
    for s in segments:
        out.extend(comp.detector.detect(normalize(s.text), role=s.role.value, segment_id=s.id,
                                        step_id=s.step_id).spans)
    return out


def _turns(segments: list[Segment]) -> list[list[Segment]]:
    turns: list[list[Segment]] = []
    for s in segments:
        if turns and turns[-1][0].step_id == s.step_id:
            turns[-1].append(s)
        else:
            turns.append([s])
    return turns


def measure(comp: Compactor, name: str, doc_data: Any, segments: list[Segment], reps: int) -> dict[str, Any]:
    spans = _spans(comp, segments)
    by_seg: dict[str, list] = {}
    for sp in spans:
        by_seg.setdefault(sp.segment_id, []).append(sp)
    size = len(json.dumps(doc_data, ensure_ascii=False).encode("utf-8"))
    dumps = _median_time(lambda: json.dumps(doc_data, ensure_ascii=False), reps)
    build = _median_time(lambda: build_anchor(segments, spans), reps)
    anchor = build_anchor(segments, spans)
    per_turn: list[float] = []
    best_total = None
    for _ in range(max(1, reps // 3)):
        a = build_anchor([], [])
        times = []
        for turn in _turns(segments):
            sp = [x for s in turn for x in by_seg.get(s.id, [])]
            t = time.perf_counter()
            a = merge(a, turn, sp)
            times.append(time.perf_counter() - t)
        total = sum(times)
        if best_total is None or total < best_total:
            best_total, per_turn = total, times
    mean_turn = statistics.mean(per_turn) if per_turn else 0.0
    return {
        "trajectory": name,
        "bytes": size,
        "segments": len(segments),
        "turns": len(per_turn),
        "anchor_tokens": anchor_tokens(anchor, comp.counter),
        "json_dumps_ms": round(dumps * 1000, 3),
        "build_ms": round(build * 1000, 3),
        "build_vs_dumps": round(build / dumps, 2) if dumps else None,
        "build_mb_per_s": round(size / 1_048_576 / build, 2) if build else None,
        "merge_turn_mean_ms": round(mean_turn * 1000, 3),
        "merge_turn_max_ms": round(max(per_turn) * 1000, 3) if per_turn else 0.0,
        "merge_turn_vs_dumps": round(mean_turn / dumps, 3) if dumps else None,
        "merge_all_turns_vs_build": round(best_total / build, 2) if build and best_total else None,
    }


def synthetic(segments: list[Segment], target_bytes: int) -> tuple[list[Segment], list[dict[str, Any]]]:
    """Corpus turns repeated with fresh ids and step ids until the messages reach target_bytes."""
    out: list[Segment] = []
    data: list[dict[str, Any]] = []
    size = 0
    rep = 0
    while size < target_bytes:
        for s in segments:
            step = s.step + rep * 1000
            seg = s.model_copy(update={"id": f"r{rep}.{s.id}", "index": len(out), "step": step,
                                       "step_id": f"s{step}",
                                       "call_id": f"r{rep}.{s.call_id}" if s.call_id else None})
            out.append(seg)
            msg = {"role": s.role.value, "content": s.text}
            data.append(msg)
            size += len(json.dumps(msg, ensure_ascii=False).encode("utf-8"))
        rep += 1
    return out, data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (CI smoke)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per measurement (median)")
    ap.add_argument("--out", default=str(HERE / "out" / "bench_anchor.json"))
    args = ap.parse_args(argv)
    reps = args.reps or (3 if args.quick else 15)
    comp = Compactor()
    rows: list[dict[str, Any]] = []
    base_for_synth: list[Segment] | None = None
    for rel in TRAJECTORIES:
        p = CORPUS / rel
        if not p.exists():
            continue
        doc = load_document(p)
        if doc.format == "text" or not any(s.kind == SegmentKind.tool_call for s in doc.segments):
            continue
        row = measure(comp, rel, doc.data, doc.segments, reps)
        row["format"] = doc.format
        rows.append(row)
        if rel.startswith("mini-swe-agent/django"):
            base_for_synth = doc.segments
    for f in FIXTURES:
        p = ROOT / "fixtures" / "anchor" / f
        if p.exists():
            doc = load_document(p)
            row = measure(comp, f"fixtures/anchor/{f}", doc.data, doc.segments, reps)
            row["format"] = doc.format
            rows.append(row)
            if base_for_synth is None and f.startswith("debugging"):
                base_for_synth = doc.segments
    synth_rows = []
    if base_for_synth:
        for mb in ((1,) if args.quick else (1, 4)):
            segs, data = synthetic(base_for_synth, mb * 1_048_576)
            row = measure(comp, f"synthetic {mb} MB (repeated turns)", data, segs, max(1, reps // 5))
            row["format"] = "synthetic"
            synth_rows.append(row)
    allrows = rows + synth_rows
    cols = [("trajectory", 58), ("bytes", 9), ("segments", 8), ("json_dumps_ms", 9), ("build_ms", 9),
            ("build_vs_dumps", 8), ("merge_turn_mean_ms", 9), ("merge_turn_max_ms", 9), ("merge_turn_vs_dumps", 8),
            ("anchor_tokens", 7)]
    heads = {"trajectory": "trajectory", "bytes": "bytes", "segments": "segs", "json_dumps_ms": "dumps ms",
             "build_ms": "build ms", "build_vs_dumps": "÷dumps", "merge_turn_mean_ms": "turn ms",
             "merge_turn_max_ms": "max ms", "merge_turn_vs_dumps": "÷dumps", "anchor_tokens": "tokens"}
    print("#### Anchor build and per-turn merge (ratios against json.dumps of the same trajectory, same run)\n")
    print("| " + " | ".join(heads[c] for c, _ in cols) + " |")
    print("|" + "|".join("---" if c == "trajectory" else "---:" for c, _ in cols) + "|")
    for r in allrows:
        print("| " + " | ".join(str(r.get(c, "")) for c, _ in cols) + " |")
    one_mb = next((r for r in synth_rows if r["trajectory"].startswith("synthetic 1 MB")), None)
    if one_mb:
        print(f"\n1 MB trajectory: build {one_mb['build_ms']} ms ({one_mb['build_vs_dumps']}x json.dumps); "
              f"goal: well under 1000 ms -> {'met' if one_mb['build_ms'] < 500 else 'NOT met'}")
    res = {"benchmark": "bench_anchor", "quick": args.quick, "reps": reps,
           "python": platform.python_version(), "machine": platform.machine(),
           "rows": rows, "synthetic": synth_rows}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
