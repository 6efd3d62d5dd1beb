"""Repeats across turns as deltas, and older views of files by reference.

Agents run the same check again and again (the test suite after every edit, the build, ``git
status``) and read a file again after editing it. Each repeat, at full size, says mostly what the
previous one said. For a tool output older than the recent window (see
:mod:`compactor.collapse.older`) whose call is the *same* as an earlier output's call (same tool,
same command or arguments):

- **a re-run** (program output: tests, builds, scripts) is shown as what changed against the
  previous run: a header line naming the previous run's step and counting the rest, every
  failure line of this run verbatim (new ones and still-failing ones; the header says how many
  of each), the first and last lines (the command's banner and its summary), the lines that are
  new since the previous run when there are few of them, and the previous run's failures that
  are gone (``resolved since s7: …``);
- **a file read again** (a source view of the same file and range) is shown as the unified diff
  since the last read, line-number prefixes set aside so that an inserted line does not make
  every later line differ.

And an older view of a file, a listing or search hits with nothing in it that is evidence of
what happened (large reads of files the run has moved on from, snippets an editor prints after a
change: all of it is in the file) becomes one line naming the path and the line range.

Everything here is by reference: the header's ``ref`` expands to the output's exact original
text, and the previous run is named by its step (its own reference is in its own message). The
functions are pure: same inputs, same text.
"""

from __future__ import annotations

import difflib
from typing import Iterable

from ..codeview import CHROME, CODE, ENTRY, LISTING, LOG, SEARCH, SOURCE, View
from ..lazyre import lazy_regex
from ..syntax import placeholder_safe

__all__ = ["MAX_NEW_LINES", "VIEW_MIN_LINES", "call_key", "read_diff", "rerun_delta", "shape", "view_line"]

MAX_NEW_LINES = 12  # a re-run shows its new lines verbatim when there are at most this many
MAX_RESOLVED = 10  # resolved failures named one a line; more are counted
VIEW_MIN_LINES = 12  # older views shorter than this stay as they are
_NUM_PREFIX = lazy_regex(r"^ *\d{1,7}(?:\t|→)")
_WS = lazy_regex(r"\s+")


def shape(line: str) -> str:
    """A line up to spacing (a re-indented line is the same line). Numbers count: a test id
    ``test_case_7`` or an assertion's value is what tells two failures apart."""
    return _WS.sub(" ", line).strip()


def call_key(tool: str | None, command: str | None) -> str | None:
    """What makes two calls "the same": the tool and its command or argument text, whitespace
    runs as one space. None when the call is unknown (nothing to compare)."""
    if not command or not command.strip():
        return None
    return f"{tool or ''}\x00{_WS.sub(' ', command).strip()}"


def _nonempty(lines: list[str]) -> tuple[int, int] | None:
    idx = [i for i, ln in enumerate(lines) if ln.strip()]
    return (idx[0], idx[-1]) if idx else None


def rerun_delta(lines: list[str], failures: Iterable[int], prev_step: str, prev_lines: list[str],
                prev_failures: Iterable[int], ref: str, prev_named: Iterable[int] = (),
                keep: Iterable[int] = ()) -> str | None:
    """A re-run's output (``lines``, with the indexes of its failure lines) shown against the
    previous run of the same call (step ``prev_step``, its failure lines, and among them those
    that name a failure: a failing test's id, an error statement, not a trace's frames). ``keep``:
    more lines of this run shown as they are (numbers it reports). None when there is nothing to
    show."""
    ends = _nonempty(lines)
    if ends is None:
        return None
    fail = sorted(set(failures))
    prev_fail_shapes = {shape(prev_lines[i]) for i in prev_failures if 0 <= i < len(prev_lines)}
    prev_shapes = {shape(ln) for ln in prev_lines}
    cur_shapes = {shape(ln) for ln in lines}
    fail_shapes = [shape(lines[i]) for i in fail]
    new_fail = sum(1 for s in fail_shapes if s not in prev_fail_shapes)
    still = len(fail) - new_fail
    # the previous run's failures this run no longer shows (named once each, in their order)
    resolved: list[str] = []
    seen: set[str] = set()
    for i in sorted(set(prev_named) or set(prev_failures)):
        if not 0 <= i < len(prev_lines):
            continue
        s = shape(prev_lines[i])
        if s and s not in cur_shapes and s not in seen:
            seen.add(s)
            resolved.append(prev_lines[i].strip())
    keep = set(fail) | {ends[0], ends[1]} | {i for i in keep if 0 <= i < len(lines)}
    new = [i for i, ln in enumerate(lines) if ln.strip() and shape(ln) not in prev_shapes and i not in keep]
    if len(new) <= MAX_NEW_LINES:
        keep.update(new)
    others = [i for i, ln in enumerate(lines) if ln.strip() and i not in keep]
    same = sum(1 for i in others if shape(lines[i]) in prev_shapes)
    parts: list[str] = []
    if fail:
        parts.append(f"{len(fail)} failure line{'s' if len(fail) != 1 else ''} ({new_fail} new, {still} still failing)")
    else:
        parts.append("no failure line")
    if resolved:
        parts.append(f"{len(resolved)} resolved")
    if len(new) > MAX_NEW_LINES:
        parts.append(f"{len(new)} new lines")
    parts.append(f"{len(others)} other line{'s' if len(others) != 1 else ''} ({same} as in {prev_step})")
    out = [f"[{placeholder_safe(f're-run of {prev_step} (same call): ' + ', '.join(parts))} · ref {ref}]"]
    out += [lines[i] for i in sorted(keep)]
    for r in resolved[:MAX_RESOLVED]:
        out.append(f"resolved since {prev_step}: {r[:200]}")
    if len(resolved) > MAX_RESOLVED:
        out.append(f"resolved since {prev_step}: {len(resolved) - MAX_RESOLVED} more")
    return "\n".join(out)


def _strip_numbers(lines: list[str], view: View) -> list[str]:
    if not view.numbered:
        return lines
    return [_NUM_PREFIX.sub("", ln, count=1) if view.role(i) == CODE else ln for i, ln in enumerate(lines)]


def read_diff(lines: list[str], view: View, prev_step: str, prev_lines: list[str], prev_view: View,
              ref: str) -> str | None:
    """A file read again (``lines``, its :class:`View`) shown as the unified diff since the read
    at step ``prev_step``. None when the two reads do not differ once line numbers are set aside."""
    a = _strip_numbers(prev_lines, prev_view)
    b = _strip_numbers(lines, view)
    diff = list(difflib.unified_diff(a, b, n=1, lineterm=""))[2:]  # without the ---/+++ header
    if not diff:
        return None
    added = sum(1 for d in diff if d.startswith("+"))
    removed = sum(1 for d in diff if d.startswith("-"))
    name = placeholder_safe(view.path or "the file")
    head = f"[{name} read again: diff since the read at {prev_step}, +{added} -{removed} lines · ref {ref}]"
    return "\n".join([head, *diff])


def view_line(lines: list[str], view: View, ref: str, held: Iterable[int] = ()) -> str | None:
    """An older view of a file, a listing or search hits as one line, after the tool's own lines
    (its first line, such as an editor's "The file x has been updated", and its framing, such as a
    "[… 12 lines truncated …]" note), or None when the output is not such a view, is too short to
    be worth it, or has a ``held`` line (one the self-check holds to the output) among the lines
    that would go."""
    if view.kind not in (SOURCE, LISTING, SEARCH):
        return None
    ends = _nonempty(lines)
    if ends is None or ends[1] - ends[0] + 1 < VIEW_MIN_LINES:
        return None
    head: list[str] = []
    first = ends[0]
    if view.role(first) not in (CODE, ENTRY):  # the tool's framing: what happened, keep it
        head.append(lines[first])
    body = [i for i in range(first + (1 if head else 0), len(lines)) if lines[i].strip()]
    if view.kind == SOURCE:
        nums = [int(m.group(0).strip().rstrip("→").strip()) for i in body if view.role(i) == CODE
                for m in [_NUM_PREFIX.match(lines[i])] if m] if view.numbered else []
        rng = f", lines {nums[0]}-{nums[-1]}" if nums else ""
        what = f"view of {view.path or 'a file'}: {len(body)} lines{rng}"
    elif view.kind == LISTING:
        n = sum(1 for i in body if view.role(i) == ENTRY)
        what = f"listing of {view.path or 'a folder'}: {n or len(body)} entries"
    else:
        hits = [lines[i] for i in body if view.role(i) in (ENTRY, CODE)]
        files = {h.split(":", 1)[0] for h in hits if ":" in h}
        what = f"search hits: {len(body)} lines" + (f" in {len(files)} files" if files else "")
    if any(view.role(i) not in (CODE, ENTRY, CHROME) and lines[i].strip() for i in body):
        return None  # text that is neither the file nor the tool's framing: not only a view
    framing = [i for i in body if view.role(i) == CHROME]
    kept = set(framing) | ({first} if head else set())
    if any(i not in kept for i in held):
        return None
    return "\n".join([*head, *(lines[i] for i in framing), f"[{placeholder_safe(what)} · ref {ref}]"])


def is_log(view: View) -> bool:
    return view.kind == LOG
