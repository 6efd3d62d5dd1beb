"""Gold evidence for the fidelity benchmark, extracted INDEPENDENTLY of compactor's rules.

Nothing here imports ``compactor.detect``, ``compactor.engine`` or reads ``rules/``: these are
the benchmark's own small regexes and heuristics, written from the log / trajectory formats, so
that the benchmark does not grade compactor against its own detectors. The only thing taken
from compactor is the format reader's segmentation (role, kind, text, call id, exit code), which
is structure, not detection.

Categories (each item is a string that must appear verbatim in a method's output):

- ``error_lines``: whole lines that state an error (``ERROR: ...``, ``[ERROR] ...``,
  ``##[error]...``, ``error: ...``, ``FAILED ...``, ``--- FAIL:``, ``E   ...`` (pytest),
  ``ValueError: ...``, ``java.io.IOException: ...``, ``Caused by: ...``, ``panic: ...``,
  ``file:line:col: error: ...``, ``npm ERR! ...``, ``make: *** ... Error 2``, ``Traceback ...``),
  taken from tool outputs and user messages; numbered source listings and grep hits are skipped.
- ``frames``: the innermost frame of each stack trace (Python ``File "x", line N``, the first
  ``at ...(File.java:N)`` / ``at f (file.js:L:C)`` after an exception header, Go
  ``/path/file.go:N``, Rust ``src/x.rs:L:C``, pytest ``path.py:N: ExcType``) and the
  ``file:line`` location of compiler / linter errors (``a.c:3:5: error``, ``##[error]x.go:19:2:``,
  Maven ``Foo.java:[23,29]``, Go test ``x_test.go:628:``).
- ``exit_codes``: textual non-zero exit statuses (``<returncode>1</returncode>``,
  ``exit code 2``, ``exit status 1``, ``returned non-zero exit status 1``, ``Error 2`` from make,
  ``"exit_code": 1``).
- ``numbers``: every token containing a digit on a gold error line, as the pair
  "previous token + number token" (or "number token + next token" at the start of the line),
  so that a bare "1" does not trivially match.
- ``constraints``: sentences of (non-harness) user messages that state a constraint
  ("don't", "do not", "never", "must", "only", "avoid", "without", "make sure", "keep", ...; Chinese
  不要 / 别 / 必须 / 禁止 / 只能 / 不能 / 务必 / 不得 / 保持).
- ``failed_approaches``: sentences of assistant text that say something did not work
  ("didn't work", "still fails", "same error", "instead", "revert", ...) plus the tool call whose
  result failed (non-zero exit code from the reader or from the text, or a traceback): the first
  line of its shell command, or the whole call for editor / other tools.
- ``labelled_errors`` (ci-breakages only): the lines the dataset's humans marked ``E``
  (``labels.json`` ``error_lines``, 1-based under ``open(path, encoding="utf-8").read().splitlines()``).

Comparison: items and outputs are both ANSI-stripped, ``\\r\\n`` / ``\\r`` become ``\\n``, and every
run of whitespace becomes one space (``norm``). Items are de-duplicated per file (set recall). An
item also counts as found in its JSON-escaped form (``\"`` for ``"``), as it reads inside
tool-call arguments.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

__all__ = ["CATEGORIES", "Gold", "SegmentLike", "extract", "labelled_errors", "norm", "strip_ansi"]

CATEGORIES = ("error_lines", "frames", "exit_codes", "numbers", "constraints", "failed_approaches", "labelled_errors")

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_WS = re.compile(r"\s+")
_GH_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ?")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def norm(text: str) -> str:
    """ANSI stripped, newlines unified, whitespace runs collapsed to one space, trimmed."""
    return _WS.sub(" ", strip_ansi(text)).strip()


def _body(line: str) -> str:
    """A line without ANSI escapes and without a GitHub Actions timestamp prefix."""
    line = strip_ansi(line)
    return _GH_TS.sub("", line)


# --------------------------------------------------------------------------- error lines

_ERROR_START = re.compile(
    r"""^\s*(?:
        \[(?:ERROR|FATAL)\]\s*\S
      | \#\#\[error\]
      | (?:ERROR|FATAL|CRITICAL)(?:\b[:\s]|$)
      | Error\b
      | (?:error|fatal)(?:\[\w+\])?:\s
      | npm\ ERR!
      | FAIL(?:ED)?\b
      | ---\ FAIL:
      | E\s{2,}\S
      | Traceback\ \(most\ recent\ call\ last\)
      | panic:
      | thread\ '[^']*'\ panicked
      | Exception\ in\ thread
      | Caused\ by:
      | (?:[A-Za-z_$][\w$]*\.)*[A-Za-z_$]*(?:Error|Exception|Failure)\b(?::|\s*$)
    )""",
    re.X,
)
_ERROR_ANYWHERE = re.compile(
    r"""(?:
        \S+\.\w+:\d+(?::\d+)?:\s*(?:fatal\ )?error(?:\[\w+\])?:
      | \.\.\.\ (?:ERROR|FAIL)\s*$
      | \*\*\*\ .*\bError\ \d+\s*$
      | \s-\s(?:ERROR|CRITICAL)\s-\s
      | \blevel=(?:error|fatal)\b
    )""",
    re.X,
)
# numbered source listings (cat -n, SWE-agent `open`, nl) and grep hits "path:12:" are code, not errors
_LISTING = re.compile(r"^\s*\d+(?::|\t|\s{2,}\S)|^\S+\.\w+[:-]\d+[:-]\s")


def is_error_line(line: str) -> bool:
    body = _body(line)
    if not body.strip() or len(body) > 4000:
        return False
    if _LISTING.match(body) and not _ERROR_ANYWHERE.search(body):
        return False
    return bool(_ERROR_START.match(body) or _ERROR_ANYWHERE.search(body))


# --------------------------------------------------------------------------- frames

_PY_TB = re.compile(r"^\s*Traceback \(most recent call last\):")
_PY_FRAME = re.compile(r'File "[^"]+", line \d+')
_EXC_HEADER = re.compile(
    r"^\s*(?:Exception in thread \S+ |Caused by: |Uncaught |\[\w+\] )?(?:[A-Za-z_$][\w$]*\.)*[A-Za-z_$]*(?:Error|Exception|Throwable)\b"
)
_AT_FRAME = re.compile(r"^\s+at\s+\S.*:\d+(?::\d+)?\)?\s*$")
_GO_GOROUTINE = re.compile(r"^\s*goroutine \d+ \[")
_GO_FRAME = re.compile(r"^\s+(/\S+\.go:\d+)")
_RUST_PANIC = re.compile(r"panicked at '?.*?(\S+\.rs:\d+:\d+)")
_PYTEST_LOC = re.compile(r"^\s*(\S+\.py:\d+): (?!in\b)[A-Za-z_][\w.]*")
_COMPILER_LOC = re.compile(r"^\s*(?:##\[error\])?(\S+\.\w+:\d+(?::\d+)?):\s*(?:(?:fatal )?error|warning)?")
_COMPILER_ERR = re.compile(r"^\s*(?:##\[error\]\s*(\S+\.\w+:\d+(?::\d+)?):|(\S+\.\w+:\d+(?::\d+)?):\s*(?:fatal )?error\b)")
_MAVEN_LOC = re.compile(r"^\s*\[(?:ERROR|FATAL)\]\s+(\S+\.\w+:(?:\[\d+,\d+\]|\d+))")
_GO_TEST_LOC = re.compile(r"^\s+(\w+_test\.go:\d+):")


def frames_of(lines: list[str]) -> list[str]:
    out: list[str] = []
    bodies = [_body(x) for x in lines]
    n = len(bodies)
    i = 0
    while i < n:
        b = bodies[i]
        if _PY_TB.match(b):
            last = None
            j = i + 1
            while j < n and (bodies[j].startswith((" ", "\t")) or not bodies[j].strip()):
                m = _PY_FRAME.search(bodies[j])
                if m:
                    last = m.group(0)
                j += 1
                if j - i > 5000:
                    break
            if last:
                out.append(last)
            i = j
            continue
        if _GO_GOROUTINE.match(b):
            for j in range(i + 1, min(n, i + 12)):
                m = _GO_FRAME.match(bodies[j])
                if m:
                    out.append(m.group(1))
                    break
            i += 1
            continue
        if _EXC_HEADER.match(b) and not _AT_FRAME.match(b):
            # first "at ...:N)" line within the next few lines
            for j in range(i + 1, min(n, i + 8)):
                if _AT_FRAME.match(bodies[j]):
                    out.append(bodies[j].strip())
                    break
                if bodies[j].strip() and not bodies[j].startswith((" ", "\t")):
                    break
            i += 1
            continue
        m = _RUST_PANIC.search(b)
        if m:
            out.append(m.group(1))
        m = _PYTEST_LOC.match(b)
        if m:
            out.append(m.group(1))
        m = _COMPILER_ERR.match(b)
        if m:
            out.append(m.group(1) or m.group(2))
        m = _MAVEN_LOC.match(b)
        if m:
            out.append(m.group(1))
        m = _GO_TEST_LOC.match(b)
        if m:
            out.append(m.group(1))
        i += 1
    return out


# --------------------------------------------------------------------------- exit codes

_EXIT = [
    re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>"),
    re.compile(r"(?i)\bexit(?:ed)?(?: with)?(?: code| status)[ :=]*(-?\d+)"),
    re.compile(r"(?i)\bexit_code\"?\s*[:=]\s*(-?\d+)"),
    re.compile(r"returned non-zero exit status (-?\d+)"),
    re.compile(r"\*\*\* \[[^\]]*\] Error (\d+)"),
]


def exit_codes_of(text: str) -> list[str]:
    out = []
    body = strip_ansi(text)
    for rx in _EXIT:
        for m in rx.finditer(body):
            if int(m.group(1)) != 0:
                out.append(m.group(0))
    return out


# --------------------------------------------------------------------------- numbers

_TOKEN_DIGIT = re.compile(r"\d")
_PUNCT = "\"'`,.;:()[]{}<>"


def numbers_of(error_line: str) -> list[str]:
    toks = _body(error_line).split()
    out = []
    for k, tok in enumerate(toks):
        core = tok.strip(_PUNCT)
        if not core or not _TOKEN_DIGIT.search(core):
            continue
        if k > 0:
            out.append(toks[k - 1] + " " + tok)
        elif k + 1 < len(toks):
            out.append(tok + " " + toks[k + 1])
        else:
            out.append(tok)
    return out


# --------------------------------------------------------------------------- sentences

_SENT_SPLIT = re.compile(r"(?<=[.!?。！？；;])\s+|(?<=[。！？；])")
_CONSTRAINT = re.compile(
    r"(?i)\b(?:do not|don't|dont|never|must|must not|mustn't|should not|shouldn't|avoid|without|only|"
    r"make sure|ensure|keep|no more than|at most|at least|please don't|not allowed)\b"
    r"|不要|别|必须|禁止|只能|不能|务必|不得|保持|不允许"
)
_FAILED = re.compile(
    r"(?i)\b(?:didn't work|did not work|doesn't work|does not work|not working|still fail\w*|"
    r"failed|fails|won't work|will not work|didn't fix|did not fix|doesn't fix|same error|no luck|"
    r"unsuccessful|wrong approach|that approach|revert\w*|undo|instead|not the (?:issue|problem|cause)|"
    r"dead end|give up|broke|breaks)\b"
    r"|没用|失败|不行|无效|回退|换一种"
)


def sentences(text: str) -> Iterable[str]:
    for line in strip_ansi(text).splitlines():
        line = line.strip()
        if not line:
            continue
        for s in _SENT_SPLIT.split(line):
            s = s.strip()
            if 8 <= len(s) <= 600:
                yield s


# --------------------------------------------------------------------------- extraction


@dataclass
class SegmentLike:
    role: str
    kind: str
    text: str
    meta: bool = False
    call_id: str | None = None
    exit_code: int | None = None
    is_error: bool | None = None


@dataclass
class Gold:
    items: dict[str, list[str]] = field(default_factory=lambda: {c: [] for c in CATEGORIES})
    _sets: dict[str, set] = field(default_factory=lambda: {c: set() for c in CATEGORIES}, repr=False)

    def add(self, cat: str, item: str) -> None:
        n = norm(item)
        if n and any(ch.isalnum() for ch in n) and n not in self._sets[cat]:
            self._sets[cat].add(n)
            self.items[cat].append(n)

    def counts(self) -> dict[str, int]:
        return {c: len(v) for c, v in self.items.items()}


def extract(segments: list[SegmentLike]) -> Gold:
    gold = Gold()
    failed_calls: set[str] = set()
    for seg in segments:
        if seg.meta:
            continue
        if seg.kind == "tool_result" or (seg.role == "user" and seg.kind == "message"):
            lines = strip_ansi(seg.text).replace("\r\n", "\n").split("\n")
            # lone \r: progress redraws; keep every piece as its own line (like splitlines)
            lines = [p for line in lines for p in line.split("\r")]
            for line in lines:
                if is_error_line(line):
                    gold.add("error_lines", _body(line))
                    for num in numbers_of(line):
                        gold.add("numbers", num)
            for fr in frames_of(lines):
                gold.add("frames", fr)
            codes = exit_codes_of(seg.text)
            for c in codes:
                gold.add("exit_codes", c)
            if seg.kind == "tool_result" and seg.call_id and (
                (seg.exit_code not in (None, 0)) or seg.is_error or codes or "Traceback (most recent call last)" in seg.text
            ):
                failed_calls.add(seg.call_id)
        if seg.role == "user" and seg.kind == "message":
            for s in sentences(seg.text):
                if _CONSTRAINT.search(s):
                    gold.add("constraints", s)
        if seg.role == "assistant":
            for s in sentences(seg.text):
                if _FAILED.search(s):
                    gold.add("failed_approaches", s)
    for seg in segments:
        if seg.kind == "tool_call" and seg.call_id and seg.call_id in failed_calls and not seg.meta:
            item = call_item(seg.text)
            if item:
                gold.add("failed_approaches", item)
    return gold


_EDITOR_VERBS = {"view", "create", "str_replace", "insert", "undo_edit", "write", "edit", "read"}


def call_item(text: str) -> str | None:
    """What identifies a failed tool call: the first line of its command (shell calls), else the
    call's text (editor calls, other tools); None for very long calls."""
    cmd = None
    try:
        args = json.loads(text)
    except (ValueError, TypeError):
        args = None
    if isinstance(args, dict):
        for key in ("command", "cmd", "code", "script"):
            v = args.get(key)
            if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
                v = v[-1] if len(v) >= 3 and v[0].endswith("sh") and v[1].startswith("-") else " ".join(v)
            if isinstance(v, str) and v.strip() and v.strip() not in _EDITOR_VERBS:
                cmd = v
                break
    if cmd is None:
        return text if len(text) <= 2000 else None
    first = next((ln.strip() for ln in cmd.splitlines() if ln.strip()), "")
    return first if len(first) >= 4 else None


def labelled_errors(labels_path: str | Path) -> list[str]:
    """The hand-labelled error lines of a ci-breakages folder (normalised, de-duplicated; blank
    lines, also blank after a GitHub timestamp, skipped)."""
    labels_path = Path(labels_path)
    lab = json.loads(labels_path.read_text(encoding="utf-8"))
    log = labels_path.parent / lab.get("log", "fail.log")
    with open(log, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    out: list[str] = []
    seen: set[str] = set()
    for n in lab["error_lines"]:
        if 1 <= n <= len(lines):
            item = norm(lines[n - 1])
            # a labelled blank line (GitHub logs: the timestamp alone) is not evidence
            if item and any(ch.isalnum() for ch in _body(lines[n - 1])) and item not in seen:
                seen.add(item)
                out.append(item)
    return out
