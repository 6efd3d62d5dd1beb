"""``compactor mcp``: compactor as an MCP server (stdio), on the official ``mcp`` SDK (2.x).

Tools take file paths and placeholder ids, never pasted text, and answer with plain text
(unstructured content: some clients forward structured content JSON-escaped):

- ``expand_placeholder``: the exact original text behind a placeholder id (``c-`` + 16 hex);
- ``trim_log_file``: a CI or build log with the failures and traces kept and the rest folded
  (folded regions get a placeholder id, so they expand back); fitted to ``max_tokens``;
- ``compact_transcript_file``: an agent transcript compacted to ``max_tokens`` (Level 1, then
  Level 2 → 3 when it is over) and written as the readable conversation a model reads, with a
  receipt line first;
- ``scan_file_for_evidence``: every protected span (errors, traces, exit codes, ``file:line``,
  numbers, constraints, ...) of a transcript or log, with the step it comes from;
- ``show_transcript_anchor``: the deterministic anchor of a transcript as Markdown.

Placeholders' originals are also resources: ``compactor://blob/{id}``.

Every tool takes ``max_tokens`` and its result fits it: MCP clients refuse or cut a large tool
result (Claude Code: 25,000 tokens unless ``MAX_MCP_OUTPUT_TOKENS`` says otherwise, with a warning
from 10,000). The default is 80% of the client's limit (the margin covers the difference between
compactor's tokenizer and the client's): 20,000, or 80% of ``MAX_MCP_OUTPUT_TOKENS`` when the
server's environment sets it, or what ``compactor mcp --max-tokens N`` says. A result that would
still be larger (a list of evidence, a page of an original) ends with a line naming how to get the
rest: a placeholder id or an offset.

Install with ``pip install 'context-compactor[mcp]'``; register with
``compactor mcp install --client claude-code`` (or codex, gemini, cursor).
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from collections.abc import Mapping
from typing import Literal

import compactor
from compactor import Compactor, CompactorError, get_counter, load_document, to_markdown

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("the MCP server needs the mcp SDK 2.x: pip install 'context-compactor[mcp]'") from exc

__all__ = ["INSTRUCTIONS", "build_server", "run_stdio"]

PAGE_CHARS = 60_000  # an expansion longer than this comes in pages (offset=...)
CLIENT_LIMIT_TOKENS = 25_000  # Claude Code refuses a larger tool result unless MAX_MCP_OUTPUT_TOKENS says more
CLIENT_LIMIT_ENV = "MAX_MCP_OUTPUT_TOKENS"
MARGIN = 0.8  # compactor counts cl100k tokens; the client's own tokenizer may count more
RECEIPT_TOKENS = 80  # room left for the receipt line
MIN_MAX_TOKENS = 200  # below this no result (receipt, the live error's header) can be useful


def default_max_tokens(environ: Mapping[str, str] | None = None) -> int:
    """80% of the client's limit on one tool result: ``MAX_MCP_OUTPUT_TOKENS`` when set to a
    number (Claude Code's setting, inherited by the servers it starts), else 25,000."""
    env = os.environ if environ is None else environ
    limit = CLIENT_LIMIT_TOKENS
    raw = (env.get(CLIENT_LIMIT_ENV) or "").strip()
    if raw.isdigit() and int(raw) > 0:
        limit = int(raw)
    return max(MIN_MAX_TOKENS, int(limit * MARGIN))

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


def _readable(fmt: str, messages) -> str:
    """A compacted transcript as the conversation a model reads: one block per message, tool call
    and tool result, headed by its role (the tool's name for a call and its result); placeholders,
    references and the summary of folded turns as written."""
    doc = load_document(_layout(fmt).dumps(messages), format=fmt)
    blocks: list[str] = []
    for seg in doc.segments:
        if seg.kind.value == "tool_call":
            call = seg.call
            name = (call.name if call is not None else None) or seg.tool_name or "tool"
            body = (call.command if call is not None and call.command else seg.text)
            head = f"## {seg.role.value} calls {name}"
        elif seg.kind.value == "tool_result":
            head = f"## {seg.tool_name or 'tool'} result"
            body = seg.text
        else:
            head = f"## {seg.role.value}"
            body = seg.text
        blocks.append(head + "\n" + body.rstrip("\n"))
    return "\n\n".join(blocks) + "\n"


class _Tools:
    """The tool bodies, independent of the transport (and so directly testable)."""

    def __init__(self, *, store: str | None = None, rules: tuple[str, ...] = (),
                 root: str | os.PathLike[str] | None = None, max_tokens: int | None = None):
        self.store = store
        self.rules = tuple(rules)
        self.root = Path(root) if root is not None else None
        self.comp = Compactor(rules=self.rules, store=store)
        self.counter = get_counter()
        self.max_tokens = self.limit(max_tokens if max_tokens is not None else default_max_tokens())
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

    def limit(self, max_tokens: int | None) -> int:
        if max_tokens is None:
            return self.max_tokens
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < MIN_MAX_TOKENS:
            raise ToolError(f"max_tokens must be a whole number of at least {MIN_MAX_TOKENS}")
        return max_tokens

    def tokens(self, text: str) -> int:
        return self.counter.count(text)

    def fit(self, text: str, max_tokens: int, what: str) -> str:
        """The result as it is when it fits; else its head, cut at a line, and a last line with the
        placeholder id of the whole result (stored first, so it expands back)."""
        if self.tokens(text) <= max_tokens:
            return text
        ref = self.comp.store.put(text.encode("utf-8", errors="surrogatepass"))
        tail = (f"\n[compactor: {what} cut to fit max_tokens={max_tokens}; the whole of it: "
                f"expand_placeholder {ref}]\n")
        room = max_tokens - self.tokens(tail)
        head = self.head(text, room)
        nl = head.rfind("\n")
        if nl > len(head) // 2:
            head = head[: nl + 1]
        return head.rstrip("\n") + tail

    def head(self, text: str, max_tokens: int) -> str:
        """The longest prefix measured to hold at most ``max_tokens`` tokens (a few cuts, each
        scaled by how far over the last one was)."""
        end = len(text)
        while end > 0:
            n = self.tokens(text[:end])
            if n <= max_tokens:
                return text[:end]
            end = min(end - 1, int(end * max_tokens / n * 0.97))
        return ""

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
    def expand_placeholder(self, placeholder_id: str, offset: int = 0, max_chars: int = PAGE_CHARS,
                           max_tokens: int | None = None) -> str:
        limit = self.limit(max_tokens)
        ref = placeholder_id.strip()
        if ref.startswith("ref "):
            ref = ref[4:].strip()
        if ref.startswith("expand "):
            ref = ref[7:].strip()
        if offset < 0 or max_chars < 1:
            raise ToolError("offset must be >= 0 and max_chars >= 1")
        with self.errors():
            text = self.comp.expand(ref)
        if offset == 0 and len(text) <= max_chars and self.tokens(text) <= limit:
            return text
        if offset >= len(text) and text:
            raise ToolError(f"offset {offset} is past the end of {ref} ({len(text)} characters)")
        end = min(len(text), offset + max_chars)
        footer = (f"\n[compactor: characters {offset}-{end} of {len(text)}; "
                  f"call expand_placeholder again with offset={end} for the rest]")
        page = self.head(text[offset:end], limit - self.tokens(footer))
        end = offset + len(page)
        if end < len(text):
            page += (f"\n[compactor: characters {offset}-{end} of {len(text)}; "
                     f"call expand_placeholder again with offset={end} for the rest]")
        return page

    def trim_log_file(self, path: str, context: int = 2, max_tokens: int | None = None) -> str:
        limit = self.limit(max_tokens)
        src = self.path(path)
        if not 0 <= context <= 20:
            raise ToolError("context: lines kept around each protected line, 0 to 20")
        # Folded regions go to the server's store, so expand_placeholder can return them.
        with self.errors():
            result = compactor.trim(Path(src), context=context, receipt=True, rules=self.rules,
                                    store=self.comp.store)
        text = result.text
        if self.tokens(text) <= limit:
            return text
        # Still over: the trimmed log through the budget (Level 3: the oldest regions fold into a
        # summary with one reference each, the live error and the newest lines stay).
        whole = self.comp.store.put(text.encode("utf-8", errors="surrogatepass"))
        note = (f"[compactor: the trimmed log is {self.tokens(text)} tokens, over max_tokens={limit}; "
                f"fitted with a budget. The whole trimmed log: expand_placeholder {whole}]\n")
        return self._budgeted(text, "text", limit, note, what="trimmed log")

    def _budgeted(self, source, fmt: str, limit: int, note: str, *, what: str, keep_recent: int = 3) -> str:
        """Compact ``source`` with a budget until its readable text plus ``note`` fits ``limit``."""
        budget = limit - self.tokens(note)
        body = ""
        for _ in range(4):
            with self.errors():
                result = self.comp.compact(source, format=fmt, budget=budget, keep_recent=keep_recent)
                body = (result.messages if isinstance(result.messages, str)
                        else _readable(result.format, result.messages))
            n = self.tokens(note) + self.tokens(body)
            if n <= limit:
                return note + body
            budget = int(budget * (limit - self.tokens(note)) / n * 0.95)
            if budget < MIN_MAX_TOKENS // 2:
                break
        return self.fit(note + body, limit, what)

    def compact_transcript_file(self, path: str, budget: int | None = None, keep_recent: int = 3,
                                format: str = "auto", max_tokens: int | None = None) -> str:
        limit = self.limit(max_tokens)
        src = self.path(path)
        if format != "auto":
            _layout(format)
        if budget is not None and (isinstance(budget, bool) or budget < 1):
            raise ToolError("budget must be a positive number of tokens")
        target = min(limit, budget) if budget is not None else limit
        with self.errors():
            first = self.comp.compact(src, format=format, keep_recent=keep_recent)
            body = _readable(first.format, first.messages)
        result, fitted = first, False
        rep = first.report
        if self.tokens(body) + RECEIPT_TOKENS > target:
            # Over: the budget path (Level 2 → 3), the budget scaled down until the text the model
            # reads fits (the budget counts the layout's own form, usually larger than the text).
            want = target - RECEIPT_TOKENS
            for _ in range(4):
                with self.errors():
                    result = self.comp.compact(src, format=first.format, keep_recent=keep_recent, budget=max(want, 1))
                    body = _readable(result.format, result.messages)
                fitted = True
                n = self.tokens(body) + RECEIPT_TOKENS
                if n <= target:
                    break
                want = int(want * target / n * 0.95)
            rep = result.report
        receipt = (f"[compactor: {result.format} layout, {first.report.tokens_before} -> {self.tokens(body)} tokens "
                   f"as text ({rep.token_counter}), level {rep.level}, {len(rep.placeholders)} placeholder(s), "
                   f"{len(rep.protected)} protected span(s) kept verbatim")
        if fitted:
            receipt += f"; fitted to {target} tokens, older turns folded into the summary"
        if rep.exit_signal:
            receipt += "; Level 3 was needed: consider starting a new session"
        for d in rep.diagnostics:  # the safety rails: the input passed through, and why
            if d.code in ("time-limit", "not-smaller"):
                receipt += "; " + d.message
        receipt += ". Any 'ref c-…' or 'expand c-…' id: expand_placeholder gives the exact original]"
        return self.fit(receipt + "\n\n" + body, target, "compacted transcript")

    def scan_file_for_evidence(self, path: str, format: str = "auto", offset: int = 0,
                               max_tokens: int | None = None) -> str:
        limit = self.limit(max_tokens)
        src = self.path(path)
        if format != "auto":
            _layout(format)
        if offset < 0:
            raise ToolError("offset must be >= 0")
        items: list[str] = []
        with self.errors():
            doc = load_document(src, format=format)
            for seg in doc.segments:
                if seg.kind.value == "tool_call":
                    continue  # actions stay verbatim; their arguments are code, not evidence
                for sp in self.comp.scan(seg.text, role=seg.role.value):
                    where = f"{seg.step_id or seg.id} {seg.role.value}"
                    rng = f"line {sp.line_start}" if sp.line_start == sp.line_end else f"lines {sp.line_start}-{sp.line_end}"
                    text = sp.text.rstrip("\n").replace("\n", "\n    ")
                    items.append(f"{where} [{sp.rule_id}] {rng}:\n    {text}")
        head = f"[compactor: {len(items)} protected span(s) in {doc.format} layout, {len(doc.segments)} segment(s)]"
        if not items:
            return head + "\nno evidence found\n"
        if offset >= len(items):
            raise ToolError(f"offset {offset} is past the last span ({len(items)} spans)")
        out, used = [head], self.tokens(head) + 60
        i = offset
        while i < len(items):
            n = self.tokens(items[i]) + 1
            if used + n > limit and i > offset:
                break
            out.append(items[i])
            used += n
            i += 1
        if i < len(items):
            out.append(f"[compactor: spans {offset}-{i - 1} of {len(items)} shown; call scan_file_for_evidence "
                       f"again with offset={i} for the rest]")
        return self.fit("\n".join(out) + "\n", limit, "evidence list")

    def show_transcript_anchor(self, path: str, lang: Literal["en", "zh"] = "en", format: str = "auto",
                               max_tokens: int | None = None) -> str:
        limit = self.limit(max_tokens)
        src = self.path(path)
        if format != "auto":
            _layout(format)
        options = {}
        if limit < self.comp.config.anchor_max_tokens + 50:
            options["anchor_max_tokens"] = max(1, limit - 50)
        with self.errors():
            result = self.comp.compact(src, format=format, lang=lang, **options)
        if result.anchor is None:
            raise ToolError(f"{path}: no anchor was built for this input")
        return self.fit(to_markdown(result.anchor, lang=lang), limit, "anchor")

    def blob(self, id: str) -> str:
        try:
            with self.lock:
                return self.comp.expand(id)
        except CompactorError as exc:
            raise ResourceNotFoundError(exc.one_line()) from None


_MAX_TOKENS_DOC = ("max_tokens: the most tokens the result may hold (default {default}: 80% of the client's "
                   "limit on a tool result)")


def build_server(*, store: str | None = None, rules: tuple[str, ...] | list[str] = (),
                 root: str | os.PathLike[str] | None = None, max_tokens: int | None = None) -> MCPServer:
    """The MCP server. ``store``: the placeholder store shared with the CLI (a directory or a
    ``.sqlite`` file; ``None`` keeps placeholders in memory for the server's lifetime).
    ``root``: where relative paths are resolved (default: the working directory).
    ``max_tokens``: the default bound on every result (default: :func:`default_max_tokens`)."""
    tools = _Tools(store=store, rules=tuple(rules), root=root, max_tokens=max_tokens)
    server = MCPServer(name="compactor", version=compactor.__version__, instructions=INSTRUCTIONS,
                       log_level="WARNING")
    layouts = ", ".join(_fmt_names())
    mt = _MAX_TOKENS_DOC.format(default=tools.max_tokens)

    @server.tool(name="expand_placeholder", structured_output=False,
                 description="The exact original text behind a compactor placeholder id such as "
                             "'c-3f9a0c17d2b4e881' (shown as '· ref c-…' or 'expand c-…' in compacted output). Long "
                             f"originals come in pages of at most max_chars (default {PAGE_CHARS}) and max_tokens; "
                             f"a last line says the next offset. {mt}.")
    def expand_placeholder(placeholder_id: str, offset: int = 0, max_chars: int = PAGE_CHARS,
                           max_tokens: int | None = None) -> str:
        return tools.expand_placeholder(placeholder_id, offset, max_chars, max_tokens)

    @server.tool(name="trim_log_file", structured_output=False,
                 description="Trim a CI/build/test log file: failures, stack traces, error lines and exit codes "
                             "stay verbatim (with `context` lines around them), everything else is folded into "
                             "one summary line per region with a placeholder id (expand_placeholder gives it back). "
                             "Ends with a receipt line. A trimmed log still over max_tokens is fitted: its oldest "
                             f"regions fold into a summary with references. {mt}.")
    def trim_log_file(path: str, context: int = 2, max_tokens: int | None = None) -> str:
        return tools.trim_log_file(path, context, max_tokens)

    @server.tool(name="compact_transcript_file", structured_output=False,
                 description="Compact an agent transcript file and return it as readable text (one block per "
                             "message, tool call and tool result): benign tool output becomes placeholders, "
                             "evidence stays verbatim, and when that is still over max_tokens older turns fold into "
                             "a summary (the anchor) until it fits. `budget` (tokens) asks for less. format: auto "
                             f"(detected) or one of {layouts}. The first line is a receipt (tokens before -> "
                             f"after). {mt}.")
    def compact_transcript_file(path: str, budget: int | None = None, keep_recent: int = 3,
                                format: str = "auto", max_tokens: int | None = None) -> str:
        return tools.compact_transcript_file(path, budget, keep_recent, format, max_tokens)

    @server.tool(name="scan_file_for_evidence", structured_output=False,
                 description="List every piece of evidence compactor protects in a transcript or log file "
                             "(stack traces, error lines, exit codes, failing tests, file:line references, numbers, "
                             "user constraints, decisions, failed approaches), each with its step and rule id. "
                             f"A list over max_tokens comes in parts: a last line gives the next offset. {mt}.")
    def scan_file_for_evidence(path: str, format: str = "auto", offset: int = 0,
                               max_tokens: int | None = None) -> str:
        return tools.scan_file_for_evidence(path, format, offset, max_tokens)

    @server.tool(name="show_transcript_anchor", structured_output=False,
                 description="The deterministic anchor of a transcript file as Markdown: intent, changes made, "
                             "decisions, excluded approaches, next steps, key evidence, user constraints, files "
                             f"touched. lang: en or zh. {mt}.")
    def show_transcript_anchor(path: str, lang: Literal["en", "zh"] = "en", format: str = "auto",
                               max_tokens: int | None = None) -> str:
        return tools.show_transcript_anchor(path, lang, format, max_tokens)

    @server.resource("compactor://blob/{id}", name="placeholder-original", mime_type="text/plain",
                     description="The exact original text behind a placeholder id.")
    def blob(id: str) -> str:
        return tools.blob(id)

    return server


def run_stdio(*, store: str | None = None, rules: tuple[str, ...] | list[str] = (),
              max_tokens: int | None = None) -> None:
    """Serve over stdin/stdout until the client closes the connection."""
    build_server(store=store, rules=rules, max_tokens=max_tokens).run("stdio")
