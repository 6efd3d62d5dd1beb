"""A run replayed call by call through ``compactor.Session`` with a token budget.

Every agent run of the given corpora that compactor reads as a conversation is turned into OpenAI
chat messages (system / user / assistant with its tool calls / tool results, in order) and
replayed the way an agent loop would call a model: before every assistant message there is one
model call, and its input is every message before it. Each call appends the new messages to one
``Session(budget=B)`` and sends what ``compact()`` returns.

Per run and over all runs:

- ``raw``: the tokens of the calls' inputs as they are, and ``sent``: of what the session sent;
  the raw ratio is sent / raw;
- ``cost``: with prompt caching priced in — a token that extends the previous call's input as
  an unchanged prefix (whole messages, compared as sent) costs a tenth of a fresh one; the raw
  input is always the previous input plus the new messages; the cached-cost ratio is
  cost(sent) / cost(raw);
- recall at the last call: the gold evidence (``benchmarks/gold.py``, independent of
  compactor's rules) of the last call's raw input found in what the session sent at that call;
- ``budget_errors``: calls where the session raised ``BudgetError`` (the raw input counts as
  sent for those calls).

    python benchmarks/session_replay.py --corpus ../shared/trajectories-extra --budget 16000
    python benchmarks/session_replay.py --corpus ../shared/corpus --corpus ../shared/trajectories-extra
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import evaluate  # noqa: E402
import gold  # noqa: E402
from budget_curve import trajectories  # noqa: E402

import compactor  # noqa: E402
from compactor import load_document  # noqa: E402
from compactor.budget.measure import read_back  # noqa: E402

CATS = ("error_lines", "frames", "exit_codes", "constraints", "failed_approaches", "numbers")
CACHED_PRICE = 0.1


def chat_messages(doc) -> list[dict[str, Any]]:
    """A read run as OpenAI chat messages: each message segment a message, tool calls on the
    assistant message before them, each result a ``tool`` message answering its call (a result
    whose call is unknown becomes a user message)."""
    out: list[dict[str, Any]] = []
    calls: set[str] = set()
    for s in doc.segments:
        role = s.role.value
        if s.kind.value == "message":
            out.append({"role": role if role in ("system", "user", "assistant") else "user", "content": s.text})
        elif s.kind.value == "tool_call":
            cid = s.call_id or f"call_{s.index}"
            calls.add(cid)
            args = s.text
            try:
                json.loads(args)
            except ValueError:
                args = json.dumps({"command": s.text}, ensure_ascii=False)
            call = {"id": cid, "type": "function", "function": {"name": s.tool_name or "bash", "arguments": args}}
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        else:
            if s.call_id in calls:
                out.append({"role": "tool", "tool_call_id": s.call_id, "content": s.text})
            else:
                out.append({"role": "user", "content": s.text})
    # a tool message must follow the assistant message that called it with nothing else between
    fixed: list[dict[str, Any]] = []
    open_calls: set[str] = set()
    for m in out:
        if m["role"] == "assistant":
            open_calls = {c["id"] for c in m.get("tool_calls", ())}
        elif m["role"] == "tool":
            if m["tool_call_id"] not in open_calls or (fixed and fixed[-1]["role"] not in ("assistant", "tool")):
                m = {"role": "user", "content": m["content"]}
        else:
            open_calls = set()
        fixed.append(m)
    return fixed


def message_tokens(m: dict[str, Any], count) -> int:
    n = count(m["content"]) if isinstance(m.get("content"), str) else 0
    for c in m.get("tool_calls") or ():
        n += count(c["function"]["arguments"])
    return n


def replay_run(msgs: list[dict[str, Any]], budget: int, count, **options) -> dict[str, Any]:
    calls = [i for i, m in enumerate(msgs) if m["role"] == "assistant" and i > 0]
    session = compactor.Session(budget=budget, **options)
    raw_tok = [message_tokens(m, count) for m in msgs]
    raw = sent = raw_cost = sent_cost = 0.0
    errors = 0
    prev_out: list[dict[str, Any]] = []
    prev_i = 0
    out: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for i in calls:
        session.append(msgs[prev_i:i])
        n_raw = sum(raw_tok[:i])
        cached_raw = sum(raw_tok[:prev_i])
        raw += n_raw
        raw_cost += (n_raw - cached_raw) + CACHED_PRICE * cached_raw
        try:
            out = session.compact().messages
        except compactor.BudgetError:
            errors += 1
            out = [dict(m) for m in msgs[:i]]
        toks = [message_tokens(m, count) for m in out]
        n = sum(toks)
        k = 0
        while k < min(len(out), len(prev_out)) and out[k] == prev_out[k]:
            k += 1
        cached = sum(toks[:k])
        sent += n
        sent_cost += (n - cached) + CACHED_PRICE * cached
        prev_out, prev_i = out, i
    seconds = time.perf_counter() - t0
    last = calls[-1] if calls else len(msgs)
    src = load_document(msgs[:last], format="openai-chat")
    items = gold.extract([gold.SegmentLike(s.role.value, s.kind.value, s.text, s.meta, s.call_id, s.exit_code,
                                           s.is_error) for s in src.segments]).items
    back = read_back("openai-chat", out) if out else src
    rec = evaluate.recall(items, [evaluate.clean(s.text) for s in back.segments])
    return {"calls": len(calls), "raw": int(raw), "sent": int(sent), "raw_cost": round(raw_cost, 1),
            "sent_cost": round(sent_cost, 1), "budget_errors": errors, "last_raw": sum(raw_tok[:last]),
            "last_sent": sum(message_tokens(m, count) for m in out),
            "recall": {c: rec[c] for c in CATS}, "seconds": round(seconds, 2)}


def run(corpora: list[Path], budget: int, limit: int | None = None, only: str | None = None,
        **options) -> dict[str, Any]:
    count = compactor.get_counter().count
    runs = []
    skipped = []
    for corpus in corpora:
        for path in trajectories(corpus):
            if only and only not in str(path):
                continue
            try:
                doc = load_document(str(path))
            except compactor.CompactorError as exc:
                skipped.append({"file": evaluate.rel(str(path)), "why": " ".join(str(exc).split())[:120]})
                continue
            if doc.format == "text":
                skipped.append({"file": evaluate.rel(str(path)), "why": "read as plain text"})
                continue
            msgs = chat_messages(doc)
            if limit:
                msgs = msgs[:limit]
            r = replay_run(msgs, budget, count, **options)
            r.update(file=evaluate.rel(str(path)), format=doc.format)
            runs.append(r)
            print(f"{r['file']}: {r['calls']} calls, sent/raw {r['sent'] / max(1, r['raw']):.3f}, "
                  f"cost {r['sent_cost'] / max(1, r['raw_cost']):.3f}, errors {r['budget_errors']}, "
                  f"{r['seconds']} s", file=sys.stderr)
    tot = {k: sum(r[k] for r in runs) for k in ("calls", "raw", "sent", "raw_cost", "sent_cost", "budget_errors")}
    rec = {c: [sum(r["recall"][c][0] for r in runs), sum(r["recall"][c][1] for r in runs)] for c in CATS}
    summary = {"runs": len(runs), **tot,
               "raw_ratio": round(tot["sent"] / tot["raw"], 4) if tot["raw"] else None,
               "cost_ratio": round(tot["sent_cost"] / tot["raw_cost"], 4) if tot["raw_cost"] else None,
               "recall_last_call": {c: (round(100.0 * a / b, 2) if b else None) for c, (a, b) in rec.items()},
               "gold_last_call": {c: b for c, (a, b) in rec.items()}}
    return {"benchmark": "session_replay", "budget": budget, "options": options, "corpora": [str(c) for c in corpora],
            "token_counter": compactor.get_counter().name, "cached_price": CACHED_PRICE,
            "summary": summary, "runs": runs, "skipped": skipped}


def table(result: dict[str, Any]) -> str:
    s = result["summary"]
    out = [f"### Session replay, call by call — budget {result['budget']} tokens, {s['runs']} runs, {s['calls']} model calls\n",
           "| sent / raw | cached cost / raw cached cost | BudgetError | " + " | ".join(
               f"{c} at the last call" for c in CATS if s["gold_last_call"][c]) + " |",
           "|---:|---:|---:|" + "---:|" * sum(1 for c in CATS if s["gold_last_call"][c]),
           f"| {s['raw_ratio']:.3f}x | {s['cost_ratio']:.3f}x | {s['budget_errors']} | " + " | ".join(
               f"{s['recall_last_call'][c]:.1f}% ({s['gold_last_call'][c]})" for c in CATS if s["gold_last_call"][c]) + " |"]
    if result["skipped"]:
        out.append("\nNot replayed: " + "; ".join(f"{k['file']} ({k['why']})" for k in result["skipped"]))
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, action="append", help="a folder of runs by layout (repeatable)")
    ap.add_argument("--budget", type=int, default=16000)
    ap.add_argument("--limit", type=int, default=None, help="replay only the first N messages of each run (smoke)")
    ap.add_argument("--only", default=None, help="replay only the runs whose path contains this")
    ap.add_argument("--low-water", type=float, default=None, help="the Session's low-water mark (default: its own)")
    ap.add_argument("--out", type=Path, default=HERE / "out" / "session_replay.json")
    args = ap.parse_args(argv)
    corpora = args.corpus or [evaluate.default_corpus()]
    for c in corpora:
        if not c.is_dir():
            print(f"session_replay: corpus {c} not found", file=sys.stderr)
            return 2
    if args.budget < 1:
        print(f"session_replay: --budget must be a positive number of tokens, got {args.budget}", file=sys.stderr)
        return 2
    options = {"low_water": args.low_water} if args.low_water is not None else {}
    result = run(corpora, args.budget, args.limit, args.only, **options)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
