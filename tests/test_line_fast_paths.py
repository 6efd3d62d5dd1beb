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


# ASCII lines are masked by the standard ``re`` module with ASCII classes: the same as the
# ``regex`` patterns, also for the characters the two modules' Unicode classes disagree on
# ('\x1c'-'\x1f' are white space to ``re``, not to ``regex``)
_ASCII = "".join(map(chr, range(128)))


def _template_regex(line: str) -> str:
    return _template_general(line)


def test_ascii_template_every_character():
    for c in _ASCII:
        for line in (c, f"a{c}b", f"x{c}1", f"1{c}/y", f"p/{c}q1", f"{c}/{c}", f"ab{c}cd/ef{c}12"):
            assert template_of(line) == _template_regex(line), repr(line)


@settings(max_examples=3000)
@given(st.text(alphabet="aAfFgz09/ \t\x0b\x0c\x1c\x1d\x1e\x1f\x7f\x00\"'()[]<>=,.:-_\r", max_size=40))
def test_ascii_template_is_the_regex_template(line):
    assert template_of(line) == _template_regex(line)


def test_ascii_template_on_corpus_lines(corpus):
    n = 0
    for sub in ("ci-logs", "ci-breakages", "crash-traces", "exception-traces"):
        for f in sorted((corpus / sub).rglob("*")):
            if not f.is_file() or f.suffix == ".json":
                continue
            for line in f.read_bytes().decode("utf-8", "replace").split("\n"):
                if line.isascii():
                    n += 1
                    assert template_of(line) == _template_regex(line), (f.name, line)
    assert n > 40_000
