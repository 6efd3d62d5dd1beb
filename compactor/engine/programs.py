"""Compiled ``regex`` programs kept on disk: a rule pattern is parsed once per machine, not once per run.

``regex.compile`` parses and optimises a pattern in Python before handing the resulting program
to its C engine; for the rule catalog that is about 0.1 s of every ``compactor trim`` run (131
patterns on the real CI logs) and more for ``compact``. ``regex`` pickles a compiled pattern as
exactly those program arguments (``Pattern._pickled_data``, rebuilt by ``_regex.compile``), so
this module keeps them, by pattern and flags, in one ``marshal`` file per ``regex`` and Python
version: a pattern seen before is rebuilt from its program in microseconds, the same object
``regex.compile`` would return. Values derived from a pattern (its branches, see
``branches.split_cached``) are kept in the same file.

The file sits in the cache folder (``$COMPACTOR_CACHE``, empty: no file; else
``$XDG_CACHE_HOME/compactor`` or ``~/.cache/compactor``), private to the user like the rule
catalog beside it. It is a cache: safe to delete; a file from another version, with a wrong
digest or unreadable is ignored and rewritten; a rebuilt pattern whose source differs from the one
asked for is compiled afresh. New programs are written once, when the process exits.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import regex

__all__ = ["MAX_PROGRAMS", "cached_value", "compile_pattern", "programs_path"]

MAX_PROGRAMS = 8192  # programs kept in the file (user rule folders add theirs)
_MAGIC = b"compactor-regex-programs 1"

_lock = threading.Lock()
_programs: dict[str, tuple] | None = None  # "flags\0pattern" -> regex's program arguments
_dirty = False
_registered = False


def programs_path() -> Path | None:
    env = os.environ.get("COMPACTOR_CACHE")
    if env is not None:
        if not env:
            return None
        base = Path(env)
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")) / "compactor"
    import regex  # here, not at import: a run that compiles no pattern (a short trim) never loads it

    tag = f"regex {getattr(regex, '__version__', '?')} {sys.implementation.cache_tag} {sys.version_info[:3]}"
    return base / f"programs-{hashlib.sha256(tag.encode()).hexdigest()[:24]}.bin"


def _load() -> dict[str, tuple]:
    global _programs
    with _lock:
        if _programs is None:
            _programs = _read()
        return _programs


def _read() -> dict[str, tuple]:
    import marshal

    path = programs_path()
    if path is None:
        return {}
    try:
        header, _, body = path.read_bytes().partition(b"\n")
        if header != _MAGIC + b" " + hashlib.sha256(body).hexdigest().encode():
            return {}
        data = marshal.loads(body)
        if type(data) is not dict:
            return {}
        return data
    except (OSError, ValueError, EOFError, TypeError):
        return {}


def _save() -> None:
    import marshal

    global _dirty
    path = programs_path()
    with _lock:
        if not _dirty or _programs is None or path is None:
            return
        try:
            body = marshal.dumps(_programs)
        except ValueError:  # a program marshal cannot write: keep none on disk
            return
        _dirty = False
    from ..atomic import write_bytes_atomic

    try:
        write_bytes_atomic(path, _MAGIC + b" " + hashlib.sha256(body).hexdigest().encode() + b"\n" + body,
                           dir_mode=0o700)
    except OSError:
        pass  # a read-only or full cache folder only costs speed


def compile_pattern(pattern: str, flags: int = 0) -> regex.Pattern:
    """``regex.compile(pattern, flags)``, rebuilt from its cached program when there is one."""
    import regex

    global _dirty, _registered
    programs = _load()
    key = f"{int(flags)}\0{pattern}"
    args = programs.get(key)
    if args is not None:
        try:
            compiled = regex._regex.compile(*args)
            if compiled.pattern == pattern:
                return compiled
        except Exception:  # a program this engine does not take: compile afresh below
            pass
    compiled = regex.compile(pattern, flags)
    args = getattr(compiled, "_pickled_data", None)
    if type(args) is tuple and not compiled.flags & regex.LOCALE and len(programs) < MAX_PROGRAMS:
        with _lock:
            programs[key] = args
            _dirty = True
            if not _registered:
                _registered = True
                atexit.register(_save)
    return compiled


_SOURCE_HASHES: dict[str, str] = {}


def source_hash(path: str) -> str:
    """A short hash of the source file at ``path`` (a module's ``__file__``), read once per process:
    the part of a :func:`cached_value` kind that changes when the code computing the value does."""
    got = _SOURCE_HASHES.get(path)
    if got is None:
        try:
            with open(path, "rb") as fh:
                got = hashlib.sha256(fh.read()).hexdigest()[:16]
        except OSError:
            got = "unknown"
        _SOURCE_HASHES[path] = got
    return got


def cached_value(kind: str, key: str, compute):
    """``compute()`` kept in the same file under ``kind`` and ``key`` (plain data that ``marshal``
    writes: what a pattern's analysis yields, such as its branches). ``kind`` must change when the
    code that computes the value changes (callers put a hash of their source in it)."""
    global _dirty, _registered
    programs = _load()
    k = f"{kind}\0{key}"
    got = programs.get(k)
    if type(got) is tuple and len(got) == 1:
        return got[0]
    value = compute()
    if len(programs) < MAX_PROGRAMS:
        with _lock:
            programs[k] = (value,)
            _dirty = True
            if not _registered:
                _registered = True
                atexit.register(_save)
    return value
