"""``compactor trim``: streaming log trimming in bounded memory.

Lines are read in blocks; each block is normalised and scanned by the protect rules. Protected
lines (with a few lines of context) are written verbatim; every other run of lines ("region") is
written as its first lines, one summary line and its last lines. The summary names the most
frequent informative line shapes with their counts and the first and last instance of the top
one; separators and blank lines are never listed.

With a baseline (the log of a passing run of the same job, see :class:`Baseline`), lines whose
shape also occurs in the baseline fold first, counted by shape; protected lines always stay.

A block of lines already printed is written again as one line, ``[… same 5 lines as at line 12
(×4)]`` (lines compared whole: lines that differ only in their CI timestamp are not repeats).

Output is never larger than the input: until something is folded, the output is held back and
the raw input kept; a log with nothing to fold is passed through untouched (byte for byte) and no
receipt is written. A fold marker that would cost more than the lines it replaces is not used.

The tail of each block is carried into the next one so a trace that crosses a block boundary is
still seen whole. Output is flushed block by block.
"""

from __future__ import annotations

import codecs
import heapq
import os
from bisect import bisect_left
from collections import Counter, deque
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Callable, Iterable, Iterator, TextIO


from ..detect import Detector
from ..engine.matchers import TextView
from ..normalize import ci_prefix_length, normalize_line
from ..plain import Factory, FrozenPlain, Plain
from .fold import informative, short, summarize, template_of
from ..lazyre import lazy_regex

if TYPE_CHECKING:  # the store (sqlite) is imported only when folded regions are kept
    from .store import Store

__all__ = ["Annotation", "Baseline", "TrimOptions", "TrimResult", "TrimStats", "Trimmer", "github_summary",
           "iter_decoded", "trim", "trim_stream", "trim_text", "trim_to"]

_DIGITS = bytes.maketrans(b"123456789", b"000000000")
# ``file.go:12`` (most tools), ``File.java:[107,64]`` (Maven's compiler plugin: line and column)
_FILELINE = lazy_regex(r"(?P<file>[\w./\\-]+\.[A-Za-z][\w]{0,7}):(?:(?P<line>\d+)|\[(?P<mline>\d+),(?P<col>\d+)\])")
_KEY_CHARS = 200  # a line's shape is its first 200 characters (CI prefix removed), digits masked


def shape_key(body: str) -> bytes:
    """Cheap, digit-insensitive shape of a line body (C-speed)."""
    return body.strip()[:_KEY_CHARS].encode("utf-8", "surrogatepass").translate(_DIGITS)


class TrimOptions(FrozenPlain):
    """How ``trim`` folds (read-only; ``options.replace(context=1)`` makes a changed copy)."""

    __slots__ = ("context", "keep_head", "keep_tail", "min_fold", "top_templates", "block_lines", "block_bytes",
                 "carry_lines", "max_line_chars", "github", "receipt", "fold_blocks", "min_block_lines",
                 "max_annotations", "passthrough_bytes")
    _defaults = {
        "context": 2,  # lines kept around protected lines
        "keep_head": 2,  # lines kept at the start of a folded region
        "keep_tail": 2,  # lines kept at the end of a folded region
        "min_fold": 8,  # regions up to this many lines are kept whole
        "top_templates": 3,
        "block_lines": 8192,
        "block_bytes": 4 * 1024 * 1024,
        "carry_lines": 64,
        "max_line_chars": 1024 * 1024,  # longer lines are cut to head + tail in the output
        "github": False,  # GitHub Actions: ::error annotations, one ::group:: per fold
        "receipt": True,  # end the output with the receipt line (only when something was folded)
        "fold_blocks": True,  # a block of lines already printed becomes one line
        "min_block_lines": 3,
        "max_annotations": 10,
        "passthrough_bytes": 16 * 1024 * 1024,  # raw input held back while nothing was folded yet
    }


class TrimStats(Plain):
    """What a trim did (``as_dict()`` for all the figures)."""

    __slots__ = ("lines_in", "lines_out", "bytes_in", "bytes_out", "protected_lines", "folded_lines", "regions",
                 "baseline_lines", "repeated_blocks", "long_lines_cut", "invalid_utf8", "rule_timeouts",
                 "passthrough", "annotations", "note")
    _defaults = {
        "lines_in": 0, "lines_out": 0, "bytes_in": 0, "bytes_out": 0, "protected_lines": 0, "folded_lines": 0,
        "regions": 0,
        "baseline_lines": 0,  # lines folded because their shape occurs in the baseline
        "repeated_blocks": 0,  # blocks written as "same N lines as at line L"
        "long_lines_cut": 0, "invalid_utf8": 0, "rule_timeouts": 0,
        "passthrough": False,  # nothing was folded: the input was written untouched
        "annotations": Factory(list),  # ranked Annotation (with github=True)
        "note": None,  # why the input was returned as it is although something folded (it would have grown)
    }
    _norepr = ("annotations",)

    @property
    def folded(self) -> bool:
        return bool(self.folded_lines or self.long_lines_cut)

    def receipt(self) -> str:
        ratio = self.bytes_in / self.bytes_out if self.bytes_out else 0.0
        parts = [
            f"{self.lines_in} lines in",
            f"{self.lines_out} lines out",
            f"{self.folded_lines} folded in {self.regions} regions",
        ]
        if self.baseline_lines:
            parts.append(f"{self.baseline_lines} as in the baseline")
        if self.repeated_blocks:
            parts.append(f"{self.repeated_blocks} repeated blocks")
        parts += [f"{self.protected_lines} protected", f"{ratio:.1f}x smaller"]
        if self.long_lines_cut:
            parts.append(f"{self.long_lines_cut} over-long lines cut")
        if self.invalid_utf8:
            parts.append("invalid UTF-8 replaced")
        if self.rule_timeouts:
            parts.append(f"{self.rule_timeouts} rule timeouts (regions kept)")
        return "[compactor trim: " + ", ".join(parts) + "]"


class Annotation(FrozenPlain):
    """A failure that names ``file:line``, for a GitHub ``::error`` annotation: ``file``,
    ``line``, ``message``, ``log_line`` (1-based line of the log), ``rule_id``, ``priority``."""

    __slots__ = ("file", "line", "message", "log_line", "rule_id", "priority", "col")
    _defaults = {"col": None}

    def command(self) -> str:
        msg = self.message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        f = self.file.replace("%", "%25").replace(",", "%2C").replace(":", "%3A")
        col = f",col={self.col}" if self.col is not None else ""
        return f"::error file={f},line={self.line}{col}::{msg}"


class Baseline:
    """Line shapes of passing runs, as a compact set (memory bounded by distinct shapes).

    A shape is the line with ANSI escapes, ``\\r`` redraws and CI timestamp prefixes removed,
    trimmed, cut to 200 characters, digits masked; a second, coarser set holds the masked
    template (numbers, hex ids and paths as ``#``) for lines whose digits-only shape is unknown.
    """

    def __init__(self, max_shapes: int = 2_000_000):
        self.keys: set[bytes] = set()
        self.templates: set[str] = set()
        self.lines = 0
        self.max_shapes = max_shapes

    def add_lines(self, lines: Iterable[str]) -> None:
        keys, templates = self.keys, self.templates
        for raw in lines:
            self.lines += 1
            body = _body(normalize_line(raw))
            if len(keys) < self.max_shapes:
                keys.add(shape_key(body))
            if len(templates) < self.max_shapes:
                templates.add(template_of(body.strip()))

    def add_text(self, text: str) -> "Baseline":
        self.add_lines(text.split("\n"))
        return self

    def add_stream(self, stream: BinaryIO) -> "Baseline":
        pending = ""
        for chunk in iter_decoded(stream):
            parts = (pending + chunk).split("\n")
            pending = parts.pop()
            self.add_lines(parts)
        if pending:
            self.add_lines([pending])
        return self

    def add_path(self, path: str | Path) -> "Baseline":
        with open(path, "rb") as fh:
            return self.add_stream(fh)

    @classmethod
    def from_paths(cls, paths: Iterable[str | Path]) -> "Baseline":
        b = cls()
        for p in paths:
            b.add_path(p)
        return b

    def __len__(self) -> int:
        return len(self.keys)

    def knows(self, body: str, key: bytes) -> bool:
        return key in self.keys or template_of(body.strip()) in self.templates


KNOWN_RUN = 8  # protected lines of one shape, known from the baseline, fold beyond this run length

# families whose lines are kept for a reference or a value, not as evidence of a failure
WEAK_FAMILIES = frozenset({"fileref", "number"})


_ASCII_SPACE = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"  # what str.strip() removes from ASCII text


def _block_keys(view: TextView) -> list[bytes] | None:
    """``shape_key`` of every line body of an ASCII view: the text encoded and digit-masked in one
    pass, each line's key cut from that (None for other text: its lines are keyed one by one)."""
    text = view.text
    if not text.isascii():
        return None
    raw = text.encode("ascii").translate(_DIGITS).split(b"\n")
    ws, n, pre = _ASCII_SPACE, _KEY_CHARS, view.prefix
    if pre is None:
        return [x.strip(ws)[:n] for x in raw]
    return [(x[k:] if k else x).strip(ws)[:n] for x, k in zip(raw, pre)]


def _protected_runs(ranges, context: int, n: int) -> list[list[int]]:
    """The lines ``DetectResult.protected_lines(context, n)`` holds, as sorted, disjoint
    ``[first, last]`` runs: each hit's line range widened by ``context``, clipped to the block."""
    runs: list[list[int]] = []
    for lo, hi in sorted((max(0, ls - context), min(le + context, n - 1)) for ls, le in ranges):
        if hi < lo:
            continue
        if runs and lo <= runs[-1][1] + 1:
            if hi > runs[-1][1]:
                runs[-1][1] = hi
        else:
            runs.append([lo, hi])
    return runs


def _line_set(ranges) -> set[int]:
    out: set[int] = set()
    for ls, le in ranges:
        out.update(range(ls, le + 1))
    return out


def _nbytes(s: str) -> int:
    return len(s) if s.isascii() else len(s.encode("utf-8", "surrogatepass"))


def _body(line: str) -> str:
    """A line without its CI timestamp prefix."""
    n = ci_prefix_length(line)
    return line[n:] if n else line


class _Region(Plain):
    """A run of unprotected lines being folded, in bounded memory."""

    __slots__ = ("head", "tail", "every", "count", "base", "nbytes", "templates", "first", "last", "originals")

    def __init__(self) -> None:  # one per region: written out, not through Plain's generic defaults
        self.head: list = []  # first novel lines
        self.tail: deque = deque(maxlen=8)  # last novel lines
        self.every: list | None = []  # all lines, while the region is small (None beyond)
        self.count = 0  # novel lines (not in the baseline)
        self.base = 0  # lines folded because the baseline knows their shape
        self.nbytes = 0  # bytes of every line of the region
        self.templates: Counter = Counter()  # shape key -> lines
        self.first: dict[bytes, str] = {}  # shape key -> its first line body
        self.last: dict[bytes, str] = {}  # shape key -> its last line body
        self.originals: list | None = None


_EVERY = 72  # a region keeps all its lines while it has at most this many


class Trimmer:
    def __init__(self, detector: Detector, options: TrimOptions = TrimOptions(), store: Store | None = None,
                 baseline: Baseline | None = None, cut_store: Store | Callable[[], Store] | None = None):
        self.detector = detector
        self.opt = options
        self.store = store
        # where the middle of an over-long line goes when it is cut (``store`` when given; else this,
        # a store or a function that opens one, called on the first cut): the cut's ref expands it
        self._cut_store = store if store is not None else cut_store
        self._pieces = 0  # pieces a line without end was split into, past its first (not lines)
        self.baseline = baseline if baseline is not None and len(baseline) else None
        self.stats = TrimStats()
        self._region = _Region()
        # output held back until something is folded (then the input can't be passed through)
        self._decided = False
        self._held: list[str] = []
        self._held_bytes = 0
        self.raw: list | None = []  # the caller appends the raw input here until decided
        self.raw_bytes = 0
        self._write: Callable[[str], None] = lambda s: None
        # repeated blocks: printed line bodies, their input line numbers, an index of bodies
        self._hist: list[str] = []
        self._hist_line: list[int] = []
        self._index: dict[str, list[int]] = {}
        self._pend: list[tuple[str, str, int]] = []
        self._cands: list[int] = []
        self._rep: list | None = None  # [hist position, length, count, bytes]
        self._lineno = 0  # input lines finalised before the current block
        self.annotations: list[tuple] = []  # heap of (rank, Annotation)
        self._seen_refs: set[tuple[str, int]] = set()
        self._templates: dict[bytes, str] = {}  # shape key -> template (the same shapes recur across regions)
        self._view: TextView | None = None
        self._keys: list[bytes] | tuple | None = None  # () for a block that is not ASCII

    # ------------------------------------------------------------------ low-level output
    def _put(self, s: str) -> None:
        if self._decided:
            self._write(s)
        else:
            self._held.append(s)
            self._held_bytes += len(s)

    def _decide(self) -> None:
        if self._decided:
            return
        self._decided = True
        for s in self._held:
            self._write(s)
        self._held = []
        self.raw = None

    def _out(self, line: str) -> None:
        self._put(line + "\n")
        self.stats.lines_out += 1
        self.stats.bytes_out += _nbytes(line) + 1

    # ------------------------------------------------------------------ repeated blocks
    def _emit(self, line: str, body: str, lineno: int) -> None:
        """A line to be printed verbatim: printed, or held as a possible repeat of a printed block."""
        if not self.opt.fold_blocks:
            self._print(line, body, lineno)
            return
        if self._pend:
            k = len(self._pend)
            hist = self._hist
            nh = len(hist)
            nc = [j for j in self._cands if j + k < nh and hist[j + k] == body]
            if nc:
                self._pend.append((line, body, lineno))
                self._cands = nc
                if len(self._pend) >= 4096:
                    self._close_pend()
                return
            self._close_pend()
        c = self._index.get(body) if len(body) > 2 and not body.isspace() else None
        if c:
            self._pend = [(line, body, lineno)]
            self._cands = list(c)
            return
        self._print(line, body, lineno)

    def _print(self, line: str, body: str, lineno: int) -> None:
        self._flush_rep()
        self._out(line)
        if len(self._hist) < 500_000:
            pos = len(self._hist)
            self._hist.append(body)
            self._hist_line.append(lineno)
            lst = self._index.get(body)
            if lst is None:
                self._index[body] = [pos]
            elif len(lst) < 8:
                lst.append(pos)

    def _close_pend(self) -> None:
        pend, self._pend = self._pend, []
        if not pend:
            return
        n = len(pend)
        j = min(self._cands)
        nbytes = sum(len(x[0]) + 1 for x in pend)
        rep = self._rep
        if rep is not None and rep[0] == j and rep[1] == n:
            rep[2] += 1
            rep[3] += nbytes
            self.stats.folded_lines += n
            return
        marker_len = _nbytes(self._rep_marker(j, n, 1)) + 1
        if n >= self.opt.min_block_lines and nbytes > marker_len:
            self._flush_rep()
            self._rep = [j, n, 1, nbytes]
            self.stats.folded_lines += n
            return
        for line, body, lineno in pend:
            self._print(line, body, lineno)

    def _rep_marker(self, j: int, n: int, count: int) -> str:
        times = f" (×{count})" if count > 1 else ""
        return f"[… same {n} lines as at line {self._hist_line[j]}{times}]"

    def _flush_rep(self) -> None:
        rep = self._rep
        if rep is None:
            return
        self._rep = None
        j, n, count, nbytes = rep
        marker = self._rep_marker(j, n, count)
        self._decide()
        self.stats.repeated_blocks += count
        if self.opt.github:
            self._put(f"::group::{marker}\n")
            self._put(f"(the {n} lines starting at line {self._hist_line[j]}, printed above)\n")
            self._put("::endgroup::\n")
        self._out(marker)

    def _marker(self, line: str) -> None:
        """A fold marker: ends any pending repeat, never starts one."""
        if self._pend:
            self._close_pend()
        self._flush_rep()
        self._decide()
        self._out(line)

    # ------------------------------------------------------------------ regions
    def _emit_region(self) -> None:
        r = self._region
        opt = self.opt
        total = r.count + r.base
        if total == 0:
            return
        self._region = _Region()
        if self.store is not None:
            self._region.originals = []
        if r.base == 0 and r.count <= opt.min_fold:
            for item in r.head[: r.count]:
                self._emit(*item)
            return
        # novel lines kept around the marker
        if r.count <= opt.min_fold:
            head, tail = r.head[: r.count], []
        else:
            head, tail = r.head[: opt.keep_head], list(r.tail)[-opt.keep_tail:] if opt.keep_tail else []
        kept_bytes = sum(len(x[0]) + 1 for x in head) + sum(len(x[0]) + 1 for x in tail)
        folded = total - len(head) - len(tail)
        folded_bytes = r.nbytes - kept_bytes
        if folded <= 0:
            for item in head + tail:
                self._emit(*item)
            return
        for item in head + tail:  # the summary counts the folded lines only
            k = shape_key(_body(item[0]))
            if r.templates.get(k, 0) > 1:
                r.templates[k] -= 1
            elif k in r.templates:
                del r.templates[k]
        merged: dict[str, int] = {}
        first_last: dict[str, tuple[str, str]] = {}
        # cheap keys → real templates (numbers, ids, paths masked), for the most frequent keys only
        counted = r.templates
        if len(counted) > 64:  # only keys counted at least as often as the 64th most frequent can be among the top
            least = sorted(counted.values(), reverse=True)[63]
            top = [kv for kv in counted.items() if kv[1] >= least]
        else:
            top = counted.items()
        for key, n in sorted(top, key=lambda kv: (-kv[1], kv[0]))[:64]:
            t = self._templates.get(key)
            if t is None:
                t = template_of(key.decode("utf-8", "replace"))
                if len(self._templates) < 65_536:
                    self._templates[key] = t
            merged[t] = merged.get(t, 0) + n
            if t not in first_last:
                first_last[t] = (r.first[key], r.last[key])
            else:
                first_last[t] = (first_last[t][0], r.last[key])
        counts = list(merged.items())
        shown = [kv for kv in counts if informative(kv[0])]
        top_t = min(shown, key=lambda kv: (-kv[1], kv[0]))[0] if shown else None
        fl = first_last.get(top_t, (None, None))
        body = summarize(counts, fl[0], fl[1], opt.top_templates)
        ref = ""
        if self.store is not None and r.originals is not None:
            ref = " · ref " + self.store.put("\n".join(r.originals).encode("utf-8", "surrogatepass"))
        what = f"{folded} lines folded"
        if r.base:
            what += f" ({r.base} as in the passing run)" if r.base < folded else " (all as in the passing run)"
        marker = f"[… {what}: {body}{ref}]"
        if _nbytes(marker) + 1 >= folded_bytes and not opt.github:
            marker = f"[… {folded} lines folded{ref}]"
            if _nbytes(marker) + 1 >= folded_bytes and r.every is not None:  # cheaper as it is
                for item in r.every:
                    self._emit(*item)
                return
        for item in head:
            self._emit(*item)
        if opt.github:
            self._marker_group(marker, counts)
        else:
            self._marker(marker)
        self.stats.folded_lines += folded
        self.stats.baseline_lines += r.base
        self.stats.regions += 1
        for item in tail:
            self._emit(*item)

    def _marker_group(self, marker: str, counts: list[tuple[str, int]]) -> None:
        if self._pend:
            self._close_pend()
        self._flush_rep()
        self._decide()
        self._put(f"::group::{marker}\n")
        for t, n in sorted(counts, key=lambda kv: (-kv[1], kv[0]))[:20]:
            self._put(f"{n:>7}× {short(t, 200)}\n")
        self._put("::endgroup::\n")
        self.stats.lines_out += 1

    def _benign(self, line: str, body: str, original: str, lineno: int) -> None:
        r = self._region
        if r.originals is None and self.store is not None:
            r.originals = []
        if r.originals is not None and len(r.originals) < 1_000_000:
            r.originals.append(original)
        size = len(line) + 1
        r.nbytes += size
        item = (line, line, lineno)
        if r.every is not None:
            if len(r.every) < _EVERY:
                r.every.append(item)
            else:
                r.every = None
        key = shape_key(body)
        templates = r.templates
        if self.baseline is not None and self.baseline.knows(body, key):
            r.base += 1
        else:
            r.count += 1
            if len(r.head) < max(self.opt.keep_head, self.opt.min_fold):
                r.head.append(item)
            r.tail.append(item)
        if key in templates:
            templates[key] += 1
            r.last[key] = body
        elif len(templates) < 5000:
            templates[key] = 1
            r.first[key] = r.last[key] = body

    # ------------------------------------------------------------------ blocks
    def process_block(self, lines: list[str], final: bool) -> list[str]:
        """Process raw lines; return the raw lines carried over to the next block."""
        opt = self.opt
        joined = "\n".join(lines)
        if "\x1b" in joined or "\r" in joined:
            norm = [normalize_line(x) if "\x1b" in x or "\r" in x else x for x in lines]
            joined = None
        else:  # nothing to normalise (the common case): no call per line
            norm = list(lines)
        cut_long = []
        for i, x in enumerate(norm) if norm and max(map(len, norm)) > opt.max_line_chars else ():
            if len(x) > opt.max_line_chars:
                half = opt.max_line_chars // 2
                norm[i] = x[:half] + f" [… {len(x) - 2 * half} characters cut{self._cut_ref(x[half:-half])}] " + x[-half:]
                cut_long.append(i)
        view = TextView(joined if joined is not None and not cut_long else "\n".join(norm))
        self._view, self._keys = view, None  # shape keys of the block's lines, made when first needed
        det = self.detector.detect_view(view, role="tool")
        n = len(norm)
        weak: set[int] = set()
        protected: set[int] = set()
        if det.protect_all:
            self.stats.rule_timeouts += 1
            runs = [[0, n - 1]]
            if self.baseline is not None:
                protected = set(range(n))
        elif self.baseline is None:
            runs = _protected_runs(det.line_ranges(), opt.context, n)
        else:
            protected = det.protected_lines(context=opt.context, nlines=n)
            if self.baseline is not None:
                # lines kept only for a file:line reference or a number (not an error, trace, test
                # failure or exit status) fold like the rest when the passing run printed that shape
                # and so do context lines (around a span, not in one) that the passing run printed
                strong = _line_set(det.line_ranges(WEAK_FAMILIES))
                weak = protected - strong
        cut = n
        if not final and n > opt.carry_lines:
            cut = n - opt.carry_lines
            for ls, le in det.line_ranges():
                if le >= cut and ls < cut:
                    cut = min(cut, ls - opt.context)
            if cut <= 0:
                cut = n - opt.carry_lines  # one block-sized trace: finalise anyway (bounded memory)
        elif not final:
            return lines
        if opt.github:
            self._collect_annotations(det, view, cut)
        prefix = view.prefix
        base = self._lineno
        if self.baseline is None:
            self._lines_plain(norm, lines, prefix, runs, cut, base)
        else:
            self._lines_with_baseline(norm, lines, prefix, protected, weak, cut, base)
        for i in cut_long:
            if i < cut:
                self.stats.long_lines_cut += 1
                self._decide()
        self._lineno += cut
        if final:
            self._emit_region()
            if self._pend:
                self._close_pend()
            self._flush_rep()
        return lines[cut:]

    def _cut_ref(self, middle: str) -> str:
        """`` · ref ID`` of the cut middle of an over-long line, put in the store (nothing without one)."""
        store = self._cut_store
        if store is None:
            return ""
        if not hasattr(store, "put"):
            store = self._cut_store = store()
        return " · ref " + store.put(middle.encode("utf-8", "surrogatepass"))

    def _lines_plain(self, norm: list[str], lines: list[str], prefix, runs: list[list[int]], cut: int,
                     base: int) -> None:
        """The lines of a block without a baseline: each run of protected lines (sorted, disjoint
        ``[first, last]``) printed after the region before it is closed, each run of other lines
        added to the region at once (the same as ``_benign`` line by line)."""
        a = 0
        emit = self._emit
        for lo, hi in runs:
            if lo >= cut:
                break
            hi = min(hi, cut - 1)
            if lo > a:
                self._benign_run(norm, lines, prefix, a, lo, base)
            self._emit_region()
            for i in range(lo, hi + 1):
                line = norm[i]
                emit(line, line, base + i + 1)
            self.stats.protected_lines += hi - lo + 1
            a = hi + 1
        if a < cut:
            self._benign_run(norm, lines, prefix, a, cut, base)

    def _benign_run(self, norm: list[str], lines: list[str], prefix, a: int, b: int, base: int) -> None:
        """``_benign`` for lines a..b-1 of a block (no baseline), in bulk."""
        r = self._region
        n = b - a
        seg = norm[a:b]
        if r.originals is None and self.store is not None:
            r.originals = []
        if r.originals is not None:
            room = 1_000_000 - len(r.originals)
            if room > 0:
                r.originals.extend(lines[a:a + min(n, room)])
        r.nbytes += sum(map(len, seg)) + n
        # (line, line, line number) items only for the lines a region may print as they are
        first_no = base + a + 1
        if r.every is not None:
            if len(r.every) + n <= _EVERY:
                r.every.extend(zip(seg, seg, range(first_no, first_no + n)))
            else:
                r.every = None
        r.count += n
        need = min(max(self.opt.keep_head, self.opt.min_fold) - len(r.head), n)
        if need > 0:
            r.head.extend(zip(seg[:need], seg[:need], range(first_no, first_no + need)))
        t = max(0, n - 8)
        r.tail.extend(zip(seg[t:], seg[t:], range(first_no + t, first_no + n)))
        if prefix is None:
            bodies = seg
        else:
            bodies = [x[k:] if k else x for x, k in zip(seg, prefix[a:b])]
        if self._keys is None:
            self._keys = _block_keys(self._view) or ()
        if self._keys:
            keys = self._keys[a:b]
        else:
            keys = [b.strip()[:_KEY_CHARS].encode("utf-8", "surrogatepass").translate(_DIGITS) for b in bodies]  # shape_key
        templates, first, last = r.templates, r.first, r.last
        if not templates and n <= 5000:  # the region's first lines (the common case): every shape is new
            templates.update(keys)
            r.first = dict(zip(reversed(keys), reversed(bodies)))  # the earliest body of each key
            r.last = dict(zip(keys, bodies))
            return
        if len(templates) + n <= 5000:  # no new shape can be refused: counted in bulk
            fresh = [k for k in dict.fromkeys(keys) if k not in templates]
            templates.update(keys)
            if fresh:
                earliest = dict(zip(reversed(keys), reversed(bodies)))
                for k in fresh:
                    first[k] = earliest[k]
            last.update(zip(keys, bodies))
            return
        for key, body in zip(keys, bodies):
            if key in templates:
                templates[key] += 1
                last[key] = body
            elif len(templates) < 5000:
                templates[key] = 1
                first[key] = last[key] = body

    def _lines_with_baseline(self, norm: list[str], lines: list[str], prefix, protected: set[int], weak: set[int],
                             cut: int, base: int) -> None:
        known = self._known_runs(norm, prefix, protected, cut)
        for i in range(cut):
            line = norm[i]
            body = line[prefix[i]:] if prefix is not None and prefix[i] else line
            if i in protected and i not in known and not (i in weak and self.baseline.knows(body, shape_key(body))):
                self._emit_region()
                self._emit(line, line, base + i + 1)
                self.stats.protected_lines += 1
            else:
                self._benign(line, body, lines[i], base + i + 1)

    def _known_runs(self, norm: list[str], prefix, protected: set[int], cut: int) -> set[int]:
        """Protected lines inside a long run of lines of one shape that the passing run also printed
        (the same compiler warning for 60 files): the first and last lines of the run stay, the
        middle folds with the baseline lines."""
        out: set[int] = set()
        keep = max(1, self.opt.keep_head), max(1, self.opt.keep_tail)
        run_key, run_start = None, 0
        for i in range(cut + 1):
            key = None
            if i < cut and i in protected:
                line = norm[i]
                body = line[prefix[i]:] if prefix is not None and prefix[i] else line
                k = shape_key(body)
                if self.baseline.knows(body, k):
                    key = k
            if key is None or key != run_key:
                if run_key is not None and i - run_start >= KNOWN_RUN:
                    out.update(range(run_start + keep[0], i - keep[1]))
                run_key, run_start = key, i
        return out

    def _collect_annotations(self, det, view: TextView, cut: int) -> None:
        for s in det.resolved_hits:
            if s.family not in ("error", "trace", "test-failure", "fileref") or s.line_start - 1 >= cut:
                continue
            for ln in range(s.line_start - 1, min(s.line_end, cut)):
                body = view.body(ln)
                m = _FILELINE.search(body[:4096])
                if not m:
                    continue
                col = m.group("col")
                ref = (m.group("file"), int(m.group("line") or m.group("mline")))
                if ref in self._seen_refs:
                    break
                self._seen_refs.add(ref)
                fam_rank = {"error": 0, "test-failure": 0, "trace": 1, "fileref": 2}[s.family]
                lineno = self._lineno + ln + 1
                rank = (fam_rank, -s.priority, lineno)
                ann = Annotation(ref[0], ref[1], body.strip()[:500], lineno, s.rule_id, s.priority,
                                 int(col) if col is not None else None)
                item = (tuple(-x for x in rank), lineno, ann)
                if len(self.annotations) < self.opt.max_annotations:
                    heapq.heappush(self.annotations, item)
                elif item > self.annotations[0]:
                    heapq.heapreplace(self.annotations, item)
                break

    def ranked_annotations(self) -> list[Annotation]:
        return [a for _, _, a in sorted(self.annotations, key=lambda t: (t[0], t[1]), reverse=True)]

    def run(self, chunks: Iterator[str], write: Callable[[str], None]) -> TrimStats:
        """Trim text arriving in chunks (any sizes). The caller may keep the raw input in
        ``self.raw`` (a list of str or bytes pieces) while it is not None: when nothing is
        folded, those pieces are written back as they are."""
        opt = self.opt
        self._write = write
        pending: list[str] = []  # pieces of a line not yet ended
        pending_len = 0
        block: list[str] = []
        block_bytes = 0

        def add(line: str) -> None:
            nonlocal block, block_bytes
            self.stats.lines_in += 1
            self.stats.bytes_in += _nbytes(line) + 1
            block.append(line)
            block_bytes += len(line)
            if len(block) >= opt.block_lines or block_bytes >= opt.block_bytes:
                block = self.process_block(block, final=False)
                block_bytes = sum(len(x) for x in block)
                if not self._decided and self.raw_bytes + self._held_bytes > opt.passthrough_bytes:
                    self._decide()  # too much to hold back: stream the normalised output

        def add_many(parts: list[str]) -> None:
            """``add`` for each line, in bulk: the same block boundaries, no call per line."""
            nonlocal block, block_bytes
            i, n = 0, len(parts)
            while i < n:
                seg = parts[i:i + max(1, opt.block_lines - len(block))]
                # running block size after each line; the block closes at the first line that
                # reaches the line or byte limit, as add() would
                end = block_bytes + sum(map(len, seg))
                if end < opt.block_bytes:  # the byte limit is not reached within seg (the common case)
                    take = len(seg)
                else:
                    sizes = list(accumulate(map(len, seg), initial=block_bytes))
                    take = min(len(seg), bisect_left(sizes, opt.block_bytes, 1))
                    if take < len(seg):
                        seg = seg[:take]
                    end = sizes[take]
                joined = "\n".join(seg)
                self.stats.lines_in += take
                self.stats.bytes_in += (len(joined) if joined.isascii() else _nbytes(joined)) + 1
                block.extend(seg)
                block_bytes = end
                i += take
                if len(block) >= opt.block_lines or block_bytes >= opt.block_bytes:
                    block = self.process_block(block, final=False)
                    block_bytes = sum(len(x) for x in block)
                    if not self._decided and self.raw_bytes + self._held_bytes > opt.passthrough_bytes:
                        self._decide()

        for chunk in chunks:
            if not chunk:
                continue
            if "\n" not in chunk:
                pending.append(chunk)
                pending_len += len(chunk)
                if pending_len > opt.max_line_chars * 4:  # a line without end: cut it into pieces
                    add("".join(pending))
                    pending, pending_len = [], 0
                    self._pieces += 1  # (counted as a line by add: not one)
                continue
            parts = chunk.split("\n")
            if pending:
                parts[0] = "".join(pending) + parts[0]
                pending, pending_len = [], 0
            last = parts.pop()
            add_many(parts)
            if last:
                pending, pending_len = [last], len(last)
        if pending:
            tail = "".join(pending)
            self.stats.lines_in += 1
            self.stats.bytes_in += _nbytes(tail)
            block.append(tail)
        elif self._pieces and self.stats.lines_in:
            self.stats.lines_in += 1  # the last piece of a line without end was its end
        self.process_block(block, final=True)
        self.stats.lines_in -= self._pieces
        if not self._decided:
            # nothing folded: the input goes out untouched
            self.stats.passthrough = True
            self._held = []
            raw = self.raw or []
            self.raw = None
            self._decided = True
            for piece in raw:
                write(piece)
            self.stats.lines_out = self.stats.lines_in
            self.stats.bytes_out = self.raw_bytes
        if opt.github:
            self.stats.annotations = self.ranked_annotations()
            for a in self.stats.annotations:
                write(a.command() + "\n")
        if opt.receipt and self.stats.folded:
            receipt = self.stats.receipt()
            if self.stats.bytes_out + len(receipt) + 1 < self.stats.bytes_in or opt.github:
                write(receipt + "\n")
        return self.stats


def github_summary(stats: TrimStats, annotations: list[Annotation], title: str = "compactor trim") -> str:
    """A Markdown job summary (for ``$GITHUB_STEP_SUMMARY``): one table of figures, one of failures."""
    ratio = stats.bytes_in / stats.bytes_out if stats.bytes_out else 0.0
    rows = [
        ("lines in", f"{stats.lines_in:,}"), ("lines out", f"{stats.lines_out:,}"),
        ("bytes in", f"{stats.bytes_in:,}"), ("bytes out", f"{stats.bytes_out:,}"),
        ("smaller", f"{ratio:.1f}x"), ("protected lines", f"{stats.protected_lines:,}"),
        ("folded lines", f"{stats.folded_lines:,} in {stats.regions:,} regions"),
        ("as in the baseline", f"{stats.baseline_lines:,}"), ("repeated blocks", f"{stats.repeated_blocks:,}"),
    ]
    out = [f"### {title}", "", "| | |", "|---|---:|"] + [f"| {k} | {v} |" for k, v in rows]
    if annotations:
        out += ["", "| file | line | log line | failure |", "|---|---:|---:|---|"]
        for a in annotations:
            msg = a.message.replace("|", "\\|")
            out.append(f"| `{a.file}` | {a.line} | {a.log_line} | {short(msg, 160)} |")
    return "\n".join(out) + "\n"


def iter_decoded(stream: BinaryIO, stats: TrimStats | None = None, chunk_size: int = 1 << 20,
                 raw_sink: Callable[[bytes], bool] | None = None) -> Iterator[str]:
    """Decode a byte stream incrementally as UTF-8 (invalid bytes → U+FFFD, counted).

    ``raw_sink(data)`` receives the raw bytes read (BOM included) while it returns True."""
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    first = True
    while True:
        data = stream.read(chunk_size)
        if not data:
            break
        if raw_sink is not None and not raw_sink(data):
            raw_sink = None
        if first:
            if data.startswith(b"\xef\xbb\xbf"):
                data = data[3:]
            first = False
        text = dec.decode(data)
        if stats is not None and "\ufffd" in text:
            stats.invalid_utf8 += text.count("\ufffd")
        yield text
    tail = dec.decode(b"", final=True)
    if tail:
        yield tail


def trim_stream(detector: Detector, stream: BinaryIO, out: TextIO, options: TrimOptions = TrimOptions(),
                store: Store | None = None, baseline: Baseline | None = None,
                cut_store: Store | Callable[[], Store] | None = None) -> TrimStats:
    """Trim a byte stream into a text stream; returns the figures (with ``github=True``, the ranked
    annotations in ``.annotations``). Untouched input is written back byte for byte (to
    ``out.buffer`` when the text stream has one). ``cut_store``: see :class:`Trimmer`."""
    t = Trimmer(detector, options, store, baseline, cut_store)

    def sink(data: bytes) -> bool:
        if t.raw is None:
            return False
        t.raw.append(data)
        t.raw_bytes += len(data)
        return True

    write = _flushing(out.write, out)
    buf = getattr(out, "buffer", None)

    def w(s) -> None:
        if isinstance(s, bytes):
            if buf is not None:
                out.flush()
                buf.write(s)
            else:
                out.write(s.decode("utf-8", "replace"))
        else:
            write(s)

    stats = t.run(iter_decoded(stream, t.stats, raw_sink=sink), w)
    out.flush()
    return stats


def _flushing(write: Callable[[str], None], out: TextIO) -> Callable[[str], None]:
    count = 0

    def w(s: str) -> None:
        nonlocal count
        write(s)
        count += 1
        if count % 2048 == 0:
            out.flush()

    return w


def trim_text(detector: Detector, text: str, options: TrimOptions = TrimOptions(), store: Store | None = None,
              baseline: Baseline | None = None) -> tuple[str, TrimStats]:
    parts: list[str] = []
    t = Trimmer(detector, options, store, baseline)
    t.raw = [text]
    t.raw_bytes = len(text.encode("utf-8", "surrogatepass"))
    stats = t.run(iter([text]), parts.append)
    return "".join(parts), stats


class TrimResult(FrozenPlain):
    """What :func:`trim` returns: the trimmed ``text``, its figures (``stats``) and the ranked
    failures that name ``file:line`` (``annotations``, the ones ``--github`` turns into
    annotations)."""

    __slots__ = ("text", "stats", "annotations")
    _defaults = {"annotations": ()}


_DETECTORS: dict[tuple[str, ...], Detector] = {}


def _detector(rules: tuple[str, ...]) -> Detector:
    det = _DETECTORS.get(rules)
    if det is None:
        from ..engine import load_rules

        det = _DETECTORS[rules] = Detector(load_rules(list(rules)))
    return det


def trim(log: str | bytes | Path, *, baseline: str | bytes | Path | Baseline | Iterable[str | bytes | Path] | None = None,
         options: TrimOptions | None = None, rules: Iterable[str | Path] = (),
         store: Store | str | os.PathLike[str] | None = None, source: str | None = None,
         **option_fields) -> TrimResult:
    """Trim a CI log: keep errors, traces and their context verbatim, fold the rest.

    ``log``: the log text (``str``), its bytes, or a path (``pathlib.Path``). ``baseline``: the
    log(s) of passing runs of the same job (text, bytes, paths, or a :class:`Baseline`); lines
    whose shape also occurs there fold first. ``options``: a :class:`TrimOptions`, or its fields as
    keyword arguments (``context=3``, ``github=True``, ``receipt=False``...). ``rules``: extra rule
    directories. ``store``: a :class:`Store` or a store path; when given, every folded region is
    stored and its summary carries a ``ref`` that ``Compactor.expand`` turns back into the exact
    lines. ``source``: the name errors give the input (binary data is refused). A log with
    nothing to fold comes back untouched.
    """
    opts = options or TrimOptions(**{"receipt": False, **option_fields})
    det = _detector(tuple(str(r) for r in rules))
    base = _as_baseline(baseline)
    if store is not None and isinstance(store, (str, os.PathLike)):
        from .store import open_store

        store = open_store(store)
    t = Trimmer(det, opts, store, base)
    parts: list[str] = []
    if isinstance(log, Path):
        with open(log, "rb") as fh:
            data = fh.read()
        check_text_log(data[:8192], source or str(log))
    elif isinstance(log, (bytes, bytearray)):
        data = bytes(log)
        check_text_log(data[:8192], source or "<bytes>")
    elif isinstance(log, str):
        data = None
    else:
        raise TypeError("trim(): log must be str (the text), bytes or pathlib.Path")
    if data is None:
        t.raw = [log]
        t.raw_bytes = len(log.encode("utf-8", "surrogatepass"))
        t.run(iter([log]), parts.append)
    else:
        import io

        def sink(chunk: bytes) -> bool:
            if t.raw is None:
                return False
            t.raw.append(chunk)
            t.raw_bytes += len(chunk)
            return True

        t.run(iter_decoded(io.BytesIO(data), t.stats, raw_sink=sink), parts.append)
    text = "".join(p if isinstance(p, str) else p.decode("utf-8", "replace") for p in parts)
    size = len(data) if data is not None else t.raw_bytes if t.raw is not None else len(log.encode("utf-8", "surrogatepass"))
    written = len(text.encode("utf-8", "surrogatepass"))
    if written > size and not t.stats.passthrough:  # never larger than what came in
        text = log if data is None else data.decode("utf-8", "replace")
        t.stats.note = (f"the trimmed log ({written} bytes) would be larger than the input ({size} bytes): "
                        "the input is returned as it is")
        t.stats.passthrough = True
    return TrimResult(text, t.stats, tuple(t.ranked_annotations()))


def trim_to(out: TextIO, log: BinaryIO | str | os.PathLike[str], *, baseline: Baseline | None = None,
            options: TrimOptions | None = None, rules: Iterable[str | Path] = (), store: Store | None = None,
            source: str | None = None, cut_store: Store | Callable[[], Store] | None = None,
            **option_fields) -> TrimStats:
    """Trim a CI log into the text stream ``out`` as it is read, in bounded memory (what ``compactor
    trim`` runs); returns the figures (``.annotations``: the ranked failures). ``log``: a binary
    stream, or the path of a file (binary data is refused, naming ``source`` or the path). A log
    with nothing to fold is written back byte for byte. ``cut_store``: where the middle of a line
    longer than ``max_line_chars`` goes when no ``store`` is given (a store, or a function that
    opens one on the first cut), so that the cut's ``ref`` expands it back. The other arguments are
    as for :func:`trim`, except that the receipt line is written by default (``receipt=False`` to
    omit)."""
    opts = options or TrimOptions(**option_fields)
    det = _detector(tuple(str(r) for r in rules))
    if isinstance(log, (str, os.PathLike)):
        name = source or os.fspath(log)
        with open(log, "rb") as fh:
            check_text_log(fh.read(8192), name)
            fh.seek(0)
            return trim_stream(det, fh, out, opts, store, baseline, cut_store)
    return trim_stream(det, log, out, opts, store, baseline, cut_store)


def check_text_log(head: bytes, source: str) -> None:
    """Refuse binary data: a log is text. ``head`` is the start of the input (8 KiB is enough);
    a few stray NUL bytes in a real log are tolerated."""
    nul = head.find(b"\x00")
    if nul != -1 and head.count(b"\x00") > len(head) // 20:
        from ..errors import InputError

        raise InputError(f"binary data (NUL byte at offset {nul}); trim reads text logs",
                         source=source, position=f"byte {nul}")


def _as_baseline(baseline) -> Baseline | None:
    if baseline is None or isinstance(baseline, Baseline):
        return baseline
    items = [baseline] if isinstance(baseline, (str, bytes, bytearray, Path)) else list(baseline)
    b = Baseline()
    for item in items:
        if isinstance(item, Path):
            b.add_path(item)
        elif isinstance(item, (bytes, bytearray)):
            b.add_text(bytes(item).decode("utf-8", "replace"))
        elif isinstance(item, str):
            b.add_text(item)
        else:
            raise TypeError("trim(): baseline items must be str (text), bytes or pathlib.Path")
    return b
