"""The one exception tree of compactor.

Every error compactor raises on purpose is a :class:`CompactorError`. Messages name the file
and position (or the rule id) and say what to do; the CLI prints them as one line and exits 2
for usage and input errors, 1 for runtime errors.
"""

from __future__ import annotations

__all__ = [
    "CompactorError",
    "ConfigError",
    "InputError",
    "LLMError",
    "LimitError",
    "RuleError",
    "StoreError",
    "BudgetError",
]


class CompactorError(Exception):
    """Base class of every error compactor raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, source: str | None = None, position: str | None = None):
        self.message = message
        self.source = source
        self.position = position
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = ""
        if self.source:
            where = self.source
            if self.position:
                where += f":{self.position}"
            where += ": "
        text = f"{where}{self.message}"
        return " ".join(text.split())  # always one line


class InputError(CompactorError):
    """The input cannot be read: malformed JSON, unknown layout, binary data, empty input."""

    exit_code = 2


class LimitError(InputError):
    """The input exceeds a configured resource limit (nesting depth, size)."""


class ConfigError(CompactorError):
    """An option or configuration value is invalid."""

    exit_code = 2


class RuleError(CompactorError):
    """One or more rule files are invalid. ``problems`` lists every one of them."""

    exit_code = 2

    def __init__(self, message: str, *, problems: list[str] | None = None, source: str | None = None):
        self.problems = list(problems or [])
        super().__init__(message, source=source)


class StoreError(CompactorError):
    """The placeholder store cannot be read or written, or an id is invalid or unknown."""

    exit_code = 2


class BudgetError(CompactorError):
    """The budget is below the floor: the newest request, the user constraints and the live
    error's header line, as written. ``floor`` is that number of tokens (None when unknown)."""

    exit_code = 1

    def __init__(self, message: str, *, floor: int | None = None, **kw):
        self.floor = floor
        super().__init__(message, **kw)


class LLMError(CompactorError):
    """The optional LLM provider failed (never raised out of ``compact``: it falls back)."""

    exit_code = 1
