"""Write what a successor sees of each labelled run: the anchor and the most recent messages.

For every run of the chosen half in ``split.json`` that has a gold file, writes
``OUT/<gold name>.md`` (the anchor as Markdown, built over the whole run) and
``OUT/<gold name>.txt`` (the last ``--recent`` messages of the run as the reader gives them,
each cut to ``--chars`` characters). ``probe.py pack --anchors OUT --recent OUT`` packs them with
the questions; ``probe.py recall --anchors OUT`` scores the anchors against the gold.

    python benchmarks/anchor_eval/make_anchors.py --half test --out /tmp/anchors
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

import compactor  # noqa: E402
from compactor.anchor import to_markdown  # noqa: E402
from compactor.formats import load_document  # noqa: E402


def gold_name(run: str) -> str:
    parts = run.split("/")
    return f"{parts[-2]}__{parts[-1]}"


def recent_text(path: Path, count: int, chars: int) -> str:
    doc = load_document(path)
    segs = [s for s in doc.segments if s.text.strip()]
    out = []
    for s in segs[-count:]:
        kind = s.kind.value if hasattr(s.kind, "value") else str(s.kind)
        role = s.role.value if hasattr(s.role, "value") else str(s.role)
        head = f"--- {role} {kind}" + (f" ({s.tool_name})" if s.tool_name else "") + f" [step {s.step}]"
        text = s.text if len(s.text) <= chars else s.text[:chars] + f"\n[... {len(s.text) - chars} more characters]"
        out.append(head + "\n" + text)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--half", choices=("tune", "test", "all"), required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    p.add_argument("--recent", type=int, default=6)
    p.add_argument("--chars", type=int, default=1500)
    a = p.parse_args(argv)
    split = json.loads((HERE / "split.json").read_text(encoding="utf-8"))
    runs = split["runs"]
    a.out.mkdir(parents=True, exist_ok=True)
    done = 0
    for run in sorted(runs):
        half = runs[run]["half"]
        if a.half != "all" and half != a.half:
            continue
        name = gold_name(run)
        if not (HERE / "gold" / f"{name}.json").is_file():
            continue
        path = a.shared / run
        result = compactor.compact(path)
        (a.out / f"{name}.md").write_text(to_markdown(result.anchor), encoding="utf-8")
        (a.out / f"{name}.txt").write_text(recent_text(path, a.recent, a.chars), encoding="utf-8")
        done += 1
        print(f"{name}", file=sys.stderr)
    print(f"{done} runs written to {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
