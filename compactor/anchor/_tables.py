"""The fold's item tables with the indexes its per-output steps read.

Every tool output used to walk every key-evidence item and every failed attempt held so far (to
find the task's reported error, the live failures a passing check resolves, the error lines a
failed attempt already carries): quadratic over a long run of small outputs, which is most of a
200 MB trajectory's time. These tables are plain dicts (same order, same values, same
``freeze``) that keep, on every assignment and deletion, the few subsets those steps need, so
each output touches only the items it changes.

Only item assignment, ``del`` and ``pop`` are supported as mutations (the fold uses nothing
else); the other mutating dict methods raise rather than let an index go stale.
"""

from __future__ import annotations

from typing import Any, Iterable

__all__ = ["EvidenceTable", "FailedTable", "TOOL_ERROR", "dedupe_line", "evidence_line", "missing_modules"]

# families of evidence that record no failure: a passing check does not resolve them
NOT_FAILURE = ("verification", "location", "reproduction")
# the rule of the editor's or harness's own error message (a passing check leaves it as it is)
TOOL_ERROR = "anchor.tool-error"
_RULE_INDEXED = ("anchor.reported", "anchor.tool-error")


_NO_MODULE = "No module named '"


def missing_modules(text: str) -> set[str]:
    """Every ``x`` such that ``"No module named 'x'"`` occurs in ``text`` for an ``x`` without a
    quote (each occurrence of the phrase, overlapping ones too, up to the next quote)."""
    out: set[str] = set()
    i = text.find(_NO_MODULE)
    while i >= 0:
        start = i + len(_NO_MODULE)
        end = text.find("'", start)
        if end < 0:
            break
        out.add(text[start:end])
        i = text.find(_NO_MODULE, i + 1)
    return out


def _index_modules(index: dict[str, dict[str, None]], key: str, text: str) -> None:
    if _NO_MODULE in text:
        for m in missing_modules(text):
            index.setdefault(m, {})[key] = None


def _unindex_modules(index: dict[str, dict[str, None]], key: str, text: str) -> None:
    if _NO_MODULE in text:
        for m in missing_modules(text):
            ids = index[m]
            ids.pop(key, None)
            if not ids:
                del index[m]


def evidence_line(text: str) -> str:
    """The text an evidence item is compared by with the errors failed attempts carry."""
    t = text.strip()
    return t[2:] if t.startswith("- ") else t


def dedupe_line(e: Any) -> str | None:
    """The line a failed attempt's error may make redundant (None: the item is not one line, or
    it is a passing check)."""
    if e.family == "verification":
        return None
    t = evidence_line(e.text)
    return None if "\n" in t else t


class _Table(dict):
    """A dict whose assignments and deletions go through :meth:`_index` / :meth:`_unindex`."""

    __slots__ = ()

    def __init__(self, items: Iterable[Any] = ()) -> None:
        super().__init__()
        for x in items:
            self[x.id] = x

    def _index(self, key: str, value: Any) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _unindex(self, key: str, value: Any) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def __setitem__(self, key: str, value: Any) -> None:
        old = dict.get(self, key)
        if old is not None:
            self._unindex(key, old)
        dict.__setitem__(self, key, value)  # an existing key keeps its place
        self._index(key, value)

    def __delitem__(self, key: str) -> None:
        self._unindex(key, dict.__getitem__(self, key))
        dict.__delitem__(self, key)

    _MISSING = object()

    def pop(self, key: str, default: Any = _MISSING) -> Any:
        if key in self:
            value = dict.__getitem__(self, key)
            del self[key]
            return value
        if default is _Table._MISSING:
            raise KeyError(key)
        return default

    def _unsupported(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{type(self).__name__} supports item assignment, del and pop only")

    update = setdefault = popitem = clear = __ior__ = _unsupported  # type: ignore[assignment]

    def __reduce__(self):
        # rebuilt from the items (pickle and copy would otherwise set the items before the indexes
        # exist, or on top of copied ones)
        return type(self), (list(self.values()),)


class EvidenceTable(_Table):
    """``key_evidence`` by id. Indexes:

    - :attr:`live`: ids of live items; :attr:`resolvable`: the live ones a passing check resolves
      (a failure's evidence, not the tool's own error message);
    - :attr:`by_rule`: ids of the items of ``anchor.reported`` and ``anchor.tool-error``;
    - :attr:`verified_steps`: step -> how many verification items come from it;
    - :attr:`live_by_module`: ``x`` -> ids of the live items that say "No module named 'x'";
    - :attr:`by_line`: :func:`evidence_line` -> ids of the one-line items that are not a
      verification (the only ones a failed attempt's error can make redundant), and
      :attr:`changed`: ids assigned since the
      last :meth:`take_changed` (what a dedupe of carried error lines has to look at again).
    """

    __slots__ = ("live", "resolvable", "by_rule", "verified_steps", "live_by_module", "by_line", "changed")

    def __init__(self, items: Iterable[Any] = ()) -> None:
        self.live: dict[str, None] = {}
        self.resolvable: dict[str, None] = {}
        self.by_rule: dict[str, dict[str, None]] = {r: {} for r in _RULE_INDEXED}
        self.verified_steps: dict[str, int] = {}
        self.live_by_module: dict[str, dict[str, None]] = {}
        self.by_line: dict[str, dict[str, None]] = {}
        self.changed: dict[str, None] = {}
        super().__init__(items)

    def _index(self, key: str, e: Any) -> None:
        if e.status == "live":
            self.live[key] = None
            if e.family not in NOT_FAILURE and e.rule_id != TOOL_ERROR:
                self.resolvable[key] = None
            _index_modules(self.live_by_module, key, e.text)
        ids = self.by_rule.get(e.rule_id)
        if ids is not None:
            ids[key] = None
        if e.family == "verification":
            self.verified_steps[e.source_step] = self.verified_steps.get(e.source_step, 0) + 1
        line = dedupe_line(e)
        if line is not None:
            self.by_line.setdefault(line, {})[key] = None
        self.changed[key] = None

    def _unindex(self, key: str, e: Any) -> None:
        self.changed.pop(key, None)  # a deleted item needs no second look; an assigned one is re-added
        if self.live.pop(key, 0) is None:
            _unindex_modules(self.live_by_module, key, e.text)
        self.resolvable.pop(key, None)
        ids = self.by_rule.get(e.rule_id)
        if ids is not None:
            ids.pop(key, None)
        if e.family == "verification":
            n = self.verified_steps[e.source_step] - 1
            if n:
                self.verified_steps[e.source_step] = n
            else:
                del self.verified_steps[e.source_step]
        line = dedupe_line(e)
        if line is not None:
            ids = self.by_line[line]
            ids.pop(key, None)
            if not ids:
                del self.by_line[line]

    def take_changed(self) -> list[str]:
        """The ids assigned since the previous call (some may have been deleted since)."""
        out = list(self.changed)
        self.changed.clear()
        return out


class FailedTable(_Table):
    """``failed_attempts`` by id. Indexes :attr:`carried`: every error text a failed attempt
    carries, whole or as one of its `` … `` parts, with how many attempts carry it;
    :attr:`new_carried`: the texts that became carried since the last :meth:`take_new_carried`;
    :attr:`failing_by_module`: ``x`` -> ids of the still failing attempts whose error says
    "No module named 'x'"."""

    __slots__ = ("carried", "new_carried", "failing_by_module")

    def __init__(self, items: Iterable[Any] = ()) -> None:
        self.carried: dict[str, int] = {}
        self.new_carried: dict[str, None] = {}
        self.failing_by_module: dict[str, dict[str, None]] = {}
        super().__init__(items)

    @staticmethod
    def _parts(f: Any) -> set[str]:
        if not f.error:
            return set()
        return {f.error, *f.error.split(" … ")}

    def _index(self, key: str, f: Any) -> None:
        if f.status == "failed":
            _index_modules(self.failing_by_module, key, f.error)
        carried = self.carried
        for p in self._parts(f):
            n = carried.get(p, 0)
            carried[p] = n + 1
            if not n:
                self.new_carried[p] = None

    def _unindex(self, key: str, f: Any) -> None:
        if f.status == "failed":
            _unindex_modules(self.failing_by_module, key, f.error)
        carried = self.carried
        for p in self._parts(f):
            n = carried[p] - 1
            if n:
                carried[p] = n
            else:
                del carried[p]

    def take_new_carried(self) -> list[str]:
        out = list(self.new_carried)
        self.new_carried.clear()
        return out
