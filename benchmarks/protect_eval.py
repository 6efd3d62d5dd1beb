"""Line-level precision and recall of the protect rules, per family, over ``fixtures/protect``.

Each fixture is ``<name>.txt`` (the text one segment holds) plus ``<name>.labels.json``::

    {"role": "tool", "about": "...",
     "protect": {"trace": ["3-20", "25"], "error": ["7"]},   # lines that must be protected
     "allow":   {"fileref": ["9"]}}                          # either way is fine

Line numbers are 1-based. For a family, every non-blank line that is neither in ``protect`` nor
in ``allow`` must NOT be covered by a span of that family. The detector runs once per fixture on
the whole text with the fixture's role (so role-restricted rules such as user constraints are
tested where they apply and where they must stay silent). Blank lines are not counted.

    python benchmarks/protect_eval.py [--fixtures DIR] [--details]

Prints a table (precision, recall, TP/FP/FN per family) and writes
``benchmarks/out/protect_eval.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compactor.detect import Detector  # noqa: E402
from compactor.engine import FAMILIES, load_rules  # noqa: E402

DEFAULT_FIXTURES = ROOT / "fixtures" / "protect"


def parse_ranges(items: list[str]) -> set[int]:
    out: set[int] = set()
    for item in items:
        a, _, b = str(item).partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def load_fixture(path: Path) -> tuple[str, dict]:
    labels = json.loads(path.with_suffix("").with_suffix(".labels.json").read_text(encoding="utf-8"))
    text = path.read_text(encoding="utf-8")
    if text.endswith("\n"):
        text = text[:-1]
    return text, labels


def fixture_paths(fixtures: Path) -> list[Path]:
    return sorted(p for p in fixtures.glob("*.txt") if (fixtures / (p.stem + ".labels.json")).is_file())


def evaluate(fixtures: Path = DEFAULT_FIXTURES, detector: Detector | None = None) -> dict:
    detector = detector or Detector(load_rules())
    fams = [f for f in FAMILIES if f != "secret"]
    totals = {f: {"tp": 0, "fp": 0, "fn": 0} for f in fams}
    per_fixture = []
    for path in fixture_paths(fixtures):
        text, labels = load_fixture(path)
        lines = text.split("\n")
        nonblank = {i + 1 for i, line in enumerate(lines) if line.strip()}
        res = detector.detect(text, role=labels.get("role", "tool"))
        flagged: dict[str, set[int]] = {}
        for s in res.raw_spans:
            flagged.setdefault(s.family, set()).update(range(s.line_start, s.line_end + 1))
        entry = {"fixture": path.stem, "role": labels.get("role", "tool"), "families": {}}
        for f in fams:
            want = parse_ranges(labels.get("protect", {}).get(f, [])) & nonblank
            allow = parse_ranges(labels.get("allow", {}).get(f, []))
            got = flagged.get(f, set()) & nonblank
            tp = want & got
            fn = want - got
            fp = got - want - allow
            totals[f]["tp"] += len(tp)
            totals[f]["fn"] += len(fn)
            totals[f]["fp"] += len(fp)
            if want or fp:
                entry["families"][f] = {
                    "tp": len(tp), "fn": sorted(fn), "fp": sorted(fp),
                }
        per_fixture.append(entry)
    summary = {}
    for f, t in totals.items():
        tp, fp, fn = t["tp"], t["fp"], t["fn"]
        summary[f] = {
            **t,
            "precision": tp / (tp + fp) if tp + fp else 1.0,
            "recall": tp / (tp + fn) if tp + fn else 1.0,
            "labelled": tp + fn,
        }
    return {"families": summary, "fixtures": per_fixture, "count": len(per_fixture)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixtures", type=Path, default=DEFAULT_FIXTURES)
    ap.add_argument("--details", action="store_true", help="list every missed / extra line")
    args = ap.parse_args(argv)
    r = evaluate(args.fixtures)
    print(f"{r['count']} fixtures in {args.fixtures}")
    print(f"{'family':16} {'labelled':>8} {'TP':>6} {'FP':>5} {'FN':>5} {'precision':>10} {'recall':>8}")
    for f, s in r["families"].items():
        if not s["labelled"] and not s["fp"]:
            continue
        print(f"{f:16} {s['labelled']:8} {s['tp']:6} {s['fp']:5} {s['fn']:5} {s['precision']:10.1%} {s['recall']:8.1%}")
    if args.details:
        for fx in r["fixtures"]:
            lines = (args.fixtures / f"{fx['fixture']}.txt").read_text(encoding="utf-8").split("\n")
            for f, d in fx["families"].items():
                for kind in ("fn", "fp"):
                    for n in d[kind]:
                        print(f"  {fx['fixture']}:{n} {f} {kind.upper()}: {lines[n - 1][:110]}")
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "protect_eval.json").write_text(json.dumps(r, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
