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


# ANSI escapes are removed by the standard ``re`` module: the same pattern, read the same way as
# by ``regex`` (explicit character ranges only)
_ANSI_REGEX = regex.compile(_ANSI.pattern)
_ESC_ALPHABET = ["\x1b", "[", "]", "0", "9", ";", "?", " ", "/", "@", "m", "~", "\x07", "\\", "Z", "^", "_", "-",
                 "a", "\x7f", "é", "\n"]


def test_ansi_pattern_reads_the_same_in_re_and_regex():
    import itertools

    for k in range(1, 4):
        for t in itertools.product(_ESC_ALPHABET, repeat=k):
            s = "\x1b" + "".join(t)
            assert _ANSI.sub("", s) == _ANSI_REGEX.sub("", s), repr(s)
    for c in map(chr, range(0x250)):
        for s in ("\x1b" + c, "\x1b[" + c, "\x1b[1" + c + "m", "\x1b]" + c + "\x07", "\x1b]x" + c + "\x1b\\"):
            assert _ANSI.sub("", s) == _ANSI_REGEX.sub("", s), repr(s)


@settings(max_examples=1000)
@given(st.text(alphabet="".join(_ESC_ALPHABET) + "x1\r", max_size=30))
def test_ansi_removal_is_the_regex_removal(text):
    assert _ANSI.sub("", text) == _ANSI_REGEX.sub("", text)


def test_ansi_removal_on_corpus_lines(corpus):
    n = 0
    for f in sorted((corpus / "ci-breakages").rglob("*.log")) + sorted((corpus / "ci-logs").iterdir()):
        for line in f.read_bytes().decode("utf-8", "replace").split("\n"):
            if "\x1b" in line:
                n += 1
                assert _ANSI.sub("", line) == _ANSI_REGEX.sub("", line), (f.name, line)
    assert n > 1000


@settings(max_examples=500)
@given(st.text(alphabet="ab \t\r\x0b\x1c\x1f\xa0\u3000\x85", max_size=12))
def test_crlf_ending_blank_as_strip_sees_it(line):
    assert normalize_line(line + "\r") == _normalize_general(line + "\r")
