"""Tools built on top of the pipeline: when to compact (``check`` triggers), the fidelity audit of
an anchor against its trajectory, and the memory export. They sit above the pipeline and nothing
below imports them.

>>> from compactor.tools import should_compact
>>> decision = should_compact(messages, context_window=128_000)   # doctest: +SKIP
>>> decision.compact, [r.code for r in decision.reasons]           # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

_LAZY: dict[str, str] = {
    "Reason": ".triggers", "TriggerDecision": ".triggers", "should_compact": ".triggers",
    "audit_paths": ".fidelity", "export_memory": ".memory", "extract_memory": ".memory",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):  # imported on first use: a command pays only for what it runs
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(target, __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from .fidelity import audit_paths
    from .memory import export_memory, extract_memory
    from .triggers import Reason, TriggerDecision, should_compact
