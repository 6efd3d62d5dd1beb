"""number.tool-parameter walks a line from separator to separator and tries the key forms only
from the start of the key before each one. It must find a match on exactly the lines the plain
form (the key forms tried at every position of the line) does."""

from __future__ import annotations

import regex
from hypothesis import given, settings, strategies as st

from compactor.engine import load_rules
from conftest import corpus_files

RULE = load_rules().by_id["number.tool-parameter"]
WALKED = regex.compile(RULE.regex_.pattern)

_STOP = ("version|ver|v|id|uid|gid|pid|ppid|tid|line|lineno|col|column|row|exit_?code|exitcode|return_?code|status|"
         "code|errno|rev|revision|build|date|time|timestamp|ts|hash|sha|commit|index|idx|offset|page|step|seq|"
         "sequence|nonce|key|token|sig|checksum|errors?|failures?|failed|passed|skipped|tests?|warnings?")
PLAIN = regex.compile(r"""(?x)
  ^(?=(?i:[^\n]*?(?:error|exception|fail|timed\ out|exhausted|refused|denied|killed|abort|panic|invalid|unable|exceeded)))
  [^\n]*?
  (?<![\w.-])(?!(?i:""" + _STOP + r""")\b)
  (?:
     [A-Za-z_][\w.-]*+\s?=(?!=)
   | ["']?(?:(?=[\w.-]*_)[A-Za-z][\w.-]*+|[a-z]++[A-Z]\w*+|(?i:timeout|limit|limits|retries|retry|max\w{0,20}|size))["']?\s?:
   | (?<!\S)--(?!(?i:version|port-?id|line|index|seed|commit|rev|build)\b)[A-Za-z][\w-]*+(?:=|\s)
  )
  \s?["']?-?\d++(?:\.\d++)?(?:e[-+]?\d++)?
  (?:\s?(?:ms|us|µs|ns|s|sec|secs|seconds?|m|min|mins|minutes?|h|hrs?|hours?|d|days?|[KMGT]i?B?|[kKMG]|%|x|px|rps|qps|tokens|times|connections|workers|threads|retries|attempts))?
  ["']?
  (?![\w.:/-]|\.\d)
""")

_PIECES = ["pool_size", "queue_depth", "maxTokens", "timeout", "retries", "max_", "size", "version", "id", "line",
           "exit_code", "=", "==", ":", " : ", "--", "--port", "--version", "-", ".", "_", "'", '"', " ", "  ", "\t",
           "\x1c", "1", "20", "-3", "4.5", "e7", "ms", "s", "MiB", "%", "x", "/", "error", "Exception", "xception",
           "FAILED", "timed out", "exceeded", "K", "\u212aILLED", "é", "a", "B", "fooBar", "a.b", "a-b", "(", ")", ",",
           "[", "]", "\u00a0", "Error:"]


@settings(max_examples=3000)
@given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=16))
def test_walked_form_matches_the_plain_form(pieces):
    line = "".join(pieces)
    assert bool(WALKED.search(line)) == bool(PLAIN.search(line)), line


def test_walked_form_on_every_corpus_line(corpus):
    n = 0
    for p in corpus_files(corpus):
        for line in set(p.read_text(encoding="utf-8", errors="replace").split("\n")):
            if len(line) <= 20_000:
                got = bool(WALKED.search(line))
                assert got == bool(PLAIN.search(line)), (p.name, line[:200])
                n += got
    assert n > 10  # the corpus has failure lines with parameters


def test_walked_form_is_linear_on_separator_bait():
    import time

    def cpu(text: str) -> float:
        t = time.process_time()
        WALKED.search(text)
        return time.process_time() - t

    for unit in ("a_b=", "1:2:", "x:1:1: ", "--a", "'k': "):
        small = "error " + unit * (16_384 // len(unit))
        big = "error " + unit * (65_536 // len(unit))
        assert cpu(big) < 8 * max(cpu(small), 1e-3), unit
