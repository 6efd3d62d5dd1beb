"""The Python API: compact(), the reusable Compactor, per-turn caching, __all__, corpus end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import compactor
from compactor import Compactor, compact

from conftest import CORPUS

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo" / "debug-session.openai.json"


def test_all_is_sorted_and_complete():
    names = [n for n in compactor.__all__ if n != "__version__"]
    assert names == sorted(names)
    for n in compactor.__all__:
        assert hasattr(compactor, n), n


def test_all_names_every_public_object_and_nothing_else():
    import types

    public = {n for n in dir(compactor) if not n.startswith("_")
              and not isinstance(getattr(compactor, n), types.ModuleType)
              and n not in ("TYPE_CHECKING", "annotations")}
    assert public == set(compactor.__all__) - {"__version__"}
    # one name, one meaning: the trigger decision is not the anchor's decision item
    assert "Decision" not in compactor.__all__
    assert compactor.TriggerDecision.__module__ == "compactor.tools.triggers"
    # every exception of the package lives in compactor.errors
    import compactor.errors as errors

    for n in compactor.__all__:
        obj = getattr(compactor, n)
        if isinstance(obj, type) and issubclass(obj, BaseException):
            assert obj.__module__ == "compactor.errors", n


def test_import_is_lazy():
    code = "import sys, compactor; print(sorted(m for m in sys.modules if m.startswith(('compactor', 'pydantic'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert eval(out) == ["compactor", "compactor.errors", "compactor.version"]


def test_compact_accepts_path_text_bytes_and_messages():
    msgs = json.loads(DEMO.read_text())
    a = compact(str(DEMO), keep_recent=1)
    b = compact(DEMO.read_bytes(), keep_recent=1)
    c = compact(msgs, keep_recent=1)
    d = compact(DEMO.read_text(), keep_recent=1)
    assert a.messages == b.messages == c.messages == d.messages
    assert a.format == "openai-chat"


def test_input_messages_are_not_mutated():
    msgs = json.loads(DEMO.read_text())
    snapshot = json.dumps(msgs)
    compact(msgs, keep_recent=0)
    assert json.dumps(msgs) == snapshot


def _count_detections(comp, monkeypatch) -> list:
    """The segment ids ``comp``'s detector is asked about from now on, in order."""
    calls: list = []
    real = comp.detector.detect_view

    def counting(view, **kw):
        calls.append(kw.get("segment_id"))
        return real(view, **kw)

    monkeypatch.setattr(comp.detector, "detect_view", counting)
    return calls


def test_growing_conversation_detects_each_segment_once(monkeypatch):
    """Compacting every turn, each segment is detected once, also when its output leaves the
    recent window and collapses (the detection memo's key does not include the collapse decision)."""
    msgs = json.loads(DEMO.read_text())
    comp = Compactor(keep_recent=1)
    calls = _count_detections(comp, monkeypatch)
    for i in range(2, len(msgs) + 1):
        comp.compact(msgs[:i])
    doc = compactor.load_document(msgs)
    detectable = [s.id for s in doc.segments if s.kind.value != "tool_call"]
    assert sorted(calls) == sorted(detectable)  # every segment exactly once
    collapsed = comp.compact(msgs)
    assert collapsed.report.placeholders  # outputs did collapse as they aged
    assert len(calls) == len(detectable)  # same conversation again: everything from the memo


def test_per_call_options_do_not_detect_again(monkeypatch):
    """Detection depends on no per-call option (the detector is the Compactor's): a session
    re-fitted under a new budget or level reads every segment's detection from the memo."""
    msgs = json.loads(DEMO.read_text())
    comp = Compactor(keep_recent=1)
    calls = _count_detections(comp, monkeypatch)
    session = compactor.Session(comp)
    session.append(msgs)
    first = session.compact()
    n = len(calls)
    assert n > 0
    for options in ({"budget": max(50, first.report.tokens_after // 2)}, {"level": 0}, {"keep_recent": 0},
                    {"lang": "zh"}):
        session.compact(**options)
    assert len(calls) == n


@pytest.mark.parametrize("option,value", [("rules", ("/nonexistent-rules",)), ("encoding", "o200k_base"),
                                          ("store", "/tmp/compactor-never-opened")])
def test_an_option_fixed_at_build_time_is_refused_per_call(option, value):
    """rules, encoding and store act when the Compactor is built: a call that names another
    value gets a clear error instead of being silently ignored."""
    comp = Compactor()
    msgs = [{"role": "user", "content": "hi"}]
    with pytest.raises(compactor.ConfigError, match=f"option {option} is set when the Compactor is built"):
        comp.compact(msgs, **{option: value})
    session = compactor.Session(comp)
    session.append(msgs)
    with pytest.raises(compactor.ConfigError, match=f"option {option}"):
        session.compact(**{option: value})
    assert comp.compact(msgs, **{option: getattr(comp.config, option)}).messages  # the same value is fine


def test_expand_returns_exact_original():
    comp = Compactor(keep_recent=0)
    res = comp.compact(str(DEMO))
    assert res.report.placeholders
    msgs = json.loads(DEMO.read_text())
    originals = [m["content"] for m in msgs if m["role"] == "tool"]
    for ph in res.report.placeholders:
        text = comp.expand(ph.id)
        assert any(text == o or text in o for o in originals)


def test_result_json_is_deterministic():
    a = json.dumps(Compactor(keep_recent=0).compact(str(DEMO)).to_json_dict(), sort_keys=True)
    b = json.dumps(Compactor(keep_recent=0).compact(str(DEMO)).to_json_dict(), sort_keys=True)
    assert a == b


def test_level_zero_changes_nothing():
    res = compact(str(DEMO), level=0)
    assert res.messages == json.loads(DEMO.read_text())
    assert res.report.level == 0


def test_bad_option_is_a_config_error():
    with pytest.raises(compactor.ConfigError, match="keep_recent"):
        Compactor(keep_recent=-1)


TRAJ_DIRS = ["swe-agent", "mini-swe-agent", "openhands-v0", "openhands-v1", "claude-code", "codex-rollout", "aider", "ci-logs"]


def _corpus_files():
    if not CORPUS.is_dir():
        return []
    out = []
    for d in TRAJ_DIRS:
        out += sorted(p for p in (CORPUS / d).glob("*") if p.is_file())
    out += sorted((CORPUS / "ci-breakages").glob("*/fail.log"))
    return out


@pytest.mark.corpus
@pytest.mark.parametrize("path", _corpus_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_corpus_file_compacts_end_to_end(path):
    comp = Compactor()
    res = comp.compact(str(path))
    rep = res.report
    assert rep.tokens_after <= rep.tokens_before
    # same layout out: re-reading the written output gives the same layout and the same message count
    from compactor.formats import get_format

    fmt = get_format(res.format)
    again = compactor.load_document(fmt.dumps(res.messages), format=res.format)
    assert len(again.segments) == rep.segments
    # every protected span is in the output verbatim
    out_text = fmt.dumps(res.messages)
    for sp in rep.protected:
        for line in sp.text.split("\n")[:3]:
            assert json.dumps(line, ensure_ascii=False)[1:-1] in out_text or line in out_text
    # placeholders expand
    for ph in rep.placeholders[:20]:
        assert comp.expand(ph.id)
