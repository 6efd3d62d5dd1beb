"""benchmarks/anchor_eval/probe.py on a small made-up fixture, plus the shipped gold and split."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "benchmarks" / "anchor_eval"
sys.path.insert(0, str(EVAL))

import probe  # noqa: E402


def _q(kind, q, a):
    return {"kind": kind, "q": q, "a": a}


def _gold(run, half, status, **kw):
    g = {
        "run": run, "layout": "fake", "half": half, "task": "t", "status": status,
        "status_evidence": "e", "live_failure": None, "resolved_errors": [], "changes": [],
        "failed_approaches": [], "constraints": [], "decisions": [], "open_questions": [],
        "next_step": None, "must_include": [], "must_not_include": [],
        "questions": [_q("task", "What is the task?", "A"), _q("state", "What state?", "B"),
                      _q("next", "What next?", "C")],
    }
    g.update(kw)
    return g


@pytest.fixture
def fx(tmp_path):
    gold = tmp_path / "gold"
    gold.mkdir()
    a = _gold("x/alpha.jsonl", "test", "stopped_limit",
              must_include=["src/app.py", "DO NOT modify the tests", "KeyError: 'port'"],
              must_not_include=["Running pip as the 'root' user"],
              constraints=["DO NOT modify the tests", "不要用 pandas"],
              live_failure={"line": "KeyError: 'port'", "location": "src/app.py:12"},
              resolved_errors=["ImportError: cannot import name 'x' (fixed by the second edit)"])
    b = _gold("x/beta.jsonl", "tune", "finished", must_include=["done.txt", "Exit 0"])
    (gold / "fake__alpha.jsonl.json").write_text(json.dumps(a), encoding="utf-8")
    (gold / "fake__beta.jsonl.json").write_text(json.dumps(b), encoding="utf-8")
    anchors = tmp_path / "anchors"
    anchors.mkdir()
    (anchors / "fake__alpha.jsonl.md").write_text(
        "Status: stopped-limit (step limit reached)\n"
        "## Live failure\n"
        "ImportError: cannot import name 'x'\n"
        "## Changes\n"
        "- `src/app.py` modified; KeyError: ‘port’ seen once\n"
        "## Constraints\n"
        "- do not modify   the tests\n"
        "- Running pip as the 'root' user\n", encoding="utf-8")
    (anchors / "fake__beta.jsonl.md").write_text("**Status:** working\nwrote done.txt\n", encoding="utf-8")
    return tmp_path


def run(*args):
    return subprocess.run([sys.executable, str(EVAL / "probe.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_recall_counts_on_fixture(fx):
    out = run("--gold", fx / "gold", "recall", "--half", "all", "--anchors", fx / "anchors", "--json")
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    rows = {r["name"]: r for r in res["runs"]}
    alpha, beta = rows["fake__alpha.jsonl"], rows["fake__beta.jsonl"]
    # 'DO NOT modify the tests' matches 'do not modify   the tests' (case, spaces); the curly
    # quotes of ‘port’ match the straight ones of the label
    assert (alpha["must_hit"], alpha["must"]) == (3, 3)
    assert alpha["violations"] == ["Running pip as the 'root' user"]
    assert alpha["status_named"] == "stopped_limit" and alpha["status_ok"]
    assert (alpha["constraints_hit"], alpha["constraints"]) == (1, 2)
    assert alpha["stale_as_live"] == ["ImportError: cannot import name 'x' (fixed by the second edit)"]
    assert (beta["must_hit"], beta["must"]) == (1, 2)
    assert beta["status_named"] == "working" and not beta["status_ok"]
    s = res["summary"]
    assert s["runs"] == 2 and s["must_include_recall"] == pytest.approx(4 / 5)
    assert s["must_not_include_violations"] == 1 and s["stale_errors_shown_live"] == 1
    assert s["status_match"] == pytest.approx(0.5) and s["constraint_recall"] == pytest.approx(0.5)


def test_recall_half_filter_and_text_report(fx):
    out = run("--gold", fx / "gold", "recall", "--half", "tune", "--anchors", fx / "anchors")
    assert out.returncode == 0, out.stderr
    assert "fake__beta.jsonl" in out.stdout and "fake__alpha" not in out.stdout
    assert "1 runs: must-include recall 0.50" in out.stdout


def test_live_section_stops_at_next_section_and_keeps_error_lines():
    text = "Status: working\nLive failure:\nTypeError: bad\n  at a.py:3\nNext step: fix a.py\n"
    assert probe.live_section(text) == "Live failure:\nTypeError: bad\n  at a.py:3"
    assert probe.live_section("Status: finished\nChanges: none\n") == ""


def test_status_word_must_be_unique_on_first_line():
    assert probe.status_named("Status: waiting-user (asked for the path)") == "waiting_user"
    assert probe.status_named("finished, or still working?") is None
    assert probe.status_named("Status: unfinished") is None


def test_pack_has_questions_without_answers_and_is_deterministic(fx):
    o1, o2 = fx / "b1.jsonl", fx / "b2.jsonl"
    for o in (o1, o2):
        out = run("--gold", fx / "gold", "pack", "--half", "test", "--anchors", fx / "anchors", "--out", o)
        assert out.returncode == 0, out.stderr
    assert o1.read_bytes() == o2.read_bytes()
    rows = [json.loads(line) for line in o1.read_text(encoding="utf-8").splitlines()]
    assert [r["name"] for r in rows] == ["fake__alpha.jsonl"]
    r = rows[0]
    assert [q["index"] for q in r["questions"]] == [0, 1, 2]
    assert all("a" not in q for q in r["questions"])
    assert "What next?" in r["prompt"] and "ImportError" in r["prompt"]
    assert "\nA\n" not in r["prompt"] and "\nC\n" not in r["prompt"]


def test_score_totals_per_half_and_kind(fx):
    j = fx / "j.jsonl"
    j.write_text("\n".join(json.dumps(x) for x in [
        {"run": "fake__alpha.jsonl", "question": 0, "verdict": "yes"},
        {"run": "x/alpha.jsonl", "question": 1, "verdict": "partly"},
        {"run": "x/alpha.jsonl", "question": 2, "verdict": "no"},
        {"run": "x/beta.jsonl", "question": 0, "verdict": "yes"},
    ]) + "\n", encoding="utf-8")
    out = run("--gold", fx / "gold", "score", "--judgments", j)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    test_row = next(ln for ln in lines if ln.startswith("test "))
    tune_row = next(ln for ln in lines if ln.startswith("tune "))
    assert test_row.split()[:7] == ["test", "1", "3", "3", "1", "1", "1"]
    assert tune_row.split()[:7] == ["tune", "1", "3", "1", "1", "0", "0"]
    assert "(2 questions of judged runs have no verdict)" in out.stdout
    assert any(ln.split()[:3] == ["test", "next", "0"] for ln in lines)


@pytest.mark.parametrize("bad, msg", [
    ({"run": "x/alpha.jsonl", "question": 0, "verdict": "maybe"}, "verdict must be yes, partly or no"),
    ({"run": "x/nope.jsonl", "question": 0, "verdict": "yes"}, "unknown run"),
    ({"run": "x/alpha.jsonl", "question": 9, "verdict": "yes"}, "out of range"),
])
def test_score_bad_judgment_names_file_and_line(fx, bad, msg):
    j = fx / "j.jsonl"
    j.write_text(json.dumps({"run": "x/alpha.jsonl", "question": 0, "verdict": "yes"}) + "\n"
                 + json.dumps(bad) + "\n", encoding="utf-8")
    out = run("--gold", fx / "gold", "score", "--judgments", j)
    assert out.returncode == 2
    assert f"{j}:2" in out.stderr and msg in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_missing_anchor_is_bad_input(fx):
    (fx / "anchors" / "fake__beta.jsonl.md").unlink()
    out = run("--gold", fx / "gold", "recall", "--half", "all", "--anchors", fx / "anchors")
    assert out.returncode == 2 and "fake__beta.jsonl.md" in out.stderr and "Traceback" not in out.stderr


def test_shipped_gold_is_valid_and_matches_the_split():
    split = json.loads((EVAL / "split.json").read_text(encoding="utf-8"))["runs"]
    gold = probe.load_gold(EVAL / "gold", "all")
    assert len(gold) >= 12
    for name, g in gold:
        assert split[g["run"]]["half"] == g["half"], name
        assert name == f"{g['layout']}__{Path(g['run']).name}"
        assert 5 <= len(g["must_include"]) <= 12, name
        assert 6 <= len(g["questions"]) <= 8, name
        assert {q["kind"] for q in g["questions"]} >= set(probe.KINDS), name
    halves = {g["half"] for _, g in gold}
    assert halves == {"tune", "test"} or len(gold) < 20


def test_split_is_reproducible_and_stratified():
    shared = ROOT.parent / "shared"
    if not (shared / "trajectories-extra").is_dir() or not (shared / "corpus").is_dir():
        pytest.skip("shared data not available")
    import make_split
    fresh = make_split.split(make_split.eligible_runs(shared))
    shipped = json.loads((EVAL / "split.json").read_text(encoding="utf-8"))
    assert fresh == shipped
    by_layout = {}
    for v in shipped["runs"].values():
        by_layout.setdefault(v["layout"], set()).add(v["half"])
    counts = {}
    for v in shipped["runs"].values():
        counts[v["layout"]] = counts.get(v["layout"], 0) + 1
    for layout, halves in by_layout.items():
        if counts[layout] >= 2:
            assert halves == {"tune", "test"}, layout
    assert not any("aider-examples." in p for p in shipped["runs"])


def _gold_runs():
    return probe.load_gold(EVAL / "gold", "all")


def test_shipped_gold_verbatim_strings_occur_in_their_runs():
    """must_include strings and constraints are labelled verbatim: each occurs in the raw run
    (normalised; JSON string escapes undone), so an anchor that keeps them can match them."""
    shared = ROOT.parent / "shared"
    if not shared.is_dir():
        pytest.skip("shared data not available")
    missing = []
    for name, g in _gold_runs():
        raw = (shared / g["run"]).read_text(encoding="utf-8", errors="replace")
        texts = (probe.normalise(raw),
                 probe.normalise(raw.replace('\\"', '"').replace("\\n", " ").replace("\\\\", "\\")
                                 .replace("\\u2014", "\u2014")))
        for s in [x for x in g["must_include"] if x not in probe.STATUSES] + g["constraints"]:
            if not any(probe.normalise(s) in t for t in texts):
                missing.append((name, s))
    assert missing == []


def test_gold_written_as_an_anchor_scores_full_marks():
    """An anchor made of a gold file's own status, must-include strings and constraints gets
    recall 1, status match and no violations: the gold does not contradict itself."""
    for name, g in _gold_runs():
        anchor = "\n".join([f"Status: {g['status']}", "## Constraints", *g["constraints"],
                            "## Notes", *g["must_include"]])
        r = probe.recall_one(g, anchor)
        assert r["must_hit"] == r["must"], name
        assert r["violations"] == [], name
        assert r["status_ok"], name
        assert r["constraints_hit"] == r["constraints"], name
        assert r["stale_as_live"] == [], name
