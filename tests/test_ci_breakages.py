"""Real CI breakages: the protect rules keep the labelled error lines (>= 99% overall).

Corpus: ../shared/corpus/ci-breakages (CiDiff, labels.json error_lines); skipped when absent.
benchmarks/ci_breakages.py prints the per-breakage table and the fraction of lines protected.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import CORPUS

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import ci_breakages  # noqa: E402

BREAKAGES = CORPUS / "ci-breakages"


@pytest.fixture(scope="module")
def result():
    if not BREAKAGES.is_dir():
        pytest.skip(f"corpus not available: {BREAKAGES}")
    return ci_breakages.evaluate(BREAKAGES)


@pytest.mark.corpus
def test_error_line_coverage_at_least_99_percent(result):
    missed = {c["case"]: [n for n, _ in c["missed"]] for c in result["cases"] if c["missed"]}
    assert result["coverage"] >= 0.99, f"coverage {result['coverage']:.2%}; missed {missed}"


@pytest.mark.corpus
def test_no_rule_times_out_and_protection_stays_selective(result):
    # a timeout protects the whole log; the fail logs hold ~11% labelled error lines, so anything
    # near the whole text means the rules stopped discriminating
    assert result["protected_fraction"] < 0.30, result["protected_fraction"]
    assert result["pass_protected_fraction"] < 0.15, result["pass_protected_fraction"]


@pytest.mark.corpus
def test_line_numbering_matches_the_labels(result):
    assert len(result["cases"]) >= 10
    for c in result["cases"]:
        assert c["error_lines"] > 0 and c["lines"] > 0
