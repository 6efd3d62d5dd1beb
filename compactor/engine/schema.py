"""Rule files as typed models.

A rule is one TOML file; its id is the file stem (``trace.python.toml`` → ``trace.python``).
The ``kind`` names the engine that runs it (``regex``, ``line-block``, ``literal``); the
``stage`` says what it is for: ``protect`` (keep verbatim), ``classify`` (label and summarise
benign tool output for Level 1), ``secret`` (redact) or ``cue`` (the anchor's vocabulary for
stated decisions, failed approaches, constraints, plans: ``rules/cue``).
"""

from __future__ import annotations

from typing import Literal

import regex
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

# the protect families (in the order they are reported) and the regex flag names live with the
# plain rule data: the scanning engines read them without building these models
from .records import FAMILIES, FLAG_NAMES

__all__ = [
    "CaptureSpec",
    "ClassifySpec",
    "Examples",
    "LineBlockSpec",
    "LiteralSpec",
    "RegexSpec",
    "Rule",
    "RULE_ID",
    "FAMILIES",
]

RULE_ID = r"^[a-z0-9]+(?:[-_][a-z0-9]+)*(?:\.[a-z0-9]+(?:[-_][a-z0-9]+)*)+$"

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _check_pattern(p: str, info: ValidationInfo | None = None) -> str:
    if info is not None and info.context and info.context.get("patterns_checked"):
        return p  # read back from the loader's verified catalog: compiled when it was written
    try:
        regex.compile(p)
    except regex.error as exc:
        raise ValueError(f"invalid regular expression {p!r}: {exc}") from None
    return p


class Examples(_Strict):
    match: list[str] = Field(default_factory=list, description="texts the rule must find")
    no_match: list[str] = Field(default_factory=list, description="texts the rule must not find")
    xfail: list[str] = Field(default_factory=list, description="known gaps: texts it should find but does not yet (strict xfail)")
    expect: list[str] = Field(default_factory=list, description="optional: exact span text expected for match[i] (same order; '' = any)")
    expect_summary: list[str] = Field(default_factory=list, description="classify rules: the placeholder summary expected for match[i]")


class RegexSpec(_Strict):
    pattern: str
    flags: list[Literal["IGNORECASE", "MULTILINE", "DOTALL", "VERBOSE"]] = Field(default_factory=list)
    scope: Literal["line", "match"] = Field(default="line", description="protect the whole matched line(s), or only the matched text")
    context_before: int = Field(default=0, ge=0, le=20)
    context_after: int = Field(default=0, ge=0, le=50)
    group: int | str = Field(default=0, description="which group is the span (scope=match)")
    gate: str | list[str] | None = Field(default=None, description="optional speed hint: a cheap regex that every line the pattern matches also matches; candidate lines it does not match are skipped. It must never change what the rule finds (tests compare with and without it on the examples and the corpus). A list: a line passes when one of them matches, each searched on its own (an alternation is tried at every position of a line; a lone word or an anchored pattern is found or ruled out at once)")

    @field_validator("pattern")
    @classmethod
    def _valid(cls, v: str, info: ValidationInfo) -> str:
        return _check_pattern(v, info)

    @field_validator("gate")
    @classmethod
    def _valid_gate(cls, v: str | list[str] | None, info: ValidationInfo) -> str | list[str] | None:
        if isinstance(v, list):
            if not v:
                raise ValueError("a gate list needs at least one pattern")
            return [_check_pattern(p, info) for p in v]
        return _check_pattern(v, info) if v is not None else v


class LineBlockSpec(_Strict):
    start: str = Field(description="regex for the first line of the block")
    continue_: list[str] = Field(default_factory=list, alias="continue", description="regexes: a line matching any continues the block")
    end: str | None = Field(default=None, description="regex for a line that ends the block (included)")
    before: list[str] = Field(default_factory=list, description="regexes: lines just before the start that belong to the block (scanned backwards)")
    max_before: int = Field(default=5, ge=0, le=50)
    allow_blank: int = Field(default=0, ge=0, le=5, description="blank lines allowed inside the block if a continue line follows")
    allow_gap: int = Field(default=0, ge=0, le=20, description="consecutive non-blank lines that match no continue pattern, allowed inside the block if a continue (or end) line follows (free-form message lines between a header and its frames, interleaved log lines)")
    max_lines: int = Field(default=500, ge=1, le=100_000)
    max_bytes: int = Field(default=262_144, ge=64, le=16 * 1024 * 1024)
    min_lines: int = Field(default=1, ge=1)
    long_trace: bool = Field(default=True, description="apply long-trace elision when the block is over the configured size")

    @field_validator("start", "end")
    @classmethod
    def _valid(cls, v: str | None, info: ValidationInfo) -> str | None:
        return _check_pattern(v, info) if v is not None else v

    @field_validator("continue_", "before")
    @classmethod
    def _valid_list(cls, v: list[str], info: ValidationInfo) -> list[str]:
        return [_check_pattern(p, info) for p in v]


class LiteralSpec(_Strict):
    words: list[str] = Field(min_length=1)
    case_sensitive: bool = False
    whole_word: bool = Field(default=True, description="for words made of ASCII letters: require word boundaries")
    scope: Literal["sentence", "line", "word"] = "sentence"
    require_any: list[str] = Field(default_factory=list, description="additionally, the sentence must contain one of these (case-insensitive)")
    exclude: list[str] = Field(default_factory=list, description="sentences containing any of these are ignored (case-insensitive)")


class CaptureSpec(_Strict):
    name: str = Field(pattern=r"^[a-z_][a-z0-9_]*$")
    pattern: str = Field(description="regex with one group (or none: then the match counts)")
    flags: list[Literal["IGNORECASE", "MULTILINE"]] = Field(default_factory=list)
    agg: Literal["first", "last", "sum", "count", "max", "lines", "words", "distinct"] = Field(
        default="last", description="first/last value, sum/max of numbers, count of matches, matched lines "
        "(at most max_lines), words of the last value, or the number of distinct values")
    max_lines: int = Field(default=3, ge=0, le=20, description="for agg=lines: keep at most this many matched lines")

    @field_validator("pattern")
    @classmethod
    def _valid(cls, v: str, info: ValidationInfo) -> str:
        return _check_pattern(v, info)


class ClassifySpec(_Strict):
    commands: list[str] = Field(default_factory=list, description="regexes on the tool call's command")
    content: list[str] = Field(default_factory=list, description="regexes on the output: any match classifies it (when no command matched)")
    content_required: bool = Field(default=False, description="require a content match even when the command matched")
    min_lines: int = Field(default=3, ge=1, description="outputs shorter than this are left alone")
    summary: str = Field(description="template: '{name}' fields from captures; '{lines}' '{command}' '{status}' always exist")
    captures: list[CaptureSpec] = Field(default_factory=list)
    optional: dict[str, str] = Field(default_factory=dict, description="name -> template appended only when capture 'name' is non-empty/non-zero")

    @field_validator("commands", "content")
    @classmethod
    def _valid_list(cls, v: list[str], info: ValidationInfo) -> list[str]:
        return [_check_pattern(p, info) for p in v]


class Rule(_Strict):
    id: str = Field(pattern=RULE_ID)
    stage: Literal["protect", "classify", "secret", "cue"] = "protect"
    kind: Literal["regex", "line-block", "literal", "classify"]
    family: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    description: str = Field(min_length=10)
    priority: int = Field(default=50, ge=0, le=100)
    enabled: bool = True
    roles: list[Literal["system", "user", "assistant", "tool"]] = Field(default_factory=lambda: ["user", "assistant", "tool"])
    prefilter: list[str] = Field(default_factory=list, description="literals: a line is only tried if it contains one of them")
    prefilter_ignore_case: bool = False
    vocabulary: list[str] = Field(default_factory=list, description=(
        "cue rules: ids of the protect literal rules (same family) whose words are this cue's vocabulary; "
        "the loader adds those words to the prefilter, so a word is listed once, in the protect rule"))
    regex_: RegexSpec | None = Field(default=None, alias="regex")
    line_block: LineBlockSpec | None = Field(default=None, alias="line-block")
    literal: LiteralSpec | None = None
    classify: ClassifySpec | None = None
    examples: Examples
    source: str = Field(default="", description="file the rule came from (set by the loader)")

    @model_validator(mode="after")
    def _kind_section(self) -> "Rule":
        section = {"regex": self.regex_, "line-block": self.line_block, "literal": self.literal,
                   "classify": self.classify}
        if section[self.kind] is None:
            raise ValueError(f"kind = {self.kind!r} needs a [{self.kind}] section")
        extra = [k for k, v in section.items() if v is not None and k != self.kind]
        if extra:
            raise ValueError(f"kind = {self.kind!r} but the file also has [{', '.join(extra)}]")
        if (self.kind == "classify") != (self.stage == "classify"):
            raise ValueError("kind 'classify' is only for stage 'classify' and vice versa")
        if not self.examples.match:
            raise ValueError("examples.match is empty: every rule needs texts it must find")
        if not self.examples.no_match:
            raise ValueError("examples.no_match is empty: every rule needs near-misses it must not find")
        if self.examples.expect and len(self.examples.expect) > len(self.examples.match):
            raise ValueError("examples.expect has more entries than examples.match")
        if self.vocabulary and self.stage != "cue":
            raise ValueError("vocabulary is only for stage 'cue' (it names the protect rules a cue shares words with)")
        if self.vocabulary and not self.prefilter_ignore_case:
            raise ValueError("a cue with a vocabulary needs prefilter_ignore_case = true (the words are matched in any case)")
        if self.stage == "protect" and self.family not in FAMILIES:
            raise ValueError(f"family {self.family!r} is not a protect family ({', '.join(FAMILIES)})")
        return self
