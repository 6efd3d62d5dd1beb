"""Level 2 / Level 3 escalation and the hand-off document (the budget stage).

>>> from compactor.policy.escalate import escalate   # doctest: +SKIP
"""

from __future__ import annotations

__all__ = ["escalate", "handoff_document"]


def __getattr__(name: str):  # lazy: the anchor package is only needed by these
    if name == "escalate":
        from .escalate import escalate

        return escalate
    if name == "handoff_document":
        from .handoff import handoff_document

        return handoff_document
    raise AttributeError(f"module 'compactor.policy' has no attribute {name!r}")
