"""Store safety: exact round trip, hash verified on read, strict ids, private files, concurrent writers."""

from __future__ import annotations

import multiprocessing as mp
import os
import stat

import pytest

from compactor.collapse.store import DirStore, MemoryStore, SqliteStore, content_id, open_store
from compactor.errors import StoreError

PAYLOADS = [b"", b"hello", "ünïcödé\r\n\x1b[31mred\x1b[0m".encode(), bytes(range(256)), b"x" * 1_000_000]


@pytest.mark.parametrize("kind", ["memory", "dir", "sqlite"])
def test_roundtrip_exact_bytes(tmp_path, kind):
    store = {"memory": MemoryStore(), "dir": DirStore(tmp_path / "d"), "sqlite": SqliteStore(tmp_path / "s.sqlite")}[kind]
    for data in PAYLOADS:
        ref = store.put(data)
        assert ref == content_id(data) and len(ref) == 18
        assert store.get(ref) == data
        assert store.put(data) == ref  # idempotent


@pytest.mark.parametrize("ref", ["../../etc/passwd", "/etc/passwd", "c-", "c-XYZ", "c-0123456789abcdeg",
                                 "c-0123456789abcdef/../x", "c-0123456789abcdef\x00", "C-0123456789ABCDEF", 42, None])
@pytest.mark.parametrize("kind", ["memory", "dir", "sqlite"])
def test_hostile_ids_rejected_before_any_path(tmp_path, kind, ref):
    store = {"memory": MemoryStore(), "dir": DirStore(tmp_path / "d"), "sqlite": SqliteStore(tmp_path / "s.sqlite")}[kind]
    with pytest.raises(StoreError, match="invalid placeholder id"):
        store.get(ref)


def test_corruption_is_detected(tmp_path):
    store = DirStore(tmp_path / "d")
    ref = store.put(b"original content")
    path = tmp_path / "d" / ref[2:4] / ref
    path.write_bytes(b"tampered content")
    with pytest.raises(StoreError, match="corrupt"):
        store.get(ref)


def test_private_permissions(tmp_path):
    d = DirStore(tmp_path / "d")
    ref = d.put(b"secret-ish original")
    assert stat.S_IMODE(os.stat(tmp_path / "d").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "d" / ref[2:4] / ref).st_mode) == 0o600
    SqliteStore(tmp_path / "p" / "s.sqlite").put(b"x")
    assert stat.S_IMODE(os.stat(tmp_path / "p" / "s.sqlite").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "p").st_mode) == 0o700


def test_no_temp_files_left(tmp_path):
    d = DirStore(tmp_path / "d")
    for i in range(50):
        d.put(f"item {i}".encode())
    leftovers = [p for p in (tmp_path / "d").rglob(".tmp-*")]
    assert leftovers == []


def test_open_store_picks_backend(tmp_path):
    assert isinstance(open_store(None), MemoryStore)
    assert isinstance(open_store(tmp_path / "a.sqlite"), SqliteStore)
    assert isinstance(open_store(tmp_path / "dir"), DirStore)


def _writer(args):
    spec, worker, n = args
    store = open_store(spec)
    refs = []
    for i in range(n):
        refs.append(store.put(f"worker {worker} item {i} ".encode() * (1 + i % 7)))
    return refs


@pytest.mark.parametrize("backend", ["s.sqlite", "dirstore"])
def test_four_processes_write_at_once_and_lose_nothing(tmp_path, backend):
    spec = str(tmp_path / backend)
    n = 150
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        results = pool.map(_writer, [(spec, w, n) for w in range(4)])
    store = open_store(spec)
    total = 0
    for w, refs in enumerate(results):
        assert len(refs) == n
        for i, ref in enumerate(refs):
            assert store.get(ref) == f"worker {w} item {i} ".encode() * (1 + i % 7)
            total += 1
    assert total == 4 * n
