"""The facts of a conversation read one segment at a time, held in full only while the anchor's
size bound (:func:`~compactor.anchor.bound.bound_anchor`) could still show them.

A long trajectory states a great many facts (about 1,200 per MB of tool output), and the bound
shows a few dozen. What the bound needs of the others is small: how many there are, the first and
last step that stated one (the objective line), and each one's id and step (the overflow note).
The ledger keeps those for every fact (12 bytes and a set entry each) and the fact itself only
while the bound could pick it.

Why a fact can be let go, exactly. The bound fills its items in priority order, the facts newest
first, and takes an item when it still fits (``used + cost <= max_tokens``), so a short old fact
can fit after longer new ones were skipped. But if fact *f* were taken, every newer fact *g* with
``cost(g) <= cost(f)`` would have found at least ``cost(f)`` left, and been taken too. So when
those newer facts cost more than ``max_tokens`` together, *f* is never taken, whatever the other
sections hold: the ledger lets it go. The sums are kept per cost in a Fenwick tree, each fact
remembers the sum at the time it came, so the test is a subtraction.

The sum uses each fact's cost minus two (its row counted alone, minus one: a lower bound of what
the row adds to the count of the whole rendering, where the newline after it may join its last
token). So when any fact was let go, the facts still held render to more than ``max_tokens`` on
their own: the bound never finds the whole anchor fitting and needing a fact that is gone
(:meth:`FactLedger.check_overflowing` raises :class:`LedgerOverrun` if it ever did, and the fold
hands the file to the in-memory pipeline). The newest fact is never let go.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Iterator

from ..models import Fact
from .render import fact_line

__all__ = ["FactLedger", "LedgerOverrun"]


class LedgerOverrun(RuntimeError):
    """The anchor fits its bound without facts the ledger let go (never expected: see the
    module's docstring). A fold that meets it has written nothing yet: it hands the file to the
    in-memory pipeline, which holds every fact."""

_ID = re.compile(r"fa-[0-9a-f]{16}")


class FactLedger:
    """A fold's facts (``fid in ledger``, ``ledger[fid] = fact``, ``values()`` as a dict of them),
    for an anchor bounded to ``max_tokens`` of its rendering in ``lang``, costed with ``count``
    (the bound's own counter)."""

    def __init__(self, max_tokens: int, count: Callable[[str], int], lang: str = "en") -> None:
        self.max_tokens = max_tokens
        self.count = count
        self.lang = lang
        self._ids = array("Q")  # every fact's id (its 16 hex digits), in the order they came
        self._steps = array("I")  # every fact's step, as an index into _step_names
        self._step_names: list[str] = []
        self._step_index: dict[str, int] = {}
        self._odd: dict[int, str] = {}  # position -> id, for an id not of the usual form
        self._seen: set = set()
        self._held: dict[str, tuple[Fact, int, int]] = {}  # id -> (fact, cost, the tree's sum when it came)
        self._size = max_tokens + 3  # costs above this are never summed (and their facts never let go)
        self._tree = [0] * (self._size + 1)
        self.first_step = ""
        self.last_step = ""
        self.dropped = 0
        self._next_sweep = 4096

    # ------------------------------------------------------------------ the dict a fold writes
    def _key(self, fid: str):
        return int(fid[3:], 16) if _ID.fullmatch(fid) else fid

    def __contains__(self, fid: str) -> bool:
        return self._key(fid) in self._seen

    def __len__(self) -> int:
        return len(self._ids)

    def __setitem__(self, fid: str, fact: Fact) -> None:
        key = self._key(fid)
        if key in self._seen:
            raise ValueError(f"fact {fid} given twice")  # (the fold tests ``in`` first)
        self._seen.add(key)
        pos = len(self._ids)
        if isinstance(key, int):
            self._ids.append(key)
        else:
            self._ids.append(0)
            self._odd[pos] = fid
        step = fact.source_step
        k = self._step_index.get(step)
        if k is None:
            k = self._step_index[step] = len(self._step_names)
            self._step_names.append(step)
        self._steps.append(k)
        if step:
            self.first_step = self.first_step or step
            self.last_step = step
        cost = self.count(fact_line(fact, self.lang)) + 1  # what the bound charges for the row
        base = 0
        if cost <= self._size:
            base = self._sum(cost)
            self._add(cost, cost - 2)
        self._held[fid] = (fact, cost, base)
        if len(self._held) >= self._next_sweep:
            self._sweep()
            self._next_sweep = max(4096, 2 * len(self._held))

    def values(self) -> list[Fact]:
        """The facts held (in the order they came)."""
        return [v[0] for v in self._held.values()]

    # ------------------------------------------------------------------ the tree
    def _add(self, i: int, w: int) -> None:
        t, n = self._tree, self._size
        while i <= n:
            t[i] += w
            i += i & -i

    def _sum(self, i: int) -> int:
        t = self._tree
        s = 0
        while i > 0:
            s += t[i]
            i -= i & -i
        return s

    def _sweep(self) -> None:
        """Let go of the facts the bound can no longer take (see the module's docstring)."""
        limit = self.max_tokens
        held = self._held
        newest = next(reversed(held))
        gone = [fid for fid, (_, cost, base) in held.items()
                if cost <= self._size and fid != newest and self._sum(cost) - base - (cost - 2) > limit]
        for fid in gone:
            del held[fid]
        self.dropped += len(gone)

    def settle(self) -> None:
        """A last sweep, before the anchor is frozen."""
        if self._held:
            self._sweep()

    # ------------------------------------------------------------------ what the bound asks
    def ids_newest_first(self) -> Iterator[tuple[str, str]]:
        """(id, step) of every fact, newest first."""
        names, odd = self._step_names, self._odd
        ids, steps = self._ids, self._steps
        for pos in range(len(ids) - 1, -1, -1):
            fid = odd.get(pos) if odd else None
            yield (fid if fid is not None else f"fa-{ids[pos]:016x}"), names[steps[pos]]

    def check_overflowing(self, tokens: int) -> None:
        """The facts held render to ``tokens`` in the whole anchor: more than the bound, whenever
        a fact was let go (the module's docstring says why; this is the guard that it holds)."""
        if self.dropped and tokens <= self.max_tokens:
            raise LedgerOverrun(f"the anchor fits its bound ({tokens} <= {self.max_tokens} tokens) "
                               f"without {self.dropped} facts let go as never shown")
