"""A classification's summary is its rule's template filled from the captures.

``render_summary`` reads a template once and fills its plain ``{name}`` / ``{name:spec}`` fields
itself; anything else is left to ``string.Formatter``. Either way the text must be what
``string.Formatter`` (with a missing field empty and a spec applied only to a number) gives, and a
template that cannot be filled comes back as it is.
"""

from __future__ import annotations

from hypothesis import given, strategies as st

from compactor.engine import load_rules, render_summary
from compactor.engine.classify import _FMT, _template_parts


def reference(template: str, fields: dict) -> str:
    """The rendering the summaries are defined by: ``string.Formatter`` with a missing field
    empty and a spec applied only to a number (the module's formatter, called as a whole)."""
    try:
        return _FMT.format(template, **fields)
    except (ValueError, IndexError, KeyError):
        return template


PIECES = ["lines", "status", "x", "{lines}", "{status}", "{missing}", "{lines:>6}", "{lines:,}", "{status:03d}",
          "{lines:d}", "{lines:q}", "{0}", "{}", "{lines!r}", "{lines:{status}}", "{lines.real}", "{{", "}}", "{",
          "}", ": ", ", ", " (", ")", "é", "{é}", "{lines:", "{status:x}"]
VALUES = st.one_of(st.sampled_from(["", "0", "12", "1234567", "-3", "exit 1", "abc", "٣"]),
                   st.integers(-10**6, 10**6))


def outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - an error is an outcome too (an attribute of a str)
        return type(exc)


@given(st.lists(st.sampled_from(PIECES), max_size=8).map("".join),
       st.dictionaries(st.sampled_from(["lines", "status", "é", "command"]), VALUES, max_size=4))
def test_render_equals_the_formatter(template, fields):
    assert outcome(render_summary, template, fields) == outcome(reference, template, fields)


def test_every_rule_template_is_read_once_and_renders_as_the_formatter():
    fields = {"lines": "40", "status": "exit 1", "command": "make test", "hits": "7", "files": "3",
              "names": "a.py; b.py", "packages": "1,234"}
    seen = 0
    for rule in load_rules().stage("classify"):
        spec = rule.classify
        for template in (spec.summary, *spec.optional.values()):
            assert _template_parts(template) is not None, template  # (the fast path, not the fallback)
            assert render_summary(template, fields) == reference(template, fields)
            seen += 1
    assert seen > 60


def test_cases():
    assert render_summary("{command}: {status}, {hits} matches", {"command": "grep x", "status": "exit 0",
                                                                   "hits": "3"}) == "grep x: exit 0, 3 matches"
    assert render_summary("{n:>4}|", {"n": "12"}) == "  12|"
    assert render_summary("{n:>4}|", {"n": "twelve"}) == "twelve|"  # a spec applies to numbers only
    assert render_summary("{n}|{gone}|", {"n": "1"}) == "1||"
    assert render_summary("{n:q}", {"n": "5"}) == "{n:q}"  # cannot be filled: as it is
    assert render_summary("{0} and {", {"n": "5"}) == "{0} and {"
    assert render_summary("{n!r}", {"n": "5"}) == "'5'"  # (left to the formatter)
