"""Ray Data gives the same bytes as the stdlib path (local Ray; `.ci/run` runs these as their own step)."""

from __future__ import annotations

import concurrent.futures as cf
import logging
import sys
from pathlib import Path

import pytest

from compactor import cli
from compactor.batch import RESULT_COLUMNS, BatchConfig, compact_batch, compact_record, iter_jsonl

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from batch_records import make_records  # noqa: E402

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def ray_local():
    import ray
    import ray.data

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    yield ray
    ray.shutdown()


def _stdlib(records: list[dict], config: BatchConfig, workers: int = 2) -> list[dict]:
    chunks = [records[i:i + 100] for i in range(0, len(records), 100)]
    with cf.ProcessPoolExecutor(workers) as pool:
        return [row for part in pool.map(compact_batch, chunks, [config] * len(chunks)) for row in part]


def test_compact_dataset_2000_records_equals_stdlib_byte_for_byte(ray_local):
    from compactor.integrations.ray import compact_dataset

    records = make_records(2000, seed=7, scale=0.25)
    for i, r in enumerate(records):
        r["reward"] = float(i % 3)  # a column of the user's, passed through
    config = BatchConfig()
    expected = _stdlib(records, config)
    ds = ray_local.data.from_items(records, override_num_blocks=16)
    rows = compact_dataset(ds, config, concurrency=2, batch_size=25).take_all()
    assert len(rows) == 2000
    assert [r["id"] for r in rows] == [r["id"] for r in records]  # input order kept
    assert [{c: r[c] for c in RESULT_COLUMNS} for r in rows] == expected
    assert b"".join(r["output"].encode() for r in rows if r["ok"]) == \
        b"".join(r["output"].encode() for r in expected if r["ok"])
    assert [r["reward"] for r in rows] == [r["reward"] for r in records]
    assert "text" not in rows[0]  # the payload is not carried along unless asked
    failed = [r for r in rows if not r["ok"]]
    assert [r["id"] for r in failed] == [f"rec-{i:05d}" for i in range(249, 2000, 250)]
    assert all("JSON" in r["error"] for r in failed)
    ok = [r for r in rows if r["ok"]]
    assert {r["format"] for r in ok} == {"openai-chat", "anthropic", "text"}
    assert sum(r["tokens_after"] for r in ok) < sum(r["tokens_before"] for r in ok)


def test_read_binary_files_rows_compact_like_files(ray_local, tmp_path):
    from compactor.integrations.ray import compact_dataset

    src = tmp_path / "runs"
    src.mkdir()
    for r in make_records(12, seed=5, scale=0.3):
        (src / f"{r['id']}.json").write_text(r["text"], encoding="utf-8")
    ds = ray_local.data.read_binary_files(str(src), include_paths=True)
    rows = compact_dataset(ds, concurrency=1).take_all()
    assert len(rows) == 12
    for row in rows:
        data = Path(row["path"]).read_bytes()
        assert {c: row[c] for c in RESULT_COLUMNS} == compact_record({"path": row["path"], "data": data})


def test_cli_engine_ray_equals_stdlib_and_resumes(ray_local, tmp_path, capsys):
    src = tmp_path / "in"
    (src / "logs").mkdir(parents=True)
    for i, r in enumerate(make_records(40, seed=9, scale=0.3)):
        name = f"logs/{r['id']}.log" if r["text"][:1] not in "[{" else f"{r['id']}.json"
        (src / name).write_text(r["text"], encoding="utf-8")
    (src / "corrupt.json").write_text('{"messages": [', encoding="utf-8")
    store = str(tmp_path / "store")
    a, b = tmp_path / "stdlib", tmp_path / "ray"
    rc_a = cli.main(["batch", str(src), "--out", str(a), "--workers", "2", "--store", store, "-q", "--no-progress"])
    rc_b = cli.main(["batch", str(src), "--out", str(b), "--workers", "2", "--engine", "ray", "--store", store, "-q",
                     "--no-progress"])
    capsys.readouterr()
    assert rc_a == rc_b == 2

    def tree(d: Path) -> dict[str, bytes]:
        return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}

    assert tree(a) == tree(b)
    entries = list(iter_jsonl(b / "report.jsonl"))
    assert len(entries) == 41 and sum(not e["ok"] for e in entries) == 1
    rc = cli.main(["batch", str(src), "--out", str(b), "--engine", "ray", "--store", store, "-q", "--no-progress"])
    capsys.readouterr()
    again = list(iter_jsonl(b / "report.jsonl"))
    assert rc == 2
    assert all(e["skipped"] for e in again if e["ok"])
    assert [e["input"] for e in again] == [e["input"] for e in entries]
