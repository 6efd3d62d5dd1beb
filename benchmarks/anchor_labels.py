"""Anchor quality on the labelled set of ``fixtures/anchor-labels/``: precision and recall per
section, and a continuation-question score.

Each label file names one trajectory of ``../shared/corpus`` and, per anchor section, verbatim
substrings that an item of that section must carry (``must``) and must not carry (``must_not``),
plus ``resolved`` error lines (fixed later: they may appear only marked resolved) and the answers
to the six continuation questions (``null``: the anchor must have nothing there; absent: not
judged). ``split`` is ``dev`` or ``heldout`` (held out: not looked at while tuning).

Scoring, per section:

- an item *matches* a label when the label (whitespace collapsed) is a substring of the item's
  text (all its text fields; whitespace collapsed);
- recall = must labels matched by some item of the section / must labels;
- precision = good / (good + bad) where good = items matching a must label and bad = active items
  matching a must_not label (or, in key evidence and next steps, a resolved error line without a
  resolved mark); unjudged items (matching neither) are counted and printed beside it, and
  ``strict`` = good / all items shows how many items carry no must-have at all.

Continuation questions (task? files changed? what failed? live error? constraints? next step?):
a question with answers is answered when every answer is found in its pools; a ``null`` question
is answered when its pools are empty.

    python benchmarks/anchor_labels.py                 # all label files, table per section
    python benchmarks/anchor_labels.py --split dev     # only the development part
    python benchmarks/anchor_labels.py --json out.json # machine-readable
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

LABELS = ROOT / "fixtures" / "anchor-labels"
CORPUS = Path(os.environ.get("COMPACTOR_CORPUS", ROOT.parent / "shared" / "corpus"))
SECTIONS = ("intent", "changes", "decisions", "failed_attempts", "excluded_approaches", "key_evidence",
            "open_questions", "next_steps", "facts", "user_constraints")
QUESTIONS = {
    "task": ("intent",),
    "files": ("changes",),
    "failed": ("failed_attempts", "excluded_approaches"),
    "live_error": ("live_errors",),
    "constraints": ("user_constraints",),
    "next": ("next_steps", "open_questions"),
}
# where a must label may be found besides its own section (concluded failures are filed under either)
RECALL_POOLS = {"failed_attempts": ("failed_attempts", "excluded_approaches"),
                "excluded_approaches": ("excluded_approaches", "failed_attempts"),
                "next_steps": ("next_steps", "open_questions"),
                "open_questions": ("open_questions", "next_steps")}
_META = {"id", "source_step", "status", "rule_id", "family", "last_step", "count", "exit_code", "kind", "resolved_at",
         "via", "tool"}
_RESOLVED_WORDS = ("resolved", "fixed", "superseded", "no longer")


def squash(t: str) -> str:
    return " ".join(t.split())


def _item_text(obj: Any) -> str:
    if isinstance(obj, str):
        return obj
    d = obj.model_dump(mode="json") if hasattr(obj, "model_dump") else obj
    parts: list[str] = []

    def walk(v: Any, key: str = "") -> None:
        if key in _META:
            return
        if isinstance(v, str):
            if v:
                parts.append(v)
        elif isinstance(v, dict):
            for k in v:
                walk(v[k], k)
        elif isinstance(v, list):
            for x in v:
                walk(x, key)

    walk(d)
    return " ".join(parts)


def anchor_pools(a) -> dict[str, list[tuple[str, bool]]]:
    """Per section: (item text, active) for every item the anchor presents."""
    pools: dict[str, list[tuple[str, bool]]] = {s: [] for s in SECTIONS + ("live_errors",)}
    it = a.intent
    seen: set[str] = set()
    for t in (it.initial, it.current):
        if t and t not in seen:
            seen.add(t)
            pools["intent"].append((t, True))
    for h in it.history:
        if h.kind in ("initial", "request", "clarification") and h.status == "active" and h.text not in seen:
            seen.add(h.text)
            pools["intent"].append((h.text, True))
    for c in a.changes_made:
        if c.status != "failed":
            pools["changes"].append((_item_text(c), True))
        else:
            pools["failed_attempts"].append((_item_text(c), True))
    for f in a.files_touched:
        if any(x != "read" for x in f.actions):
            pools["changes"].append((f"{f.path} {' '.join(f.actions)}", True))
    for d in a.decisions_made:
        pools["decisions"].append((_item_text(d), d.status == "active"))
    for x in a.failed_attempts:
        pools["failed_attempts"].append((_item_text(x), getattr(x, "status", "failed") != "resolved"))
    for x in a.dead_ends:
        pools["excluded_approaches"].append((_item_text(x), x.status == "excluded"))
    for e in a.key_evidence:
        pools["key_evidence"].append((_item_text(e), getattr(e, "status", "live") == "live"))
        if e.family not in ("verification", "location", "reproduction"):  # a passing check, where the bug is, a script's output: not an error
            pools["live_errors"].append((_item_text(e), getattr(e, "status", "live") == "live"))
    for q in a.open_questions:
        if q.status == "open":
            pools["open_questions"].append((_item_text(q), True))
    for n in a.next_steps:
        if n.status == "pending":
            pools["next_steps"].append((_item_text(n), True))
    if a.next_action_hint:
        pools["next_steps"].append((a.next_action_hint, True))
    for f in a.facts_learned:
        pools["facts"].append((_item_text(f), True))
    for c in a.user_constraints:
        if c.status == "active":
            pools["user_constraints"].append((_item_text(c), True))
    return {k: [(squash(t), act) for t, act in v] for k, v in pools.items()}


def _resolved_mark(text: str) -> bool:
    low = text.lower()
    return any(w in low for w in _RESOLVED_WORDS)


def score_one(label: dict, pools: dict[str, list[tuple[str, bool]]]) -> dict[str, Any]:
    out: dict[str, Any] = {"sections": {}, "questions": {}}
    resolved = [squash(r) for r in label.get("resolved", [])]
    for sec in SECTIONS:
        lab = label["sections"].get(sec, {"must": [], "must_not": []})
        must = [squash(m) for m in lab.get("must", [])]
        must_not = [squash(m) for m in lab.get("must_not", [])]
        items = pools[sec]
        recall_items = [t for s in RECALL_POOLS.get(sec, (sec,)) for t, _ in pools[s]]
        found = [m for m in must if any(m in t for t in recall_items)]
        good = bad = unjudged = 0
        bad_items: list[str] = []
        for text, active in items:
            is_good = any(m in text for m in must)
            is_bad = active and (any(m in text for m in must_not) or (
                sec in ("key_evidence", "next_steps") and not _resolved_mark(text) and any(r in text for r in resolved)))
            if is_bad:
                bad += 1
                bad_items.append(text[:160])
            elif is_good:
                good += 1
            else:
                unjudged += 1
        out["sections"][sec] = {"must": len(must), "found": len(found), "missed": [m for m in must if m not in found],
                                "good": good, "bad": bad, "unjudged": unjudged, "items": len(items),
                                "bad_items": bad_items}
    for q, secs in QUESTIONS.items():
        if q not in label.get("continuation", {}):
            continue
        ans = label["continuation"][q]
        texts = [t for s in secs for t, act in pools[s] if act or q == "failed"]
        if ans is None:
            ok = not texts
        else:
            ok = all(any(squash(a) in t for t in texts) for a in ans)
        out["questions"][q] = ok
    return out


def load_labels(split: str = "all") -> list[tuple[str, dict]]:
    out = []
    for p in sorted(LABELS.glob("*.json")):
        d = json.loads(p.read_text(encoding="utf-8"))
        if split in ("all", d["split"]):
            out.append((p.stem, d))
    return out


def build(path: Path, **options):
    from compactor import compact

    return compact(str(path), **options).anchor


def run(split: str = "all", **options) -> dict[str, Any]:
    rows = {}
    for name, lab in load_labels(split):
        a = build(CORPUS / lab["path"], **options)
        rows[name] = score_one(lab, anchor_pools(a))
    return summarise(rows)


def summarise(rows: dict[str, Any]) -> dict[str, Any]:
    per: dict[str, dict[str, float]] = {}
    for sec in SECTIONS:
        must = sum(r["sections"][sec]["must"] for r in rows.values())
        found = sum(r["sections"][sec]["found"] for r in rows.values())
        good = sum(r["sections"][sec]["good"] for r in rows.values())
        bad = sum(r["sections"][sec]["bad"] for r in rows.values())
        items = sum(r["sections"][sec]["items"] for r in rows.values())
        unj = sum(r["sections"][sec]["unjudged"] for r in rows.values())
        per[sec] = {"must": must, "found": found, "recall": found / must if must else 1.0,
                    "good": good, "bad": bad, "unjudged": unj, "items": items,
                    "precision": good / (good + bad) if good + bad else 1.0,
                    "strict": good / items if items else 1.0}
    must = sum(v["must"] for v in per.values())
    found = sum(v["found"] for v in per.values())
    qs = [ok for r in rows.values() for ok in r["questions"].values()]
    return {"rows": rows, "sections": per, "recall": found / must if must else 1.0, "must": must, "found": found,
            "questions": sum(qs) / len(qs) if qs else 1.0, "questions_answered": sum(qs), "questions_total": len(qs)}


def render(res: dict[str, Any], verbose: bool = False) -> str:
    lines = ["| section | recall | precision | good | bad | unjudged | items |", "|---|---|---|---|---|---|---|"]
    for sec, v in res["sections"].items():
        lines.append(f"| {sec} | {v['found']}/{v['must']} = {v['recall']:.2f} | {v['precision']:.2f} | {v['good']} | "
                     f"{v['bad']} | {v['unjudged']} | {v['items']} |")
    lines.append(f"\nmust-have recall: {res['found']}/{res['must']} = {res['recall']:.3f}")
    lines.append(f"continuation questions answered: {res['questions_answered']}/{res['questions_total']} = "
                 f"{res['questions']:.3f}")
    if verbose:
        for name, r in res["rows"].items():
            for sec, v in r["sections"].items():
                for m in v["missed"]:
                    lines.append(f"  MISS {name}/{sec}: {m}")
                for b in v["bad_items"]:
                    lines.append(f"  BAD  {name}/{sec}: {b}")
            for q, ok in r["questions"].items():
                if not ok:
                    lines.append(f"  Q-NO {name}/{q}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", choices=("all", "dev", "heldout"), default="all")
    ap.add_argument("--json", type=Path)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    if not CORPUS.is_dir():
        print(f"corpus not found: {CORPUS}", file=sys.stderr)
        return 2
    res = run(args.split)
    print(render(res, args.verbose))
    if args.json:
        args.json.write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
