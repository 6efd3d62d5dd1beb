"""Each run compacted at the tokens observation masking keeps: does it still hold its evidence?

For every file given: the tokens of the run as read (``raw``), what observation masking keeps
(every tool output but the last 10 replaced by a placeholder, ``baselines.mask``), what compactor
keeps with its defaults (``L1``) and with a budget of masking's tokens (``fit``), each written
in the run's own layout and read back by the same reader. ``lost`` counts the spans compactor
protects in the raw run that are missing from the output read back: error spans in tool outputs
and constraint spans in the user's own (not harness) messages, whitespace-normalised.

    PYTHONPATH=. python benchmarks/fit_at_masking.py ../shared/trajectories-extra/pi-coding-agent/*

Prints one row a file and a total per layout (Markdown).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import baselines  # noqa: E402
import gold  # noqa: E402

__all__ = ["fit_at_masking", "lost_evidence"]


def lost_evidence(result: Any, raw_segments: dict[str, Any]) -> tuple[list[str], int]:
    """(the protected error / constraint spans of ``result`` missing from its output read back,
    how many were checked)."""
    from compactor import emit
    from compactor.formats import load_document
    from compactor.models import SegmentKind

    back = load_document(emit.render(result, "messages").encode("utf-8"), source="<compacted>")
    hay = gold.norm("\n".join(s.text for s in back.segments))
    lost: list[str] = []
    checked = 0
    for sp in result.report.protected:
        seg = raw_segments.get(sp.segment_id or "")
        if seg is None or sp.elided or seg.meta:
            continue
        if (sp.family == "error" and seg.kind == SegmentKind.tool_result) or \
                (sp.family == "constraint" and seg.kind == SegmentKind.message and seg.role.value == "user"):
            checked += 1
            if gold.norm(sp.text) not in hay:
                lost.append(f"{sp.rule_id}: {sp.text[:160]}")
    return lost, checked


def fit_at_masking(path: str, comp: Any) -> dict[str, Any]:
    """One file's row: tokens raw / masking / L1 / fitted, lost evidence, seconds, layouts."""
    from compactor import emit, get_counter
    from compactor.formats import load_document

    count = get_counter().count
    doc = load_document(path)
    raw = {s.id: s for s in doc.segments}
    masked = baselines.tokens_of(baselines.mask(doc.segments), count)
    row: dict[str, Any] = {"file": path, "format": doc.format,
                           "raw": baselines.tokens_of([s.text for s in doc.segments], count), "mask": masked}
    for name, budget in (("L1", None), ("fit", masked)):
        t = time.perf_counter()
        res = comp.compact(path) if budget is None else comp.compact(path, budget=budget)
        row[f"{name}_seconds"] = round(time.perf_counter() - t, 2)
        back = load_document(emit.render(res, "messages").encode("utf-8"), source="<compacted>")
        row[f"{name}_format"] = back.format
        row[name] = baselines.tokens_of([s.text for s in back.segments], count)
        row[f"{name}_level"] = res.report.level
        lost, checked = lost_evidence(res, raw)
        row[f"{name}_lost"] = lost
        row["checked"] = checked
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    import tempfile

    from compactor import Compactor

    with tempfile.TemporaryDirectory() as tmp:
        comp = Compactor(store=str(Path(tmp) / "store.sqlite"))
        rows = [fit_at_masking(f, comp) for f in args.files]
    print("| file | layout | raw | masking | L1 | fit at masking (level) | evidence lost L1 / fit (checked) | s (L1) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    totals: dict[str, dict[str, int]] = {}
    for r in rows:
        same = r["L1_format"] == r["fit_format"] == r["format"]
        print(f"| {Path(r['file']).name} | {r['format']}{'' if same else ' (read back as another layout!)'} "
              f"| {r['raw']} | {r['mask']} | {r['L1']} | {r['fit']} (L{r['fit_level']}) "
              f"| {len(r['L1_lost'])} / {len(r['fit_lost'])} ({r['checked']}) | {r['L1_seconds']} |")
        t = totals.setdefault(r["format"], {"files": 0, "raw": 0, "mask": 0, "L1": 0, "fit": 0, "lost": 0, "checked": 0})
        for k in ("raw", "mask", "L1", "fit", "checked"):
            t[k] += r[k]
        t["files"] += 1
        t["lost"] += len(r["L1_lost"]) + len(r["fit_lost"])
    print()
    print("| layout | files | raw | masking | L1 | fit at masking | evidence lost (checked) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for fmt, t in sorted(totals.items()):
        print(f"| {fmt} | {t['files']} | {t['raw']} | {t['mask']} | {t['L1']} | {t['fit']} | {t['lost']} ({t['checked']}) |")
    for r in rows:
        for lost in r["L1_lost"] + r["fit_lost"]:
            print(f"lost in {Path(r['file']).name}: {lost}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
