"""Gated branches (engine/branches.py) match exactly the lines the rule's whole pattern matches.

A line-scope regex rule with many candidate lines runs as branches, each searched only on lines
that hold one of its literals. The property: for every line, "some gated branch matches" equals
"the whole pattern matches" — on every line of the corpus, on the rules' own examples, and on
generated lines built from the branches' literals (in other cases, next to non-ASCII letters that
case-fold onto ASCII ones, inside words).
"""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, strategies as st

from compactor.engine import load_rules
from compactor.engine.branches import required, split_any
from compactor.engine.matchers import SPLIT_MIN, RegexRule, TextView, _search_line, compile_rule, find_all
from compactor.normalize import normalize
from conftest import corpus_files

RULES = [cr for cr in (compile_rule(r) for r in load_rules().stage("protect")) if isinstance(cr, RegexRule)]
SPLIT = [cr for cr in RULES if cr.spec.scope == "line" and cr.branches is not None]
GATES = sorted({lit for cr in SPLIT for _p, _s, cs, ci, _g in cr.branches for lit in cs + ci})


def _whole(cr: RegexRule, view: TextView) -> list[int]:
    return [i for i in range(len(view.lines)) if _search_line(cr.pat, view.body(i), 10.0) is not None]


def _split(cr: RegexRule, view: TextView) -> list[int]:
    import time

    return [ls for _a, _b, ls, _le, _e in cr._find_split(view, list(range(len(view.lines))), 10.0, time.process_time())]


def test_the_costly_rules_are_split():
    # the alternations that dominated detection on CI logs
    ids = {cr.id for cr in SPLIT}
    assert {"test-failure.summary", "error.failure-phrase", "error.exception-line", "error.crash",
            "error.keyword"} <= ids
    tf = next(cr for cr in SPLIT if cr.id == "test-failure.summary")
    gated = [b for b in tf.branches if b[4]]
    assert len(gated) >= 20
    # a pattern whose branches mostly need no literal is left whole
    assert next(cr for cr in RULES if cr.id == "number.tool-parameter").branches is None


def test_split_refuses_what_it_cannot_read():
    assert split_any(r"(a)|\1", 0) is None  # backreference
    assert split_any(r"a|(?i)b", 0) is None  # a global flag later in the pattern
    assert split_any(r"[[:alpha:]]|x", 0) is None  # nested set
    assert split_any(r"abc", 0) is None  # nothing to split
    assert split_any(r"a(?:b|c)*d", 0) is None  # a quantified group is not spread out


def test_required_literals_are_necessary():
    from re import _parser as sre

    def req(p, flags=0):
        t = sre.parse(p, flags)
        return required(t, bool(t.state.flags & re.IGNORECASE))

    assert req(r"\bTests run: \d+") == [("Tests run: ", False)]
    assert sorted(req(r"<<< (?:FAILURE|ERROR)!")) == [("ERROR", False), ("FAILURE", False)]
    assert req(r"(?i:\berror\b):") == [("error", True)]
    assert req(r"x?y*\d+") is None  # nothing is necessary
    assert req(r"(?:ab)?cd") == [("cd", False)]


@pytest.mark.parametrize("cr", SPLIT, ids=lambda cr: cr.id)
def test_examples_match_the_same_lines(cr):
    rule = cr.rule
    lines = list(rule.examples.match) + list(rule.examples.no_match)
    view = TextView("\n".join(line.replace("\n", " ") for line in lines))
    assert _split(cr, view) == _whole(cr, view)


def test_corpus_lines_match_the_same(corpus):
    files = corpus_files(corpus)
    assert files
    for f in files:
        view = TextView(normalize(f.read_text(encoding="utf-8", errors="replace")))
        for cr in SPLIT:
            assert _split(cr, view) == _whole(cr, view), (cr.id, f.name)


_piece = st.one_of(
    st.sampled_from(GATES),
    st.sampled_from(GATES).map(str.upper),
    st.sampled_from(GATES).map(str.lower),
    st.sampled_from(GATES).map(lambda s: s.replace("k", "\u212a").replace("s", "\u017f")),  # fold onto ASCII
    st.text(alphabet="abcEFKXYZ019 .:/_=-\t()[]!*<>#éİßΣ中✕×", max_size=10),
    st.sampled_from(["2022-05-30T09:10:31.1584995Z ", "[ERROR] ", "  ", "FAILED ", "Error: ", "java.lang.",
                     "Exception", " at ", "make: *** ", "Tests run: 3, Failures: 1", "--timeout=30 "]),
)


@given(st.lists(st.lists(_piece, max_size=8).map("".join), min_size=1, max_size=12))
def test_generated_lines_match_the_same(lines):
    view = TextView("\n".join(lines))
    for cr in SPLIT:
        assert _split(cr, view) == _whole(cr, view), cr.id


def test_detection_is_unchanged_by_the_split(monkeypatch):
    # whole detection with and without branches, on a text long enough to take the split path
    from compactor.engine import matchers

    text = "\n".join(f"[ERROR] Tests run: {i}, Failures: {i % 2}, Errors: 0 in Foo{i}Exception: bad" if i % 7 else
                     f"2022-05-30T09:10:31.1584995Z Segmentation fault (core dumped) step {i} FAILED" for i in range(4 * SPLIT_MIN))
    split = sorted((cr.id, a, b) for cr, a, b, *_ in find_all(TextView(text), RULES, role="tool")[0])
    monkeypatch.setattr(matchers, "SPLIT_MIN", 10**9)
    whole = sorted((cr.id, a, b) for cr, a, b, *_ in find_all(TextView(text), RULES, role="tool")[0])
    assert split == whole and split


# ---- rule gates: a cheap necessary condition written in the rule ------------------------------------

GATED = [cr for cr in RULES if cr.spec.gate]


def test_some_rule_is_gated():
    assert any(cr.id == "number.tool-parameter" for cr in GATED)


def test_a_gate_given_as_a_list_passes_a_line_one_of_its_patterns_matches():
    from compactor.engine.schema import RegexSpec

    spec = RegexSpec(pattern=r"^\s*\w+Error\b|Error: \d+", gate=[r"Error: \d", r"^\s*\w*?Error\b"])
    cr = RegexRule(RULES[0].rule.model_copy(update={"regex_": spec}))
    assert len(cr.gate_parts) == 2
    for line, passes in [("x Error: 5", True), ("  ValueError", True), ("ok ValueError", False), ("", False)]:
        assert (_search_line(cr.gate, line, 10.0) is not None) is passes, line
    # the lines found are those of the pattern alone, through the split path (the gate first,
    # each of its patterns from C): some pass the first pattern, some only the second
    lines = [("  KeyError" if i % 2 else f"{i} Error: {i}") if i % 3 else f"step {i}" for i in range(3 * SPLIT_MIN)]
    view = TextView("\n".join(lines))
    expected = [i for i, line in enumerate(lines) if cr.pat.search(line)]
    got = cr._find_split(view, list(range(len(lines))), 10.0, time.process_time(), [[cr.pat, spec.pattern, (), (), False]])
    assert [ls for _a, _b, ls, _le, _e in got] == expected
    for bad in ([], ["("], [r"ok", 5]):
        with pytest.raises(ValueError):
            RegexSpec(pattern="x", gate=bad)


def _gate_misses(cr: RegexRule, lines) -> list[str]:
    return [line for line in lines
            if _search_line(cr.pat, line, 10.0) is not None and _search_line(cr.gate, line, 10.0) is None]


@pytest.mark.parametrize("cr", GATED, ids=lambda cr: cr.id)
def test_gate_holds_on_examples(cr):
    lines = [x for t in list(cr.rule.examples.match) + list(cr.rule.examples.no_match) for x in t.split("\n")]
    assert any(_search_line(cr.pat, x, 10.0) for x in lines)
    assert _gate_misses(cr, lines) == []


def test_gate_holds_on_the_corpus(corpus):
    lines = []
    for f in corpus_files(corpus):
        view = TextView(normalize(f.read_text(encoding="utf-8", errors="replace")))
        lines.extend(view.body(i) for i in range(len(view.lines)))
    for cr in GATED:
        assert _gate_misses(cr, lines) == [], cr.id


_kv = st.tuples(st.sampled_from(["error ", "Exception: ", "failed ", "timed out ", "", "refused "]),
                st.sampled_from(["pool_size", "--workers", "'timeout'", "maxRetries", "limit", "a.b-c", "x", "Size",
                                 "max_open", "maxconns", "RETRIES", "\"limits\"", "fooBar", "x.y_z", "Tests run"]),
                st.sampled_from(["=", " = ", ": ", ":", " ", "==", "=\"", "= '", "=-", "\t"]),
                st.sampled_from(["20", "-3", "1.5", "2e3", "x", "", "30s", "512Mi"]),
                st.text(alphabet="ab :=-_'\"019", max_size=6)).map("".join)


@given(st.lists(_kv, min_size=1, max_size=4).map(" ".join))
def test_gate_holds_on_generated_lines(line):
    for cr in GATED:
        assert _gate_misses(cr, [line]) == [], cr.id



_exc = st.tuples(st.sampled_from(["", "  ", "\t", "[ERROR] ", "at ", "(", "Caused by: ", "msg (", "Uncaught ", "x "]),
                 st.sampled_from(["java.lang.IllegalState", "Pool", "app.pool.Pool", "x", "Type", "Pool::", "$a.B", ""]),
                 st.sampled_from(["Error", "Exception", "Exhausted", "Timeout", "Failure", "Fault", "Failed", "Denied",
                                  "Refused", "Invalid", "Interrupt", "Exit", "Aborted", "Errors", "error", "exception"]),
                 st.sampled_from([":", ": msg", "", " ", ")", ").", ".x", " after 0:00:30", "  ", ": ", "\tx"]),
                 st.text(alphabet="aE :()._$\t", max_size=5)).map("".join)


@given(st.lists(_exc, min_size=1, max_size=3).map(" ".join))
def test_gate_holds_on_generated_exception_lines(line):
    for cr in GATED:
        assert _gate_misses(cr, [line]) == [], cr.id



_REF_PARTS = (["", " ", "(", "\tat a.B(", "src/", "./x/", "[ERROR] /b/", "node:", "bin/sync", "~", "a-"],
              ["Pool", "x", "Makefile", "Dockerfile", "CMakeLists.txt", "Gemfile", "internal/fs", "a.b", "", "9",
               "node:internal/x", "sync"],
              [".java", ".py", ".go", ".kt", ".c++", ".7z", ".a1b2c3d", ".abcdefgh", ".S", ".", "", ".tsx", ".h", ".cs",
               ".2", "+"],
              [":12", ":[23,29]", ":line 142", ": (12, 5)", ":7:in '", ":7:in `", ":", ":x", ":1:1", ":[x", ": (x", "::3",
               ":12:30", ":1.5"])


def test_gate_holds_on_every_combination_of_file_reference_parts():
    from itertools import product

    cr = next(cr for cr in GATED if cr.id == "fileref.path-line")
    lines = ["".join(p) for p in product(*_REF_PARTS)]
    assert sum(_search_line(cr.pat, x, 10.0) is not None for x in lines) > 1000
    assert _gate_misses(cr, lines) == []


@given(st.lists(st.tuples(*(st.sampled_from(p) for p in _REF_PARTS), st.text(alphabet="a.:1 (", max_size=4))
                .map("".join), min_size=1, max_size=3).map(" ".join))
def test_gate_holds_on_generated_file_references(line):
    cr = next(cr for cr in GATED if cr.id == "fileref.path-line")
    assert _gate_misses(cr, [line]) == []
