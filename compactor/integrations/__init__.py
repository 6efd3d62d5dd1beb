"""Adapters to data engines, each behind its own optional extra (``pip install 'compactor[ray]'``).

They run :func:`compactor.batch.compact_record` unchanged: the same record gives the same
bytes in a process pool, in a Ray actor, or in a Spark or Dask worker.
"""
