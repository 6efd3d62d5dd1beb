"""Level 1 older than the recent window: as short as observation masking, lossless by reference."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import compactor
from compactor import Compactor, load_document

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import baselines  # noqa: E402
import evaluate  # noqa: E402
import gold  # noqa: E402

TRAJ_DIRS = ("swe-agent", "mini-swe-agent", "openhands-v0", "openhands-v1", "claude-code", "codex-rollout", "aider")
COUNT = compactor.get_counter().count
REF = re.compile(r"c-[0-9a-f]{16}")
TRACE = ('Traceback (most recent call last):\n  File "app/db/pool.py", line 142, in _acquire_connection\n'
         "    conn = self._pool.get(timeout=30)\napp.db.errors.ConnectionPoolExhausted: pool_size=20, queue_depth=347")


def test_natural_level1_is_at_most_masking_with_all_gold_evidence(corpus):
    comp = Compactor()
    total_l1 = total_mask = 0
    lost: list[str] = []
    for d in TRAJ_DIRS:
        for path in sorted((corpus / d).glob("*")):
            doc = load_document(str(path))
            raw = [gold.SegmentLike(s.role.value, s.kind.value, s.text, s.meta, s.call_id, s.exit_code, s.is_error)
                   for s in doc.segments]
            segs = [gold.SegmentLike(s.role, s.kind, evaluate.clean(s.text), s.meta, s.call_id, s.exit_code,
                                     s.is_error) for s in raw]
            items = gold.extract(raw).items
            texts = evaluate.compactor_texts(comp.compact(str(path)))
            total_l1 += baselines.tokens_of(texts, COUNT)
            total_mask += baselines.tokens_of(baselines.mask(segs, 10), COUNT)
            missed: dict[str, list[str]] = {}
            evaluate.recall(items, texts, missed)
            for cat in ("error_lines", "frames", "exit_codes", "constraints"):
                lost += [f"{path.name} [{cat}] {it}" for it in missed.get(cat, [])]
    assert not lost, lost[:10]
    assert total_l1 <= total_mask, (total_l1, total_mask)


def _session() -> list[dict]:
    listing = "\n".join(f"src/pkg/mod_{j}.py:{j}: def handler_{j}(r): return r" for j in range(40))
    body = "\n".join(f"line {j} of the new module" for j in range(30))
    msgs: list[dict] = [{"role": "user", "content": "Fix the pool. Don't touch the public API."}]

    def turn(i: int, args: dict, out: str) -> None:
        msgs.append({"role": "assistant", "content": f"Step {i}.", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": json.dumps(args)}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": out})

    turn(0, {"command": "grep -rn handler src"}, listing)
    turn(1, {"command": "grep -rn handler src"}, listing)  # identical
    turn(2, {"command": "grep -rn handler src"}, listing.replace("mod_1", "mod_9"))  # up to numbers
    noise = "\n".join(f"collecting item {j}" for j in range(30))
    turn(3, {"command": "pytest -x"}, f"{noise}\n{TRACE}\n1 failed in 0.3s")
    turn(4, {"command": f"cat > new_mod.py << 'EOF'\n{body}\nEOF"}, "")
    for i in range(5, 9):
        turn(i, {"command": f"ls dir{i}"}, f"a{i}.py")
    return msgs


def test_same_as_old_errors_and_call_bodies_expand_exactly(tmp_path):
    comp = Compactor(store=str(tmp_path / "s"))
    msgs = _session()
    res = comp.compact(msgs)
    out = {m.get("tool_call_id") or (m.get("tool_calls") or [{}])[0].get("id"): m for m in res.messages
           if m.get("role") in ("tool", "assistant") and (m.get("tool_call_id") or m.get("tool_calls"))}
    r1 = [m for m in res.messages if m.get("tool_call_id") == "c1"][0]["content"]
    r2 = [m for m in res.messages if m.get("tool_call_id") == "c2"][0]["content"]
    r3 = [m for m in res.messages if m.get("tool_call_id") == "c3"][0]["content"]
    assert r1.startswith("[same as ") and "up to numbers" not in r1
    assert r2.startswith("[same as ") and "up to numbers" in r2
    assert TRACE in r3 and "collecting item 17" not in r3 and "1 failed in 0.3s" in r3
    call4 = [m for m in res.messages if (m.get("tool_calls") or [{}])[0].get("id") == "c4"][0]
    args = json.loads(call4["tool_calls"][0]["function"]["arguments"])
    assert args["command"].startswith("cat > new_mod.py << 'EOF'\n[… ") and "line 17" not in args["command"]
    originals = {m["content"] for m in msgs if m.get("role") == "tool"}
    originals |= {m["tool_calls"][0]["function"]["arguments"] for m in msgs if m.get("tool_calls")}
    refs = set(REF.findall(json.dumps(res.messages, ensure_ascii=False)))
    assert len(refs) >= 4
    for ref in refs:
        assert comp.expand(ref) in originals, ref
    # the recent window stays exactly as it was
    assert [m for m in res.messages if m.get("tool_call_id") == "c8"][0]["content"] == "a8.py"
    # determinism and idempotence
    assert json.dumps(Compactor(store=str(tmp_path / "t")).compact(msgs).messages) == json.dumps(res.messages)
    again = comp.compact(res.messages)
    assert again.messages == res.messages


def test_source_lines_in_a_file_view_are_not_error_evidence(tmp_path):
    src = "\n".join(["def parse(code):", "    if code not in TABLE:", "        raise ValueError(f'unknown coupon {code!r}')",
                     "    return TABLE[code]"] + [f"X_{j} = {j}" for j in range(30)])
    msgs: list[dict] = [{"role": "user", "content": "Fix the coupon parser. Do not rename parse()."}]

    def turn(i: int, cmd: str, out: str) -> None:
        msgs.append({"role": "assistant", "content": f"Step {i}.", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": cmd})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": out})

    turn(0, "python -m pytest -x", TRACE)
    turn(1, "cat app/coupons.py", src)
    for i in range(2, 7):
        turn(i, f"ls dir{i}", f"a{i}.py")
    comp = Compactor(store=str(tmp_path / "s"))
    try:
        comp.compact(msgs, budget=10)
        raise AssertionError("10 tokens is below any floor")
    except compactor.BudgetError as exc:
        floor = exc.floor
    res = comp.compact(msgs, budget=floor + 30)
    summary = next(m["content"] for m in res.messages if str(m.get("content", "")).startswith("[compactor L3"))
    # the live error is the traceback of the test run, not the source line of the file view
    live = summary.split("## Live error", 1)[1].split("\n##", 1)[0]
    assert "`python -m pytest -x`" in live and "Traceback (most recent call last):" in live
    assert "raise ValueError" not in summary
