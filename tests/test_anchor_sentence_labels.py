"""The prose sentence labels stay usable: locators resolve, texts match, files are well formed."""

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest

from conftest import CORPUS

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "benchmarks" / "anchor_eval" / "sentences"
SHARED = CORPUS.parent
LABELS = {"decision", "rejected", "constraint", "question", "plan", "status", "noise"}


def _extract():
    spec = importlib.util.spec_from_file_location("sentence_extract", HERE / "extract.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _records(name):
    with open(HERE / name, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def test_split_handles_english_chinese_lists_and_code():
    ex = _extract()
    text = ("Done. 1. First item\n2. Second item\n```\nx = 1. Y\n```\n"
            "我试过了。不行！为什么？ Use e.g. foo here. Next I'll run it.\n"
            "<function=bash>\n<parameter=command>ls</parameter>\n</function>\nAfter.")
    assert ex.split_sentences(text) == [
        "Done.", "1. First item", "2. Second item", "我试过了。", "不行！", "为什么？",
        "Use e.g. foo here.", "Next I'll run it.", "After.",
    ]


def test_labels_file_is_well_formed_and_balanced():
    recs = _records("labels.jsonl")
    assert len(recs) >= 3000
    keys = {"run", "msg", "sent", "role", "sha1", "label", "half"}
    assert all(set(r) == keys for r in recs), "labels must carry locators only, never text"
    assert {r["label"] for r in recs} == LABELS
    assert len({(r["run"], r["msg"], r["sent"]) for r in recs}) == len(recs)
    runs = {r["run"] for r in recs}
    layouts = {_extract().layout_of(r) for r in runs}
    assert len(runs) >= 40 and len(layouts) >= 6
    split = json.loads((ROOT / "benchmarks" / "anchor_eval" / "split.json").read_text())["runs"]
    for r in recs:
        assert r["half"] == split.get(r["run"], {}).get("half", "tune"), r["run"]
    test_share = sum(r["half"] == "test" for r in recs) / len(recs)
    assert 0.35 <= test_share <= 0.65


def test_every_locator_resolves_to_its_sentence():
    if not (SHARED / "trajectories-extra").is_dir() or not CORPUS.is_dir():
        pytest.skip("../shared runs not available")
    problems = _extract().verify(str(SHARED), str(HERE / "labels.jsonl"))
    assert problems == []


def test_sampling_is_deterministic_and_matches_the_labels():
    if not (SHARED / "trajectories-extra").is_dir():
        pytest.skip("../shared runs not available")
    ex = _extract()
    run = "trajectories-extra/claude-code-chat-json/templar.lint-fix.chat.json"
    a = ex.sample(ex.sentences(str(SHARED), run))
    b = ex.sample(ex.sentences(str(SHARED), run))
    assert a == b and len(a) == ex.CAP
    labelled = {(r["msg"], r["sent"]) for r in _records("labels.jsonl") if r["run"] == run}
    assert labelled == {(s["msg"], s["sent"]) for s in a}


@pytest.mark.parametrize("name,lang,minimum", [("zh_sentences.jsonl", "zh", 300), ("en_extra.jsonl", "en", 150)])
def test_written_sentences_carry_text_label_and_parity_half(name, lang, minimum):
    recs = _records(name)
    assert len(recs) >= minimum
    assert {r["label"] for r in recs} == LABELS
    for r in recs:
        assert r["lang"] == lang and r["label"] in LABELS
        assert r["sha1"] == hashlib.sha1(r["text"].encode("utf-8")).hexdigest()
        assert r["half"] == ("tune" if int(r["sha1"][-1], 16) % 2 == 0 else "test")
    if lang == "zh":
        cjk = sum(any("\u4e00" <= ch <= "\u9fff" for ch in r["text"]) for r in recs)
        assert cjk / len(recs) >= 0.9  # the rest: verbatim evidence and code lines quoted in a Chinese session
