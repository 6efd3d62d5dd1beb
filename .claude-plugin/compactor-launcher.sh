#!/bin/sh
# Runs compactor for the Claude Code plugin: the installed command when there is one
# (uv tool install context-compactor, pipx install context-compactor), else this plugin's
# own copy of the repository through uv, which builds and caches it on first use.
# Hooks fail open: without either, one line on stderr and Claude Code goes on as before.
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
if [ -n "${COMPACTOR_BIN:-}" ]; then exec "$COMPACTOR_BIN" "$@"; fi
if command -v compactor >/dev/null 2>&1; then exec compactor "$@"; fi
if command -v uvx >/dev/null 2>&1; then exec uvx --quiet --from "$here/..[mcp,offline]" compactor "$@"; fi
echo "compactor plugin: no 'compactor' command and no uv; install one with 'uv tool install context-compactor' or 'pipx install context-compactor'" >&2
exit 1
