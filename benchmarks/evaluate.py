"""Fidelity benchmark: compression ratio and evidence recall, compactor vs baselines.

For every trajectory / log in ``../shared/corpus`` (and ``fixtures/trajectories``,
``fixtures/demo``):

1. read it with ``compactor.load_document`` (segmentation only);
2. extract the gold evidence with ``benchmarks/gold.py`` (the benchmark's own regexes, not
   compactor's rules) plus the hand labels of ``ci-breakages/*/labels.json``;
3. run every method on the same segments: no compaction, truncation, observation masking,
   head+tail, compactor Level 1 / 2 / 3;
4. count tokens the same way for every method (``compactor.get_counter().count`` summed over
   the output's message texts; compactor's output is read back with its own layout reader) and
   check which gold items appear verbatim in the output (ANSI stripped, whitespace runs
   collapsed to one space on both sides).

Then the same at EQUAL BUDGET: every method tuned to the size compactor Level 1 reaches, and to
25% of the original.

    python benchmarks/evaluate.py                 # full corpus -> benchmarks/out/evaluate.json
    python benchmarks/evaluate.py --quick         # a few files (CI smoke)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import baselines  # noqa: E402
import gold  # noqa: E402
from gold import CATEGORIES, SegmentLike  # noqa: E402

import compactor  # noqa: E402
from compactor import load_document  # noqa: E402

CORPUS_DIRS = ("swe-agent", "mini-swe-agent", "openhands-v0", "openhands-v1", "claude-code", "codex-rollout", "aider", "ci-logs")
FIXTURE_DIRS = ("fixtures/trajectories", "fixtures/demo")
SKIP_NAMES = {"README.md", "SOURCES.md", "LICENSE"}

DEFAULT_METHODS = ("none", "truncate@50%", "mask(last 10)", "head+tail(20)", "compactor L1", "compactor L2", "compactor L3@25%")
BUDGET_METHODS = ("truncate", "mask", "head+tail", "compactor")


# --------------------------------------------------------------------------- inputs


def default_corpus() -> Path:
    return Path(os.environ.get("COMPACTOR_CORPUS", ROOT.parent / "shared" / "corpus"))


def collect_files(corpus: Path | None, quick: bool = False) -> list[dict[str, Any]]:
    """Every file to evaluate: {path, source, labels?}."""
    out: list[dict[str, Any]] = []
    if corpus is not None and corpus.is_dir():
        for d in CORPUS_DIRS:
            for p in sorted((corpus / d).glob("*")):
                if p.is_file() and p.name not in SKIP_NAMES and not p.name.startswith("."):
                    out.append({"path": str(p), "source": f"corpus/{d}"})
        for p in sorted((corpus / "ci-breakages").glob("*/fail.log")):
            lab = p.parent / "labels.json"
            out.append({"path": str(p), "source": "corpus/ci-breakages", "labels": str(lab) if lab.exists() else None})
    for d in FIXTURE_DIRS:
        for p in sorted((ROOT / d).glob("*")):
            if p.is_file() and p.name not in SKIP_NAMES and not p.name.startswith("."):
                out.append({"path": str(p), "source": d})
    if quick:
        keep = []
        want = ("debug-session.openai.json", "pytest-run.log", "acme-version", "lodash-merge", "cidiff_75/fail.log")
        for f in out:
            if any(f["path"].endswith(w) or w in f["path"] for w in want):
                keep.append(f)
        out = keep or out[:3]
    return out


def clean(text: str) -> str:
    """The light normalisation every method's input gets: ANSI escapes removed, CRLF -> LF."""
    return gold.strip_ansi(text).replace("\r\n", "\n")


def rel(path: str) -> str:
    p = Path(path).resolve()
    for base, name in ((ROOT, ""), (default_corpus().resolve(), "corpus/")):
        try:
            return name + str(p.relative_to(base))
        except ValueError:
            continue
    return str(path)


# --------------------------------------------------------------------------- scoring


def _escaped(item: str) -> str:
    """The item as it reads inside a JSON string (tool-call arguments keep quotes escaped)."""
    return json.dumps(item, ensure_ascii=False)[1:-1]


def recall(items: dict[str, list[str]], texts: list[str], missed: dict[str, list[str]] | None = None) -> dict[str, list[int]]:
    hay = gold.norm("\n".join(texts))
    out = {}
    for cat in CATEGORIES:
        found = 0
        for it in items[cat]:
            if it in hay or _escaped(it) in hay:
                found += 1
            elif missed is not None:
                missed.setdefault(cat, []).append(it[:300])
        out[cat] = [found, len(items[cat])]
    return out


def score(texts: list[str], items, count, before: int, keep_missed: bool = False, **extra) -> dict[str, Any]:
    tok = baselines.tokens_of(texts, count)
    missed: dict[str, list[str]] | None = {} if keep_missed else None
    out = {"tokens": tok, "ratio": round(before / tok, 3) if tok else None, "recall": recall(items, texts, missed), **extra}
    if missed:
        out["missed"] = missed
    return out


def compactor_texts(result) -> list[str]:
    """Read compactor's output back with its own layout reader: the texts the model would see."""
    msgs = result.messages
    if isinstance(msgs, str):
        doc = load_document(msgs, format=result.format, source="<compacted>")
    elif isinstance(msgs, list) and result.format in ("claude-code", "codex", "gemini-cli"):
        text = "\n".join(json.dumps(m, ensure_ascii=False) for m in msgs)
        doc = load_document(text, format=result.format, source="<compacted>")
    else:
        doc = load_document(msgs, format=result.format, source="<compacted>")
    return [clean(s.text) for s in doc.segments]


class CompactorRunner:
    """One Compactor per level (rules compiled once); per-call options as overrides."""

    def __init__(self):
        self.by_level: dict[Any, compactor.Compactor] = {}

    def run(self, path: str, level, budget: int | None = None) -> tuple[Any, str | None]:
        comp = self.by_level.get(level)
        if comp is None:
            comp = self.by_level[level] = compactor.Compactor(level=level)
        try:
            res = comp.compact(path, budget=budget) if budget is not None else comp.compact(path)
        except compactor.CompactorError as exc:
            return None, f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # a crash is a finding: report it, keep going
            return None, f"CRASH {type(exc).__name__}: {exc}"
        if isinstance(level, int) and level >= 2 and level not in res.report.levels_available:
            return None, f"n/a: Level {level} not available (levels_available={res.report.levels_available}; output would be Level {res.report.level})"
        return res, None


_RAISE_TO = re.compile(r"raise the budget to at least (\d+)")


def compactor_score(runner: CompactorRunner, path: str, level, budget, items, count, before) -> dict[str, Any]:
    """Score one compactor run. When the budget cannot be met (BudgetError: the protected evidence
    alone is larger), rerun at the smallest budget compactor says it can meet and mark the result
    as over budget, the way a baseline that cannot reach the budget is reported."""
    res, err = runner.run(path, level, budget)
    extra: dict[str, Any] = {}
    if res is None and budget is not None and err and err.startswith("BudgetError"):
        extra["budget_error"] = err[:300]
        m = _RAISE_TO.search(err)
        nb = int(m.group(1)) if m else None
        tries = []
        for _ in range(8):
            if nb is None:
                break
            res, err2 = runner.run(path, level, nb)
            tries.append(nb)
            if res is not None:
                extra["fallback_budget"] = nb
                break
            m = _RAISE_TO.search(err2 or "")
            nb = max(int(m.group(1)) if m else 0, int(nb * 1.25) + 1)
        if len(tries) > 1:
            extra["fallback_tries"] = tries
    if res is None:
        return {"error": err}
    try:
        texts = compactor_texts(res)
    except Exception as exc:
        return {"error": f"cannot read the output back: {type(exc).__name__}: {exc}"}
    extra.update({"level": res.report.level, "levels_available": res.report.levels_available})
    if budget is not None:
        extra["budget"] = budget
    return score(texts, items, count, before, keep_missed=True, **extra)


# --------------------------------------------------------------------------- per file


def evaluate_file(entry: dict[str, Any], runner: CompactorRunner, count) -> dict[str, Any]:
    path = entry["path"]
    rec: dict[str, Any] = {"file": rel(path), "source": entry["source"]}
    try:
        doc = load_document(path)
    except compactor.CompactorError as exc:
        rec["error"] = f"{type(exc).__name__}: {exc}"
        return rec
    raw = [SegmentLike(s.role.value, s.kind.value, s.text, s.meta, s.call_id, s.exit_code, s.is_error) for s in doc.segments]
    segs = [SegmentLike(s.role, s.kind, clean(s.text), s.meta, s.call_id, s.exit_code, s.is_error) for s in raw]
    g = gold.extract(raw)
    if entry.get("labels"):
        for it in gold.labelled_errors(entry["labels"]):
            g.items["labelled_errors"].append(it)
    items = g.items
    before = baselines.tokens_of([s.text for s in segs], count)
    rec.update({
        "format": doc.format,
        "group": "log" if doc.format == "text" else "trajectory",
        "segments": len(segs),
        "tool_outputs": sum(1 for s in segs if s.kind == "tool_result"),
        "bytes": os.path.getsize(path),
        "tokens_before": before,
        "gold": g.counts(),
    })
    if before == 0:
        rec["error"] = "no text"
        return rec

    m: dict[str, Any] = {}
    m["none"] = score(baselines.none(segs), items, count, before)
    m["truncate@50%"] = score(baselines.truncate(segs, before // 2, count), items, count, before, budget=before // 2)
    m["mask(last 10)"] = score(baselines.mask(segs, 10), items, count, before)
    m["head+tail(20)"] = score(baselines.head_tail(segs, 20), items, count, before)
    m["compactor L1"] = compactor_score(runner, path, 1, None, items, count, before)
    m["compactor L2"] = compactor_score(runner, path, 2, None, items, count, before)
    b25 = max(1, math.ceil(before * 0.25))
    m["compactor L3@25%"] = compactor_score(runner, path, 3, b25, items, count, before)
    rec["methods"] = m

    eq: dict[str, Any] = {}
    budgets = {"25%": b25}
    l1 = m["compactor L1"]
    if "tokens" in l1:
        budgets = {"L1": max(1, l1["tokens"]), **budgets}
    for name, budget in budgets.items():
        e: dict[str, Any] = {"budget": budget}
        e["truncate"] = score(baselines.truncate(segs, budget, count), items, count, before, budget=budget)
        k, texts = baselines.tune_mask(segs, budget, count)
        e["mask"] = score(texts, items, count, before, param=k, budget=budget)
        n, texts = baselines.tune_head_tail(segs, budget, count)
        e["head+tail"] = score(texts, items, count, before, param=n, budget=budget)
        if name == "L1":
            e["compactor"] = {**l1, "budget": budget}
        else:
            e["compactor"] = compactor_score(runner, path, "auto", budget, items, count, before)
        for v in e.values():
            if isinstance(v, dict) and "tokens" in v:
                v["fits"] = v["tokens"] <= budget
        eq[name] = e
    rec["equal_budget"] = eq
    return rec


# --------------------------------------------------------------------------- summary


def _agg(rows: list[dict[str, Any]], before_key: str = "tokens_before") -> dict[str, Any]:
    """rows: [{'before', 'score'}]: token-weighted ratio, median per-file ratio, micro recall."""
    ok = [r for r in rows if "tokens" in r["score"]]
    out: dict[str, Any] = {"files": len(ok), "errors": len(rows) - len(ok)}
    if not ok:
        return out
    tb = sum(r["before"] for r in ok)
    ta = sum(r["score"]["tokens"] for r in ok)
    out["tokens_before"] = tb
    out["tokens_after"] = ta
    out["ratio"] = round(tb / ta, 3) if ta else None
    out["median_ratio"] = round(statistics.median(r["before"] / max(1, r["score"]["tokens"]) for r in ok), 3)
    rec = {}
    for cat in CATEGORIES:
        f = sum(r["score"]["recall"][cat][0] for r in ok)
        t = sum(r["score"]["recall"][cat][1] for r in ok)
        rec[cat] = {"found": f, "total": t, "pct": round(100.0 * f / t, 2) if t else None}
    out["recall"] = rec
    if any("budget" in r["score"] for r in ok):
        out["over_budget_files"] = sum(1 for r in ok if "budget" in r["score"] and r["score"]["tokens"] > r["score"]["budget"])
        out["budget_errors"] = sum(1 for r in ok if "budget_error" in r["score"])
    return out


def summarise(files: list[dict[str, Any]]) -> dict[str, Any]:
    good = [f for f in files if "methods" in f]
    groups = {"all": good, "trajectory": [f for f in good if f["group"] == "trajectory"], "log": [f for f in good if f["group"] == "log"]}
    summary: dict[str, Any] = {}
    for gname, fs in groups.items():
        if not fs:
            continue
        s: dict[str, Any] = {"files": len(fs), "default": {}, "equal_budget": {}}
        for meth in DEFAULT_METHODS:
            rows = [{"before": f["tokens_before"], "score": f["methods"][meth]} for f in fs]
            s["default"][meth] = _agg(rows)
            errs = sorted({f["methods"][meth]["error"] for f in fs if "error" in f["methods"][meth]})
            if errs:
                s["default"][meth]["error_messages"] = errs[:5]
        for bname in ("L1", "25%"):
            sub = [f for f in fs if bname in f.get("equal_budget", {})]
            s["equal_budget"][bname] = {}
            for meth in BUDGET_METHODS:
                rows = [{"before": f["tokens_before"], "score": f["equal_budget"][bname][meth]} for f in sub]
                s["equal_budget"][bname][meth] = _agg(rows)
                errs = sorted({f["equal_budget"][bname][meth]["error"] for f in sub if "error" in f["equal_budget"][bname][meth]})
                if errs:
                    s["equal_budget"][bname][meth]["error_messages"] = errs[:5]
        summary[gname] = s
    return summary


def misses(files: list[dict[str, Any]], method: str = "compactor L1") -> list[dict[str, str]]:
    """Every gold item a compactor method lost, per file and category (for the report)."""
    out: list[dict[str, str]] = []
    for f in files:
        m = f.get("methods", {}).get(method)
        if not m:
            continue
        for cat, its in m.get("missed", {}).items():
            for it in its:
                out.append({"file": f["file"], "category": cat, "item": it})
    return out


# --------------------------------------------------------------------------- tables


def _pct(x) -> str:
    if x is None:
        return "–"
    return f"{x:.1f}%" if x < 99.95 or x == 100 else "99.9%"


def _cell(agg: dict[str, Any], cat: str) -> str:
    r = agg.get("recall", {}).get(cat)
    if not r or r["total"] == 0:
        return "–"
    return f"{_pct(r['pct'])} ({r['found']}/{r['total']})"


def markdown_tables(result: dict[str, Any], groups=(("all", "all files"), ("trajectory", "agent trajectories"), ("log", "CI / test logs"))) -> str:
    lines: list[str] = []
    summ = result["summary"]
    cats = list(CATEGORIES)
    sep = "|---|---:|---:|---:|" + "---:|" * len(cats)
    for gname, title in groups:
        s = summ.get(gname)
        if not s:
            continue
        notes: list[str] = []
        lines.append(f"#### Default settings — {title} ({s['files']} files)\n")
        lines.append("| method | files | ratio (Σ) | median ratio | " + " | ".join(cats) + " |")
        lines.append(sep)
        for meth, agg in s["default"].items():
            if not agg.get("files"):
                why = (agg.get("error_messages") or ["n/a"])[0]
                lines.append(f"| {meth} | 0 | n/a | n/a | " + " | ".join("n/a" for _ in cats) + " |")
                notes.append(f"- {meth}: {why[:240]}")
                continue
            if agg.get("errors"):
                notes.append(f"- {meth}: {agg['errors']} file(s) failed: {(agg.get('error_messages') or [''])[0][:200]}")
            if agg.get("budget_errors"):
                notes.append(f"- {meth}: on {agg['budget_errors']} file(s) the budget could not be met (BudgetError: the protected evidence alone is larger); "
                             "those files are scored at the smallest budget compactor accepts, and counted over budget")
            lines.append(f"| {meth} | {agg['files']} | {agg['ratio']:.2f}× | {agg['median_ratio']:.2f}× | " + " | ".join(_cell(agg, c) for c in cats) + " |")
        lines.append("")
        lines.extend(notes)
        if notes:
            lines.append("")
        for bname, btitle in (("L1", "the size compactor Level 1 reaches"), ("25%", "25% of the original tokens")):
            eb = s["equal_budget"].get(bname)
            if not eb:
                continue
            notes = []
            lines.append(f"#### Equal budget = {btitle} — {title}\n")
            lines.append("| method | files | ratio (Σ) | files over budget | " + " | ".join(cats) + " |")
            lines.append(sep)
            for meth, agg in eb.items():
                if not agg.get("files"):
                    why = (agg.get("error_messages") or ["n/a"])[0]
                    lines.append(f"| {meth} | 0 | n/a | n/a | " + " | ".join("n/a" for _ in cats) + " |")
                    notes.append(f"- {meth}: {why[:240]}")
                    continue
                over = str(agg.get("over_budget_files", 0))
                if agg.get("budget_errors"):
                    over += f" ({agg['budget_errors']} BudgetError)"
                lines.append(f"| {meth} | {agg['files']} | {agg['ratio']:.2f}× | {over} | " + " | ".join(_cell(agg, c) for c in cats) + " |")
            lines.append("")
            lines.extend(notes)
            if notes:
                lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def run(corpus: Path | None, quick: bool = False, files: list[str] | None = None, verbose: bool = False) -> dict[str, Any]:
    count = compactor.get_counter().count
    runner = CompactorRunner()
    entries = [{"path": p, "source": "cli"} for p in files] if files else collect_files(corpus, quick)
    for e in entries:
        if e["path"].endswith("fail.log") and not e.get("labels"):
            lab = Path(e["path"]).parent / "labels.json"
            if lab.exists():
                e["labels"] = str(lab)
    t0 = time.perf_counter()
    out_files = []
    for e in entries:
        t = time.perf_counter()
        rec = evaluate_file(e, runner, count)
        rec["seconds"] = round(time.perf_counter() - t, 3)
        out_files.append(rec)
        if verbose:
            l1 = rec.get("methods", {}).get("compactor L1", {})
            print(f"  {rec['file']:70s} {rec.get('format', '?'):12s} {rec.get('tokens_before', 0):7d} tok  L1 {l1.get('ratio')}x  {rec['seconds']:.2f}s", file=sys.stderr)
    result = {
        "benchmark": "evaluate",
        "quick": quick,
        "token_counter": compactor.get_counter().name,
        "comparison": "verbatim substring after ANSI stripping and whitespace normalisation (every run of whitespace, newlines included, -> one space) on both sides, the item's JSON-escaped form also accepted; items de-duplicated per file; micro-averaged over files",
        "input_normalisation": "every method (and the token count of the original) sees the segment texts with ANSI escapes removed and CRLF -> LF",
        "methods": {
            "none": "no compaction",
            "truncate@50%": "newest messages that fit in 50% of the original tokens (plain logs: newest lines)",
            "mask(last 10)": f"every tool output but the last 10 replaced by {baselines.MASK!r} (OpenHands ObservationMaskingCondenser / JetBrains study)",
            "head+tail(20)": "each tool output keeps its first and last 20 lines",
            "compactor L1": "compactor.Compactor(level=1).compact(path), default options (keep_recent=3)",
            "compactor L2": "compactor.Compactor(level=2).compact(path)",
            "compactor L3@25%": "compactor.Compactor(level=3).compact(path, budget=25% of the original tokens)",
            "equal budget": "truncate: newest messages within budget; mask: largest number of unmasked recent outputs within budget; head+tail: largest N within budget; compactor: the L1 output itself (budget L1) or Compactor(level='auto').compact(path, budget=B) (budget 25%)",
        },
        "files": out_files,
        "seconds": round(time.perf_counter() - t0, 2),
    }
    result["summary"] = summarise(out_files)
    result["compactor_l1_misses"] = misses(out_files)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=default_corpus(), help="the shared corpus folder (default ../shared/corpus)")
    ap.add_argument("--quick", action="store_true", help="a handful of files only (CI smoke)")
    ap.add_argument("--files", nargs="*", help="evaluate these files instead")
    ap.add_argument("--out", type=Path, default=HERE / "out" / "evaluate.json")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    corpus = args.corpus if args.corpus and args.corpus.is_dir() else None
    if corpus is None and not args.files:
        print(f"evaluate: corpus {args.corpus} not found; using fixtures only", file=sys.stderr)
    result = run(corpus, quick=args.quick, files=args.files, verbose=args.verbose)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(markdown_tables(result))
    if result["compactor_l1_misses"]:
        print("\ncompactor L1 missed (error lines / frames / constraints):")
        for m in result["compactor_l1_misses"][:20]:
            print(f"  {m['file']} [{m['category']}] {m['item'][:160]}")
    print(f"\nwrote {args.out} ({len(result['files'])} files, {result['seconds']} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
