"""Level 1: collapse benign tool output into placeholders, fold repeats, the store, streaming trim."""

from .level1 import Level1, SegmentOutcome
from .store import DirStore, MemoryStore, SqliteStore, Store, content_id, open_store, valid_id

__all__ = [
    "DirStore",
    "Level1",
    "MemoryStore",
    "SegmentOutcome",
    "SqliteStore",
    "Store",
    "content_id",
    "open_store",
    "valid_id",
]
