"""The lexical support check behind the hallucination / laundering / stale-dead-end guards."""

from __future__ import annotations

import pytest

from compactor.llm.guards import parse_answer, AnswerError
from compactor.llm.support import numbers_in, overlap, stem, support

S1 = ("search('Starship orbital flight history') -> Starship had multiple test flights including IFT-1 "
      "(April 2023, exploded), IFT-2 (Nov 2023, lost upper stage), IFT-3 (March 2024, partially successful)...")
S2 = ("search('IFT-3 Starship orbital classification') -> IFT-3 reached space and tested in-orbit operations "
      "but did not complete a full orbit; SpaceX described it as 'transatmospheric'.")
S3 = ("search('Starship first full orbital flight') -> As of mid-2024, no flight had completed a full Earth "
      "orbit; later flights focused on reentry and booster recovery.")

SUPPORTED = [
    ("IFT-1 (April 2023) ended in vehicle loss before orbit.", S1),           # seed-000's own example facts
    ("IFT-2 (Nov 2023) lost the upper stage.", S1),
    ("IFT-3 reached space but did not complete a full orbit; classified as transatmospheric.", S2),
    ("As of mid-2024, no Starship flight had completed a full Earth orbit.", S3),
    ("pip install failed with a network timeout", "ERROR: Could not install packages: connection timed out (network)"),
    ("1 test failed: test_empty_file", "FAILED tests/test_parser.py::test_empty_file\n1 failed, 1 passed in 0.12s"),
    ("Version 2.31.0 of requests is installed", "Successfully installed requests-2.31.0"),
    ("测试在 tests/test_parser.py 中失败", "修复 tests/test_parser.py 中失败的测试。"),
]

UNSUPPORTED = [
    ("IFT-4 (June 2024) completed a full orbit.", S3, "numbers"),
    ("IFT-2 (Nov 2023) exploded on the pad in Texas.", S1, "specific"),
    ("IFT-3 completed a full orbit.", S2, "negation"),
    ("pytest passed", "pytest did not pass: 3 failed", "negation"),
    ("the tests did not pass", "the tests passed", "negation"),
    ("pytest reported 5 failed tests.", "1 failed, 1 passed in 0.12s", "numbers"),
    ("The CI pipeline runs on GitHub Actions.", "def parse_config(path): return {}", "specific"),
    ("the database migration corrupted the index", "the cache warmed up and the server started", "coverage"),
    ("用户要求修改 parse_config() 的公共 API", "不要修改 parse_config() 的公共 API。", "negation"),
    ("", "anything", "empty"),
]


@pytest.mark.parametrize("claim,source", SUPPORTED)
def test_supported(claim, source):
    s = support(claim, source)
    assert s.ok, s


@pytest.mark.parametrize("claim,source,reason", UNSUPPORTED)
def test_unsupported(claim, source, reason):
    s = support(claim, source)
    assert not s.ok and s.reason == reason, s


def test_stems_are_consistent_across_forms():
    assert {stem(w) for w in ("pass", "passed", "passes", "passing")} == {"pass"}
    assert {stem(w) for w in ("fail", "failed", "fails", "failure")} == {"fail"}
    assert {stem(w) for w in ("complete", "completed", "completing")} == {"complet"}


def test_numbers():
    assert {"1024", "2.31.0", "2", "31", "0", "2.31"} <= numbers_in("1,024 items; requests 2.31.0")
    assert "3" in numbers_in("took 3.0 s")
    assert "3" not in numbers_in("step s3 and py3k")


def test_overlap_is_symmetric():
    a, b = "return None for empty files", "Return None for empty files instead of {}"
    assert overlap(a, b) == overlap(b, a) > 0.5
    assert overlap("alpha beta", "gamma delta") == 0.0


@pytest.mark.parametrize("text,code", [
    ("", "llm-bad-json"),
    ("sure! here it is", "llm-bad-json"),
    ('{"facts_learned": [', "llm-bad-json"),
    ("[1, 2]", "llm-invalid-schema"),
    ('{"hello": "world"}', "llm-invalid-schema"),
])
def test_parse_answer_errors(text, code):
    with pytest.raises(AnswerError) as exc:
        parse_answer(text)
    assert exc.value.code == code


def test_parse_answer_tolerates_fences_and_chatter():
    assert parse_answer('Here you go:\n```json\n{"objective_state": "x"}\n```\nDone.') == {"objective_state": "x"}
    assert parse_answer('noise {"dead_ends": []} trailing') == {"dead_ends": []}
