"""The ``compactor`` command line. It uses only the public API.

Exit codes: 0 ok, 1 runtime error, 2 usage or input error. Errors are one line on stderr
naming the file and position; ``-v`` adds the traceback. Data goes to stdout only; a closed
pipe is not an error.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from pathlib import Path
from typing import Any, Callable

__all__ = ["main"]

MB = 1024 * 1024  # figures are shown in MiB


def _dump(obj: Any) -> str:
    import json

    return json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=False) + "\n"


def _columns() -> int:
    """The terminal's width, as shutil.get_terminal_size() finds it (without importing shutil:
    argparse builds a help formatter for every option added)."""
    try:
        n = int(os.environ.get("COLUMNS", "0"))
        if n > 0:
            return n
    except ValueError:
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):
        return 80


class _Formatter(argparse.HelpFormatter):
    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # one line, exit 2
        from . import ConfigError

        sub = " ".join(self.prog.split()[1:])
        raise ConfigError(f"{message} (see 'compactor {sub} --help')" if sub else f"{message} (see 'compactor --help')")


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-v", "--verbose", action="store_true", help="show tracebacks on errors")
    p.add_argument("--rules", action="append", default=[], metavar="DIR", help="extra rule directory (repeatable)")
    p.add_argument("--store", metavar="PATH", default=None,
                   help="placeholder store: a directory or a .sqlite file (default: $COMPACTOR_STORE or ~/.cache/compactor/store.sqlite)")
    p.add_argument("--store-max-mb", metavar="MB", default=None,
                   help="size cap of the store; least recently used originals are evicted beyond it "
                        "(default: $COMPACTOR_STORE_MAX_MB or 256)")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given the arguments, only the command they name is built (a hook calling
    ``compactor trim`` on every tool call does not pay for every other command's options)."""
    from . import __version__

    parser = _Parser(prog="compactor", description="Deterministic context compaction for agent trajectories and logs.")
    parser.add_argument("--version", action="version", version=f"compactor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    command = argv[0] if argv and not argv[0].startswith("-") else None
    if command in _BUILDERS:
        _BUILDERS[command](sub)
        return parser
    for add in _BUILDERS.values():
        if add is _add_hook:
            _add_policy_commands(sub)
        add(sub)
    return parser


# ---------------------------------------------------------------------------- configuration flags
# Every field of CompactorConfig is a flag of 'compact' and 'batch' (--field-name), generated from
# the model: its type gives the flag's type or choices, its description the help. A new field
# gets its flag without editing this file. Fields with a flag of their own are listed here.

CONFIG_FLAGS_BY_HAND = {"rules": "--rules", "store": "--store"}  # the common flags (_add_common)


def config_flag(name: str) -> str:
    """The command-line flag of a CompactorConfig field."""
    return CONFIG_FLAGS_BY_HAND.get(name) or "--" + name.replace("_", "-")


def _config_fields() -> dict[str, Any]:
    from . import CompactorConfig

    return dict(CompactorConfig.model_fields)


def _flag_type(annotation: Any) -> tuple[str, tuple]:
    """('bool' | 'int' | 'float' | 'str' | 'choice' | 'list', choices) of a field's annotation."""
    import types
    import typing

    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return "choice", typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _flag_type(args[0])
    if origin in (tuple, list):
        return "list", ()
    for t in (bool, int, float, str):
        if annotation is t:
            return t.__name__, ()
    raise TypeError(f"no command-line form for a setting of type {annotation!r}")


def _add_config_flags(p: argparse.ArgumentParser) -> None:
    for name, f in _config_fields().items():
        if name in CONFIG_FLAGS_BY_HAND:
            continue
        kind, choices = _flag_type(f.annotation)
        text = (f.description or name.replace("_", " ")).split("\n")[0]
        if kind == "bool":
            if f.default:
                p.add_argument("--no-" + name.replace("_", "-"), dest=name, action="store_false", default=None,
                               help=text)
            else:
                p.add_argument(config_flag(name), dest=name, action="store_true", default=None, help=text)
            continue
        if f.default is not None:
            text += f" (default {f.default})"
        kw: dict[str, Any] = {"dest": name, "default": None, "help": text}
        if kind == "choice":
            kw["choices"] = [str(c) for c in choices]
        elif kind == "list":
            kw["action"] = "append"
        else:
            kw["type"] = {"int": int, "float": float, "str": str}[kind]
            kw["metavar"] = {"int": "N", "float": "X", "str": "TEXT"}[kind]
        p.add_argument(config_flag(name), **kw)


def config_options(args: argparse.Namespace) -> dict[str, Any]:
    """The compaction settings given on the command line, as CompactorConfig keyword arguments
    (settings not given are left to the model's defaults)."""
    out: dict[str, Any] = {}
    for name, f in _config_fields().items():
        if name in CONFIG_FLAGS_BY_HAND:
            continue
        value = getattr(args, name, None)
        if value is None or value == "":
            continue
        kind, choices = _flag_type(f.annotation)
        if kind == "choice":
            value = next(c for c in choices if str(c) == value)
        elif kind == "list":
            value = tuple(value)
        out[name] = value
    return out


# ---------------------------------------------------------------------------- commands' options


def _add_compact(sub) -> None:
    p = sub.add_parser("compact", help="compact a trajectory or log, in its own layout")
    p.add_argument("input", help="file, or - for standard input")
    p.add_argument("--format", default="auto", help="layout name (see 'compactor formats'), default auto")
    p.add_argument("--emit", default="json", choices=["json", "messages", "anchor", "markdown", "handoff", "report"],
                   help="what to print: json (default): the layout's name, the compacted messages, the anchor and "
                        "the report in one object; messages: the compacted conversation in its own layout (a file "
                        "the agent can read back); anchor: the working state as seed 000's six-field JSON memory "
                        "record; markdown: the working state as Markdown (--lang en|zh); handoff: a hand-off "
                        "document for a new session; report: tokens before and after, level, protected spans, "
                        "placeholders and diagnostics")
    p.add_argument("--stream", default="auto", choices=["auto", "never"],
                   help="auto (default): a large JSON trajectory is compacted message by message in bounded "
                        "memory when that gives the same output (see docs/memory.md); never: always read it whole")
    _add_config_flags(p)
    p.add_argument("-o", "--output", default=None, metavar="FILE", help=_OUTPUT_HELP)
    _add_common(p)


def _add_trim(sub) -> None:
    p = sub.add_parser("trim", help="trim a CI log: keep errors and traces, fold the rest (streaming)")
    p.add_argument("input", nargs="?", default="-", help="file, or - for standard input (default)")
    p.add_argument("--context", type=int, default=2, help="lines kept around protected lines")
    p.add_argument("--baseline", action="append", default=[], metavar="PASS.log",
                   help="log of a passing run of the same job: lines whose shape also occurs there fold first "
                        "(repeatable)")
    p.add_argument("--baseline-dir", action="append", default=[], metavar="DIR",
                   help="a directory of passing-run logs (every regular file in it, sorted), as --baseline")
    p.add_argument("--github", action="store_true",
                   help="GitHub Actions: up to 10 ranked ::error annotations, one ::group:: per fold, and a job "
                        "summary table appended to $GITHUB_STEP_SUMMARY")
    p.add_argument("--receipt", default="stdout", choices=["stdout", "stderr", "none"],
                   help="where the receipt line goes (written only when something was folded; default stdout)")
    p.add_argument("--no-receipt", action="store_true", help="same as --receipt none")
    p.add_argument("--keep-originals", action="store_true", help="store folded regions so they can be expanded")
    p.add_argument("-o", "--output", default=None, metavar="FILE", help=_OUTPUT_HELP)
    _add_common(p)


def _add_scan(sub) -> None:
    p = sub.add_parser("scan", help="print protected spans as JSON lines")
    p.add_argument("input", help="file, or - for standard input")
    p.add_argument("--format", default="auto")
    _add_common(p)


def _add_expand(sub) -> None:
    p = sub.add_parser("expand", help="print the exact original text behind a placeholder id")
    p.add_argument("id", help="placeholder id, e.g. c-3f9a0c17d2b4e881")
    _add_common(p)


def _add_formats(sub) -> None:
    p = sub.add_parser("formats", help="list the supported layouts and how each is detected")
    _add_common(p)


def _add_rules(sub) -> None:
    p = sub.add_parser("rules", help="list, explain and test rules")
    rsub = p.add_subparsers(dest="rules_command", metavar="ACTION", parser_class=_Parser)
    q = rsub.add_parser("list", help="list rules")
    q.add_argument("--stage", default=None, choices=["protect", "classify", "secret"])
    _add_common(q)
    q = rsub.add_parser("explain", help="show one rule")
    q.add_argument("id")
    _add_common(q)
    q = rsub.add_parser("test", help="run the examples of the rules in a directory")
    q.add_argument("dir")
    q.add_argument("-v", "--verbose", action="store_true")
    _add_common_rules_test(q)


def _add_mcp(sub) -> None:
    p = sub.add_parser("mcp", help="serve compactor's tools to an agent over MCP (stdio; needs the 'mcp' extra), "
                                   "or register them in a client: 'compactor mcp install --client NAME'",
                       description="Without an action: serve compactor's MCP tools over stdio (what a client starts). "
                                   "'install' / 'uninstall': add or remove the server in a client's own configuration.")
    p.add_argument("--max-tokens", type=int, default=None, metavar="N",
                   help="default bound on every tool result (default: 80%% of $MAX_MCP_OUTPUT_TOKENS, else 20000)")
    _add_common(p)
    msub = p.add_subparsers(dest="mcp_command", metavar="ACTION", parser_class=_Parser)
    for action, text in (("install", "write the MCP server entry into a client's configuration (idempotent)"),
                         ("uninstall", "remove the MCP server entry from a client's configuration")):
        q = msub.add_parser(action, help=text, description=text + ". Clients and files (user scope / project "
                            "scope): claude-code ~/.claude.json / .mcp.json; codex ~/.codex/config.toml / "
                            ".codex/config.toml; gemini ~/.gemini/settings.json / .gemini/settings.json; "
                            "cursor ~/.cursor/mcp.json / .cursor/mcp.json. The rest of the file is kept.")
        q.add_argument("--client", required=True, choices=["claude-code", "codex", "gemini", "cursor"])
        q.add_argument("--scope", default="user", choices=["user", "project"],
                       help="user (default): every project; project: the project's shared file")
        q.add_argument("--project-dir", default=None, metavar="DIR", help="with --scope project: the project (default .)")
        q.add_argument("--path", default=None, metavar="FILE", help="write this configuration file instead")
        q.add_argument("--name", default="compactor", help="the server's name in the client (default compactor)")
        if action == "install":
            q.add_argument("--print", action="store_true", dest="print_only",
                           help="print the entry (as the client's file holds it) instead of writing it")
        q.add_argument("-v", "--verbose", action="store_true", help="show tracebacks on errors")


def _add_store(sub) -> None:
    p = sub.add_parser("store", help="placeholder store upkeep: stats, prune")
    ssub = p.add_subparsers(dest="store_command", metavar="ACTION", parser_class=_Parser)
    q = ssub.add_parser("stats", help="entries, bytes, cap, evicted ids, size on disk")
    q.add_argument("--json", action="store_true", help="print JSON")
    _add_common(q)
    q = ssub.add_parser("prune", help="evict least recently used originals down to the cap (or --to-mb)")
    q.add_argument("--to-mb", metavar="MB", default=None, help="target size (default: the cap)")
    q.add_argument("--json", action="store_true", help="print JSON")
    _add_common(q)


def _add_hook(sub) -> None:
    p = sub.add_parser("hook", help="agent hooks: 'compactor hook claude-code --help'", add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)


def _add_batch_command(sub) -> None:
    p = sub.add_parser("batch", help="compact many files (directories, globs) into --out DIR, in parallel, resumable")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="files, directories (recursive) or glob patterns")
    p.add_argument("--out", required=True, metavar="DIR", help="one output per input here, same relative names")
    p.add_argument("--workers", type=int, default=None, metavar="N", help="parallel workers (default: the CPUs)")
    p.add_argument("--engine", default="stdlib", choices=["stdlib", "ray"],
                   help="stdlib: a process pool on this machine; ray: Ray Data (local, or $RAY_ADDRESS)")
    p.add_argument("--report", default=None, metavar="FILE", help="JSONL report (default DIR/report.jsonl)")
    p.add_argument("--no-resume", action="store_true", help="compact every input again, even those already done")
    p.add_argument("--include", action="append", default=[], metavar="GLOB", help="only file names matching (repeatable)")
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB", help="skip file names matching (repeatable)")
    p.add_argument("--trim", action="store_true",
                   help="CI logs: each input through 'compactor trim' (errors and traces kept, the rest folded)")
    p.add_argument("--context", type=int, default=None, metavar="N", help="with --trim: lines kept around protected lines")
    p.add_argument("--format", default="auto", help="layout name (see 'compactor formats'), default auto per file")
    p.add_argument("--emit", default="messages", choices=["messages", "json", "anchor", "markdown", "report"],
                   help="messages (default): each input in its own layout, under its own name; json: layout, "
                        "messages, anchor and report (.compact.json); anchor: the six-field memory record "
                        "(.anchor.json); markdown: the working state (.anchor.md); report: the report (.report.json)")
    _add_config_flags(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar (it only shows on a terminal anyway)")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary table")
    _add_common(p)


_BUILDERS: dict[str, Callable[[Any], None]] = {
    "compact": _add_compact, "trim": _add_trim, "batch": _add_batch_command, "scan": _add_scan,
    "expand": _add_expand, "formats": _add_formats, "rules": _add_rules, "mcp": _add_mcp, "store": _add_store,
    "hook": _add_hook,
}


def _add_common_rules_test(q: argparse.ArgumentParser) -> None:
    q.add_argument("--store", default=None, help=argparse.SUPPRESS)
    q.add_argument("--rules", action="append", default=[], help=argparse.SUPPRESS)


def _add_policy_commands(sub) -> None:
    """check / audit / memory: the tools built on the public API."""
    try:
        from .tools import cli as tools_cli
    except ImportError:
        return
    tools_cli.add_commands(sub, _add_common)


# ---------------------------------------------------------------------------- helpers


_OUTPUT_HELP = ("write to FILE instead of standard output: whole or not at all (a failed run leaves FILE as it "
                "was); FILE may be the input itself")


class _Output:
    """Where a command writes: standard output, or the file ``-o`` names, written whole or not at
    all. The text goes to a temporary file beside it, renamed into place when the command
    succeeds and removed when it fails: a failed run leaves the old file as it was, and ``-o``
    may name the input itself (it is read to its end before it is replaced). A path that is not
    a regular file (``/dev/null``, a pipe) is written as it is. A replaced file keeps its
    permissions; a new one gets the umask's.

    ``source``: the input file, when the output is the input in its own layout. The output is then
    held (in the temporary file) until it is complete, and the input's own bytes are written
    instead when nothing was compacted (:attr:`unchanged`, set by the caller: byte for byte the
    input) or when the written output would be larger than the input (:attr:`kept` says why)."""

    def __init__(self, path: str | None, source: Path | None = None):
        self.path = None if path is None or path == "-" else Path(path)
        self.fh: Any = sys.stdout
        self.tmp: str | None = None
        self.source = source
        self.unchanged = False
        self.kept: str | None = None
        self._direct = False  # writing straight to a device or pipe named by -o

    def __enter__(self):
        p = self.path
        if p is None and self.source is None:
            return self.fh
        try:
            if p is not None and p.exists() and not p.is_file():
                self.fh = open(p, "w", encoding="utf-8", newline="")
                self._direct = self.source is None
                if self.source is not None:
                    self.fh.close()
                    self.fh = self._spool()
            elif p is None:
                self.fh = self._spool()
            else:
                import tempfile  # here: a run that writes to standard output never pays for it

                fd, self.tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=str(p.parent))
                self.fh = os.fdopen(fd, "w", encoding="utf-8", newline="")
        except OSError as exc:
            raise self._error(exc) from None
        return self.fh

    @staticmethod
    def _spool() -> "_Held":
        return _Held()

    def _error(self, exc: OSError):
        from . import InputError

        return InputError(f"cannot write output: {exc.strerror or exc}", source=str(self.path or "<stdout>"))

    def _keep_input(self) -> bool:
        """Whether the input's own bytes are the output (see the class); sets :attr:`kept`."""
        if self.source is None:
            return False
        if self.unchanged:
            return True
        self.fh.flush()
        written = self.fh.buffer.tell()
        size = self.source.stat().st_size
        if written > size:
            self.kept = (f"the compacted output ({written} bytes) would be larger than the input ({size} bytes): "
                         "the input is written as it is")
            return True
        return False

    def _copy_to(self, dest, keep: bool) -> None:
        """The held output (or the input, ``keep``) into the text stream ``dest``."""
        dest.flush()
        target = getattr(dest, "buffer", dest)
        if keep:
            with open(self.source, "rb") as src:
                for block in iter(lambda: src.read(1 << 20), b""):
                    target.write(block)
        else:
            self.fh.flush()
            self.fh.buffer.copy_to(target)
        target.flush()

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self.path is None and self.source is None:
            if exc_type is None:
                self.fh.flush()
            return False
        if self.path is None or (self.tmp is None and not self._direct):  # held: standard output or a device
            try:
                if exc_type is None:
                    keep = self._keep_input()
                    if self.path is None:
                        self._copy_to(sys.stdout, keep)
                    else:
                        with open(self.path, "w", encoding="utf-8", newline="") as dest:
                            self._copy_to(dest, keep)
            except OSError as e:
                if exc_type is None and not isinstance(e, BrokenPipeError):
                    raise self._error(e) from None
                if isinstance(e, BrokenPipeError):
                    raise
            finally:
                self.fh.close()
            return False
        tmp, self.tmp = self.tmp, None
        try:
            if tmp is not None and exc_type is None and self._keep_input():
                self.fh.close()
                import shutil

                shutil.copyfile(self.source, tmp)
            self.fh.close()
            if tmp is not None and exc_type is None:
                try:
                    mode = self.path.stat().st_mode & 0o7777  # the replaced file's permissions
                except OSError:
                    mask = os.umask(0)
                    os.umask(mask)
                    mode = 0o666 & ~mask  # as a new file would have them
                os.chmod(tmp, mode)
                os.replace(tmp, self.path)
                tmp = None
        except OSError as e:
            if exc_type is None:
                raise self._error(e) from None
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        return False


class _HeldBytes:
    """The bytes of a held output: in memory up to 8 MiB, then in a temporary file (imported only
    then: a short run does not pay for it)."""

    LIMIT = 8 << 20

    def __init__(self) -> None:
        self._mem = io.BytesIO()
        self._file: Any = None

    def write(self, data: bytes) -> int:
        if self._file is None:
            self._mem.write(data)
            if self._mem.tell() > self.LIMIT:
                import tempfile

                self._file = tempfile.TemporaryFile()
                self._file.write(self._mem.getbuffer())
                self._mem = io.BytesIO()
        else:
            self._file.write(data)
        return len(data)

    def flush(self) -> None:
        pass

    def tell(self) -> int:
        return self._mem.tell() if self._file is None else self._file.tell()

    def copy_to(self, target) -> None:
        if self._file is None:
            target.write(self._mem.getbuffer())
            return
        self._file.seek(0)
        for block in iter(lambda: self._file.read(1 << 20), b""):
            target.write(block)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


class _Held:
    """A text stream whose UTF-8 bytes are held (:class:`_HeldBytes`, its ``buffer``) until the
    command is done with it."""

    def __init__(self) -> None:
        self.buffer = _HeldBytes()

    def write(self, text: str) -> int:
        self.buffer.write(text.encode("utf-8"))
        return len(text)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.buffer.close()


def _stream_compact(comp, args, stream_compact) -> bool:
    """Compact the input by the fold, written through an :class:`_Output` opened on the first
    write: False (nothing opened, nothing written) when the fold leaves the file to the in-memory
    path. Opened only then, a pipe or device named by ``-o`` is opened once."""
    out = _Output(args.output, Path(args.input) if args.emit == "messages" else None)
    fh = None

    def write(text: str) -> None:
        nonlocal fh
        if fh is None:
            fh = out.__enter__()
        fh.write(text)

    try:
        report = stream_compact(comp, args.input, write, emit=args.emit, format=args.format, min_bytes=None)
    except BaseException as exc:
        if fh is not None:
            out.__exit__(type(exc), exc, exc.__traceback__)
        raise
    if report is None:
        return False
    if fh is None:
        fh = out.__enter__()
    out.unchanged = report.level == 0 and report.tokens_after == report.tokens_before
    out.__exit__(None, None, None)
    _kept_warning(out)
    return True


def _kept_warning(out: "_Output") -> None:
    if out.kept:
        sys.stderr.write(f"compactor: note: {out.kept}\n")


def _store_spec(args) -> str:
    from . import default_store_path

    return args.store or str(default_store_path())


def _open_store(args):
    from . import open_store

    return open_store(_store_spec(args), max_mb=getattr(args, "store_max_mb", None))


def _compactor(args, **options):
    from . import Compactor

    return Compactor(rules=tuple(args.rules), store=_open_store(args), **options)


# ---------------------------------------------------------------------------- commands


def _read_warnings(doc, args) -> None:
    """What reading changed or guessed, on stderr (bytes replaced, JSON read as text): the output
    alone would not say. A layout forced by ``--format`` is not a guess."""
    for d in doc.diagnostics:
        if d.severity == "info" or (d.code == "json-read-as-text" and args.format != "auto"):
            continue
        sys.stderr.write(f"compactor: warning: {d.message}\n")


def cmd_compact(args) -> int:
    from . import load_document, render, render_to, stream_compact

    comp = _compactor(args, **config_options(args))
    if args.emit in ("json", "messages") and args.input != "-" and getattr(args, "stream", "auto") == "auto":
        # a JSON file the fold compacts exactly as the in-memory pipeline does: in bounded memory
        # (with the collector running: paused, the garbage cycles of the whole run would pile up)
        _resume_gc()
        if _stream_compact(comp, args, stream_compact):
            return 0
    # a Path: '-' is standard input
    doc = load_document(Path(args.input), format=args.format, max_json_depth=comp.config.max_json_depth)
    doc.disposable = True  # read here and used once: written in place, not copied
    _resume_gc()
    _read_warnings(doc, args)
    result = comp.compact(doc)  # the raw text is no longer referenced: a large input is not held twice
    if args.emit not in ("json", "messages"):
        text = render(result, args.emit, lang=comp.config.lang)  # errors (no anchor) before the output opens
    # the input in its own layout: never larger than it came, and itself when nothing was compacted
    # (an input whose undecodable bytes were replaced is written decoded, as the warning said)
    source = Path(args.input) if args.emit == "messages" and args.input != "-" and Path(args.input).is_file() \
        and not any(d.code == "invalid-utf8" for d in result.report.diagnostics) else None
    output = _Output(args.output, source)
    output.unchanged = result.unchanged
    with output as out:
        if args.emit in ("json", "messages"):
            render_to(result, args.emit, out, lang=comp.config.lang)  # streamed: never one string
        else:
            out.write(text)
    _kept_warning(output)
    return 0


def cmd_batch(args) -> int:
    from .batch import BatchConfig, run

    options: dict[str, Any] = {**config_options(args), "rules": tuple(args.rules), "store": _store_spec(args)}
    if args.workers is not None and args.workers < 1:
        from . import ConfigError

        raise ConfigError("--workers must be at least 1")
    if args.context is not None:
        options["context_lines"] = max(0, args.context)
    config = BatchConfig.from_options(format=args.format, emit=args.emit, mode="trim" if args.trim else "compact",
                                      **options)
    runner = None
    if args.engine == "ray":
        from .integrations.ray import run_file_tasks as runner
    summary = run(args.inputs, args.out, config, workers=args.workers, runner=runner, resume=not args.no_resume,
                  report=args.report, include=args.include, exclude=args.exclude,
                  progress=False if args.no_progress else None)
    if not args.quiet:
        sys.stdout.write(summary.table())
        files = len(summary.entries)
        rate = files / summary.seconds if summary.seconds > 0 else 0.0
        sys.stdout.write(f"{files} files in {summary.seconds:.1f} s ({rate:.1f} files/s); report: {summary.report}\n")
        sys.stdout.flush()
    if summary.failed:
        _err(f"compactor: {len(summary.failed)} of {len(summary.entries)} inputs failed; see {summary.report}")
    return summary.exit_code()


def cmd_trim(args) -> int:
    from . import TrimOptions, github_summary, trim_to

    receipt = "none" if args.no_receipt else args.receipt
    opts = TrimOptions(context=max(0, args.context), github=args.github, receipt=receipt == "stdout")
    baseline = _load_baselines(args.baseline, args.baseline_dir)
    store = _open_store(args) if args.keep_originals else None
    _resume_gc()
    if args.input != "-":
        _check_log_path(Path(args.input), args.input)
    # a file (not standard input) is never written back larger than it is: the output is held
    # until it is complete (the receipt and the annotations of --github are extra lines by design)
    source = Path(args.input) if args.input != "-" and not args.github and Path(args.input).is_file() else None
    output = _Output(args.output, source)
    try:
        with output as out:
            # the middle of a line too long to keep goes to the store (opened only then): its ref expands it
            cuts = lambda: _open_store(args)  # noqa: E731
            if args.input == "-":
                stats = trim_to(out, sys.stdin.buffer, options=opts, rules=args.rules, store=store, baseline=baseline,
                                cut_store=cuts)
            else:
                stats = trim_to(out, args.input, options=opts, rules=args.rules, store=store, baseline=baseline,
                                cut_store=cuts)
    except BrokenPipeError:
        # the reader went away: keep reading standard input to its end, so the producer upstream
        # is not killed by SIGPIPE and its exit status (set -o pipefail) stays its own
        if args.input == "-":
            while sys.stdin.buffer.read(1 << 20):
                pass
        raise
    _kept_warning(output)
    if receipt == "stderr" and stats.folded and not output.kept:
        sys.stderr.write(stats.receipt() + "\n")
    summary_path = os.environ.get("GITHUB_STEP_SUMMARY")
    if args.github and summary_path:
        with open(summary_path, "a", encoding="utf-8") as fh:
            fh.write(github_summary(stats, stats.annotations))
    return 0


def _check_log_path(p: Path, name: str) -> None:
    from . import InputError

    if not p.exists():
        raise InputError("no such file; check the path", source=name)
    if p.is_dir():
        raise InputError("is a directory; pass a file (or - for standard input)", source=name)


def _load_baselines(files: list[str], dirs: list[str]):
    from . import Baseline
    from . import InputError

    paths: list[Path] = []
    for f in files:
        p = Path(f)
        _check_log_path(p, f)
        paths.append(p)
    for d in dirs:
        q = Path(d)
        if not q.is_dir():
            raise InputError("not a directory; --baseline-dir takes a folder of passing-run logs", source=d)
        found = sorted(x for x in q.iterdir() if x.is_file())
        if not found:
            raise InputError("no log files in this directory", source=d)
        paths.extend(found)
    if not paths:
        return None
    return Baseline.from_paths(paths)


def cmd_scan(args) -> int:
    import json

    from . import Compactor, load_document

    doc = load_document(args.input if args.input != "-" else sys.stdin.buffer.read(), format=args.format)
    _read_warnings(doc, args)
    comp = Compactor(rules=tuple(args.rules))
    out = sys.stdout
    for seg in doc.segments:
        if seg.kind == "tool_call":
            continue  # actions stay verbatim; their arguments are code, not evidence
        diags: list = []
        for sp in comp.scan(seg.text, role=seg.role.value, segment_id=seg.id, step_id=seg.step_id, diagnostics=diags):
            out.write(json.dumps(sp.model_dump(mode="json"), ensure_ascii=False) + "\n")
        for d in diags:
            sys.stderr.write(f"compactor: warning: {d.message} (segment {seg.id})\n")
    return 0


def cmd_expand(args) -> int:
    store = _open_store(args)
    data = store.get(args.id)  # a malformed id is refused, naming the expected form
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
    return 0


def cmd_formats(args) -> int:
    from . import FORMATS

    for fmt in FORMATS:
        sys.stdout.write(f"{fmt.name:<14} {fmt.title}\n{'':<14} detected by: {fmt.detection}\n")
    return 0


def cmd_rules(args) -> int:
    from . import check_rule_dir, load_rules

    action = getattr(args, "rules_command", None)
    if action in (None, "list"):
        rs = load_rules(args.rules)
        stage = getattr(args, "stage", None)
        for r in rs:
            if stage and r.stage != stage:
                continue
            flag = "" if r.enabled else " (disabled)"
            sys.stdout.write(f"{r.id:<36} {r.stage:<8} {r.kind:<10} {r.family:<16} {r.description.splitlines()[0][:80]}{flag}\n")
        return 0
    if action == "explain":
        rs = load_rules(args.rules)
        rule = rs.by_id.get(args.id)
        if rule is None:
            from . import ConfigError

            close = sorted(i for i in rs.by_id if args.id.split(".")[0] in i)[:5]
            raise ConfigError(f"no rule {args.id!r}" + (f"; did you mean: {', '.join(close)}" if close else "; see 'compactor rules list'"))
        d = rule.model_dump(mode="json", by_alias=True, exclude_none=True)
        sys.stdout.write(_dump(d))
        return 0
    if action == "test":
        results = check_rule_dir(args.dir)
        failed = [r for r in results if not r.ok]
        for r in results:
            if not r.ok or args.verbose:
                sys.stdout.write(f"{'ok  ' if r.ok else 'FAIL'} {r.test_id}  {r.detail}\n")
        sys.stdout.write(f"{len(results) - len(failed)} passed, {len(failed)} failed\n")
        return 1 if failed else 0
    return 2


def cmd_mcp(args) -> int:
    action = getattr(args, "mcp_command", None)
    if action is not None:
        return _mcp_install(args, action)
    try:
        from .integrations.mcp_server import MIN_MAX_TOKENS, run_stdio
    except ImportError as exc:
        from . import ConfigError

        raise ConfigError(f"{exc}") from None
    if args.max_tokens is not None and args.max_tokens < MIN_MAX_TOKENS:
        from . import ConfigError

        raise ConfigError(f"argument --max-tokens: at least {MIN_MAX_TOKENS}")
    run_stdio(store=_store_spec(args), rules=tuple(args.rules), max_tokens=args.max_tokens)
    return 0


def _mcp_install(args, action: str) -> int:
    from .integrations import mcp_install
    from .integrations.claude_code import _compactor_exe

    where = dict(scope=args.scope, project_dir=args.project_dir, path=args.path, name=args.name)
    if action == "uninstall":
        path, changed = mcp_install.uninstall(args.client, **where)
        sys.stdout.write(f"{'removed' if changed else 'no'} MCP server {args.name!r} {'from' if changed else 'in'} {path}\n")
        return 0
    exe = _compactor_exe()
    margs: tuple[str, ...] = ("mcp",)
    if not os.path.isabs(exe):  # no 'compactor' script on PATH: the interpreter running this one
        exe, margs = sys.executable, ("-m", "compactor", "mcp")
    if args.print_only:
        target = Path(args.path) if args.path else mcp_install.config_path(args.client, args.scope, args.project_dir)
        sys.stdout.write(f"# {target}\n" + mcp_install.render(args.client, args.name,
                                                               mcp_install.entry(args.client, exe, margs)))
        return 0
    try:
        path, changed = mcp_install.install(args.client, exe=exe, args=margs, **where)
    except OSError as exc:
        from . import InputError

        raise InputError(f"cannot write the configuration: {exc.strerror}",
                         source=str(getattr(exc, "filename", "") or args.path or args.client)) from None
    sys.stdout.write(f"{'installed' if changed else 'already installed:'} MCP server {args.name!r} "
                     f"({' '.join((exe, *margs))}) in {path}\n")
    return 0

def cmd_store(args) -> int:
    action = getattr(args, "store_command", None)
    if action is None:
        from . import ConfigError

        raise ConfigError("missing action: 'compactor store stats' or 'compactor store prune'")
    if not Path(_store_spec(args)).exists():
        from . import InputError

        raise InputError("no store here yet (nothing was compacted with this store)", source=_store_spec(args))
    store = _open_store(args)
    if action == "stats":
        st = store.stats()
        if args.json:
            sys.stdout.write(_dump(st.to_dict()))
            return 0
        cap = f"{st.max_bytes / MB:g} MB" if st.max_bytes else "none"
        sys.stdout.write(f"store       {st.location} ({st.backend})\n"
                         f"entries     {st.entries}\n"
                         f"originals   {st.bytes / MB:.2f} MB ({st.bytes} bytes)\n"
                         f"cap         {cap}\n"
                         f"evicted ids {st.evicted} (expanding one says so)\n"
                         f"on disk     {st.disk_bytes / MB:.2f} MB\n")
        return 0
    res = store.prune_to_mb(args.to_mb) if args.to_mb is not None else store.prune()
    if args.json:
        sys.stdout.write(_dump(res.to_dict()))
        return 0
    st = res.stats
    sys.stdout.write(f"evicted {res.evicted} entries ({res.freed_bytes / MB:.2f} MB); now {st.entries} entries, "
                     f"{st.bytes / MB:.2f} MB of originals, {st.disk_bytes / MB:.2f} MB on disk\n")
    return 0


COMMANDS: dict[str, Callable[[Any], int]] = {
    "store": cmd_store,
    "compact": cmd_compact,
    "batch": cmd_batch,
    "trim": cmd_trim,
    "scan": cmd_scan,
    "expand": cmd_expand,
    "formats": cmd_formats,
    "rules": cmd_rules,
    "mcp": cmd_mcp,
}


_GC_PAUSED = False


def run() -> int:
    """The command line as a process (the ``compactor`` script, ``python -m compactor``): as
    :func:`main`, with the garbage collector paused while the command's modules load."""
    global _GC_PAUSED
    import gc

    if gc.isenabled():
        gc.disable()
        _GC_PAUSED = True
    try:
        return main()
    finally:
        _resume_gc()


def _resume_gc() -> None:
    """Start-up makes many objects that live as long as the process (modules, classes, functions,
    the rule catalog); the collector, run every 700 new objects, walked them again and again (about
    a tenth of a one-message compaction). Once a command's modules are loaded they are frozen
    (never walked again) and collection resumes. Only a process started by :func:`run` pauses it."""
    global _GC_PAUSED
    if _GC_PAUSED:
        import gc

        _GC_PAUSED = False
        gc.freeze()
        gc.enable()


def main(argv: list[str] | None = None) -> int:
    from . import CompactorError, ConfigError

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["hook"]:  # runs on every tool call of an agent: no parser build, no eager imports
        from .integrations.cli import hook_main

        _resume_gc()
        return hook_main(argv[1:])
    verbose = "-v" in argv or "--verbose" in argv
    args = None
    try:
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        if not args.command:
            parser.print_help(sys.stderr)
            return 2
        handler = COMMANDS.get(args.command)
        if handler is None:
            from .tools import cli as tools_cli

            handler = tools_cli.COMMANDS[args.command]
        if handler not in (cmd_compact, cmd_trim):  # those resume it once their modules are loaded
            _resume_gc()
        return handler(args)
    except CompactorError as exc:
        if verbose:
            import traceback

            traceback.print_exc()
        line = exc.one_line()
        if isinstance(exc, ConfigError) and exc.option and args is not None and getattr(args, exc.option, None) is not None:
            # a value given by a flag: name the flag, as argparse does for the values it checks
            line = f"argument {config_flag(exc.option)}: {exc.reason} (see 'compactor {args.command} --help')"
        _err(f"compactor: {line}")
        return exc.exit_code
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        _err("compactor: interrupted")
        return 130
    except RecursionError:
        _err("compactor: input nested too deeply to process; raise the limits or report it")
        return 2
    except MemoryError:
        _err("compactor: out of memory; for large logs use 'compactor trim', which streams")
        return 1
    except Exception as exc:  # noqa: BLE001 - last resort: one line, never a traceback unless -v
        if verbose:
            import traceback

            traceback.print_exc()
        _err(f"compactor: internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:300]} (run with -v for the traceback and report it)")
        return 1


def _err(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (BrokenPipeError, OSError):
        pass


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
