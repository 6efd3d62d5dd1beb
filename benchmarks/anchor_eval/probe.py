"""Continuation probes and label recall for anchors, scored against blind gold labels.

Gold files live in ``benchmarks/anchor_eval/gold/<layout>__<file>.json`` (one per labelled
run, written from the trajectory alone; see README.md in this folder).  An anchor for a gold
run is looked up as ``<anchors>/<gold name>.md`` where the gold name is the gold file's name
without ``.json``.

    python benchmarks/anchor_eval/probe.py pack --half test --anchors DIR --out bundle.jsonl
    python benchmarks/anchor_eval/probe.py score --judgments judgments.jsonl
    python benchmarks/anchor_eval/probe.py recall --half test --anchors DIR

``pack`` writes one JSON line per gold run: the anchor text and the run's continuation
questions, without reference answers, plus a ready-to-send reader prompt.  A judge then
compares the reader's answers with the references (``reference_answers`` in the gold file)
and writes one JSON line per question: ``{"run": ..., "question": <index>, "verdict":
"yes" | "partly" | "no"}``.  ``score`` totals those per half and per question kind.
``recall`` needs no reader: it measures must-include recall, must-not-include violations,
status agreement (first line of the anchor) and constraint recall by normalised substring
match.

Bad input (a malformed gold or judgments line, an unknown run, a missing anchor) stops with
a one-line message naming the file and position and exit code 2.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import unicodedata
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_GOLD = HERE / "gold"
STATUSES = ("working", "finished", "submitted", "stopped_limit", "stopped_error", "waiting_user")
KINDS = ("task", "state", "changes", "failed", "live_error", "must_not", "next", "specific")
VERDICTS = ("yes", "partly", "no")
HALVES = ("tune", "test")
CHANGE_KINDS = ("created", "modified", "deleted", "reverted")
REQUIRED = ("run", "layout", "half", "task", "status", "status_evidence", "live_failure",
            "resolved_errors", "changes", "failed_approaches", "constraints", "decisions",
            "open_questions", "next_step", "must_include", "must_not_include", "questions")


class BadInput(Exception):
    """Input that cannot be used; the message names the file and the position."""


# ---------------------------------------------------------------- gold

def _check_gold(g: object, where: str) -> dict:
    if not isinstance(g, dict):
        raise BadInput(f"{where}: gold must be a JSON object")
    for key in REQUIRED:
        if key not in g:
            raise BadInput(f"{where}: missing field {key!r}")
    if g["half"] not in HALVES:
        raise BadInput(f"{where}: half must be one of {', '.join(HALVES)}, got {g['half']!r}")
    if g["status"] not in STATUSES:
        raise BadInput(f"{where}: status must be one of {', '.join(STATUSES)}, got {g['status']!r}")
    for key in ("must_include", "must_not_include", "constraints", "resolved_errors", "open_questions"):
        if not isinstance(g[key], list) or not all(isinstance(s, str) for s in g[key]):
            raise BadInput(f"{where}: {key} must be a list of strings")
    for i, c in enumerate(g["changes"]):
        if not isinstance(c, dict) or c.get("change") not in CHANGE_KINDS or not c.get("file"):
            raise BadInput(f"{where}: changes[{i}] needs a file and a change in {', '.join(CHANGE_KINDS)}")
    qs = g["questions"]
    if not isinstance(qs, list) or not qs:
        raise BadInput(f"{where}: questions must be a non-empty list")
    for i, q in enumerate(qs):
        if not isinstance(q, dict) or q.get("kind") not in KINDS or not q.get("q") or not q.get("a"):
            raise BadInput(f"{where}: questions[{i}] needs kind (one of {', '.join(KINDS)}), q and a")
    return g


def load_gold(gold_dir: Path, half: str = "all") -> list[tuple[str, dict]]:
    """(gold name, gold) pairs sorted by name, restricted to one half unless half == 'all'."""
    if not gold_dir.is_dir():
        raise BadInput(f"{gold_dir}: no such gold directory")
    out = []
    for path in sorted(gold_dir.glob("*.json")):
        try:
            g = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise BadInput(f"{path}:{e.lineno}:{e.colno}: {e.msg}") from None
        g = _check_gold(g, str(path))
        if half in ("all", g["half"]):
            out.append((path.name[: -len(".json")], g))
    if not out:
        raise BadInput(f"{gold_dir}: no gold files for half {half!r}")
    return out


def _anchor(anchors: Path, name: str) -> str:
    path = anchors / f"{name}.md"
    if not path.is_file():
        raise BadInput(f"{path}: anchor missing for gold run {name}")
    return path.read_text(encoding="utf-8")


# ---------------------------------------------------------------- pack

READER_INSTRUCTIONS = (
    "You are taking over an agent's run. All you have is the anchor below (the memory kept "
    "after compaction){recent}. Answer each question from it alone; say 'not in the anchor' "
    "when it does not tell you."
)


def pack(gold_dir: Path, half: str, anchors: Path, out: Path, recent: Path | None = None) -> int:
    rows = []
    for name, g in load_gold(gold_dir, half):
        anchor = _anchor(anchors, name)
        recent_text = None
        if recent is not None:
            rp = recent / f"{name}.txt"
            if not rp.is_file():
                raise BadInput(f"{rp}: recent messages missing for gold run {name}")
            recent_text = rp.read_text(encoding="utf-8")
        questions = [{"index": i, "kind": q["kind"], "q": q["q"]} for i, q in enumerate(g["questions"])]
        prompt = [READER_INSTRUCTIONS.format(recent=" and the most recent messages" if recent_text else ""),
                  "", "=== ANCHOR ===", anchor.rstrip("\n")]
        if recent_text is not None:
            prompt += ["", "=== RECENT MESSAGES ===", recent_text.rstrip("\n")]
        prompt += ["", "=== QUESTIONS ==="] + [f"{q['index']}. {q['q']}" for q in questions]
        rows.append({"run": g["run"], "name": name, "half": g["half"], "layout": g["layout"],
                     "anchor": anchor, "recent": recent_text, "questions": questions,
                     "prompt": "\n".join(prompt) + "\n"})
    out.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows),
                   encoding="utf-8")
    print(f"packed {len(rows)} runs, {sum(len(r['questions']) for r in rows)} questions -> {out}")
    return 0


# ---------------------------------------------------------------- score

def read_judgments(path: Path, gold: list[tuple[str, dict]]) -> dict[tuple[str, int], str]:
    by_key = {}
    for name, g in gold:
        by_key[name] = g
        by_key[g["run"]] = g
    verdicts: dict[tuple[str, int], str] = {}
    if not path.is_file():
        raise BadInput(f"{path}: no such judgments file")
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            j = json.loads(line)
        except json.JSONDecodeError as e:
            raise BadInput(f"{where}:{e.colno}: {e.msg}") from None
        if not isinstance(j, dict):
            raise BadInput(f"{where}: a judgment must be a JSON object")
        run, idx, verdict = j.get("run"), j.get("question", j.get("index")), j.get("verdict")
        g = by_key.get(run)
        if g is None:
            raise BadInput(f"{where}: unknown run {run!r}")
        if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < len(g["questions"]):
            raise BadInput(f"{where}: question index {idx!r} out of range for {g['run']}")
        if verdict not in VERDICTS:
            raise BadInput(f"{where}: verdict must be yes, partly or no, got {verdict!r}")
        key = (g["run"], idx)
        if key in verdicts:
            raise BadInput(f"{where}: second judgment for {g['run']} question {idx}")
        verdicts[key] = verdict
    return verdicts


def _pct(n: int, d: int) -> str:
    return f"{100.0 * n / d:5.1f}%" if d else "    -"


def score(gold_dir: Path, judgments: Path) -> int:
    gold = load_gold(gold_dir, "all")
    verdicts = read_judgments(judgments, gold)
    judged_runs = {run for run, _ in verdicts}
    lines = ["half   runs  questions  judged    yes  partly     no   yes%    no%"]
    kinds: dict[str, dict[str, int]] = {}
    for half in HALVES:
        runs = [g for _, g in gold if g["half"] == half and g["run"] in judged_runs]
        counts = {v: 0 for v in VERDICTS}
        total = unjudged = 0
        for g in runs:
            for i, q in enumerate(g["questions"]):
                total += 1
                v = verdicts.get((g["run"], i))
                if v is None:
                    unjudged += 1
                    continue
                counts[v] += 1
                kinds.setdefault(f"{half}:{q['kind']}", {x: 0 for x in VERDICTS})[v] += 1
        judged = total - unjudged
        lines.append(f"{half:5} {len(runs):5} {total:10} {judged:7} {counts['yes']:6} {counts['partly']:7}"
                     f" {counts['no']:6} {_pct(counts['yes'], judged)} {_pct(counts['no'], judged)}")
        if unjudged:
            lines.append(f"      ({unjudged} questions of judged runs have no verdict)")
    lines += ["", "half  kind          yes  partly    no   yes%"]
    for half in HALVES:
        for kind in KINDS:
            c = kinds.get(f"{half}:{kind}")
            if c:
                n = sum(c.values())
                lines.append(f"{half:5} {kind:11} {c['yes']:5} {c['partly']:7} {c['no']:5} {_pct(c['yes'], n)}")
    print("\n".join(lines))
    return 0


# ---------------------------------------------------------------- recall

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "`": "", "*": ""})


def normalise(text: str) -> str:
    """Case-fold, unify quotes, drop markdown emphasis/backticks, collapse whitespace."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
    return re.sub(r"\s+", " ", text).strip()


# how an anchor may spell each status in prose, besides the word itself
_STATUS_PHRASES = {
    "stopped_limit": r"stopped by (?:a |the )?(?:[a-z]+ )?(?:or [a-z]+ )?limit",
    "stopped_error": r"stopped by (?:an? |the )?(?:[a-z]+ )?(?:or [a-z]+ )?error",
    "waiting_user": r"waiting (?:for|on) (?:the )?user",
}


def status_named(line: str) -> str | None:
    """The status the anchor's status line names (the word with underscore, hyphen or space, or
    its prose form such as 'Stopped by a step or cost limit'), if exactly one."""
    line = " " + re.sub(r"[_\-]", " ", normalise(line)) + " "
    found = []
    for s in STATUSES:
        pats = [r"(?<![a-z])" + s.replace("_", " ") + r"(?![a-z])"]
        if s in _STATUS_PHRASES:
            pats.append(_STATUS_PHRASES[s])
        if any(re.search(p, line) for p in pats):
            found.append(s)
    return found[0] if len(found) == 1 else None


def status_line(anchor: str) -> str:
    """The anchor's status line: its first non-empty line that is not a Markdown heading."""
    return next((ln for ln in anchor.splitlines() if ln.strip() and not ln.lstrip().startswith("#")), "")


SECTIONS = ("status", "live failure", "changes", "failed approaches", "constraints", "decisions",
            "next step", "open questions", "goal", "task", "files", "evidence", "facts", "errors")
_LABEL = re.compile(r"^\s*(#+\s|[>*\-\s]*(" + "|".join(SECTIONS) + r")\b\s*\**\s*(:|$))", re.I)


def live_section(anchor: str) -> str:
    """Text of the anchor's live-failure section: from the line that starts with 'Live failure'
    (after markdown heading/list/emphasis marks) to the next markdown heading or the next line
    that opens another section by name ('Changes:', '**Next step**', ...)."""
    out: list[str] = []
    inside = False
    for line in anchor.splitlines():
        bare = normalise(re.sub(r"^[\s#>*\-]+", "", line))
        if bare.startswith("live failure"):
            inside = True
            out.append(line)
            continue
        if inside and _LABEL.match(line):
            break
        if inside:
            out.append(line)
    return "\n".join(out)


def _error_key(line: str) -> str:
    """A resolved error's matching key: without a trailing '(...)' note, first 60 normalised chars."""
    return normalise(re.sub(r"\s*\([^()]*\)\s*$", "", line))[:60]


def stale_shown_live(g: dict, anchor: str) -> list[str]:
    """Resolved or stale errors that the anchor's live-failure section shows."""
    live = normalise(live_section(anchor))
    if not live:
        return []
    gold_live = g["live_failure"]
    gold_live = normalise(gold_live.get("line", "") if isinstance(gold_live, dict) else "")
    out = []
    for err in g["resolved_errors"]:
        key = _error_key(err)
        if key and key in live and key not in gold_live:
            out.append(err)
    return out


def recall_one(g: dict, anchor: str) -> dict:
    text = normalise(anchor)
    must = g["must_include"]
    hit = [s for s in must if normalise(s) in text]
    bad = [s for s in g["must_not_include"] if normalise(s) in text]
    cons = g["constraints"]
    cons_hit = [s for s in cons if normalise(s) in text]
    named = status_named(status_line(anchor))
    return {"must": len(must), "must_hit": len(hit), "missing": [s for s in must if s not in hit],
            "violations": bad, "constraints": len(cons), "constraints_hit": len(cons_hit),
            "status": g["status"], "status_named": named, "status_ok": named == g["status"],
            "stale_as_live": stale_shown_live(g, anchor)}


def recall(gold_dir: Path, half: str, anchors: Path, as_json: bool = False) -> int:
    rows = []
    for name, g in load_gold(gold_dir, half):
        rows.append({"name": name, "half": g["half"], **recall_one(g, _anchor(anchors, name))})
    tot = {k: sum(r[k] for r in rows) for k in ("must", "must_hit", "constraints", "constraints_hit")}
    summary = {
        "runs": len(rows),
        "must_include_recall": tot["must_hit"] / tot["must"] if tot["must"] else None,
        "must_not_include_violations": sum(len(r["violations"]) for r in rows),
        "runs_with_violations": sum(1 for r in rows if r["violations"]),
        "stale_errors_shown_live": sum(len(r["stale_as_live"]) for r in rows),
        "status_match": sum(1 for r in rows if r["status_ok"]) / len(rows),
        "constraint_recall": tot["constraints_hit"] / tot["constraints"] if tot["constraints"] else None,
        "constraints": tot["constraints"],
    }
    if as_json:
        print(json.dumps({"summary": summary, "runs": rows}, ensure_ascii=False, indent=1, sort_keys=True))
        return 0
    print("run                                                          must  viol  stale  status        constraints")
    for r in rows:
        st = "ok" if r["status_ok"] else f"{r['status_named'] or '-'}!={r['status']}"
        print(f"{r['name'][:60]:60} {r['must_hit']:2}/{r['must']:<2} {len(r['violations']):4} {len(r['stale_as_live']):6}  {st:13} "
              f"{r['constraints_hit']}/{r['constraints']}")
    def f(x):
        return "-" if x is None else f"{x:.2f}"
    print(f"\n{summary['runs']} runs: must-include recall {f(summary['must_include_recall'])}, "
          f"must-not-include violations {summary['must_not_include_violations']} "
          f"(in {summary['runs_with_violations']} runs), stale errors shown live "
          f"{summary['stale_errors_shown_live']}, status match {f(summary['status_match'])}, "
          f"constraint recall {f(summary['constraint_recall'])} of {summary['constraints']}")
    return 0


# ---------------------------------------------------------------- cli

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="probe.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--gold", type=Path, default=DEFAULT_GOLD, help="gold directory (default: %(default)s)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="bundle anchors and questions (no reference answers) for a reader")
    p.add_argument("--half", choices=HALVES + ("all",), default="test")
    p.add_argument("--anchors", type=Path, required=True)
    p.add_argument("--recent", type=Path, help="optional DIR/<gold name>.txt with the recent messages")
    p.add_argument("--out", type=Path, required=True)
    s = sub.add_parser("score", help="total a judgments JSONL per half and per question kind")
    s.add_argument("--judgments", type=Path, required=True)
    r = sub.add_parser("recall", help="must-include recall, violations, status and constraint recall")
    r.add_argument("--half", choices=HALVES + ("all",), default="test")
    r.add_argument("--anchors", type=Path, required=True)
    r.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "pack":
            return pack(a.gold, a.half, a.anchors, a.out, a.recent)
        if a.cmd == "score":
            return score(a.gold, a.judgments)
        return recall(a.gold, a.half, a.anchors, a.json)
    except BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
