"""Classify a tool output (by its command, then its content) and render a semantic summary.

Classifier rules are data (``rules/classify/*.toml``, ``kind = "classify"``). A rule matches
when its ``commands`` regexes match the paired tool call's command, or (when no command is
known or none matched) when one of its ``content`` regexes matches the output. Captures run over
the output and feed the ``summary`` template, e.g.
``npm install: {packages} packages, {warnings} warnings`` → ``npm install: 234 packages, 2 warnings``.
"""

from __future__ import annotations

import string
from collections import deque
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any

import regex

from ..normalize import CI_PREFIX, ci_prefixed_somewhere
from ..record import Record
from ..syntax import placeholder_safe
from ..lazyre import lazy_regex
from .approx import holds_ascii_fold
from .branches import gate_of, may_match
from .matchers import _compile, _flags

if TYPE_CHECKING:
    from .records import Record
    from .schema import Rule

__all__ = ["Classification", "Classifier", "classify_example", "render_summary"]

HEAD_LINES = 400  # content regexes look at the head and tail of an output only
TAIL_LINES = 100
COMMAND_CHARS = 4096  # command patterns look at the start of the command line only (a here-document runs long)
# CPU seconds per capture call (whole output), plus CAPTURE_PER_MB per MiB of output: a safety net
# only, as the detection rules' budget (matchers.BASE_BUDGET): it must not fire on linear work
CAPTURE_BUDGET = 0.25
CAPTURE_PER_MB = 2.0
_CI_PREFIX_LINE = lazy_regex(r"^" + CI_PREFIX.pattern, regex.MULTILINE)


class Classification(Record, plain=True, frozen=True):
    rule_id: str
    family: str
    summary: str
    fields: tuple[tuple[str, str], ...]


class _SafeFormatter(string.Formatter):
    def get_value(self, key, args, kwargs):  # noqa: D401 - missing fields render empty
        if isinstance(key, str):
            return kwargs.get(key, "")
        return super().get_value(key, args, kwargs)

    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec and isinstance(value, str):
            try:
                value = int(value)
            except ValueError:
                return value
        return super().format_field(value, format_spec)


_FMT = _SafeFormatter()


def render_summary(template: str, fields: dict[str, str]) -> str:
    """``template`` with ``{name}`` (or ``{name:spec}``) filled from ``fields``; a missing field
    is empty, a spec applies to a field that reads as a number; a template that cannot be filled
    is returned as it is."""
    parts = _template_parts(template)
    if parts is not None:
        out = []
        get = fields.get
        fmt = _FMT.format_field
        try:
            for literal, name, spec in parts:
                out.append(literal)
                if name is not None:
                    value = get(name, "")
                    out.append(value if not spec and value.__class__ is str else fmt(value, spec))
        except ValueError:
            return template
        return "".join(out)
    try:
        return _FMT.format(template, **fields)
    except (ValueError, IndexError, KeyError):
        return template


@lru_cache(maxsize=1024)
def _template_parts(template: str) -> tuple[tuple[str, str | None, str], ...] | None:
    """The template read once: (literal text, field name or None, format spec) in order. None
    when a field is not a plain name with a plain spec (a position, an attribute, a conversion,
    a nested field) or the template does not parse: those are left to ``string.Formatter``."""
    try:
        parsed = list(_FMT.parse(template))
    except ValueError:
        return None
    parts = []
    for literal, name, spec, conversion in parsed:
        if name is not None and (not name.isidentifier() or conversion is not None
                                 or "{" in spec or "}" in spec):
            return None
        parts.append((literal, name, spec or ""))
    return tuple(parts)


def _present(v: str) -> bool:
    return bool(v) and v not in ("0", "0.0")


class _CompiledClassifier:
    def __init__(self, rule: Rule | Record):
        spec = rule.classify
        assert spec is not None
        self.rule = rule
        self.spec = spec

    # patterns are compiled on first use: a process that never sees a tool output long enough for a
    # rule (or never sees the command a rule names) does not pay for compiling it
    @cached_property
    def commands(self) -> list[tuple[regex.Pattern, Any]]:
        """Each command pattern with its gate (see ``content``): a shell line with a here-document
        runs to kilobytes, and most rules name a program it does not mention."""
        return [(_compile(p, 0), gate_of(p, 0)) for p in self.spec.commands]

    @cached_property
    def content(self) -> list[tuple[regex.Pattern, Any]]:
        """Each content pattern with its gate: the literals one of which any match contains (a
        window holding none of them is not searched)."""
        return [(_compile(p, regex.MULTILINE), gate_of(p, regex.MULTILINE)) for p in self.spec.content]

    @cached_property
    def captures(self) -> list[tuple]:
        """(capture, compiled pattern, gate, only the last match read?): as for ``content``. The
        last match alone is read for ``agg`` "last" and "words" when no other capture shares the
        pattern (its matches are then not all kept)."""
        out = []
        keys = [(c.pattern, _flags(c.flags) | regex.MULTILINE) for c in self.spec.captures]
        for c, (pattern, flags) in zip(self.spec.captures, keys):
            shared = keys.count((pattern, flags)) > 1
            out.append((c, _compile(pattern, flags), gate_of(pattern, flags), c.agg in ("last", "words") and not shared))
        return out

    def matches(self, text: str, lines: list[str], command: str | None, window: str | None = None) -> bool:
        """``window``: ``_window(text, lines)``, when the caller has it."""
        by_cmd = False
        if command and self.spec.commands:
            line = command[:COMMAND_CHARS]
            low: list[str] = []
            by_cmd = any(p.search(line) for p, gate in self.commands if may_match(gate, line, low))
        if by_cmd and not self.spec.content_required:
            return True
        if not self.spec.content:
            return False
        if self.spec.commands and command and not by_cmd:
            return False  # the command says it is something else
        if window is None:
            window = _window(text, lines)
        lowered: list[str] = []
        try:
            return any(p.search(window, timeout=CAPTURE_BUDGET) for p, gate in self.content
                       if may_match(gate, window, lowered))
        except TimeoutError:
            return False  # not classified: left alone (fail toward preservation)

    def fields(self, text: str, lines: list[str], command: str | None, exit_code: int | None) -> dict[str, str]:
        out: dict[str, str] = {}
        budget = CAPTURE_BUDGET + CAPTURE_PER_MB * len(text) / 1_048_576
        lowered: list[str] = []
        found: dict[tuple, list] = {}  # the matches of one pattern (several captures may share it)
        for spec, pat, gate, last_only in self.captures:
            key: tuple | None = (pat.pattern, pat.flags)
            ms = found.get(key)
            if ms is None:
                if not may_match(gate, text, lowered):
                    ms = []
                elif spec.agg == "first":  # only the first match is read: the others are not looked for
                    try:
                        m = pat.search(text, timeout=budget)
                    except TimeoutError:
                        m = None
                    ms = [] if m is None else [m]
                    key = None  # (not every match: not kept for another capture of the pattern)
                elif last_only:  # only the last match is read: the others are passed over, not kept
                    try:
                        ms = list(deque(pat.finditer(text, timeout=budget), maxlen=1))
                    except TimeoutError:
                        ms = []
                    key = None
                elif spec.agg == "count":  # only how many: no match object is made (one per line, often)
                    try:
                        out[spec.name] = str(len(pat.findall(text, timeout=budget)))
                    except TimeoutError:
                        out[spec.name] = "0"
                    continue
                else:
                    try:
                        ms = list(pat.finditer(text, timeout=budget))
                    except TimeoutError:
                        ms = []
                if key is not None:
                    found[key] = ms
            vals = [m.group(1) if (m.re.groups and m.group(1) is not None) else m.group(0) for m in ms]
            if spec.agg == "count":
                out[spec.name] = str(len(ms))
            elif spec.agg == "distinct":
                out[spec.name] = str(len({v.strip() for v in vals if v.strip()}))
            elif not vals:
                out[spec.name] = ""
            elif spec.agg == "first":
                out[spec.name] = vals[0].strip()
            elif spec.agg == "last":
                out[spec.name] = vals[-1].strip()
            elif spec.agg == "words":
                out[spec.name] = str(len(vals[-1].split()))
            elif spec.agg in ("sum", "max"):
                nums = []
                for v in vals:
                    try:
                        nums.append(int(v.replace(",", "")))
                    except ValueError:
                        pass
                out[spec.name] = str(sum(nums) if spec.agg == "sum" else max(nums, default=0))
            elif spec.agg == "lines":
                seen: dict[str, None] = {}  # insertion-ordered set: O(1) membership on long outputs
                for v in vals:  # the group when the pattern has one, else the whole match
                    line = " ".join(v.split())
                    if line:
                        seen.setdefault(line)
                shown = list(seen)[: spec.max_lines]
                out[spec.name] = "; ".join(shown) + (f"; +{len(seen) - spec.max_lines} more"
                                                     if len(seen) > spec.max_lines else "")
        out["lines"] = str(len(lines))
        cmd = " ".join((command or "").split())
        out["command"] = cmd if len(cmd) <= 80 else cmd[:77] + "..."
        if exit_code is None:
            out["status"] = "completed"
        elif exit_code == 0:
            out["status"] = "exit 0"
        else:
            out["status"] = f"exit {exit_code}"
        return out

    def render(self, fields: dict[str, str]) -> str:
        # no command known (plain logs, content-only match): '{command}' names the rule's family
        shown = fields if fields.get("command") else {**fields, "command": self.rule.family}
        text = render_summary(self.spec.summary, shown)
        for name, tmpl in self.spec.optional.items():
            if _present(fields.get(name, "")):
                text += render_summary(tmpl, shown)
        return placeholder_safe(" ".join(text.split()))


class _Prefilter:
    """Which of some patterns may match a text: each pattern's approximation (``approx``: on an
    ASCII text, a superset of where the pattern matches) in one hyperscan database, scanned once;
    a text with a non-ASCII character is scanned as UTF-8 by a second database of the patterns'
    UTF-8 approximations (``approximate_utf8``). A pattern without an approximation always may;
    on a text holding a character that folds to an ASCII letter (``FOLDS_TO_ASCII``) every
    pattern may."""

    def __init__(self, patterns: list[tuple[str, int]]):
        from .approx import NON_ASCII_ONLY, approximate, approximate_utf8

        self.always: set[int] = set()
        self.ids: list[int] = []  # database id -> pattern number
        self.always8: set[int] = set()  # (the same, for the UTF-8 database)
        self.ids8: list[int] = []
        exprs: list[str] = []
        exprs8: list[str] = []
        for k, (pattern, flags) in enumerate(patterns):
            a = approximate(pattern, flags)
            if a is None:
                self.always.add(k)
            elif a != NON_ASCII_ONLY:  # (one that needs a non-ASCII character matches no ASCII text)
                self.ids.append(k)
                exprs.append(a)
            u = approximate_utf8(pattern, flags)
            if u is None:
                self.always8.add(k)
            else:
                self.ids8.append(k)
                exprs8.append(u)
        self.db = _database(exprs, self.ids, self.always)
        self.db8 = _database(exprs8, self.ids8, self.always8)

    def may(self, text: str) -> set[int] | None:
        """The numbers of the patterns that may match ``text``; None: every one may."""
        if text.isascii():
            found = set(self.always)
            db, ids, data = self.db, self.ids, text.encode("ascii")
        else:
            if holds_ascii_fold(text):
                return None
            found = set(self.always8)
            db, ids, data = self.db8, self.ids8, text.encode("utf-8", "surrogatepass")
        if db is not None and text:
            add = found.add
            if not data.endswith(b"\n"):  # (the approximations' line end: see approx.LINE_END)
                data += b"\n"
            db.scan(data, match_event_handler=lambda i, _a, _b, _f, _c: add(ids[i]))
        return found


def _database(exprs: list[str], ids: list[int], always: set[int]):
    """One hyperscan database of ``exprs`` (the approximations of the patterns ``ids``); an
    approximation hyperscan cannot compile is left out and its pattern always may match (``ids``
    and ``always`` are brought up to date). None when there is nothing to scan."""
    from .literals import _hs_compiles, _hyperscan_db

    if not exprs:
        return None
    try:
        return _hyperscan_db([], exprs)
    except Exception:  # noqa: BLE001 - hyperscan's error: find the approximations it refuses
        keep = [_hs_compiles(e) for e in exprs]
        always.update(k for k, ok in zip(ids, keep) if not ok)
        ids[:] = [k for k, ok in zip(ids, keep) if ok]
        exprs = [e for e, ok in zip(exprs, keep) if ok]
        return _hyperscan_db([], exprs) if exprs else None


PREFILTER_AFTER = 8  # classifications before the prefilter is loaded (a short run never needs it)


class Classifier:
    """Takes typed rules or the loader's plain records (``RuleSet.records("classify")``: no typed
    models are built).

    After a few outputs (or at once, after :meth:`prepare`) the rules' command and content
    patterns are looked for in one hyperscan pass each (their approximations, see
    :class:`_Prefilter`): a rule none of whose patterns can match is not asked. Nearly every rule
    is asked in vain for an output of no known kind; the answer is the same either way."""

    def __init__(self, rules: list[Rule] | list[Record]):
        self.compiled = [_CompiledClassifier(r) for r in sorted(rules, key=lambda r: (-r.priority, r.id))]
        self._calls = 0
        self._pre: tuple | None = None  # (command prefilter, content prefilter, the rules to ask: _Asked)

    def prepare(self) -> None:
        """Load the prefilter now (for a caller that will classify many outputs: a session)."""
        self._calls = max(self._calls, PREFILTER_AFTER)

    def _prefilter(self) -> tuple | None:
        pre = self._pre
        if pre is None:
            pre = self._pre = _build_prefilter(self.compiled) or ()
        return pre or None

    def classify(self, text: str, *, command: str | None = None, exit_code: int | None = None,
                 lines: list[str] | None = None) -> Classification | None:
        lines = lines if lines is not None else text.split("\n")
        if ci_prefixed_somewhere(lines):
            # CI logs (GitHub Actions raw logs): rules see the lines without the timestamp
            text = _CI_PREFIX_LINE.sub("", text)
            lines = text.split("\n")
        self._calls += 1
        pre = self._prefilter() if self._calls > PREFILTER_AFTER else None
        window = _window(text, lines)  # (what the content patterns search: made once for every rule)
        if pre is not None:
            cmd_may = pre[0].may(command[:COMMAND_CHARS]) if command else set()
            content_may = pre[1].may(window)
            asked = pre[2].asked(cmd_may, content_may, bool(command))
        else:
            asked = self.compiled
        n = len(lines)
        for c in asked:
            if n < c.spec.min_lines:
                continue
            if c.matches(text, lines, command, window):
                f = c.fields(text, lines, command, exit_code)
                return Classification(c.rule.id, c.rule.family, c.render(f), tuple(sorted(f.items())))
        return None


def _window(text: str, lines: list[str]) -> str:
    """What content patterns search: the output, or its head and tail when it is long."""
    if len(lines) <= HEAD_LINES + TAIL_LINES:
        return text
    return "\n".join(lines[:HEAD_LINES]) + "\n" + "\n".join(lines[-TAIL_LINES:])


class _Asked:
    """Which rules a text must be asked of, from the prefilter's answers: a rule whose command
    pattern may match the command; else, one with content patterns that decides by content
    (no command known, or the rule names no command) and one of whose content patterns may match
    the output. (A rule that names commands and matched none is not asked: its ``matches`` says
    no.) In the rules' order, from the patterns' owners rather than rule by rule."""

    def __init__(self, compiled: list[_CompiledClassifier], cmd_owner: list[int], content_owner: list[int]):
        self.compiled = compiled
        self.cmd_owner = cmd_owner  # command pattern number -> its rule's number
        self.content_owner = content_owner
        self.with_commands = frozenset(k for k, c in enumerate(compiled) if c.spec.commands)
        # the rules that decide by content: with no command known, and with one known
        self.by_content = frozenset(k for k, c in enumerate(compiled) if c.spec.content)
        self.by_content_cmd = frozenset(k for k in self.by_content if not compiled[k].spec.commands)

    def asked(self, cmd_may: set[int] | None, content_may: set[int] | None, command: bool) -> list:
        if command:
            rules = self.with_commands if cmd_may is None else {self.cmd_owner[i] for i in cmd_may}
            content = self.by_content_cmd
        else:
            rules = set()
            content = self.by_content
        if content_may is None:
            rules = rules | content
        else:
            rules = rules | (content & {self.content_owner[i] for i in content_may})
        return [self.compiled[k] for k in sorted(rules)]


def _build_prefilter(compiled: list[_CompiledClassifier]) -> tuple | None:
    """The rules' command and content prefilters, when hyperscan is the literal engine in use
    (else None: every rule is asked)."""
    from .literals import available_engines, chosen_engine

    if (chosen_engine() or available_engines()[0]) != "hyperscan":
        return None
    commands: list[tuple[str, int]] = []
    contents: list[tuple[str, int]] = []
    cmd_owner: list[int] = []
    content_owner: list[int] = []
    for k, c in enumerate(compiled):
        commands += [(p, 0) for p in c.spec.commands]
        cmd_owner += [k] * len(c.spec.commands)
        contents += [(p, regex.MULTILINE) for p in c.spec.content]
        content_owner += [k] * len(c.spec.content)
    try:
        return _Prefilter(commands), _Prefilter(contents), _Asked(compiled, cmd_owner, content_owner)
    except Exception:  # noqa: BLE001 - hyperscan installed but unusable: every rule is asked, as without it
        return None


def classify_example(rule: Rule, text: str) -> tuple[bool, str]:
    """For rule examples: an example may start with a ``$ command`` line giving the command."""
    command = None
    body = text
    if text.startswith("$ "):
        first, _, body = text.partition("\n")
        command = first[2:]
    c = _CompiledClassifier(rule)
    lines = body.split("\n")
    if len(lines) < rule.classify.min_lines or not c.matches(body, lines, command):  # type: ignore[union-attr]
        return False, ""
    return True, c.render(c.fields(body, lines, command, None))
