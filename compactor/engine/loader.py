"""Find, parse and validate rule files. Every bad file is reported at once, with file and field."""

from __future__ import annotations

import contextlib
import os
import tomllib
from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from ..errors import RuleError
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
    """Validated rules, grouped by stage, in a total order (stage, priority desc, id)."""

    def __init__(self, rules: list[Rule]):
        self.rules = sorted(rules, key=lambda r: (r.stage, -r.priority, r.id))
        self.by_id = {r.id: r for r in self.rules}

    def stage(self, stage: str) -> list[Rule]:
        return [r for r in self.rules if r.stage == stage and r.enabled]

    def __len__(self) -> int:
        return len(self.rules)

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
        key = _catalog_key(files)
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
# One JSON file per set of rule files: the validated rules, the key (a hash of compactor's
# version, the schema and every rule file's path and content) and a digest of the payload. It is
# a cache: safe to delete, rebuilt when anything differs, and never trusted blindly: the key and
# the digest are checked, and every rule is validated again (types, ranges, the kind's section),
# only the patterns are not recompiled (they were when the catalog was written).

CATALOG_VERSION = 1


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
    h.update(repr(sorted(Rule.model_fields)).encode())
    for root, paths in files:
        h.update(f"root {root.resolve()}\0".encode("utf-8", "surrogateescape"))
        for path in paths:
            h.update(f"{path.relative_to(root)}\0".encode("utf-8", "surrogateescape"))
            try:
                h.update(hashlib.sha256(path.read_bytes()).digest())
            except OSError:
                h.update(b"unreadable")
    return h.hexdigest()[:32]


def _read_catalog(key: str) -> RuleSet | None:
    import hashlib
    import json

    folder = catalog_dir()
    if folder is None:
        return None
    try:
        data = json.loads((folder / f"{key}.json").read_text(encoding="utf-8"))
        payload = data["rules"]
        if data.get("key") != key or not isinstance(payload, list):
            return None
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
        if data.get("digest") != digest:
            return None
        rules = [Rule.model_validate(r, context={"patterns_checked": True}) for r in payload]
    except (OSError, ValueError, KeyError, TypeError, ValidationError):
        return None  # missing, partial, corrupt or from another schema: rebuilt from the files
    return RuleSet(rules)


def _write_catalog(key: str, ruleset: RuleSet) -> None:
    import hashlib
    import json
    import tempfile

    folder = catalog_dir()
    if folder is None:
        return
    payload = [r.model_dump(mode="json", by_alias=True, exclude_none=True) for r in ruleset]
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".catalog-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"key": key, "digest": digest, "rules": payload}, fh, ensure_ascii=False)
            os.replace(tmp, folder / f"{key}.json")
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError:
        pass  # a read-only or full cache folder only costs speed
