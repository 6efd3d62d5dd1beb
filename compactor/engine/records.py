"""Rules as plain data: what the scanning engines read, without the typed models.

A command that only scans text (``compactor trim`` called by a hook on every tool call) must not
pay for building the typed rule models (:mod:`.schema`, pydantic) at start-up. The loader's
on-disk catalog holds every validated rule as plain JSON data; this module turns one such rule
into a :class:`Record` (attribute access, same names as :class:`~.schema.Rule`) and checks it
cheaply first: every field the scanning engines read must have the type and range the schema
allows (a catalog is a cache: it is never trusted blindly). The typed ``Rule`` is still built,
from the same data, when something asks for it (``RuleSet.rules``).

``FIELDS`` below lists every field of the schema; a test keeps both in step.
"""

from __future__ import annotations

from typing import Any
from ..lazyre import lazy_re

__all__ = ["FAMILIES", "FIELDS", "FLAG_NAMES", "Record", "check_rule_data", "to_record"]

# protect families, in the order they are reported; classify and secret stages use their own.
FAMILIES = (
    "placeholder",
    "secret",
    "trace",
    "error",
    "exit-code",
    "test-failure",
    "constraint",
    "decision",
    "failed-approach",
    "fileref",
    "number",
)

# the ``regex`` module's flag values, by name (the same numbers as ``regex.IGNORECASE`` & co.;
# ``regex`` itself is imported by the engines that compile, not here)
FLAG_NAMES = {"IGNORECASE": 2, "MULTILINE": 8, "DOTALL": 16, "VERBOSE": 64}

_RULE_ID = lazy_re(r"^[a-z0-9]+(?:[-_][a-z0-9]+)*(?:\.[a-z0-9]+(?:[-_][a-z0-9]+)*)+$")
_FAMILY = lazy_re(r"^[a-z][a-z0-9-]*$")
_CAPTURE_NAME = lazy_re(r"^[a-z_][a-z0-9_]*$")


class Record:
    """One rule (or one section of it) as read-only attributes over plain data. Hashed by
    identity: the engines' compile cache keys on ``content_key`` instead."""

    __slots__ = ("__dict__",)

    def __init__(self, data: dict[str, Any]):
        self.__dict__.update(data)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a rule record is read-only")

    def __repr__(self) -> str:
        return f"Record(id={self.__dict__.get('id', '?')!r})"


# field -> check; a check returns True when the value is allowed
def _str(v) -> bool:
    return isinstance(v, str)


def _opt_str(v) -> bool:
    return v is None or isinstance(v, str)


def _bool(v) -> bool:
    return isinstance(v, bool)


def _int(lo: int, hi: int | None = None):
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= lo and (hi is None or v <= hi)


def _one_of(*allowed):
    return lambda v: isinstance(v, str) and v in allowed


def _strs(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _list_of(check):
    return lambda v: isinstance(v, list) and all(check(x) for x in v)


def _section(name: str):
    return lambda v: v is None or (isinstance(v, dict) and check_section(name, v) is None)


FIELDS: dict[str, dict[str, Any]] = {
    "rule": {
        "id": lambda v: isinstance(v, str) and _RULE_ID.match(v) is not None,
        "stage": _one_of("protect", "classify", "secret", "cue"),
        "kind": _one_of("regex", "line-block", "literal", "classify"),
        "family": lambda v: isinstance(v, str) and _FAMILY.match(v) is not None,
        "description": lambda v: isinstance(v, str) and len(v) >= 10,
        "priority": _int(0, 100),
        "enabled": _bool,
        "roles": _list_of(_one_of("system", "user", "assistant", "tool")),
        "prefilter": _strs,
        "prefilter_ignore_case": _bool,
        "vocabulary": lambda v: _strs(v) and all(_RULE_ID.match(x) is not None for x in v),
        "regex_": _section("regex_"),
        "line_block": _section("line_block"),
        "literal": _section("literal"),
        "classify": _section("classify"),
        "examples": lambda v: isinstance(v, dict) and check_section("examples", v) is None,
        "source": _str,
    },
    "regex_": {
        "pattern": _str,
        "flags": _list_of(_one_of("IGNORECASE", "MULTILINE", "DOTALL", "VERBOSE")),
        "scope": _one_of("line", "match"),
        "context_before": _int(0, 20),
        "context_after": _int(0, 50),
        "group": lambda v: isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool)),
        "gate": lambda v: _opt_str(v) or (_strs(v) and bool(v)),
    },
    "line_block": {
        "start": _str,
        "continue_": _strs,
        "end": _opt_str,
        "before": _strs,
        "max_before": _int(0, 50),
        "allow_blank": _int(0, 5),
        "allow_gap": _int(0, 20),
        "max_lines": _int(1, 100_000),
        "max_bytes": _int(64, 16 * 1024 * 1024),
        "min_lines": _int(1),
        "long_trace": _bool,
    },
    "literal": {
        "words": lambda v: _strs(v) and len(v) >= 1,
        "case_sensitive": _bool,
        "whole_word": _bool,
        "scope": _one_of("sentence", "line", "word"),
        "require_any": _strs,
        "exclude": _strs,
    },
    "classify": {
        "commands": _strs,
        "content": _strs,
        "content_required": _bool,
        "min_lines": _int(1),
        "summary": _str,
        "captures": lambda v: isinstance(v, list) and all(isinstance(c, dict) and check_section("captures", c) is None
                                                          for c in v),
        "optional": lambda v: isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str)
                                                          for k, x in v.items()),
    },
    "captures": {
        "name": lambda v: isinstance(v, str) and _CAPTURE_NAME.match(v) is not None,
        "pattern": _str,
        "flags": _list_of(_one_of("IGNORECASE", "MULTILINE")),
        "agg": _one_of("first", "last", "sum", "count", "max", "lines", "words", "distinct"),
        "max_lines": _int(0, 20),
    },
    "examples": {
        "match": _strs,
        "no_match": _strs,
        "xfail": _strs,
        "expect": _strs,
        "expect_summary": _strs,
    },
}

_SECTIONS = {"regex": "regex_", "line-block": "line_block", "literal": "literal", "classify": "classify"}


def check_section(name: str, data: dict) -> str | None:
    """The first problem of one section's data (``None``: fine). Every field must be present:
    the catalog is written with every field, defaults included."""
    fields = FIELDS[name]
    if data.keys() != fields.keys():
        return f"{name}: fields {sorted(set(data) ^ set(fields))} differ from the schema"
    for k, check in fields.items():
        if not check(data[k]):
            return f"{name}.{k}: {data[k]!r} is not allowed"
    return None


def check_rule_data(data: Any) -> str | None:
    """The first problem of one rule's catalog data, ``None`` when it may be used as is: every
    field present with an allowed type and range, and exactly the section its ``kind`` names
    (the rules the schema's model validator enforces that the scanning engines rely on)."""
    if not isinstance(data, dict):
        return "not an object"
    problem = check_section("rule", data)
    if problem:
        return problem
    own = _SECTIONS[data["kind"]]
    present = [s for s in _SECTIONS.values() if data[s] is not None]
    if present != [own]:
        return f"kind {data['kind']!r} with sections {present}"
    if (data["kind"] == "classify") != (data["stage"] == "classify"):
        return "kind 'classify' is only for stage 'classify'"
    ex = data["examples"]
    if not ex["match"] or not ex["no_match"] or len(ex["expect"]) > len(ex["match"]):
        return "examples: match and no_match must not be empty, expect not longer than match"
    if data["vocabulary"] and (data["stage"] != "cue" or not data["prefilter_ignore_case"]):
        return "vocabulary is only for stage 'cue', with prefilter_ignore_case"
    if data["stage"] == "protect" and data["family"] not in FAMILIES:
        return f"family {data['family']!r} is not a protect family"
    return None


def to_record(data: dict, content_key: Any) -> Record:
    """A checked rule's data as a :class:`Record`; ``content_key`` identifies its content (the
    engines compile a rule once per process per content)."""
    d = dict(data)
    for name in ("regex_", "line_block", "literal", "examples"):
        if d[name] is not None:
            d[name] = Record(d[name])
    if d["classify"] is not None:
        c = dict(d["classify"])
        c["captures"] = [Record(x) for x in c["captures"]]
        d["classify"] = Record(c)
    d["content_key"] = content_key
    return Record(d)
