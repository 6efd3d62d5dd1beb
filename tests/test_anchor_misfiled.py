"""Failed approaches are calls that failed: a call the tool reported as a success (exit 0, or its
own passed / success flag) is not one, whatever its output prints."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_anchor_runmodel import Run

from compactor.anchor import build_anchor, to_markdown

E2E = ("bun test v1.3.3\n[HudServer] Message handler error: 367 |\nerror: Handler error\n"
       "      at <anonymous> (/workspace/src/hud/hud.e2e.test.ts:372:21)\n"
       "      at message (/workspace/src/hud/server.ts:99:17)\n"
       "Traceback (most recent call last):\n  File \"srv.py\", line 3, in <module>\nValueError: handler raised\n"
       " 401 pass\n 0 fail\nRan 401 tests across 23 files. [4.21s]\n")


def _excluded(md: str) -> str:
    return md.split("**Excluded approaches**:", 1)[1].split("**Open", 1)[0]


def test_the_same_output_with_a_failing_exit_is_a_failed_attempt():
    md = to_markdown(build_anchor(Run().call("bun run test:container", E2E, exit_code=1).segs))
    assert "bun run test:container" in _excluded(md)


REAL = Path(__file__).resolve().parent.parent.parent / "shared" / "trajectories-extra" / "atif"


@pytest.mark.skipif(not REAL.is_dir(), reason="shared trajectories-extra not present")
def test_atif_verification_that_passed_is_not_a_failed_attempt():
    from compactor import compact
    md = to_markdown(compact(REAL / "openagents.orchestrator-ebphxk.atif.jsonl").anchor)
    assert "`bun run test:container`" not in _excluded(md)
