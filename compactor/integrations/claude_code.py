"""Claude Code hooks: keep the evidence of large tool outputs and carry the anchor across ``/compact``.

Three hook events (payload and output shapes as Claude Code 2.1.332 sends and reads them; the
captured payloads are the fixtures under ``tests/fixtures/claude_code/``):

``PostToolUse`` (Bash)
    Claude Code keeps a Bash output of more than 30,000 characters in
    ``tool_response.persistedOutputPath`` and shows the model only a ~2 KB head preview, so the
    final error of a long command never reaches it. The hook reads the full output (from that
    file when present), compacts it to Level 1 (errors, traces, numbers kept verbatim; benign
    runs folded into placeholders whose originals go to the store) and answers with
    ``hookSpecificOutput.updatedToolOutput``: the tool's own result object with ``stdout`` /
    ``stderr`` replaced and the persisted-output fields removed, so the model sees it inline.
    The result stays under :data:`INLINE_LIMIT` characters.

``PreToolUse`` (Bash)
    A command that exits non-zero never reaches PostToolUse: Claude Code sends
    ``PostToolUseFailure``, whose output cannot be replaced, and shows the model only about 10,000
    characters of it (the head and tail of its first 30,000), so the final error of a long failing
    command is lost. The hook therefore rewrites the command (``hookSpecificOutput.updatedInput``;
    it grants no permission: no ``permissionDecision`` is sent and Claude Code's own rules judge
    the rewritten command) into a wrapper (:func:`wrap_command`) that runs it unchanged in a
    subshell of Claude Code's shell, captures its output to a file, and prints it through
    ``compactor hook claude-code output``: verbatim when short, else compactor's Level 1 (final
    error kept) sized to what Claude Code shows whole. The exit code is the command's own and a
    ``cd`` of a succeeding command still persists. If compactor is missing or fails, the captured
    output is printed as it is.

``PreCompact``
    Builds the deterministic anchor of the transcript (``transcript_path``), stores it per
    session, and prints instructions on stdout: Claude Code appends them to the summariser's
    prompt, so the summary is told what must survive.

``SessionStart`` with source ``compact``
    Re-injects the stored anchor as ``hookSpecificOutput.additionalContext`` (under
    :data:`CONTEXT_LIMIT` characters; a longer anchor is shortened by priority and the path of the
    full one is given).

Codex CLI (0.171) has the same two anchor events (``compactor hook codex pre-compact`` /
``session-start``, see :func:`codex_hooks_snippet`) but no way to replace a command's output,
and it reads no instructions from PreCompact: there the anchor is only stored. There is no Bash
wrapper for Codex: it already shows the model the head and tail of a long output (the final error
arrives), and its PreToolUse takes a rewritten command only with ``permissionDecision: "allow"``,
which would approve the command on the user's behalf.

Every hook fails open: on any error the tool output is left untouched, the reason goes to
stderr and the exit status is 0. Only the standard library is imported at start-up; compactor
itself is imported when there is work to do.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

from ..atomic import write_text_atomic
from ..lazyre import lazy_re

__all__ = [
    "CONTEXT_LIMIT",
    "EVENTS",
    "FAILURE_INLINE_LIMIT",
    "INLINE_LIMIT",
    "install",
    "post_tool_use",
    "pre_compact",
    "pre_tool_use",
    "print_captured",
    "run_hook",
    "session_start",
    "settings_snippet",
    "wrap_command",
]

#: Claude Code inlines a tool result up to 30,000 characters; stay clearly below.
INLINE_LIMIT = 29_000
#: Claude Code shows the model about 10,040 characters of a failing command's output (head and
#: tail); a failing command's printed result stays below this so it is shown whole.
FAILURE_INLINE_LIMIT = 9_500
#: Claude Code's cap on hook ``additionalContext``; a longer anchor is shortened.
CONTEXT_LIMIT = 10_000
#: outputs shorter than this (characters, stdout + stderr) are left alone unless Claude Code
#: already cut them (``persistedOutputPath``): Level 1 would save little and the model sees them whole.
MIN_CHARS = 8000


def _min_chars() -> int:
    raw = os.environ.get("COMPACTOR_HOOK_MIN_CHARS", "")
    try:
        return max(0, int(raw)) if raw.strip() else MIN_CHARS
    except ValueError:
        raise ValueError(f"COMPACTOR_HOOK_MIN_CHARS={raw[:40]!r} is not a whole number of characters") from None
#: the instructions printed by PreCompact carry at most this much of the anchor.
PRECOMPACT_LIMIT = 8_000
#: full outputs larger than this are not read back (the hook must stay fast); the head/tail
#: Claude Code already has is used instead.
MAX_READ_BYTES = 64 * 1024 * 1024

EVENTS = {"pre-tool-use": "PreToolUse", "post-tool-use": "PostToolUse", "pre-compact": "PreCompact", "session-start": "SessionStart"}
_SESSION_RE = lazy_re(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class HookSkip(Exception):
    """Nothing to do (not an error): the hook prints nothing."""


# ---------------------------------------------------------------------------- helpers


def _state_dir(host: str = "claude-code") -> Path:
    env = os.environ.get("COMPACTOR_HOOK_DIR")
    if env:
        return Path(env) if host == "claude-code" else Path(env) / host
    store = os.environ.get("COMPACTOR_STORE")
    if store:
        p = Path(store)
        return (p.parent if p.suffix else p) / host
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "compactor" / host


def _store_spec() -> str:
    from .. import default_store_path

    return str(default_store_path())


def anchor_path(session_id: str, host: str = "claude-code") -> Path:
    if not isinstance(session_id, str) or _SESSION_RE.fullmatch(session_id) is None:
        raise ValueError(f"session_id {str(session_id)[:60]!r} is not a safe file name")
    return _state_dir(host) / f"{session_id}.anchor.md"


def _atomic_write(path: Path, text: str) -> None:
    write_text_atomic(path, text, dir_mode=0o700, durable=True)


def _read_text(path: str, limit: int = MAX_READ_BYTES) -> str | None:
    try:
        p = Path(path)
        if not p.is_file() or p.stat().st_size > limit:
            return None
        return p.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None


# ---------------------------------------------------------------------------- PostToolUse


def _level1(text: str) -> str:
    """compactor's Level 1 of one tool output (plain text layout); originals go to the store."""
    from .. import Compactor

    comp = _compactor_cache.get("c")
    if comp is None:
        comp = _compactor_cache["c"] = Compactor(store=_store_spec(), level=1)
    result = comp.compact(text, format="text")
    out = result.messages
    return out if isinstance(out, str) else text


_compactor_cache: dict[str, Any] = {}


def _fit(text: str, limit: int, full_ref: str) -> str:
    """Cut the middle of an over-long compacted text, keeping its head and (more of) its tail,
    where the final error usually is. The cut is named and points at the full output."""
    if len(text) <= limit:
        return text
    lines = text.splitlines(keepends=True)
    budget = limit - 400
    head_budget, tail_budget = budget // 3, budget - budget // 3
    head: list[str] = []
    used = 0
    for ln in lines:
        if used + len(ln) > head_budget:
            break
        head.append(ln)
        used += len(ln)
    tail: list[str] = []
    used = 0
    for ln in reversed(lines[len(head):]):
        if used + len(ln) > tail_budget:
            break
        tail.append(ln)
        used += len(ln)
    tail.reverse()
    omitted = len(lines) - len(head) - len(tail)
    if not head and not tail:  # one giant line: cut by characters
        return text[:head_budget] + f"\n[... {len(text) - budget} characters omitted · {full_ref} ...]\n" + text[-tail_budget:]
    marker = f"[... {omitted} lines of compacted output omitted to fit the tool-result limit · {full_ref} ...]\n"
    return "".join(head) + marker + "".join(tail)


def post_tool_use(payload: dict[str, Any]) -> dict[str, Any] | None:
    """The hook's answer for one PostToolUse payload, or ``None`` to leave the output untouched."""
    if payload.get("hook_event_name") not in (None, "PostToolUse"):
        raise HookSkip
    if payload.get("tool_name") != "Bash":
        raise HookSkip  # other tools' result shapes are not confirmed by a captured payload yet
    resp = payload.get("tool_response")
    if not isinstance(resp, dict) or not isinstance(resp.get("stdout"), str):
        raise HookSkip
    if resp.get("isImage") or resp.get("backgroundTaskId") or resp.get("structuredContent"):
        raise HookSkip
    stdout: str = resp["stdout"]
    stderr: str = resp.get("stderr") or ""
    if stdout.startswith("[compactor: ") and not resp.get("persistedOutputPath"):
        raise HookSkip  # printed by the PreToolUse wrapper: already compacted
    persisted = resp.get("persistedOutputPath")
    source_note = ""
    if isinstance(persisted, str) and persisted:
        full = _read_text(persisted)
        if full is not None:
            stdout = full
            source_note = f"full output: {persisted}"
        else:
            source_note = f"full output (not read back): {persisted}"
    min_chars = _min_chars()
    if not persisted and len(stdout) + len(stderr) < min_chars:
        raise HookSkip
    new_stdout = _level1(stdout) if stdout.strip() else stdout
    new_stderr = _level1(stderr) if len(stderr) >= min_chars else stderr
    if new_stdout == stdout and new_stderr == stderr and not persisted:
        raise HookSkip  # nothing collapsed: the output stays exactly as Claude Code has it
    ref = source_note or "re-run the command for the full output"
    header = (f"[compactor: {len(stdout) + len(stderr):,} characters of output compacted (Level 1: errors, "
              f"traces and numbers verbatim; folded lines are placeholders, restore one with "
              f"`compactor expand <ref>`){'; ' + source_note if source_note else ''}]\n")
    room = INLINE_LIMIT - len(header) - len(new_stderr)
    if room < INLINE_LIMIT // 2:
        new_stderr = _fit(new_stderr, INLINE_LIMIT // 3, ref)
        room = INLINE_LIMIT - len(header) - len(new_stderr)
    new_stdout = header + _fit(new_stdout, room, ref)
    if not persisted and len(new_stdout) + len(new_stderr) >= len(stdout) + len(stderr):
        raise HookSkip  # never larger than what came in: the output stays as Claude Code has it
    updated = {k: v for k, v in resp.items() if k not in ("persistedOutputPath", "persistedOutputSize",
                                                          "stdoutHoldsOutputEnd")}
    updated["stdout"] = new_stdout
    updated["stderr"] = new_stderr
    return {"hookSpecificOutput": {"hookEventName": "PostToolUse", "updatedToolOutput": updated}}


# ---------------------------------------------------------------------------- PreToolUse (Bash wrapper)


#: every variable of the wrapper carries this prefix; a command already holding it is not wrapped again
_WRAP_VAR = "__compactor_cap"
_TOOL_USE_RE = lazy_re(r"[A-Za-z0-9_-]{1,100}")


def _runs_dir() -> Path:
    return _state_dir() / "runs"


def wrap_command(command: str, base: str, exe: str) -> str:
    """The Bash command that runs ``command`` as Claude Code would and prints its output through
    compactor.

    - ``command`` is inserted verbatim (no re-quoting) inside ``{ …\\n}`` in a subshell, so quotes,
      pipes, heredocs, ``&&``, subshells and env assignments mean exactly what they meant, and
      Claude Code's permission rules still see its commands.
    - stdout and stderr go to ``base.out``, in the order they were written; ``exit`` ends only the
      subshell.
    - As in Claude Code's own wrapper (``eval … && pwd -P >| file``), the final directory is kept
      only when the command succeeds: it is written to ``base.cwd`` and the shell ``cd``s there.
    - The exit status is the command's own.
    - Fail open: if ``base.out`` cannot be written, the command's output goes straight to stdout;
      if compactor cannot be run or fails, the captured output is printed as it is.
    """
    v = _WRAP_VAR
    q = shlex.quote
    return (
        f"{v}={q(base)}; if ( : >>\"${v}.out\" ) 2>/dev/null; then {v}_o=\"${v}.out\"; "
        f"else {v}=; {v}_o=/dev/stdout; fi\n"
        f"( {{\n{command}\n}} && pwd -P >| \"${{{v}:-/dev/null}}${{{v}:+.cwd}}\" ) >\"${v}_o\" 2>&1\n"
        f"{v}_rc=$?; if [ -n \"${v}\" ]; then "
        f"if command -v {q(exe)} >/dev/null 2>&1; then {q(exe)} hook claude-code output \"${v}\" \"${v}_rc\" "
        f"|| cat -- \"${v}.out\"; else cat -- \"${v}.out\"; fi; "
        f"if [ \"${v}_rc\" = 0 ] && [ -s \"${v}.cwd\" ]; then cd -- \"$(cat -- \"${v}.cwd\")\" || :; fi; "
        f"rm -f -- \"${v}.out\" \"${v}.cwd\"; fi; (exit \"${v}_rc\")"
    )


def pre_tool_use(payload: dict[str, Any], exe: str | None = None) -> dict[str, Any] | None:
    """Rewrite a Bash call so its output is captured and printed through compactor."""
    if payload.get("hook_event_name") not in (None, "PreToolUse"):
        raise HookSkip
    if payload.get("tool_name") != "Bash":
        raise HookSkip
    if os.environ.get("COMPACTOR_HOOK_WRAP", "").strip().lower() in ("0", "no", "off", "false"):
        raise HookSkip
    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict):
        raise HookSkip
    command = tool_input.get("command")
    if not isinstance(command, str) or not command.strip() or _WRAP_VAR in command:
        raise HookSkip
    if tool_input.get("run_in_background"):
        raise HookSkip  # its output is read later, in pieces, by another tool: leave it alone
    tid = payload.get("tool_use_id")
    name = tid if isinstance(tid, str) and _TOOL_USE_RE.fullmatch(tid) else "call"
    runs = _runs_dir()
    runs.mkdir(mode=0o700, parents=True, exist_ok=True)
    _prune_runs(runs)
    fd, base = tempfile.mkstemp(prefix=f"{name}-", suffix=".out", dir=runs)
    os.close(fd)
    base = base[: -len(".out")]
    updated = dict(tool_input)
    updated["command"] = wrap_command(command, base, exe or _compactor_exe())
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": updated}}


#: capture files older than this (seconds) are removed: a kept cut output, or one left by a killed command
RUNS_MAX_AGE = 24 * 3600


def _prune_runs(runs: Path) -> None:
    import time

    cutoff = time.time() - RUNS_MAX_AGE
    try:
        with os.scandir(runs) as it:
            for e in it:
                try:
                    if e.is_file(follow_symlinks=False) and e.stat(follow_symlinks=False).st_mtime < cutoff:
                        os.unlink(e.path)
                except OSError:
                    pass
    except OSError:
        pass


_CAPTURE_RE = lazy_re(r"[A-Za-z0-9_-]{1,100}-[A-Za-z0-9_]{1,32}")


def _capture_base(base: str) -> Path:
    """The capture path given to ``output``, refused unless it is one the hook made."""
    p = Path(base)
    if p.parent.resolve() != _runs_dir().resolve() or _CAPTURE_RE.fullmatch(p.name) is None:
        raise ValueError(f"{base[:200]!r} is not a capture file of compactor's PreToolUse hook")
    return p


def captured_text(raw: bytes, exit_code: int, keep_path: str) -> str | None:
    """What the model is shown for one captured output, or ``None`` to show it verbatim (short,
    or nothing folded). A failing command's result stays under :data:`FAILURE_INLINE_LIMIT`."""
    text = raw.decode("utf-8", errors="replace")
    if len(text) < _min_chars():
        return None
    compacted = _level1(text) if text.strip() else text
    limit = INLINE_LIMIT if exit_code == 0 else FAILURE_INLINE_LIMIT
    if compacted == text and len(text) <= limit:
        return None
    header = (f"[compactor: {len(text):,} characters of output compacted (Level 1: errors, traces and "
              f"numbers verbatim; folded lines are placeholders, restore one with `compactor expand <ref>`)]\n")
    shown = header + _fit(compacted, limit - len(header), f"full output: {keep_path}")
    return shown if len(shown) < len(text) else None  # never larger than the output itself


def print_captured(base: str, exit_code: str, stdout: IO[bytes] | None = None,
                   stderr: IO[str] | None = None) -> int:
    """``compactor hook claude-code output BASE EXIT_CODE``: print a captured output (see
    :func:`wrap_command`). Fails open: on any error the captured bytes are printed as they are."""
    out = stdout or sys.stdout.buffer
    err = stderr or sys.stderr
    raw: bytes | None = None
    try:
        path = _capture_base(base)
        out_file = Path(str(path) + ".out")
        raw = out_file.read_bytes()
        rc = int(exit_code)
        keep = Path(str(path) + ".full.txt")
        if len(raw) <= MAX_READ_BYTES:
            text = captured_text(raw, rc, str(keep))
        else:  # too large to compact quickly: its tail, where the final error is
            text = _fit(raw[-FAILURE_INLINE_LIMIT * 8:].decode("utf-8", errors="replace"),
                        FAILURE_INLINE_LIMIT, f"full output: {keep}")
        out.write(raw if text is None else text.encode("utf-8"))
        out.flush()
        if text is not None and f"full output: {keep}" in text:
            os.replace(out_file, keep)  # the wrapper removes .out; a cut output stays readable
        return 0
    except BaseException as exc:  # noqa: BLE001 - fail open
        msg = " ".join(str(exc).split())[:300] or type(exc).__name__
        try:
            err.write(f"compactor hook claude-code output: {type(exc).__name__}: {msg}; printed the output as it is\n")
            err.flush()
        except (OSError, ValueError):
            pass
        if raw is None:
            return 1  # nothing printed: the wrapper prints the capture file itself
        try:
            out.write(raw)
            out.flush()
        except (OSError, ValueError):
            return 1
        return 0


# ---------------------------------------------------------------------------- PreCompact / SessionStart


#: text compactor's own hooks put into a session; records holding it are not read back into the
#: next anchor (that would nest the anchor in itself and turn its wording into "constraints").
_OWN_MARKERS = ("Restored by compactor after compaction", "compactor (deterministic anchor of this session)")


def own_records_removed(raw: bytes) -> bytes:
    """The transcript JSONL without the records that only echo compactor's hooks: hook
    attachments (``hook_success`` / ``hook_additional_context``) and ``/compact``'s local command
    output carrying compactor's text. Every other line is kept byte for byte."""
    out: list[bytes] = []
    for line in raw.splitlines(keepends=True):
        if any(m.encode() in line for m in _OWN_MARKERS):
            try:
                rec = json.loads(line)
            except ValueError:
                rec = None
            if isinstance(rec, dict) and rec.get("type") in ("response_item", "event_msg"):
                payload = rec.get("payload")
                if isinstance(payload, dict) and payload.get("type") in (
                        "message", "user_message", "agent_message", "hook_output", "hook_completed"):
                    continue  # Codex rollout: the re-injected anchor as a message or event
            if isinstance(rec, dict):
                att = rec.get("attachment")
                if rec.get("type") == "attachment" and isinstance(att, dict) and str(att.get("type", "")).startswith("hook_"):
                    continue
                msg = rec.get("message")
                content = msg.get("content") if isinstance(msg, dict) else None
                if rec.get("type") == "user" and isinstance(content, str) and content.startswith("<local-command-stdout>"):
                    continue
        out.append(line)
    return b"".join(out)


def _anchor_markdown(transcript: str, fmt: str = "claude-code") -> str:
    from .. import compact, to_markdown

    raw = Path(transcript).read_bytes()
    result = compact(own_records_removed(raw), format=fmt, level=2, store=_store_spec())
    if result.anchor is None:
        raise RuntimeError("no anchor was built from the transcript")
    return to_markdown(result.anchor)


def store_anchor(payload: dict[str, Any], host: str = "claude-code", fmt: str = "claude-code") -> tuple[str, Path]:
    """Build the anchor of the payload's transcript and store it for the session: (markdown, path)."""
    transcript = payload.get("transcript_path")
    if not isinstance(transcript, str) or not Path(transcript).is_file():
        raise ValueError(f"transcript_path {str(transcript)[:200]!r} is not a readable file")
    path = anchor_path(payload.get("session_id", ""), host)
    md = _anchor_markdown(transcript, fmt)
    _atomic_write(path, md)
    return md, path


def pre_compact(payload: dict[str, Any]) -> str:
    """Build and store the anchor; return the instructions for the summariser (stdout)."""
    md, path = store_anchor(payload)
    shown = shorten_anchor(md, PRECOMPACT_LIMIT - 600, path)
    return ("compactor (deterministic anchor of this session): the summary must keep the following "
            "verbatim - the user's constraints, the key evidence (exact error lines, file:line, "
            "numbers), the excluded approaches and failed attempts with why they failed, and the "
            "open next steps.\n\n" + shown)


def session_start(payload: dict[str, Any], host: str = "claude-code") -> dict[str, Any] | None:
    """After compaction (source ``compact``): the stored anchor as ``additionalContext``."""
    if payload.get("source") != "compact":
        raise HookSkip
    path = anchor_path(payload.get("session_id", ""), host)
    try:
        md = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HookSkip from None
    intro = ("Restored by compactor after compaction: the deterministic anchor of this session as it "
             "was just before /compact (user constraints, verbatim evidence, excluded approaches, "
             "next steps). It is authoritative where the summary above is vaguer.\n\n")
    body = shorten_anchor(md, CONTEXT_LIMIT - len(intro) - 50, path)
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": intro + body}}


_PRIORITY = ("constraint", "evidence", "excluded", "goal", "open", "decision", "done", "files",
             "约束", "证据", "排除", "目标", "待解决", "决策", "已完成", "文件")


def shorten_anchor(md: str, limit: int, path: Path) -> str:
    """The anchor Markdown if it fits ``limit`` characters, else a shortened version: sections
    kept in priority order (constraints, evidence, excluded approaches, goal, next steps, ...)
    with their first lines, in their original order, plus the path of the full anchor."""
    if len(md) <= limit:
        return md
    note = f"\n[anchor shortened to fit; the full anchor is in {path}]\n"
    limit -= len(note)
    sections = [s for s in md.split("\n\n") if s.strip()]

    def rank(sec: str) -> int:
        head = sec.splitlines()[0].casefold()
        for i, key in enumerate(_PRIORITY):
            if key in head:
                return i % 8
        return 8

    keep: dict[int, list[str]] = {}
    used = 0
    for idx in sorted(range(len(sections)), key=lambda i: (rank(sections[i]), i)):
        lines = sections[idx].splitlines()
        chosen: list[str] = []
        for ln in lines:
            ln = ln if len(ln) <= 600 else ln[:597] + "..."
            if used + len(ln) + 1 > limit:
                break
            chosen.append(ln)
            used += len(ln) + 1
        if len(chosen) < len(lines) and chosen:
            more = f"- ... {len(lines) - len(chosen)} more"
            if used + len(more) + 1 <= limit:
                chosen.append(more)
                used += len(more) + 1
        if chosen:
            keep[idx] = chosen
        used += 1
    return "\n\n".join("\n".join(keep[i]) for i in sorted(keep)) + "\n" + note


# ---------------------------------------------------------------------------- install


def hook_command(event: str, exe: str | None = None) -> str:
    exe = exe or _compactor_exe()
    return f"{shlex.quote(exe)} hook claude-code {event}"


def _compactor_exe() -> str:
    import shutil

    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    if argv0 and os.path.basename(argv0) == "compactor" and os.path.isfile(argv0):
        return os.path.abspath(argv0)
    found = shutil.which("compactor")
    return os.path.abspath(found) if found else "compactor"


def settings_snippet(exe: str = "compactor") -> dict[str, Any]:
    """The ``hooks`` block of a Claude Code settings.json that runs compactor's hooks."""
    return {"hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": hook_command("pre-tool-use", exe), "timeout": 30}]}],
        "PostToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": hook_command("post-tool-use", exe), "timeout": 60}]}],
        "PreCompact": [{"hooks": [{"type": "command", "command": hook_command("pre-compact", exe), "timeout": 120}]}],
        "SessionStart": [{"matcher": "compact", "hooks": [
            {"type": "command", "command": hook_command("session-start", exe), "timeout": 30}]}],
    }}


def codex_hooks_snippet(exe: str = "compactor") -> dict[str, Any]:
    """The ``hooks.json`` of Codex CLI (in ``$CODEX_HOME``) that carries the anchor across compaction."""
    q = shlex.quote(exe)
    return {"hooks": {
        "PreCompact": [{"hooks": [{"type": "command", "command": f"{q} hook codex pre-compact"}]}],
        "SessionStart": [{"matcher": "compact", "hooks": [
            {"type": "command", "command": f"{q} hook codex session-start"}]}],
    }}


def settings_path(scope: str, project_dir: str | os.PathLike[str] | None = None) -> Path:
    if scope == "project":
        return Path(project_dir or os.getcwd()) / ".claude" / "settings.json"
    if scope == "user":
        cfg = os.environ.get("CLAUDE_CONFIG_DIR")
        return Path(cfg) / "settings.json" if cfg else Path.home() / ".claude" / "settings.json"
    raise ValueError(f"unknown scope {scope!r}: use 'project' or 'user'")


_OURS = lazy_re(r"\bhook\s+claude-code\s+(pre-tool-use|post-tool-use|pre-compact|session-start)\b")


def merge_settings(settings: dict[str, Any], exe: str) -> tuple[dict[str, Any], bool]:
    """Merge compactor's hooks into a parsed settings.json: other keys and other hooks are kept
    as they are; compactor's own entries are updated in place (so installing twice is a no-op)."""
    from ..errors import InputError

    out = json.loads(json.dumps(settings))
    hooks = out.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InputError("'hooks' is not an object; fix it by hand first", source="settings.json")
    changed = False
    for event, groups in settings_snippet(exe)["hooks"].items():
        want = groups[0]
        existing = hooks.setdefault(event, [])
        if not isinstance(existing, list):
            raise InputError(f"'hooks.{event}' is not a list; fix it by hand first", source="settings.json")
        found = False
        for group in existing:
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                continue
            for i, h in enumerate(group["hooks"]):
                if isinstance(h, dict) and isinstance(h.get("command"), str) and _OURS.search(h["command"]):
                    if found:
                        continue
                    found = True
                    if h != want["hooks"][0] or group.get("matcher") != want.get("matcher"):
                        group["hooks"][i] = dict(want["hooks"][0])
                        if "matcher" in want:
                            group["matcher"] = want["matcher"]
                        changed = True
        if not found:
            existing.append(json.loads(json.dumps(want)))
            changed = True
    return out, changed


def remove_settings(settings: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Take compactor's hooks out of a parsed settings.json: each hook entry that runs
    ``compactor hook claude-code EVENT``, then the groups, event lists and ``hooks`` object that
    this left empty. Everything else stays as it is."""
    out = json.loads(json.dumps(settings))
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out, False
    changed = False
    for event in list(hooks):
        groups = hooks[event]
        if event not in EVENTS.values() or not isinstance(groups, list):
            continue
        kept_groups, ev_changed = [], False
        for group in groups:
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                kept_groups.append(group)
                continue
            kept = [h for h in group["hooks"]
                    if not (isinstance(h, dict) and isinstance(h.get("command"), str) and _OURS.search(h["command"]))]
            if len(kept) == len(group["hooks"]):
                kept_groups.append(group)
                continue
            changed = ev_changed = True
            if kept:
                kept_groups.append({**group, "hooks": kept})
        if ev_changed:
            if kept_groups:
                hooks[event] = kept_groups
            else:  # emptied by this removal (a list that was empty before is left alone)
                del hooks[event]
    if changed and not hooks:
        del out["hooks"]
    return out, changed


def _read_settings(path: Path) -> dict[str, Any]:
    from .mcp_install import read_json_config

    return read_json_config(path)


def install(scope: str = "user", project_dir: str | None = None, exe: str | None = None) -> tuple[Path, bool]:
    """Merge compactor's hooks into the settings file of ``scope``; returns (path, changed)."""
    path = settings_path(scope, project_dir)
    merged, changed = merge_settings(_read_settings(path), exe or _compactor_exe())
    if changed:
        _atomic_write(path, json.dumps(merged, indent=2, ensure_ascii=False) + "\n")
    return path, changed


def uninstall(scope: str = "user", project_dir: str | None = None) -> tuple[Path, bool]:
    """Remove what :func:`install` added to the settings file of ``scope``; returns (path, changed)."""
    path = settings_path(scope, project_dir)
    if not path.exists():
        return path, False
    kept, changed = remove_settings(_read_settings(path))
    if changed:
        _atomic_write(path, json.dumps(kept, indent=2, ensure_ascii=False) + "\n")
    return path, changed


# ---------------------------------------------------------------------------- entry point


def _dispatch(host: str, event: str, payload: dict[str, Any]) -> Any:
    if host == "codex":
        if event == "pre-compact":  # Codex reads no instructions from it: store the anchor, print nothing
            store_anchor(payload, host="codex", fmt="codex")
            return None
        if event == "session-start":
            return session_start(payload, host="codex")
        raise ValueError(f"unknown Codex hook event {event!r}; expected pre-compact or session-start")
    if event == "pre-tool-use":
        return pre_tool_use(payload)
    if event == "post-tool-use":
        return post_tool_use(payload)
    if event == "pre-compact":
        return pre_compact(payload)
    if event == "session-start":
        return session_start(payload)
    raise ValueError(f"unknown hook event {event!r}; expected one of {', '.join(EVENTS)}")


def run_hook(event: str, stdin: IO[str] | None = None, stdout: IO[str] | None = None,
             stderr: IO[str] | None = None, host: str = "claude-code") -> int:
    """Run one hook on a JSON payload from ``stdin``. Always exits 0 (fail open)."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        raw = stdin.read()
        payload = json.loads(raw) if raw.strip() else {}
        if not isinstance(payload, dict):
            raise ValueError("hook payload is not a JSON object")
        out = _dispatch(host, event, payload)
        if out is None:
            return 0
        text = out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)
        stdout.write(text if text.endswith("\n") else text + "\n")
        stdout.flush()
    except HookSkip:
        return 0
    except BaseException as exc:  # noqa: BLE001 - fail open, whatever happened
        msg = " ".join(str(exc).split())[:300] or type(exc).__name__
        try:
            stderr.write(f"compactor hook {host} {event}: {type(exc).__name__}: {msg}; "
                         f"left the {'tool output' if event == 'post-tool-use' else 'session'} untouched\n")
            stderr.flush()
        except (OSError, ValueError):
            pass
    return 0
