"""Configuration, validated at the edge (a validating record: no pydantic at start-up)."""

from __future__ import annotations

from typing import Literal

from .record import Field, Record, RecordError

from .errors import ConfigError

__all__ = ["CompactorConfig", "make_config"]


class CompactorConfig(Record, validate=True):
    """The settings of a compaction; read-only, every value checked when it is built (a
    :class:`~.record.RecordError` naming the field; :func:`make_config` turns it into a
    :class:`~.errors.ConfigError`)."""

    __slots__ = ()

    level: Literal["auto", 0, 1, 2, 3] = Field(default="auto", description="auto: escalate until the budget is met (Level 1 when no budget)")
    budget: int | None = Field(default=None, ge=1, description="target size of the output in tokens")
    objective: str | None = Field(default=None, description="current objective (overrides what the input says)")
    lang: Literal["en", "zh"] = Field(default="en", description="language of the anchor and the summaries")
    rules: tuple[str, ...] = Field(default=(), description="extra rule directories")
    encoding: str = Field(default="cl100k_base", description="tokenizer the token counts are made with")
    keep_recent: int = Field(default=3, ge=0, description="the last K tool outputs stay raw")
    collapse_batch: int = Field(default=1, ge=1, le=1000,
                                description="older tool outputs collapse this many at a time (a session's "
                                            "previous output stays a byte prefix of the next one in between)")
    low_water: float = Field(default=0.6, gt=0, le=1,
                             description="a session over its budget compacts to this share of it, then appends "
                                         "untouched until the budget is exceeded again")
    keep_recent_turns: int = Field(default=6, ge=0, description="Level 2: the last N messages stay raw, older ones go into the anchor")
    context_lines: int = Field(default=2, ge=0, le=20, description="lines of context kept around protected spans")
    min_collapse_lines: int = Field(default=6, ge=2, description="benign regions shorter than this are kept")
    long_trace_lines: int = Field(default=80, ge=10, description="traces longer than this keep header, frames, first/last lines")
    long_trace_keep: int = Field(default=5, ge=1, description="first and last lines kept verbatim in a long trace")
    file_read_lines: int = Field(default=40, ge=5, description="file reads longer than this become path + line range")
    max_json_depth: int = Field(default=512, ge=8, le=10_000, description="deeper JSON input is refused (an input error)")
    store: str | None = Field(default=None, description="None = in-memory; a directory or a .sqlite file")
    redact: bool = Field(default=False, description="redact secrets in the output with typed placeholders")
    handoff_after: int = Field(default=2, ge=1, description="recommend a new session after this many Level 3 compactions")
    anchor_max_tokens: int = Field(default=1500, ge=0, description="size bound of the anchor's written form (0: none); filled by priority, the rest counted as overflow")
    llm: str | None = Field(default=None, description="polish the anchor with an LLM (openai:MODEL or anthropic:MODEL)")
    llm_base_url: str | None = Field(default=None, description="the LLM provider's API base URL")
    llm_timeout: float = Field(default=60.0, description="seconds per LLM request")
    llm_retries: int = Field(default=2, description="retries of a failed LLM request")
    time_limit: float | None = Field(default=None, gt=0,
                                     description="seconds one compaction may take; past it the input passes "
                                                 "through as it is and the report says so (default: no limit)")


def make_config(config: CompactorConfig | None = None, **options) -> CompactorConfig:
    try:
        if config is None:
            return CompactorConfig(**options)
        if options:
            return type(config)(**{**config.model_dump(), **options})
        return config
    except RecordError as exc:
        raise ConfigError(f"invalid option {exc.field}: {exc.msg}", option=exc.field, reason=exc.msg) from None
    except TypeError as exc:  # an unknown option
        raise ConfigError(f"invalid option: {exc}") from None
