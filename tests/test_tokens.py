"""Token counting: offline, chunked counting equals whole-text counting, documented fallback."""

from __future__ import annotations

import random

from compactor.tokens import _Estimate, get_counter, piecewise


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


def test_a_text_counted_piece_by_piece_counts_as_a_whole():
    """``piecewise`` counts a text as the sum of its pieces (cut after a newline before a
    non-space character), each looked up in the counter's cache: the same total as one count of
    the whole text, whether none, some or all of the pieces were counted before."""
    c = get_counter()
    if not hasattr(c, "enc"):
        return  # estimate counter: counted whole
    count = piecewise(c)
    rng = random.Random(11)
    parts = ["## Facts", "- ", "\n", "\n\n", "  ", "\t", "foo", "Bar", "x.py:3", "✓", "ünï", "中文", "!!", "12"]
    texts = ["".join(rng.choice(parts) for _ in range(rng.randint(150, 700))) for _ in range(300)]
    for text in texts + [t[: len(t) // 2] + "\nnew line\n" + t[len(t) // 2:] for t in texts]:
        assert count(text) == len(c.enc.encode_ordinary(text))


def test_unknown_encoding_falls_back_to_the_estimate():
    c = get_counter("no-such-encoding")
    assert c.name == "estimate:chars/4"
    assert c.count("abcdefgh") == 2
    assert _Estimate().count("中文字") == 3  # CJK: about one token per character


# ---------------------------------------------------------------- exact counting without tiktoken

import hashlib  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from compactor import tokens as T  # noqa: E402
from conftest import corpus_files  # noqa: E402


def _tiktoken():
    c = get_counter()
    if not isinstance(c, T._Tiktoken):
        pytest.skip("no tiktoken encoding installed")
    return c


_WARM = []


def _warm():
    """A counter that reads its ranks from a rank cache (made once in a temporary folder)."""
    if not _WARM:
        import tempfile

        old = os.environ.get("COMPACTOR_CACHE")
        os.environ["COMPACTOR_CACHE"] = tempfile.mkdtemp(prefix="compactor-rank-cache-")
        try:
            for _ in range(2):
                T.get_counter.cache_clear()
                c = T.get_counter()
        finally:
            T.get_counter.cache_clear()
            if old is None:
                del os.environ["COMPACTOR_CACHE"]
            else:
                os.environ["COMPACTOR_CACHE"] = old
        assert c._ranks is not None
        _WARM.append(c)
    return _WARM[0]


def _fresh(tmp_path, monkeypatch, encoding="cl100k_base"):
    """A counter made the way a new process makes it, with its cache in TMP_PATH."""
    monkeypatch.setenv("COMPACTOR_CACHE", str(tmp_path / "cache"))
    T.get_counter.cache_clear()
    try:
        return T.get_counter(encoding)
    finally:
        T.get_counter.cache_clear()


_ASCII_PIECES = ["error:", "  ", "\n", "\n\n", "foo", "Bar", "12345", "1234567", "x.py:3", "\t", " ", "!!", "\r\n",
                 "'s", "'LL", "'Ve", " \x0b", "\x0c", "\x1c", "\x1f ", "\x85", "don't", "   \n", "aaaaaaaa", "zzqxj",
                 "{}[]", "  \t\n  ", "...", "\r", "ab12cd", "__init__", "0x1F", " $", "'"]


@given(st.lists(st.sampled_from(_ASCII_PIECES) | st.text(st.characters(max_codepoint=127), max_size=12),
                max_size=40))
def test_the_python_encoder_counts_what_tiktoken_counts(parts):
    _tiktoken()
    c = _warm()
    text = "".join(parts).encode("ascii", "ignore").decode()
    assert c._count_py(text) == len(c.enc.encode_ordinary(text))


def test_the_python_encoder_counts_what_tiktoken_counts_on_the_corpus(corpus):
    _tiktoken()
    c = _warm()
    checked = 0
    for path in corpus_files(corpus):
        if not path.is_file() or path.stat().st_size > 2_000_000:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for i in range(0, min(len(text), 60_000), 3000):
            piece = text[i:i + 3000]
            if piece.isascii():
                assert c._count_py(piece) == len(c.enc.encode_ordinary(piece)), (path, i)
                checked += 1
    assert checked > 500


def test_a_new_process_counts_the_same_from_the_rank_cache(tmp_path, monkeypatch):
    _tiktoken()
    texts = ["Fix the failing test in app/util.py.", "ünïcode 中文 text", "x = 1\n" * 50, "a" * 70_000,
             "Traceback (most recent call last):\n  File \"a.py\", line 3\nValueError: bad\n"]
    cold = _fresh(tmp_path, monkeypatch)
    assert cold.name == "tiktoken:cl100k_base" and cold._enc is not None  # built by tiktoken, cache written
    warm = _fresh(tmp_path, monkeypatch)
    assert warm.name == cold.name and warm._enc is None  # from the cache: no tiktoken encoder yet
    assert warm.count(texts[0]) == cold.count(texts[0]) and warm._enc is None  # a short ASCII text
    for t in texts:
        assert warm.count(t) == cold.count(t)
    assert warm._enc is not None  # non-ASCII and long texts built the encoder, from the cached ranks


def test_the_python_encoder_gives_way_after_its_share_of_text(tmp_path, monkeypatch):
    _tiktoken()
    _fresh(tmp_path, monkeypatch)
    warm = _fresh(tmp_path, monkeypatch)
    line = "ok: step passed\n"
    n = 0
    while warm._enc is None:
        n += 1
        warm.count(line * n)
    assert sum(len(line) * k for k in range(1, n)) <= T.PY_COUNT_CHARS


def _cache_files(tmp_path):
    files = sorted((tmp_path / "cache" / "tokens").iterdir())
    db = [f for f in files if f.suffix == ".sqlite"]
    sha = [f for f in files if f.suffix == ".sha256"]
    return files, db, sha


def test_rank_cache_is_keyed_by_the_rank_file_and_written_whole(tmp_path, monkeypatch):
    _tiktoken()
    _fresh(tmp_path, monkeypatch)
    files, db, sha = _cache_files(tmp_path)
    assert len(files) == 2 and len(db) == 1 and len(sha) == 1  # no temporary files left behind
    key = hashlib.sha256(T.rank_file("cl100k_base").read_bytes()).hexdigest()[:32]
    assert db[0].name == f"cl100k_base-{key}.sqlite"
    assert sha[0].read_text().strip() == hashlib.sha256(db[0].read_bytes()).hexdigest()


@pytest.mark.parametrize("damage", ["truncate", "flip", "digest", "no-digest", "garbage"])
def test_a_damaged_rank_cache_is_rebuilt(tmp_path, monkeypatch, damage):
    _tiktoken()
    _fresh(tmp_path, monkeypatch)
    _, (db,), (sha,) = _cache_files(tmp_path)
    good = db.read_bytes()
    if damage == "truncate":
        db.write_bytes(good[: len(good) // 2])
    elif damage == "flip":  # one byte changed: the digest no longer matches
        b = bytearray(good)
        b[len(b) // 2] ^= 0xFF
        db.write_bytes(bytes(b))
    elif damage == "digest":
        sha.write_text("0" * 64 + "\n")
    elif damage == "no-digest":
        sha.unlink()
    else:  # a well-formed digest of a file that is not a database
        db.write_bytes(b"not a database" * 100)
        sha.write_text(hashlib.sha256(db.read_bytes()).hexdigest() + "\n")
    c = _fresh(tmp_path, monkeypatch)
    assert c._enc is not None  # not trusted: tiktoken built the encoder, and the cache again
    assert c.count("Fix the failing test in app/util.py.") == 9
    _, (db2,), (sha2,) = _cache_files(tmp_path)
    assert db2.read_bytes() and sha2.read_text().strip() == hashlib.sha256(db2.read_bytes()).hexdigest()
    assert _fresh(tmp_path, monkeypatch)._enc is None  # and the rebuilt cache is used


def test_a_changed_rank_file_is_a_new_cache(tmp_path, monkeypatch):
    _tiktoken()
    _fresh(tmp_path, monkeypatch)
    src = T.rank_file("cl100k_base")
    changed = tmp_path / "ranks.tiktoken"
    lines = src.read_bytes().splitlines()
    changed.write_bytes(b"\n".join(lines[:-1]) + b"\n")  # one rank fewer
    monkeypatch.setattr(T, "rank_file", lambda encoding: changed)
    c = _fresh(tmp_path, monkeypatch)
    # the key differs, so the old cache is not used; tiktoken's ranks are not the changed file's,
    # so no cache is written under the changed file's key
    assert c._enc is not None
    _, db, _ = _cache_files(tmp_path)
    assert len(db) == 1
    assert _fresh(tmp_path, monkeypatch)._enc is not None


def test_an_unwritable_cache_folder_only_costs_speed(tmp_path, monkeypatch):
    _tiktoken()
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the folder should be")
    c = _fresh(tmp_path, monkeypatch)
    assert c.name == "tiktoken:cl100k_base" and c.count("Fix the failing test in app/util.py.") == 9
    monkeypatch.setenv("COMPACTOR_CACHE", "")  # empty: no cache at all
    T.get_counter.cache_clear()
    try:
        c = T.get_counter()
        assert c._enc is not None and c.count("hello world") == 2
    finally:
        T.get_counter.cache_clear()


def test_a_warm_process_does_not_build_the_tiktoken_encoder_for_a_short_text(tmp_path):
    _tiktoken()
    env = {**os.environ, "COMPACTOR_CACHE": str(tmp_path / "cache")}
    code = ("import sys; from compactor.tokens import get_counter; c = get_counter(); "
            "print(c.count('Fix the failing test in app/util.py.'), c._enc is None, 'tiktoken' in sys.modules)")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout
    assert out.split() == ["9", "True", "False"]


def test_a_session_builds_the_encoder_up_front_so_no_turn_pays_for_it(tmp_path):
    _tiktoken()
    env = {**os.environ, "COMPACTOR_CACHE": str(tmp_path / "cache"), "COMPACTOR_STORE": str(tmp_path / "s.sqlite")}
    code = ("import compactor; from compactor.tokens import get_counter; c = get_counter(); "
            "print(c._enc is None, end=' '); compactor.Session(); print(c._enc is None)")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)  # writes the cache
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout
    assert out.split() == ["True", "False"]


def test_one_counter_per_encoding_whichever_way_it_is_asked_for():
    assert get_counter() is get_counter("cl100k_base") is get_counter(encoding="cl100k_base")


@pytest.mark.parametrize("env", [{}, {"TMPDIR": "HERE"}, {"TMPDIR": "/nonexistent-dir", "TEMP": "HERE"},
                                 {"TMPDIR": "", "TMP": "HERE"}])
def test_temp_dir_is_tempfiles_without_importing_it(tmp_path, env):
    """The rank file's folder is found where tiktoken looks (``tempfile.gettempdir()``), without
    importing ``tempfile`` at start-up."""
    import os
    import subprocess
    import sys

    env = {k: (str(tmp_path) if v == "HERE" else v) for k, v in env.items()}
    full = {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "TEMP", "TMP")} | env
    probe = ("import sys; from compactor import tokens; mine = tokens._temp_dir(); "
             "assert 'tempfile' not in sys.modules; import tempfile; print(mine == tempfile.gettempdir(), mine)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=full, check=True)
    assert out.stdout.split()[0] == "True", out.stdout


def test_the_count_cache_holds_a_bounded_number_of_characters(monkeypatch):
    """A reader that drops each message after counting it must not find every text still held by
    the counter's cache (a file of few large outputs): the cache forgets past its character bound,
    and the counts stay the same."""
    c = get_counter()
    if not hasattr(c, "_cache"):
        pytest.skip("tiktoken is not available: the estimate keeps no cache")
    monkeypatch.setattr(T, "CACHE_CHARS", 50_000)
    c._cache.clear()
    c._cached_chars = 0
    texts = [f"line of output {k}\n" * 400 for k in range(40)]
    first = [c.count(t) for t in texts]
    held = sum(len(t) for t in c._cache)
    assert held <= 50_000 + max(map(len, texts))
    assert c._cached_chars == held
    assert [c.count(t) for t in texts] == first == [c._count_chunked(t) for t in texts]


def test_a_long_line_is_counted_in_bounded_pieces_with_the_same_total():
    """A log with no line break (30 MB on one line) was counted whole: tiktoken's token list of it
    held ~10 M Python ints. It is cut where cl100k's pre-tokeniser splits anyway (a space before a
    letter), so the pieces stay small and their counts add up to the whole count."""
    rng = random.Random(7)
    words = ["ok;", "[INFO]", "step", "12", "it's", "don't", "  ", "é", "naïve", "—", "→", "3.14", "'s",
             "A", "\t", "?!", "foo_bar", "Ünïcode", "x"]
    enc = get_counter("cl100k_base").enc
    for _ in range(20):
        text = "".join(rng.choice(words) + rng.choice([" ", "", " ", "  "]) for _ in range(20000))
        assert "\n" not in text
        pieces = list(T._split_points(text, 4096))
        assert len(pieces) > 10 and max(b - a for a, b in pieces) < 3 * 4096
        assert sum(len(enc.encode_ordinary(text[a:b])) for a, b in pieces) == len(enc.encode_ordinary(text))
    long_line = "".join(f"[INFO] step {i} processing item {i * 7 % 1000} ok; " for i in range(60000))
    assert len(long_line) > T._CHUNK
    assert get_counter("cl100k_base").count(long_line) == len(enc.encode_ordinary(long_line))
