"""``compactor mcp install --client NAME``: the server entry in each client's own configuration file,
the rest of the file kept, idempotent, ``--print`` writing nothing, ``uninstall`` undoing it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from compactor.integrations import mcp_install

EXE = str(Path(sys.executable).with_name("compactor"))


def _run(*args: str, home: Path, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME")}
    e.update({"HOME": str(home), **(env or {})})
    return subprocess.run([EXE, "mcp", *args], capture_output=True, text=True, cwd=cwd or home, env=e, timeout=120)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


JSON_CLIENTS = {"claude-code": ".claude.json", "gemini": ".gemini/settings.json", "cursor": ".cursor/mcp.json"}


@pytest.mark.parametrize("client", sorted(JSON_CLIENTS))
def test_json_clients_user_scope(home: Path, client: str):
    path = home / JSON_CLIENTS[client]
    path.parent.mkdir(parents=True, exist_ok=True)
    theirs = {"numStartups": 7, "mcpServers": {"github": {"command": "npx", "args": ["-y", "gh-mcp"]}},
              "projects": {"/src/x": {"allowedTools": []}}}
    path.write_text(json.dumps(theirs))
    os.chmod(path, 0o640)
    p = _run("install", "--client", client, home=home)
    assert p.returncode == 0 and p.stdout.startswith("installed MCP server 'compactor'"), p.stderr
    data = json.loads(path.read_text())
    ent = data["mcpServers"]["compactor"]
    assert ent["command"] == EXE and ent["args"] == ["mcp"]
    assert (ent.get("type") == "stdio") == (client == "claude-code")
    # everything else is as it was
    assert data["mcpServers"]["github"] == theirs["mcpServers"]["github"]
    assert {k: v for k, v in data.items() if k != "mcpServers"} == {k: v for k, v in theirs.items() if k != "mcpServers"}
    assert path.stat().st_mode & 0o777 == 0o640
    first = path.read_bytes()
    again = _run("install", "--client", client, home=home)
    assert again.returncode == 0 and again.stdout.startswith("already installed") and path.read_bytes() == first
    gone = _run("uninstall", "--client", client, home=home)
    assert gone.returncode == 0 and gone.stdout.startswith("removed")
    assert json.loads(path.read_text()) == theirs


def test_project_scope_and_print(home: Path, tmp_path: Path):
    proj = tmp_path / "proj"
    proj.mkdir()
    shown = _run("install", "--client", "claude-code", "--scope", "project", "--print", home=home, cwd=proj)
    assert shown.returncode == 0
    head, body = shown.stdout.split("\n", 1)
    assert head == f"# {proj / '.mcp.json'}"
    assert json.loads(body) == {"mcpServers": {"compactor": {"type": "stdio", "command": EXE, "args": ["mcp"]}}}
    assert not (proj / ".mcp.json").exists() and list(home.iterdir()) == []  # --print writes nothing
    p = _run("install", "--client", "cursor", "--scope", "project", "--project-dir", str(proj), home=home)
    assert p.returncode == 0
    assert json.loads((proj / ".cursor" / "mcp.json").read_text())["mcpServers"]["compactor"]["args"] == ["mcp"]


def test_codex_toml_keeps_the_rest_and_replaces_an_old_entry(home: Path):
    cfg = home / ".codex" / "config.toml"
    cfg.parent.mkdir()
    original = ('model = "o4-mini"  # mine\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\n\n'
                '[mcp_servers.compactor]\ncommand = "/old/compactor"\nargs = ["mcp"]\n\n'
                '[mcp_servers.compactor.env]\nX = "1"\n\n[profiles.fast]\nmodel = "m"\n')
    cfg.write_text(original)
    p = _run("install", "--client", "codex", home=home)
    assert p.returncode == 0, p.stderr
    text = cfg.read_text()
    data = tomllib.loads(text)
    assert data["mcp_servers"]["compactor"] == {"command": EXE, "args": ["mcp"]}  # the old sub-table is gone too
    assert data["mcp_servers"]["docs"] == {"command": "docs-mcp"} and data["profiles"] == {"fast": {"model": "m"}}
    assert data["model"] == "o4-mini" and 'model = "o4-mini"  # mine' in text  # comments survive
    first = cfg.read_bytes()
    assert _run("install", "--client", "codex", home=home).stdout.startswith("already installed")
    assert cfg.read_bytes() == first
    assert _run("uninstall", "--client", "codex", home=home).returncode == 0
    after = tomllib.loads(cfg.read_text())
    assert "compactor" not in after["mcp_servers"] and after["mcp_servers"]["docs"] == {"command": "docs-mcp"}
    # CODEX_HOME is where Codex looks
    ch = home / "codex-home"
    assert _run("install", "--client", "codex", home=home, env={"CODEX_HOME": str(ch)}).returncode == 0
    assert tomllib.loads((ch / "config.toml").read_text())["mcp_servers"]["compactor"]["args"] == ["mcp"]


def test_a_fresh_install_then_uninstall_gives_the_file_back(home: Path):
    cfg = home / ".codex" / "config.toml"
    cfg.parent.mkdir()
    original = 'model = "o3"\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\n'
    cfg.write_text(original)
    assert _run("install", "--client", "codex", home=home).returncode == 0
    assert _run("uninstall", "--client", "codex", home=home).returncode == 0
    assert cfg.read_text() == original


@pytest.mark.parametrize("client,name,content", [
    ("claude-code", ".claude.json", '{"mcpServers": {,}}'),
    ("gemini", ".gemini/settings.json", '["not", "an", "object"]'),
    ("codex", ".codex/config.toml", "model = \n"),
])
def test_a_broken_file_is_a_one_line_error_and_left_alone(home: Path, client: str, name: str, content: str):
    path = home / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    p = _run("install", "--client", client, home=home)
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1, p.stderr
    assert str(path) in p.stderr
    assert path.read_text() == content


def test_unknown_client_is_a_usage_error(home: Path):
    p = _run("install", "--client", "vscode", home=home)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "claude-code" in p.stderr


def test_inline_codex_entry_is_refused_not_duplicated(tmp_path: Path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('mcp_servers = { compactor = { command = "x" } }\n')
    with pytest.raises(Exception, match="inline"):
        mcp_install.install("codex", exe="/bin/compactor", path=cfg)
    assert cfg.read_text() == 'mcp_servers = { compactor = { command = "x" } }\n'
