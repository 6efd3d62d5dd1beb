"""The distribution: a wheel built from a clean copy of the checkout installs the ``compactor``
command and ships the rule catalog, so the command works away from the source tree.

- ``test_wheel_from_a_clean_checkout_installs_the_command`` (slow, offline): builds the wheel with
  the setuptools of this environment (no build isolation, no index), installs it with ``--no-index
  --no-deps`` into a new virtual environment that sees this environment's dependencies through a
  ``.pth`` line (the offline stand-in for resolving them from the index), then runs
  ``compactor --version``, ``compactor rules list`` and ``compactor trim`` on a fixture from a
  folder outside the checkout.
- ``test_tool_installers`` (e2e: reaches PyPI for the dependencies): ``uv tool install`` and
  ``pipx install`` of the wheel and of the repository path, each into temporary homes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DIST = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"]
LOG = ROOT / "fixtures" / "trajectories" / "pytest-run.log"
# What a clean checkout does not have: build output, caches, local environments
_JUNK = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", ".venv", "venv", "site",
                               ".pytest_cache", "node_modules", "out")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_", "VIRTUAL_ENV", "UV_", "PIPX_"))}
    env.update(extra)
    return env


def _clean_copy(tmp: Path) -> Path:
    src = tmp / "checkout"
    shutil.copytree(ROOT, src, ignore=_JUNK)
    return src


def _build_wheel(tmp: Path) -> Path:
    src = _clean_copy(tmp)
    out = tmp / "wheelhouse"
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
                        "--no-index", "-q", "-w", str(out)], capture_output=True, text=True, timeout=600,
                       env=_env(PIP_NO_CACHE_DIR="1"))
    if p.returncode != 0 and "setuptools" in p.stderr and "version" in p.stderr.lower():
        pytest.skip(f"this environment's setuptools cannot build the project: {p.stderr.strip()[-200:]}")
    assert p.returncode == 0, p.stderr
    wheels = list(out.glob("*.whl"))
    assert len(wheels) == 1
    return wheels[0]


def _fixture_log() -> Path:
    if LOG.is_file():
        return LOG
    return next(ROOT.glob("fixtures/**/*.log"))


@pytest.mark.slow
def test_wheel_from_a_clean_checkout_installs_the_command(tmp_path: Path):
    wheel = _build_wheel(tmp_path)
    assert wheel.name.startswith(DIST.replace("-", "_") + "-")
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    rules = [n for n in names if n.startswith("compactor/_rules/") and n.endswith(".toml")]
    assert len(rules) == len(list((ROOT / "rules").rglob("*.toml")))
    assert "compactor/formats/tools.toml" in names

    env_dir = tmp_path / "fresh"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # this environment's packages after the new one's own: the dependencies, never compactor itself
    (site / "zz-deps.pth").write_text("\n".join({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}) + "\n")
    p = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-index", "--no-deps", "-q",
                        str(wheel)], capture_output=True, text=True, timeout=600, env=_env(PIP_NO_CACHE_DIR="1"))
    assert p.returncode == 0, p.stderr
    exe = env_dir / "bin" / "compactor"
    assert exe.is_file()

    away = tmp_path / "elsewhere"
    away.mkdir()
    env = _env(COMPACTOR_STORE=str(tmp_path / "store.sqlite"), COMPACTOR_CACHE=str(tmp_path / "cache"),
               HOME=str(tmp_path / "home"))
    where = subprocess.run([str(py), "-c", "import compactor, compactor.engine as e; print(compactor.__file__); "
                            "print(e.builtin_rules_dir())"], capture_output=True, text=True, cwd=away, env=env)
    mod, rules_dir = where.stdout.split()
    assert mod.startswith(str(site)) and rules_dir.startswith(str(site)), where.stdout  # the wheel's copy, not the checkout

    v = subprocess.run([str(exe), "--version"], capture_output=True, text=True, cwd=away, env=env, timeout=120)
    assert v.returncode == 0 and v.stdout.split()[-1] == subprocess.run(
        [sys.executable, "-c", "import compactor; print(compactor.__version__)"], capture_output=True, text=True,
        cwd=ROOT).stdout.strip(), v.stderr
    listed = subprocess.run([str(exe), "rules", "list"], capture_output=True, text=True, cwd=away, env=env, timeout=120)
    assert listed.returncode == 0 and "trace.python" in listed.stdout and len(listed.stdout.splitlines()) >= len(rules) // 2
    log = _fixture_log()
    t = subprocess.run([str(exe), "trim", str(log)], capture_output=True, text=True, cwd=away, env=env, timeout=300)
    assert t.returncode == 0, t.stderr
    mine = subprocess.run([sys.executable, "-m", "compactor", "trim", str(log)], capture_output=True, text=True,
                          cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert t.stdout == mine.stdout and t.stdout.strip()  # the installed command trims as the checkout does


def _pypi_reachable(tmp: Path) -> str | None:
    p = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(tmp / "probe"), "tqdm"],
                       capture_output=True, text=True, timeout=300, env=_env(PIP_NO_CACHE_DIR="1"))
    return None if p.returncode == 0 else (p.stderr.strip().splitlines() or ["no answer"])[-1][:200]


@pytest.mark.e2e
@pytest.mark.parametrize("tool", ["uv", "pipx"])
@pytest.mark.parametrize("source", ["wheel", "repository"])
def test_tool_installers(tmp_path: Path, tool: str, source: str):
    exe_tool = shutil.which(tool, path=str(Path(sys.executable).parent)) or shutil.which(tool)
    if exe_tool is None:
        pytest.skip(f"{tool} is not installed (it is part of the dev extra)")
    why = _pypi_reachable(tmp_path)
    if why:
        pytest.skip(f"PyPI unreachable: {why}")
    spec = str(_build_wheel(tmp_path)) if source == "wheel" else str(_clean_copy(tmp_path))
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    env = _env(HOME=str(home), XDG_CACHE_HOME=str(tmp_path / "cache"), XDG_DATA_HOME=str(tmp_path / "data"),
               UV_CACHE_DIR=str(tmp_path / "uv-cache"), UV_TOOL_DIR=str(tmp_path / "uv-tools"),
               UV_TOOL_BIN_DIR=str(bin_dir), UV_PYTHON=sys.executable, UV_NO_CONFIG="1",
               PIPX_HOME=str(tmp_path / "pipx"), PIPX_BIN_DIR=str(bin_dir), PIPX_MAN_DIR=str(tmp_path / "man"),
               PIPX_DEFAULT_PYTHON=sys.executable, PIP_NO_CACHE_DIR="1",
               COMPACTOR_STORE=str(tmp_path / "store.sqlite"), COMPACTOR_CACHE=str(tmp_path / "ccache"))
    cmd = [exe_tool, "tool", "install", spec] if tool == "uv" else [exe_tool, "install", spec]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    exe = bin_dir / "compactor"
    assert exe.exists()
    t = subprocess.run([str(exe), "trim", str(_fixture_log())], capture_output=True, text=True, timeout=300,
                       env=env, cwd=tmp_path)
    assert t.returncode == 0 and t.stdout.strip(), t.stderr
    assert subprocess.run([str(exe), "--version"], capture_output=True, text=True, env=env).returncode == 0
