"""The trained prose classifier: shipped weights, determinism, easy sentences, bad weights."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from compactor.anchor import prose_model
from compactor.anchor.cues import LABELS, cue_label, label_sentence
from compactor.errors import RuleError

ROOT = Path(__file__).resolve().parent.parent

# sentences written for these tests (not taken from the label files), with the label a reader
# gives them in their role
EASY = [
    ("Do not change the public API of the parser.", "user", "constraint"),
    ("You must keep Python 3.8 support.", "user", "constraint"),
    ("不要引入新的第三方依赖。", "user", "constraint"),
    ("必须保持和旧版配置文件格式兼容。", "user", "constraint"),
    ("Should I update the changelog as well, or leave it to you?", "assistant", "question"),
    ("你希望我把这个改动也同步到测试环境吗？", "assistant", "question"),
    ("Next, I'll run the migration tests to confirm the fix.", "assistant", "plan"),
    ("Let me open the settings module to check the default.", "assistant", "plan"),
    ("接下来我会运行全部单元测试。", "assistant", "plan"),
    ("I decided to use a plain dict instead of a dataclass because it is faster to copy.", "assistant", "decision"),
    ("决定改用 SQLite，因为部署环境里没有 Redis。", "assistant", "decision"),
    ("Adding a retry loop did not help because the socket was already closed.", "assistant", "rejected"),
    ("加缓存那个办法没用，问题还是出现，已经放弃了。", "assistant", "rejected"),
    ("All 57 tests pass now.", "assistant", "status"),
    ("The build failed with a missing header error in io.c.", "assistant", "status"),
    ("修复已经完成，所有测试都通过了。", "assistant", "status"),
    ("Hmm, why would that be?", "assistant", "noise"),
    ("Thanks for your patience!", "assistant", "noise"),
]

ADVERSARIAL = ["", " ", "?", "？？？", "a" * 5000, "def f(x):\n    return x  # why?", "\x00\x01\x02", "🙂🙂🙂",
               "1234567890", "<function=bash>ls</function>", "Ça marche, très bien.", "é" * 700 + "?",
               "\n\n\n", "# TODO: fix this later", "Что случилось?", "不要" * 400]


@pytest.mark.parametrize("text,role,label", EASY)
def test_easy_sentences_are_labelled_right(text, role, label):
    assert label_sentence(text, {"role": role}) == label


def test_label_sentence_returns_only_the_seven_labels():
    assert set(LABELS) == {"decision", "rejected", "constraint", "question", "plan", "status", "noise"}
    assert prose_model.LABELS == LABELS
    seen = set()
    for text in ADVERSARIAL + [t for t, _, _ in EASY]:
        for role in ("user", "assistant", "system", None):
            for last in (True, False, None):
                ctx = {"role": role, "last": last} if role else {"last": last}
                got = label_sentence(text, ctx)
                assert got in LABELS, (text[:40], ctx, got)
                seen.add(got)
    assert label_sentence("") in LABELS and label_sentence("x", None) in LABELS
    assert seen == set(LABELS)


_PROBE = r"""
import json, sys
from compactor.anchor.prose_model import model, features
from compactor.anchor.cues import label_sentence
texts = json.loads(sys.stdin.read())
m = model()
out = []
for t in texts:
    for role in ("user", "assistant"):
        out.append([label_sentence(t, {"role": role}), repr(m.scores(t, role, True, "noise")), sorted(features(t, role))])
print(json.dumps(out, ensure_ascii=False, sort_keys=True))
"""


def test_byte_identical_across_runs_and_hash_seeds():
    texts = [t for t, _, _ in EASY] + ADVERSARIAL[:8]
    outs = set()
    for seed in ("0", "1", "4242", "random"):
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(ROOT))
        r = subprocess.run([sys.executable, "-c", _PROBE], input=json.dumps(texts), capture_output=True,
                           text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        outs.add(r.stdout)
    assert len(outs) == 1
    labels = [row[0] for row in json.loads(outs.pop())]
    assert set(labels) - {"noise"}  # the probe labelled something: not a vacuous comparison


def test_weights_ship_in_the_wheel_and_load_from_the_installed_package(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "compactor", src / "compactor", ignore=shutil.ignore_patterns("__pycache__"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q",
                        "-w", str(tmp_path / "dist")], capture_output=True, text=True, timeout=300)
    if r.returncode != 0 and "No module named pip" in r.stderr:
        pytest.skip("pip is not available to build a wheel")
    assert r.returncode == 0, r.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        assert "compactor/anchor/prose_weights.json" in z.namelist()
        z.extractall(site)
    probe = ("import compactor.anchor.prose_model as pm; m = pm.model(); "
             "print(pm.WEIGHTS_PATH); print(len(m.packed))")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(site)), cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    path, n = r.stdout.split()
    assert Path(path).resolve() == (site / "compactor" / "anchor" / "prose_weights.json").resolve()
    assert int(n) > 1000


def test_shipped_weights_are_small_and_tied_to_the_labels():
    size = os.path.getsize(prose_model.WEIGHTS_PATH)
    assert 0 < size <= 5_000_000
    m = prose_model.load()
    assert m.labels == LABELS
    rule = m.meta["combine"]
    assert set(rule["cue_labels"]) <= set(LABELS) and 0.0 <= rule["threshold"] < 1.0


def test_pack_refuses_weights_out_of_range():
    assert prose_model.pack([0] * 7) == 1 << prose_model._COUNT_SHIFT | sum(128 << (24 * k) for k in range(7))
    for row in ([1, 2], [0, 0, 0, 0, 0, 0, 128], [0, 0, 0, 0, 0, 0, -129], [0.5] * 7):
        with pytest.raises(ValueError):
            prose_model.pack(row)


def test_missing_weights_fail_with_a_clear_error(tmp_path):
    missing = tmp_path / "prose_weights.json"
    with pytest.raises(RuleError) as e:
        prose_model.load(str(missing))
    assert str(missing) in str(e.value) and "weights are missing" in str(e.value)


def _rows_without_count_bit(raw: str) -> str:
    data = json.loads(raw)
    w = data["weights"]
    w = "0" + w[1:]  # the first row loses its count bit
    data["weights"] = w
    data["sha1"] = prose_model._digest(data["features"], w)
    return json.dumps(data)


@pytest.mark.parametrize("mutate,words", [
    (lambda raw: raw[: len(raw) // 2], "cannot be read"),                       # truncated
    (lambda raw: "[1, 2, 3]", "not an object"),
    (lambda raw: raw.replace('"format":2', '"format":9', 1), "format 9"),
    (lambda raw: raw.replace('"noise"', '"chatter"', 1), "labels"),
    (lambda raw: raw.replace('"weights":"', '"weights":"00', 1), "rows of weights"),
    (lambda raw: raw.replace('"weights":"1', '"weights":"3', 1), "checksum mismatch"),
    (_rows_without_count_bit, "malformed rows"),
    (lambda raw: raw.replace('"bias":[', '"bias":[1.0,', 1), "bias"),
])
def test_corrupt_weights_fail_with_a_clear_error(tmp_path, mutate, words):
    raw = Path(prose_model.WEIGHTS_PATH).read_text(encoding="utf-8")
    bad = tmp_path / "prose_weights.json"
    bad.write_text(mutate(raw), encoding="utf-8")
    with pytest.raises(RuleError) as e:
        prose_model.load(str(bad))
    msg = str(e.value)
    assert str(bad) in msg and words in msg and "\n" not in msg


def test_the_shared_model_reports_a_missing_file(monkeypatch, tmp_path):
    monkeypatch.setattr(prose_model, "WEIGHTS_PATH", str(tmp_path / "gone.json"))
    monkeypatch.setattr(prose_model, "_MODEL", [])
    monkeypatch.setattr(prose_model.load, "__defaults__", (str(tmp_path / "gone.json"),))
    with pytest.raises(RuleError, match="gone.json: the prose classifier.s weights are missing"):
        label_sentence("Let me run the tests.", {"role": "assistant"})


def test_combination_rule_is_applied():
    """Where the rule gives the cues a label, the cue label stands whatever the model says."""
    m = prose_model.model()
    rule = m.meta["combine"]
    for text, role, _ in EASY:
        cue = cue_label(text, {"role": role})
        got = label_sentence(text, {"role": role})
        if cue in rule["cue_labels"]:
            assert got == cue
        else:
            label, p = m.predict(text, role, None, cue)
            assert got == (cue if p < rule["threshold"] else label)
