"""``compactor mcp install --client NAME``: register compactor's MCP server in an agent client's
own configuration file, keeping everything else in it.

| client | user scope | project scope | form |
|---|---|---|---|
| ``claude-code`` | ``~/.claude.json`` (``$CLAUDE_CONFIG_DIR/.claude.json``) | ``.mcp.json`` | ``mcpServers`` JSON |
| ``codex`` | ``~/.codex/config.toml`` (``$CODEX_HOME``) | ``.codex/config.toml`` | ``[mcp_servers.NAME]`` TOML |
| ``gemini`` | ``~/.gemini/settings.json`` | ``.gemini/settings.json`` | ``mcpServers`` JSON |
| ``cursor`` | ``~/.cursor/mcp.json`` | ``.cursor/mcp.json`` | ``mcpServers`` JSON |

Installing twice changes nothing; an entry of the same name is replaced; ``uninstall`` removes
the entry (and nothing else). Standard library only: no MCP SDK is needed to register the server.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..atomic import TempBeside
from ..errors import ConfigError, InputError

__all__ = ["CLIENTS", "config_path", "entry", "install", "read_json_config", "render", "uninstall"]

CLIENTS = ("claude-code", "codex", "gemini", "cursor")
SCOPES = ("user", "project")
_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _home() -> Path:
    return Path.home()


def config_path(client: str, scope: str = "user", project_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where ``client`` keeps its MCP servers for ``scope`` (``user`` or ``project``)."""
    if client not in CLIENTS:
        raise ConfigError(f"unknown client {client!r}; choose one of: {', '.join(CLIENTS)}", option="client")
    if scope not in SCOPES:
        raise ConfigError(f"unknown scope {scope!r}; choose user or project", option="scope")
    proj = Path(project_dir) if project_dir is not None else Path.cwd()
    if client == "claude-code":
        if scope == "project":
            return proj / ".mcp.json"
        cfg = os.environ.get("CLAUDE_CONFIG_DIR")
        return Path(cfg) / ".claude.json" if cfg else _home() / ".claude.json"
    if client == "codex":
        if scope == "project":
            return proj / ".codex" / "config.toml"
        home = os.environ.get("CODEX_HOME")
        return (Path(home) if home else _home() / ".codex") / "config.toml"
    folder = ".gemini" if client == "gemini" else ".cursor"
    name = "settings.json" if client == "gemini" else "mcp.json"
    return (proj if scope == "project" else _home()) / folder / name


def entry(client: str, exe: str, args: tuple[str, ...] = ("mcp",)) -> dict[str, Any]:
    """The server's entry for ``client``: a stdio server started as ``EXE mcp``."""
    out: dict[str, Any] = {"command": exe, "args": list(args)}
    if client == "claude-code":
        out = {"type": "stdio", **out}
    return out


def _toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)  # a JSON string is a TOML basic string


def _toml_key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else _toml_str(name)


def render(client: str, name: str, ent: dict[str, Any]) -> str:
    """The entry as it is written in ``client``'s file (what ``--print`` shows)."""
    if client == "codex":
        lines = [f"[mcp_servers.{_toml_key(name)}]"]
        for k, v in ent.items():
            val = "[" + ", ".join(_toml_str(a) for a in v) + "]" if isinstance(v, list) else _toml_str(v)
            lines.append(f"{k} = {val}")
        return "\n".join(lines) + "\n"
    return json.dumps({"mcpServers": {name: ent}}, indent=2, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------------------- JSON files


def read_json_config(path: Path) -> dict[str, Any]:
    """A client's JSON configuration file as an object ({} when missing or empty); anything else is
    an :class:`InputError` naming the file and position, and the file is left alone."""
    if not path.exists():
        return {}
    raw = path.read_text(encoding="utf-8")
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON ({exc.msg}); fix it first", source=str(path),
                         position=f"line {exc.lineno} column {exc.colno}") from None
    if not isinstance(data, dict):
        raise InputError("the configuration is not a JSON object", source=str(path))
    return data


def _servers(data: dict[str, Any], path: Path, create: bool) -> dict[str, Any] | None:
    servers = data.get("mcpServers")
    if servers is None:
        if not create:
            return None
        servers = data["mcpServers"] = {}
    if not isinstance(servers, dict):
        raise InputError("'mcpServers' is not an object; fix it by hand first", source=str(path))
    return servers


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with TempBeside(path, keep_mode=True) as tmp, open(tmp, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)


# ---------------------------------------------------------------------------- TOML (Codex)

_HEADER_RE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")


def _table_keys(header: str) -> list[str]:
    """The dotted keys of a table header (bare or quoted parts)."""
    keys: list[str] = []
    for m in re.finditer(r'"((?:[^"\\]|\\.)*)"|\'([^\']*)\'|([A-Za-z0-9_-]+)', header):
        keys.append(json.loads(f'"{m.group(1)}"') if m.group(1) is not None else (m.group(2) if m.group(2) is not None else m.group(3)))
    return keys


def _without_tables(text: str, name: str) -> tuple[str, bool]:
    """TEXT without the ``[mcp_servers.NAME]`` table and its sub-tables (each up to the next header)."""
    out: list[str] = []
    skipping = removed = False
    for line in text.splitlines(keepends=True):
        m = _HEADER_RE.match(line)
        if m:
            keys = _table_keys(m.group(1))
            skipping = keys[:2] == ["mcp_servers", name]
            removed = removed or skipping
        if not skipping:
            out.append(line)
    return "".join(out), removed


def _toml_install(path: Path, name: str, ent: dict[str, Any], remove: bool = False) -> bool:
    import tomllib

    old = path.read_text(encoding="utf-8") if path.exists() else ""
    try:
        parsed = tomllib.loads(old)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"not valid TOML ({exc}); fix it before installing", source=str(path)) from None
    servers = parsed.get("mcp_servers", {})
    current = servers.get(name) if isinstance(servers, dict) else None
    if (current is None and remove) or (not remove and current == ent):
        return False
    text, found = _without_tables(old, name)
    if current is not None and not found:
        raise InputError(f"mcp_servers.{name} is written inline; edit it by hand or remove it first", source=str(path))
    if remove and text.strip():
        text = text.rstrip("\n") + "\n"  # the blank line that set the table apart goes with it
    if not remove:
        if text and not text.endswith("\n"):
            text += "\n"
        text += ("\n" if text.strip() else "") + render("codex", name, ent)
    check = tomllib.loads(text)  # the edit kept the file valid and changed only this entry
    rest = dict(check.get("mcp_servers", {}))
    got = rest.pop(name, None)
    before = dict(servers) if isinstance(servers, dict) else {}
    before.pop(name, None)
    if got != (None if remove else ent) or rest != before:
        raise InputError(f"cannot edit mcp_servers.{name} safely here; edit it by hand", source=str(path))
    _write(path, text)
    return True


# ---------------------------------------------------------------------------- entry points


def _check_name(name: str) -> str:
    if not _NAME_RE.fullmatch(name or ""):
        raise ConfigError(f"server name {name!r}: use letters, digits, '-' or '_' (at most 64)", option="name")
    return name


def install(client: str, *, exe: str, args: tuple[str, ...] = ("mcp",), scope: str = "user", project_dir: str | os.PathLike[str] | None = None,
            path: str | os.PathLike[str] | None = None, name: str = "compactor") -> tuple[Path, bool]:
    """Add (or update) the server entry; returns (the file, whether it changed)."""
    _check_name(name)
    target = Path(path) if path is not None else config_path(client, scope, project_dir)
    if client not in CLIENTS:
        config_path(client)  # the one-line error naming the clients
    ent = entry(client, exe, args)
    if client == "codex":
        return target, _toml_install(target, name, ent)
    data = read_json_config(target)
    servers = _servers(data, target, create=True)
    assert servers is not None
    if servers.get(name) == ent:
        return target, False
    servers[name] = ent
    _write(target, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return target, True


def uninstall(client: str, *, scope: str = "user", project_dir: str | os.PathLike[str] | None = None,
              path: str | os.PathLike[str] | None = None, name: str = "compactor") -> tuple[Path, bool]:
    """Remove the server entry (nothing else); returns (the file, whether it changed)."""
    _check_name(name)
    target = Path(path) if path is not None else config_path(client, scope, project_dir)
    if client not in CLIENTS:
        config_path(client)
    if not target.exists():
        return target, False
    if client == "codex":
        return target, _toml_install(target, name, {}, remove=True)
    data = read_json_config(target)
    servers = _servers(data, target, create=False)
    if not servers or name not in servers:
        return target, False
    del servers[name]
    if not servers:
        del data["mcpServers"]
    _write(target, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return target, True
