"""Score Level 1 against blind gold labels: tokens and recall of error lines, frames and constraints.

Each gold file is a JSON object::

    {"run": "trajectories-extra/pi-coding-agent/x.jsonl",   # relative to --root (../shared)
     "layout": "pi-coding-agent",
     "error_lines": ["verbatim line", ...], "frames": [...], "constraints": [...]}

For each run: the tokens of the run as read (``raw``), what observation masking keeps
(``baselines.mask``: every tool output but the last 10 replaced by a placeholder), what compactor
keeps at natural Level 1 (no budget, ``L1``) and with a budget of masking's tokens (``fit``). Both
compactor outputs are written in the run's own layout and read back by the same reader: the
tokens and the recall are of what a model would be sent. An item counts as kept when its
whitespace-normalised text is a substring of the normalised output, or its JSON-escaped form is
(as it reads inside tool-call arguments), the comparison ``benchmarks/gold.py`` uses; items are
de-duplicated per run.

    PYTHONPATH=. python benchmarks/l1_gold_score.py --gold benchmarks/l1_gold [--json out.json]

Prints one row a run and one a layout (Markdown), and the missed items on stderr. A gold file
that is not such an object, or names a run that does not exist, stops the scorer with one line
naming the file (exit code 2): a run left out would make the totals lie.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import baselines  # noqa: E402
import gold  # noqa: E402

__all__ = ["GoldError", "load_gold", "recall", "score_run", "summarise", "main"]

CATS = ("error_lines", "frames", "constraints")
DEFAULT_ROOT = HERE.parent.parent / "shared"


class GoldError(Exception):
    """A gold file that cannot be scored (its message names the file)."""


def load_gold(path: Path, root: Path) -> dict[str, Any]:
    """One gold file, validated: the run's path resolved under ``root``, items de-duplicated."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise GoldError(f"{path}: cannot read: {e}") from None
    except json.JSONDecodeError as e:
        raise GoldError(f"{path}:{e.lineno}:{e.colno}: not JSON: {e.msg}") from None
    if not isinstance(data, dict):
        raise GoldError(f"{path}: expected a JSON object, got {type(data).__name__}")
    run = data.get("run")
    if not isinstance(run, str) or not run:
        raise GoldError(f"{path}: field 'run' must be a path relative to {root}")
    layout = data.get("layout")
    if not isinstance(layout, str) or not layout:
        raise GoldError(f"{path}: field 'layout' must be a non-empty string")
    items: dict[str, list[str]] = {}
    for cat in CATS:
        val = data.get(cat, [])
        if not isinstance(val, list) or not all(isinstance(x, str) for x in val):
            raise GoldError(f"{path}: field '{cat}' must be a list of strings")
        seen: dict[str, None] = {}
        for x in val:
            n = gold.norm(x)
            if n:
                seen.setdefault(n, None)
        items[cat] = list(seen)
    file = (root / run).resolve()
    if not file.is_file():
        raise GoldError(f"{path}: run {run!r} not found under {root}")
    return {"gold": str(path), "run": run, "file": str(file), "layout": layout, "items": items}


def _escaped(item: str) -> str:
    return json.dumps(item, ensure_ascii=False)[1:-1]


def recall(items: dict[str, list[str]], texts: list[str]) -> tuple[dict[str, list[int]], dict[str, list[str]]]:
    """({category: [found, total]}, {category: missed items}) of normalised ``items`` in ``texts``."""
    hay = gold.norm("\n".join(texts))
    counts: dict[str, list[int]] = {}
    missed: dict[str, list[str]] = {}
    for cat, its in items.items():
        found = 0
        for it in its:
            it = gold.norm(it)
            if it in hay or _escaped(it) in hay:
                found += 1
            else:
                missed.setdefault(cat, []).append(it)
        counts[cat] = [found, len(its)]
    return counts, missed


def _read_back(result: Any) -> tuple[str, list[str]]:
    """(the layout it was read back as, the texts) of a compacted result written in its own layout."""
    from compactor import emit
    from compactor.formats import load_document

    back = load_document(emit.render(result, "messages").encode("utf-8"), source="<compacted>")
    return back.format, [s.text for s in back.segments]


def score_run(g: dict[str, Any], comp: Any, count) -> dict[str, Any]:
    """One run's row: tokens raw / masking / L1 / fit, and recall per category of L1 and fit."""
    from compactor.formats import load_document

    doc = load_document(g["file"])
    raw_texts = [s.text for s in doc.segments]
    masked = baselines.tokens_of(baselines.mask(doc.segments), count)
    row: dict[str, Any] = {"run": g["run"], "layout": g["layout"], "format": doc.format,
                           "raw": baselines.tokens_of(raw_texts, count), "mask": masked}
    row["raw_recall"], _ = recall(g["items"], raw_texts)  # what the labels find in the run itself
    for name, budget in (("L1", None), ("fit", masked)):
        res = comp.compact(g["file"]) if budget is None else comp.compact(g["file"], budget=budget)
        fmt, texts = _read_back(res)
        row[f"{name}_format"] = fmt
        row[name] = baselines.tokens_of(texts, count)
        row[f"{name}_level"] = res.report.level
        row[f"{name}_recall"], row[f"{name}_missed"] = recall(g["items"], texts)
    return row


def summarise(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per layout (and ``all``): runs, token sums and summed recall counts."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        for key in (r["layout"], "all"):
            t = out.setdefault(key, {"runs": 0, "raw": 0, "mask": 0, "L1": 0, "fit": 0,
                                     **{f"{m}_recall": {c: [0, 0] for c in CATS} for m in ("raw", "L1", "fit")}})
            t["runs"] += 1
            for k in ("raw", "mask", "L1", "fit"):
                t[k] += r[k]
            for m in ("raw", "L1", "fit"):
                for c in CATS:
                    f, n = r[f"{m}_recall"].get(c, [0, 0])
                    t[f"{m}_recall"][c][0] += f
                    t[f"{m}_recall"][c][1] += n
    return dict(sorted(out.items(), key=lambda kv: (kv[0] == "all", kv[0])))


def _pct(fn: list[int]) -> str:
    f, n = fn
    return "–" if not n else f"{100 * f / n:.1f}% ({f}/{n})"


def _table(rows: list[dict[str, Any]], summary: dict[str, dict[str, Any]]) -> str:
    out = ["| run | layout | raw | masking | L1 | fit (level) | " + " | ".join(f"L1 {c} | fit {c}" for c in CATS) + " |",
           "|---|---|---:|---:|---:|---:|" + "---:|" * (2 * len(CATS))]
    for r in rows:
        back = "" if r["L1_format"] == r["fit_format"] == r["format"] else " (read back as another layout!)"
        out.append(f"| {r['run']} | {r['layout']}{back} | {r['raw']} | {r['mask']} | {r['L1']} | {r['fit']} (L{r['fit_level']}) | "
                   + " | ".join(f"{_pct(r['L1_recall'][c])} | {_pct(r['fit_recall'][c])}" for c in CATS) + " |")
    out += ["", "| layout | runs | raw | masking | L1 | fit | " + " | ".join(f"L1 {c} | fit {c}" for c in CATS) + " |",
            "|---|---:|---:|---:|---:|---:|" + "---:|" * (2 * len(CATS))]
    for k, t in summary.items():
        out.append(f"| {k} | {t['runs']} | {t['raw']} | {t['mask']} | {t['L1']} | {t['fit']} | "
                   + " | ".join(f"{_pct(t['L1_recall'][c])} | {_pct(t['fit_recall'][c])}" for c in CATS) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gold", required=True, type=Path, help="folder of gold JSON files (one a run)")
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="folder the runs' paths are relative to")
    ap.add_argument("--json", type=Path, default=None, help="also write rows and totals here")
    args = ap.parse_args(argv)
    try:
        if not args.gold.is_dir():
            raise GoldError(f"{args.gold}: not a folder")
        files = sorted(args.gold.glob("*.json"))
        if not files:
            raise GoldError(f"{args.gold}: no *.json gold file")
        golds = [load_gold(p, args.root) for p in files]
    except GoldError as e:
        print(f"l1_gold_score: {e}", file=sys.stderr)
        return 2

    from compactor import Compactor, get_counter

    count = get_counter().count
    with tempfile.TemporaryDirectory() as tmp:
        comp = Compactor(store=str(Path(tmp) / "store.sqlite"))
        rows = [score_run(g, comp, count) for g in golds]
    summary = summarise(rows)
    print(_table(rows, summary))
    for r in rows:
        for m in ("L1", "fit"):
            for cat, its in sorted(r[f"{m}_missed"].items()):
                for it in its:
                    print(f"missed by {m} in {r['run']} [{cat}]: {it[:200]}", file=sys.stderr)
    if args.json is not None:
        args.json.write_text(json.dumps({"runs": rows, "summary": summary}, indent=1, ensure_ascii=False) + "\n",
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
