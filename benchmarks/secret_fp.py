"""False positives of the secret rules on the development corpus.

Runs every enabled secret rule over every file in ../shared/corpus (or $COMPACTOR_CORPUS) and
prints every hit with its file, line, rule and the surrounding text, so a human can judge it.
The corpus holds public logs and trajectories with no known secrets: the goal is zero hits on
protocol ids (call_…, toolu_…, msg_…, req_…, chatcmpl-…), git SHAs, sha256 digests and UUIDs,
and zero hits from the provider-prefix rules.

    python benchmarks/secret_fp.py [--json benchmarks/out/secret_fp.json] [--quiet]

Exit status: 0 always (this is a measurement); the numbers are printed and written as JSON.
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

from compactor.secrets import default_scanner  # noqa: E402

CORPUS = Path(os.environ.get("COMPACTOR_CORPUS", ROOT.parent / "shared" / "corpus"))

ID_SHAPES = [  # a hit whose value looks like one of these is an id/hash false positive
    ("tool-call id", r"^(?:call|toolu|msg|req|chatcmpl|resp|run|file|asst|thread)[_-][A-Za-z0-9]{6,}$"),
    ("git sha / hex digest", r"^[0-9a-f]{7,64}$"),
    ("uuid", r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(CORPUS))
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "out" / "secret_fp.json"))
    ap.add_argument("--quiet", action="store_true", help="only the summary")
    args = ap.parse_args(argv)
    import regex

    corpus = Path(args.corpus)
    if not corpus.is_dir():
        print(f"corpus not found: {corpus}")
        return 0
    scanner = default_scanner()
    id_shapes = [(name, regex.compile(p)) for name, p in ID_SHAPES]
    files = sorted(p for p in corpus.rglob("*") if p.is_file())
    hits = []
    total_bytes = 0
    t_scan = 0.0
    for path in files:
        data = path.read_bytes()
        total_bytes += len(data)
        text = data.decode("utf-8", errors="surrogateescape")
        t0 = time.perf_counter()
        found = scanner.find(text)
        t_scan += time.perf_counter() - t0
        for f in found:
            ls = text.rfind("\n", 0, f.start) + 1
            le = text.find("\n", f.end)
            le = len(text) if le == -1 else le
            a, b = max(ls, f.start - 80), min(le, f.end + 40)
            shape = next((name for name, p in id_shapes if p.match(f.value)), "")
            hits.append({
                "file": str(path.relative_to(corpus)),
                "line": f.line_start,
                "rule": f.rule_id,
                "value": f.value,
                "context": text[a:b].replace("\n", "\\n"),
                "id_or_hash": shape,
            })
    per_rule: dict[str, int] = {}
    for h in hits:
        per_rule[h["rule"]] = per_rule.get(h["rule"], 0) + 1
    prefix_rules = [r for r in per_rule if r not in ("secret.generic-credential",)]
    id_hits = [h for h in hits if h["id_or_hash"]]
    mb = total_bytes / 1_048_576
    summary = {
        "corpus": str(corpus),
        "files": len(files),
        "bytes": total_bytes,
        "rules": list(scanner.rule_ids),
        "hits": len(hits),
        "hits_per_rule": dict(sorted(per_rule.items())),
        "hits_on_ids_or_hashes": len(id_hits),
        "hits_from_non_generic_rules": sum(per_rule[r] for r in prefix_rules),
        "scan_seconds": round(t_scan, 3),
        "mb_per_second": round(mb / t_scan, 1) if t_scan else None,
    }
    if not args.quiet:
        for h in hits:
            flag = f"  <-- looks like a {h['id_or_hash']}" if h["id_or_hash"] else ""
            print(f"{h['file']}:{h['line']}: {h['rule']}: {h['value']!r}{flag}")
            print(f"    {h['context']}")
    print(f"{summary['files']} files, {mb:.1f} MB, {len(scanner.rule_ids)} secret rules: "
          f"{summary['hits']} hits ({summary['hits_on_ids_or_hashes']} on ids/hashes, "
          f"{summary['hits_from_non_generic_rules']} from non-generic rules); "
          f"{summary['scan_seconds']} s, {summary['mb_per_second']} MB/s")
    for rule, n in summary["hits_per_rule"].items():
        print(f"  {rule}: {n}")
    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"summary": summary, "hits": hits}, indent=2, ensure_ascii=False,
                                  default=str) + "\n", encoding="utf-8", errors="surrogateescape")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
