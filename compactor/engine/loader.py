"""Find, parse and validate rule files. Every bad file is reported at once, with file and field."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import RuleError
from .records import Record, check_rule_data, to_record

if TYPE_CHECKING:
    from .schema import Rule

__all__ = ["RuleSet", "builtin_rules_dir", "load_rules"]


def builtin_rules_dir() -> Path:
    """The rules shipped with compactor: the top-level ``rules/`` of a source checkout, or the
    copy packaged as ``compactor/_rules`` in an installed wheel."""
    env = os.environ.get("COMPACTOR_BUILTIN_RULES")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent.parent
    packaged = here / "_rules"
    if packaged.is_dir():
        return packaged
    return here.parent / "rules"


class RuleSet:
    """Validated rules, grouped by stage, in a total order (stage, priority desc, id).

    A set read from the on-disk catalog holds the rules as checked plain data: the scanning
    engines work on :meth:`records`, and the typed :class:`~.schema.Rule` models (``rules``,
    ``by_id``, ``stage()``) are built from that data on first use, so a command that only scans
    never builds them."""

    def __init__(self, rules: list[Rule]):
        self._rules: list[Rule] | None = sorted(rules, key=lambda r: (r.stage, -r.priority, r.id))
        self._data: list[dict] | None = None
        self._by_id: dict[str, Rule] | None = None
        self._records: dict[str, list[Record]] = {}
        self.key: str | None = None  # the catalog key when read from or written to the catalog

    @classmethod
    def from_data(cls, data: list[dict], key: str) -> RuleSet:
        """From checked catalog data (see :func:`.records.check_rule_data`)."""
        rs = cls.__new__(cls)
        rs._rules = None
        rs._data = sorted(data, key=lambda d: (d["stage"], -d["priority"], d["id"]))
        rs._by_id = None
        rs._records = {}
        rs.key = key
        return rs

    @property
    def rules(self) -> list[Rule]:
        if self._rules is None:
            from pydantic import ValidationError

            from .schema import Rule

            # the catalog was validated when it was written and checked when read: the patterns
            # were compiled then, the rest is validated again here
            try:
                self._rules = [Rule.model_validate(d, context={"patterns_checked": True}) for d in self._data or ()]
            except ValidationError as exc:
                err = exc.errors()[0]
                raise RuleError(f"rule catalog {self.key}.catalog in {catalog_dir()}: field "
                                f"{_field_path(err['loc'])}: {err['msg']} (delete the file: it is rebuilt "
                                "from the rule files)") from None
        return self._rules

    @property
    def by_id(self) -> dict[str, Rule]:
        if self._by_id is None:
            self._by_id = {r.id: r for r in self.rules}
        return self._by_id

    def stage(self, stage: str) -> list[Rule]:
        return [r for r in self.rules if r.stage == stage and r.enabled]

    def records(self, stage: str) -> list[Record]:
        """The enabled rules of a stage as plain :class:`Record` s, in the set's order (what the
        scanning engines take: no typed models are built)."""
        out = self._records.get(stage)
        if out is None:
            if self._data is not None and self.key is not None:
                out = [to_record(d, ("catalog", self.key, d["id"])) for d in self._data
                       if d["stage"] == stage and d["enabled"]]
            else:
                out = [to_record(r.model_dump(mode="json"), (r.id, r.model_dump_json())) for r in self.stage(stage)]
            self._records[stage] = out
        return out

    def data(self) -> list[dict]:
        """Every rule as plain data (field names, every field), the catalog's form."""
        if self._data is None:
            self._data = [r.model_dump(mode="json") for r in self.rules]
        return self._data

    def __len__(self) -> int:
        return len(self._rules if self._rules is not None else self._data or ())

    def __iter__(self):
        return iter(self.rules)

    def fingerprint(self) -> str:
        import hashlib

        h = hashlib.sha256()
        for r in self.rules:
            h.update(r.model_dump_json().encode())
        return h.hexdigest()[:16]


def _field_path(loc: tuple) -> str:
    return ".".join(str(x) for x in loc) or "(file)"


def parse_rule_file(path: Path, problems: list[str]) -> Rule | None:
    import tomllib

    from pydantic import ValidationError

    from .schema import Rule

    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        problems.append(f"{path}: not UTF-8 (byte {exc.start})")
        return None
    except tomllib.TOMLDecodeError as exc:
        problems.append(f"{path}: invalid TOML: {exc}")
        return None
    stem = path.name[: -len(".toml")]
    if "id" in raw and raw["id"] != stem:
        problems.append(f"{path}: field id: {raw['id']!r} differs from the file name {stem!r} (the id is the file stem)")
        return None
    raw["id"] = stem
    raw["source"] = str(path)
    try:
        return Rule.model_validate(raw)
    except ValidationError as exc:
        for err in exc.errors():
            problems.append(f"{path}: field {_field_path(err['loc'])}: {err['msg']}")
        return None


def load_rules(dirs: list[str | os.PathLike[str]] | None = None, *, builtin: bool = True) -> RuleSet:
    """Load the built-in rules plus every ``*.toml`` under each extra directory (recursively).

    A user rule with the same id as a built-in one replaces it (so a rule can be tuned or
    disabled with ``enabled = false``). Raises RuleError listing every problem found.
    """
    key = tuple(str(Path(d).resolve()) for d in (dirs or []))
    return _load_cached(key, builtin)


@lru_cache(maxsize=32)
def _load_cached(dirs: tuple[str, ...], builtin: bool) -> RuleSet:
    return load_uncached(dirs, builtin, catalog=True)


def load_uncached(dirs: tuple[str, ...], builtin: bool, *, catalog: bool = False) -> RuleSet:
    """Load without the process cache (``compactor rules test`` sees edits at once).

    With ``catalog`` the validated rules are also kept in an on-disk catalog keyed by the hash
    of every rule file (see :func:`catalog_dir`): a later process with the same files reads one
    JSON file instead of parsing TOML and compiling every pattern to validate it."""
    roots: list[Path] = []
    if builtin:
        roots.append(builtin_rules_dir())
    roots.extend(Path(d) for d in dirs)
    problems: list[str] = []
    files: list[tuple[Path, list[Path]]] = []
    for root in roots:
        if not root.is_dir():
            problems.append(f"{root}: rule directory not found")
            continue
        files.append((root, sorted(root.rglob("*.toml"))))
    key = None
    if catalog and not problems:
        key = _known_catalog_key(files)
        cached = _read_catalog(key)
        if cached is not None:
            return cached
    rules: dict[str, Rule] = {}
    for root, paths in files:
        seen_here: dict[str, Path] = {}
        for path in paths:
            rule = parse_rule_file(path, problems)
            if rule is None:
                continue
            if rule.id in seen_here:
                problems.append(f"{path}: field id: duplicate rule id {rule.id!r} (also in {seen_here[rule.id]})")
                continue
            seen_here[rule.id] = path
            rules[rule.id] = rule
    if not problems:
        _link_vocabulary(rules, problems)
    if problems:
        raise RuleError(
            f"{len(problems)} problem(s) in rule files: " + "; ".join(problems[:5])
            + ("; ..." if len(problems) > 5 else ""),
            problems=problems,
        )
    ruleset = RuleSet(list(rules.values()))
    if key is not None:
        ruleset.key = key
        _write_catalog(key, ruleset)
    return ruleset


def _link_vocabulary(rules: dict[str, Rule], problems: list[str]) -> None:
    """One vocabulary for the protect rules and the anchor's cues: a cue that names protect rules
    in ``vocabulary`` gets their words as prefilter literals (in place, after its own). Checked:
    each named rule exists, is a protect literal rule of the cue's family, and no word is listed
    in both places."""
    for rid, rule in list(rules.items()):
        if not rule.vocabulary:
            continue
        own = [w.lower() for w in rule.prefilter]
        words: list[str] = []
        for vid in rule.vocabulary:
            v = rules.get(vid)
            where = f"{rule.source}: field vocabulary"
            if v is None:
                problems.append(f"{where}: no rule {vid!r}")
                continue
            if v.stage != "protect" or v.kind != "literal" or v.literal is None:
                problems.append(f"{where}: {vid!r} is not a protect literal rule")
                continue
            if v.family != rule.family:
                problems.append(f"{where}: {vid!r} is of family {v.family!r}, the cue of {rule.family!r}")
                continue
            for w in v.literal.words:
                lw = w.lower()
                if lw in own:
                    problems.append(f"{rule.source}: field prefilter: {w!r} is already a word of {vid!r} (list it once)")
                elif lw not in words:
                    words.append(lw)
        rules[rid] = rule.model_copy(update={"prefilter": [*rule.prefilter, *words]})


# ---------------------------------------------------------------------------- the on-disk catalog
# One file per set of rule files: the validated rules as plain data (every field, defaults
# included), the key (a hash of compactor's version, the schema's source and every rule file's
# path and content) and a digest of the payload. It is a cache: safe to delete, rebuilt when
# anything differs, and never trusted blindly: the key and the digest are checked, and every
# rule's data is checked again without the typed models (types, ranges, the kind's section:
# :func:`.records.check_rule_data`); the patterns are not recompiled (they were when the catalog
# was written). The typed models are built from the same data only when something asks for them.

CATALOG_VERSION = 4


def catalog_dir() -> Path | None:
    """``$COMPACTOR_CACHE`` (empty: no catalog), else ``$XDG_CACHE_HOME/compactor`` or
    ``~/.cache/compactor``; the catalogs live in its ``rules/`` folder."""
    env = os.environ.get("COMPACTOR_CACHE")
    if env is not None:
        return Path(env) / "rules" if env else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "compactor" / "rules"


def _catalog_key(files: list[tuple[Path, list[Path]]]) -> str:
    import hashlib

    from ..version import __version__

    h = hashlib.sha256()
    h.update(f"compactor {__version__} catalog {CATALOG_VERSION}\0".encode())
    here = Path(__file__).resolve().parent
    for module in ("schema.py", "records.py"):  # the schema the data was validated against
        try:
            h.update(hashlib.sha256((here / module).read_bytes()).digest())
        except OSError:
            h.update(b"no schema source")
    for root, paths in files:
        h.update(f"root {root.resolve()}\0".encode("utf-8", "surrogateescape"))
        for path in paths:
            h.update(f"{path.relative_to(root)}\0".encode("utf-8", "surrogateescape"))
            try:
                h.update(hashlib.sha256(path.read_bytes()).digest())
            except OSError:
                h.update(b"unreadable")
    return h.hexdigest()[:32]


def _stat_signature(files: list[tuple[Path, list[Path]]]) -> str | None:
    """A hash of what ``stat`` says of every rule file and of the schema's source (path, size,
    modification and change times in nanoseconds, inode): any write to a file changes its change
    time, which no program can set back. None when a file cannot be statted."""
    import hashlib

    h = hashlib.sha256(f"compactor catalog stat {CATALOG_VERSION}\0".encode())
    here = Path(__file__).resolve().parent
    try:
        for path in [here / "schema.py", here / "records.py"] + [p for _, paths in files for p in paths]:
            st = os.stat(path)
            h.update(f"{path}\0{st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino} {st.st_dev}\0"
                     .encode("utf-8", "surrogateescape"))
    except OSError:
        return None
    return h.hexdigest()[:32]


def _known_catalog_key(files: list[tuple[Path, list[Path]]]) -> str:
    """:func:`_catalog_key`, without reading and hashing every rule file when their ``stat`` is as
    it was when the key was last computed: the key is remembered per stat signature
    (``<catalog folder>/keys/<signature>``; a missing or odd entry is recomputed and rewritten)."""
    folder = catalog_dir()
    sig = _stat_signature(files) if folder is not None else None
    memo = folder / "keys" / sig if sig is not None else None
    if memo is not None:
        try:
            known = memo.read_text(encoding="ascii")
            if len(known) == 32 and all(c in "0123456789abcdef" for c in known):
                return known
        except (OSError, ValueError):
            pass
    key = _catalog_key(files)
    if memo is not None:
        from ..atomic import write_text_atomic

        try:
            write_text_atomic(memo, key, dir_mode=0o700)
        except OSError:
            pass  # an unwritable folder only costs speed
    return key


# The file: one header line ``compactor-rule-catalog VERSION KEY DIGEST``, then the rules as
# plain data in ``marshal`` form (lists, dicts, strings, numbers: the fastest form Python reads
# back, with nothing to import); the digest is the SHA-256 of those bytes exactly as written. The
# folder is private to the user (0700), like the literal engine's compiled databases beside it.

_MAGIC = b"compactor-rule-catalog"


def _read_catalog(key: str) -> RuleSet | None:
    import hashlib
    import marshal

    folder = catalog_dir()
    if folder is None:
        return None
    try:
        header, _, body = (folder / f"{key}.catalog").read_bytes().partition(b"\n")
        if header.split() != [_MAGIC, str(CATALOG_VERSION).encode(), key.encode(),
                              hashlib.sha256(body).hexdigest().encode()]:
            return None  # another version or key, or the bytes changed since they were written
        payload = marshal.loads(body)
        if type(payload) is not list or any(check_rule_data(r) is not None for r in payload):
            return None
        if len({r["id"] for r in payload}) != len(payload):
            return None
    except (OSError, ValueError, EOFError, KeyError, TypeError, AttributeError):
        return None  # missing, partial, corrupt or from another schema: rebuilt from the files
    return RuleSet.from_data(payload, key)


def _write_catalog(key: str, ruleset: RuleSet) -> None:
    import hashlib
    import marshal

    folder = catalog_dir()
    if folder is None:
        return
    body = marshal.dumps(ruleset.data())
    header = b" ".join([_MAGIC, str(CATALOG_VERSION).encode(), key.encode(), hashlib.sha256(body).hexdigest().encode()])
    from ..atomic import write_bytes_atomic

    try:
        write_bytes_atomic(folder / f"{key}.catalog", header + b"\n" + body, dir_mode=0o700)
    except OSError:
        pass  # a read-only or full cache folder only costs speed
