"""A fuzzing engine's log prefix ('CRASH LOG: ') is found by the one-pass literal scan.

``TextView.prefix`` skips the tag on the lines that start with it; a view the literal scanner
has scanned reads the tagged lines from its literal cache (no search of its own), and a view read
before any scan searches the text without filling that cache (the scan must still find every
literal in one pass)."""

from __future__ import annotations

import pytest

from compactor.detect import Detector
from compactor.engine import load_rules
from compactor.engine.literals import available_engines, literal_key
from compactor.engine.matchers import ENGINE_PREFIXES, TextView, literal_scanner

RULES = Detector(load_rules()).rules
TEXT = ("starting fuzzer\nCRASH LOG: ==1==ERROR: AddressSanitizer: heap-use-after-free\n"
        "2024-05-01T10:00:00.1234567Z CRASH LOG: #0 0x4f1 in f a.c:3\nnote: CRASH LOG: inside\nCRASH LOG: \n")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTOR_CACHE", str(tmp_path / "cache"))


def test_unscanned_view_finds_the_tags_without_filling_the_literal_cache():
    view = TextView(TEXT)
    assert view.prefix == [0, 11, 40, 0, 11, 0]  # behind the CI timestamp too
    assert view._hits == {}


@pytest.mark.parametrize("engine", available_engines())
def test_scanned_view_reads_the_tagged_lines_from_the_scan(engine):
    view = TextView(TEXT)
    literal_scanner(RULES, engine).scan(view)
    key = literal_key(ENGINE_PREFIXES[0], False)
    assert view._hits[key] == [1, 2, 3, 4]
    assert view.prefix == TextView(TEXT).prefix
    # the prefix follows what the scan found (no search of its own)
    other = TextView(TEXT)
    other._hits[key] = [1]
    assert other.prefix == [0, 11, 29, 0, 0, 0]


# ---- CI timestamp prefixes, worked out for a whole log at once ------------------------------------
from hypothesis import example, given, strategies as st  # noqa: E402

from compactor.normalize import ci_prefix_length, ci_prefix_lengths  # noqa: E402

_GHA = "2022-05-30T09:10:31.1584995Z "
_line = st.one_of(
    st.sampled_from(["", "plain", "Z ", "x" * 27 + "Z ", "20", "2022-05-30T09:10:31Z ",
                     "2022-05-30T09:10:31.15Z ok", "2022-05-30 09:10:31.1584995Z ", "\u0662" + _GHA[1:]]),
    st.builds(lambda body: _GHA + body, st.text(max_size=8)),
    # the timestamp with one character changed (a near miss anywhere in it)
    st.builds(lambda i, c: _GHA[:i] + c + _GHA[i + 1:], st.integers(0, 28), st.sampled_from("9-:.TZ x\u0663")),
)


@given(st.lists(_line, max_size=30), st.integers(0, 4))
@example(["9022-05-30T09:10:31.1584995Z "], 0)  # the shape of a timestamp, but a year ci_prefix_length refuses
@example([_GHA + "a", "1999-05-30T09:10:31.1584995Z b"], 2)
@example(["20", _GHA + "a", "2022-05-30T09:10:31Z x", _GHA + "b", "2022-05-30T09:10:31Z y"], 3)  # short heads between
def test_the_prefixes_of_a_log_at_once_are_those_line_by_line(lines, gha_lines):
    lines = [_GHA + "step"] * gha_lines + lines  # most of a log is prefixed
    assert ci_prefix_lengths(lines) == [ci_prefix_length(line) for line in lines]


def test_a_github_actions_log_has_its_timestamps_skipped():
    lines = [_GHA + f"line {i}" for i in range(500)] + ["", "no stamp", _GHA]
    assert ci_prefix_lengths(lines) == [29] * 500 + [0, 0, 29]
    assert TextView("\n".join(lines)).prefix == [29] * 500 + [0, 0, 29]


def test_every_one_character_change_of_a_timestamp_reads_as_line_by_line():
    chars = [chr(c) for c in range(32, 127)] + ["\u0663", "\uff11", "é", "\t"]
    lines = [_GHA + "ok"] * 3
    for i in range(29):
        for c in chars:
            changed = _GHA[:i] + c + _GHA[i + 1:] + "x"
            got = ci_prefix_lengths(lines + [changed])
            assert got == [ci_prefix_length(line) for line in lines + [changed]], (i, c)


def test_timestamps_are_skipped_in_a_log_that_follows_lines_without_them():
    # a plain log, then a GitHub Actions one (cat a.log b.log): the second one's lines are read
    # without their timestamps, so its line-anchored failures are found
    plain = [f"[INFO] building module {i}" for i in range(400)]
    gha = [_GHA + "##[group]Run make test", _GHA + "FAIL\tgithub.com/acme/pool\t0.012s",
           _GHA + "--- FAIL: TestAcquire (0.00s)"] + [_GHA + f"ok {i}" for i in range(40)]
    view = TextView("\n".join(plain + gha))
    assert view.prefix[:400] == [0] * 400 and view.prefix[400:] == [29] * len(gha)
    hits = Detector(load_rules()).detect("\n".join(plain + gha), role="tool").hits
    found = {(h.rule_id, h.line_start) for h in hits}
    assert ("test-failure.summary", 402) in found and ("test-failure.summary", 403) in found


def test_the_sample_sees_a_timestamped_stretch_anywhere_in_a_long_text():
    from compactor.normalize import PREFIX_SAMPLES, PREFIX_STRIDE, ci_prefixed_somewhere

    for n in (2 * PREFIX_SAMPLES, 50 * PREFIX_SAMPLES, 500 * PREFIX_SAMPLES):
        for at in (0, 3, 7, n // 3, n // 2 + 1, n - PREFIX_STRIDE - 1, n - PREFIX_STRIDE):
            lines = ["plain"] * n
            # a stretch of PREFIX_STRIDE lines (in a long text, 64 samples would be thousands of lines apart)
            lines[at:at + PREFIX_STRIDE] = [_GHA + "x"] * PREFIX_STRIDE
            assert ci_prefixed_somewhere(lines), (n, at)
            assert ci_prefix_lengths(lines)[at:at + PREFIX_STRIDE] == [29] * PREFIX_STRIDE
        assert not ci_prefixed_somewhere(["plain"] * n)
        assert not ci_prefixed_somewhere(["2024-05-01 12:30:45,123 INFO plain"] * n)  # a date, not a CI timestamp
    assert ci_prefixed_somewhere(["plain"] * 30 + [_GHA])  # a short text: every line


def test_prefixes_read_line_by_line_or_together_agree_with_the_full_list():
    # detection reads the prefixes of the lines the rules look at (worked out on first use); the
    # full list afterwards keeps what was read, tags included, and works out the rest
    lines = TEXT.split("\n") + [_GHA + "x", "plain", _GHA + "CRASH LOG: y", "2022-05-30T09:10:31Z z"]
    text = "\n".join(lines)
    expected = TextView(text).prefix
    assert expected == [0, 11, 40, 0, 11, 0, 29, 0, 40, 21]
    for order in ([8, 2], [0, 9], [6], [], [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]):
        view = TextView(text)
        bodies = view.bodies(order)
        assert bodies == [lines[i][expected[i]:] for i in order]
        assert [view.body(i) for i in range(len(lines))] == [line[k:] for line, k in zip(lines, expected)]
        assert [view.body_start(i) for i in range(len(lines))] == [s + k for s, k in zip(view.starts, expected)]
        assert view.prefix == expected and isinstance(view.prefix, list)
    view = TextView(text)
    assert view.bodies(range(3, 7)) == [lines[i][expected[i]:] for i in range(3, 7)]
    assert view.bodies(iter([8, 2])) == [lines[8][40:], lines[2][40:]]  # any iterable, read once
    assert TextView("a\nb").bodies(iter([1, 0])) == ["b", "a"]
    assert TextView("plain\ntext").prefix_at is None and TextView("plain\ntext").bodies([1, 0]) == ["text", "plain"]
