"""The README and the documentation site: the README stays short, every page is in the site's
navigation, every relative link resolves, every install line names the distribution that provides
the command, and the site builds with ``mkdocs build --strict`` (as ``.ci/run`` does)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """The text without fenced code blocks (links and commands inside them are examples)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def test_readme_is_short_and_keeps_the_two_setup_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode("utf-8")) < 20_000
    block = re.search(r"```bash\n(.*?)```", readme, re.S).group(1)
    commands = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert len(commands) == 2
    assert commands[0].endswith("compactor compact fixtures/demo/debug-session.openai.json --keep-recent 1 --emit messages")
    assert "pip install -e '.[dev]'" in commands[1] and commands[1].endswith("python -m pytest")
    assert (ROOT / "fixtures" / "demo" / "debug-session.openai.json").is_file()
    for section in ("## What it is", "## Install", "## 60-second tour", "## Integrations", "## Results"):
        assert section in readme


def test_every_page_is_in_the_nav_once():
    nav = re.findall(r":\s*([\w.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.M)
    assert sorted(nav) == sorted(p.name for p in PAGES) and len(nav) == len(set(nav))


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_relative_links_resolve(page: Path):
    for target in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        assert (page.parent / path).exists(), f"{page.name}: broken link {target}"
        if "#" in target and path.endswith(".md"):
            anchor = target.split("#", 1)[1]
            heads = re.findall(r"^#+ (.+)$", _prose((page.parent / path).read_text(encoding="utf-8")), re.M)
            slugs = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in heads}
            assert anchor in slugs, f"{page.name}: no heading for {target}"


INSTALL = re.compile(r"(?:pip install|pipx install|uv tool install|uvx)\s+(?:-e\s+)?'?([^'\s`]+)")


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_install_lines_name_the_distribution(page: Path):
    """``pip install 'compactor[fast]'`` installs an unrelated 2015 package: every install of this
    one names ``context-compactor`` (or a path, a wheel)."""
    for line in page.read_text(encoding="utf-8").splitlines():
        if "unrelated" in line:
            continue  # the sentence that warns about the other package
        for spec in INSTALL.findall(line):
            if "compactor" in spec and not spec.startswith(("context-compactor", ".", "/", "dist/")):
                pytest.fail(f"{page.name}: {line.strip()!r} installs {spec!r}")


@pytest.mark.slow
def test_the_site_builds_strict(tmp_path: Path):
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None:
        pytest.importorskip("mkdocs", reason="mkdocs-material is part of .[dev]")
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                        "--site-dir", str(tmp_path / "site")], capture_output=True, text=True, timeout=300,
                       env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert p.returncode == 0, p.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").is_file()
    figures = list((tmp_path / "site").rglob("budget_error_lines.png"))
    assert figures, "the benchmark figures the budget page shows are in the site"


def test_the_layout_table_lists_exactly_the_registered_layouts():
    """docs/formats.md's table and `compactor formats` name the same layouts, in detection order."""
    import re

    from compactor.formats import REGISTRY

    text = (ROOT / "docs" / "formats.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z0-9-]+)` \|", text, flags=re.M)
    assert rows == [f.name for f in REGISTRY]
