"""How much of the labelled error text of real CI breakages the protect rules keep.

Corpus: ``../shared/corpus/ci-breakages/*/`` (CiDiff breakages: ``fail.log`` + ``labels.json``
whose ``error_lines`` are 1-based line numbers under ``open(path, encoding="utf-8").read()
.splitlines()`` numbering). Each log is split exactly that way, every line is normalised on its own
(ANSI escapes removed) and the lines are joined with ``\\n``, so line N of the detector's view is
line N of the labelling. The whole log is one tool output (role ``tool``).

Prints, per breakage and overall: labelled error lines covered by protected spans, and the
fraction of all lines protected (the cost). ``pass.log`` of the same job is scanned too, as a
rough over-protection reference. Writes ``benchmarks/out/ci_breakages.json``.

    python benchmarks/ci_breakages.py [--corpus DIR] [--show-missed]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compactor.detect import Detector  # noqa: E402
from compactor.engine import load_rules  # noqa: E402
from compactor.normalize import normalize_line  # noqa: E402

DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus" / "ci-breakages"


def read_lines(path: Path) -> list[str]:
    """The labelling's numbering: text mode (\\r and \\r\\n become \\n), then splitlines()."""
    with open(path, encoding="utf-8") as fh:
        return [normalize_line(line) for line in fh.read().splitlines()]


def protected(detector: Detector, lines: list[str]) -> set[int]:
    """1-based numbers of the lines covered by any protected span."""
    res = detector.detect("\n".join(lines), role="tool")
    if res.protect_all:  # a rule ran out of time: the text is kept whole
        return set(range(1, len(lines) + 1))
    return {i + 1 for i in res.protected_lines(nlines=len(lines))}


def evaluate(corpus: Path = DEFAULT_CORPUS, detector: Detector | None = None) -> dict:
    detector = detector or Detector(load_rules())
    cases = []
    for case in sorted(p for p in corpus.iterdir() if (p / "labels.json").is_file()):
        labels = json.loads((case / "labels.json").read_text(encoding="utf-8"))
        lines = read_lines(case / labels.get("log", "fail.log"))
        if len(lines) != labels.get("line_count", len(lines)):
            raise AssertionError(f"{case.name}: {len(lines)} lines, labels say {labels['line_count']}")
        errors = set(labels["error_lines"])
        prot = protected(detector, lines)
        missed = sorted(errors - prot)
        entry = {
            "case": case.name,
            "lines": len(lines),
            "error_lines": len(errors),
            "covered": len(errors) - len(missed),
            "protected_lines": len(prot),
            "missed": [[n, lines[n - 1][:160]] for n in missed],
        }
        pass_log = case / "pass.log"
        if pass_log.is_file():
            plines = read_lines(pass_log)
            entry["pass_lines"] = len(plines)
            entry["pass_protected_lines"] = len(protected(detector, plines))
        cases.append(entry)
    tot_e = sum(c["error_lines"] for c in cases)
    tot_c = sum(c["covered"] for c in cases)
    tot_l = sum(c["lines"] for c in cases)
    tot_p = sum(c["protected_lines"] for c in cases)
    tot_pl = sum(c.get("pass_lines", 0) for c in cases)
    tot_pp = sum(c.get("pass_protected_lines", 0) for c in cases)
    return {
        "cases": cases,
        "error_lines": tot_e,
        "covered": tot_c,
        "coverage": tot_c / tot_e if tot_e else 1.0,
        "macro_coverage": sum(c["covered"] / c["error_lines"] for c in cases if c["error_lines"]) / max(1, len(cases)),
        "lines": tot_l,
        "protected_lines": tot_p,
        "protected_fraction": tot_p / tot_l if tot_l else 0.0,
        "pass_protected_fraction": tot_pp / tot_pl if tot_pl else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--show-missed", action="store_true")
    args = ap.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"corpus not found: {args.corpus}", file=sys.stderr)
        return 2
    r = evaluate(args.corpus)
    print(f"{'case':34} {'lines':>6} {'E':>5} {'covered':>8} {'prot%':>6} {'pass prot%':>10}")
    for c in r["cases"]:
        pp = c.get("pass_protected_lines", 0) / c["pass_lines"] if c.get("pass_lines") else 0
        print(f"{c['case']:34} {c['lines']:6} {c['error_lines']:5} {c['covered']:5}/{c['error_lines']:<4}"
              f" {c['protected_lines'] / c['lines']:6.1%} {pp:10.1%}")
        if args.show_missed:
            for n, text in c["missed"]:
                print(f"    missed {n}: {text}")
    print(f"{'TOTAL':34} {r['lines']:6} {r['error_lines']:5} {r['covered']:5}/{r['error_lines']:<4}"
          f" {r['protected_fraction']:6.1%} {r['pass_protected_fraction']:10.1%}")
    print(f"error-line coverage: {r['coverage']:.2%} (macro {r['macro_coverage']:.2%}); "
          f"lines protected: {r['protected_fraction']:.1%} of fail logs, {r['pass_protected_fraction']:.1%} of pass logs")
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "ci_breakages.json").write_text(json.dumps(r, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
