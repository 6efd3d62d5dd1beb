"""What a search, a listing, a build or a package manager prints about the code is not evidence of
the run: grep hits, compiler pointers, bundle size tables, paging notes, debugger echoes and
"Successfully installed" lines stay out of Key evidence and facts; real error lines stay in."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_anchor_runmodel import Run

from compactor.anchor import build_anchor, to_markdown

GREP = ("1397:async fn pull_request_detail(\n1398-    state: web::Data<AppState>,\n"
        "1429-        Err(e) => {\n"
        "1430-            tracing::error!(\"Failed to fetch pull request: {}\", e);\n"
        "1441-            tracing::warn!(\"Failed to fetch reviews for PR {}: {}\", pr_id, e);\n")
GREP_FILES = ("src/server.rs:94:/// Get the default workspace path\n"
              "./django/db/models/query.py:678:    async def acreate(self, **kwargs):\n")
CARGO = ("warning: unused import: `Path`\n --> crates/app/src/git/mod.rs:10:18\n   |\n"
         "error[E0609]: no field `git_workspace` on type `Arc<AppState>`\n --> crates/app/src/server.rs:656:10\n"
         "error: could not compile `app` (bin \"app\") due to 1 previous error\n")
BUNDLE = ("vite v5.0.0 building for production...\n"
          "../../dist/dashboard.html                0.48 kB │ gzip:  0.31 kB\n"
          "../../dist/dashboard.js                 24.25 kB │ gzip:  7.38 kB\n"
          "✓ built in 1.20s\n")
PIP = "Successfully uninstalled marshmallow-3.13.0\nSuccessfully installed marshmallow-3.13.0\n"
MYPY = "src/app.py:12: error: Incompatible return value type (got \"str\", expected \"int\")\nFound 1 error in 1 file\n"


def _sections(run: Run) -> tuple[str, str]:
    md = to_markdown(build_anchor(run.segs))
    ev = md.split("**Key evidence**:", 1)[1].split("**Constraints**", 1)[0]
    return md, ev


def test_search_hits_are_not_error_evidence_nor_facts():
    r = (Run().call("src/server.rs", GREP, tool="Grep", exit_code=None)
         .call("grep -rn 'def acreate' .", GREP_FILES))
    _, ev = _sections(r)
    assert "tracing::error!" not in ev and "tracing::warn!" not in ev
    assert "src/server.rs:94:" not in ev and "query.py:678:" not in ev


def test_compiler_pointers_and_bundle_tables_are_not_facts_but_the_error_stays():
    r = Run().call("cargo check -p app", CARGO, exit_code=101).call("pnpm build", BUNDLE)
    md, ev = _sections(r)
    assert "--> crates/app/src/git/mod.rs:10:18" not in ev
    assert "gzip:" not in ev
    assert "error[E0609]: no field `git_workspace`" in md  # the real error is kept


def test_package_manager_success_is_not_verification():
    r = Run().call("pip install -e .[dev]", PIP)
    _, ev = _sections(r)
    assert "verification" not in ev  # (what it installed stays a fact: it is not a passing check)
    assert "Fact (s1): Successfully installed marshmallow-3.13.0" in ev


def test_a_type_checker_error_in_path_line_form_stays_evidence():
    r = Run().call("mypy src", MYPY, exit_code=1)
    md, ev = _sections(r)
    assert "src/app.py:12: error: Incompatible return value type" in md


REAL = Path(__file__).resolve().parent.parent.parent / "shared" / "trajectories-extra"


@pytest.mark.skipif(not REAL.is_dir(), reason="shared trajectories-extra not present")
def test_grep_content_lines_of_a_real_run_are_not_error_evidence():
    from compactor import compact
    md = to_markdown(compact(REAL / "claude-agent-sdk-stream" / "openagents.autopilot-170100.jsonl").anchor)
    ev = md.split("**Key evidence**:", 1)[1].split("**Constraints**", 1)[0]
    assert "tracing::error!" not in ev and "tracing::warn!" not in ev
    assert "--> crates/agentgit" not in ev
    assert "Found 3 matches of the string to replace" in ev  # a real tool error stays
