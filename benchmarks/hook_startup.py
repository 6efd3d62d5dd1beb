"""Claude Code hook cost per call, as ratios against ``python -c pass`` measured in the same run.

A hook runs on every tool call, so the no-op path (a small output, a SessionStart that is not
after /compact) must cost little more than starting Python. Also timed: the work paths on the
captured payloads (a cut 80 KB Bash output compacted to Level 1; the anchor of a real transcript).

    python benchmarks/hook_startup.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "claude_code"
EXE = str(Path(sys.executable).with_name("compactor"))


def timed(cmd: list[str], stdin: str, env: dict[str, str], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        p = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env)
        runs.append(time.perf_counter() - t)
        if p.returncode != 0:
            raise SystemExit(f"{cmd} failed: {p.stderr}")
    return statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    env = {**os.environ, "COMPACTOR_STORE": str(tmp / "store.sqlite"), "COMPACTOR_HOOK_DIR": str(tmp / "anchors")}
    post = json.loads((FIX / "post_tool_use_toolu_e2e_2.json").read_text().replace("{FIXTURES}", str(FIX)))
    small = dict(post, tool_response={"stdout": "ok\n", "stderr": "", "interrupted": False, "isImage": False})
    pre = dict(json.loads((FIX / "pre_compact.json").read_text()), transcript_path=str(FIX / "transcript.jsonl"))
    hook = [EXE, "hook", "claude-code"]
    base = timed([sys.executable, "-c", "pass"], "", env, args.repeat)
    rows = [
        ("python -c pass", base),
        ("session-start, source startup (no-op)", timed(hook + ["session-start"],
                                                        (FIX / "session_start_startup.json").read_text(), env, args.repeat)),
        ("post-tool-use, 3-byte output (no-op)", timed(hook + ["post-tool-use"], json.dumps(small), env, args.repeat)),
        ("post-tool-use, cut 80 KB Bash output", timed(hook + ["post-tool-use"], json.dumps(post), env, args.repeat)),
        ("pre-compact, real transcript", timed(hook + ["pre-compact"], json.dumps(pre), env, args.repeat)),
        ("session-start, source compact", timed(hook + ["session-start"],
                                                (FIX / "session_start_compact.json").read_text(), env, args.repeat)),
    ]
    print(f"{'case':<42} {'median s':>9} {'x python -c pass':>17}")
    for name, t in rows:
        print(f"{name:<42} {t:>9.3f} {t / base:>17.1f}")


if __name__ == "__main__":
    main()
