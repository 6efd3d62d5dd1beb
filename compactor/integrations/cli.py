"""``compactor hook HOST EVENT``: the hook commands, parsed without building the main CLI.

A hook runs on every tool call, so this module imports only the standard library; the host
module imports compactor when (and only when) it has work to do.
"""

from __future__ import annotations

import json
import sys

__all__ = ["hook_main"]

EVENTS = ("pre-tool-use", "post-tool-use", "pre-compact", "session-start")

USAGE = """usage: compactor hook claude-code EVENT            (reads the hook payload on stdin)
       compactor hook claude-code install [--user | --project] [--project-dir DIR]
       compactor hook claude-code uninstall [--user | --project] [--project-dir DIR]
       compactor hook claude-code settings            (print the settings.json snippet)
       compactor hook claude-code output BASE EXIT    (used by the pre-tool-use wrapper: print a
                                                       captured Bash output, compacted when long)
       compactor hook codex pre-compact|session-start (Codex CLI: the anchor across compaction)
       compactor hook codex settings                  (print the hooks.json snippet)

EVENT is one of: pre-tool-use, post-tool-use, pre-compact, session-start.
Hooks fail open: on any error the tool output is left untouched, the reason goes to stderr, exit 0.
"""

INSTALL_USAGE = """usage: compactor hook claude-code {action} [--user | --project] [--project-dir DIR]

{what}

options:
  --user             the user's settings: $CLAUDE_CONFIG_DIR/settings.json or ~/.claude/settings.json (default)
  --project          the project's settings: .claude/settings.json of the current directory
  --project-dir DIR  the project's settings in DIR/.claude/settings.json
  -h, --help         show this help and exit
"""

_INSTALL_WHAT = {
    "install": ("Merge compactor's four hooks (PreToolUse and PostToolUse on Bash, PreCompact, SessionStart on\n"
                "compact) into a Claude Code settings file, with the absolute path of this compactor. Other hooks\n"
                "and settings are kept; running it again changes nothing; an older compactor entry is updated."),
    "uninstall": ("Remove compactor's hooks from a Claude Code settings file: the hook entries that run\n"
                  "'compactor hook claude-code EVENT', and the groups and event lists that leaves empty.\n"
                  "Everything else in the file stays."),
}


def _usage_error(msg: str) -> int:
    sys.stderr.write(f"compactor hook: {msg} (see 'compactor hook --help')\n")
    return 2


def hook_main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        (sys.stdout if argv else sys.stderr).write(USAGE)
        return 0 if argv else 2
    host, rest = argv[0], argv[1:]
    if host not in ("claude-code", "codex"):
        return _usage_error(f"unknown host {host!r}; supported: claude-code, codex")
    if not rest or rest[0] in ("-h", "--help"):
        (sys.stdout if rest else sys.stderr).write(USAGE)
        return 0 if rest else 2
    action, opts = rest[0], rest[1:]
    if action == "output" and host == "claude-code":
        if len(opts) != 2:
            return _usage_error("output needs BASE and EXIT_CODE")
        try:
            from . import claude_code
        except BaseException:  # noqa: BLE001 - the wrapper prints the capture itself
            return 1
        return claude_code.print_captured(opts[0], opts[1])
    if action in EVENTS and not (host == "codex" and action in ("post-tool-use", "pre-tool-use")):
        if opts:
            return _usage_error(f"unexpected arguments {' '.join(opts)!r} for {action}")
        try:
            from . import claude_code
        except BaseException as exc:  # noqa: BLE001 - a broken install must not block the agent either
            sys.stderr.write(f"compactor hook {host} {action}: cannot load the hook ({type(exc).__name__}: "
                             f"{' '.join(str(exc).split())[:200]}); left everything untouched\n")
            return 0
        return claude_code.run_hook(action, host=host)
    from . import claude_code

    if host == "codex":
        if action == "settings":
            sys.stdout.write(json.dumps(claude_code.codex_hooks_snippet(claude_code._compactor_exe()), indent=2) + "\n")
            return 0
        return _usage_error(f"unknown action {action!r} for codex; expected pre-compact, session-start or settings "
                            "(Codex cannot replace a shell command's output from a hook)")

    if action == "settings":
        sys.stdout.write(json.dumps(claude_code.settings_snippet(claude_code._compactor_exe()), indent=2) + "\n")
        return 0
    if action in ("install", "uninstall"):
        scope = "user"
        project_dir = None
        i = 0
        while i < len(opts):
            o = opts[i]
            if o in ("-h", "--help"):
                sys.stdout.write(INSTALL_USAGE.format(action=action, what=_INSTALL_WHAT[action]))
                return 0
            if o in ("--user", "--project"):
                scope = o[2:]
            elif o == "--project-dir" and i + 1 < len(opts):
                project_dir = opts[i + 1]
                scope = "project"
                i += 1
            else:
                sys.stderr.write(f"compactor hook: unknown option {o!r} for {action} "
                                 f"(see 'compactor hook claude-code {action} --help')\n")
                return 2
            i += 1
        from ..errors import CompactorError

        try:
            if action == "install":
                path, changed = claude_code.install(scope, project_dir)
            else:
                path, changed = claude_code.uninstall(scope, project_dir)
        except CompactorError as exc:
            sys.stderr.write(f"compactor: {exc.one_line()}\n")
            return exc.exit_code
        except OSError as exc:
            sys.stderr.write(f"compactor: {getattr(exc, 'filename', '') or ''}: cannot write settings: {exc.strerror}\n")
            return 1
        if action == "install":
            sys.stdout.write(f"{'installed compactor hooks in' if changed else 'compactor hooks already installed in'} {path}\n")
        else:
            sys.stdout.write(f"{'removed compactor hooks from' if changed else 'no compactor hooks in'} {path}\n")
        return 0
    return _usage_error(f"unknown action {action!r}; expected one of: {', '.join(claude_code.EVENTS)}, install, uninstall, settings")
