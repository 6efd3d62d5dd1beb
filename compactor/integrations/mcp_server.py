"""``compactor mcp``: compactor as an MCP server (stdio), on the official ``mcp`` SDK (2.x).

Tools take file paths and placeholder ids, never pasted text, and answer with plain text
(unstructured content: some clients forward structured content JSON-escaped):

- ``expand_placeholder``: the exact original text behind a placeholder id (``c-`` + 16 hex);
- ``trim_log_file``: a CI or build log with the failures and traces kept and the rest folded
  (folded regions get a placeholder id, so they expand back);
- ``compact_transcript_file``: an agent transcript compacted in its own layout (Level 1, or
  Level 1 → 2 → 3 under a token budget), with a receipt line first;
- ``scan_file_for_evidence``: every protected span (errors, traces, exit codes, ``file:line``,
  numbers, constraints, ...) of a transcript or log, with the step it comes from;
- ``show_transcript_anchor``: the deterministic anchor of a transcript as Markdown.

Placeholders' originals are also resources: ``compactor://blob/{id}``.

Install with ``pip install 'compactor[mcp]'``; register with e.g.
``claude mcp add compactor -- compactor mcp``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Literal

import compactor
from compactor import Compactor, CompactorError, load_document, to_markdown

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("the MCP server needs the mcp SDK 2.x: pip install 'compactor[mcp]'") from exc

__all__ = ["INSTRUCTIONS", "build_server", "run_stdio"]

PAGE_CHARS = 60_000  # an expansion longer than this comes in pages (offset=...)
LARGE_RESULT_TOKENS = 20_000  # MCP clients cut long tool results (Claude Code: 25,000 tokens by default)

INSTRUCTIONS = (
    "compactor keeps the evidence of long agent transcripts and CI logs (errors, traces, exit codes, "
    "file:line, numbers, user constraints, failed approaches) verbatim and folds the noise into "
    "placeholders like '[npm install: 234 packages, 0 errors · ref c-0123456789abcdef]'. Pass file "
    "paths, not pasted text. Use expand_placeholder (or read compactor://blob/ID) to get the exact "
    "original behind any 'ref c-…' id."
)


def _fmt_names() -> list[str]:
    return [f.name for f in compactor.FORMATS]


def _layout(name: str):
    for f in compactor.FORMATS:
        if f.name == name:
            return f
    raise ToolError(f"unknown layout {name!r}; choose auto or one of: {', '.join(_fmt_names())}")


class _Tools:
    """The tool bodies, independent of the transport (and so directly testable)."""

    def __init__(self, *, store: str | None = None, rules: tuple[str, ...] = (), root: str | os.PathLike[str] | None = None):
        self.store = store
        self.rules = tuple(rules)
        self.root = Path(root) if root is not None else None
        self.comp = Compactor(rules=self.rules, store=store)
        # Compactor keeps per-message caches; the SDK runs synchronous tools in worker threads.
        self.lock = threading.Lock()

    # ------------------------------------------------------------------ helpers
    def path(self, path: str) -> str:
        if not isinstance(path, str) or not path.strip():
            raise ToolError("path: give the path of a file (absolute, or relative to the server's working directory)")
        p = Path(path).expanduser()
        if not p.is_absolute():
            p = (self.root or Path.cwd()) / p
        if not p.exists():
            raise ToolError(f"{path}: no such file; check the path")
        if p.is_dir():
            raise ToolError(f"{path}: is a directory; pass a file")
        return str(p)

    @contextlib.contextmanager
    def errors(self):
        try:
            with self.lock:
                yield
        except CompactorError as exc:
            raise ToolError(exc.one_line()) from None
        except RecursionError:
            raise ToolError("input nested too deeply to process") from None

    # ------------------------------------------------------------------ tools
    def expand_placeholder(self, placeholder_id: str, offset: int = 0, max_chars: int = PAGE_CHARS) -> str:
        ref = placeholder_id.strip()
        if ref.startswith("ref "):
            ref = ref[4:].strip()
        if offset < 0 or max_chars < 1:
            raise ToolError("offset must be >= 0 and max_chars >= 1")
        with self.errors():
            text = self.comp.expand(ref)
        if offset == 0 and len(text) <= max_chars:
            return text
        if offset >= len(text) and text:
            raise ToolError(f"offset {offset} is past the end of {ref} ({len(text)} characters)")
        end = min(len(text), offset + max_chars)
        page = text[offset:end]
        if end < len(text):
            page += (f"\n[compactor: characters {offset}-{end} of {len(text)}; "
                     f"call expand_placeholder again with offset={end} for the rest]")
        return page

    def trim_log_file(self, path: str, context: int = 2) -> str:
        src = self.path(path)
        if not 0 <= context <= 20:
            raise ToolError("context: lines kept around each protected line, 0 to 20")
        # Folded regions go to the server's store, so expand_placeholder can return them.
        with self.errors():
            result = compactor.trim(Path(src), context=context, receipt=True, rules=self.rules,
                                    store=self.comp.store)
        return result.text

    def compact_transcript_file(self, path: str, budget: int | None = None, keep_recent: int = 3,
                                format: str = "auto") -> str:
        src = self.path(path)
        if format != "auto":
            _layout(format)
        options: dict = {"keep_recent": keep_recent}
        if budget is not None:
            options["budget"] = budget
        with self.errors():
            result = self.comp.compact(src, format=format, **options)
            body = _layout(result.format).dumps(result.messages, result.layout)
        rep = result.report
        kept = None
        try:
            original = Path(src).read_bytes()
        except OSError:
            original = None
        if original is not None and (result.unchanged or len(body.encode("utf-8", "surrogatepass")) > len(original)):
            if not result.unchanged:  # never larger than what came in
                kept = (f"the compacted result ({len(body.encode('utf-8', 'surrogatepass'))} bytes) would be larger "
                        f"than the file ({len(original)} bytes): the file is returned as it is")
            body = original.decode("utf-8", "replace")
        receipt = (f"[compactor: {result.format} layout, {rep.tokens_before} -> {rep.tokens_after} tokens "
                   f"({rep.token_counter}), level {rep.level}, {len(rep.placeholders)} placeholder(s), "
                   f"{len(rep.protected)} protected span(s) kept verbatim")
        if budget is None and rep.tokens_after > LARGE_RESULT_TOKENS:
            receipt += f"; still over {LARGE_RESULT_TOKENS} tokens: call again with budget=N to fit a context"
        if rep.exit_signal:
            receipt += "; Level 3 was needed: consider starting a new session"
        for note in [kept, *(d.message for d in rep.diagnostics if d.code in ("time-limit", "not-smaller"))]:
            if note:
                receipt += "; " + note
        receipt += "]"
        return receipt + "\n\n" + body

    def scan_file_for_evidence(self, path: str, format: str = "auto") -> str:
        src = self.path(path)
        if format != "auto":
            _layout(format)
        lines: list[str] = []
        count = 0
        with self.errors():
            doc = load_document(src, format=format)
            for seg in doc.segments:
                if seg.kind.value == "tool_call":
                    continue  # actions stay verbatim; their arguments are code, not evidence
                for sp in self.comp.scan(seg.text, role=seg.role.value):
                    count += 1
                    where = f"{seg.step_id or seg.id} {seg.role.value}"
                    rng = f"line {sp.line_start}" if sp.line_start == sp.line_end else f"lines {sp.line_start}-{sp.line_end}"
                    text = sp.text.rstrip("\n").replace("\n", "\n    ")
                    lines.append(f"{where} [{sp.rule_id}] {rng}:\n    {text}")
        head = f"[compactor: {count} protected span(s) in {doc.format} layout, {len(doc.segments)} segment(s)]"
        return head + ("\n" + "\n".join(lines) if lines else "\nno evidence found") + "\n"

    def show_transcript_anchor(self, path: str, lang: Literal["en", "zh"] = "en", format: str = "auto") -> str:
        src = self.path(path)
        if format != "auto":
            _layout(format)
        with self.errors():
            result = self.comp.compact(src, format=format, lang=lang)
        if result.anchor is None:
            raise ToolError(f"{path}: no anchor was built for this input")
        return to_markdown(result.anchor, lang=lang)

    def blob(self, id: str) -> str:
        try:
            with self.lock:
                return self.comp.expand(id)
        except CompactorError as exc:
            raise ResourceNotFoundError(exc.one_line()) from None


def build_server(*, store: str | None = None, rules: tuple[str, ...] | list[str] = (),
                 root: str | os.PathLike[str] | None = None) -> MCPServer:
    """The MCP server. ``store``: the placeholder store shared with the CLI (a directory or a
    ``.sqlite`` file; ``None`` keeps placeholders in memory for the server's lifetime).
    ``root``: where relative paths are resolved (default: the working directory)."""
    tools = _Tools(store=store, rules=tuple(rules), root=root)
    server = MCPServer(name="compactor", version=compactor.__version__, instructions=INSTRUCTIONS,
                       log_level="WARNING")
    layouts = ", ".join(_fmt_names())

    @server.tool(name="expand_placeholder", structured_output=False,
                 description="The exact original text behind a compactor placeholder id such as "
                             "'c-3f9a0c17d2b4e881' (shown as '· ref c-…' in compacted output). Long originals "
                             f"come in pages of max_chars (default {PAGE_CHARS}); a last line says the next offset.")
    def expand_placeholder(placeholder_id: str, offset: int = 0, max_chars: int = PAGE_CHARS) -> str:
        return tools.expand_placeholder(placeholder_id, offset, max_chars)

    @server.tool(name="trim_log_file", structured_output=False,
                 description="Trim a CI/build/test log file: failures, stack traces, error lines and exit codes "
                             "stay verbatim (with `context` lines around them), everything else is folded into "
                             "one summary line per region (with a placeholder id when a store is configured). "
                             "Ends with a receipt line.")
    def trim_log_file(path: str, context: int = 2) -> str:
        return tools.trim_log_file(path, context)

    @server.tool(name="compact_transcript_file", structured_output=False,
                 description="Compact an agent transcript file in its own layout: benign tool output becomes "
                             "placeholders, evidence stays verbatim; with `budget` (tokens) older turns are "
                             f"replaced by the anchor until it fits. format: auto (detected) or one of {layouts}. "
                             "The first line is a receipt (tokens before -> after).")
    def compact_transcript_file(path: str, budget: int | None = None, keep_recent: int = 3,
                                format: str = "auto") -> str:
        return tools.compact_transcript_file(path, budget, keep_recent, format)

    @server.tool(name="scan_file_for_evidence", structured_output=False,
                 description="List every piece of evidence compactor protects in a transcript or log file "
                             "(stack traces, error lines, exit codes, failing tests, file:line references, numbers, "
                             "user constraints, decisions, failed approaches), each with its step and rule id.")
    def scan_file_for_evidence(path: str, format: str = "auto") -> str:
        return tools.scan_file_for_evidence(path, format)

    @server.tool(name="show_transcript_anchor", structured_output=False,
                 description="The deterministic anchor of a transcript file as Markdown: intent, changes made, "
                             "decisions, excluded approaches, next steps, key evidence, user constraints, files "
                             "touched. lang: en or zh.")
    def show_transcript_anchor(path: str, lang: Literal["en", "zh"] = "en", format: str = "auto") -> str:
        return tools.show_transcript_anchor(path, lang, format)

    @server.resource("compactor://blob/{id}", name="placeholder-original", mime_type="text/plain",
                     description="The exact original text behind a placeholder id.")
    def blob(id: str) -> str:
        return tools.blob(id)

    return server


def run_stdio(*, store: str | None = None, rules: tuple[str, ...] | list[str] = ()) -> None:
    """Serve over stdin/stdout until the client closes the connection."""
    build_server(store=store, rules=rules).run("stdio")
