"""Every layout through the command a user types: ``compactor compact FILE --emit messages -o OUT``
exits 0, writes a file the same reader reads back, and never writes more bytes than came in.

One input per layout: the bundled fixtures, plus the smallest real run of each layout in the shared
data when it is present (skipped cleanly otherwise). A layout whose writer and the command's output
path disagree (a writer's ``dump`` that does not take the input's style) fails here by name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from compactor.cli import main
from compactor.formats import REGISTRY, load_document

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("COMPACTOR_CORPUS", ROOT.parent / "shared" / "corpus")).parent
FIXTURES = sorted((ROOT / "fixtures" / "trajectories").iterdir())
ONLY_IN_SHARED_DATA = {"claude-sdk-stream", "claude-code-chat-json", "pi-session"}


def _inputs() -> list[Path]:
    out = list(FIXTURES)
    extra = SHARED / "trajectories-extra"
    if extra.is_dir():
        smallest: dict[str, Path] = {}
        for p in sorted(extra.rglob("*")):
            if not p.is_file() or p.name in ("SOURCES.md", "manifest.json") or p.stat().st_size > 1_500_000:
                continue
            layout = p.parent.name
            if layout not in smallest or p.stat().st_size < smallest[layout].stat().st_size:
                smallest[layout] = p
        out += [smallest[k] for k in sorted(smallest)]
    return out


def _id(p: Path) -> str:
    return p.name if p.parent.name == "trajectories" else f"{p.parent.name}/{p.name}"


@pytest.mark.parametrize("path", _inputs(), ids=_id)
def test_compact_emit_messages_writes_what_the_same_reader_reads_back(path: Path, tmp_path: Path, capsys) -> None:
    before = load_document(path)
    out = tmp_path / ("out" + "".join(path.suffixes[-1:]))
    rc = main(["compact", str(path), "--emit", "messages", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "internal error" not in err, err
    after = load_document(out)
    assert after.format == before.format
    assert out.stat().st_size <= path.stat().st_size


def test_every_layout_but_plain_text_has_an_input_here() -> None:
    """The list above covers every registered layout (a new layout needs a fixture)."""
    seen = {load_document(p).format for p in FIXTURES}
    # plain text is every log; agent-log's inputs are written inline in tests/test_agent_log.py
    missing = {f.name for f in REGISTRY} - seen - {"text", "agent-log"}
    if (SHARED / "trajectories-extra").is_dir():  # real runs of these layouts are in the shared data
        missing -= {load_document(p).format for p in _inputs() if p not in FIXTURES}
    else:  # the layouts whose only inputs here are the shared data's real runs
        missing -= ONLY_IN_SHARED_DATA
    assert not missing, f"layouts without a fixture: {sorted(missing)}"
