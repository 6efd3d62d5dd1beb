import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("COMPACTOR_CORPUS", ROOT.parent / "shared" / "corpus"))

# The test run writes nothing outside the checkout and one temporary folder (removed at exit):
# the placeholder store, compactor's caches, the hooks' state, XDG caches, and npm's cache and
# the npm packages the end-to-end tests install all live in it, whatever the environment says.
# (Set before any test module imports compactor: the defaults are read when first used.)
SESSION_TMP = Path(tempfile.mkdtemp(prefix="compactor-tests-"))
atexit.register(shutil.rmtree, SESSION_TMP, True)
os.environ["COMPACTOR_STORE"] = str(SESSION_TMP / "store.sqlite")
os.environ["COMPACTOR_CACHE"] = str(SESSION_TMP / "cache")
os.environ["COMPACTOR_HOOK_DIR"] = str(SESSION_TMP / "hooks")
os.environ["XDG_CACHE_HOME"] = str(SESSION_TMP / "xdg-cache")
os.environ["XDG_CONFIG_HOME"] = str(SESSION_TMP / "xdg-config")
os.environ["XDG_DATA_HOME"] = str(SESSION_TMP / "xdg-data")
os.environ["XDG_STATE_HOME"] = str(SESSION_TMP / "xdg-state")
os.environ["npm_config_cache"] = str(SESSION_TMP / "npm-cache")
os.environ.setdefault("COMPACTOR_E2E_CACHE", str(SESSION_TMP / "e2e"))

E2E_HOW = "end-to-end test against a real npm client: run with -m e2e or COMPACTOR_E2E=1"


def pytest_collection_modifyitems(config, items):
    """The end-to-end tests (npm downloads of the real Claude Code and Codex clients) run only when
    asked: ``-m e2e`` (or any -m naming e2e), or COMPACTOR_E2E=1. Otherwise they are deselected."""
    if "e2e" in (config.getoption("-m") or "") or os.environ.get("COMPACTOR_E2E") == "1":
        return
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker("e2e") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_report_header(config):
    if "e2e" not in (config.getoption("-m") or "") and os.environ.get("COMPACTOR_E2E") != "1":
        return f"e2e tests deselected ({E2E_HOW}); test state in {SESSION_TMP}"
    return f"test state in {SESSION_TMP}"

try:  # Hypothesis: a bounded, derandomised profile in CI
    from hypothesis import HealthCheck, settings

    settings.register_profile("ci", max_examples=200, deadline=None, derandomize=True,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("dev", max_examples=60, deadline=None)
    settings.load_profile("ci" if os.environ.get("CI") else "dev")
except ImportError:  # pragma: no cover
    pass


# the corpus folders the tests were written for. A test that walks "the whole corpus" walks these
# (and the files beside them): runs added next to them, such as ../shared/trajectories-extra
# (24 MB, four times the corpus), are taken only by the tests that name them, so whole-corpus
# tests keep their running time.
CORPUS_DIRS = ("aider", "anchor-gold", "ci-breakages", "ci-logs", "claude-code", "codex-rollout", "crash-traces",
               "exception-traces", "mini-swe-agent", "openhands-v0", "openhands-v1", "swe-agent")


def corpus_files(root: Path = CORPUS, pattern: str = "*") -> list[Path]:
    """The corpus files matching ``pattern`` (a glob), in path order: the top level's and those
    under ``CORPUS_DIRS``."""
    out = [p for p in root.glob(pattern) if p.is_file()]
    for d in CORPUS_DIRS:
        out += [p for p in (root / d).rglob(pattern) if p.is_file()]
    return sorted(out)


def corpus_path(*parts: str) -> Path:
    p = CORPUS.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"corpus not available: {p}")
    return p


def tune_run(rel: str) -> Path:
    """A run of the anchor evaluation's tuning half (``rel`` relative to the shared data root),
    skipped when the data is absent; a test-half run is refused (its outputs are never read)."""
    import json

    split = json.loads((ROOT / "benchmarks" / "anchor_eval" / "split.json").read_text(encoding="utf-8"))["runs"]
    assert split[rel]["half"] == "tune", rel  # never a test-half run
    p = ROOT.parent / "shared" / rel
    if not p.exists():
        pytest.skip(f"corpus not available: {p}")
    return p


@pytest.fixture
def corpus():
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus not available")
    return CORPUS
