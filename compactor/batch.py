"""Batch compaction: whole corpora of trajectories and logs, one machine or a cluster.

The core is one pure, picklable function over plain records, built on the public API
(:class:`compactor.Compactor`, :func:`compactor.load_document`) and nothing below it:

>>> from compactor.batch import BatchConfig, compact_record
>>> row = compact_record({"id": "run-1", "text": open("run.json").read()}, BatchConfig())  # doctest: +SKIP
>>> row["output"], row["tokens_before"], row["tokens_after"]                               # doctest: +SKIP

A record is a mapping with an optional ``id`` (or ``path``) and one payload: ``text`` (str),
``data`` or ``bytes`` (raw bytes, as ``ray.data.read_binary_files`` gives them), ``messages``
(an already parsed message list or trajectory object), or only ``path`` (a file to read). The
result is a flat dict of scalars (see :data:`RESULT_COLUMNS`), so it fits a DataFrame, an Arrow
table or a Ray dataset as it is: the compacted text in the input's own layout, tokens before
and after (counted on the input text and on the written output, not an internal estimate), the
level reached, evidence counts, content hashes, and the error (one line) when the record could
not be compacted. A bad record never raises: it comes back with ``ok`` false.

The only state is a per-process cache of ready :class:`~compactor.Compactor` objects (compiled
rule catalog, token counter), one per configuration, so a worker or a Ray actor loads the
catalog once. The output of a record never depends on what the process compacted before it:
a compactor whose Level 3 hand-off counter moved is replaced before the next record (each
record is its own conversation), and in-memory placeholder stores are recycled so they cannot
grow without bound.

:func:`run` drives ``compactor batch`` (files, directories and globs in; one output per input
and a JSONL report out; a process pool or Ray; resumable by content hash).
"""

from __future__ import annotations

import concurrent.futures as cf
import fnmatch
import glob
import hashlib
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

import compactor
from compactor import CompactorConfig, CompactorError, ConfigError, InputError
from compactor.atomic import write_text_atomic

__all__ = [
    "BatchConfig",
    "BatchSummary",
    "FileTask",
    "RESULT_COLUMNS",
    "compact_batch",
    "compact_record",
    "discover",
    "run",
    "run_file_task",
]

#: Columns of every :func:`compact_record` result, in this order.
RESULT_COLUMNS = (
    "id", "ok", "error", "error_code", "format", "level", "tokens_before", "tokens_after",
    "protected", "placeholders", "diagnostics", "evidence", "input_sha256", "output_sha256", "output", "note",
)

EMITS = ("messages", "json", "anchor", "markdown", "report")
# Outputs that are not the input's own layout get a suffix, so names stay one-to-one.
_EMIT_SUFFIX = {"messages": "", "json": ".compact.json", "anchor": ".anchor.json", "markdown": ".anchor.md",
                "report": ".report.json"}

# An in-memory placeholder store is useless to a batch worker (nobody can expand from it) and
# grows with every record: the worker's compactor is rebuilt after this many records.
_RECYCLE_AFTER = 256


class BatchConfig(BaseModel):
    """What every worker needs to compact a record: validated once, frozen, picklable."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    compactor: CompactorConfig = Field(default_factory=CompactorConfig,
                                       description="the compaction options (level, budget, lang, rules, store, ...)")
    format: str = Field(default="auto", description="layout name, or auto-detect per record")
    emit: Literal["messages", "json", "anchor", "markdown", "report"] = Field(
        default="messages", description="messages: the compacted input in its own layout")
    mode: Literal["compact", "trim"] = Field(
        default="compact", description="trim: CI logs through compactor.trim (what 'compactor trim FILE' prints)")

    @classmethod
    def from_options(cls, *, format: str = "auto", emit: str = "messages", mode: str = "compact",
                     **options: Any) -> "BatchConfig":
        """Build from flat compaction options (``level=1, budget=4000, ...``); bad values raise
        :class:`~compactor.ConfigError` naming the option."""
        try:
            return cls(compactor=CompactorConfig(**options), format=format, emit=emit, mode=mode)
        except TypeError as exc:  # an option CompactorConfig does not have
            raise ConfigError(f"invalid option: {exc}") from None
        except ValueError as exc:  # pydantic's ValidationError, or the config's own check: both name the field
            err = exc.errors()[0]  # type: ignore[attr-defined]
            name = ".".join(str(x) for x in err["loc"])
            raise ConfigError(f"invalid option {name}: {err['msg']}", option=name, reason=err["msg"]) from None

    def fingerprint(self) -> str:
        """What decides the output bytes: compactor version, options (not the store location)
        and the rule catalog. Resume only trusts outputs made under the same fingerprint."""
        opts = self.model_dump(mode="json")
        opts["compactor"].pop("store", None)
        rules = compactor.load_rules(list(self.compactor.rules)).fingerprint()
        blob = json.dumps([compactor.__version__, opts, rules], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------- the pure core


@dataclass
class _Worker:
    comp: Any
    used: int = 0


_WORKERS: dict[str, _Worker] = {}  # per process: config JSON -> ready Compactor


def _compactor_for(config: BatchConfig) -> Any:
    """The ready compactor of this process for ``config``. A ``Compactor`` holds configuration
    and pure memos only (per-conversation state such as the Level 3 counter lives in the
    conversation of each call), so one serves every record; with an in-memory store it is
    replaced now and then so the store does not grow without end."""
    key = config.model_dump_json()
    w = _WORKERS.get(key)
    if w is None or (config.compactor.store is None and w.used >= _RECYCLE_AFTER):
        if w is None and len(_WORKERS) >= 8:
            _WORKERS.clear()
        w = _WORKERS[key] = _Worker(compactor.Compactor(config.compactor))
    w.used += 1
    return w.comp


def warm(config: BatchConfig) -> None:
    """Load the rule catalog and token counter of ``config`` in this process now."""
    _compactor_for(config)


def _payload(record: Mapping[str, Any]) -> tuple[str, Any]:
    if not isinstance(record, Mapping):
        raise InputError(f"a record is a mapping with text, data, bytes, messages or path; got {type(record).__name__}")
    rid = record.get("id")
    if rid is None:
        rid = record.get("path")
    rid = "<record>" if rid is None else str(rid)
    for key in ("text", "data", "bytes", "messages"):
        value = record.get(key)
        if value is not None:
            if key == "text" and not isinstance(value, str):
                raise InputError(f"'text' must be a string, not {type(value).__name__}", source=rid)
            if key in ("data", "bytes"):
                if isinstance(value, (bytearray, memoryview)):
                    value = bytes(value)
                if not isinstance(value, bytes):
                    raise InputError(f"'{key}' must be bytes, not {type(value).__name__}", source=rid)
            if key == "messages" and not isinstance(value, (list, dict)):
                raise InputError(f"'messages' must be a list or an object, not {type(value).__name__}", source=rid)
            return rid, value
    path = record.get("path")
    if path is not None:
        p = Path(str(path))
        if not p.is_file():
            raise InputError("no such file; check the path" if not p.exists() else "not a regular file", source=rid)
        try:
            return rid, p.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror}", source=rid) from None
    raise InputError("record has no payload: give one of text, data, bytes, messages or path", source=rid)


def _canonical(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8", "surrogatepass")


def _input_bytes(payload: Any) -> bytes:
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, str):
        return payload.encode("utf-8", "surrogatepass")
    return _canonical(payload)


def _input_text(payload: Any, fmt: str) -> str:
    """The input as the model would be sent it, for the before count."""
    if isinstance(payload, str):
        return payload
    if isinstance(payload, bytes):
        return payload.decode("utf-8", "replace")
    for f in compactor.FORMATS:
        if f.name == fmt:
            return f.dumps(payload)
    return _canonical(payload).decode("utf-8", "replace")


def _error_row(rid: str, payload: Any, message: str, code: int) -> dict[str, Any]:
    sha = hashlib.sha256(_input_bytes(payload)).hexdigest() if payload is not None else None
    return {"id": rid, "ok": False, "error": message, "error_code": code, "format": None, "level": None,
            "tokens_before": None, "tokens_after": None, "protected": None, "placeholders": None,
            "diagnostics": None, "evidence": None, "input_sha256": sha, "output_sha256": None, "output": None,
            "note": None}


def compact_record(record: Mapping[str, Any], config: BatchConfig | None = None) -> dict[str, Any]:
    """Compact one record; never raises for bad input (the row says ``ok: False`` and why)."""
    from .emit import render

    cfg = config if config is not None else BatchConfig()
    rid, payload = "<record>", None
    try:
        rid, payload = _payload(record)
        comp = _compactor_for(cfg)
        if cfg.mode == "trim":
            return _trim_record(rid, payload, cfg, comp.counter)
        doc = compactor.load_document(payload, format=cfg.format, source=rid,
                                      max_json_depth=cfg.compactor.max_json_depth)
        result = comp.compact(doc)
        text = render(result, cfg.emit, lang=cfg.compactor.lang)
        counter = comp.counter
        rep = result.report
        kept = None
        if cfg.emit == "messages" and isinstance(payload, (str, bytes)):
            text, kept = _never_larger(result, text, payload)
        families: dict[str, int] = {}
        for sp in rep.protected:
            families[sp.family] = families.get(sp.family, 0) + 1
        return {
            "id": rid,
            "ok": True,
            "error": None,
            "error_code": None,
            "format": result.format,
            "level": rep.level,
            "tokens_before": counter.count(_input_text(payload, result.format)),
            "tokens_after": counter.count(text),
            "protected": len(rep.protected),
            "placeholders": len(rep.placeholders),
            "diagnostics": len(rep.diagnostics) + (kept is not None),
            "evidence": json.dumps(dict(sorted(families.items())), separators=(",", ":")),
            "input_sha256": hashlib.sha256(_input_bytes(payload)).hexdigest(),
            "output_sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
            "output": text,
            "note": kept,
        }
    except CompactorError as exc:
        line = exc.one_line()
        return _error_row(rid, payload, line if line.startswith(rid) else f"{rid}: {line}", exc.exit_code)
    except RecursionError:
        return _error_row(rid, payload, f"{rid}: input nested too deeply to process", 2)
    except MemoryError:
        return _error_row(rid, payload, f"{rid}: out of memory", 1)
    except Exception as exc:  # noqa: BLE001 - one bad record must not stop a corpus
        detail = " ".join(str(exc).split())[:300]
        return _error_row(rid, payload, f"{rid}: internal error: {type(exc).__name__}: {detail}", 1)


def _never_larger(result: Any, text: str, payload: str | bytes) -> tuple[str, str | None]:
    """The output in the input's own layout, or the input itself when nothing was compacted (byte
    for byte) or when the written result would be larger than the input (and why)."""
    raw = payload if isinstance(payload, str) else _decoded(payload)
    if raw is None:
        return text, None
    if result.unchanged:
        return raw, None
    written, size = len(text.encode("utf-8", "surrogatepass")), len(raw.encode("utf-8", "surrogatepass"))
    if written > size:
        return raw, (f"the compacted output ({written} bytes) would be larger than the input ({size} bytes): "
                     "the input is written as it is")
    return text, None


def _decoded(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _trim_record(rid: str, payload: Any, cfg: BatchConfig, counter: Any) -> dict[str, Any]:
    """A log through :func:`compactor.trim`, with the receipt line as ``compactor trim`` writes it."""
    if isinstance(payload, str):
        payload = payload.encode("utf-8", "surrogatepass")
    if not isinstance(payload, bytes):
        raise InputError("trim takes a log (text or bytes), not parsed messages", source=rid)
    result = compactor.trim(payload, source=rid, rules=cfg.compactor.rules, context=cfg.compactor.context_lines, receipt=True)
    text, stats = result.text, result.stats
    return {
        "id": rid, "ok": True, "error": None, "error_code": None, "format": "log",
        "level": 1 if stats.folded else 0,
        "tokens_before": counter.count(payload.decode("utf-8", "replace")),
        "tokens_after": counter.count(text),
        "protected": stats.protected_lines, "placeholders": stats.regions, "diagnostics": stats.rule_timeouts,
        "evidence": json.dumps({"protected-lines": stats.protected_lines}, separators=(",", ":")),
        "input_sha256": hashlib.sha256(payload).hexdigest(),
        "output_sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
        "output": text,
        "note": None,
    }


def compact_batch(records: Iterable[Mapping[str, Any]], config: BatchConfig | None = None) -> list[dict[str, Any]]:
    """:func:`compact_record` over each record, in order."""
    cfg = config if config is not None else BatchConfig()
    return [compact_record(r, cfg) for r in records]


# ---------------------------------------------------------------------------- files


def output_name(rel: str, emit: str, mode: str = "compact") -> str:
    return rel if mode == "trim" else rel + _EMIT_SUFFIX[emit]


def discover(inputs: Sequence[str], *, exclude_dirs: Sequence[Path] = (), include: Sequence[str] = (),
             exclude: Sequence[str] = (), exclude_files: Sequence[Path] = ()) -> list[tuple[Path, str]]:
    """Expand files, directories (recursively, hidden entries skipped) and globs into
    ``(path, name)`` pairs, where the name is the path relative to the common root of the
    arguments: unique, and the same whatever order or worker count."""
    skip = {p.resolve() for p in exclude_dirs}
    skip_files = {p.resolve() for p in exclude_files}
    found: dict[Path, None] = {}
    roots: list[Path] = []

    def wanted(p: Path) -> bool:
        name = p.name
        if include and not any(fnmatch.fnmatch(name, g) for g in include):
            return False
        return not any(fnmatch.fnmatch(name, g) for g in exclude)

    def walk(d: Path) -> None:
        for base, dirs, files in os.walk(d):
            b = Path(base)
            dirs[:] = sorted(x for x in dirs if not x.startswith(".") and (b / x).resolve() not in skip
                             and not (b / x).is_symlink())
            for f in sorted(files):
                p = b / f
                if not f.startswith(".") and p.is_file() and wanted(p) and p.resolve() not in skip_files:
                    found.setdefault(p.resolve())

    for arg in inputs:
        p = Path(arg)
        if p.is_dir():
            roots.append(p.resolve())
            walk(p)
        elif p.is_file():
            roots.append(p.resolve().parent)
            found.setdefault(p.resolve())
        elif glob.has_magic(arg):
            matches = sorted(glob.glob(arg, recursive=True))
            if not matches:
                raise InputError("no file matches this pattern", source=arg)
            for m in matches:
                q = Path(m)
                if q.is_dir():
                    roots.append(q.resolve())
                    walk(q)
                elif q.is_file() and wanted(q):
                    roots.append(q.resolve().parent)
                    found.setdefault(q.resolve())
        elif p.exists():
            raise InputError("not a regular file or directory", source=arg)
        else:
            raise InputError("no such file or directory; check the path", source=arg)
    if not found:
        raise InputError("no input files found", source=" ".join(inputs)[:200] or "<none>")
    root = Path(os.path.commonpath([str(r) for r in roots]))
    out = [(p, p.relative_to(root).as_posix()) for p in found]
    return sorted(out, key=lambda t: t[1])


@dataclass(frozen=True)
class FileTask:
    """One input file: where it is, the name of its output, and what a previous run recorded."""

    path: str
    name: str
    out: str
    size: int
    previous: Mapping[str, Any] | None = None


def _sha_file(path: str) -> str | None:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


def _entry(task: FileTask, row: Mapping[str, Any], fingerprint: str, out: str | None = None) -> dict[str, Any]:
    ev = row.get("evidence")
    return {
        "input": task.name,
        "output": out,
        "ok": bool(row.get("ok")),
        "skipped": False,
        "layout": row.get("format"),
        "bytes": task.size,
        "tokens_before": row.get("tokens_before"),
        "tokens_after": row.get("tokens_after"),
        "level": row.get("level"),
        "protected": row.get("protected"),
        "evidence": json.loads(ev) if isinstance(ev, str) else ev,
        "placeholders": row.get("placeholders"),
        "diagnostics": row.get("diagnostics"),
        "input_sha256": row.get("input_sha256"),
        "output_sha256": row.get("output_sha256"),
        "config": fingerprint,
        "error": row.get("error"),
        "error_code": row.get("error_code"),
        "note": row.get("note"),
    }


def run_file_task(task: FileTask, config: BatchConfig, fingerprint: str) -> dict[str, Any]:
    """Compact one file into its output (written atomically); return its report entry.

    A previous entry with the same input hash, fingerprint and an intact output is returned
    as skipped without compacting again."""
    prev = task.previous
    try:
        data = Path(task.path).read_bytes()
    except OSError as exc:
        row = _error_row(task.name, None, f"{task.name}: cannot read: {exc.strerror}", 2)
        return _entry(task, row, fingerprint)
    if prev and prev.get("ok") and prev.get("config") == fingerprint \
            and prev.get("input_sha256") == hashlib.sha256(data).hexdigest() \
            and prev.get("output_sha256") and _sha_file(task.out) == prev.get("output_sha256"):
        entry = dict(prev)
        entry["skipped"] = True
        entry["bytes"] = task.size
        return entry
    row = compact_record({"id": task.name, "data": data}, config)
    del data
    if row["ok"]:
        try:
            write_text_atomic(Path(task.out), row["output"], keep_mode=True)
        except OSError as exc:
            row = {**row, "ok": False, "error": f"{task.out}: cannot write output: {exc.strerror}", "error_code": 1,
                   "output_sha256": None}
    return _entry(task, row, fingerprint, output_name(task.name, config.emit, config.mode) if row["ok"] else None)


# ---------------------------------------------------------------------------- driver


@dataclass
class BatchSummary:
    entries: list[dict[str, Any]] = field(default_factory=list)
    report: Path | None = None
    seconds: float = 0.0

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [e for e in self.entries if not e["ok"]]

    def exit_code(self) -> int:
        codes = [e.get("error_code") or 1 for e in self.failed]
        if not codes:
            return 0
        return 2 if 2 in codes else 1

    def table(self) -> str:
        rows: dict[str, list[int]] = {}
        for e in self.entries:
            key = e["layout"] or "(failed)"
            r = rows.setdefault(key, [0, 0, 0, 0, 0, 0])
            r[0] += 1
            r[1] += 1 if e["ok"] and not e["skipped"] else 0
            r[2] += 1 if e["skipped"] else 0
            r[3] += 0 if e["ok"] else 1
            r[4] += e["tokens_before"] or 0
            r[5] += e["tokens_after"] or 0
        total = [sum(r[i] for r in rows.values()) for i in range(6)]
        head = f"{'layout':<14} {'files':>6} {'done':>6} {'skipped':>7} {'failed':>6} {'tokens before':>14} {'tokens after':>13} {'saved':>6}"
        lines = [head, "-" * len(head)]

        def fmt(name: str, r: list[int]) -> str:
            saved = f"{1 - r[5] / r[4]:.1%}" if r[4] else "-"
            return (f"{name:<14} {r[0]:>6} {r[1]:>6} {r[2]:>7} {r[3]:>6} {r[4]:>14,} {r[5]:>13,} {saved:>6}")

        for name in sorted(rows):
            lines.append(fmt(name, rows[name]))
        lines.append("-" * len(head))
        lines.append(fmt("total", total))
        return "\n".join(lines) + "\n"


def _load_previous(report: Path) -> dict[str, dict[str, Any]]:
    prev: dict[str, dict[str, Any]] = {}
    try:
        fh = open(report, encoding="utf-8")
    except OSError:
        return prev
    with fh:
        for line in fh:
            try:
                e = json.loads(line)
            except ValueError:
                continue  # a line cut short by an interrupted run
            if isinstance(e, dict) and isinstance(e.get("input"), str):
                prev[e["input"]] = e
    return prev


def _dump_entry(e: Mapping[str, Any]) -> str:
    return json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n"


class _Progress:
    """tqdm on a terminal (files, MB, rate, ETA); nothing at all otherwise."""

    def __init__(self, total_bytes: int, files: int, enabled: bool):
        self.bar = None
        self.files = files
        self.done = 0
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:  # pragma: no cover - tqdm is a dependency
                return
            self.bar = tqdm(total=total_bytes, unit="B", unit_scale=True, unit_divisor=1024, desc="compacting",
                            file=sys.stderr, dynamic_ncols=True, smoothing=0.1)
            self.bar.set_postfix_str(f"0/{files} files")

    def update(self, nbytes: int) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(nbytes)
            self.bar.set_postfix_str(f"{self.done}/{self.files} files", refresh=False)

    def write(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
        else:
            sys.stderr.write(line + "\n")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run(inputs: Sequence[str], out_dir: str | os.PathLike[str], config: BatchConfig, *, workers: int | None = None,
        runner: Callable[..., Iterable[dict[str, Any]]] | None = None, resume: bool = True, report: str | None = None,
        include: Sequence[str] = (), exclude: Sequence[str] = (), progress: bool | None = None) -> BatchSummary:
    """Compact every input file into ``out_dir`` and write the JSONL report; see ``compactor batch``.

    By default a process pool of ``workers`` runs the files (in this process for one worker);
    ``runner(tasks, config, fingerprint, workers=n)`` replaces it with another engine (such as
    :func:`compactor.integrations.ray.run_file_tasks`) that yields one report entry per task."""
    out = Path(out_dir)
    report_path = Path(report) if report else out / "report.jsonl"
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a directory")
    found = discover(inputs, exclude_dirs=[out], include=include, exclude=exclude, exclude_files=[report_path])
    fingerprint = config.fingerprint()
    previous = _load_previous(report_path) if resume else {}
    tasks: list[FileTask] = []
    for path, name in found:
        target = out / output_name(name, config.emit, config.mode)
        if target.resolve() == report_path.resolve():
            raise ConfigError(f"the output of {path} would overwrite the report {report_path}; pass --report FILE")
        tasks.append(FileTask(str(path), name, str(target), path.stat().st_size, previous.get(name)))
    for folder, what in ((out, "--out"), (report_path.parent, "the report's folder")):
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create {what}: {exc.strerror or exc}; pass a folder you can write to",
                             source=str(folder)) from None
    n = workers if workers and workers > 0 else (os.cpu_count() or 1)
    show = sys.stderr.isatty() if progress is None else progress
    bar = _Progress(sum(t.size for t in tasks), len(tasks), show)
    started = time.perf_counter()
    entries: dict[str, dict[str, Any]] = {}
    # progress of this run is appended as it happens: an interrupted run resumes from it
    try:
        log = open(report_path, "a", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write the report: {exc.strerror or exc}; pass a folder you can write to",
                         source=str(report_path)) from None
    try:
        def done(entry: dict[str, Any], size: int) -> None:
            entries[entry["input"]] = entry
            log.write(_dump_entry(entry))
            log.flush()
            if not entry["ok"]:
                bar.write(f"compactor: {entry['error']}")
            bar.update(size)

        if runner is not None:
            for entry in runner(tasks, config, fingerprint, workers=n):
                done(entry, entry.get("bytes") or 0)
        elif n == 1:
            warm(config)
            for t in tasks:
                done(run_file_task(t, config, fingerprint), t.size)
        else:
            _pool_run(tasks, config, fingerprint, n, done)
    finally:
        bar.close()
        log.close()
    ordered = [entries[t.name] for t in tasks if t.name in entries]
    write_text_atomic(report_path, "".join(_dump_entry(e) for e in ordered), keep_mode=True)
    return BatchSummary(ordered, report_path, time.perf_counter() - started)


def _pool_worker(config: BatchConfig) -> None:
    # Ctrl-C is the parent's to handle: it stops handing out files and reports what finished
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    warm(config)


def _pool_run(tasks: list[FileTask], config: BatchConfig, fingerprint: str, n: int, done) -> None:
    from concurrent.futures.process import BrokenProcessPool

    # largest first: the long files start early and the pool ends together
    order = sorted(tasks, key=lambda t: (-t.size, t.name))
    pool = cf.ProcessPoolExecutor(max_workers=n, initializer=_pool_worker, initargs=(config,))
    try:
        futures = {pool.submit(run_file_task, t, config, fingerprint): t for t in order}
        for fut in cf.as_completed(futures):
            t = futures[fut]
            try:
                entry = fut.result()
            except BrokenProcessPool:
                row = _error_row(t.name, None, f"{t.name}: the worker process died (out of memory?); "
                                               "run again to resume, with fewer --workers", 1)
                entry = _entry(t, row, fingerprint)
            done(entry, t.size)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Read a JSONL report back."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)
