"""Write a text file atomically: a temporary file in the same folder, then ``os.replace``, so a
reader never sees half a file and an interrupted write leaves the old one whole."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_text_atomic"]


def write_text_atomic(path: Path, text: str, *, dir_mode: int = 0o777, durable: bool = False) -> None:
    """``dir_mode``: the mode of folders created for it (0o700 for private state);
    ``durable``: flush to disk (``fsync``) before the rename."""
    path.parent.mkdir(mode=dir_mode, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
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
