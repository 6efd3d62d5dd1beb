"""Ray Data: compact a :class:`ray.data.Dataset` of trajectories, or run ``compactor batch
--engine ray``.

>>> import ray, compactor.integrations.ray as cr                          # doctest: +SKIP
>>> ds = ray.data.read_binary_files("s3://bucket/runs/", include_paths=True)   # doctest: +SKIP
>>> out = cr.compact_dataset(ds)      # columns of compactor.batch.RESULT_COLUMNS + the rest    # doctest: +SKIP

Rows are records as :func:`compactor.batch.compact_record` takes them: a ``text`` (str) or
``bytes``/``data`` column holding each trajectory or log as it is on disk, and an ``id`` or
``path`` column naming it. Keep trajectories as text or bytes in a dataset: Arrow turns nested
message dicts into structs and fills missing keys with nulls, which changes the trajectory.

Work runs in a callable class through ``map_batches``: each actor loads the rule catalog once.
The output keeps the input's row order (``preserve_order`` is set on the dataset's execution
context), every other input column is passed through, and the payload column is dropped unless
``keep_payload`` is set. Ray is imported only here; install it with ``pip install 'context-compactor[ray]'``.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, Iterator, Mapping, Sequence

from compactor import ConfigError
from compactor.batch import RESULT_COLUMNS, BatchConfig, FileTask, compact_batch, run_file_task, warm

__all__ = ["CompactBatch", "compact_dataset", "run_file_tasks"]

_PAYLOAD = ("text", "data", "bytes", "messages")


def _ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise ConfigError("the ray engine needs Ray Data: pip install 'context-compactor[ray]'") from None
    return ray


def _schema():
    import pyarrow as pa

    s, i = pa.large_string(), pa.int64()
    types = {"id": s, "ok": pa.bool_(), "error": s, "error_code": i, "format": s, "level": i,
             "tokens_before": i, "tokens_after": i, "protected": i, "placeholders": i, "diagnostics": i,
             "evidence": s, "input_sha256": s, "output_sha256": s, "output": s, "note": s}
    return pa.schema([(c, types[c]) for c in RESULT_COLUMNS])


def _as_config(config: BatchConfig | Mapping[str, Any] | None) -> BatchConfig:
    if config is None:
        return BatchConfig()
    if isinstance(config, BatchConfig):
        return config
    return BatchConfig.model_validate(dict(config))


class CompactBatch:
    """``map_batches`` callable: pyarrow batch of records in, pyarrow batch of results out."""

    def __init__(self, config: BatchConfig | Mapping[str, Any] | None = None, keep_payload: bool = False):
        self.config = _as_config(config)
        self.keep_payload = keep_payload
        self.schema = _schema()
        warm(self.config)  # the catalog loads here, once per actor

    def __call__(self, batch):
        import pyarrow as pa

        rows = batch.to_pylist()
        results = compact_batch(rows, self.config)
        table = pa.Table.from_pylist(results, schema=self.schema)
        for name in batch.column_names:
            if name in RESULT_COLUMNS or (name in _PAYLOAD and not self.keep_payload):
                continue
            table = table.append_column(batch.schema.field(name), batch.column(name))
        return table


def compact_dataset(ds, config: BatchConfig | Mapping[str, Any] | None = None, *, concurrency: int | tuple | None = None,
                    batch_size: int = 32, num_cpus: float = 1, keep_payload: bool = False):
    """Compact every row of ``ds``; returns a new (lazy) Dataset, in the input's row order."""
    _ray()
    cfg = _as_config(config)
    out = ds.map_batches(CompactBatch, fn_constructor_kwargs={"config": cfg, "keep_payload": keep_payload},
                         batch_format="pyarrow", batch_size=batch_size, compute=_pool(concurrency), num_cpus=num_cpus)
    out.context.execution_options.preserve_order = True
    return out


def _pool(concurrency: int | tuple | None):
    """An actor pool: ``n`` actors, ``(min, max)`` autoscaling, or by default 1 up to the CPUs."""
    ray = _ray()
    if isinstance(concurrency, int):
        return ray.data.ActorPoolStrategy(size=max(1, concurrency))
    if isinstance(concurrency, tuple) and len(concurrency) == 2:
        return ray.data.ActorPoolStrategy(min_size=concurrency[0], max_size=concurrency[1])
    if concurrency is not None:
        raise ConfigError(f"concurrency is an int or a (min, max) pair, not {concurrency!r}")
    cpus = int(ray.cluster_resources().get("CPU", 1)) if ray.is_initialized() else (os.cpu_count() or 1)
    return ray.data.ActorPoolStrategy(min_size=1, max_size=max(1, cpus))


# ---------------------------------------------------------------------------- compactor batch --engine ray


class _FileBatch:
    """Actor for ``compactor batch --engine ray``: the same per-file task as the process pool."""

    def __init__(self, config: BatchConfig, fingerprint: str):
        self.config = config
        self.fingerprint = fingerprint
        warm(config)

    def __call__(self, batch):
        import pyarrow as pa

        out = []
        for row in batch.to_pylist():
            prev = json.loads(row["previous"]) if row["previous"] else None
            task = FileTask(row["path"], row["name"], row["out"], row["size"], prev)
            out.append(json.dumps(run_file_task(task, self.config, self.fingerprint), ensure_ascii=False))
        return pa.table({"entry": pa.array(out, type=pa.large_string())})


def _init(workers: int) -> None:
    ray = _ray()
    if ray.is_initialized():
        return
    address = os.environ.get("RAY_ADDRESS")
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING,
                              "configure_logging": True}
    if address:
        ray.init(address=address, **kwargs)
    else:
        ray.init(num_cpus=workers, **kwargs)


def run_file_tasks(tasks: Sequence[FileTask], config: BatchConfig, fingerprint: str, *, workers: int) -> Iterator[dict[str, Any]]:
    """Run the file tasks through Ray Data; yields each report entry as it arrives, in input order.
    Files are read and written by the actors: on a cluster, inputs and ``--out`` must be on a
    filesystem every node sees."""
    ray = _ray()
    _init(workers)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    ctx.execution_options.preserve_order = True
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    if not tasks:
        return
    items = [{"path": t.path, "name": t.name, "out": t.out, "size": t.size,
              "previous": json.dumps(dict(t.previous)) if t.previous else ""} for t in tasks]
    ds = ray.data.from_items(items, override_num_blocks=min(len(items), max(1, workers * 4)))
    ds = ds.map_batches(_FileBatch, fn_constructor_args=(config, fingerprint), batch_format="pyarrow", batch_size=1,
                        compute=_pool(max(1, workers)), num_cpus=1)
    for row in ds.iter_rows():
        yield json.loads(row["entry"])
