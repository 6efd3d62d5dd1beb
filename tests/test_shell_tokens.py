"""The shell tokenizer of the anchor's file effects, compiled by ``re``, reads a command line as
the same patterns compiled by ``regex`` read it.

The tokenizer runs on every shell command of a conversation, so it uses the faster standard
module; the two modules differ on what ``\\s`` takes (``re`` also takes the information
separators 0x1c-0x1f), which is why the whitespace is spelled out. The reference below is the
tokenizer as it was written for ``regex`` (``\\s``, one character per step): the words and
operators must be the same on every corpus command and on generated lines full of quotes,
escapes, operators, comments and unusual whitespace.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import regex
from hypothesis import given, strategies as st

from compactor.anchor import files as F
from conftest import corpus_files

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"

_REF_TOKEN = regex.compile(
    r"""(?P<op>&&|\|\||;;|\|&|&>>|&>|>>|>&|>\||<<<|<<-|<<|[;&|<>()\n])"""
    r"""|(?P<comment>(?<![^\s;&|()])\#[^\n]*)"""
    r"""|(?P<word>(?:'[^']*'|"(?:\\.|[^"\\])*"|\\.|[^\s'"\\;&|<>()]|['"])+)"""
    r"""|[ \t\r]+"""
)
_REF_QUOTED = regex.compile(r"""'([^']*)'|"((?:\\.|[^"\\])*)"|\\(.)|(['"])""", regex.S)
_REF_DQ = regex.compile(r'\\([\\"$`])')


def _ref_unquote(word: str) -> str:
    def rep(m):
        if m.group(1) is not None:
            return m.group(1)
        if m.group(2) is not None:
            return _REF_DQ.sub(r"\1", m.group(2))
        if m.group(3) is not None:
            return m.group(3)
        return ""

    return _REF_QUOTED.sub(rep, word)


def reference_tokens(cmd: str) -> list[str]:
    toks = []
    for m in _REF_TOKEN.finditer(cmd):
        if m.lastgroup == "op":
            toks.append(m.group("op"))
        elif m.lastgroup == "word":
            toks.append(_ref_unquote(m.group("word")))
    return toks


SHELL_CHARS = list("ab_.-/=$`*~{}0 \t\r\n;&|<>()#'\"\\") + ["\x1c", "\x1f", "\x0b", "\x85", "\xa0", "\u2003",
                                                          "\u3000", "\u200b", "é", "✓"]


@given(st.lists(st.sampled_from(SHELL_CHARS), max_size=40).map("".join))
def test_generated_lines_tokenize_as_with_regex(cmd):
    assert F._tokens(cmd) == reference_tokens(cmd)


@pytest.mark.parametrize("cmd", [
    "grep -r \"a\\\"b\" --include='*.py' . | grep -v x # note",
    "echo a\x1cb\x1fc", "echo 'it''s' \"$HOME\\$x\" \\ z", "a#b #c", "x=1;y=2&&z||w|&v",
    "python -c \"print('hi')\" 2>&1", "cat <<<'word' > out", "echo \"unterminated", "a\u3000b\x85c",
])
def test_cases_tokenize_as_with_regex(cmd):
    assert F._tokens(cmd) == reference_tokens(cmd)


def _corpus_commands() -> list[str]:
    import json

    out = []
    for p in corpus_files(CORPUS, "*.json") + corpus_files(CORPUS, "*.jsonl"):
        for line in (p.read_text(encoding="utf-8", errors="replace").splitlines() if p.suffix == ".jsonl"
                     else [p.read_text(encoding="utf-8", errors="replace")]):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            stack = [data]
            while stack:
                v = stack.pop()
                if isinstance(v, dict):
                    stack.extend(v.values())
                elif isinstance(v, list):
                    stack.extend(v)
                elif isinstance(v, str) and 0 < len(v) <= 4000 and ("|" in v or '"' in v or "'" in v):
                    out.append(v)
    return out


@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus not present")
def test_corpus_strings_tokenize_as_with_regex():
    texts = _corpus_commands()
    assert len(texts) > 500
    bad = [t[:120] for t in texts if F._tokens(t) != reference_tokens(t)]
    assert not bad, bad[:5]
