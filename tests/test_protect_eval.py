"""Line-level precision / recall of the protect rules over the labelled fixtures (fixtures/protect).

Every family must keep every labelled line (recall 100%) and flag few unlabelled ones
(precision >= 95%). The fixture format and the labelling conventions are in
fixtures/protect/README.md; benchmarks/protect_eval.py prints the same numbers as a table.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import protect_eval  # noqa: E402

FIXTURES = ROOT / "fixtures" / "protect"
# families whose fixtures must exist (secret is another stage's business)
REQUIRED = ["placeholder", "trace", "error", "exit-code", "test-failure", "constraint", "decision",
            "failed-approach", "fileref", "number"]


@pytest.fixture(scope="module")
def result():
    return protect_eval.evaluate(FIXTURES)


def test_every_fixture_has_labels_and_text():
    texts = sorted(p.stem for p in FIXTURES.glob("*.txt"))
    labels = sorted(p.name[: -len(".labels.json")] for p in FIXTURES.glob("*.labels.json"))
    assert texts and texts == labels
    for name in labels:
        lab = json.loads((FIXTURES / f"{name}.labels.json").read_text(encoding="utf-8"))
        assert lab.get("role") in {"user", "assistant", "tool", "system"}, name
        assert lab.get("about"), f"{name}: say what the fixture is about"
        nlines = len((FIXTURES / f"{name}.txt").read_text(encoding="utf-8").rstrip("\n").split("\n"))
        for kind in ("protect", "allow"):
            for fam, ranges in lab.get(kind, {}).items():
                assert fam in REQUIRED, f"{name}: unknown family {fam!r}"
                lines = protect_eval.parse_ranges(ranges)
                assert lines and max(lines) <= nlines, f"{name}: {kind}.{fam} outside the text"


@pytest.mark.parametrize("family", REQUIRED)
def test_family_has_labelled_lines(result, family):
    assert result["families"][family]["labelled"] >= 4, f"too few labelled {family} lines"


@pytest.mark.parametrize("family", REQUIRED)
def test_recall_is_complete(result, family):
    s = result["families"][family]
    missed = [(fx["fixture"], fx["families"][family]["fn"]) for fx in result["fixtures"]
              if family in fx["families"] and fx["families"][family]["fn"]]
    assert s["fn"] == 0, f"{family}: {s['fn']} labelled line(s) not protected: {missed}"


@pytest.mark.parametrize("family", REQUIRED)
def test_precision_at_least_95(result, family):
    s = result["families"][family]
    extra = [(fx["fixture"], fx["families"][family]["fp"]) for fx in result["fixtures"]
             if family in fx["families"] and fx["families"][family]["fp"]]
    assert s["precision"] >= 0.95, f"{family}: precision {s['precision']:.1%}; extra lines {extra}"
