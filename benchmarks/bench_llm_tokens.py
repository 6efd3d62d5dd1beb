"""Tokens the LLM would be sent, versus sending the raw trajectory.

For each trajectory (and CI log) in ../shared/corpus (or $COMPACTOR_CORPUS):

- **raw**: the seed-000 prompt with the raw trajectory (every segment's text) as the trajectory;
- **llm**: the prompt refine actually sends: built from the deterministic result
  (``Compactor().compact(path)``) by :func:`compactor.llm.prepare_refine` — every step's Level 1
  text (bounded, each step still visible) plus the deterministic anchor's view — redacted;
- **full**: for reference, the unbounded variant: ``result.messages`` rendered as text plus the
  whole anchor via ``to_seed_json``.

Prints the ratio raw / llm per file and overall (goal: >= 5x fewer on trajectories large
enough to need an LLM pass), and writes JSON to benchmarks/out/bench_llm_tokens.json.

    python benchmarks/bench_llm_tokens.py [--budget 500] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compactor.llm import build_prompt, prepare_refine  # noqa: E402
from compactor.pipeline import Compactor, load_document  # noqa: E402
from compactor.secrets import redact  # noqa: E402
from compactor.tokens import get_counter  # noqa: E402

CORPUS = Path(os.environ.get("COMPACTOR_CORPUS", ROOT.parent / "shared" / "corpus"))
TRAJECTORY_DIRS = ("aider", "claude-code", "codex-rollout", "gemini", "mini-swe-agent", "openhands-v0",
                   "openhands-v1", "swe-agent")
LARGE = 8000  # raw prompt tokens from which an LLM pass is worth its cost


def corpus_files(corpus: Path) -> list[tuple[str, Path]]:
    out = []
    for d in TRAJECTORY_DIRS:
        if (corpus / d).is_dir():
            out += [("trajectory", p) for p in sorted((corpus / d).iterdir()) if p.is_file()]
    if (corpus / "ci-logs").is_dir():
        out += [("log", p) for p in sorted((corpus / "ci-logs").iterdir()) if p.is_file()]
    if (corpus / "ci-breakages").is_dir():
        out += [("log", p / "fail.log") for p in sorted((corpus / "ci-breakages").iterdir()) if (p / "fail.log").is_file()]
    return out


def _full_text(result) -> str:
    msgs = result.messages
    text = msgs if isinstance(msgs, str) else json.dumps(msgs, ensure_ascii=False)
    if result.anchor is not None:
        try:
            from compactor.anchor import to_seed_json

            text += "\n\n" + json.dumps(to_seed_json(result.anchor), ensure_ascii=False)
        except ImportError:
            pass
    return text


def _ratio(a: int, b: int) -> float:
    return round(a / b, 2) if b else 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(CORPUS))
    ap.add_argument("--budget", type=int, default=500, help="answer budget in tokens (seed-000's example scale)")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "out" / "bench_llm_tokens.json"))
    args = ap.parse_args(argv)
    corpus = Path(args.corpus)
    if not corpus.is_dir():
        print(f"corpus not found: {corpus}")
        return 0
    counter = get_counter()
    comp = Compactor()
    rows = []
    for group, path in corpus_files(corpus):
        t0 = time.perf_counter()
        try:
            result = comp.compact(str(path))
            raw_doc = load_document(str(path), format=result.format)
            inputs = prepare_refine(str(path), result, compactor=comp, budget=args.budget, counter=counter)
        except Exception as exc:  # a reader still being written: report and go on
            rows.append({"file": str(path.relative_to(corpus)), "group": group, "error": f"{type(exc).__name__}: {exc}"[:200]})
            continue
        objective = inputs.objective
        raw_text = "\n\n".join(s.text for s in raw_doc.segments)
        raw = counter.count(build_prompt(objective, raw_text, args.budget))
        sent_prompt, _ = redact(build_prompt(objective, inputs.context, args.budget))
        llm = counter.count(sent_prompt)
        full = counter.count(build_prompt(objective, _full_text(result), args.budget))
        rows.append({
            "file": str(path.relative_to(corpus)), "group": group, "format": result.format,
            "segments": len(raw_doc.segments), "steps": len(inputs.steps),
            "raw_tokens": raw, "llm_tokens": llm, "full_level1_tokens": full,
            "ratio": _ratio(raw, llm), "ratio_full_level1": _ratio(raw, full),
            "seconds": round(time.perf_counter() - t0, 3),
        })
    ok = [r for r in rows if "error" not in r]

    def total(sel):
        a = sum(r["raw_tokens"] for r in sel)
        b = sum(r["llm_tokens"] for r in sel)
        c = sum(r["full_level1_tokens"] for r in sel)
        return {"files": len(sel), "raw_tokens": a, "llm_tokens": b, "full_level1_tokens": c,
                "ratio": _ratio(a, b), "ratio_full_level1": _ratio(a, c)}

    summary = {
        "budget": args.budget,
        "token_counter": counter.name,
        "overall": total(ok),
        "trajectories": total([r for r in ok if r["group"] == "trajectory"]),
        "logs": total([r for r in ok if r["group"] == "log"]),
        f"raw_over_{LARGE}": total([r for r in ok if r["raw_tokens"] >= LARGE]),
        "errors": len(rows) - len(ok),
    }
    w = max((len(r["file"]) for r in rows), default=10)
    print(f"{'file':<{w}}  {'raw':>8} {'llm':>7} {'ratio':>6}   {'full L1':>8} {'ratio':>6}")
    for r in rows:
        if "error" in r:
            print(f"{r['file']:<{w}}  error: {r['error']}")
            continue
        print(f"{r['file']:<{w}}  {r['raw_tokens']:>8} {r['llm_tokens']:>7} {r['ratio']:>5}x   "
              f"{r['full_level1_tokens']:>8} {r['ratio_full_level1']:>5}x")
    for key in ("trajectories", "logs", f"raw_over_{LARGE}", "overall"):
        t = summary[key]
        print(f"{key:<{w}}  {t['raw_tokens']:>8} {t['llm_tokens']:>7} {t['ratio']:>5}x   "
              f"{t['full_level1_tokens']:>8} {t['ratio_full_level1']:>5}x   ({t['files']} files)")
    print(f"budget {args.budget} tokens, counter {counter.name}; goal >= 5x fewer tokens sent")
    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"summary": summary, "files": rows}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
