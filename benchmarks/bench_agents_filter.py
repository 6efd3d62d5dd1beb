"""OpenAI Agents SDK input filters on real trajectories: compactor's ``CompactorInputFilter``
against the SDK's own ``ToolOutputTrimmer`` (``agents.extensions``), same input, same run.

Every agent trajectory of ``../shared/corpus`` (``evaluate.collect_files``, logs left out) is
turned into the Responses API input items an Agents SDK run would hold at its last model call
(user/assistant/system messages, ``function_call`` and ``function_call_output`` items, in
conversation order), and each filter is called exactly as the runner calls it
(``CallModelData`` → ``ModelInputData``). Scored on what the filter returns:

- tokens: ``compactor.get_counter()`` over every text of the returned items (message texts,
  call arguments, tool outputs), the same counter for every method;
- evidence: the gold items of ``benchmarks/gold.py`` (the benchmark's own regexes, independent of
  compactor's rules) found verbatim in those texts (``evaluate.recall``: ANSI stripped,
  whitespace collapsed, micro-averaged).

Methods: no filter; ``ToolOutputTrimmer()`` (SDK defaults: recent_turns=2, 500 chars, 200-char
preview); ``ToolOutputTrimmer(recent_turns=1)`` (the smallest window it allows);
``CompactorInputFilter()`` (Level 1, last 3 tool outputs raw); ``CompactorInputFilter(budget=…)`` at
the token count of ``ToolOutputTrimmer(recent_turns=1, max_output_chars=500)`` run with
every older tool output eligible — i.e. equal budget against a trimmer that *does* cut (see
"trimmer, window forced" below).

``ToolOutputTrimmer`` counts turns by user messages; an agent trajectory usually has one user
message (the task), so the trimmer leaves it untouched. To compare at a size where it does cut,
"trimmer, window forced" inserts the trimmer's own boundary by hand: every tool output before
the last 3 is trimmed with the trimmer's rule (``_trim_function_call_output``, its own code).

Per model call, the run is also replayed: each filter is called on the growing input before
every model call (after each tool output), one filter instance per run, and timed.

    python benchmarks/bench_agents_filter.py            # -> benchmarks/out/agents_filter.json + a table
    python benchmarks/bench_agents_filter.py --quick    # two files (smoke)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import gold  # noqa: E402
from evaluate import clean, collect_files, default_corpus, recall, rel  # noqa: E402
from gold import CATEGORIES, SegmentLike  # noqa: E402

import compactor  # noqa: E402
from compactor import load_document  # noqa: E402

try:
    from agents import Agent
    from agents.extensions import ToolOutputTrimmer
    from agents.run_config import CallModelData, ModelInputData

    from compactor.integrations.openai_agents import CompactorInputFilter
except ImportError as exc:  # pragma: no cover
    sys.exit(f"bench_agents_filter: needs the openai-agents extra ({exc}); pip install -e '.[openai-agents]'")

KEEP = 3


def to_items(segments) -> list[dict[str, Any]]:
    """A document's segments as Responses input items (what an Agents SDK run holds)."""
    items: list[dict[str, Any]] = []
    last_call: str | None = None
    n = 0
    for s in segments:
        text = clean(s.text)
        if s.kind.value == "tool_call":
            n += 1
            last_call = s.call_id or f"call_{n}"
            items.append({"type": "function_call", "call_id": last_call, "name": s.tool_name or "bash",
                          "arguments": text})
        elif s.kind.value == "tool_result":
            cid = s.call_id or last_call
            if cid is None:  # an output with no call: give it one, as the SDK would have
                n += 1
                cid = f"call_{n}"
                items.append({"type": "function_call", "call_id": cid, "name": s.tool_name or "bash", "arguments": ""})
            items.append({"type": "function_call_output", "call_id": cid, "output": text})
            last_call = None
        else:
            role = s.role.value if s.role.value in ("user", "assistant", "system") else "user"
            items.append({"role": role, "content": text})
    return items


def texts_of(items: list[Any]) -> list[str]:
    out = []
    for it in items:
        if it.get("type") == "function_call":
            out.append(it.get("arguments") or "")
        elif it.get("type") == "function_call_output":
            o = it.get("output")
            out.append(o if isinstance(o, str) else json.dumps(o, ensure_ascii=False))
        else:
            c = it.get("content")
            out.append(c if isinstance(c, str) else json.dumps(c, ensure_ascii=False))
    return out


def forced_trimmer(items: list[dict[str, Any]], keep: int = KEEP) -> list[dict[str, Any]]:
    """The trimmer's own per-output rule, applied to every tool output but the newest ``keep``."""
    t = ToolOutputTrimmer(recent_turns=1)
    outs = [i for i, it in enumerate(items) if it.get("type") == "function_call_output"]
    old = set(outs[: max(0, len(outs) - keep)])
    names = {it["call_id"]: (it["name"],) for it in items if it.get("type") == "function_call"}
    new = []
    for i, it in enumerate(items):
        if i in old:
            trimmed, _ = t._trim_function_call_output(it, names.get(it["call_id"], ()))
            new.append(trimmed if trimmed is not None else it)
        else:
            new.append(it)
    return new


def call(filter_, items, agent) -> list[Any]:
    return filter_(CallModelData(model_data=ModelInputData(input=items, instructions=None), agent=agent, context=None)).input


def evaluate_file(entry, count, agent) -> dict[str, Any] | None:
    path = entry["path"]
    try:
        doc = load_document(path)
    except compactor.CompactorError as exc:
        return {"file": rel(path), "error": str(exc)}
    if doc.format == "text":
        return None  # logs are not agent runs
    raw = [SegmentLike(s.role.value, s.kind.value, s.text, s.meta, s.call_id, s.exit_code, s.is_error) for s in doc.segments]
    g = gold.extract(raw)
    items = to_items(doc.segments)
    before = sum(count(t) for t in texts_of(items))
    rec: dict[str, Any] = {"file": rel(path), "format": doc.format, "items": len(items),
                           "user_messages": sum(1 for it in items if it.get("role") == "user"),
                           "tool_outputs": sum(1 for it in items if it.get("type") == "function_call_output"),
                           "tokens_before": before, "gold": g.counts()}
    methods: dict[str, Any] = {}

    def score(name, fn):
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        texts = texts_of(out)
        tok = sum(count(t) for t in texts)
        methods[name] = {"tokens": tok, "seconds": round(dt, 4), "recall": recall(g.items, [clean(t) for t in texts]),
                         "changed": out != items}
        return tok

    # filters are built before the clock starts: only the per-call work is timed
    trim_default, trim_1 = ToolOutputTrimmer(), ToolOutputTrimmer(recent_turns=1)
    level1 = CompactorInputFilter(keep_recent=KEEP)
    score("none", lambda: list(items))
    score("ToolOutputTrimmer()", lambda: call(trim_default, items, agent))
    score("ToolOutputTrimmer(recent_turns=1)", lambda: call(trim_1, items, agent))
    forced = score("trimmer, window forced", lambda: forced_trimmer(items))
    score("compactor filter (L1)", lambda: call(level1, items, agent))
    at_size = CompactorInputFilter(keep_recent=KEEP, budget=max(1, forced))
    score("compactor filter @ forced trimmer size", lambda: call(at_size, items, agent))
    rec["methods"] = methods
    rec["per_call"] = replay(items, agent)
    return rec


def replay(items: list[dict[str, Any]], agent) -> dict[str, list[float]]:
    """Per-call latency inside a run: the filter is called before every model call (after each
    tool output), on the growing input, one filter instance per run (as a RunConfig holds it)."""
    cuts = [i + 1 for i, it in enumerate(items) if it.get("type") == "function_call_output"] or [len(items)]
    filters = {"ToolOutputTrimmer()": ToolOutputTrimmer(), "compactor filter (L1)": CompactorInputFilter(keep_recent=KEEP)}
    out: dict[str, list[float]] = {name: [] for name in filters}
    for k in cuts:
        prefix = items[:k]
        for name, f in filters.items():
            t0 = time.perf_counter()
            call(f, prefix, agent)
            out[name].append(time.perf_counter() - t0)
    return out


def aggregate(files: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [f for f in files if "methods" in f]
    names = list(rows[0]["methods"]) if rows else []
    out = {}
    before = sum(f["tokens_before"] for f in rows)
    for name in names:
        tok = sum(f["methods"][name]["tokens"] for f in rows)
        rec = {c: [sum(f["methods"][name]["recall"][c][0] for f in rows), sum(f["methods"][name]["recall"][c][1] for f in rows)]
               for c in CATEGORIES}
        found = sum(v[0] for v in rec.values())
        total = sum(v[1] for v in rec.values())
        out[name] = {"tokens": tok, "saved": before - tok, "ratio": round(before / tok, 3) if tok else None,
                     "recall": rec, "evidence_kept": [found, total],
                     "files_changed": sum(1 for f in rows if f["methods"][name]["changed"]),
                     "seconds": round(sum(f["methods"][name]["seconds"] for f in rows), 3)}
    per_call = {}
    for name in (rows[0].get("per_call") or {}) if rows else ():
        xs = sorted(x for f in rows for x in f["per_call"][name])
        per_call[name] = {"calls": len(xs), "p50_ms": round(1000 * xs[len(xs) // 2], 3),
                          "p99_ms": round(1000 * xs[min(len(xs) - 1, int(len(xs) * 0.99))], 3),
                          "total_s": round(sum(xs), 3)}
    return {"files": len(rows), "tokens_before": before, "methods": out, "per_call": per_call}


def table(agg: dict[str, Any]) -> str:
    cats = [c for c in CATEGORIES if any(m["recall"][c][1] for m in agg["methods"].values())]
    head = "| method | files changed | tokens | saved | ratio | evidence kept | " + " | ".join(cats) + " | seconds |"
    lines = [head, "|" + "---|" * (len(cats) + 7)]

    def pct(v):
        return f"{100 * v[0] / v[1]:.1f}% ({v[0]}/{v[1]})" if v[1] else "–"

    for name, m in agg["methods"].items():
        lines.append(f"| {name} | {m['files_changed']}/{agg['files']} | {m['tokens']} | {m['saved']} | {m['ratio']}× | "
                     f"{pct(m['evidence_kept'])} | " + " | ".join(pct(m["recall"][c]) for c in cats) + f" | {m['seconds']} |")
    if agg.get("per_call"):
        lines += ["", "| per model call, replayed run by run | calls | p50 | p99 | total |", "|---|---:|---:|---:|---:|"]
        for name, m in agg["per_call"].items():
            lines.append(f"| {name} | {m['calls']} | {m['p50_ms']} ms | {m['p99_ms']} ms | {m['total_s']} s |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=default_corpus())
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, default=HERE / "out" / "agents_filter.json")
    args = ap.parse_args(argv)
    entries = collect_files(args.corpus if args.corpus.is_dir() else None, args.quick)
    count = compactor.get_counter().count
    agent = Agent(name="bench")
    files = []
    for e in entries:
        r = evaluate_file(e, count, agent)
        if r is not None:
            files.append(r)
        if args.quick and len(files) >= 2:
            break
    agg = aggregate(files)
    import agents

    result = {"agents_version": agents.__version__, "compactor_version": compactor.__version__,
              "token_counter": compactor.get_counter().name, "aggregate": agg, "files": files}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"openai-agents {agents.__version__}, {agg['files']} trajectories, {agg['tokens_before']} tokens before "
          f"({result['token_counter']})\n")
    print(table(agg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
