"""Typed tool calls at the reader edge.

Every reader turns the tool calls it finds into :class:`~compactor.models.ToolCall` records, once,
through :func:`make_call` (called by :func:`~.base.make_segment` for ``tool_call`` segments): the
argument text is parsed here and nowhere else (:func:`parse_arguments`), and what the call does
(read / edit / shell / search / other), the paths it names and its command come from the
harnesses' tool vocabulary, ``tools.toml`` next to this module (checked on load: a bad entry is
reported with the file's name and the field).
"""

from __future__ import annotations

import json
import shlex
from functools import lru_cache
from pathlib import Path
from typing import Any

import regex

from ..errors import RuleError
from ..lazyre import lazy_regex
from ..models import CallKind, ToolCall

__all__ = ["VOCABULARY_PATH", "NOT_JSON", "json_task_text", "ToolSpec", "Vocabulary", "call_of", "command_value", "load_vocabulary", "make_call", "norm_tool_name",
           "parse_arguments", "vocabulary"]

VOCABULARY_PATH = Path(__file__).with_name("tools.toml")

NOT_JSON: Any = object()  # what parse_arguments returns for a text that is not JSON

_KINDS = {k.value: k for k in CallKind}
_FIELDS = {"names", "harnesses", "kind", "path_keys", "command_keys", "verb_key", "verbs", "command_path", "patch_keys",
           "keys_are_paths"}


def parse_arguments(text: str) -> Any:
    """The JSON value of a tool call's argument text, or :data:`NOT_JSON`. The one place argument
    text is parsed (cached: a reader that takes the command from the arguments and the call built
    next share one parse). The value is shared: never change it."""
    return _parse(text)


@lru_cache(maxsize=8192)
def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return NOT_JSON


def norm_tool_name(name: str | None) -> str:
    """A tool name as looked up in the vocabulary: lower case, letters and digits only."""
    return "".join(c for c in (name or "").lower() if c.isalnum())


class ToolSpec:
    """One ``[[tool]]`` entry of the vocabulary (checked)."""

    __slots__ = ("names", "harnesses", "kind", "path_keys", "command_keys", "verb_key", "verbs", "command_path",
                 "patch_keys", "keys_are_paths")

    def __init__(self, data: dict[str, Any]) -> None:
        self.names: tuple[str, ...] = tuple(data["names"])
        self.harnesses: tuple[str, ...] = tuple(data["harnesses"])
        self.kind: CallKind = _KINDS[data["kind"]]
        self.path_keys: tuple[str, ...] = tuple(data.get("path_keys", ()))
        self.command_keys: tuple[str, ...] = tuple(data.get("command_keys", ()))
        self.verb_key: str | None = data.get("verb_key")
        self.verbs: dict[str, CallKind] = {v: _KINDS[k] for v, k in data.get("verbs", {}).items()}
        self.command_path: bool = bool(data.get("command_path", False))
        self.patch_keys: tuple[str, ...] = tuple(data.get("patch_keys", ()))
        self.keys_are_paths: bool = bool(data.get("keys_are_paths", False))


class Vocabulary:
    """The checked vocabulary: tool specs by normalised name."""

    def __init__(self, specs: list[ToolSpec], source: str) -> None:
        self.specs = specs
        self.source = source
        self.by_name: dict[str, ToolSpec] = {norm_tool_name(n): s for s in specs for n in s.names}

    def spec(self, name: str | None) -> ToolSpec | None:
        return self.by_name.get(norm_tool_name(name)) if name else None

    def names(self, kind: CallKind | str) -> frozenset[str]:
        """Every tool name (as written) of one kind."""
        k = _KINDS[kind] if isinstance(kind, str) else kind
        return frozenset(n for s in self.specs if s.kind is k for n in s.names)

    def keys(self, kind: CallKind | str | None = None, *, editors: bool = False) -> frozenset[str]:
        """The normalised names (:func:`norm_tool_name`) of one kind's tools, or of the file
        editors (tools whose sub-command argument picks what they do)."""
        k = _KINDS[kind] if isinstance(kind, str) else kind
        return frozenset(norm_tool_name(n) for s in self.specs
                         if (k is None or s.kind is k) and (not editors or s.verb_key) for n in s.names)

    def is_kind(self, name: str | None, kind: CallKind) -> bool:
        spec = self.spec(name)
        return spec is not None and spec.kind is kind


def _is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) and x for x in v)


def check_vocabulary(raw: Any, source: str) -> list[str]:
    """Every problem of a parsed vocabulary file, each naming the file and the field."""
    problems: list[str] = []
    if not isinstance(raw, dict):
        return [f"{source}: not a table"]
    extra = set(raw) - {"tool"}
    if extra:
        problems.append(f"{source}: unknown top-level field(s) {', '.join(sorted(extra))} (only [[tool]])")
    tools = raw.get("tool")
    if not isinstance(tools, list) or not tools:
        problems.append(f"{source}: tool: needs at least one [[tool]] table")
        return problems
    seen: dict[str, str] = {}
    for i, t in enumerate(tools):
        where = f"{source}: tool[{i}]"
        if not isinstance(t, dict):
            problems.append(f"{where}: not a table")
            continue
        label = f"{where} ({t['names'][0]})" if _is_str_list(t.get("names")) and t["names"] else where
        for key in sorted(set(t) - _FIELDS):
            problems.append(f"{label}.{key}: unknown field")
        for key in ("names", "harnesses"):
            if key not in t:
                problems.append(f"{label}.{key}: missing")
            elif not _is_str_list(t[key]) or not t[key]:
                problems.append(f"{label}.{key}: must be a non-empty list of non-empty strings")
        kind = t.get("kind")
        if kind is None:
            problems.append(f"{label}.kind: missing")
        elif kind not in _KINDS:
            problems.append(f"{label}.kind: {kind!r} is not one of {', '.join(_KINDS)}")
        for key in ("path_keys", "command_keys", "patch_keys"):
            if key in t and not _is_str_list(t[key]):
                problems.append(f"{label}.{key}: must be a list of non-empty strings")
        if "verb_key" in t and not (isinstance(t["verb_key"], str) and t["verb_key"]):
            problems.append(f"{label}.verb_key: must be a non-empty string")
        for key in ("command_path", "keys_are_paths"):
            if key in t and not isinstance(t[key], bool):
                problems.append(f"{label}.{key}: must be true or false")
        verbs = t.get("verbs")
        if verbs is not None:
            if not isinstance(verbs, dict):
                problems.append(f"{label}.verbs: must be a table of verb = kind")
            else:
                for verb, vk in verbs.items():
                    if vk not in _KINDS:
                        problems.append(f"{label}.verbs.{verb}: {vk!r} is not one of {', '.join(_KINDS)}")
        if _is_str_list(t.get("names")):
            for n in t["names"]:
                key = norm_tool_name(n)
                if not key:
                    problems.append(f"{label}.names: {n!r} has no letter or digit")
                elif key in seen and seen[key] != label:
                    problems.append(f"{label}.names: {n!r} is already listed in {seen[key].split(': ', 1)[1]}")
                else:
                    seen[key] = label
    return problems


def load_vocabulary(path: Path | str = VOCABULARY_PATH) -> Vocabulary:
    """Read and check a vocabulary file; :class:`~compactor.errors.RuleError` lists every problem."""
    path = Path(path)
    source = str(path)
    try:
        raw = _parse_toml(path)
    except OSError as exc:
        raise RuleError(f"cannot read tool vocabulary: {exc.strerror or exc}", source=source) from None
    except ValueError as exc:  # tomllib.TOMLDecodeError, or text that is not UTF-8
        raise RuleError(f"tool vocabulary is not valid TOML: {exc}", source=source, problems=[f"{source}: {exc}"]) from None
    problems = check_vocabulary(raw, path.name)
    if problems:
        raise RuleError(f"invalid tool vocabulary: {'; '.join(problems)}", source=source, problems=problems)
    return Vocabulary([ToolSpec(t) for t in raw["tool"]], source)


_PARSED_MAGIC = b"compactor-parsed-toml 1"


def _parse_toml(path: Path) -> Any:
    """The TOML file's data. The parsed form is kept in the cache folder (``tools/<sha256 of the
    file>.marshal``, with the SHA-256 of the marshalled bytes in its header; safe to delete): a
    later process reads it back without importing the TOML parser. A cache file that does not
    check out is ignored, and the data read back is checked like the file's own
    (:func:`check_vocabulary`)."""
    import hashlib
    import marshal

    data = path.read_bytes()
    from ..tokens import cache_root

    root = cache_root()
    cached = root / "tools" / f"{hashlib.sha256(data).hexdigest()}.marshal" if root is not None else None
    if cached is not None:
        try:
            header, _, body = cached.read_bytes().partition(b"\n")
            if header == _PARSED_MAGIC + b" " + hashlib.sha256(body).hexdigest().encode():
                return marshal.loads(body)
        except (OSError, ValueError, EOFError, TypeError):
            pass  # missing or damaged: parsed again below
    import tomllib

    raw = tomllib.loads(data.decode("utf-8"))
    if cached is not None:
        try:
            body = marshal.dumps(raw)
            from ..atomic import write_bytes_atomic

            write_bytes_atomic(cached, _PARSED_MAGIC + b" " + hashlib.sha256(body).hexdigest().encode() + b"\n" + body,
                               dir_mode=0o700)
        except (OSError, ValueError):
            pass  # an unwritable folder, or a value marshal cannot keep: only costs speed
    return raw


_VOCABULARY: Vocabulary | None = None


def vocabulary() -> Vocabulary:
    """The package's vocabulary (``tools.toml``), read on first use."""
    global _VOCABULARY
    if _VOCABULARY is None:
        _VOCABULARY = load_vocabulary()
    return _VOCABULARY


# --------------------------------------------------------------------------- building calls

def command_value(value: Any) -> str | None:
    """A shell command from an argument: a string, or an argv list (``["bash", "-lc", "..."]``
    gives the script, any other list its shell-quoted join)."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, list) and value and all(isinstance(x, str) for x in value):
        if len(value) >= 3 and value[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh") and value[1] in ("-c", "-lc", "-ic"):
            return value[2]
        return shlex.join(value)
    return None


def _patch_paths(patch: str) -> list[str]:
    out = []
    for line in patch.split("\n"):
        if line.startswith("*** ") and " File: " in line[:20]:
            p = line.split(" File: ", 1)[1].strip()
            if p:
                out.append(p)
    return out


def make_call(name: str | None, raw: str, command: str | None, arguments: Any = NOT_JSON,
              vocab: Vocabulary | None = None, verb: str | None = None, paths: tuple[str, ...] = ()) -> ToolCall:
    """The typed call of one tool call: ``raw`` is its argument text as in the input,
    ``command`` what the reader took as its command, ``arguments`` the already parsed value of
    ``raw`` when the reader holds it (the JSON it serialised ``raw`` from), else parsed here.
    ``verb`` and ``paths`` are what the layout says of a call whose text is not its arguments
    (an OpenHands V0 action's type and path), used when the arguments do not say."""
    if arguments is NOT_JSON:
        text = raw.lstrip()
        arguments = parse_arguments(text) if text[:1] == "{" else NOT_JSON
    args = arguments if isinstance(arguments, dict) else None
    spec = (vocab or vocabulary()).spec(name)
    if spec is None:
        return ToolCall(name, CallKind.other, (), command, args, raw)
    kind = spec.kind
    given = verb
    paths_list: list[str] = []
    if args is not None:
        for key in spec.path_keys:
            v = args.get(key)
            if isinstance(v, str) and v.strip():
                paths_list.append(v.strip())
            elif isinstance(v, list):
                paths_list.extend(x.strip() for x in v if isinstance(x, str) and x.strip())
        if command is None:
            command = next((c for c in (command_value(args.get(k)) for k in spec.command_keys) if c), None)
        verb = args.get(spec.verb_key) if spec.verb_key else None
        for key in spec.patch_keys:
            v = args.get(key)
            if isinstance(v, str) and "*** " in v:
                paths_list.extend(_patch_paths(v))
        if spec.keys_are_paths and not paths_list:
            paths_list.extend(k for k, v in args.items() if isinstance(v, dict) and k.strip())
    elif given is None:
        words = (command or "").split(None, 2)
        verb = words[0] if words and (spec.verb_key or spec.verbs) else None
        if spec.command_path and len(words) >= 2:
            paths_list.append(words[1].strip("'\""))
        if spec.patch_keys and "*** " in raw:
            paths_list.extend(_patch_paths(raw))
    if not isinstance(verb, str) or verb not in spec.verbs:
        verb = given
    if isinstance(verb, str) and verb in spec.verbs:
        kind = spec.verbs[verb]
    if not paths_list:
        paths_list.extend(p for p in paths if p)
    return ToolCall(name, kind, tuple(dict.fromkeys(paths_list)), command, args, raw)


def call_of(segment: Any) -> ToolCall:
    """The typed call of a ``tool_call`` segment: the one its reader built, or (a segment made by
    hand, not read from a layout) one built now from its tool name, text and command."""
    call = segment.call
    if call is None:
        call = make_call(segment.tool_name, segment.text, segment.command)
    return call


_TASK_KEY = lazy_regex(r"\b(?:problem|issue|bug|task description|request|question)\b|_statement$", regex.I)


def json_task_text(text: str) -> str:
    """A task a harness sends as a JSON object (``{"Overall task": ..., "Instructions":
    {"Problem description": ...}}``): the text of its problem / issue field, else of its first
    string field; '' when the text is no such object. Its first line ("{") is never the goal."""
    if not text.startswith("{") or not text.endswith("}"):
        return ""
    try:
        data = json.loads(text, strict=False)  # (raw newlines inside its strings, as harnesses write them)
    except ValueError:
        return ""
    found: list[tuple[bool, str]] = []

    def walk(v: Any, key: str) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, str(k))
        elif isinstance(v, str) and v.strip():
            found.append((bool(_TASK_KEY.search(key)), v.strip()))

    walk(data, "")
    return next((v for named, v in found if named), found[0][1] if found else "")
