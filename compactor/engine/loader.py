"""Find, parse and validate rule files. Every bad file is reported at once, with file and field."""

from __future__ import annotations

import os
import tomllib
from functools import lru_cache
from pathlib import Path

from pydantic import ValidationError

from ..errors import RuleError
from .schema import Rule, remember_valid_patterns

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
    return load_uncached(dirs, builtin)


def load_uncached(dirs: tuple[str, ...], builtin: bool) -> RuleSet:
    """Load without the process cache (``compactor rules test`` sees edits at once)."""
    roots: list[Path] = []
    if builtin:
        roots.append(builtin_rules_dir())
    roots.extend(Path(d) for d in dirs)
    problems: list[str] = []
    rules: dict[str, Rule] = {}
    for root in roots:
        if not root.is_dir():
            problems.append(f"{root}: rule directory not found")
            continue
        seen_here: dict[str, Path] = {}
        for path in sorted(root.rglob("*.toml")):
            rule = parse_rule_file(path, problems)
            if rule is None:
                continue
            if rule.id in seen_here:
                problems.append(f"{path}: field id: duplicate rule id {rule.id!r} (also in {seen_here[rule.id]})")
                continue
            seen_here[rule.id] = path
            rules[rule.id] = rule
    if problems:
        raise RuleError(
            f"{len(problems)} problem(s) in rule files: " + "; ".join(problems[:5])
            + ("; ..." if len(problems) > 5 else ""),
            problems=problems,
        )
    remember_valid_patterns()
    return RuleSet(list(rules.values()))
