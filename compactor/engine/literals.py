"""One pass for every prefilter literal: which lines contain which literal.

Each protect rule names literal ``prefilter`` strings; a rule's regex only runs on the lines that
contain one. Looking the literals up one ``str.find`` pass at a time costs one pass over the text
per distinct literal (about 250 of them); this module finds all of them in a single scan with a
multi-literal engine, in order of preference:

- ``hyperscan`` (Vectorscan; wheels for Linux x86-64 and macOS): the compiled database is cached
  on disk, keyed by the literals' hash (``$COMPACTOR_CACHE`` or ``~/.cache/compactor``; safe to
  delete);
- ``ahocorasick_rs`` (Rust; wheels for every major platform);
- pure Python (``str.find``), always available.

All three give identical results (a property test compares them): for each literal, the sorted
0-based numbers of the lines that contain it, once per line. Case-insensitive literals match ASCII
letters in either case (non-ASCII text never matches an ASCII letter of a literal); literals with
non-ASCII letters that have case are matched lowered against the lowered text.

The multi-literal engines read the text one byte per character (``bytes_view``: Latin-1, other
characters as '?'), so their offsets are the text's own and no byte offsets are worked out; they
look for the ASCII literals only. The other literals can only be on the few lines with a non-ASCII
character and are looked up there with ``str.find``.

With hyperscan, the same pass also runs the rules' approximate patterns (``approx``): per
approximation, the lines where its rule's pattern may match (``approx_key``); the exact pattern
then runs only on the lines both tiers found. The other engines have no such tier; the rules then
run on their literals' lines, with the same results.

Dense lines (a 1 MB line of ``0x…``) are cut short: after ``LINE_CAP`` matches on one line the scan
resumes at the next line, so its cost stays linear in the text, not in the number of matches. The
lines already seen keep every literal found so far; a literal that occurs only after the cap on a
dense line is still found by the exact fallback for that line (the line is re-checked with
``str.find``).
"""

from __future__ import annotations

import hashlib
import os
import re
from bisect import bisect_right
from itertools import accumulate, compress, repeat
from operator import add
from pathlib import Path
from typing import Any, Callable, Protocol
from ..lazyre import lazy_re


class TextView(Protocol):
    """What the scanner reads of a view (``matchers.TextView`` implements it; this module sits
    below ``matchers`` and does not import it)."""

    text: str
    starts: list[int]
    lines: list[str]
    _hits: dict[Any, list[int]]
    _bytes: tuple | None

    def lines_with(self, literal: str, ignore_case: bool) -> list[int]: ...

__all__ = ["ENGINES", "LINE_CAP", "LiteralScanner", "approx_key", "available_engines", "gate_fits_hyperscan", "gate_key",
           "holding_in", "line_starts", "lines_holding", "literal_key", "scan_lines", "wide_key"]

LINE_CAP = 64  # matches on one line before the scan skips to the next line
ENGINES = ("hyperscan", "ahocorasick", "python")


def literal_key(literal: str, ignore_case: bool) -> tuple[str, bool]:
    """The cache key of a literal lookup in a view (shared with ``TextView.lines_with``)."""
    return (literal.lower(), True) if ignore_case else (literal, False)


def available_engines() -> list[str]:
    """The installed engines, best first (looked up, not imported: an engine is imported when a
    scanner first needs it)."""
    from importlib.util import find_spec

    out = [name for name, module in (("hyperscan", "hyperscan"), ("ahocorasick", "ahocorasick_rs"))
           if find_spec(module) is not None]
    out.append("python")
    return out


def chosen_engine() -> str | None:
    """The literal engine asked for by ``$COMPACTOR_LITERAL_ENGINE`` (None: compactor chooses)."""
    return os.environ.get("COMPACTOR_LITERAL_ENGINE") or None


def _cache_dir() -> Path:
    env = os.environ.get("COMPACTOR_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "compactor"


# a scanner whose engine compactor picks answers the first this many characters with str.find (the
# same results): loading the automaton costs more than a short text's lookups
PYTHON_FIRST_CHARS = 64 * 1024


class LiteralScanner:
    """Compiled once per set of literals; ``scan(view)`` fills the view's literal cache."""

    def __init__(self, literals: list[tuple[str, bool]], engine: str | None = None,
                 gates: list[tuple[str, bool]] = (), approx: list[str] | Callable[[], list[str]] = (),
                 covered: Callable[[set[str]], set[tuple[str, bool]]] | None = None):
        keys = sorted({literal_key(lit, ci) for lit, ci in literals if lit})
        self.keys = keys
        # given the approximations hyperscan scans (the empty one included when it is set), the
        # literal keys it need not scan: every rule naming them reads its candidate lines off its
        # approximation (and the non-ASCII lines holding a literal, ``wide_key``) instead
        self._covered = covered
        self.skipped: list[tuple[tuple[str, bool], bytes, bool]] = []
        self._no_wide: dict = {}  # the skipped literals' entries of a view without a non-ASCII line
        self._skipped_db = None  # hyperscan: the skipped literals alone (``_skipped_in``)
        # rules' approximate patterns (``approx.approximate``), scanned with the literals by hyperscan;
        # the empty one (a pattern that needs a non-ASCII character) matches no ASCII line: not scanned.
        # Given as a function, they are worked out when hyperscan is first prepared (a short text
        # searched with str.find never needs them)
        self._approx_source = approx
        self.approx: list[str] = []
        self._approx_keys: list[tuple[str, str]] = []
        self._py_groups: tuple | None = None
        self._non_ascii_only = False
        # whole-text rules' gates that hyperscan runs exactly like ``regex`` on ASCII lines
        self.gates = sorted({g for g in gates if gate_fits_hyperscan(*g)})
        self._gate_db = None
        # byte-level groups, the ASCII literals: (key, needle bytes, caseless?); the bytes a
        # multi-literal engine reads hold one byte per character (``bytes_view``)
        self._bytes_keys: list[tuple[tuple[str, bool], bytes, bool]] = []
        self._lowered: list[tuple[str, bool]] = []  # non-ASCII literals with case: str.find on view.lower
        self._wide_keys: list[tuple[str, bool]] = []  # other non-ASCII literals: on the non-ASCII lines
        for key in keys:
            lit, ci = key
            if lit.isascii():
                self._bytes_keys.append((key, lit.encode("ascii"), ci))
            elif ci and not (lit.lower() == lit == lit.upper()):
                self._lowered.append(key)
            else:
                self._wide_keys.append(key)
        self._index_keys()
        self._gate_keys = [gate_key(*g) for g in self.gates]
        engines = available_engines()
        if engine is None:
            engine = chosen_engine()
            # chosen by compactor: the first texts go through str.find until there is enough text
            # to repay building (or loading) the engine's automaton (a short process stays short)
            self._python_until = 0 if engine else PYTHON_FIRST_CHARS
            engine = engine or engines[0]
        else:
            self._python_until = 0
        if engine not in ENGINES:
            raise ValueError(f"unknown literal engine {engine!r}; choose one of {', '.join(ENGINES)}")
        if engine not in engines:
            raise ValueError(f"literal engine {engine!r} is not installed")
        if not self._bytes_keys:  # nothing for a multi-literal engine (e.g. only non-ASCII literals)
            engine = "python"
        self.engine = engine
        self._db = None
        self._single = None  # hyperscan: the literals, reported once each (_single_db)
        self._ac = None
        self._scanned = 0  # characters scanned so far
        if not self._python_until:  # an engine asked for by name is ready at once
            self._prepare()

    def prepare_now(self) -> None:
        """Use the engine from the next text on (load or build its automaton now), instead of
        after the first ``PYTHON_FIRST_CHARS`` characters: for a caller that knows many texts
        will follow (a session). The lines found are the same with every engine."""
        self._python_until = 0
        if self.engine != "python":
            self._prepare()

    def _prepare(self) -> None:
        try:
            if self.engine == "hyperscan" and self._db is None:
                import hyperscan

                self._terminated = hyperscan.ScanTerminated
                approx = self._approx_source() if callable(self._approx_source) else self._approx_source
                self.approx = sorted(set(approx) - {""})
                self._non_ascii_only = "" in approx
                keep = self._bytes_keys
                try:
                    self._skip_covered()
                    self._db = _hyperscan_db(self._bytes_keys, self.approx)
                except hyperscan.error:  # an approximation hyperscan cannot compile: its rule keeps its literals
                    self.approx = [a for a in self.approx if _hs_compiles(a)]
                    self._bytes_keys = keep
                    self._skip_covered()
                    self._db = _hyperscan_db(self._bytes_keys, self.approx)
                self._approx_keys = [approx_key(a) for a in self.approx]
                # the gates scanned in the same pass (ids after the approximations); the database
                # without them takes over when a gate is on most lines (see scan_lines)
                self._gate_db = _hyperscan_db(self._bytes_keys, self.approx, self.gates) if self.gates else None
            elif self.engine == "ahocorasick" and self._ac is None:
                self._ac = _ahocorasick(self._bytes_keys)
        except ImportError:  # installed but unusable (a missing shared library): str.find gives the same
            self.engine = "python"

    def _index_keys(self) -> None:
        # case-sensitive literals with a '?', which a character replaced in the bytes may fake
        self._question = [(k, key[0]) for k, (key, needle, ci) in enumerate(self._bytes_keys)
                          if not ci and b"?" in needle]
        self._key_order = [key for key, _, _ in self._bytes_keys]  # the cache keys, in pattern id order

    def _skip_covered(self) -> None:
        """Leave out of the hyperscan database the literals the approximations cover (``covered``):
        each costs a callback per line that holds it ('error' is on a thousand lines of the real CI
        logs), and the rules naming them find their lines through their approximations anyway.
        Those literals are then looked up on the non-ASCII lines alone (``_scan_skipped``)."""
        if self._covered is None or not self.approx:
            return
        skip = self._covered(set(self.approx) | ({""} if self._non_ascii_only else set()))
        # (a literal across lines is looked up as lines_with does it, and one with a '?' is checked
        # on the lines where a replaced character may fake it: neither is skipped)
        self.skipped = [bk for bk in self._bytes_keys if bk[0] in skip and b"\n" not in bk[1] and b"?" not in bk[1]]
        self._no_wide = {wide_key(key): () for key, _, _ in self.skipped}
        if self.skipped:
            self._bytes_keys = [bk for bk in self._bytes_keys if bk[0] not in skip]
            self._index_keys()

    # ------------------------------------------------------------------ scanning
    def scan(self, view: TextView) -> list[tuple[str, bool]] | None:
        """Fill the view's literal cache with the lines of every literal; returns the keys found on
        some line (None when the view had been searched for some of them before: its cache says)."""
        hits = view._hits
        if hits:  # (a literal the engine skipped in this view has its non-ASCII lines there instead)
            todo = [k for k in self.keys if k not in hits and wide_key(k) not in hits]
            if not todo:
                return None
        else:  # a new view (the common case): nothing to look up first
            todo = self.keys
        self._scanned += len(view.text)
        use_engine = self.engine != "python" and len(todo) == len(self.keys) and self._scanned >= self._python_until
        if use_engine:
            self._prepare()
            use_engine = self.engine != "python"
        if not use_engine:
            if todo is not self.keys:
                for k in todo:
                    view.lines_with(*k)
                return None
            return self._scan_python(view)
        if self.engine == "hyperscan":
            found_ids = self._scan_hyperscan(view)
            if not bytes_view(view)[2]:  # an ASCII text: the non-ASCII literals are on no line
                return self._found_keys(found_ids)
        else:
            found_ids = self._scan_ahocorasick(view)
        found = self._found_keys(found_ids)
        if self.skipped:  # (the approximations found stand for the literals they cover)
            found += self._scan_skipped(view)
        for lit, ci in self._lowered:
            if view.lines_with(lit, ci):
                found.append((lit, ci))
        if self._wide_keys:
            found += self._scan_wide(view)
        return found

    def _found_keys(self, found_ids: list[int]) -> list:
        """The keys of the engine's ids found: the literals, then the approximations (all of
        ``scan``'s keys for a text without a non-ASCII character: the view's cache has its
        entries already)."""
        nkeys = len(self._bytes_keys)
        keys = self._key_order
        found = [keys[i] for i in found_ids if i < nkeys]
        if self.skipped:
            found += [self._approx_keys[i - nkeys] for i in found_ids if i >= nkeys]
        return found

    def _scan_python(self, view: TextView) -> list[tuple[str, bool]]:
        """Every literal by ``str.find`` (``TextView.lines_with``), looked up only where one
        ``in`` test on the haystack ``lines_with`` would search says it occurs: a short text holds
        few of the ~500 literals. The others get no lines."""
        groups = self._py_groups
        if groups is None:
            text_keys, ascii_keys, lower_keys = [], [], []
            for key in self.keys:
                lit, ci = key
                if ci and lit.isascii():
                    ascii_keys.append((key, lit, lit.encode("ascii")))
                elif ci and not (lit.lower() == lit == lit.upper()):
                    lower_keys.append((key, lit))
                else:
                    text_keys.append((key, lit))
            groups = self._py_groups = (text_keys, ascii_keys, lower_keys)
        text_keys, ascii_keys, lower_keys = groups
        text = view.text
        present = [key for key, lit in text_keys if lit in text]
        if ascii_keys:
            hay, encoded = view._ci_haystack()  # the haystack lines_with searches them in
            present += [key for key, lit, raw in ascii_keys if (raw if encoded else lit) in hay]
        if lower_keys:
            low = view.lower
            present += [key for key, lit in lower_keys if lit in low]
        hits = view._hits
        lines_with = view.lines_with
        found = [key for key in present if lines_with(*key)]
        hits.update(zip(self.keys, map(list, repeat((), len(self.keys)))) if not present else
                    ((key, []) for key in self.keys if key not in hits))
        return found

    def _bytes_view(self, view: TextView) -> tuple[bytes, list[int]]:
        data, starts, _ = bytes_view(view)
        return data, starts

    def _scan_wide(self, view: TextView) -> list[tuple[str, bool]]:
        """The non-ASCII literals (those ``lines_with`` searches in the text as it is): found by
        ``str.find`` in the lines with a non-ASCII character, the only ones that can hold them."""
        wide = bytes_view(view)[2]
        hits = view._hits
        if not wide:
            hits.update((key, []) for key in self._wide_keys)
            return []
        lines = view.lines
        sub = [lines[i] for i in wide]
        joined = "\n".join(sub)
        jstarts = line_starts(sub)
        found = []
        for key in self._wide_keys:
            lit = key[0]
            if "\n" in lit:  # across lines: as lines_with finds it
                got = view.lines_with(*key)
            else:
                got = [wide[k] for k in lines_holding(joined, jstarts, lit)] if lit in joined else []
            hits[key] = got
            if got:
                found.append(key)
        return found

    def _scan_skipped(self, view: TextView) -> list[tuple[str, bool]]:
        """The lines with a non-ASCII character that hold each literal left out of the scan (where
        the approximations promise nothing), under ``wide_key``; returns the literal keys found
        there."""
        wide = bytes_view(view)[2]
        hits = view._hits
        hits.update(self._no_wide)  # (no line holds most of them: the found ones get theirs below)
        if not wide:  # no line can hold them (most texts)
            return []
        got = self._skipped_in(view, wide)
        hits.update((wide_key(key), lines) for key, lines in got.items())
        return list(got)

    def _skipped_in(self, view: TextView, wide: list[int]) -> dict:
        """The skipped literals found on the lines ``wide`` (those with a non-ASCII character),
        and their lines, as ``holding_in`` finds them: one hyperscan pass of a database of those
        literals over the lines' bytes (looking each up with ``find`` costs more than the rest of
        a short text's scan). A line dense with them is looked up exactly."""
        db = self._skipped_db
        if db is None:
            db = self._skipped_db = _hyperscan_db(self.skipped)
        data, starts, _ = bytes_view(view)
        lines = view.lines
        sub = [data[starts[i]:starts[i] + len(lines[i])] for i in wide]
        out: list[list[int]] = [[] for _ in self.skipped]
        recheck, _ = scan_lines(db, b"\n".join(sub), line_starts(sub), out, self._terminated)
        if recheck:  # (rare) the exact lookup on every such line
            return {key: got for key, got in holding_in(view, wide, self.skipped).items() if got}
        skipped = self.skipped
        return {skipped[k][0]: [wide[j] for j in sorted(set(out[k]))] for k in compress(range(len(out)), out)}

    def found_keys(self, view: TextView, keys) -> list:
        """Of ``keys``, those the view's cache holds lines for, after a scan; with literals skipped
        by the engine, those found on non-ASCII lines and the approximations found too."""
        hits = view._hits
        found = [k for k in keys if hits.get(k)]
        if self.skipped and self._approx_keys and self._approx_keys[0] in hits:
            found += [key for key, _, _ in self.skipped if hits.get(wide_key(key))]
            found += [k for k in self._approx_keys if hits[k]]
        return found

    def _unfake(self, view: TextView, out: list[list[int]]) -> None:
        """Drop, from the lines of a case-sensitive literal with a '?', the non-ASCII lines where
        only a replaced character made it ('’' reads as '?' in the bytes)."""
        wide = bytes_view(view)[2]
        if not wide:
            return
        wset = set(wide)
        lines = view.lines
        for k, lit in self._question:
            if out[k]:
                out[k] = [i for i in out[k] if i not in wset or lit in lines[i]]

    def _scan_hyperscan(self, view: TextView) -> list[list[int]]:
        """Per literal, then per approximate pattern, the lines where it is found. An approximate
        pattern's lines also include every line of a chunk cut short by a dense line; the lines
        with a non-ASCII character, where an approximation promises nothing, are added by its
        reader (``matchers.CompiledRule._lines``: a text with thousands of them would otherwise
        make every rule's candidates thousands of lines long).

        The whole-text rules' gates are scanned in the same pass: per gate, the lines where it may
        match (where hyperscan finds it, every line with a non-ASCII character, where ``regex``
        and hyperscan read classes such as ``\\d`` differently, and the lines of a chunk cut
        short: a superset is all a gate promises). A gate on more than ``GATE_SHARE`` of the lines
        (a 100,000-frame trace of ``File.java:12`` lines) gets no lines, and its rule searches the
        whole text: the scan goes on without the gates after that chunk (searching those lines
        one by one would cost more than one search of the whole text)."""
        data, starts, wide = bytes_view(view)
        nkeys = len(self._bytes_keys)
        ntier = nkeys + len(self.approx)
        gates = self._gate_db is not None
        out: list[list[int]] = [[] for _ in range(ntier + (len(self.gates) if gates else 0))]
        if gates:
            recheck, gates_kept = scan_lines(self._gate_db, data, starts, out, self._terminated,
                                             range(ntier, len(out)), GATE_SHARE * len(starts) + 64, self._db)
            gate_out = out[ntier:]
            del out[ntier:]
        else:
            recheck, gates_kept = scan_lines(self._db, data, starts, out, self._terminated)
        hits = view._hits
        if not wide:
            # an ASCII text: every key of the scan, the non-ASCII literals and the skipped
            # literals' non-ASCII entries get no lines at once (one dict merge); those found
            # get theirs below
            hits.update(self._ascii_misses())
        if recheck or wide or self._question:
            _in_order(out)
            if recheck:
                self._recheck_dense(view, recheck, out, data)
            if self._question:
                self._unfake(view, out)
            if self.approx and recheck:
                extra = set(recheck)
                out[nkeys:] = [sorted(extra.union(lines)) for lines in out[nkeys:]]
            hits.update(zip(self._key_order, out))
            if self.approx:
                hits.update(zip(self._approx_keys, out[nkeys:]))
            if self._non_ascii_only:
                hits[approx_key("")] = []
            found = list(compress(range(ntier), out))  # the literals and approximations found
        else:  # (most texts: no dense line, nothing to set right)
            found = list(compress(range(ntier), out))
            keys = self._tier_keys
            for i in found:
                lines = out[i]
                if len(lines) > 1 and not all(map(int.__lt__, lines, lines[1:])):
                    lines = sorted(set(lines))
                hits[keys[i]] = lines
        if gates and gates_kept:
            extra = set(recheck).union(wide)
            hits.update(zip(self._gate_keys, (sorted(extra.union(lines)) if extra else
                                              lines if all(map(int.__lt__, lines, lines[1:])) else sorted(set(lines))
                                              for lines in gate_out)))
        return found  # the literals found (ids below the literal count), then the approximations found

    def _ascii_misses(self) -> dict:
        """The cache entries of a view without a non-ASCII character where the scan found
        nothing: every literal and approximation key (no lines), the non-ASCII literals (no
        lines: ``lines_with`` would find none) and the skipped literals' non-ASCII entries. Made
        once (an empty tuple for each: read, never changed)."""
        got = self.__dict__.get("_misses")
        if got is None:
            self._tier_keys = [*self._key_order, *self._approx_keys]
            got = dict.fromkeys(self._tier_keys, ())
            if self._non_ascii_only:
                got[approx_key("")] = ()
            got.update(self._no_wide)
            got.update(dict.fromkeys(self._lowered, ()))
            got.update(dict.fromkeys(self._wide_keys, ()))
            self._misses = got
        return got

    def _single_db(self):
        """The literals alone, each reported at most once per scan (``_recheck_dense``)."""
        if self._single is None:
            self._single = _hyperscan_db(self._bytes_keys, single=True)
        return self._single

    def _scan_ahocorasick(self, view: TextView) -> list[list[int]]:
        data, starts = self._bytes_view(view)
        n = len(self._bytes_keys)
        out: list[list[int]] = [[] for _ in range(n)]
        nstarts = len(starts)
        big = 1 << 62
        dense: list[int] = []
        for ac, ids, hay in self._ac_runs(data):
            until = [-1] * n
            line_end, count = -1, 0
            skip_to = -1
            for j, _a, b in ac.find_matches_as_indexes(hay, overlapping=True):
                if b <= skip_to:
                    continue
                if b - 1 <= line_end:
                    count += 1
                    if count > LINE_CAP:
                        ln = bisect_right(starts, b - 1) - 1
                        dense.append(ln)
                        skip_to = line_end
                        continue
                else:
                    ln = bisect_right(starts, b - 1) - 1
                    line_end = starts[ln + 1] - 1 if ln + 1 < nstarts else big
                    count = 1
                i = ids[j]
                if b - 1 > until[i]:
                    ln = bisect_right(starts, b - 1) - 1
                    out[i].append(ln)
                    until[i] = starts[ln + 1] - 1 if ln + 1 < nstarts else big
        _in_order(out)
        if dense:
            self._recheck_dense(view, sorted(set(dense)), out)
        if self._question:
            self._unfake(view, out)
        view._hits.update(zip(self._key_order, out))
        return list(compress(range(n), out))

    def _ac_runs(self, data: bytes):
        """(automaton, ids, haystack) pairs: case-sensitive needles on the bytes, caseless ASCII
        needles on the ASCII-lowered bytes (same offsets)."""
        sens, sens_ids, caseless, caseless_ids = self._ac
        if sens is not None:
            yield sens, sens_ids, data
        if caseless is not None:
            yield caseless, caseless_ids, data.lower()

    def _recheck_dense(self, view: TextView, dense: list[int], out: list[list[int]], data: bytes | None = None) -> None:
        """Lines where the scan stopped early: every literal is looked up exactly on them (the
        caseless ones in the line lowered once, not once per literal: a dense 1 MB line was
        lowered for each of the ~70 caseless literals).

        With hyperscan (``data``: the view's bytes), a line longer than ``RECHECK_SCAN`` is
        scanned once for all the literals by a database that reports each literal once
        (``HS_FLAG_SINGLEMATCH``), instead of one ``in`` test per literal, each a pass over the
        line (40 ms on a dense 1 MB line). Hyperscan reads the bytes as the other lookups do
        (caseless: ASCII letters only; a '?' it finds in place of a replaced character is
        dropped afterwards, as for the scan's own matches: ``_unfake``)."""
        dense = sorted(set(dense))
        if data is not None:
            lines, starts = view.lines, view.starts
            long_lines = [ln for ln in dense if len(lines[ln]) > RECHECK_SCAN]
            if long_lines:
                db = self._single_db()
                for ln in long_lines:
                    ids: set[int] = set()
                    db.scan(data[starts[ln]:starts[ln] + len(lines[ln])] + b"\n",  # (see approx.LINE_END)
                            match_event_handler=lambda i, _a, _b, _f, _c: ids.add(i))
                    for k in ids:
                        out[k].append(ln)
                _in_order(out)
                dense = [ln for ln in dense if len(lines[ln]) <= RECHECK_SCAN]
        lowered: dict[int, Any] = {}  # line -> (lowered line, ASCII?)
        for k, (key, needle, _) in enumerate(self._bytes_keys):
            lit, ci = key
            found = set(out[k])
            add_lines = []
            for ln in dense:
                if ln in found:
                    continue
                line = view.lines[ln]
                if ci:
                    got = lowered.get(ln)
                    if got is None:
                        asc = line.isascii()
                        got = lowered[ln] = (line.lower() if asc else line.encode("latin-1", "replace").lower(), asc)
                    hit = (lit if got[1] else needle) in got[0]
                else:
                    hit = lit in line
                if hit:
                    add_lines.append(ln)
            if add_lines:
                out[k] = sorted(found.union(add_lines))


def line_starts(lines: list) -> list[int]:
    """Offsets of each line's first character in the lines joined with '\n' (str or bytes
    lines), C-speed (each length plus its newline summed up)."""
    return list(accumulate(map(add, map(len, lines[:-1]), repeat(1)), initial=0))


def non_ascii_lines(lines: list[str]) -> list[int]:
    """Numbers of the lines with a non-ASCII character, in order: one byte per line (is it
    ASCII?) built in C, then its zeros found with ``bytes.find`` (such lines are few; a list built
    by a comprehension or ``compress`` over every line costs about twice as much)."""
    flags = bytes(map(str.isascii, lines))
    out: list[int] = []
    find = flags.find
    i = find(0)
    while i != -1:
        out.append(i)
        i = find(0, i + 1)
    return out


def holding_in(view: TextView, subset: list[int], keys: list[tuple[tuple[str, bool], bytes, bool]]) -> dict:
    """For each ASCII literal of ``keys`` ((key, needle bytes, caseless?) as ``LiteralScanner``
    holds them), the lines of ``subset`` (ascending line numbers of ``view``) that hold it, as
    ``lines_with`` finds them: the lines' Latin-1 bytes joined once and searched with ``find``
    (lowered for the case-insensitive literals; a '?' that stands for a replaced character does
    not count)."""
    if not subset:
        return {key: [] for key, _, _ in keys}
    data, starts, _ = bytes_view(view)
    lines = view.lines
    sub = [data[starts[i]:starts[i] + len(lines[i])] for i in subset]
    joined = b"\n".join(sub)
    jstarts = line_starts(sub)
    low = None
    out = {}
    for key, needle, ci in keys:
        if ci and low is None:
            low = joined.lower()
        hay = low if ci else joined
        got = [subset[k] for k in lines_holding(hay, jstarts, needle)] if needle in hay else []
        if got and not ci and b"?" in needle:
            got = [i for i in got if key[0] in lines[i]]
        out[key] = got
    return out


def lines_holding(hay, starts: list[int], needle) -> list[int]:
    """Indexes of the lines (of a text joined with '\\n', line offsets ``starts``; str or bytes)
    that contain ``needle``, once each, in order."""
    out: list[int] = []
    find = hay.find
    nstarts = len(starts)
    pos = find(needle)
    while pos != -1:
        ln = bisect_right(starts, pos) - 1
        out.append(ln)
        if ln + 1 >= nstarts:
            break
        pos = find(needle, starts[ln + 1])
    return out


def _in_order(out: list[list[int]]) -> None:
    """Sort, in place, the line lists a scan filled out of order (matches may come so), without
    duplicates; only the lists with two lines or more are looked at."""
    for i in compress(range(len(out)), map((1).__lt__, map(len, out))):
        lines = out[i]
        if not all(map(int.__lt__, lines, lines[1:])):
            out[i] = sorted(set(lines))


GATE_SHARE = 0.25  # a gate on more of the lines than this is not used (its rule searches the whole text)


def bytes_view(view: TextView) -> tuple[bytes, list[int], list[int]]:
    """(the text as bytes, the offset of each line in them, numbers of the lines with a non-ASCII
    character), computed once per view. One byte per character: the text encoded to Latin-1, every
    character outside it replaced by '?', so the offsets are the text's own (``view.starts``).
    ASCII lines are the same bytes as in UTF-8; on the non-ASCII lines a multi-literal engine
    promises nothing by itself (an approximation or gate takes them all; a non-ASCII literal is
    looked up there with ``str.find``; a literal's '?' is checked there; see ``LiteralScanner``)."""
    got = view._bytes
    if got is not None:
        return got
    text = view.text
    if text.isascii():
        got = (text.encode("ascii"), view.starts, [])
    else:
        got = _encode_wide(text, view.lines, view.starts)
    view._bytes = got
    return got


def _encode_wide(text: str, lines: list[str], starts: list[int]) -> tuple[bytes, list[int], list[int]]:
    """``bytes_view`` of a text with a non-ASCII character, encoded a run of lines (about
    ``CHUNK`` characters) at a time, each run joined from its lines: a run without such a
    character is an ASCII string, copied as it is, and only the runs with one are encoded
    character by character and have their lines looked at. A log with a few such characters (a
    '✓', a '’') is one wide string, which Latin-1 encodes a character at a time throughout (twice
    as long), and cutting a run out of it narrows it a character at a time (the lines are narrow
    already)."""
    parts = []
    wide: list[int] = []
    nstarts = len(starts)
    first = 0
    while first < nstarts:
        k = bisect_right(starts, starts[first] + CHUNK)
        run = "\n".join(lines[first:k])
        if run.isascii():
            parts.append(run.encode("ascii"))
        else:
            wide += map(first.__add__, non_ascii_lines(lines[first:k]))
            parts.append(run.encode("latin-1", "replace"))
        if k < nstarts:
            parts.append(b"\n")
        first = k
    return b"".join(parts), starts, wide


RECHECK_SCAN = 4096  # a dense line longer than this is re-checked by one hyperscan pass (_recheck_dense)
CHUNK = 1 << 16  # bytes per hyperscan call: a restart after a dense line re-reads at most this much



def scan_lines(db, data: bytes, starts: list[int], out: list[list[int]], terminated, gates: range = range(0),
               most: float = 0, rest=None) -> tuple[list[int], bool]:
    """Scan ``data`` with a hyperscan database in line-aligned chunks of about ``CHUNK`` bytes,
    recording in ``out``, per pattern id, the lines it matches (matches may come out of order; a
    line is recorded once per run of matches on it). Returns the lines to re-check exactly.

    A line with more than ``LINE_CAP`` matches stops the chunk (a dense line); the scan resumes at
    the next line, and every line of the chunk up to the dense one is returned for an exact
    re-check (matches are not assumed to arrive in order; dense lines are rare; chunks keep
    restarts cheap). Returns (those lines, whether the ``gates`` were scanned to the end): once
    one of the patterns ``gates`` is on more than ``most`` lines (checked after each chunk), the
    scan goes on with the database ``rest``, which lacks them."""
    last = [-1] * len(out)  # line last recorded, per pattern
    nstarts = len(starts)
    big = 1 << 62
    br = bisect_right
    # the handler's state in closure cells (cheaper to read than list items; it runs once per
    # match): the current scan's offset, the first and last offset of the current line, its
    # number and the matches on it
    base = 0
    lo, hi, ln, count = big, -1, -1, 0

    def on_match(i: int, _a: int, b: int, _flags: int, _ctx) -> bool | None:
        nonlocal lo, hi, ln, count
        e = b + base - 1
        if lo <= e <= hi:
            count += 1
            if count > LINE_CAP:
                return True  # a dense line: stop, resume at the next line
        else:
            ln = br(starts, e) - 1
            lo = starts[ln]
            hi = starts[ln + 1] - 1 if ln + 1 < nstarts else big
            count = 1
        if last[i] != ln:
            out[i].append(ln)
            last[i] = ln
        return None

    recheck: list[int] = []
    kept = True
    n = len(data)
    pos = 0
    whole = memoryview(data)  # chunks without copies
    while pos < n:
        # the chunk ends at a line start at or after pos + CHUNK (whole lines only)
        k = br(starts, pos + CHUNK)
        end = starts[k] if k < nstarts else n
        while True:
            base, lo, hi, ln, count = pos, big, -1, -1, 0
            try:
                # the last line is scanned with a line break after it, as every other line is
                # (see approx.LINE_END): at the end of the data, hyperscan misses some matches
                db.scan(whole[pos:end] if end < n or data.endswith(b"\n") else bytes(whole[pos:end]) + b"\n",
                        match_event_handler=on_match)
                pos = end
                break
            except terminated:  # a dense line: skip its rest
                pass
            recheck.extend(range(br(starts, pos) - 1, ln + 1))
            if ln + 1 >= nstarts:
                pos = n
                break
            pos = starts[ln + 1]
            if pos >= end:
                break
        if gates and max(len(out[i]) for i in gates) > most:
            db = rest
            gates = range(0)
            kept = False
    return recheck, kept


def _hyperscan_db(bytes_keys: list[tuple[tuple[str, bool], bytes, bool]], approx: list[str] = (),
                  gates: list[tuple[str, bool]] = (), single: bool = False):
    """One database of the literals (ids 0..n-1), the approximate patterns (ids n..) and the
    gates (after them), cached on disk by their hash: compiling the approximations takes about a
    second."""
    import hyperscan

    exprs = [_hs_escape(needle) for _, needle, _ in bytes_keys]
    flags = [hyperscan.HS_FLAG_CASELESS if caseless else 0 for _, _, caseless in bytes_keys]
    if single:  # each literal reported once per scan (a dense line's literals, _recheck_dense)
        flags = [f | hyperscan.HS_FLAG_SINGLEMATCH for f in flags]
    exprs += [a.encode("ascii") for a in approx]
    # hyperscan's own prefilter mode may widen an approximation further (it reports every end
    # offset the expression has, and maybe more): a third of the scan time on the real CI logs
    flags += [hyperscan.HS_FLAG_PREFILTER] * len(approx)
    exprs += [g.encode("ascii") for g, _ in gates]  # (ids after the approximations)
    flags += [hyperscan.HS_FLAG_CASELESS if ci else 0 for _, ci in gates]
    h = hashlib.sha256()
    h.update(str(getattr(hyperscan, "__version__", "?")).encode())
    for e, f in zip(exprs, flags):
        h.update(e + b"\x00" + str(f).encode() + b"\x01")
    path = _cache_dir() / f"literals-{h.hexdigest()[:32]}.hsdb"
    try:
        blob = path.read_bytes()
        db = hyperscan.loadb(blob, hyperscan.HS_MODE_BLOCK)
        db.scratch = hyperscan.Scratch(db)
        return db
    except Exception:  # absent, truncated or from another version: compile again
        pass
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs), flags=flags)
    from ..atomic import write_bytes_atomic

    try:
        write_bytes_atomic(path, hyperscan.dumpb(db), durable=True)
    except OSError:  # a read-only home: the database lives in memory only
        pass
    return db


def approx_key(expr: str) -> tuple[str, str]:
    """The key of an approximate pattern's candidate lines in a view's literal cache."""
    return ("approx", expr)


def wide_key(key: tuple[str, bool]) -> tuple[str, tuple[str, bool]]:
    """The key, in a view's literal cache, of the non-ASCII lines that hold a literal the engine
    left out of its scan (``LiteralScanner.skipped``)."""
    return ("wide", key)


def gate_key(pattern: str, ignore_case: bool) -> tuple[str, str, bool]:
    """The key of a gate's candidate lines in a view's literal cache."""
    return ("gate", pattern, ignore_case)


# constructs hyperscan reads unlike ``regex`` even on ASCII text (``\s`` takes \x1c-\x1f in
# ``regex``), anchors (whole text against lines) and everything hyperscan lacks (lookarounds,
# inline flags, backreferences, Unicode properties): a gate with one of them is not scanned
_HS_UNSAFE = lazy_re(r"\\[sApPNXGZzQEgk0-9]|[\^$]|\(\?(?!:)")


def gate_fits_hyperscan(pattern: str, ignore_case: bool) -> bool:
    """True if hyperscan finds ``pattern`` on a printable ASCII line exactly where ``regex`` does."""
    return pattern.isascii() and not _HS_UNSAFE.search(re.sub(r"(?<!\\)\[\^", "[", pattern)) and "\\" not in pattern[-1:]


def _hs_compiles(expr: str) -> bool:
    import hyperscan

    try:
        hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK).compile(expressions=[expr.encode("ascii")], ids=[0],
                                                                elements=1, flags=[hyperscan.HS_FLAG_PREFILTER])
        return True
    except hyperscan.error:
        return False


def _hs_escape(needle: bytes) -> bytes:
    """A literal as a Hyperscan expression: every byte outside [A-Za-z0-9] as \\xHH."""
    out = bytearray()
    for b in needle:
        if 48 <= b <= 57 or 65 <= b <= 90 or 97 <= b <= 122:
            out.append(b)
        else:
            out += b"\\x%02x" % b
    return bytes(out)


def _ahocorasick(bytes_keys: list[tuple[tuple[str, bool], bytes, bool]]):
    from ahocorasick_rs import BytesAhoCorasick

    sens = [(k, needle) for k, (_, needle, caseless) in enumerate(bytes_keys) if not caseless]
    caseless = [(k, needle.lower()) for k, (_, needle, cl) in enumerate(bytes_keys) if cl]
    a = BytesAhoCorasick([n for _, n in sens]) if sens else None
    b = BytesAhoCorasick([n for _, n in caseless]) if caseless else None
    return a, [k for k, _ in sens], b, [k for k, _ in caseless]
