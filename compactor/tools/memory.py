"""Durable knowledge → a memory file (seed 001: "与其他机制的边界").

Compaction keeps *this* session going; memory keeps what is worth knowing in the *next* one.
:func:`extract_memory` takes from a trajectory only what outlives the session:

- decisions with their reasons (so they are not re-litigated);
- dead ends (excluded approaches and why they failed);
- user constraints;
- facts about the environment: versions, paths, tool facts from the anchor's facts;
- commands that worked (build / test / install / run commands whose result succeeded).

Not memory: next steps, the files touched, the current state, raw evidence (that is the anchor).

:func:`export_memory` merges them into a memory file without duplicates, idempotently:

- Markdown (``AGENTS.md`` / ``CLAUDE.md`` style): a ``## compactor memory`` section with one
  ``###`` subsection per kind; everything else in the file is left byte-for-byte alone, and
  within the section existing lines (also hand-written ones) are kept — new bullets are appended;
- JSON: a ``compactor_memory`` object of lists, other keys untouched.
"""

from __future__ import annotations

import json
import os
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import regex

from ..atomic import write_text_atomic
from ..errors import InputError
from ..models import Anchor, SegmentKind
from ..audit.common import shorten
from ..lazyre import lazy_regex

__all__ = ["KINDS", "MemoryEntries", "MemoryUpdate", "extract_memory", "export_memory", "merge_markdown", "merge_json"]

SECTION = "compactor memory"
KINDS = ("decisions", "dead_ends", "constraints", "environment", "commands")
_TITLES = {"decisions": "Decisions", "dead_ends": "Dead ends", "constraints": "User constraints",
           "environment": "Environment", "commands": "Commands that work"}
_TITLE_TO_KIND = {v.casefold(): k for k, v in _TITLES.items()}
_NOTE = "<!-- maintained by `compactor memory export`: new entries are merged in, nothing is removed; edit freely -->"

_SECTION_RE = lazy_regex(r"^##\s+compactor memory\s*$", regex.I)
_H12 = lazy_regex(r"^#{1,2}\s")
_H3 = lazy_regex(r"^###\s+(.+?)\s*$")
_BULLET = lazy_regex(r"^\s*[-*]\s+(.*)$")

_ENV_FACT = lazy_regex(
    r"""(?ix)
    \b(?:python|node(?:js)?|npm|pip|java|jdk|go|rust|cargo|gcc|clang|django|flask|react|numpy|pandas|pytest|
        postgres(?:ql)?|mysql|redis|docker|kubernetes|ubuntu|debian|alpine|macos|windows|version|installed|runtime|
        interpreter|toolchain|sdk|python3)\b[^.\n]{0,40}?\bv?\d+\.\d+
    | (?:^|\s)(?:/[\w.@+-]+){2,}/?(?=\s|$|[,.;:)])
    | \b(?:env(?:ironment)?\s+var(?:iable)?|PATH|PYTHONPATH|HOME|virtualenv|venv|conda)\b
    """
)
_WORKS = lazy_regex(
    r"""(?x)^(?:sudo\s+)?(?:
      python[\d.]*\s+(?:-m\s+)?\S+ | pytest\b | py\.test\b | tox\b | nox\b | make\b | cmake\b | ninja\b
    | npm\s+(?:run|test|ci|install|i)\b | yarn\b | pnpm\b | npx\b | node\s+\S+ | deno\b | bun\b
    | pip[\d.]*\s+install\b | uv\s+(?:run|pip|sync)\b | poetry\s+(?:run|install)\b | conda\s+install\b
    | cargo\s+(?:build|test|run|check|clippy)\b | go\s+(?:build|test|run|vet)\b | mvn\b | \./mvnw\b | gradle\b | \./gradlew\b
    | docker\s+(?:build|compose|run)\b | docker-compose\b | bundle\s+exec\b | rake\b | rspec\b | \./\S+
    | javac\b | gcc\b | g\+\+\b | clang\b | dotnet\s+(?:build|test|run)\b | ponyc\b
    )"""
)
_WS = lazy_regex(r"\s+")


def _key(text: str) -> str:
    t = unicodedata.normalize("NFKC", text).casefold().replace("`", "")
    t = t.split(" — ", 1)[0]
    return _WS.sub(" ", t).strip(" .;:-")


@dataclass
class MemoryEntries:
    decisions: list[str] = field(default_factory=list)
    dead_ends: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    environment: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)

    def items(self) -> list[tuple[str, list[str]]]:
        return [(k, getattr(self, k)) for k in KINDS]

    def count(self) -> int:
        return sum(len(v) for _, v in self.items())

    def add(self, kind: str, text: str) -> None:
        text = " ".join(text.split())
        if not text:
            return
        lst = getattr(self, kind)
        if _key(text) not in {_key(x) for x in lst}:
            lst.append(text)

    def to_json(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in self.items()}


@dataclass(frozen=True)
class MemoryUpdate:
    path: str
    format: str
    added: dict[str, int]
    changed: bool

    @property
    def total_added(self) -> int:
        return sum(self.added.values())


def _anchor_of(conversation: Any, objective: str | None):
    from ..anchor import build_anchor
    from ..formats import load_document

    doc = load_document(conversation)
    comp = _compactor()
    spans = []
    for s in doc.segments:
        spans.extend(comp.level1.detect(s.text, role=s.role.value, segment_id=s.id, step_id=s.step_id)[2].spans)
    return doc, build_anchor(doc.segments, spans, objective=objective)


_COMP = None


def _compactor():
    global _COMP
    if _COMP is None:
        from ..pipeline import Compactor

        _COMP = Compactor(level=0)
    return _COMP


def entries_from_anchor(anchor: Anchor, segments=()) -> MemoryEntries:
    m = MemoryEntries()
    for d in anchor.decisions_made:
        if d.status == "active":
            m.add("decisions", f"{shorten(d.decision, 300)}" + (f" — {shorten(d.reason, 200)}" if d.reason else ""))
    for x in anchor.dead_ends:
        if x.status == "excluded":
            m.add("dead_ends", f"{shorten(x.approach, 300)}" + (f" — {shorten(x.why, 200)}" if x.why else ""))
    for c in anchor.user_constraints:
        if c.status == "active":
            m.add("constraints", shorten(c.text, 400))
    for f in anchor.facts_learned:
        if _ENV_FACT.search(f.text):
            m.add("environment", shorten(f.text, 300))
    for s in segments:
        if s.kind != SegmentKind.tool_result or not s.command:
            continue
        ok = s.exit_code == 0 or (s.exit_code is None and s.is_error is False)
        cmd = s.command.strip()
        if not ok or "\n" in cmd or len(cmd) > 200:
            continue
        if _WORKS.match(cmd):
            m.add("commands", f"`{cmd}`" if "`" not in cmd else cmd)
    return m


def extract_memory(conversation: Any, *, objective: str | None = None) -> MemoryEntries:
    """The durable knowledge of a trajectory (anything :func:`compactor.load_document` accepts)."""
    doc, anchor = _anchor_of(conversation, objective)
    return entries_from_anchor(anchor, doc.segments)


# ----------------------------------------------------------------------------- Markdown


def merge_markdown(existing: str, entries: MemoryEntries) -> tuple[str, dict[str, int]]:
    """The file text with ``entries`` merged into its ``## compactor memory`` section."""
    nl = "\r\n" if "\r\n" in existing else "\n"
    lines = existing.split(nl) if existing else []
    trailing = bool(lines) and lines[-1] == ""
    if trailing:
        lines = lines[:-1]
    start = next((i for i, ln in enumerate(lines) if _SECTION_RE.match(ln)), None)
    added = {k: 0 for k in KINDS}
    if start is None:
        body: list[str] = []
        for kind, items in entries.items():
            if items:
                body.extend(["", f"### {_TITLES[kind]}"] + [f"- {x}" for x in items])
                added[kind] = len(items)
        if not body:
            return existing, added
        block = [f"## {SECTION}", "", _NOTE] + body
        out = list(lines)
        if out and out[-1].strip():
            out.append("")
        out.extend(block)
        return nl.join(out) + nl, added
    end = next((i for i in range(start + 1, len(lines)) if _H12.match(lines[i])), len(lines))
    section = lines[start + 1:end]
    # subsections: (kind or None, first line index, last line index exclusive) within `section`
    heads = [(i, _H3.match(ln)) for i, ln in enumerate(section)]
    heads = [(i, m.group(1)) for i, m in heads if m]
    subs: dict[str, tuple[int, int]] = {}
    for n, (i, title) in enumerate(heads):
        kind = _TITLE_TO_KIND.get(title.casefold())
        j = heads[n + 1][0] if n + 1 < len(heads) else len(section)
        if kind and kind not in subs:
            subs[kind] = (i, j)
    inserts: dict[int, list[str]] = {}
    new_subs: list[str] = []
    for kind, items in entries.items():
        if not items:
            continue
        if kind in subs:
            a, b = subs[kind]
            have = {_key(m.group(1)) for ln in section[a + 1:b] if (m := _BULLET.match(ln))}
            new = [x for x in items if _key(x) not in have]
            if not new:
                continue
            last_bullet = max((k for k in range(a + 1, b) if _BULLET.match(section[k])), default=a)
            inserts.setdefault(last_bullet + 1, []).extend(f"- {x}" for x in new)
            added[kind] = len(new)
        else:
            new_subs.extend(["", f"### {_TITLES[kind]}"] + [f"- {x}" for x in items])
            added[kind] = len(items)
    if not inserts and not new_subs:
        return existing, added
    sec: list[str] = []
    for k, ln in enumerate(section):
        if k in inserts:
            sec.extend(inserts[k])
        sec.append(ln)
    if len(section) in inserts:
        sec.extend(inserts[len(section)])
    if new_subs:
        while sec and not sec[-1].strip():
            sec.pop()
        sec.extend(new_subs)
        if end < len(lines):
            sec.append("")
    out = lines[:start + 1] + sec + lines[end:]
    return nl.join(out) + (nl if trailing or not existing else ""), added


# ----------------------------------------------------------------------------- JSON


def merge_json(existing: Any, entries: MemoryEntries) -> tuple[Any, dict[str, int]]:
    data = dict(existing) if isinstance(existing, dict) else {}
    mem = data.get("compactor_memory")
    mem = dict(mem) if isinstance(mem, dict) else {}
    added = {k: 0 for k in KINDS}
    for kind, items in entries.items():
        cur = [x for x in mem.get(kind, []) if isinstance(x, str)] if isinstance(mem.get(kind), list) else []
        have = {_key(x) for x in cur}
        for x in items:
            if _key(x) not in have:
                cur.append(x)
                have.add(_key(x))
                added[kind] += 1
        if cur or kind in mem:
            mem[kind] = cur
    data["compactor_memory"] = {k: mem[k] for k in KINDS if k in mem} | {k: v for k, v in mem.items() if k not in KINDS}
    return data, added


# ----------------------------------------------------------------------------- export


def export_memory(conversation: Any, to: str | os.PathLike[str], *, format: str | None = None,
                  objective: str | None = None, entries: MemoryEntries | None = None) -> MemoryUpdate:
    """Merge the durable knowledge of ``conversation`` into the memory file ``to``.

    ``format`` is ``md`` or ``json`` (default: from the file extension, Markdown otherwise).
    Running it twice changes nothing the second time.
    """
    path = Path(to)
    fmt = format or ("json" if path.suffix.lower() == ".json" else "md")
    if fmt not in ("md", "json"):
        from ..errors import ConfigError

        raise ConfigError(f"unknown memory format {fmt!r}; use md or json")
    if entries is None:
        entries = extract_memory(conversation, objective=objective)
    if path.is_dir():
        raise InputError("is a directory; pass the memory file (e.g. AGENTS.md)", source=str(path))
    existing = ""
    if path.exists():
        try:
            existing = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read the memory file: {exc}", source=str(path)) from None
    if fmt == "md":
        text, added = merge_markdown(existing, entries)
    else:
        try:
            cur = json.loads(existing) if existing.strip() else {}
        except (json.JSONDecodeError, RecursionError) as exc:
            raise InputError(f"the memory file is not valid JSON: {exc}", source=str(path)) from None
        if not isinstance(cur, dict):
            raise InputError("the memory file must hold a JSON object", source=str(path))
        data, added = merge_json(cur, entries)
        text = existing if (data == cur and existing) else json.dumps(data, ensure_ascii=False, indent=2) + "\n"
    changed = text != existing
    if changed:
        write_text_atomic(path, text)
    return MemoryUpdate(path=str(path), format=fmt, added=added, changed=changed)
