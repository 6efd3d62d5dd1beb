"""The placeholder store: exact original bytes of everything collapsed, by content id.

Ids are ``c-`` + the first 16 hex digits of the SHA-256 of the bytes, so the same input gives
the same ids (and prompt caches stay valid). Ids are validated against that grammar before any
path is built; reads verify the hash. Three backends:

- :class:`MemoryStore` for library use;
- :class:`DirStore`: one file per id under a private directory (0700 / 0600), written atomically
  (temp file, fsync, rename);
- :class:`SqliteStore`: one SQLite file in WAL mode with a busy timeout, safe for several
  processes writing at once.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
import threading
from pathlib import Path

import regex

from ..errors import StoreError

__all__ = ["DirStore", "MemoryStore", "SqliteStore", "Store", "content_id", "open_store", "valid_id"]

ID_RE = regex.compile(r"c-[0-9a-f]{16}")


def content_id(data: bytes) -> str:
    return "c-" + hashlib.sha256(data).hexdigest()[:16]


def valid_id(ref: str) -> str:
    if not isinstance(ref, str) or ID_RE.fullmatch(ref) is None:
        shown = ref if isinstance(ref, str) and len(ref) < 80 else repr(ref)[:80]
        raise StoreError(f"invalid placeholder id {shown!r}: expected 'c-' followed by 16 lowercase hex digits")
    return ref


class Store:
    """Interface: ``put(bytes) -> id`` and ``get(id) -> bytes``."""

    location = "memory"

    def put(self, data: bytes) -> str:
        raise NotImplementedError

    def get(self, ref: str) -> bytes:
        raise NotImplementedError

    def __contains__(self, ref: str) -> bool:
        try:
            self.get(ref)
            return True
        except StoreError:
            return False

    def _verify(self, ref: str, data: bytes) -> bytes:
        if content_id(data) != ref:
            raise StoreError(f"store entry {ref} is corrupt (hash mismatch); it cannot be expanded",
                             source=self.location)
        return data


class MemoryStore(Store):
    def __init__(self) -> None:
        self._items: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put(self, data: bytes) -> str:
        ref = content_id(data)
        with self._lock:
            self._items.setdefault(ref, bytes(data))
        return ref

    def get(self, ref: str) -> bytes:
        valid_id(ref)
        try:
            return self._verify(ref, self._items[ref])
        except KeyError:
            raise StoreError(f"unknown placeholder id {ref}", source="memory store") from None

    def __len__(self) -> int:
        return len(self._items)


class DirStore(Store):
    def __init__(self, path: str | os.PathLike[str]):
        self.root = Path(path)
        self.location = str(self.root)
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create store directory: {exc.strerror}", source=self.location) from None

    def _path(self, ref: str) -> Path:
        valid_id(ref)
        return self.root / ref[2:4] / ref

    def put(self, data: bytes) -> str:
        ref = content_id(data)
        path = self._path(ref)
        if path.exists():
            return ref
        path.parent.mkdir(mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise StoreError(f"cannot write store entry: {exc.strerror}", source=self.location) from None
        return ref

    def get(self, ref: str) -> bytes:
        path = self._path(ref)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise StoreError(f"unknown placeholder id {ref}", source=self.location) from None
        except OSError as exc:
            raise StoreError(f"cannot read store entry {ref}: {exc.strerror}", source=self.location) from None
        return self._verify(ref, data)


class SqliteStore(Store):
    def __init__(self, path: str | os.PathLike[str], busy_timeout_ms: int = 10_000):
        self.path = Path(path)
        self.location = str(self.path)
        self.busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        new = not self.path.exists()
        if new:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
            os.close(fd)
        conn = self._conn()
        with conn:
            conn.execute("CREATE TABLE IF NOT EXISTS blobs (id TEXT PRIMARY KEY, data BLOB NOT NULL)")

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(self.path, timeout=self.busy_timeout_ms / 1000, isolation_level=None)
                conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open SQLite store: {exc}", source=self.location) from None
            self._local.conn = conn
        return conn

    def put(self, data: bytes) -> str:
        ref = content_id(data)
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT OR IGNORE INTO blobs (id, data) VALUES (?, ?)", (ref, sqlite3.Binary(data)))
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise StoreError(f"cannot write store entry: {exc}", source=self.location) from None
        return ref

    def get(self, ref: str) -> bytes:
        valid_id(ref)
        try:
            row = self._conn().execute("SELECT data FROM blobs WHERE id = ?", (ref,)).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read store: {exc}", source=self.location) from None
        if row is None:
            raise StoreError(f"unknown placeholder id {ref}", source=self.location)
        return self._verify(ref, bytes(row[0]))


def default_store_path() -> Path:
    env = os.environ.get("COMPACTOR_STORE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "compactor" / "store.sqlite"


def open_store(spec: str | os.PathLike[str] | None) -> Store:
    """``None``/'memory' → MemoryStore; a ``*.sqlite``/``*.db`` path → SqliteStore; else DirStore."""
    if spec is None or str(spec) == "memory":
        return MemoryStore()
    p = Path(spec)
    if p.suffix in (".sqlite", ".sqlite3", ".db"):
        return SqliteStore(p)
    return DirStore(p)
