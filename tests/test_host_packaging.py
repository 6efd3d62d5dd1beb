"""The Claude Code plugin (``.claude-plugin/``: manifest, marketplace, hooks, launcher) and the MCP
registry's ``server.json``: they say what the code does (the same hooks as ``compactor hook
claude-code install``, the MCP server started as ``compactor mcp``) and their commands run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import compactor
from compactor.integrations import claude_code as cc

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / ".claude-plugin"
LAUNCHER = PLUGIN / "compactor-launcher.sh"
LAUNCH = "${CLAUDE_PLUGIN_ROOT}/.claude-plugin/compactor-launcher.sh"
EXE = str(Path(sys.executable).with_name("compactor"))
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _load(name: str) -> dict:
    return json.loads((PLUGIN / name).read_text(encoding="utf-8"))


def test_the_plugin_bundles_the_same_hooks_and_the_mcp_server():
    manifest = _load("plugin.json")
    assert manifest["name"] == "compactor" and manifest["version"] == compactor.__version__
    hooks = json.loads((ROOT / manifest["hooks"]).read_text(encoding="utf-8"))
    want = cc.settings_snippet("compactor")["hooks"]
    got = hooks["hooks"]
    assert set(got) == set(want)
    for event, groups in want.items():
        assert len(got[event]) == 1
        g, w = got[event][0], groups[0]
        assert g.get("matcher") == w.get("matcher")
        assert [h["timeout"] for h in g["hooks"]] == [h["timeout"] for h in w["hooks"]]
        assert [h["command"] for h in g["hooks"]] == [h["command"].replace("compactor ", LAUNCH + " ", 1) for h in w["hooks"]]
    assert manifest["mcpServers"] == {"compactor": {"command": LAUNCH, "args": ["mcp"]}}
    market = _load("marketplace.json")
    entry = next(p for p in market["plugins"] if p["name"] == manifest["name"])
    assert (ROOT / entry["source"] / ".claude-plugin" / "plugin.json").is_file()
    assert os.access(LAUNCHER, os.X_OK)


def _launch(tmp_path: Path, *args: str, path_dirs: list[Path], stdin: str = "") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("COMPACTOR_BIN",)}
    env.update(PATH=os.pathsep.join([*map(str, path_dirs), "/usr/bin", "/bin"]), HOME=str(tmp_path / "home"),
               COMPACTOR_STORE=str(tmp_path / "s.sqlite"), COMPACTOR_HOOK_DIR=str(tmp_path / "anchors"))
    return subprocess.run(["/bin/sh", "-c", " ".join(["\"$0\"", *("'" + a + "'" for a in args)]), str(LAUNCHER)],
                          capture_output=True, text=True, input=stdin, env=env, timeout=120)


def test_the_launcher_runs_the_installed_command(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "compactor").symlink_to(EXE)
    if Path("/usr/bin/compactor").exists() or Path("/bin/compactor").exists():
        pytest.skip("a system-wide compactor would shadow the one under test")
    p = _launch(tmp_path, "--version", path_dirs=[bin_dir])
    assert p.returncode == 0 and p.stdout.strip() == f"compactor {compactor.__version__}", p.stderr
    # a hook command exactly as the plugin's hooks.json writes it, with Claude Code's variable set
    cmd = _load("hooks.json")["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    env = {**os.environ, "CLAUDE_PLUGIN_ROOT": str(ROOT), "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin",
           "COMPACTOR_HOOK_DIR": str(tmp_path / "anchors"), "COMPACTOR_STORE": str(tmp_path / "s.sqlite")}
    cc_dir = tmp_path / "anchors"
    cc_dir.mkdir()
    (cc_dir / "sess-1.anchor.md").write_text("## Current working state\n\n**Goal**: ship it\n", encoding="utf-8")
    out = subprocess.run(["/bin/sh", "-c", cmd], input=json.dumps({"hook_event_name": "SessionStart", "source": "compact",
                                                                    "session_id": "sess-1"}),
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "ship it" in json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]


def test_the_launcher_without_compactor_or_uv_says_how_to_install(tmp_path: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    if any(Path(d, n).exists() for d in ("/usr/bin", "/bin") for n in ("compactor", "uvx")):
        pytest.skip("compactor or uvx is installed system-wide")
    p = _launch(tmp_path, "--version", path_dirs=[empty])
    assert p.returncode == 1 and p.stdout == "" and p.stderr.count("\n") == 1
    assert "uv tool install context-compactor" in p.stderr


def test_server_json_describes_the_published_package():
    server = json.loads((ROOT / "server.json").read_text(encoding="utf-8"))
    assert server["$schema"].startswith("https://static.modelcontextprotocol.io/schemas/")
    assert server["name"].count("/") == 1 and server["name"].split("/")[0].startswith("io.github.")
    assert len(server["description"]) <= 100
    assert server["version"] == compactor.__version__ == PYPROJECT["project"]["version"]
    (pkg,) = server["packages"]
    assert pkg["registryType"] == "pypi" and pkg["identifier"] == PYPROJECT["project"]["name"]
    assert pkg["version"] == server["version"] and pkg["transport"] == {"type": "stdio"}
    # uvx IDENTIFIER ARGS runs the script named after the distribution: it must exist and serve MCP
    assert PYPROJECT["project"]["scripts"][pkg["identifier"]] == PYPROJECT["project"]["scripts"]["compactor"]
    assert [a["value"] for a in pkg["packageArguments"]] == ["mcp"]
    (with_mcp,) = [a for a in pkg["runtimeArguments"] if a["name"] == "--with"]
    assert with_mcp["value"] in PYPROJECT["project"]["optional-dependencies"]["mcp"]
    # PyPI ownership: the registry looks for this marker in the package's description (the README)
    assert f"mcp-name: {server['name']}" in (ROOT / "README.md").read_text(encoding="utf-8")
