"""Tools built on top of the pipeline: when to compact (``check`` triggers), the fidelity audit of
an anchor against its trajectory, and the memory export. They sit above the pipeline and nothing
below imports them.

>>> from compactor.tools import should_compact
>>> decision = should_compact(messages, context_window=128_000)   # doctest: +SKIP
>>> decision.compact, [r.code for r in decision.reasons]           # doctest: +SKIP
"""

from __future__ import annotations

from .triggers import Reason, TriggerDecision, should_compact

__all__ = [
    "Reason",
    "TriggerDecision",
    "audit_paths",
    "export_memory",
    "extract_memory",
    "should_compact",
]


def __getattr__(name: str):  # lazy: the anchor package is only needed by these
    if name in ("export_memory", "extract_memory"):
        from . import memory

        return getattr(memory, name)
    if name == "audit_paths":
        from .fidelity import audit_paths

        return audit_paths
    raise AttributeError(f"module 'compactor.tools' has no attribute {name!r}")
