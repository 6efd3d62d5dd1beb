"""``compactor trim``: streaming log trimming in constant memory.

Lines are read in blocks; each block is normalised and scanned by the protect rules. Protected
lines (with a few lines of context) are written verbatim; every other run of lines is written
as its first lines, one summary line (count and the most frequent line shapes), and its last
lines. The tail of each block is carried into the next one so a trace that crosses a block
boundary is still seen whole. Output is flushed block by block; the last line is a receipt.
"""

from __future__ import annotations

import codecs
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import BinaryIO, Callable, Iterator, TextIO

import regex

from ..detect import Detector
from ..engine.matchers import TextView
from ..normalize import normalize_line
from .fold import template_of
from .store import Store

__all__ = ["TrimOptions", "TrimStats", "Trimmer", "trim_stream", "trim_text"]

_DIGITS = bytes.maketrans(b"123456789", b"000000000")
_FILELINE = regex.compile(r"(?P<file>[\w./-]+\.[A-Za-z]{1,6}):(?P<line>\d+)")


@dataclass(frozen=True)
class TrimOptions:
    context: int = 2  # lines kept around protected lines
    keep_head: int = 2  # lines kept at the start of a folded region
    keep_tail: int = 2  # lines kept at the end of a folded region
    min_fold: int = 8  # regions up to this many lines are kept whole
    top_templates: int = 3
    block_lines: int = 8192
    block_bytes: int = 4 * 1024 * 1024
    carry_lines: int = 64
    max_line_chars: int = 1024 * 1024  # longer lines are cut to head + tail in the output
    github: bool = False  # emit GitHub Actions annotations for errors with file:line
    receipt: bool = True


@dataclass
class TrimStats:
    lines_in: int = 0
    lines_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    protected_lines: int = 0
    folded_lines: int = 0
    regions: int = 0
    long_lines_cut: int = 0
    invalid_utf8: int = 0
    rule_timeouts: int = 0

    def receipt(self) -> str:
        ratio = self.bytes_in / self.bytes_out if self.bytes_out else 0.0
        parts = [
            f"{self.lines_in} lines in",
            f"{self.lines_out} lines out",
            f"{self.folded_lines} folded in {self.regions} regions",
            f"{self.protected_lines} protected",
            f"{ratio:.1f}x smaller",
        ]
        if self.long_lines_cut:
            parts.append(f"{self.long_lines_cut} over-long lines cut")
        if self.invalid_utf8:
            parts.append("invalid UTF-8 replaced")
        if self.rule_timeouts:
            parts.append(f"{self.rule_timeouts} rule timeouts (regions kept)")
        return "[compactor trim: " + ", ".join(parts) + "]"


@dataclass
class _Region:
    """A run of benign lines being folded, in bounded memory."""

    head: list[str] = field(default_factory=list)
    tail: deque = field(default_factory=lambda: deque(maxlen=8))
    count: int = 0
    templates: Counter = field(default_factory=Counter)
    originals: list[str] | None = None


class Trimmer:
    def __init__(self, detector: Detector, options: TrimOptions = TrimOptions(), store: Store | None = None):
        self.detector = detector
        self.opt = options
        self.store = store
        self.stats = TrimStats()
        self._region = _Region()

    # ------------------------------------------------------------------ output
    def _emit_region(self, write: Callable[[str], None]) -> None:
        r = self._region
        opt = self.opt
        if r.count == 0:
            return
        if r.count <= opt.min_fold:
            for line in r.head[: r.count]:
                self._out(write, line)
        else:
            for line in r.head[: opt.keep_head]:
                self._out(write, line)
            folded = r.count - opt.keep_head - opt.keep_tail
            merged: Counter = Counter()
            # cheap keys → real templates (numbers, ids, paths masked), for the most frequent keys
            # only: the summary names the top few shapes, the rest only adds to the total
            for key, n in sorted(r.templates.items(), key=lambda kv: (-kv[1], kv[0]))[:64]:
                merged[template_of(key.decode("utf-8", "replace"))] += n
            top = ", ".join(f'{n}× "{_short(t)}"' for t, n in sorted(merged.items(), key=lambda kv: (-kv[1], kv[0]))[: opt.top_templates])
            ref = ""
            if self.store is not None and r.originals is not None:
                ref = " · ref " + self.store.put("\n".join(r.originals[opt.keep_head: r.count - opt.keep_tail]).encode("utf-8", "surrogatepass"))
            if opt.github:
                write(f"::group::compactor folded {folded} lines\n")
            self._out(write, f"[… {folded} lines folded: {top}{ref}]")
            if opt.github:
                write("::endgroup::\n")
            self.stats.folded_lines += folded
            self.stats.regions += 1
            for line in list(r.tail)[-opt.keep_tail:]:
                self._out(write, line)
        self._region = _Region()
        if self.store is not None:
            self._region.originals = []

    def _out(self, write: Callable[[str], None], line: str) -> None:
        write(line + "\n")
        self.stats.lines_out += 1
        self.stats.bytes_out += len(line) + 1

    def _benign(self, line: str, original: str) -> None:
        r = self._region
        if r.originals is None and self.store is not None:
            r.originals = []
        r.count += 1
        if len(r.head) < max(self.opt.keep_head, self.opt.min_fold):
            r.head.append(line)
        r.tail.append(line)
        head = line[:120]
        # a cheap, digit-insensitive key per line (C-speed); keys are mapped to the real templates
        # (numbers, ids, paths masked) only when the region is written, once per distinct key
        key = head.encode("utf-8", "surrogatepass").translate(_DIGITS)
        templates = r.templates
        if key in templates or len(templates) < 5000:
            templates[key] += 1
        if r.originals is not None and len(r.originals) < 1_000_000:
            r.originals.append(original)

    # ------------------------------------------------------------------ blocks
    def process_block(self, lines: list[str], write: Callable[[str], None], final: bool) -> list[str]:
        """Process raw lines; return the raw lines carried over to the next block."""
        opt = self.opt
        norm = [normalize_line(x) for x in lines]
        cut_long = []
        for i, x in enumerate(norm):
            if len(x) > opt.max_line_chars:
                half = opt.max_line_chars // 2
                norm[i] = x[:half] + f" [… {len(x) - 2 * half} characters cut] " + x[-half:]
                cut_long.append(i)
        view = TextView("\n".join(norm))
        det = self.detector.detect_view(view, role="tool")
        n = len(norm)
        if det.protect_all:
            self.stats.rule_timeouts += 1
            protected = set(range(n))
        else:
            protected = det.protected_lines(context=opt.context, nlines=n)
        cut = n
        if not final and n > opt.carry_lines:
            cut = n - opt.carry_lines
            for s in det.raw_spans:
                if s.line_end - 1 >= cut and s.line_start - 1 < cut:
                    cut = min(cut, s.line_start - 1 - opt.context)
            if cut <= 0:
                cut = n - opt.carry_lines  # one block-sized trace: finalise anyway (bounded memory)
        elif not final:
            return lines
        errors_with_ref = set()
        if opt.github:
            for s in det.spans:
                if s.family in ("error", "trace", "test-failure"):
                    errors_with_ref.add(s.line_start - 1)
        for i in range(cut):
            if i in protected:
                self._emit_region(write)
                if i in errors_with_ref:
                    m = _FILELINE.search(norm[i])
                    if m:
                        write(f"::error file={m.group('file')},line={m.group('line')}::{norm[i].strip()[:500]}\n")
                self._out(write, norm[i])
                self.stats.protected_lines += 1
            else:
                self._benign(norm[i], lines[i])
        self.stats.long_lines_cut += sum(1 for i in cut_long if i < cut)
        if final:
            self._emit_region(write)
        return lines[cut:]

    def run(self, chunks: Iterator[str], write: Callable[[str], None]) -> TrimStats:
        """Trim text arriving in chunks (any sizes)."""
        opt = self.opt
        pending: list[str] = []  # pieces of a line not yet ended
        pending_len = 0
        block: list[str] = []
        block_bytes = 0

        def add(line: str) -> None:
            nonlocal block, block_bytes
            self.stats.lines_in += 1
            self.stats.bytes_in += len(line) + 1
            block.append(line)
            block_bytes += len(line)
            if len(block) >= opt.block_lines or block_bytes >= opt.block_bytes:
                block = self.process_block(block, write, final=False)
                block_bytes = sum(len(x) for x in block)

        for chunk in chunks:
            if not chunk:
                continue
            if "\n" not in chunk:
                pending.append(chunk)
                pending_len += len(chunk)
                if pending_len > opt.max_line_chars * 4:  # a line without end: cut it into pieces
                    add("".join(pending))
                    pending, pending_len = [], 0
                continue
            parts = chunk.split("\n")
            if pending:
                parts[0] = "".join(pending) + parts[0]
                pending, pending_len = [], 0
            last = parts.pop()
            for line in parts:
                add(line)
            if last:
                pending, pending_len = [last], len(last)
        if pending:
            tail = "".join(pending)
            self.stats.lines_in += 1
            self.stats.bytes_in += len(tail)
            block.append(tail)
        self.process_block(block, write, final=True)
        if opt.receipt:
            write(self.stats.receipt() + "\n")
        return self.stats


def _short(t: str, n: int = 60) -> str:
    t = " ".join(t.split())
    return t if len(t) <= n else t[: n - 1] + "…"


def iter_decoded(stream: BinaryIO, stats: TrimStats | None = None, chunk_size: int = 1 << 20) -> Iterator[str]:
    """Decode a byte stream incrementally as UTF-8 (invalid bytes → U+FFFD, counted)."""
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    first = True
    while True:
        data = stream.read(chunk_size)
        if not data:
            break
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
                store: Store | None = None) -> TrimStats:
    t = Trimmer(detector, options, store)

    def write(s: str) -> None:
        out.write(s)

    stats = t.run(iter_decoded(stream, t.stats), _flushing(write, out))
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


def trim_text(detector: Detector, text: str, options: TrimOptions = TrimOptions(), store: Store | None = None) -> tuple[str, TrimStats]:
    parts: list[str] = []
    t = Trimmer(detector, options, store)
    stats = t.run(iter([text]), parts.append)
    return "".join(parts), stats
