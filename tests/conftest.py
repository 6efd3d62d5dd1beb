import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("COMPACTOR_CORPUS", ROOT.parent / "shared" / "corpus"))

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


@pytest.fixture
def corpus():
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus not available")
    return CORPUS
