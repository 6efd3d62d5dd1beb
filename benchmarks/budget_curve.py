"""Recall against budget: compactor and the baselines at natural size, 50%, 25%, 15%, 10% and 5%.

For every agent trajectory of ``../shared/corpus`` (the layouts compactor reads as
conversations), every method is run at each budget point and scored on the gold evidence of
``benchmarks/gold.py`` (independent of compactor's rules):

- ``natural``: each method's own default — compactor Level 1 (no budget), observation masking with
  the last 10 outputs raw, head+tail keeping 20 lines per output, truncation to 50%;
- ``50%`` … ``5%`` of the input's tokens: truncation keeps the newest messages that fit; masking
  and head+tail use the largest parameter that fits; compactor gets ``compact(path, budget=B)``.
  Below compactor's floor (the newest request, the user constraints, the live error's header) the
  budget cannot be met: compactor is then run at its floor and the file counts as over budget.

Every method's "kept" share and recall are counted on the same thing: the segment texts (for
compactor: its output written in the input's layout and read back). Whether compactor met a
budget is judged strictly, on every text of the written layout, mirror copies included
(``compactor.budget.measure.sent_texts``). Recall is micro-averaged over files.

    python benchmarks/budget_curve.py                  # table + figures in benchmarks/figures/
    python benchmarks/budget_curve.py --no-figures     # table only (no matplotlib needed)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import baselines  # noqa: E402
import evaluate  # noqa: E402
import gold  # noqa: E402

import compactor  # noqa: E402
from compactor import load_document  # noqa: E402
from compactor.budget.measure import read_back, sent_texts  # noqa: E402

TRAJ_DIRS = ("swe-agent", "mini-swe-agent", "openhands-v0", "openhands-v1", "claude-code", "codex-rollout", "aider")
POINTS: tuple[tuple[str, float | None], ...] = (("natural", None), ("50%", 0.5), ("25%", 0.25), ("15%", 0.15),
                                                 ("10%", 0.10), ("5%", 0.05))
METHODS = ("compactor", "truncation", "masking", "head+tail")
CATS = ("error_lines", "frames", "exit_codes", "constraints", "failed_approaches", "numbers")


def trajectories(corpus: Path) -> list[Path]:
    return [p for d in TRAJ_DIRS for p in sorted((corpus / d).glob("*")) if p.is_file()]


def _compactor(comp: compactor.Compactor, path: Path, budget: int | None, count) -> dict[str, Any]:
    floor = None
    try:
        res = comp.compact(str(path), budget=budget) if budget is not None else comp.compact(str(path))
    except compactor.BudgetError as exc:
        floor = exc.floor
        res = comp.compact(str(path), budget=floor)
    back = read_back(res.format, res.messages)
    texts = [evaluate.clean(s.text) for s in back.segments]
    sent = sum(count(t) for t in sent_texts(back))
    return {"texts": texts, "floor": floor, "sent": sent}


def run(corpus: Path) -> dict[str, Any]:
    count = compactor.get_counter().count
    comp = compactor.Compactor()
    agg: dict[str, dict[str, dict[str, Any]]] = {m: {p: {"tokens": 0, "before": 0, "over": 0, "files": 0,
                                                         "rec": {c: [0, 0] for c in CATS}} for p, _ in POINTS}
                                                for m in METHODS}
    files = []
    t0 = time.perf_counter()
    for path in trajectories(corpus):
        doc = load_document(str(path))
        raw = [gold.SegmentLike(s.role.value, s.kind.value, s.text, s.meta, s.call_id, s.exit_code, s.is_error)
               for s in doc.segments]
        segs = [gold.SegmentLike(s.role, s.kind, evaluate.clean(s.text), s.meta, s.call_id, s.exit_code, s.is_error)
                for s in raw]
        items = gold.extract(raw).items
        before = baselines.tokens_of([s.text for s in segs], count)
        frec: dict[str, Any] = {"file": evaluate.rel(str(path)), "format": doc.format, "tokens_before": before}
        for pname, frac in POINTS:
            budget = None if frac is None else max(1, math.ceil(before * frac))
            outs: dict[str, tuple[list[str], bool]] = {}
            c = _compactor(comp, path, budget, count)
            outs["compactor"] = (c["texts"], c["floor"] is not None)
            sent = {"compactor": c["sent"]}
            if budget is None:
                outs["truncation"] = (baselines.truncate(segs, math.ceil(before * 0.5), count), False)
                outs["masking"] = (baselines.mask(segs, 10), False)
                outs["head+tail"] = (baselines.head_tail(segs, 20), False)
            else:
                outs["truncation"] = (baselines.truncate(segs, budget, count), False)
                outs["masking"] = (baselines.tune_mask(segs, budget, count)[1], False)
                outs["head+tail"] = (baselines.tune_head_tail(segs, budget, count)[1], False)
            for m, (texts, at_floor) in outs.items():
                tok = baselines.tokens_of(texts, count)
                rec = evaluate.recall(items, texts)
                a = agg[m][pname]
                a["tokens"] += tok
                a["before"] += before
                a["files"] += 1
                a["over"] += int(budget is not None and sent.get(m, tok) > budget)
                for cat in CATS:
                    a["rec"][cat][0] += rec[cat][0]
                    a["rec"][cat][1] += rec[cat][1]
                frec[f"{m}@{pname}"] = {"tokens": tok, "sent": sent.get(m, tok), "budget": budget, "at_floor": at_floor,
                                        "recall": {k: rec[k] for k in CATS}}
        files.append(frec)
    summary = {m: {p: {"kept_pct": round(100.0 * a["tokens"] / a["before"], 2) if a["before"] else None,
                       "files": a["files"], "over_budget": a["over"],
                       "recall": {c: (round(100.0 * a["rec"][c][0] / a["rec"][c][1], 2) if a["rec"][c][1] else None)
                                  for c in CATS},
                       "gold": {c: a["rec"][c][1] for c in CATS}}
                   for p, a in by_p.items()}
               for m, by_p in agg.items()}
    return {"benchmark": "budget_curve", "token_counter": compactor.get_counter().name,
            "points": [p for p, _ in POINTS], "methods": list(METHODS), "categories": list(CATS),
            "files": files, "summary": summary, "seconds": round(time.perf_counter() - t0, 2)}


def table(result: dict[str, Any]) -> str:
    s = result["summary"]
    pts = result["points"]
    out: list[str] = []
    n = s["compactor"][pts[0]]["files"]
    out.append(f"### Recall against budget — {n} agent trajectories of ../shared/corpus\n")
    out.append("| method | " + " | ".join(f"{p}: kept" for p in pts) + " |")
    out.append("|---|" + "---:|" * len(pts))
    for m in result["methods"]:
        cells = []
        for p in pts:
            a = s[m][p]
            over = f" ({a['over_budget']} over)" if a["over_budget"] else ""
            cells.append(f"{a['kept_pct']:.1f}%{over}")
        out.append(f"| {m} | " + " | ".join(cells) + " |")
    for cat in result["categories"]:
        gold_n = s["compactor"][pts[0]]["gold"][cat]
        if not gold_n:
            continue
        out.append(f"\n**{cat}** ({gold_n} gold items): recall\n")
        out.append("| method | " + " | ".join(pts) + " |")
        out.append("|---|" + "---:|" * len(pts))
        for m in result["methods"]:
            out.append(f"| {m} | " + " | ".join(f"{s[m][p]['recall'][cat]:.1f}%" for p in pts) + " |")
    return "\n".join(out) + "\n"


def figures(result: dict[str, Any], out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = result["summary"]
    pts = result["points"]
    style = {"compactor": ("#1f6feb", "o", 2.6), "truncation": ("#8c8c8c", "s", 1.4),
             "masking": ("#d97706", "^", 1.4), "head+tail": ("#7c3aed", "D", 1.4)}
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for cat in result["categories"]:
        gold_n = s["compactor"][pts[0]]["gold"][cat]
        if not gold_n:
            continue
        fig, ax = plt.subplots(figsize=(6.4, 3.8), dpi=110)
        xs = list(range(len(pts)))
        for m in result["methods"]:
            color, marker, lw = style.get(m, ("black", "o", 1.2))
            ys = [s[m][p]["recall"][cat] for p in pts]
            ax.plot(xs, ys, marker=marker, color=color, linewidth=lw, label=m)
        ax.set_xticks(xs, [f"{p}\n({s['compactor'][p]['kept_pct']:.0f}% kept)" if p == "natural" else p for p in pts])
        ax.set_ylim(-3, 103)
        ax.set_ylabel("recall (%)")
        ax.set_xlabel("budget (share of the input's tokens)")
        ax.set_title(f"{cat.replace('_', ' ')} — {gold_n} gold items, {s['compactor'][pts[0]]['files']} trajectories")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower left", fontsize=8)
        fig.tight_layout()
        p = out_dir / f"budget_{cat}.png"
        fig.savefig(p, metadata={"Software": None})
        plt.close(fig)
        paths.append(p)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=evaluate.default_corpus())
    ap.add_argument("--out", type=Path, default=HERE / "out" / "budget_curve.json")
    ap.add_argument("--figures", type=Path, default=HERE / "figures")
    ap.add_argument("--no-figures", action="store_true")
    args = ap.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"budget_curve: corpus {args.corpus} not found", file=sys.stderr)
        return 2
    result = run(args.corpus)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(table(result))
    if not args.no_figures:
        for p in figures(result, args.figures):
            print(f"figure: {p.relative_to(HERE.parent) if p.is_relative_to(HERE.parent) else p}", file=sys.stderr)
    print(f"wrote {args.out} ({len(result['files'])} files, {result['seconds']} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
