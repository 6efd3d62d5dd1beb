"""A repeated line is searched once per rule, and matches exactly as if it were searched again.

CI logs repeat lines (the frames of a stack trace printed twice, a Maven warning per module): the
per-line searches of a rule keep what a line body gave and reuse it for the same body further on.
Whether a body matches depends on it alone for searches of the body (prefiltered rules, gated
branches); for a whole-text pattern searched line by line it does only when the pattern is
line-local (``approx.line_local``), and only then is the result reused.
"""

from __future__ import annotations

import time

import pytest

from compactor.engine import load_rules
from compactor.engine.matchers import RegexRule, TextView, _compile, _flags, _lines_matching, _search_line, compile_rule

RULES = {cr.id: cr for cr in (compile_rule(r) for r in load_rules().stage("protect")) if isinstance(cr, RegexRule)}


class Counting:
    """A compiled pattern that counts its searches."""

    def __init__(self, pat):
        self.pat = pat
        self.calls = 0

    def search(self, *args, **kwargs):
        self.calls += 1
        return self.pat.search(*args, **kwargs)


def _lines_of(cr: RegexRule) -> list[str]:
    """The rule's example lines (matching and not), each three times, interleaved."""
    ex = cr.rule.examples
    lines = [x for x in list(ex.match) + list(ex.no_match) if "\n" not in x]
    assert len(lines) >= 4, cr.id
    return lines + lines[::-1] + lines


@pytest.mark.parametrize("rid", ["error.keyword", "error.failure-phrase", "test-failure.summary",
                                 "error.exception-line"])
def test_gated_branches_search_each_distinct_body_once(rid):
    cr = RULES[rid]
    lines = _lines_of(cr)
    view = TextView("\n".join(lines))
    flags = _flags(cr.spec.flags)
    table = [[Counting(_compile(src, flags)), src, cs, ci, g] for _p, src, cs, ci, g in cr.branches]
    got = _lines_matching(view, list(range(len(lines))), table, flags, cr.gate, 10.0, time.process_time(), cr.id)
    expect = [i for i, line in enumerate(lines) if _search_line(cr.pat, line, 10.0) is not None
              and (cr.gate is None or cr.gate.search(line) is not None)]
    assert got == expect and got
    distinct = len(set(lines))
    for br in table:
        assert br[0].calls <= distinct, (cr.id, br[1])
    assert sum(br[0].calls for br in table) >= 1


def test_prefiltered_rule_searches_each_distinct_body_once(monkeypatch):
    cr = RULES["number.tool-parameter"]
    assert cr.branches is None  # found line by line, not by branches
    lines = _lines_of(cr)
    text = "\n".join(lines)
    once = [(a, b) for a, b, *_ in cr.find(TextView("\n".join(dict.fromkeys(lines))), 10.0)]
    assert once
    counting = Counting(cr.pat)
    monkeypatch.setitem(cr.__dict__, "pat", counting)
    found = cr.find(TextView(text), 10.0)
    assert counting.calls <= len(set(lines))
    # the same spans as searching every line: each line's own match, at its own offset
    view = TextView(text)
    expect = []
    for i, line in enumerate(lines):
        if cr.gate.search(line) is None:
            continue
        m = cr.pat.pat.search(line) if isinstance(cr.pat, Counting) else cr.pat.search(line)
        if m is not None:
            s = view.starts[i]
            expect.append((s, s + len(line), i, i, False))
    assert found == expect and len(found) > len(once)


def test_line_local_whole_text_rule_reuses_a_repeated_line(monkeypatch):
    cr = RULES["fileref.path-line"]
    assert cr.approx_local and cr.text_gate is not None
    lines = _lines_of(cr)
    text = "\n".join(lines)
    view = TextView(text)
    counting = Counting(cr.whole)
    monkeypatch.setitem(cr.__dict__, "whole", counting)
    got = cr._gated_lines(view, list(range(len(lines))), 10.0, time.process_time())
    assert counting.calls == len(set(lines))
    expect = [(s, s + len(line), i, i, False) for i, (s, line) in enumerate(zip(view.starts, lines))
              if counting.pat.search(text, s, s + len(line)) is not None]
    assert got == expect and got


def test_a_pattern_not_known_line_local_searches_every_line(monkeypatch):
    cr = RULES["fileref.path-line"]
    lines = _lines_of(cr)
    view = TextView("\n".join(lines))
    reference = cr._gated_lines(view, list(range(len(lines))), 10.0, time.process_time())
    counting = Counting(cr.whole)
    monkeypatch.setitem(cr.__dict__, "whole", counting)
    monkeypatch.setitem(cr.__dict__, "approx_local", False)
    got = cr._gated_lines(view, list(range(len(lines))), 10.0, time.process_time())
    assert counting.calls == len(lines)
    assert got == reference


def test_a_repeated_trace_classifies_each_distinct_line_once(monkeypatch):
    from compactor.engine.matchers import LineBlockRule

    cr = compile_rule(next(r for r in load_rules().stage("protect") if r.id == "trace.java"))
    assert isinstance(cr, LineBlockRule)
    trace = ["java.lang.IllegalStateException: pool exhausted"] + [
        f"\tat com.acme.db.Pool.m{k}(Pool.java:{10 + k})" for k in range(8)] + ["\t... 3 more"]
    lines = []
    for k in range(6):
        lines += [f"[INFO] attempt {k}"] + trace
    view = TextView("\n".join(lines))
    pats = [Counting(p) for p in cr.cont]
    monkeypatch.setitem(cr.__dict__, "_cont_search", [p.search for p in pats])
    blocks = [(ls, le) for _a, _b, ls, le, _e in cr.find(view, 10.0)]
    assert blocks == [(1 + 11 * k, 10 + 11 * k) for k in range(6)]
    # each distinct line after a block's first is classified once, however often the trace repeats
    assert sum(p.calls for p in pats) <= len(cr.cont) * len(set(trace))
