"""The store stays bounded: size cap, least-recently-used eviction, tombstones that make an
evicted id a clear error, stats/prune, several processes writing at once."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compactor.collapse.store import (
    DEFAULT_MAX_MB,
    DirStore,
    MemoryStore,
    SqliteStore,
    content_id,
    default_max_bytes,
    open_store,
)
from compactor.errors import ConfigError, StoreError

EXE = str(Path(sys.executable).with_name("compactor"))
CAP = 20_000


def make(kind: str, tmp_path: Path, cap: int | None = CAP):
    return {"memory": lambda: MemoryStore(max_bytes=cap), "dir": lambda: DirStore(tmp_path / "d", max_bytes=cap),
            "sqlite": lambda: SqliteStore(tmp_path / "s.sqlite", max_bytes=cap)}[kind]()


def blob(i: int, size: int = 1000) -> bytes:
    head = f"entry {i:05d} ".encode()
    return (head * (size // len(head) + 1))[:size]


KINDS = ["memory", "dir", "sqlite"]


@pytest.mark.parametrize("kind", KINDS)
def test_cap_holds_and_evicted_ids_are_a_clear_error(tmp_path, kind):
    store = make(kind, tmp_path)
    refs = [store.put(blob(i)) for i in range(100)]  # 100 kB into a 20 kB store
    st = store.stats()
    assert st.bytes <= CAP and st.entries == len([r for r in refs if r in store])
    assert st.evicted == 100 - st.entries
    for i, ref in enumerate(refs):
        try:
            assert store.get(ref) == blob(i)  # never another text
        except StoreError as exc:
            assert "was evicted from the store" in str(exc) and ref in str(exc) and "\n" not in str(exc)
    assert store.get(refs[-1]) == blob(99)  # the newest is always there
    with pytest.raises(StoreError, match="evicted"):
        store.get(refs[0])
    # unknown (never stored) is a different message
    with pytest.raises(StoreError, match="unknown placeholder id"):
        store.get(content_id(b"never stored"))


@pytest.mark.parametrize("kind", KINDS)
def test_least_recently_used_goes_first(tmp_path, kind):
    store = make(kind, tmp_path)
    refs = []
    for i in range(18):  # 18 kB: under the cap
        refs.append(store.put(blob(i)))
        time.sleep(0.002)
    store.get(refs[0])  # a read is a use
    time.sleep(0.002)
    assert store.put(blob(1)) == refs[1]  # so is storing the same bytes again
    time.sleep(0.002)
    for i in range(18, 24):
        store.put(blob(i))
        time.sleep(0.002)
    assert store.get(refs[0]) == blob(0) and store.get(refs[1]) == blob(1)
    with pytest.raises(StoreError, match="evicted"):
        store.get(refs[2])


@pytest.mark.parametrize("kind", KINDS)
def test_an_entry_larger_than_the_cap_is_kept(tmp_path, kind):
    store = make(kind, tmp_path)
    small = store.put(b"small")
    big = store.put(blob(7, 3 * CAP))
    assert store.get(big) == blob(7, 3 * CAP)
    with pytest.raises(StoreError, match="evicted"):
        store.get(small)


@pytest.mark.parametrize("kind", KINDS)
def test_re_storing_an_evicted_entry_brings_it_back(tmp_path, kind):
    store = make(kind, tmp_path)
    first = store.put(blob(0))
    for i in range(1, 40):
        store.put(blob(i))
    with pytest.raises(StoreError, match="evicted"):
        store.get(first)
    assert store.put(blob(0)) == first and store.get(first) == blob(0)
    assert store.stats().bytes <= CAP


@pytest.mark.parametrize("kind", KINDS)
def test_prune_to_a_target(tmp_path, kind):
    store = make(kind, tmp_path, cap=None)
    refs = [store.put(blob(i)) for i in range(50)]
    assert store.stats().bytes == 50_000 and store.stats().max_bytes is None
    res = store.prune(10_000)
    assert res.stats.bytes <= 10_000 and res.evicted == 40 and res.freed_bytes == 40_000
    assert [r in store for r in refs] == [False] * 40 + [True] * 10


def test_sqlite_file_shrinks_after_prune(tmp_path):
    store = SqliteStore(tmp_path / "s.sqlite", max_bytes=None)
    for i in range(400):
        store.put(blob(i, 10_000))
    before = store.stats().disk_bytes
    res = store.prune(100_000)
    assert before > 4_000_000 and res.stats.disk_bytes < before / 4


def test_sqlite_store_from_before_the_cap_is_migrated(tmp_path):
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE blobs (id TEXT PRIMARY KEY, data BLOB NOT NULL)")
    for i in range(30):
        conn.execute("INSERT INTO blobs VALUES (?, ?)", (content_id(blob(i)), blob(i)))
    conn.commit()
    conn.close()
    store = SqliteStore(path, max_bytes=CAP)
    assert store.stats().bytes == 30_000 and store.stats().entries == 30
    assert store.get(content_id(blob(29))) == blob(29)
    store.put(blob(100))
    assert store.stats().bytes <= CAP
    assert store.get(content_id(blob(100))) == blob(100)


def test_cap_from_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("COMPACTOR_STORE_MAX_MB", raising=False)
    assert default_max_bytes() == DEFAULT_MAX_MB * 1024 * 1024
    monkeypatch.setenv("COMPACTOR_STORE_MAX_MB", "0.5")
    assert open_store(tmp_path / "x.sqlite").max_bytes == 512 * 1024
    for bad in ("0", "-3", "lots", "nan", "inf"):
        monkeypatch.setenv("COMPACTOR_STORE_MAX_MB", bad)
        with pytest.raises(ConfigError, match="COMPACTOR_STORE_MAX_MB"):
            open_store(None)


def test_compactions_keep_the_store_under_its_cap(tmp_path):
    import compactor

    store = SqliteStore(tmp_path / "s.sqlite", max_bytes=200_000)
    comp = compactor.Compactor(store=store)
    for run in range(40):
        log = "\n".join(f"run {run} step {i}: downloaded package-{run}-{i} 1.{i}.0 ok" for i in range(400))
        comp.compact(log + f"\nERROR: run {run} failed\n", format="text")
    st = store.stats()
    assert 0 < st.bytes <= 200_000 and st.evicted > 0


# ---------------------------------------------------------------------------- concurrency


def _writer(args):
    spec, cap, worker, n = args
    store = open_store(spec, max_bytes=cap)
    out = []
    for i in range(n):
        data = f"worker {worker} item {i} ".encode() * (20 + i % 13)
        out.append((store.put(data), data))
        if i % 5 == 0:
            try:
                store.get(out[i // 2][0])
            except StoreError:
                pass
    return out


@pytest.mark.parametrize("backend", ["s.sqlite", "dirstore"])
def test_processes_writing_at_once_keep_the_cap_and_never_mix_texts(tmp_path, backend):
    spec = str(tmp_path / backend)
    cap = 60_000
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        results = pool.map(_writer, [(spec, cap, w, 120) for w in range(4)])
    store = open_store(spec, max_bytes=cap)
    st = store.stats()
    assert st.bytes <= cap
    kept = evicted = 0
    for out in results:
        for ref, data in out:
            try:
                assert store.get(ref) == data
                kept += 1
            except StoreError as exc:
                assert "was evicted" in str(exc)
                evicted += 1
    assert kept > 0 and evicted > 0
    if backend.endswith(".sqlite"):
        conn = sqlite3.connect(spec)
        total = conn.execute("SELECT COALESCE(SUM(size), 0) FROM blobs").fetchone()[0]
        assert total == conn.execute("SELECT value FROM meta WHERE key='bytes'").fetchone()[0] == st.bytes


# ---------------------------------------------------------------------------- CLI


def _cli(*args, env=None):
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_store_commands(tmp_path):
    spec = str(tmp_path / "s.sqlite")
    store = SqliteStore(spec, max_bytes=None)
    refs = [store.put(blob(i)) for i in range(30)]
    p = _cli("store", "stats", "--json", "--store", spec)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["entries"] == 30 and d["bytes"] == 30_000 and d["evicted"] == 0 and d["disk_bytes"] > 30_000
    p = _cli("store", "prune", "--store", spec, "--to-mb", "0.01")  # 10,485 bytes
    assert p.returncode == 0 and p.stdout.startswith("evicted 20 entries")
    p = _cli("expand", refs[0], "--store", spec)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and f"placeholder id {refs[0]} was evicted" in p.stderr
    p = _cli("expand", refs[-1], "--store", spec)
    assert p.returncode == 0 and p.stdout.encode() == blob(29)
    p = _cli("store", "stats", "--store", spec, "--store-max-mb", "1")
    assert p.returncode == 0 and "cap         1 MB" in p.stdout and "evicted ids 20" in p.stdout


def test_store_cap_flag_and_env_reach_compaction(tmp_path):
    spec = str(tmp_path / "s.sqlite")
    for i in range(6):
        log = tmp_path / f"log{i}.txt"
        log.write_text("\n".join(f"build {i} line {j}: compiling module_{i}_{j}" for j in range(3000)) + "\n")
        p = _cli("trim", str(log), "--keep-originals", "--store", spec, "--store-max-mb", "0.2")
        assert p.returncode == 0, p.stderr
    d = json.loads(_cli("store", "stats", "--json", "--store", spec).stdout)
    assert 0 < d["bytes"] <= 0.2 * 1024 * 1024 and d["evicted"] > 0
    p = _cli("trim", str(tmp_path / "log0.txt"), "--keep-originals", "--store", spec,
             env={"COMPACTOR_STORE_MAX_MB": "x"})
    assert p.returncode == 2 and "COMPACTOR_STORE_MAX_MB" in p.stderr and p.stderr.count("\n") == 1


@pytest.mark.parametrize("args", [["store"], ["store", "stats", "--store-max-mb", "0"],
                                  ["store", "prune", "--to-mb", "-1"]])
def test_store_usage_errors(tmp_path, args):
    spec = str(tmp_path / "s.sqlite")
    SqliteStore(spec).put(b"x")
    p = _cli(*args, "--store", spec) if args != ["store"] else _cli("store")
    assert p.returncode == 2 and p.stderr.count("\n") == 1


def test_stats_on_a_missing_store_is_a_clear_error(tmp_path):
    p = _cli("store", "stats", "--store", str(tmp_path / "none.sqlite"))
    assert p.returncode == 2 and "no store here yet" in p.stderr and not (tmp_path / "none.sqlite").exists()
