"""Policy: when to compact (triggers), how far to go (Level 2 / Level 3 escalation), whether the
result is good enough (the seed-001 self-check), the fidelity audit (seed 000), the hand-off
document and the memory export.

>>> from compactor.policy import should_compact
>>> decision = should_compact(messages, context_window=128_000)   # doctest: +SKIP
>>> decision.compact, [r.code for r in decision.reasons]           # doctest: +SKIP
"""

from __future__ import annotations

from .triggers import Decision, Reason, should_compact

__all__ = [
    "Decision",
    "Reason",
    "audit_paths",
    "check_state",
    "escalate",
    "export_memory",
    "extract_memory",
    "handoff_document",
    "should_compact",
]


def __getattr__(name: str):  # lazy: the anchor package is only needed by these
    if name == "escalate":
        from ..budget.escalate import escalate

        return escalate
    if name == "check_state":
        from .selfcheck import check_state

        return check_state
    if name == "handoff_document":
        from ..budget.handoff import handoff_document

        return handoff_document
    if name in ("export_memory", "extract_memory"):
        from . import memory

        return getattr(memory, name)
    if name == "audit_paths":
        from .audit import audit_paths

        return audit_paths
    raise AttributeError(f"module 'compactor.policy' has no attribute {name!r}")
