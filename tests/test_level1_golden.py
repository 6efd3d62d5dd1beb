"""Level 1 golden fixtures: realistic tool outputs and exactly what Level 1 makes of them.

Each ``fixtures/level1/<family>/<name>.txt`` starts with a ``$ command`` line (the paired tool
call's command); the rest is the tool output. ``<name>.expected.txt`` is the compacted text,
byte for byte, as ``Compactor().level1.collapse(output, role="tool", command=cmd)`` produces it.

Every fixture is also checked against the Level 1 invariants (``check_invariants``): protected
spans survive verbatim, every placeholder expands to exactly the original lines it replaced,
compacting the output again changes nothing, and the output is never longer in tokens.

Goldens are reviewed artifacts: they are only rewritten with ``COMPACTOR_UPDATE_GOLDENS=1``, and
only after the invariants hold for the new output.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from compactor.collapse.level1 import SegmentOutcome
from compactor.syntax import PLACEHOLDER_RE, placeholder_line
from compactor.pipeline import Compactor
from compactor.tokens import get_counter

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "level1"
UPDATE = os.environ.get("COMPACTOR_UPDATE_GOLDENS") == "1"
CASES = sorted(p for p in FIXTURES.rglob("*.txt") if not p.name.endswith(".expected.txt"))


def split_fixture(raw: str) -> tuple[str | None, str]:
    """``$ command`` first line → (command, output); without it the command is unknown."""
    if raw.startswith("$ "):
        first, _, body = raw.partition("\n")
        return first[2:], body
    return None, raw


def read_fixture(path: Path) -> tuple[str | None, str]:
    return split_fixture(path.read_bytes().decode("utf-8"))


def expected_path(path: Path) -> Path:
    return path.with_name(path.name[: -len(".txt")] + ".expected.txt")


def check_invariants(c: Compactor, text: str, command: str | None, out: SegmentOutcome) -> None:
    """The Level 1 contract, on one output (shared with the property tests)."""
    # 1. every protected span is in the output verbatim
    for sp in out.spans:
        assert sp.text in out.text, f"protected span {sp.rule_id} lost: {sp.text[:200]!r}"
    # 2. every placeholder is in the output and expands to exactly the original lines it replaced
    originals = text.split("\n")
    refs_in_text = set(PLACEHOLDER_RE.findall(out.text))
    for ph in out.placeholders:
        assert placeholder_line(ph.summary, ph.id) in out.text, f"placeholder {ph.id} missing from the output"
        assert ph.id in refs_in_text, f"placeholder {ph.id} not found by PLACEHOLDER_RE"
        got = c.expand(ph.id)
        want = "\n".join(originals[ph.line_start - 1: ph.line_end])
        assert got == want, f"placeholder {ph.id} (lines {ph.line_start}-{ph.line_end}) does not expand to the original"
        assert hashlib.sha256(got.encode("utf-8", "surrogatepass")).hexdigest() == ph.sha256
    # every ref in the output is one of ours (no stray or nested refs)
    assert refs_in_text <= {ph.id for ph in out.placeholders} | set(PLACEHOLDER_RE.findall(text))
    # 3. compacting again changes nothing
    again = c.level1.collapse(out.text, role="tool", command=command)
    assert again.text == out.text, "compacting the output a second time changed it"
    # 4. never longer, in real tokens
    counter = get_counter()
    assert counter.count(out.text) <= counter.count(text), "the output is longer in tokens than the input"
    if not out.changed:
        assert out.text == text and not out.placeholders


@pytest.fixture(scope="module")
def compactor() -> Compactor:
    return Compactor()


def test_fixtures_exist():
    assert len(CASES) >= 30, f"expected the Level 1 golden fixtures under {FIXTURES}"
    families = {p.parent.name for p in CASES}
    assert len(families) >= 15


@pytest.mark.parametrize("path", CASES, ids=[str(p.relative_to(FIXTURES)) for p in CASES])
def test_level1_golden(compactor: Compactor, path: Path):
    command, text = read_fixture(path)
    assert command, f"{path}: the first line must be '$ command'"
    out = compactor.level1.collapse(text, role="tool", command=command)
    check_invariants(compactor, text, command, out)
    exp = expected_path(path)
    if UPDATE:
        exp.write_bytes(out.text.encode("utf-8"))
        return
    if not exp.exists():
        pytest.fail(f"{exp} is missing: review the output and create it with COMPACTOR_UPDATE_GOLDENS=1")
    want = exp.read_bytes().decode("utf-8")
    assert out.text == want, (
        f"{path.relative_to(ROOT)}: Level 1 output differs from {exp.name} "
        f"(classified as {out.classification}); if the change is intended, review it and rerun "
        f"with COMPACTOR_UPDATE_GOLDENS=1"
    )


def test_goldens_are_deterministic_across_instances():
    """Two fresh compactors (fresh stores, caches) give byte-identical output and refs."""
    a, b = Compactor(), Compactor()
    for path in CASES[:10]:
        command, text = read_fixture(path)
        oa = a.level1.collapse(text, role="tool", command=command)
        ob = b.level1.collapse(text, role="tool", command=command)
        assert oa.text == ob.text
        assert [p.id for p in oa.placeholders] == [p.id for p in ob.placeholders]


def test_no_orphan_expected_files():
    for exp in FIXTURES.rglob("*.expected.txt"):
        assert exp.with_name(exp.name[: -len(".expected.txt")] + ".txt").exists(), f"{exp} has no input fixture"
