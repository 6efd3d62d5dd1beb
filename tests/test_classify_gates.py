"""Classifier patterns are searched only where one of their necessary literals occurs.

A classify rule's command patterns run over the call's command line (kilobytes with a
here-document), its content and capture patterns over a whole tool output; most texts lack
the literals a pattern needs (``[File: ``, `` lines total)]``, ``Here's the result of running``),
and a text without them cannot match. The property checked here: a gate never refuses a text the
pattern matches (on every tool output and log of the corpus, the rules' own examples and
generated texts with the literals in other cases and beside non-ASCII letters that case-fold onto
ASCII ones), and the classification of every corpus output is the same as without gates.
"""

from __future__ import annotations

import regex
from hypothesis import given, strategies as st

from compactor.engine import Classifier, load_rules
from compactor.engine.branches import gate_of, may_match, required_cached
from compactor.engine.classify import COMMAND_CHARS, HEAD_LINES, TAIL_LINES, _window
from compactor.engine.matchers import _flags
from compactor.models import SegmentKind
from conftest import corpus_files

RULES = load_rules().stage("classify")


def _patterns() -> list[tuple[str, str, int]]:
    out = []
    for r in RULES:
        for p in r.classify.commands:
            out.append((r.id, p, 0))
        for p in r.classify.content:
            out.append((r.id, p, regex.MULTILINE))
        for c in r.classify.captures:
            out.append((r.id, c.pattern, _flags(c.flags) | regex.MULTILINE))
    return out


PATTERNS = _patterns()
GATED = [(rid, p, f, gate_of(p, f)) for rid, p, f in PATTERNS if gate_of(p, f) is not None]


def _examples() -> list[tuple[str, str | None]]:
    out = []
    for r in RULES:
        for text in [*r.examples.match, *r.examples.no_match]:
            command = None
            if text.startswith("$ "):
                first, _, text = text.partition("\n")
                command = first[2:]
            out.append((text, command))
    return out


def _corpus_outputs(corpus) -> list[tuple[str, str | None, int | None]]:
    from compactor.formats import load_document

    out = []
    for path in corpus_files(corpus):
        if not path.is_file() or path.stat().st_size > 4_000_000 or path.name in ("README.md", "score.py"):
            continue
        if path.suffix in (".json", ".jsonl", ".md") and "anchor-gold" not in path.parts:
            try:
                doc = load_document(path)
            except Exception:  # noqa: BLE001 - a file no reader takes is read as a log below
                doc = None
            if doc is not None and doc.format != "text":
                out.extend((s.text, s.command, s.exit_code) for s in doc.segments
                           if s.kind == SegmentKind.tool_result and s.text)
                continue
        try:
            out.append((path.read_text(encoding="utf-8"), None, None))
        except UnicodeDecodeError:
            continue
    return out


def test_gates_exist_where_they_pay():
    ids = {(rid, p) for rid, p, _f, _g in GATED}
    view = next(r for r in RULES if r.id == "file.view")
    # the whole-text scan for the '[File: ... (N lines total)]' header needs its literals
    assert ("file.view", view.classify.content[1]) in ids
    assert ("file.view", view.classify.content[0]) in ids
    # a pattern with no literal of two characters or more is never gated
    assert gate_of(r"^ *\d+(?:\t|→).*\n *\d+(?:\t|→)", regex.MULTILINE) is None
    assert required_cached(r"(a)\1", 0) is None  # a backreference: not read
    assert required_cached(r"(?|(a)|(b))x", 0) is None  # branch reset: the standard parser refuses it
    # a case-insensitive literal outside ASCII could match ASCII text: no gate
    assert gate_of("(?i)\u212aelvin", 0) is None
    # the command patterns are gated too: a grep rule is not searched over a line without 'grep'
    grep = next(r for r in RULES if r.id == "grep.search")
    assert ("grep.search", grep.classify.commands[0]) in ids


def test_may_match():
    gate = gate_of(r"foo\d|(?i:bar)", 0)
    assert gate == (("foo",), ("bar",))
    assert may_match(gate, "xx foo", [])
    assert may_match(gate, "xx BaR", [])
    assert not may_match(gate, "xx fo0 ba", [])
    assert may_match(gate, "\u017fomething", [])  # non-ASCII text: case-insensitive literals promise nothing
    assert not may_match(gate_of("Here's the result", 0), "here's the result", [])


def _check_text(text: str) -> None:
    low: list[str] = []
    for rid, p, f, gate in GATED:
        pat = regex.compile(p, f)
        if pat.search(text, timeout=5.0) is not None:
            assert may_match(gate, text, low), (rid, p, text[:200])


def test_gates_never_refuse_a_match_on_the_examples():
    for text, command in _examples():
        _check_text(text)
        if command:
            _check_text(command)


def test_gates_never_refuse_a_match_on_the_corpus(corpus):
    outputs = _corpus_outputs(corpus)
    assert len(outputs) > 100
    matched = 0
    for text, command, _e in outputs:
        _check_text(text)
        if command:
            _check_text(command[:4096])
        lines = text.split("\n")
        if len(lines) > HEAD_LINES + TAIL_LINES:  # the window content patterns see
            _check_text("\n".join(lines[:HEAD_LINES]) + "\n" + "\n".join(lines[-TAIL_LINES:]))
    for rid, p, f, gate in GATED:
        pat = regex.compile(p, f)
        matched += any(pat.search(t) for t, _c, _e in outputs)
    assert matched >= 5  # the gated patterns do match real outputs (the property is not vacuous)


def test_classification_unchanged_on_the_corpus(corpus):
    gated = Classifier(RULES)
    plain = Classifier(RULES)
    for c in plain.compiled:  # every pattern searched and every capture match read, as before the gates
        c.__dict__["commands"] = [(pat, None) for pat, _g in c.commands]
        c.__dict__["content"] = [(pat, None) for pat, _g in c.content]
        c.__dict__["captures"] = [(spec, pat, None, False) for spec, pat, _g, _last in c.captures]  # every match read
    outputs = _corpus_outputs(corpus)
    examples = [(t, c, None) for t, c in _examples()]
    classified = 0
    for text, command, exit_code in outputs + examples:
        a = gated.classify(text, command=command, exit_code=exit_code)
        b = plain.classify(text, command=command, exit_code=exit_code)
        assert a == b, (command, text[:200])
        classified += a is not None
    assert classified > 50


_LITS = sorted({lit for _r, _p, _f, g in GATED for lit in (*g[0], *g[1])})


@given(st.lists(st.one_of(st.sampled_from(_LITS), st.sampled_from(["\n", " ", "\u017f", "\u212a", "1", ":", "-"]),
                          st.text(max_size=6)), max_size=12),
       st.sampled_from(["keep", "upper", "lower", "swap"]))
def test_gates_never_refuse_a_match_generated(parts, case):
    text = "".join(parts)
    text = {"keep": text, "upper": text.upper(), "lower": text.lower(), "swap": text.swapcase()}[case]
    _check_text(text)


# ---- the hyperscan prefilter: a rule none of whose patterns can match is not asked ---------------

def _prefilters():
    import pytest

    from compactor.engine.classify import _build_prefilter

    c = Classifier(RULES)
    pre = _build_prefilter(c.compiled)
    if pre is None:
        pytest.skip("hyperscan is not the literal engine here")
    commands = [(p, 0) for r in c.compiled for p in r.spec.commands]
    contents = [(p, regex.MULTILINE) for r in c.compiled for p in r.spec.content]
    return pre, commands, contents


def _check_prefilter(pre, commands, contents, text: str, command: str | None) -> None:
    """Every command pattern matching the command line, and every content pattern matching the
    text, is among those the prefilter says may match."""
    if command:
        line = command[:COMMAND_CHARS]
        may = pre[0].may(line)
        for k, (p, f) in enumerate(commands):
            if regex.compile(p, f).search(line, timeout=5.0) is not None:
                assert may is None or k in may, (p, line[:200])
    may = pre[1].may(text)
    for k, (p, f) in enumerate(contents):
        if regex.compile(p, f).search(text, timeout=5.0) is not None:
            assert may is None or k in may, (p, text[:200])


def test_the_prefilter_never_refuses_a_match(corpus):
    pre, commands, contents = _prefilters()
    outputs = _corpus_outputs(corpus) + [(t, c, None) for t, c in _examples()]
    for text, command, _e in outputs:
        window = _window(text, text.split("\n"))
        _check_prefilter(pre, commands, contents, window, command)
    # not vacuous: most patterns have an approximation, and most outputs rule most of them out
    assert len(pre[1].ids) >= 0.8 * len(contents) and len(pre[0].ids) >= 0.8 * len(commands)
    ruled_out = sum(len(contents) - len(pre[1].may(t) or contents) for t, _c, _e in outputs if t.isascii())
    assert ruled_out > 0.5 * len(contents) * sum(t.isascii() for t, _c, _e in outputs)


@given(st.lists(st.one_of(st.sampled_from(_LITS), st.sampled_from(["\n", " ", "\u017f", "\u212a", "1", ":", "-",
                                                                    "$ ", "&& ", "| ", "\t", "="]),
                          st.text(max_size=6)), max_size=16),
       st.sampled_from(["keep", "upper", "lower", "swap"]))
def test_the_prefilter_never_refuses_a_match_generated(parts, case):
    if not _PRE:
        _PRE.append(_prefilters())  # (skips when there is no hyperscan)
    pre, commands, contents = _PRE[0]
    text = "".join(parts)
    text = {"keep": text, "upper": text.upper(), "lower": text.lower(), "swap": text.swapcase()}[case]
    _check_prefilter(pre, commands, contents, text, text)


_PRE: list = []  # the prefilters, made by the first generated example

_WIDE = ["\u2713", "\u2717", "\u00e9", "\u00a0", "\u2019", "\u4e2d\u6587", "\U0001f600", "\u0663", "\u2003",
         "\u00df", "\u0130", "\u212a", "\u017f", "\u0131"]


@given(st.integers(0, 10_000), st.lists(st.tuples(st.sampled_from(_WIDE), st.floats(0, 1)), min_size=1,
                                                 max_size=4),
       st.sampled_from(["insert", "replace"]))
def test_the_prefilter_never_refuses_a_match_in_text_with_wide_characters(which, wide, how):
    """Rule examples (which match their patterns) with non-ASCII characters put in or put in
    place of a character: such a text is scanned as UTF-8 by the patterns' UTF-8 approximations
    (or, holding a character that folds to an ASCII letter, every pattern may match); a pattern
    that matches is never ruled out."""
    if not _PRE:
        _PRE.append(_prefilters())
    pre, commands, contents = _PRE[0]
    if not _EXAMPLES:
        _EXAMPLES.extend(_examples())
    text, command = _EXAMPLES[which % len(_EXAMPLES)]
    for ch, at in wide:
        k = int(at * len(text))
        text = text[:k] + ch + text[k + (how == "replace"):]
    _check_prefilter(pre, commands, contents, _window(text, text.split("\n")), text)


_EXAMPLES: list = []  # the rule examples, read by the first generated text


def test_the_utf8_prefilter_rules_out_most_patterns_of_a_wide_text():
    """Not vacuous: a text with a non-ASCII character is not a candidate for every pattern."""
    if not _PRE:
        _PRE.append(_prefilters())
    pre, commands, contents = _PRE[0]
    text = "running 12 checks\n\u2713 parse ok\n\u2713 render ok\nall done \u2014 no errors"
    may = pre[1].may(text)
    assert may is not None and len(may) < 0.3 * len(contents)
    assert pre[1].may(text + " \u212a") is None  # a character that folds to 'k': every pattern may


def test_the_characters_that_fold_to_ascii_are_all_known():
    """Every non-ASCII code point that ``regex`` or ``re`` matches caseless to an ASCII letter is
    in FOLDS_TO_ASCII (an approximation of bytes cannot show such a match)."""
    import re

    from compactor.engine.approx import FOLDS_TO_ASCII

    pats = [regex.compile("[a-z]", regex.IGNORECASE), regex.compile("[a-z]", regex.IGNORECASE | regex.FULLCASE),
            re.compile("[a-z]", re.IGNORECASE)]
    found = {chr(cp) for cp in range(128, 0x110000) if not 0xD800 <= cp < 0xE000
             and any(p.fullmatch(chr(cp)) for p in pats)}
    assert found and found <= FOLDS_TO_ASCII


def test_classification_unchanged_with_the_prefilter_on_the_corpus(corpus):
    _prefilters()
    filtered = Classifier(RULES)
    filtered.prepare()
    plain = Classifier(RULES)  # asked rule by rule, as a short run is (the prefilter is never loaded)
    outputs = _corpus_outputs(corpus) + [(t, c, None) for t, c in _examples()]
    asked = {"filtered": 0, "plain": 0}
    for name, cl in (("filtered", filtered), ("plain", plain)):
        for c in cl.compiled:
            orig = c.matches

            def counted(*a, _orig=orig, _name=name, **k):
                asked[_name] += 1
                return _orig(*a, **k)
            c.matches = counted
    classified = 0
    for text, command, exit_code in outputs:
        plain._calls = 0  # (kept below the point where it would load the prefilter)
        a = filtered.classify(text, command=command, exit_code=exit_code)
        b = plain.classify(text, command=command, exit_code=exit_code)
        assert a == b, (command, text[:200])
        classified += a is not None
    assert classified > 50 and filtered._pre and plain._pre is None
    assert asked["filtered"] < asked["plain"] / 3  # most rules are not asked


def test_an_approximation_hyperscan_refuses_leaves_only_its_pattern_unfiltered():
    """A prefilter database is built of the approximations hyperscan compiles; a pattern whose
    approximation it refuses always may match (the others are still filtered)."""
    _prefilters()  # (skips when there is no hyperscan)
    from compactor.engine.classify import _database

    ids, always = [3, 7], set()
    db = _database(["[\\x46][\\x41][\\x49][\\x4c][^\\n]*(?:\\n|$)", "(?:unbalanced"], ids, always)
    assert ids == [3] and always == {7} and db is not None
    found: list = []
    db.scan(b"tests: FAIL\n", match_event_handler=lambda i, *_a: found.append(ids[i]))
    assert set(found) == {3}
