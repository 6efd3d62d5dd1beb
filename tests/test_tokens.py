"""Token counting: offline, chunked counting equals whole-text counting, documented fallback."""

from __future__ import annotations

import random

from compactor.tokens import _Estimate, get_counter


def test_counter_works_offline_and_names_itself():
    c = get_counter()
    assert c.name in ("tiktoken:cl100k_base", "estimate:chars/4")
    assert c.count("hello world") > 0


def test_chunked_count_equals_whole_count():
    c = get_counter()
    if not hasattr(c, "enc"):
        return  # estimate counter: nothing chunked
    rng = random.Random(7)
    pieces = ["error:", "  ", "\n", "\n\n", "foo", "Bar", "12345", "x.py:3", "\t", "ünï", "中文", " ", "!!", "\r\n"]
    for _ in range(5):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(300_000, 500_000)))
        assert c._count_chunked(text) == len(c.enc.encode_ordinary(text))


def test_unknown_encoding_falls_back_to_the_estimate():
    c = get_counter("no-such-encoding")
    assert c.name == "estimate:chars/4"
    assert c.count("abcdefgh") == 2
    assert _Estimate().count("中文字") == 3  # CJK: about one token per character
