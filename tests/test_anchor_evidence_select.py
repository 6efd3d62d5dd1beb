"""Key evidence is chosen by the run model: the live failure, what backs a failed approach, each
error once, the newest passing check only; never the log of a suite that passed."""

from __future__ import annotations

import json

import pytest
from conftest import tune_run

from compactor import compact
from compactor.anchor import sections as S, to_markdown



def _call(cid: str, cmd: str, say: str = "Running it.") -> dict:
    return {"role": "assistant", "content": say, "tool_calls": [{"id": cid, "type": "function", "function": {
        "name": "bash", "arguments": json.dumps({"command": cmd})}}]}


def _out(cid: str, text: str) -> dict:
    return {"role": "tool", "tool_call_id": cid, "content": text}


# a suite that passes while its code logs ERROR lines on purpose, then a check that fails twice
# the same way (only the duration differs), then a passing check after the fix
RUN = [
    {"role": "user", "content": "Make the retry test in tests/test_retry.py pass."},
    _call("c1", "python -m pytest tests/test_logging.py -q"),
    _out("c1", "ERROR:app.client:connection refused (simulated)\nERROR:app.client:giving up after 3 tries\n"
               "........\n8 passed in 0.31s\n"),
    _call("c2", "python -m pytest tests/test_retry.py -q"),
    _out("c2", "F\n=================================== FAILURES ===================================\n"
               "FAILED tests/test_retry.py::test_backoff - AssertionError: assert 3 == 4\n1 failed in 0.41s\n"),
    _call("c3", "python -m pytest tests/test_retry.py -q"),
    _out("c3", "F\n=================================== FAILURES ===================================\n"
               "FAILED tests/test_retry.py::test_backoff - AssertionError: assert 3 == 4\n1 failed in 0.47s\n"),
]


def _evidence_texts(a) -> list[str]:
    return [e.text for e in a.key_evidence]


def test_a_passing_suites_error_log_is_no_evidence():
    a = compact(RUN, format="openai-chat").anchor
    texts = " | ".join(_evidence_texts(a))
    assert "connection refused" not in texts and "giving up" not in texts
    assert a.live_failure != "none"


def test_an_error_repeated_by_a_later_run_is_shown_once():
    a = compact(RUN, format="openai-chat").anchor
    backoff = [e for e in a.key_evidence if "test_backoff" in e.text]
    assert len(backoff) == 1, _evidence_texts(a)
    assert backoff[0].source_step == max((e.source_step for e in backoff), key=lambda s: int(s[1:]))
    # the duration summary of the earlier run is gone with it
    assert not any("0.41s" in t for t in _evidence_texts(a))


def test_only_the_newest_passing_check_is_evidence():
    fixed = [*RUN, _call("c4", "sed -i 's/3/4/' app/retry.py"), _out("c4", ""),
             _call("c5", "python -m pytest tests/test_retry.py -q"), _out("c5", "....\n4 passed in 0.22s\n"),
             _call("c6", "python -m pytest -q"), _out("c6", "............\n12 passed in 0.93s\n")]
    a = compact(fixed, format="openai-chat").anchor
    checks = [e for e in a.key_evidence if e.family == "verification"]
    assert [e.text for e in checks] == ["12 passed in 0.93s"], _evidence_texts(a)
    # the fixed failure is not live, and no line of it is shown as live
    assert a.live_failure == "none"
    assert not any(e.status == "live" and "test_backoff" in e.text for e in a.key_evidence)
    # the same input gives the same anchor, byte for byte
    assert to_markdown(a) == to_markdown(compact(fixed, format="openai-chat").anchor)


def test_selection_is_idempotent_on_its_own_output():
    a = compact(RUN, format="openai-chat").anchor
    assert S.evidence(list(a.key_evidence), a.cursor.run, failed=list(a.failed_attempts)) == a.key_evidence


def test_a_reproduction_fixed_later_is_shown_once_as_resolved():
    a = compact(tune_run("trajectories-extra/mini-swe-agent/astropy-13033.live-swe-agent.traj.json")).anchor
    hits = [e for e in a.key_evidence if "ValueError: TimeSeries object is invalid" in e.text]
    assert len(hits) == 1, [e.text[:80] for e in a.key_evidence]


def test_a_collection_error_fixed_by_an_install_is_one_key_line():
    a = compact(tune_run("trajectories-extra/mini-swe-agent/pytest-7521.gpt-5-mini.traj.json")).anchor
    s20 = [e for e in a.key_evidence if e.source_step == "s20"]
    assert len(s20) == 1 and s20[0].status == "resolved" and "\n" not in s20[0].text.strip(), s20
    assert "ModuleNotFoundError" in s20[0].text


def test_of_several_passing_checks_only_the_newest_is_evidence():
    a = compact(tune_run("trajectories-extra/claude-code-chat-json/dmux.skip-permissions.chat.json")).anchor
    raw = [e for e in (a.cursor.raw_evidence or a.key_evidence) if e.family == "verification"]
    assert len(raw) > 1  # (the run passed its checks several times)
    shown = [e for e in a.key_evidence if e.family == "verification"]
    assert shown == [raw[-1]]
