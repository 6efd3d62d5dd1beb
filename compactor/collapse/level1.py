"""Level 1: collapse benign tool output into semantic placeholders, keep protected spans verbatim.

For one tool output:

1. normalise (CRLF, ANSI, ``\\r`` redraws) and run the protect rules;
2. long traces keep their header and message, every ``file:line`` frame, numbers, and the first
   and last lines; the rest of the trace is elided behind a reference;
3. a classified output with nothing protected becomes one line, e.g.
   ``[npm install: 234 packages, 0 errors, 2 warnings · ref c-3f9a0c17d2b4e881]``;
4. a classified output with protected parts keeps them (with a few lines of context) and
   collapses the benign regions around them;
5. repeated lines fold into first line, a count, and last line (classified or not);
6. a region becomes a placeholder only if the placeholder is shorter, and the result is used only
   if it is smaller than the original, in estimated and in real tokens.

File reads (classifier family ``file``) are only collapsed when longer than
``config.file_read_lines``. Placeholder lines already in the input are never collapsed again, and
neither are the kept lines of an elided trace, so compacting twice changes nothing.

The original bytes of everything collapsed go to the store; every reference expands back to
them exactly.
"""

from __future__ import annotations

import hashlib

from ..detect import Detector
from ..engine.classify import Classification, Classifier
from ..engine.matchers import TextView
from ..models import Diagnostic, Placeholder, Span
from ..normalize import ci_prefix_length, normalize
from ..record import Field, Record
from ..syntax import ELIDED_TRACE_LINE, PLACEHOLDER_LINE, elided_trace_summary, placeholder_line
from ..tokens import get_counter
from .fold import find_runs
from .store import Store
from ..lazyre import lazy_regex

__all__ = ["Level1", "SegmentOutcome"]

_FRAME = lazy_regex(
    r"""(?x)
    [\w./\\-]+\.(?:py|java|kt|scala|js|mjs|cjs|ts|tsx|jsx|go|rs|rb|php|cs|c|cc|cpp|cxx|h|hpp|m|mm|swift|dart|ex|exs|erl)
      (?:\"?,\ line\ \d+|:\d+|\(\d+)
    | \(\w[\w$]*\.(?:java|kt|scala):\d+\)
    | \bat\ .+:\d+:\d+\)?$
    | \bin\ .+:line\ \d+
    """
)
_HEADLINE = lazy_regex(r"(?i)(?:error|exception|panic|fatal|failed|caused by|assert|signal|abort|traceback)")
_KEYNUM = lazy_regex(r"\b[A-Za-z_][\w.-]*\s*[=:]\s*-?\d")
# Lines of a long trace that may be elided: frame lines that carry no file:line (native,
# unknown-source, address-only frames), '... N more' markers, Rust symbol lines, goroutine
# headers, hex dumps. Message lines, frames with file:line, and lines stating an error or a key
# number always stay (seed 001: exception type, key numbers, file:line, first and last lines).
_FRAMEISH = lazy_regex(
    r"""(?x)^\s*(?:
        at\s
      | \#\d+\s
      | \.\.\.\ \d+\ (?:more|common\ frames\ omitted)
      | \d+:\s+(?:0x[0-9a-fA-F]+\s+-\s+)?[\w:<>${}.]+
      | goroutine\ \d+\ \[
      | created\ by\ 
      | 0x[0-9a-fA-F]+:?\s
      | [0-9a-fA-F]{8,}:\s
      | Shadow\ byte
    )"""
)
_PY_FRAME = lazy_regex(r'^\s*File "[^"\n]*", line \d+')
_GO_FILE = lazy_regex(r"^\s+\S+\.go:\d+")


def _body(line: str) -> str:
    """The line without a CI timestamp prefix, cut to a bounded length."""
    return line[ci_prefix_length(line):][:2000]


def _elidable(lines: list[str], i: int, a: int, b: int) -> bool:
    ln = _body(lines[i])
    if not ln.strip():
        return True
    if _HEADLINE.search(ln) or _KEYNUM.search(ln) or _PY_FRAME.match(ln):
        return False
    if _FRAMEISH.match(ln):
        return not _FRAME.search(ln)
    if i > a and _PY_FRAME.match(_body(lines[i - 1])) and ln[:1] in " \t":
        return True  # the source line Python echoes under a frame
    if i < b and _GO_FILE.match(_body(lines[i + 1])) and ln.rstrip().endswith(")"):
        return True  # a Go function line; the file:line below it stays
    return False
FILE_FAMILIES = frozenset({"file"})  # classifier families that are file reads (config.file_read_lines applies)


def _est(text: str) -> int:
    return (len(text) + 3) // 4


class SegmentOutcome(Record, plain=True, frozen=False):
    text: str
    changed: bool
    spans: list[Span] = Field(default_factory=list)
    placeholders: list[Placeholder] = Field(default_factory=list)
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    classification: str | None = None  # the classifier rule, when it was asked (a long enough unprotected run)


class Level1:
    def __init__(self, detector: Detector, classifier: Classifier, store: Store, config):
        self.detector = detector
        self.classifier = classifier
        self.store = store
        self.config = config
        self.counter = get_counter(getattr(config, "encoding", "cl100k_base"))

    # ------------------------------------------------------------------ helpers
    def _put(self, original: str, summary: str, rule_id: str, segment_id: str | None,
             line_start: int, line_end: int) -> tuple[str, Placeholder]:
        data = original.encode("utf-8", errors="surrogatepass")
        ref = self.store.put(data)
        line = placeholder_line(summary, ref)
        ph = Placeholder(id=ref, rule_id=rule_id, summary=summary, sha256=hashlib.sha256(data).hexdigest(),
                         segment_id=segment_id, line_start=line_start, line_end=line_end,
                         tokens_before=_est(original), tokens_after=_est(line))
        return line, ph

    def detect(self, text: str, *, role: str, segment_id: str | None, step_id: str | None):
        norm = normalize(text)
        view = TextView(norm)
        det = self.detector.detect_view(view, role=role, segment_id=segment_id, step_id=step_id)
        return norm, view, det

    # ------------------------------------------------------------------ main entry
    def collapse(self, text: str, *, role: str = "tool", segment_id: str | None = None,
                 step_id: str | None = None, command: str | None = None, exit_code: int | None = None,
                 collapse: bool = True, prose: bool = False) -> SegmentOutcome:
        """``prose``: the input is plain text; paragraphs that read as human or assistant prose
        are kept (see :mod:`compactor.collapse.prose`)."""
        norm, view, det = self.detect(text, role=role, segment_id=segment_id, step_id=step_id)
        return self.collapse_detected(text, norm, det, lines=view.lines, role=role, segment_id=segment_id,
                                      command=command, exit_code=exit_code, collapse=collapse, prose=prose)

    def collapse_detected(self, text: str, norm: str, det, *, lines: list[str] | None = None, role: str = "tool",
                          segment_id: str | None = None, command: str | None = None,
                          exit_code: int | None = None, collapse: bool = True, prose: bool = False) -> SegmentOutcome:
        """Level 1 of a text whose detection (``det`` on its normalised text ``norm``) is already
        known: the pipeline detects once and reuses the result when the collapse decision changes.
        ``prose``: as in :meth:`collapse`."""
        spans = list(det.spans)
        out = SegmentOutcome(text, False, spans, [], list(det.diagnostics))
        if not collapse:
            return out
        if det.protect_all:
            return out
        if lines is None:
            lines = norm.split("\n")
        orig_lines = text.split("\n")
        if len(orig_lines) != len(lines):  # cannot map back exactly: store normalised lines
            orig_lines = lines
        n = len(lines)
        cfg = self.config
        protected = det.protected_lines(context=cfg.context_lines, nlines=n)
        protected |= _already_compacted(lines)
        if prose:
            from .prose import prose_lines

            protected |= prose_lines(lines)
        placeholders: list[Placeholder] = []

        # 1. long traces: elide the middle, keep what matters
        elide: dict[int, tuple[int, int]] = {}  # start line -> (end line, span index) of elided runs
        new_spans: list[Span] = []
        for sp in spans:
            nl = sp.line_end - sp.line_start + 1
            if sp.family != "trace" or nl <= cfg.long_trace_lines:
                new_spans.append(sp)
                continue
            a, b = sp.line_start - 1, sp.line_end - 1
            keep = set(range(a, a + cfg.long_trace_keep)) | set(range(b - cfg.long_trace_keep + 1, b + 1))
            for i in range(a, b + 1):
                if not _elidable(lines, i, a, b):
                    keep.add(i)
            runs: list[tuple[int, int]] = []
            i = a
            while i <= b:
                if i in keep:
                    i += 1
                    continue
                j = i
                while j + 1 <= b and (j + 1) not in keep:
                    j += 1
                if j - i + 1 >= 3:
                    runs.append((i, j))
                i = j + 1
            if not runs:
                new_spans.append(sp)
                continue
            kept_text: list[str] = []
            pos = a
            for (x, y) in runs:
                kept_text.extend(lines[pos:x])
                original = "\n".join(orig_lines[x:y + 1])
                line, ph = self._put(original, elided_trace_summary(y - x + 1), sp.rule_id, segment_id, x + 1, y + 1)
                placeholders.append(ph)
                kept_text.append(line)
                elide[x] = (y, len(placeholders) - 1)
                pos = y + 1
            kept_text.extend(lines[pos:b + 1])
            new_spans.append(sp.model_copy(update={"text": "\n".join(kept_text), "elided": True}))
        spans = new_spans

        # 2. classify the whole output
        # (a summary replaces only a region of at least min_collapse_lines unprotected lines, or
        # the whole output: with no such run the classification cannot change the text, and
        # the classifier is not asked)
        cls: Classification | None = None
        if role == "tool" and _longest_gap(protected, n) >= cfg.min_collapse_lines:
            cls = self.classifier.classify(norm, command=command, exit_code=exit_code, lines=lines)
            if cls is not None and cls.family in FILE_FAMILIES and n <= cfg.file_read_lines:
                cls = None  # short file reads stay as they are
        out.classification = cls.rule_id if cls else None

        result_lines: list[str]
        if cls is not None and not protected and n >= cfg.min_collapse_lines:
            line, ph = self._put(text, cls.summary, cls.rule_id, segment_id, 1, n)
            result_lines = [line]
            placeholders = [ph]
        else:
            result_lines = self._mixed(lines, orig_lines, protected, elide, cls, segment_id, placeholders)

        new_text = "\n".join(result_lines)
        if new_text == text or _est(new_text) >= _est(text) or \
                self.counter.count(new_text) >= self.counter.count(text):
            out.spans = list(det.spans)
            return out  # not worth it (in estimated or in real tokens): keep the original
        out.text = new_text
        out.changed = True
        out.spans = spans
        out.placeholders = placeholders
        return out

    def _mixed(self, lines: list[str], orig_lines: list[str], protected: set[int],
               elide: dict[int, tuple[int, int]], cls: Classification | None, segment_id: str | None,
               placeholders: list[Placeholder]) -> list[str]:
        cfg = self.config
        n = len(lines)
        res: list[str] = []
        i = 0
        first_region = True
        while i < n:
            if i in elide:
                y, k = elide[i]
                res.append(placeholder_line(placeholders[k].summary, placeholders[k].id))
                i = y + 1
                continue
            if i in protected:
                res.append(lines[i])
                i += 1
                continue
            j = i
            while j + 1 < n and (j + 1) not in protected and (j + 1) not in elide:
                j += 1
            region = lines[i:j + 1]
            summary = ""
            if cls is not None and len(region) >= cfg.min_collapse_lines:
                summary = (cls.summary + f"; {len(region)} lines collapsed") if first_region \
                    else f"… {len(region)} more lines of {cls.family} output"
                # a region only becomes a placeholder when that makes it shorter
                if _est(placeholder_line(summary, "c-" + "0" * 16)) >= _est("\n".join(region)):
                    summary = ""
            if summary:
                original = "\n".join(orig_lines[i:j + 1])
                line, ph = self._put(original, summary, cls.rule_id, segment_id, i + 1, j + 1)
                placeholders.append(ph)
                res.append(line)
                first_region = False
            else:
                res.extend(self._fold(region, orig_lines[i:j + 1], i, segment_id, placeholders))
            i = j + 1
        return res

    def _fold(self, region: list[str], orig_region: list[str], offset: int, segment_id: str | None,
              placeholders: list[Placeholder]) -> list[str]:
        runs = find_runs(region)
        if not runs:
            return region
        out: list[str] = []
        pos = 0
        for run in runs:
            keep = run.period
            out.extend(region[pos:run.start + keep])
            a, b = run.start + keep, run.end - keep
            summary = f"… {b - a + 1} similar lines folded"
            if b >= a and _est(placeholder_line(summary, "c-" + "0" * 16)) < _est("\n".join(region[a:b + 1])):
                original = "\n".join(orig_region[a:b + 1])
                line, ph = self._put(original, summary, "fold.repeated-lines",
                                     segment_id, offset + a + 1, offset + b + 1)
                placeholders.append(ph)
                out.append(line)
            else:  # too short to be worth a fold marker
                out.extend(region[a:b + 1])
            out.extend(region[b + 1:run.end + 1])
            pos = run.end + 1
        out.extend(region[pos:])
        return out


def _longest_gap(protected: set[int], n: int) -> int:
    """The longest run of consecutive lines ``0..n-1`` none of which is in ``protected``."""
    best, prev = 0, -1
    for i in sorted(x for x in protected if 0 <= x < n):
        best = max(best, i - prev - 1)
        prev = i
    return max(best, n - prev - 1)


def _already_compacted(lines: list[str]) -> set[int]:
    """Lines that must stay as they are when the input was compacted before (idempotence):

    - every placeholder line (a placeholder is never folded into another one);
    - the rest of a long trace around a ``… N trace lines elided`` marker: the protect rule that
      found the trace stops at the marker, so the kept frames after it would otherwise look
      unprotected the second time round.
    """
    out: set[int] = set()
    n = len(lines)
    for i, line in enumerate(lines):
        if "· ref c-" not in line or not PLACEHOLDER_LINE.fullmatch(line):
            continue
        out.add(i)
        if not ELIDED_TRACE_LINE.fullmatch(line):
            continue
        for step in (-1, 1):  # the contiguous block of the trace around the marker
            j = i + step
            while 0 <= j < n and lines[j].strip() and not (
                    "· ref c-" in lines[j] and PLACEHOLDER_LINE.fullmatch(lines[j])
                    and not ELIDED_TRACE_LINE.fullmatch(lines[j])):
                out.add(j)
                j += step
    return out
