"""Per-turn cost and prompt-cache friendliness of compacting every turn, and start-up time.

Every figure is a ratio against a baseline measured in the same run:

1. Per-turn latency. The longest real conversation of ``../shared/corpus`` (the mini-swe-agent
   django-11099 run as OpenAI chat messages) is replayed message by message; each turn appends
   one message and compacts. Baseline: one ``json.dumps`` of the conversation at that turn (what
   sending it to an API costs at least). Measured for ``Session.append + Session.compact`` and,
   for comparison, for the stateless ``Compactor.compact(messages)``. Then the same run replayed
   four times over (fresh ids; 340 messages): the turns from message 300 on. Informative: the
   turns of the first replay once the conversation holds 40 messages.
2. Prefix stability (default Session settings): the share of turns whose output extends the
   previous output as a byte prefix (serialised as the API would receive it) and the share of
   the previous output's tokens still a valid prefix (what a provider's prompt cache keeps); for ``collapse_batch=1`` (one output collapses
   per turn as it leaves the recent window) as the baseline; with a budget (hysteresis) too.
3. Start-up: ``compactor trim`` of a one-line input and ``compactor compact`` of a one-message
   conversation, whole process, against ``python -c pass`` (median of several runs).

    python benchmarks/bench_session.py            # -> benchmarks/out/session.json
    python benchmarks/bench_session.py --quick    # smaller (smoke)
    python benchmarks/bench_session.py --cpu      # per-turn figures in CPU time (a busy shared machine)
    python benchmarks/bench_session.py --stages   # only: median CPU time per stage of a session turn
    python benchmarks/bench_session.py --profile  # only: cProfile of the session replay (top functions)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def conversation(corpus: Path | None) -> tuple[str, list[dict[str, Any]]]:
    from bench_speed import openai_messages

    if corpus is not None:
        src = corpus / "mini-swe-agent" / "django__django-11099.deepseek_chat_test_1-100.traj.json"
        if src.exists():
            return str(src.relative_to(corpus.parent)), openai_messages(src)
    src = ROOT / "fixtures" / "demo" / "debug-session.openai.json"
    return str(src.relative_to(ROOT)), json.loads(src.read_text(encoding="utf-8"))


def repeated(conv: list[dict[str, Any]], times: int) -> list[dict[str, Any]]:
    out = []
    for k in range(times):
        for m in conv if k == 0 else conv[1:]:
            m2 = json.loads(json.dumps(m))
            for c in m2.get("tool_calls") or []:
                c["id"] = f"{c['id']}-{k}"
            if m2.get("tool_call_id"):
                m2["tool_call_id"] = f"{m2['tool_call_id']}-{k}"
            out.append(m2)
    return out


def _summary(turn_t: list[float], dumps_t: list[float]) -> dict[str, Any]:
    ratio = [c / d for c, d in zip(turn_t, dumps_t)]
    return {
        "turns": len(turn_t),
        "turn_ms": {"p50": round(_pct(turn_t, .5) * 1e3, 3), "p99": round(_pct(turn_t, .99) * 1e3, 3),
                    "max": round(max(turn_t) * 1e3, 3)},
        "json_dumps_ms": {"p50": round(_pct(dumps_t, .5) * 1e3, 3), "p99": round(_pct(dumps_t, .99) * 1e3, 3)},
        "ratio_per_turn": {"p50": round(_pct(ratio, .5), 3), "p99": round(_pct(ratio, .99), 3)},
    }


CLOCK = time.perf_counter  # --cpu: time.thread_time (CPU time of this thread, for a busy machine)


def replay(conv: list[dict[str, Any]], *, stateless: bool, reps: int, from_turn: int = 0) -> dict[str, Any]:
    """Per-turn cost of appending one message and compacting, against json.dumps at that turn."""
    import compactor

    clock = CLOCK
    turn_t: list[float] = []
    dumps_t: list[float] = []
    for _ in range(reps):
        comp = compactor.Compactor()
        comp.compact([{"role": "user", "content": "warm-up"}])
        session = compactor.Session(comp) if not stateless else None
        for i, m in enumerate(conv):
            msgs = conv[:i + 1]
            t0 = clock()
            json.dumps(msgs)
            d = clock() - t0
            t0 = clock()
            if stateless:
                comp.compact(msgs)
            else:
                session.append(m)
                session.compact()
            c = clock() - t0
            if i + 1 > from_turn:
                turn_t.append(c)
                dumps_t.append(d)
    return _summary(turn_t, dumps_t)


def _timed_session(conv: list[dict[str, Any]], reps: int, times: dict[str, list[float]]) -> None:
    """Replay ``conv`` in a session ``reps`` times, adding each stage's time per turn to ``times``
    (``read`` includes the session's incremental read of the new message). The times are CPU time
    of this thread (``time.thread_time``): a breakdown that other processes on a busy machine do
    not blur."""
    import compactor

    clock = time.thread_time

    for _ in range(reps):
        comp = compactor.Compactor()
        comp.compact([{"role": "user", "content": "warm-up"}])
        for name, fn in list(comp.stages.items()):
            def wrapped(state, fn=fn, name=name):
                t0 = clock()
                fn(state)
                turn[name] = turn.get(name, 0.0) + clock() - t0
            comp.stages[name] = wrapped
        session = compactor.Session(comp)
        doc_fn = session._document

        def document(config, doc_fn=doc_fn):
            t0 = clock()
            out = doc_fn(config)
            turn["read"] = turn.get("read", 0.0) + clock() - t0
            return out
        session._document = document
        for m in conv:
            turn: dict[str, float] = {}
            t0 = clock()
            session.append(m)
            session.compact()
            turn["total"] = clock() - t0
            turn["other"] = turn["total"] - sum(v for k, v in turn.items() if k != "total")
            for k, v in turn.items():
                times.setdefault(k, []).append(v)


def stage_medians(conv: list[dict[str, Any]], reps: int) -> dict[str, float]:
    """Median microseconds of CPU time per stage of a session turn (replayed ``reps`` times)."""
    times: dict[str, list[float]] = {}
    _timed_session(conv, reps, times)
    return {k: round(_pct(v, .5) * 1e6, 1) for k, v in times.items()}


def profile(conv: list[dict[str, Any]], reps: int, top: int = 40) -> None:
    import cProfile
    import pstats

    import compactor

    compactor.Compactor().compact([{"role": "user", "content": "warm-up"}])
    prof = cProfile.Profile()
    for _ in range(reps):
        comp = compactor.Compactor()
        comp.compact([{"role": "user", "content": "warm-up"}])
        session = compactor.Session(comp)
        for m in conv:
            session.append(m)
            prof.runcall(session.compact)
    pstats.Stats(prof).sort_stats("cumulative").print_stats(top)
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def prefix_share(conv: list[dict[str, Any]], **options) -> dict[str, Any]:
    """Share of turns whose serialised output extends the previous one, and of output tokens
    that are a reused prefix, when compacting after every message."""
    import compactor
    from compactor.tokens import get_counter

    counter = get_counter()
    session = compactor.Session(**options)
    prev = None
    extends = turns = 0
    reused_tokens = total_tokens = prev_tokens = 0
    prev_n = 0
    for m in conv:
        session.append(m)
        r = session.compact()
        cur = json.dumps(r.messages, ensure_ascii=False)[:-1]  # open list: the next turn may append
        n = counter.count(cur)
        if prev is not None:
            turns += 1
            total_tokens += n
            prev_tokens += prev_n
            if cur.startswith(prev):
                extends += 1
                reused_tokens += counter.count(prev)
            else:
                k = 0
                lim = min(len(prev), len(cur))
                while k < lim and prev[k] == cur[k]:
                    k += 1
                reused_tokens += counter.count(cur[:k])
        prev, prev_n = cur, n
    # reused_of_previous: how much of what the provider has cached (the previous output) is still a
    # valid prefix; reused_of_output: the share of each output that is such a prefix (new messages
    # can never be, so it stays below 1 even when every turn is a pure append)
    return {"options": options, "turns": turns, "extends_share": round(extends / turns, 4),
            "reused_of_previous": round(reused_tokens / prev_tokens, 4),
            "reused_of_output": round(reused_tokens / total_tokens, 4)}


def startup(runs: int) -> dict[str, Any]:
    """Whole-process wall time (median of ``runs``) against ``python -c pass``, measured the way
    ``bench_startup.py`` does (byte-compiled, warm catalog)."""
    from bench_startup import measure

    with tempfile.TemporaryDirectory() as tmp:
        _cmds, _env, med, _cpu = measure(runs, Path(tmp))
    return {
        "runs": runs,
        "median_ms": {k: round(v * 1e3, 1) for k, v in med.items()},
        "trim_vs_python": round(med["trim_one_line"] / med["python_pass"], 2),
        "compact_vs_python": round(med["compact_one_message"] / med["python_pass"], 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--corpus", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=HERE / "out" / "session.json")
    ap.add_argument("--stages", action="store_true", help="only print the median time per stage of a session turn")
    ap.add_argument("--profile", action="store_true", help="only print a cProfile of the session replay")
    ap.add_argument("--long", action="store_true", help="with --stages/--profile: the 337-message replay")
    ap.add_argument("--cpu", action="store_true",
                    help="time the turns and json.dumps by CPU time of this thread (a busy machine blurs wall time)")
    args = ap.parse_args(argv)
    if args.cpu:
        global CLOCK
        CLOCK = time.thread_time
    from evaluate import default_corpus

    corpus = args.corpus or default_corpus()
    corpus = corpus if corpus.is_dir() else None
    source, conv = conversation(corpus)
    if args.quick:
        conv = conv[:30]
    if args.stages or args.profile:
        run = repeated(conv, 4) if args.long else conv
        if args.stages:
            print(json.dumps({"source": source, "messages": len(run), "median_us": stage_medians(run, 3)}, indent=1))
        if args.profile:
            profile(run, 3)
        return 0
    reps = 1 if args.quick else 3
    res: dict[str, Any] = {"source": source, "messages": len(conv), "clock": "thread CPU time" if args.cpu else "wall"}
    res["session"] = replay(conv, stateless=False, reps=reps)
    res["stateless_compactor"] = replay(conv, stateless=True, reps=1)
    if not args.quick:
        long = repeated(conv, 4)
        res["session_from_300"] = {"messages": len(long), **replay(long, stateless=False, reps=1, from_turn=300)}
        # informative, not a goal: the turns once the conversation holds 40 messages (the first
        # turns' ratio is one json.dumps of one to three messages against detecting the task)
        res["session_from_40"] = replay(conv, stateless=False, reps=reps, from_turn=40)
    res["prefix_default_session"] = prefix_share(conv)
    res["prefix_batch_1"] = prefix_share(conv, collapse_batch=1)
    import compactor

    l1 = compactor.Compactor().compact(conv).report.tokens_after
    res["prefix_budget_half"] = {"budget": l1 // 2, **prefix_share(conv, budget=l1 // 2)}
    res["startup"] = startup(3 if args.quick else 7)
    s = res["session"]
    res["goals"] = {
        "per_turn_p50_le_1x_dumps": s["ratio_per_turn"]["p50"] <= 1.0,
        "per_turn_p99_le_5x_dumps": s["ratio_per_turn"]["p99"] <= 5.0,
        "from_300_p99_le_1x_dumps": (res["session_from_300"]["ratio_per_turn"]["p99"] <= 1.0
                                     if "session_from_300" in res else None),
        "prefix_turns_ge_95pct": res["prefix_default_session"]["extends_share"] >= 0.95,
        "prefix_tokens_ge_97pct": res["prefix_default_session"]["reused_of_previous"] >= 0.97,
        "trim_start_le_3x_python": res["startup"]["trim_vs_python"] <= 3.0,
        "compact_start_le_6x_python": res["startup"]["compact_vs_python"] <= 6.0,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
