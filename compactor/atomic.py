"""Write a file atomically: a temporary file in the same folder, then ``os.replace``, so a
reader never sees half a file and an interrupted write leaves the old one whole."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_bytes_atomic", "write_text_atomic"]


def write_bytes_atomic(path: Path, data: bytes, *, dir_mode: int = 0o777, durable: bool = False) -> None:
    """Write DATA to PATH atomically (the file is private to the user, as ``mkstemp`` makes it).

    ``dir_mode``: the mode of folders created for it (0o700 for private state); ``durable``: flush to
    disk (``fsync``) before the rename. An ``OSError`` leaves no temporary file behind."""
    import tempfile  # here: importing it (with shutil, random) costs a short run's start-up more than a write

    path.parent.mkdir(mode=dir_mode, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_text_atomic(path: Path, text: str, *, dir_mode: int = 0o777, durable: bool = False) -> None:
    """:func:`write_bytes_atomic` of TEXT in UTF-8, written as it is (no newline translation)."""
    write_bytes_atomic(path, text.encode("utf-8"), dir_mode=dir_mode, durable=durable)
