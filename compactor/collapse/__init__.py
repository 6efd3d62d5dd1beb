"""Level 1: classify, collapse, fold, store, trim."""

from .classify import Classification, Classifier, render_summary
from .level1 import PLACEHOLDER_RE, Level1, SegmentOutcome, placeholder_line
from .store import DirStore, MemoryStore, SqliteStore, Store, content_id, open_store, valid_id

__all__ = [
    "PLACEHOLDER_RE",
    "Classification",
    "Classifier",
    "DirStore",
    "Level1",
    "MemoryStore",
    "SegmentOutcome",
    "SqliteStore",
    "Store",
    "content_id",
    "open_store",
    "placeholder_line",
    "render_summary",
    "valid_id",
]
