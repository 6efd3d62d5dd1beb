"""The anchor label set (fixtures/anchor-labels): every label is verbatim in its trajectory, and
the anchor meets the precision / recall thresholds on it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from compactor.pipeline import load_document

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import anchor_labels as AL  # noqa: E402

# noise the extractor itself can produce (a template), so it is not verbatim in any trajectory
TEMPLATE_NOISE = {"Consider continuing with"}
LABEL_FILES = sorted((ROOT / "fixtures" / "anchor-labels").glob("*.json"))


def _corpus_texts(rel: str) -> str:
    p = AL.CORPUS / rel
    if not p.exists():
        pytest.skip(f"corpus not available: {p}")
    doc = load_document(p)
    parts = [p.read_text(encoding="utf-8")]
    for s in doc.segments:
        parts.append(s.text)
        if s.command:
            parts.append(s.command)
    return AL.squash("\n".join(parts))


@pytest.mark.parametrize("path", LABEL_FILES, ids=lambda p: p.stem)
def test_labels_are_verbatim_and_well_formed(path):
    d = json.loads(path.read_text(encoding="utf-8"))
    assert d["split"] in ("dev", "heldout")
    assert set(d["sections"]) == set(AL.SECTIONS)
    assert set(d["continuation"]) <= set(AL.QUESTIONS)
    text = _corpus_texts(d["path"])
    labels = [x for s in d["sections"].values() for k in ("must", "must_not") for x in s[k]] + d["resolved"]
    labels += [a for v in d["continuation"].values() if v for a in v]
    missing = [x for x in labels if AL.squash(x) not in text and x not in TEMPLATE_NOISE]
    assert not missing


def test_there_is_a_held_out_part():
    splits = [json.loads(p.read_text(encoding="utf-8"))["split"] for p in LABEL_FILES]
    assert splits.count("heldout") >= 3 and splits.count("dev") >= 6


# --------------------------------------------------------------------------- quality thresholds


@pytest.fixture(scope="module")
def scored():
    if not AL.CORPUS.is_dir():
        pytest.skip("../shared/corpus not available")
    return AL.run("all")


def test_precision_per_section_and_recall_of_must_haves(scored):
    """At least 90 % precision in every section and 90 % recall of the must-have items, on the
    whole label set (the held-out part included)."""
    low = {sec: round(v["precision"], 3) for sec, v in scored["sections"].items() if v["precision"] < 0.9}
    assert not low, f"sections under 90 % precision: {low}"
    assert scored["recall"] >= 0.9, f"must-have recall {scored['found']}/{scored['must']}"


def test_continuation_questions(scored):
    assert scored["questions"] >= 0.9, f"{scored['questions_answered']}/{scored['questions_total']}"


def test_default_anchor_is_at_most_2000_tokens_on_every_corpus_trajectory(corpus):
    from compactor import compact
    from compactor.anchor import to_markdown
    from compactor.tokens import get_counter

    count = get_counter().count
    sizes = {}
    for layout in ("aider", "claude-code", "codex-rollout", "mini-swe-agent", "openhands-v0", "openhands-v1",
                   "swe-agent"):
        for p in sorted((corpus / layout).iterdir()):
            a = compact(str(p)).anchor
            sizes[p.name] = (count(to_markdown(a, "en")), count(to_markdown(a, "zh")))
    over = {k: v for k, v in sizes.items() if max(v) > 2000}
    assert len(sizes) >= 11 and not over, over
