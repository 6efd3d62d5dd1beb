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
    "SecretScanError",
    "ProviderError",
    "AnswerError",
    "RuleTimeout",
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
    """An option or configuration value is invalid. ``option``: the option's name when one value
    is at fault (the command line names its flag), and ``reason``: what is wrong with it."""

    exit_code = 2

    def __init__(self, message: str, *, option: str | None = None, reason: str | None = None,
                 source: str | None = None, position: str | None = None):
        self.option = option
        self.reason = reason
        super().__init__(message, source=source, position=position)


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


class SecretScanError(CompactorError):
    """A secret rule ran out of its time budget: the text could not be verified clean."""

    exit_code = 1


class ProviderError(LLMError):
    """A provider call failed. ``code`` is a stable diagnostic code; no key or URL is included."""

    def __init__(self, message: str, *, code: str = "llm-error", status: int | None = None,
                 attempts: int = 1, retryable: bool = False):
        self.code = code
        self.status = status
        self.attempts = attempts
        self.retryable = retryable
        super().__init__(message)


# Internal control flow, never raised out of the public API (each is caught by the stage that
# raised it and turned into a diagnostic); kept here so that every exception has one home.

class RuleTimeout(Exception):
    """A rule ran out of its CPU budget on one text (the region is kept verbatim)."""

    def __init__(self, rule_id: str):
        self.rule_id = rule_id
        super().__init__(rule_id)


class AnswerError(Exception):
    """An LLM answer cannot be used at all (the deterministic anchor stays). ``code`` is the
    diagnostic code."""

    def __init__(self, code: str, message: str):
        self.code = code
        self.message = message
        super().__init__(message)
