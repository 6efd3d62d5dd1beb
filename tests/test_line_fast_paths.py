"""Per-line shortcuts equal the general code they skip: a fold template of a line without '/'
(the path-like branch cannot match), the path-like branch tried only where a token starts, and
a line that only ends in a CRLF."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

import regex

from compactor.collapse.fold import MASK_MAX, _MASK, template_of
from compactor.normalize import _ANSI, normalize_line

# the mask as first written: the path-like branch tried at every position (quadratic in a token)
_MASK_GENERAL = regex.compile(r"[^\s/\"'()\[\]<>=,]*+/[^\s\"'()\[\]<>=,]*+|[A-Fa-f]*+\d[0-9A-Fa-f]*+")


def _template_general(line: str) -> str:
    return line if len(line) > MASK_MAX else _MASK_GENERAL.sub("#", line)


@settings(max_examples=2000)
@given(st.text(alphabet="aAfFgz09/ \t\"'()[]<>=,.:-_\né", max_size=40))
def test_guarded_mask_is_the_general_mask(text):
    assert _MASK.sub("#", text) == _MASK_GENERAL.sub("#", text)


def _normalize_general(line: str) -> str:
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    if "\r" in line:
        parts = [p for p in line.split("\r") if p.strip()]
        line = parts[-1] if parts else ""
    return line


@settings(max_examples=500)
@given(st.text(alphabet="abcdefABCDEFxyz0123456789 -_.:/\"'()[]<>=,\té中", max_size=60))
def test_template_without_slash_is_the_general_one(line):
    assert template_of(line) == _template_general(line)
    assert template_of(line.replace("/", "")) == _template_general(line.replace("/", ""))


def test_template_examples():
    assert template_of("Downloaded 12 kB from deadbeef01 in 3s") == "Downloaded # kB from # in #s"
    assert template_of("at /src/x/y.py:12 id=ab12") == _template_general("at /src/x/y.py:12 id=ab12")
    long = "a" * (MASK_MAX + 1) + "1"
    assert template_of(long) == long


@settings(max_examples=500)
@given(st.text(alphabet="ab \t\r\x1b[0m", max_size=16))
def test_crlf_ending_is_the_general_normalisation(line):
    assert normalize_line(line) == _normalize_general(line)
    assert normalize_line(line + "\r") == _normalize_general(line + "\r")
