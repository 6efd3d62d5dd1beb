"""The rooms of the package (DESIGN.md section 2) and the import graph between them.

Read statically with ``ast``: every ``import`` in every module counts, also the ones inside a
function (a lazy import is still a dependency: it only moves the cycle to run time). Two rules:

- no import cycle between modules;
- no import runs up the rooms map: a module may import its own room and the rooms below it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import compactor

PKG = Path(compactor.__file__).resolve().parent

# room -> floor; a room imports only rooms on its own floor or below. Rooms on one floor must not
# import each other in a circle (the cycle check below).
ROOMS: dict[str, int] = {
    # ground floor: data, errors, the syntax compactor writes, text normalisation, token counting
    "errors": 0, "version": 0, "syntax": 0, "models": 0, "normalize": 0, "tokens": 0, "config": 0,
    "atomic": 0,               # atomic text-file writes
    "lazyre": 0,               # patterns compiled on first use
    "plain": 0,                # small records without dataclasses
    "record": 0,               # the typed data model's base class (pydantic only on validation)
    "segments": 0,             # lists over a document's segments (tool results, ids), extended as it grows
    "codeview": 0,             # source views, diffs, listings vs log output (pygments)
    "formats": 1,              # read / write edge, input decoding, layout detection
    "engine": 2,               # rule engines (protect, classify, secret, cue), loader, examples, pump
    "detect": 3, "secrets": 3,  # detect stage; secret scanning and redaction
    "collapse": 4,             # Level 1, folding, store, streaming trim
    "anchor": 5,               # anchor extraction, merge, rendering
    "audit": 6,                # the self-check
    "budget": 7,               # Level 2/3, fitting, hand-off
    "llm": 8,                  # optional LLM refine
    "pipeline": 9, "session": 9,  # the stage list; per-conversation state
    "tools": 10, "emit": 10,   # tools on the pipeline; output renderers
    "streaming": 10,           # the stage list as a fold over a file's messages (bounded memory)
    "__init__": 11,            # the public API
    "integrations": 12, "batch": 12,  # hooks, MCP, adapters, batch: built on the public API
    "cli": 13, "__main__": 13,  # the command line (serves the integrations too)
}

def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _is_package(mods: dict[str, Path], name: str) -> bool:
    return name in mods and mods[name].name == "__init__.py"


def _imports(mods: dict[str, Path], name: str) -> list[tuple[str, int]]:
    """(imported module, line) for every import of ``compactor`` modules in module ``name``."""
    path = mods[name]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if _is_package(mods, name) else name.rpartition(".")[0]
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "compactor" or alias.name.startswith("compactor."):
                    out.append((_longest_module(mods, alias.name), node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base != "compactor" and not base.startswith("compactor."):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.append((sub if sub in mods else _longest_module(mods, base), node.lineno))
    return out


def _longest_module(mods: dict[str, Path], dotted: str) -> str:
    parts = dotted.split(".")
    while parts and ".".join(parts) not in mods:
        parts.pop()
    assert parts, f"import of {dotted!r} resolves to no module of the package"
    return ".".join(parts)


def _room(name: str) -> str:
    parts = name.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def _graph() -> tuple[dict[str, Path], dict[str, dict[str, int]]]:
    mods = _modules()
    graph: dict[str, dict[str, int]] = {m: {} for m in mods}
    for m in mods:
        for target, line in _imports(mods, m):
            if target != m:
                graph[m].setdefault(target, line)
    return mods, graph


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_every_module_is_in_a_room():
    mods = _modules()
    missing = sorted({_room(m) for m in mods} - set(ROOMS))
    assert not missing, f"modules in rooms missing from the rooms map (add them with their floor): {missing}"


def test_no_import_cycle():
    _, graph = _graph()
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_import_runs_up_the_rooms():
    mods, graph = _graph()
    bad = []
    for src, targets in sorted(graph.items()):
        for dst, line in sorted(targets.items()):
            rs, rd = _room(src), _room(dst)
            if rs != rd and ROOMS.get(rs, -1) < ROOMS.get(rd, 99):
                bad.append(f"{mods[src].relative_to(PKG.parent)}:{line}: {src} ({rs}, floor {ROOMS.get(rs)}) imports "
                           f"{dst} ({rd}, floor {ROOMS.get(rd)})")
    assert not bad, "imports running up the rooms map:\n" + "\n".join(bad)


# ---------------------------------------------------------------- the checker itself can fail


def test_cycle_finder_finds_a_cycle():
    g = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}
    assert _cycles(g) == [["a", "b", "c"]]
    assert _cycles({"a": {"b": 1}, "b": {}}) == []


def test_import_reader_sees_lazy_and_relative_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "compactor"
    (pkg / "engine").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "models.py").write_text("")
    (pkg / "engine" / "__init__.py").write_text("from .rules import x\n")
    (pkg / "engine" / "rules.py").write_text("def f():\n    from ..pipeline import run\n    from .. import models\n")
    (pkg / "pipeline.py").write_text("import compactor.engine.rules\n")
    monkeypatch.setattr(__import__(__name__), "PKG", pkg)
    mods, graph = _graph()
    assert graph["compactor.engine.rules"] == {"compactor.pipeline": 2, "compactor.models": 3}
    assert graph["compactor.pipeline"] == {"compactor.engine.rules": 1}
    assert _cycles(graph) == [["compactor.engine.rules", "compactor.pipeline"]]
