"""Assign every eligible run to the tuning or the test half, before any labelling or tuning.

The split is by trajectory and deterministic: within a layout, runs are ordered by the
SHA-256 of their path (relative to the shared data root) and dealt alternately to the two
halves, starting with the half named by the parity of the first byte of the layout's own
hash.  A layout with two or more runs therefore has runs in both halves; a layout with a
single run goes to "tune" when the first byte of its path's hash is even, else to "test".

    python benchmarks/anchor_eval/make_split.py /work/shared > benchmarks/anchor_eval/split.json
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

CORPUS_LAYOUTS = ("aider", "claude-code", "codex-rollout", "mini-swe-agent",
                  "openhands-v0", "openhands-v1", "swe-agent")
# aider's published website transcripts are edited examples, not raw runs
EXCLUDED_PREFIX = "aider-examples."


def eligible_runs(root: Path) -> list[tuple[str, str]]:
    runs = []
    extra = root / "trajectories-extra"
    for layout_dir in sorted(p for p in extra.iterdir() if p.is_dir()):
        for f in sorted(layout_dir.iterdir()):
            if f.is_file() and not f.name.startswith(EXCLUDED_PREFIX):
                runs.append((layout_dir.name, f.relative_to(root).as_posix()))
    for layout in CORPUS_LAYOUTS:
        for f in sorted((root / "corpus" / layout).iterdir()):
            if f.is_file():
                runs.append((layout, f.relative_to(root).as_posix()))
    return runs


def _h(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def split(runs: list[tuple[str, str]]) -> dict:
    by_layout: dict[str, list[str]] = {}
    for layout, path in runs:
        by_layout.setdefault(layout, []).append(path)
    out = {}
    for layout in sorted(by_layout):
        paths = sorted(by_layout[layout], key=lambda p: _h(p))
        if len(paths) == 1:
            out[paths[0]] = "tune" if _h(paths[0])[0] % 2 == 0 else "test"
            continue
        first = ("tune", "test") if _h(layout)[0] % 2 == 0 else ("test", "tune")
        for i, p in enumerate(paths):
            out[p] = first[i % 2]
    return {"method": "per layout: runs ordered by sha256(path), dealt alternately; "
                      "first half by parity of sha256(layout)[0]; single-run layouts: "
                      "sha256(path)[0] even -> tune",
            "runs": {p: {"layout": l, "half": out[p]} for l, p in sorted(runs, key=lambda r: r[1])}}


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else "/work/shared")
    json.dump(split(eligible_runs(root)), sys.stdout, indent=1, sort_keys=True, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
