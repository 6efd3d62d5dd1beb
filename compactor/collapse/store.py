"""The placeholder store: exact original bytes of everything collapsed, by content id.

Ids are ``c-`` + the first 16 hex digits of the SHA-256 of the bytes, so the same input gives
the same ids (and prompt caches stay valid). Ids are validated against that grammar before any
path is built; reads verify the hash. Three backends:

- :class:`MemoryStore` for library use;
- :class:`DirStore`: one file per id under a private directory (0700 / 0600), written atomically
  (temp file, fsync, rename);
- :class:`SqliteStore`: one SQLite file in WAL mode with a busy timeout, safe for several
  processes writing at once.

The interface is two methods, ``put(bytes) -> id`` and ``get(id) -> bytes``. Every backend is
bounded: a size cap (``max_bytes``; default :data:`DEFAULT_MAX_MB` MB, or
``$COMPACTOR_STORE_MAX_MB``) counted on the stored originals. When a ``put`` takes the store over
its cap, the least recently used entries (a ``put`` of existing bytes or a ``get`` counts as a
use) are evicted down to :data:`LOW_WATER` of the cap; the entry just written always stays. An
evicted id leaves a tombstone, so expanding it is a clear :class:`StoreError` ("evicted"), never
a crash or another text. ``stats()`` and ``prune()`` serve ``compactor store stats|prune``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from pathlib import Path

from ..atomic import write_bytes_atomic, write_text_atomic
from ..errors import ConfigError, StoreError
from ..lazyre import lazy_regex
from ..record import Record

__all__ = ["DEFAULT_MAX_MB", "DirStore", "MemoryStore", "PruneResult", "SqliteStore", "Store", "StoreStats",
           "content_id", "default_max_bytes", "default_store_path", "open_store", "valid_id"]

ID_RE = lazy_regex(r"c-[0-9a-f]{16}")

#: default size cap of a store, in MB of stored originals
DEFAULT_MAX_MB = 256
#: eviction goes down to this share of the cap, so that it does not run on every ``put``
LOW_WATER = 0.9
#: tombstones of evicted ids kept (oldest dropped first): enough to explain any recent placeholder
MAX_TOMBSTONES = 100_000
MB = 1024 * 1024


def content_id(data: bytes) -> str:
    return "c-" + hashlib.sha256(data).hexdigest()[:16]


def valid_id(ref: str) -> str:
    if not isinstance(ref, str) or ID_RE.fullmatch(ref) is None:
        shown = ref if isinstance(ref, str) and len(ref) < 80 else repr(ref)[:80]
        raise StoreError(f"invalid placeholder id {shown!r}: expected 'c-' followed by 16 lowercase hex digits")
    return ref


def default_max_bytes() -> int:
    """The cap from ``$COMPACTOR_STORE_MAX_MB`` (a positive number of MB), else the default."""
    env = os.environ.get("COMPACTOR_STORE_MAX_MB")
    if env is None or not env.strip():
        return DEFAULT_MAX_MB * MB
    return parse_max_mb(env, "COMPACTOR_STORE_MAX_MB")


def parse_max_mb(value: str | float, name: str = "--store-max-mb") -> int:
    try:
        mb = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: {value!r} is not a number of megabytes") from None
    if not (mb > 0) or mb != mb or mb == float("inf"):
        raise ConfigError(f"{name}: the store size cap must be a positive number of megabytes, got {value!r}")
    return max(1, int(mb * MB))


def _evicted_error(ref: str, location: str, max_bytes: int | None) -> StoreError:
    cap = f" ({max_bytes / MB:g} MB cap)" if max_bytes else ""
    return StoreError(f"placeholder id {ref} was evicted from the store{cap}, least recently used first; its "
                      f"original is gone: re-run the compaction on the original input, or raise the cap "
                      f"(--store-max-mb / COMPACTOR_STORE_MAX_MB)", source=location)


class StoreStats(Record, plain=True, frozen=True):
    location: str
    backend: str
    entries: int
    bytes: int  # stored originals
    max_bytes: int | None
    evicted: int  # tombstones of evicted ids
    disk_bytes: int  # what the store takes on disk (files, SQLite pages, WAL)

    def to_dict(self) -> dict:
        return self.model_dump()


class PruneResult(Record, plain=True, frozen=True):
    evicted: int
    freed_bytes: int
    stats: StoreStats

    def to_dict(self) -> dict:
        return {"evicted": self.evicted, "freed_bytes": self.freed_bytes, "stats": self.stats.to_dict()}


class Store:
    """Interface: ``put(bytes) -> id`` and ``get(id) -> bytes``; ``stats()`` / ``prune()`` for upkeep."""

    location = "memory"
    max_bytes: int | None = None

    def put(self, data: bytes) -> str:
        raise NotImplementedError

    def get(self, ref: str) -> bytes:
        raise NotImplementedError

    def stats(self) -> StoreStats:
        raise NotImplementedError

    def prune(self, max_bytes: int | None = None) -> PruneResult:
        """Evict least recently used entries until the originals take at most ``max_bytes``
        (default: the cap), and give the space back to the file system."""
        raise NotImplementedError

    def prune_to_mb(self, mb: str | float) -> PruneResult:
        """:meth:`prune` to a size in megabytes (a number or its text, as ``--to-mb`` takes it; a
        bad value raises :class:`~compactor.ConfigError`)."""
        return self.prune(parse_max_mb(mb, "--to-mb"))

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


def _cap(max_bytes: int | None | str) -> int | None:
    if max_bytes == "default":
        return default_max_bytes()
    if max_bytes is None:
        return None
    if not isinstance(max_bytes, int) or max_bytes <= 0:
        raise ConfigError(f"store max_bytes must be a positive integer, got {max_bytes!r}")
    return max_bytes


class MemoryStore(Store):
    def __init__(self, max_bytes: int | None | str = "default") -> None:
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._evicted: OrderedDict[str, None] = OrderedDict()
        self._bytes = 0
        self.max_bytes = _cap(max_bytes)
        self._lock = threading.Lock()

    def put(self, data: bytes) -> str:
        ref = content_id(data)
        with self._lock:
            if ref in self._items:
                self._items.move_to_end(ref)
                return ref
            self._items[ref] = bytes(data)
            self._bytes += len(data)
            self._evicted.pop(ref, None)
            if self.max_bytes is not None and self._bytes > self.max_bytes:
                self._evict(int(self.max_bytes * LOW_WATER), keep=ref)
        return ref

    def _evict(self, target: int, keep: str | None = None) -> tuple[int, int]:
        n = freed = 0
        for ref in list(self._items):
            if self._bytes <= target:
                break
            if ref == keep:
                continue
            size = len(self._items.pop(ref))
            self._bytes -= size
            self._evicted[ref] = None
            n += 1
            freed += size
        while len(self._evicted) > MAX_TOMBSTONES:
            self._evicted.popitem(last=False)
        return n, freed

    def get(self, ref: str) -> bytes:
        valid_id(ref)
        with self._lock:
            data = self._items.get(ref)
            if data is None:
                if ref in self._evicted:
                    raise _evicted_error(ref, "memory store", self.max_bytes)
                raise StoreError(f"unknown placeholder id {ref}", source="memory store")
            self._items.move_to_end(ref)
        return self._verify(ref, data)

    def stats(self) -> StoreStats:
        with self._lock:
            return StoreStats("memory", "memory", len(self._items), self._bytes, self.max_bytes,
                              len(self._evicted), 0)

    def prune(self, max_bytes: int | None = None) -> PruneResult:
        target = max_bytes if max_bytes is not None else (self.max_bytes or self._bytes)
        with self._lock:
            n, freed = self._evict(target)
        return PruneResult(n, freed, self.stats())

    def __len__(self) -> int:
        return len(self._items)



class _StoreLock:
    """The store folder's lock, held while an entry is written or the store is pruned (one class,
    not one made per call: a class is a reference cycle the collector has to find)."""

    __slots__ = ("store", "fd")

    def __init__(self, store) -> None:
        self.store = store
        self.fd = -1

    def __enter__(self):
        store = self.store
        try:
            self.fd = os.open(store.root / ".lock", os.O_CREAT | os.O_RDWR, 0o600)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except OSError as exc:
            raise StoreError(f"cannot lock the store: {exc.strerror}", source=store.location) from None
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


class DirStore(Store):
    """One file per id. Last use is the file's mtime (a ``put`` of existing bytes or a ``get``
    touches it); a running total in ``.usage`` decides when to scan and evict, under an exclusive
    lock on ``.lock``; an evicted id leaves an empty ``<id>.evicted`` file."""

    def __init__(self, path: str | os.PathLike[str], max_bytes: int | None | str = "default"):
        self.root = Path(path)
        self.location = str(self.root)
        self.max_bytes = _cap(max_bytes)
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create store directory: {exc.strerror}", source=self.location) from None

    def _path(self, ref: str) -> Path:
        valid_id(ref)
        return self.root / ref[2:4] / ref

    def _locked(self):
        return _StoreLock(self)

    def _usage(self) -> int | None:
        try:
            return int(json.loads((self.root / ".usage").read_text())["bytes"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _set_usage(self, n: int) -> None:
        try:
            write_text_atomic(self.root / ".usage", json.dumps({"bytes": n}))
        except OSError:
            pass  # the usage figure is a cache: a later scan recounts it

    def _scan(self) -> tuple[list[tuple[int, str, int, Path]], int]:
        """Entries as (mtime_ns, id, size, path), and the number of tombstones."""
        entries, tombs = [], 0
        for shard in os.scandir(self.root):
            if not shard.is_dir(follow_symlinks=False) or len(shard.name) != 2:
                continue
            for f in os.scandir(shard.path):
                name = f.name
                if name.endswith(".evicted"):
                    tombs += 1
                elif ID_RE.fullmatch(name):
                    try:
                        st = f.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    entries.append((st.st_mtime_ns, name, st.st_size, Path(f.path)))
        return entries, tombs

    def _evict_locked(self, target: int, keep: str | None = None) -> tuple[int, int, int]:
        entries, _ = self._scan()
        total = sum(e[2] for e in entries)
        n = freed = 0
        for mtime, name, size, path in sorted(entries):
            if total <= target:
                break
            if name == keep:
                continue
            try:
                (path.parent / (name + ".evicted")).touch(mode=0o600)
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise StoreError(f"cannot evict store entry {name}: {exc.strerror}", source=self.location) from None
            total -= size
            n += 1
            freed += size
        self._set_usage(total)
        self._trim_tombstones()
        return n, freed, total

    def _trim_tombstones(self) -> None:
        tombs = [p for p in self.root.glob("??/*.evicted")]
        if len(tombs) <= MAX_TOMBSTONES:
            return
        tombs.sort(key=lambda p: (p.stat().st_mtime_ns, p.name))
        for p in tombs[: len(tombs) - MAX_TOMBSTONES]:
            try:
                p.unlink()
            except OSError:
                pass

    def put(self, data: bytes) -> str:
        ref = content_id(data)
        path = self._path(ref)
        if path.exists():
            try:
                os.utime(path)
            except OSError:
                pass
            return ref
        try:
            write_bytes_atomic(path, data, dir_mode=0o700, durable=True)
        except OSError as exc:
            raise StoreError(f"cannot write store entry: {exc.strerror}", source=self.location) from None
        try:
            os.unlink(path.parent / (ref + ".evicted"))
        except FileNotFoundError:
            pass
        except OSError:
            pass
        with self._locked():
            usage = self._usage()
            if usage is None:
                usage = sum(e[2] for e in self._scan()[0])
            else:
                usage += len(data)
            if self.max_bytes is not None and usage > self.max_bytes:
                self._evict_locked(int(self.max_bytes * LOW_WATER), keep=ref)
            else:
                self._set_usage(usage)
        return ref

    def get(self, ref: str) -> bytes:
        path = self._path(ref)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            if (path.parent / (ref + ".evicted")).exists():
                raise _evicted_error(ref, self.location, self.max_bytes) from None
            raise StoreError(f"unknown placeholder id {ref}", source=self.location) from None
        except OSError as exc:
            raise StoreError(f"cannot read store entry {ref}: {exc.strerror}", source=self.location) from None
        data = self._verify(ref, data)
        try:
            os.utime(path)
        except OSError:
            pass
        return data

    def stats(self) -> StoreStats:
        entries, tombs = self._scan()
        disk = 0
        for p in self.root.rglob("*"):
            try:
                if p.is_file():
                    disk += p.stat().st_blocks * 512
            except OSError:
                pass
        return StoreStats(self.location, "dir", len(entries), sum(e[2] for e in entries), self.max_bytes, tombs, disk)

    def prune(self, max_bytes: int | None = None) -> PruneResult:
        with self._locked():
            target = max_bytes if max_bytes is not None else self.max_bytes
            if target is None:
                target = sum(e[2] for e in self._scan()[0])
            n, freed, _ = self._evict_locked(target)
        return PruneResult(n, freed, self.stats())


class SqliteStore(Store):
    """One SQLite file (WAL, busy timeout). Each entry records its size and last use; a running
    total in ``meta`` is updated in the same ``BEGIN IMMEDIATE`` transaction as every write, so
    several processes writing at once keep it exact and evict consistently."""

    def __init__(self, path: str | os.PathLike[str], busy_timeout_ms: int = 10_000,
                 max_bytes: int | None | str = "default"):
        self.path = Path(path)
        self.location = str(self.path)
        self.busy_timeout_ms = busy_timeout_ms
        self.max_bytes = _cap(max_bytes)
        self._local = threading.local()
        new = not self.path.exists()
        if new:
            try:
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
                os.close(fd)
            except OSError as exc:
                raise StoreError(f"cannot create the store: {exc.strerror}", source=self.location) from None
        self._setup()

    def _setup(self) -> None:
        conn = self._conn()
        try:  # current schema already there (the usual case): no write lock at start-up
            cols = {row[1] for row in conn.execute("PRAGMA table_info(blobs)")}
            if {"size", "used"} <= cols and conn.execute(
                    "SELECT 1 FROM meta WHERE key = 'bytes'").fetchone() is not None and conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE name = 'evicted'").fetchone() is not None:
                return
        except sqlite3.Error:
            pass
        try:
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")  # effective on a new, empty file only
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("CREATE TABLE IF NOT EXISTS blobs (id TEXT PRIMARY KEY, size INTEGER NOT NULL, "
                         "used INTEGER NOT NULL, data BLOB NOT NULL)")
            cols = {row[1] for row in conn.execute("PRAGMA table_info(blobs)")}
            if "size" not in cols:  # a store written before the size cap: (id, data)
                conn.execute("ALTER TABLE blobs ADD COLUMN size INTEGER")
                conn.execute("UPDATE blobs SET size = length(data)")
            if "used" not in cols:
                conn.execute("ALTER TABLE blobs ADD COLUMN used INTEGER NOT NULL DEFAULT 0")
            conn.execute("CREATE INDEX IF NOT EXISTS blobs_lru ON blobs (used, id, size)")
            conn.execute("CREATE TABLE IF NOT EXISTS evicted (id TEXT PRIMARY KEY, at INTEGER NOT NULL)")
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)")
            conn.execute("INSERT OR IGNORE INTO meta (key, value) SELECT 'bytes', COALESCE(SUM(size), 0) FROM blobs")
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback(conn)
            raise StoreError(f"cannot open SQLite store: {exc}", source=self.location) from None

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(self.path, timeout=self.busy_timeout_ms / 1000, isolation_level=None)
                conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                # after each checkpoint the WAL file is cut back to 1 MB, so the store's size on
                # disk stays near its cap instead of cap + a WAL grown to the largest burst
                conn.execute("PRAGMA journal_size_limit=1048576")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot open SQLite store: {exc}", source=self.location) from None
            self._local.conn = conn
        return conn

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def _evict(self, conn: sqlite3.Connection, target: int, keep: str | None) -> tuple[int, int]:
        """Inside a write transaction: evict least recently used entries down to ``target``."""
        total = conn.execute("SELECT value FROM meta WHERE key = 'bytes'").fetchone()[0]
        if total <= target:
            return 0, 0
        now = time.time_ns()
        n = freed = 0
        victims = []
        for ref, size in conn.execute("SELECT id, size FROM blobs ORDER BY used, id"):
            if total <= target:
                break
            if ref == keep:
                continue
            victims.append(ref)
            total -= size
            freed += size
        for ref in victims:
            conn.execute("DELETE FROM blobs WHERE id = ?", (ref,))
            conn.execute("INSERT OR REPLACE INTO evicted (id, at) VALUES (?, ?)", (ref, now))
            n += 1
        conn.execute("UPDATE meta SET value = value - ? WHERE key = 'bytes'", (freed,))
        count = conn.execute("SELECT COUNT(*) FROM evicted").fetchone()[0]
        if count > MAX_TOMBSTONES:
            conn.execute("DELETE FROM evicted WHERE id IN (SELECT id FROM evicted ORDER BY at, id LIMIT ?)",
                         (count - MAX_TOMBSTONES,))
        return n, freed

    def _reclaim(self, conn: sqlite3.Connection, full: bool = False) -> None:
        try:
            mode = conn.execute("PRAGMA auto_vacuum").fetchone()[0]
            if mode == 2:
                conn.execute("PRAGMA incremental_vacuum")
            elif full:
                conn.execute("VACUUM")
            if full:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass  # space is given back on a later prune; the data is consistent either way

    def put(self, data: bytes) -> str:
        ref = content_id(data)
        conn = self._conn()
        evicted = 0
        try:
            conn.execute("BEGIN IMMEDIATE")
            now = time.time_ns()
            cur = conn.execute("UPDATE blobs SET used = ? WHERE id = ?", (now, ref))
            if cur.rowcount == 0:
                conn.execute("INSERT INTO blobs (id, size, used, data) VALUES (?, ?, ?, ?)",
                             (ref, len(data), now, sqlite3.Binary(data)))
                conn.execute("UPDATE meta SET value = value + ? WHERE key = 'bytes'", (len(data),))
                conn.execute("DELETE FROM evicted WHERE id = ?", (ref,))
                if self.max_bytes is not None:
                    total = conn.execute("SELECT value FROM meta WHERE key = 'bytes'").fetchone()[0]
                    if total > self.max_bytes:
                        evicted, _ = self._evict(conn, int(self.max_bytes * LOW_WATER), ref)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback(conn)
            raise StoreError(f"cannot write store entry: {exc}", source=self.location) from None
        if evicted:
            self._reclaim(conn)
        return ref

    def get(self, ref: str) -> bytes:
        valid_id(ref)
        conn = self._conn()
        try:
            row = conn.execute("SELECT data FROM blobs WHERE id = ?", (ref,)).fetchone()
            if row is None:
                gone = conn.execute("SELECT 1 FROM evicted WHERE id = ?", (ref,)).fetchone()
                if gone is not None:
                    raise _evicted_error(ref, self.location, self.max_bytes)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read store: {exc}", source=self.location) from None
        if row is None:
            raise StoreError(f"unknown placeholder id {ref}", source=self.location)
        data = self._verify(ref, bytes(row[0]))
        try:  # a read is a use: it moves the entry to the back of the eviction queue
            conn.execute("UPDATE blobs SET used = ? WHERE id = ?", (time.time_ns(), ref))
        except sqlite3.Error:
            pass  # read-only file or busy: the text is right, only the LRU order is older
        return data

    def stats(self) -> StoreStats:
        conn = self._conn()
        try:
            entries = conn.execute("SELECT COUNT(*) FROM blobs").fetchone()[0]
            total = conn.execute("SELECT value FROM meta WHERE key = 'bytes'").fetchone()[0]
            tombs = conn.execute("SELECT COUNT(*) FROM evicted").fetchone()[0]
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read store: {exc}", source=self.location) from None
        disk = 0
        for suffix in ("", "-wal", "-shm"):
            try:
                disk += os.stat(str(self.path) + suffix).st_size
            except OSError:
                pass
        return StoreStats(self.location, "sqlite", entries, total, self.max_bytes, tombs, disk)

    def prune(self, max_bytes: int | None = None) -> PruneResult:
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
            total = conn.execute("SELECT value FROM meta WHERE key = 'bytes'").fetchone()[0]
            target = max_bytes if max_bytes is not None else (self.max_bytes if self.max_bytes is not None else total)
            n, freed = self._evict(conn, target, None)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback(conn)
            raise StoreError(f"cannot prune the store: {exc}", source=self.location) from None
        self._reclaim(conn, full=True)
        return PruneResult(n, freed, self.stats())


def default_store_path() -> Path:
    env = os.environ.get("COMPACTOR_STORE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "compactor" / "store.sqlite"


def open_store(spec: str | os.PathLike[str] | None = None, max_bytes: int | None | str = "default", *,
               max_mb: str | float | None = None) -> Store:
    """``None``/'memory' → MemoryStore; a ``*.sqlite``/``*.db`` path → SqliteStore; else DirStore.
    ``max_bytes``: the size cap ("default": ``$COMPACTOR_STORE_MAX_MB`` or :data:`DEFAULT_MAX_MB` MB;
    ``None``: unbounded); or ``max_mb``, the cap in megabytes (a number or its text, as the
    ``--store-max-mb`` flag takes it; a bad value raises :class:`~compactor.ConfigError`)."""
    if max_mb is not None:
        max_bytes = parse_max_mb(max_mb)
    if spec is None or str(spec) == "memory":
        return MemoryStore(max_bytes=max_bytes)
    p = Path(spec)
    if p.suffix in (".sqlite", ".sqlite3", ".db"):
        return SqliteStore(p, max_bytes=max_bytes)
    return DirStore(p, max_bytes=max_bytes)
