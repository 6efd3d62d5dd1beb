"""Level 1: collapse benign tool output into placeholders, fold repeats, the store, streaming trim."""

from __future__ import annotations

from typing import TYPE_CHECKING

_LAZY: dict[str, str] = {
    "Level1": ".level1", "SegmentOutcome": ".level1",
    "DirStore": ".store", "MemoryStore": ".store", "SqliteStore": ".store", "Store": ".store",
    "content_id": ".store", "open_store": ".store", "valid_id": ".store",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):  # imported on first use: a command pays only for what it runs
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(target, __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from .level1 import Level1, SegmentOutcome
    from .store import DirStore, MemoryStore, SqliteStore, Store, content_id, open_store, valid_id
