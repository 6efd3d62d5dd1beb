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


NOT_TRAJ = ("anchor-gold", "ci-breakages", "ci-logs", "crash-traces", "exception-traces")


def trajectories(corpus: Path) -> list[Path]:
    """The runs of a corpus: the layouts above first, then any other folder of runs (the extra
    set's ``atif``, ``pi-coding-agent``, ...); logs, traces and labels are not runs."""
    extra = sorted(d.name for d in corpus.iterdir() if d.is_dir() and d.name not in TRAJ_DIRS + NOT_TRAJ)
    return [p for d in (*TRAJ_DIRS, *extra) for p in sorted((corpus / d).glob("*"))
            if p.is_file() and p.name != "SOURCES.md"]


def utilisation(sent: int, budget: int, l1_sent: int, at_floor: bool) -> dict[str, Any]:
    """Tokens kept / budget for one run at one budget, and whether it meets the contract's goal:
    a run whose Level 1 output is over the budget comes back at 85-100% of it, or at its floor."""
    util = sent / budget if budget else None
    needs = l1_sent > budget
    ok = (not needs) or at_floor or (util is not None and 0.85 <= util <= 1.0)
    return {"util": round(util, 4) if util is not None else None, "needs_more_than_l1": needs, "ok": ok}


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


def utilisation_summary(files: list[dict[str, Any]], points) -> dict[str, Any]:
    """Per budget point: mean utilisation, and how many runs over the budget at Level 1 came back
    at 85-100% of it (or at their floor)."""
    util: dict[str, Any] = {}
    for p, frac in points:
        if frac is None:
            continue
        rows = [f["compactor@" + p] for f in files]
        need = [r for r in rows if r.get("needs_more_than_l1")]
        free = [r for r in need if not r["at_floor"]]
        met = [r for r in rows if not r["at_floor"]]  # (at the floor the budget was raised to it)
        util[p] = {"mean": round(100.0 * sum(r["util"] for r in met) / len(met), 1) if met else None,
                   "mean_needing": round(100.0 * sum(r["util"] for r in free) / len(free), 1) if free else None,
                   "needing": len(need), "at_floor": len(need) - len(free),
                   "ok": sum(r["ok"] for r in need),
                   "under_85": sum(1 for r in free if r["util"] < 0.85),
                   "min_needing": round(100.0 * min(r["util"] for r in free), 1) if free else None}
    return util


def run(corpus: Path, points: tuple[tuple[str, float | None], ...] = POINTS,
        methods: tuple[str, ...] = METHODS, skip_text: bool = False) -> dict[str, Any]:
    count = compactor.get_counter().count
    comp = compactor.Compactor()
    agg: dict[str, dict[str, dict[str, Any]]] = {m: {p: {"tokens": 0, "before": 0, "over": 0, "files": 0,
                                                         "rec": {c: [0, 0] for c in CATS}} for p, _ in points}
                                                for m in methods}
    files = []
    unread = []
    t0 = time.perf_counter()
    for path in trajectories(corpus):
        try:
            doc = load_document(str(path))
        except compactor.CompactorError as exc:  # a run no reader takes (a corrupt record): named, not scored
            unread.append({"file": evaluate.rel(str(path)), "error": " ".join(str(exc).split())[:200]})
            continue
        if skip_text and doc.format == "text":
            unread.append({"file": evaluate.rel(str(path)), "error": "read as plain text (skipped: --skip-text)"})
            continue
        raw = [gold.SegmentLike(s.role.value, s.kind.value, s.text, s.meta, s.call_id, s.exit_code, s.is_error)
               for s in doc.segments]
        segs = [gold.SegmentLike(s.role, s.kind, evaluate.clean(s.text), s.meta, s.call_id, s.exit_code, s.is_error)
                for s in raw]
        items = gold.extract(raw).items
        before = baselines.tokens_of([s.text for s in segs], count)
        frec: dict[str, Any] = {"file": evaluate.rel(str(path)), "format": doc.format, "tokens_before": before}
        frec["structural"] = doc.format != "text"
        l1_sent = None
        for pname, frac in points:
            budget = None if frac is None else max(1, math.ceil(before * frac))
            outs: dict[str, tuple[list[str], bool]] = {}
            c = _compactor(comp, path, budget, count)
            outs["compactor"] = (c["texts"], c["floor"] is not None)
            sent = {"compactor": c["sent"]}
            if budget is None:
                l1_sent = c["sent"]
            base = {"truncation": lambda: baselines.truncate(segs, math.ceil(before * 0.5), count),
                    "masking": lambda: baselines.mask(segs, 10),
                    "head+tail": lambda: baselines.head_tail(segs, 20)} if budget is None else \
                {"truncation": lambda: baselines.truncate(segs, budget, count),
                 "masking": lambda: baselines.tune_mask(segs, budget, count)[1],
                 "head+tail": lambda: baselines.tune_head_tail(segs, budget, count)[1]}
            for m, make in base.items():
                if m in methods:
                    outs[m] = (make(), False)
            for m, (texts, at_floor) in outs.items():
                tok = baselines.tokens_of(texts, count)
                missed: dict[str, list[str]] | None = {} if m == "compactor" else None
                rec = evaluate.recall(items, texts, missed)
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
                if missed:
                    frec[f"{m}@{pname}"]["missed"] = {k: v for k, v in missed.items() if k in CATS}
                if m == "compactor" and budget is not None and l1_sent is not None:
                    frec[f"{m}@{pname}"].update(utilisation(sent[m], budget, l1_sent, at_floor))
        files.append(frec)
    summary = {m: {p: {"kept_pct": round(100.0 * a["tokens"] / a["before"], 2) if a["before"] else None,
                       "files": a["files"], "over_budget": a["over"],
                       "recall": {c: (round(100.0 * a["rec"][c][0] / a["rec"][c][1], 2) if a["rec"][c][1] else None)
                                  for c in CATS},
                       "gold": {c: a["rec"][c][1] for c in CATS}}
                   for p, a in by_p.items()}
               for m, by_p in agg.items()}
    util = utilisation_summary(files, points) if "compactor" in methods else {}
    return {"benchmark": "budget_curve", "corpus": str(corpus), "token_counter": compactor.get_counter().name,
            "points": [p for p, _ in points], "methods": list(methods), "categories": list(CATS),
            "files": files, "unread": unread, "summary": summary, "utilisation": util,
            "seconds": round(time.perf_counter() - t0, 2)}


def table(result: dict[str, Any]) -> str:
    s = result["summary"]
    pts = result["points"]
    out: list[str] = []
    n = s["compactor"][pts[0]]["files"]
    structural = sum(1 for f in result["files"] if f.get("structural"))
    name = Path(result.get("corpus", "../shared/corpus")).name
    out.append(f"### Recall against budget — {n} agent trajectories of ../shared/{name} "
               f"({structural} read as conversations, {n - structural} as plain text)\n")
    if result.get("unread"):
        out.append("Not read: " + "; ".join(f"{u['file']} ({u['error'][:80]})" for u in result["unread"]) + "\n")
    out.append("| method | " + " | ".join(f"{p}: kept" for p in pts) + " |")
    out.append("|---|" + "---:|" * len(pts))
    for m in result["methods"]:
        cells = []
        for p in pts:
            a = s[m][p]
            over = f" ({a['over_budget']} over)" if a["over_budget"] else ""
            cells.append(f"{a['kept_pct']:.1f}%{over}")
        out.append(f"| {m} | " + " | ".join(cells) + " |")
    util = result.get("utilisation") or {}
    if util:
        out.append("\n**compactor: utilisation** (tokens kept as written / budget; runs whose Level 1 output is over "
                   "the budget must come back at 85–100% of it, or at their floor)\n")
        out.append("| budget | mean (runs not at their floor) | runs over at Level 1 | mean of those (not at floor) | "
                   "at 85–100% or floor | under 85% | "
                   "at floor | lowest (not at floor) |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for p, u in util.items():
            def pct(x):
                return "–" if x is None else f"{x:.1f}%"
            out.append(f"| {p} | {pct(u['mean'])} | {u['needing']} | {pct(u['mean_needing'])} | {u['ok']} / {u['needing']} | "
                       f"{u['under_85']} | {u['at_floor']} | {pct(u['min_needing'])} |")
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


def utilisation_figure(runs: list[tuple[str, dict[str, Any]]], out: Path) -> Path:
    """Per-run utilisation (tokens kept as written / budget) of the runs whose Level 1 output is
    over the budget, at each budget point, for one or more results (before / after)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [p for p in runs[0][1]["points"] if p != "natural"]
    colors = ("#8c8c8c", "#1f6feb", "#d97706")
    fig, ax = plt.subplots(figsize=(6.4, 3.8), dpi=110)
    ax.axhspan(85, 100, color="#2da44e", alpha=0.12, label="goal: 85–100%")
    width = 0.8 / len(runs)
    for k, (label, result) in enumerate(runs):
        for i, p in enumerate(pts):
            ys = [100.0 * f["compactor@" + p]["util"] for f in result["files"]
                  if f["compactor@" + p].get("needs_more_than_l1") and not f["compactor@" + p]["at_floor"]]
            xs = [i - 0.4 + width * (k + 0.5)] * len(ys)
            ax.scatter(xs, ys, s=14, color=colors[k % len(colors)], alpha=0.8, label=label if i == 0 else None)
    ax.set_xticks(range(len(pts)), pts)
    ax.set_ylim(0, 105)
    ax.set_ylabel("tokens kept / budget (%)")
    ax.set_xlabel("budget (share of the input's tokens)")
    n = sum(1 for f in runs[-1][1]["files"])
    ax.set_title(f"Budget utilisation per run — {n} runs of {Path(runs[-1][1].get('corpus', '')).name}")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, metadata={"Software": None})
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=evaluate.default_corpus(),
                    help="a folder of runs by layout (../shared/corpus, ../shared/trajectories-extra)")
    ap.add_argument("--points", default=",".join(p for p, _ in POINTS),
                    help="budget points to run, e.g. natural,25%%,15%%,10%%,5%% (natural is always run)")
    ap.add_argument("--methods", default=",".join(METHODS), help="methods to run (compactor is always run)")
    ap.add_argument("--out", type=Path, default=HERE / "out" / "budget_curve.json")
    ap.add_argument("--figures", type=Path, default=HERE / "figures")
    ap.add_argument("--no-figures", action="store_true")
    ap.add_argument("--skip-text", action="store_true",
                    help="score only the runs a reader takes as a conversation (not as plain text)")
    ap.add_argument("--table", type=Path, default=None, help="print the tables of an earlier run's JSON and exit")
    ap.add_argument("--before", type=Path, default=None, help="with --table and --util-figure: an earlier run to compare")
    ap.add_argument("--util-figure", type=Path, default=None,
                    help="with --table: draw each run's utilisation (before / after) into this PNG")
    args = ap.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"budget_curve: corpus {args.corpus} not found", file=sys.stderr)
        return 2
    if args.table is not None:
        result = json.loads(args.table.read_text(encoding="utf-8"))
        pts = [(p, None if p == "natural" else 1.0) for p in result["points"]]
        result["utilisation"] = utilisation_summary(result["files"], pts)
        print(table(result))
        if args.util_figure is not None:
            runs = [("before", json.loads(args.before.read_text(encoding="utf-8")))] if args.before else []
            print(f"figure: {utilisation_figure([*runs, ('after' if runs else 'compactor', result)], args.util_figure)}",
                  file=sys.stderr)
        return 0
    known = dict(POINTS)
    names = ["natural"] + [p.strip() for p in args.points.split(",") if p.strip() and p.strip() != "natural"]
    bad = [p for p in names if p not in known and not p.rstrip("%").replace(".", "").isdigit()]
    if bad:
        print(f"budget_curve: unknown budget point {bad[0]!r} (use natural or N%)", file=sys.stderr)
        return 2
    points = tuple((p, known[p] if p in known else float(p.rstrip("%")) / 100) for p in names)
    methods = tuple(dict.fromkeys(["compactor"] + [m.strip() for m in args.methods.split(",") if m.strip()]))
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        print(f"budget_curve: unknown method {unknown[0]!r} (one of {', '.join(METHODS)})", file=sys.stderr)
        return 2
    result = run(args.corpus, points, methods, args.skip_text)
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
