"""Write a file atomically: a temporary file in the same folder, then ``os.replace``, so a
reader never sees half a file and an interrupted write leaves the old one whole."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["TempBeside", "write_bytes_atomic", "write_text_atomic"]


class TempBeside:
    """``with TempBeside(path) as tmp:`` a new, empty temporary file beside PATH (``.NAME.*.tmp``
    in the same folder, private to the user), renamed onto PATH when the block ends without an
    exception and removed when it raises (a failed rename removes it too). ``keep_mode``: the
    renamed file takes the permissions of the file it replaces (a new file: the umask's), not the
    temporary file's private ones. The folder must exist."""

    def __init__(self, path: Path, *, keep_mode: bool = False):
        self.path = Path(path)
        self.keep_mode = keep_mode
        self.tmp: str | None = None

    def __enter__(self) -> str:
        import tempfile  # here: importing it (with shutil, random) costs a short run's start-up more than a write

        fd, self.tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=str(self.path.parent))
        os.close(fd)
        return self.tmp

    def __exit__(self, exc_type, exc, tb) -> bool:
        tmp, self.tmp = self.tmp, None
        try:
            if exc_type is None and tmp is not None:
                if self.keep_mode:
                    os.chmod(tmp, _mode_for(self.path))
                os.replace(tmp, self.path)
                tmp = None
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        return False


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777  # the replaced file's permissions
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask  # as a new file would have them


def write_bytes_atomic(path: Path, data: bytes, *, dir_mode: int = 0o777, durable: bool = False,
                       keep_mode: bool = False) -> None:
    """Write DATA to PATH atomically (the file is private to the user, as ``mkstemp`` makes it,
    unless ``keep_mode``: a user's output, with the mode of the file it replaces or the umask's).

    ``dir_mode``: the mode of folders created for it (0o700 for private state); ``durable``: flush to
    disk (``fsync``) before the rename. An ``OSError`` leaves no temporary file behind."""
    path.parent.mkdir(mode=dir_mode, parents=True, exist_ok=True)
    with TempBeside(path, keep_mode=keep_mode) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
        if durable:
            fh.flush()
            os.fsync(fh.fileno())


def write_text_atomic(path: Path, text: str, *, dir_mode: int = 0o777, durable: bool = False,
                      keep_mode: bool = False) -> None:
    """:func:`write_bytes_atomic` of TEXT in UTF-8, written as it is (no newline translation)."""
    write_bytes_atomic(path, text.encode("utf-8"), dir_mode=dir_mode, durable=durable, keep_mode=keep_mode)
