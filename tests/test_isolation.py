"""The test command touches nothing outside the checkout and one temporary folder, and the
end-to-end tests against the real npm clients run only when asked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, SESSION_TMP


def test_every_default_location_points_into_the_sessions_temporary_folder():
    import compactor
    from compactor.collapse.store import default_store_path

    for var in ("COMPACTOR_STORE", "COMPACTOR_CACHE", "COMPACTOR_HOOK_DIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME",
                "npm_config_cache", "COMPACTOR_E2E_CACHE"):
        assert Path(os.environ[var]).is_relative_to(SESSION_TMP), var
    assert Path(str(default_store_path())).is_relative_to(SESSION_TMP)
    assert not Path(str(compactor.default_store_path())).is_relative_to(Path.home() / ".cache")


def _collect(*args: str, env_extra: dict | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COMPACTOR_E2E"}
    env.update(env_extra or {})
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-p", "no:cacheprovider",
                           "tests/test_codex_e2e.py", *args], cwd=ROOT, capture_output=True, text=True, env=env,
                          timeout=300)
    return proc.stdout + proc.stderr


def test_end_to_end_tests_run_only_when_asked():
    assert "deselected" in _collect() and "test_codex_e2e.py::" not in _collect()
    assert "test_codex_e2e.py::" in _collect("-m", "e2e")
    assert "test_codex_e2e.py::" in _collect(env_extra={"COMPACTOR_E2E": "1"})
