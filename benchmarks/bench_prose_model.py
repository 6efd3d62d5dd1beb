"""Speed of the prose classifier, per sentence, on every labelled sentence.

The sentences are those of ``benchmarks/anchor_eval/sentences`` (both halves; the run sentences
rebuilt from ``../shared`` with ``extract.sentences``). For each sentence the best of three
rounds of five calls is taken (a busy shared machine inflates single timings), and the median
over sentences is reported, in microseconds, for:

- ``model``: ``prose_model.model().predict`` (features, lookups, sums, argmax), given the cue label;
- ``cues``: ``cues.cue_label`` alone, the baseline measured in the same run;
- ``label_sentence``: the combined labeller the anchor calls (cues, then the model).

Also the weights file's size and the time to load it once. Budget: 50 us a sentence for the model.

    PYTHONPATH=. python benchmarks/bench_prose_model.py         # -> benchmarks/out/prose_model.json
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "anchor_eval", "sentences"))
sys.path.insert(0, os.path.join(HERE, "anchor_eval"))
import extract  # noqa: E402
from train_classifier import load_items  # noqa: E402

from compactor.anchor import prose_model  # noqa: E402
from compactor.anchor.cues import cue_label, label_sentence  # noqa: E402


def labelled(root: str) -> list[tuple[str, dict]]:
    """Every labelled sentence (both halves) with its context, rebuilt as the trainer does."""
    items, problems = load_items(root)
    if problems:
        raise SystemExit("\n".join(problems))
    out = []
    for it in items:
        ctx = {"role": it["role"]}
        if it["last"] is not None:
            ctx["last"] = it["last"]
        out.append((it["text"], ctx))
    return out


def per_call_us(fn, args_list, reps: int = 5, rounds: int = 3) -> list[float]:
    out = []
    clock = time.perf_counter_ns
    for args in args_list:
        best = None
        for _ in range(rounds):
            t0 = clock()
            for _ in range(reps):
                fn(*args)
            dt = (clock() - t0) / reps / 1000.0
            best = dt if best is None or dt < best else best
        out.append(best)
    return out


def main() -> int:
    root = extract.default_root()
    items = labelled(root)
    t0 = time.perf_counter()
    m = prose_model.load()
    load_ms = (time.perf_counter() - t0) * 1000
    cues = [cue_label(t, c) for t, c in items]
    model_args = [(t, c["role"], c.get("last"), cue) for (t, c), cue in zip(items, cues)]
    res = {
        "sentences": len(items),
        "weights_bytes": os.path.getsize(prose_model.WEIGHTS_PATH),
        "features": len(m.packed),
        "load_ms": round(load_ms, 1),
    }
    prose_model.model()  # the shared instance, loaded outside the timings
    for name, fn, args in (("model", m.predict, model_args),
                           ("cues", cue_label, items),
                           ("label_sentence", label_sentence, items)):
        us = per_call_us(fn, args)
        res[name] = {"median_us": round(statistics.median(us), 2),
                     "p90_us": round(sorted(us)[int(0.9 * len(us))], 2), "max_us": round(max(us), 1)}
    res["model_over_cues"] = round(res["model"]["median_us"] / res["cues"]["median_us"], 2)
    os.makedirs(os.path.join(HERE, "out"), exist_ok=True)
    with open(os.path.join(HERE, "out", "prose_model.json"), "w", encoding="utf-8") as fh:
        json.dump(res, fh, indent=2)
    print(json.dumps(res, indent=2))
    return 0 if res["model"]["median_us"] <= 50 else 1


if __name__ == "__main__":
    sys.exit(main())
