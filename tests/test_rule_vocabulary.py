"""One vocabulary for the protect rules and the anchor's cues (decisions, failed approaches,
constraints): a cue names the protect rules whose words it shares, the loader adds those words to
the cue and checks the link, and what the protect rules keep is what the anchor extracts."""

from __future__ import annotations

import shutil

import pytest

from compactor.anchor import build_anchor
from compactor.anchor import cues as C
from compactor.engine import load_rules
from compactor.engine.loader import builtin_rules_dir, load_uncached
from compactor.errors import RuleError
from compactor.models import Role, Segment, SegmentKind
from compactor.pipeline import Compactor

SHARED = {"cue.decision": ("decision", ["decision.en", "decision.zh"]),
          "cue.failed-approach": ("failed-approach", ["failed-approach.en", "failed-approach.zh"]),
          "cue.constraint": ("constraint", ["constraint.en", "constraint.zh"])}


@pytest.mark.parametrize("cue_id", sorted(SHARED))
def test_a_cue_is_gated_by_its_protect_rules_words(cue_id):
    rules = load_rules()
    cue = rules.by_id[cue_id]
    family, vocab = SHARED[cue_id]
    assert cue.vocabulary == vocab and cue.family == family
    words = {w.lower() for v in vocab for w in rules.by_id[v].literal.words}
    assert words <= set(cue.prefilter)  # every protect word opens the cue
    # the cue file lists none of them itself: a word lives in one place
    import tomllib

    own = tomllib.loads((builtin_rules_dir() / "cue" / f"{cue_id}.toml").read_text(encoding="utf-8"))["prefilter"]
    assert not words & {w.lower() for w in own}
    # and the anchor's cue is the linked rule
    key = {"cue.decision": "decision", "cue.failed-approach": "dead_end", "cue.constraint": "constraint"}[cue_id]
    assert words <= set(C.CUES[key].triggers)


def _copy_rules(tmp_path):
    dst = tmp_path / "rules"
    shutil.copytree(builtin_rules_dir(), dst)
    return dst


@pytest.mark.parametrize("edit,message", [
    (lambda t: t.replace('vocabulary = ["decision.en", "decision.zh"]', 'vocabulary = ["decision.fr"]'),
     "field vocabulary: no rule 'decision.fr'"),
    (lambda t: t.replace('vocabulary = ["decision.en", "decision.zh"]', 'vocabulary = ["constraint.en"]'),
     "'constraint.en' is of family 'constraint'"),
    (lambda t: t.replace('vocabulary = ["decision.en", "decision.zh"]', 'vocabulary = ["trace.python"]'),
     "'trace.python' is not a protect literal rule"),
    (lambda t: t.replace('prefilter = ["decid",', 'prefilter = ["chose", "decid",'),
     "field prefilter: 'chose' is already a word of 'decision.en'"),
    (lambda t: t.replace("prefilter_ignore_case = true", "prefilter_ignore_case = false"),
     "needs prefilter_ignore_case = true"),
])
def test_a_broken_vocabulary_link_names_file_and_field(tmp_path, edit, message):
    rules = _copy_rules(tmp_path)
    f = rules / "cue" / "cue.decision.toml"
    f.write_text(edit(f.read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(RuleError) as exc:
        load_uncached((str(rules),), False)
    assert any(message in p and "cue.decision.toml" in p for p in exc.value.problems), exc.value.problems


def test_vocabulary_only_on_cue_rules(tmp_path):
    rules = _copy_rules(tmp_path)
    f = rules / "protect" / "decision.en.toml"
    f.write_text(f.read_text(encoding="utf-8").replace('priority = 60', 'priority = 60\nvocabulary = ["decision.zh"]'),
                 encoding="utf-8")
    with pytest.raises(RuleError) as exc:
        load_uncached((str(rules),), False)
    assert any("decision.en.toml" in p and "vocabulary is only for stage 'cue'" in p for p in exc.value.problems)


def test_editing_a_protect_word_list_reaches_the_cue_through_the_catalog(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTOR_CACHE", str(tmp_path / "cache"))
    rules = _copy_rules(tmp_path)
    first = load_uncached((str(rules),), False, catalog=True)
    assert "plumped for" not in first.by_id["cue.decision"].prefilter
    again = load_uncached((str(rules),), False, catalog=True)  # read from the catalog: linked the same
    assert again.by_id["cue.decision"].prefilter == first.by_id["cue.decision"].prefilter
    f = rules / "protect" / "decision.en.toml"
    f.write_text(f.read_text(encoding="utf-8").replace('words = [', 'words = [\n  "plumped for",'), encoding="utf-8")
    edited = load_uncached((str(rules),), False, catalog=True)
    assert "plumped for" in edited.by_id["cue.decision"].prefilter
    assert len(list((tmp_path / "cache" / "rules").glob("*.catalog"))) == 2  # a new key, a new catalog


# what the protect rules keep as a decision / failed approach / constraint, the anchor extracts
_COMP = Compactor()
_CASES = [(rid, s) for rid in ("decision.en", "decision.zh", "failed-approach.en", "failed-approach.zh",
                               "constraint.en", "constraint.zh")
          for s in load_rules().by_id[rid].examples.match]


@pytest.mark.parametrize("rid,sentence", _CASES)
def test_protected_sentences_are_anchor_items(rid, sentence):
    family = load_rules().by_id[rid].family
    role = Role.user if family == "constraint" else Role.assistant
    segs = [Segment(id="m0", index=0, step=1, step_id="s1", role=Role.user, kind=SegmentKind.message,
                    text="Please fix the export handler."),
            Segment(id="m1", index=1, step=2, step_id="s2", role=role, kind=SegmentKind.message, text=sentence)]
    spans = [sp.model_copy(update={"segment_id": s.id, "step_id": s.step_id}) for s in segs
             for sp in _COMP.scan(s.text, role=s.role.value)]
    a = build_anchor(segs, spans)
    if family == "decision":
        got = [d.decision + " " + d.reason for d in a.decisions_made]
    elif family == "failed-approach":
        got = [x.approach + " " + x.why for x in a.dead_ends]
    else:
        got = [c.text for c in a.user_constraints]
    assert got, (rid, sentence)
