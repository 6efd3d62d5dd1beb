"""The tool commands of the CLI: ``check``, ``audit``, ``memory export``.

Registered by :func:`compactor.cli.build_parser` through :func:`add_commands`; dispatched through
:data:`COMMANDS`. Same contract as the rest of the CLI: data on stdout, one-line errors, exit 0 /
1 / 2.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

__all__ = ["COMMANDS", "add_commands"]


def add_commands(sub, add_common: Callable[[Any], None]) -> None:
    p = sub.add_parser("check", help="should this conversation be compacted now? prints the decision and why")
    p.add_argument("input", help="file, or - for standard input")
    p.add_argument("--format", default="auto")
    p.add_argument("--context-window", type=int, default=128_000, metavar="TOKENS")
    p.add_argument("--usage-threshold", type=float, default=0.65, metavar="FRACTION")
    p.add_argument("--turn-threshold", type=int, default=25, metavar="N")
    p.add_argument("--every", type=int, default=None, metavar="N", help="also compact every N steps")
    p.add_argument("--repeat-threshold", type=int, default=3, metavar="N")
    p.add_argument("--json", action="store_true", help="print the decision as JSON")
    p.add_argument("--exit-code", action="store_true", help="exit 3 when compaction is recommended")
    add_common(p)

    p = sub.add_parser("audit", help="fidelity audit of the anchor: facts, decisions, dead ends traced to the trajectory")
    p.add_argument("paths", nargs="+", metavar="DIR_OR_FILE")
    p.add_argument("--format", default="auto")
    p.add_argument("--min-words", type=float, default=0.7, metavar="FRACTION",
                   help="share of a fact's content words its source step must contain (default 0.7)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--failures", action="store_true", help="list every unsupported / untraced item")
    add_common(p)

    p = sub.add_parser("memory", help="durable knowledge → a memory file (AGENTS.md / CLAUDE.md style, or JSON)")
    msub = p.add_subparsers(dest="memory_command", metavar="ACTION", parser_class=sub._parser_class)
    q = msub.add_parser("export", help="merge decisions, dead ends, constraints, environment facts and working "
                                       "commands into FILE (idempotent)")
    q.add_argument("input", help="trajectory file, or - for standard input")
    q.add_argument("--to", required=True, metavar="FILE")
    q.add_argument("--format", dest="memory_format", default=None, choices=["md", "json"],
                   help="default: json for .json files, md otherwise")
    q.add_argument("--objective", default=None, metavar="TEXT")
    add_common(q)


def _load(path: str, fmt: str = "auto"):
    from ..errors import InputError
    from ..formats import load_document
    from pathlib import Path

    if path == "-":
        return load_document(sys.stdin.buffer.read(), format=fmt, source="<stdin>")
    p = Path(path)
    if not p.exists():
        raise InputError("no such file; check the path", source=path)
    if p.is_dir():
        raise InputError("is a directory; pass a file (or - for standard input)", source=path)
    return load_document(p, format=fmt)


def cmd_check(args) -> int:
    from .triggers import should_compact

    doc = _load(args.input, args.format)
    d = should_compact(doc, context_window=args.context_window, usage_threshold=args.usage_threshold,
                       turn_threshold=args.turn_threshold, every_n_steps=args.every,
                       repeat_threshold=args.repeat_threshold)
    if args.json:
        sys.stdout.write(json.dumps(d.model_dump(mode="json"), ensure_ascii=False, indent=2) + "\n")
    else:
        head = (f"compact: yes — start at level {d.level_hint}" if d.compact else "compact: no")
        lines = [head,
                 f"turns {d.turns}, tokens {d.tokens} of {d.context_window} ({d.usage:.0%}, {d.token_counter}), "
                 f"profile {d.profile}, risk {d.risk}"]
        for n in d.notes:
            lines.append(f"note: {n}")
        for r in d.reasons:
            lines.append(f"- {r.code}: {r.message}")
        sys.stdout.write("\n".join(lines) + "\n")
    return 3 if (args.exit_code and d.compact) else 0


def cmd_audit(args) -> int:
    from .fidelity import audit_paths, format_table

    rep = audit_paths(args.paths, min_words=args.min_words, format=args.format)
    if args.json:
        sys.stdout.write(json.dumps(rep.to_json(), ensure_ascii=False, indent=2) + "\n")
    else:
        sys.stdout.write(format_table(rep, verbose=args.failures))
    return 0


def cmd_memory(args) -> int:
    from ..errors import ConfigError
    from .memory import export_memory

    if getattr(args, "memory_command", None) != "export":
        raise ConfigError("missing action (see 'compactor memory --help'): compactor memory export INPUT --to FILE")
    doc = _load(args.input)
    up = export_memory(doc, args.to, format=args.memory_format, objective=args.objective)
    parts = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in up.added.items() if n)
    if up.changed:
        sys.stdout.write(f"{up.path}: added {parts or 'nothing'} ({up.format})\n")
    else:
        sys.stdout.write(f"{up.path}: up to date, nothing new ({up.format})\n")
    return 0


COMMANDS: dict[str, Callable[[Any], int]] = {
    "check": cmd_check,
    "audit": cmd_audit,
    "memory": cmd_memory,
}
