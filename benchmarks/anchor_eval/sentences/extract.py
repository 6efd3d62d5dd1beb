"""Prose sentences of a run's user and assistant messages, with stable locators.

This is the reader behind the sentence labels in ``labels.jsonl``. It walks each layout's JSON
directly (it deliberately does not use compactor's readers, so the labels stay independent of
the code they measure), keeps only the prose of messages written by the user or the assistant
(never tool outputs, never tool-call arguments, never hidden reasoning/thinking blocks), drops
fenced code blocks, and splits the rest into sentences.

Locator of a sentence: ``run`` (path relative to the shared data root), ``msg`` (the n-th prose
message of the run in file order, from 0), ``sent`` (the n-th sentence of that message, from 0),
``role`` (``user`` or ``assistant``) and ``sha1`` (of the sentence text, UTF-8). A trainer
rebuilds the text with :func:`sentences` and checks the sha1; the labels file carries no text.

What counts as a message's prose, per layout (the layout is the run's folder name):

- aider: ``#### `` lines are the user; every other line outside ``> `` tool echoes and the
  ``# aider chat started`` header belongs to the assistant reply that follows.
- claude-code, claude-code-chat-json, claude-agent-sdk-stream: ``text`` blocks (or a plain string
  content) of ``user``/``assistant`` records; ``tool_result``, ``tool_use`` and ``thinking`` are not prose.
- codex-rollout: ``response_item`` messages (``input_text``/``output_text``).
- mini-swe-agent, openai-chat: ``user``/``assistant`` chat messages' content.
- swe-agent: ``history`` entries of the primary agent; the user's prose is the task before the
  first assistant turn (later ``user`` entries are observations); demonstrations are skipped.
- openhands-v0: ``message`` actions, the ``thought`` the model wrote alongside a tool action, and
  the ``finish`` action's closing text. openhands-v1: message events, action ``thought`` text,
  the finish message, and the top-level ``instruction`` when no user message event exists.
- gemini-cli: non-thought ``text`` parts of ``user``/``model`` turns.
- pi-coding-agent: ``text`` blocks of ``user``/``assistant`` messages.
- atif: ``agent`` step messages, and the task text the orchestrator hands over
  (``task_selected``/``subtask_start``) as the user's.
- debug-gym: the task prompt (string fields of its JSON) as the user's; its steps are tool calls only.

Usage::

    python extract.py RUN [RUN ...]            # sampled sentences as JSONL (with text)
    python extract.py --all RUN                # every sentence
    python extract.py --context RUN            # sampled sentences inside their messages, for reading
    python extract.py --runs                   # the runs of split.json plus the remaining shared runs
    python extract.py --verify labels.jsonl    # every label's locator still yields its sha1

RUN is a path relative to the data root (``--root``, default ``../shared`` beside the project,
or ``$COMPACTOR_SHARED``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SPLIT = os.path.join(os.path.dirname(HERE), "split.json")
LAYOUTS = (
    "aider", "atif", "claude-agent-sdk-stream", "claude-code", "claude-code-chat-json",
    "codex-rollout", "debug-gym", "gemini-cli", "mini-swe-agent", "openai-chat",
    "openhands-v0", "openhands-v1", "pi-coding-agent", "swe-agent",
)
CAP = 75           # sentences sampled per run
USER_SHARE = 20    # at most this many of them from user messages
TAIL = 15          # the last TAIL assistant sentences of the run are always kept
MAX_LEN = 600      # longer "sentences" (unsplittable walls of text) are cut for hashing/reading


def default_root() -> str:
    env = os.environ.get("COMPACTOR_SHARED")
    if env:
        return env
    # benchmarks/anchor_eval/sentences -> project root -> ../shared
    project = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
    return os.path.join(os.path.dirname(project), "shared")


# ---------------------------------------------------------------- reading the layouts

def _load_json_records(path: str) -> list:
    """JSON document, JSON array, or JSONL (tolerating two objects glued on one line)."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    try:
        doc = json.loads(text)
        return doc if isinstance(doc, list) else [doc]
    except ValueError:
        pass
    dec = json.JSONDecoder()
    out = []
    for line in text.splitlines():
        line = line.strip()
        pos = 0
        while pos < len(line):
            try:
                obj, end = dec.raw_decode(line, pos)
            except ValueError:
                break
            out.append(obj)
            pos = end
            while pos < len(line) and line[pos].isspace():
                pos += 1
    return out


def _blocks_text(content, skip_types=("tool_result", "tool_use", "thinking", "redacted_thinking",
                                      "toolCall", "image", "function_call")) -> str:
    if isinstance(content, str):
        return content
    parts = []
    if isinstance(content, list):
        for b in content:
            if isinstance(b, str):
                parts.append(b)
            elif isinstance(b, dict) and b.get("type") not in skip_types:
                t = b.get("text")
                if isinstance(t, str):
                    parts.append(t)
    return "\n\n".join(parts)


def _walk_aider(path):
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = fh.read().splitlines()
    role, buf = None, []
    for line in lines:
        if line.startswith("#### ") or line == "####":
            if role == "assistant" and buf:
                yield role, "\n".join(buf)
                buf = []
            role = "user"
            buf.append(line[5:])
            continue
        if line.startswith("> ") or line == ">" or line.startswith("# aider chat started"):
            if role == "user" and buf:
                yield role, "\n".join(buf)
                buf, role = [], None
            continue
        if role == "user":
            yield role, "\n".join(buf)
            buf = []
        role = "assistant"
        buf.append(line)
    if role and buf:
        yield role, "\n".join(buf)


def _walk_claude(path):
    for rec in _load_json_records(path):
        if not isinstance(rec, dict) or rec.get("type") not in ("user", "assistant"):
            continue
        if rec.get("isMeta"):
            continue
        msg = rec.get("message") or {}
        role = msg.get("role") or rec["type"]
        if role not in ("user", "assistant"):
            continue
        text = _blocks_text(msg.get("content"))
        if text.strip():
            yield role, text


def _walk_codex(path):
    for rec in _load_json_records(path):
        if not isinstance(rec, dict) or rec.get("type") != "response_item":
            continue
        p = rec.get("payload") or {}
        if p.get("type") == "message" and p.get("role") in ("user", "assistant"):
            text = _blocks_text(p.get("content"))
            if text.strip():
                yield p["role"], text


def _walk_chat(messages):
    for m in messages or []:
        if isinstance(m, dict) and m.get("role") in ("user", "assistant"):
            text = _blocks_text(m.get("content"))
            if text.strip():
                yield m["role"], text


def _walk_mini(path):
    doc = _load_json_records(path)[0]
    yield from _walk_chat(doc.get("messages"))


def _walk_openai(path):
    doc = _load_json_records(path)[0]
    yield from _walk_chat(doc.get("messages") if isinstance(doc, dict) else doc)


def _walk_swe(path):
    doc = _load_json_records(path)[0]
    seen_assistant = False
    for m in doc.get("history") or []:
        if m.get("agent", "primary") not in ("primary", "main") or m.get("is_demo"):
            continue
        if m.get("message_type") == "demonstration":
            continue
        role = m.get("role")
        if role == "assistant":
            seen_assistant = True
            text = _blocks_text(m.get("content"))
            if text.strip():
                yield role, text
        elif role == "user" and not seen_assistant:
            text = _blocks_text(m.get("content"))
            if text.strip():
                yield role, text


def _oh0_events(path):
    for rec in _load_json_records(path):
        if isinstance(rec, dict) and isinstance(rec.get("history"), list):
            yield rec["history"]
        elif isinstance(rec, dict):
            yield [rec]
        elif isinstance(rec, list):
            yield rec


def _walk_oh0(path):
    for history in _oh0_events(path):
        seen_message = False
        for e in history:
            if not isinstance(e, dict):
                continue
            act = e.get("action")
            args = e.get("args") or e  # resolver output keeps the fields on the event
            if act == "message":
                src = e.get("source")
                role = {"user": "user", "agent": "assistant"}.get(src)
                if role is None:
                    role = "assistant" if seen_message else "user"
                seen_message = True
                text = args.get("content") or ""
                if text.strip():
                    yield role, text
            elif act == "finish":
                text = args.get("final_thought") or args.get("thought") or args.get("message") or ""
                if text.strip():
                    yield "assistant", text
            elif act and act not in ("system", "recall", "think") and e.get("observation") is None:
                text = args.get("thought") or ""
                if text.strip():
                    yield "assistant", text


def _walk_oh1(path):
    for doc in _load_json_records(path):
        if not isinstance(doc, dict):
            continue
        history = doc.get("history") or []
        has_user = any(e.get("kind") == "MessageEvent" and e.get("source") == "user" for e in history)
        if not has_user and isinstance(doc.get("instruction"), str):
            yield "user", doc["instruction"]
        for e in history:
            kind = e.get("kind")
            if kind == "MessageEvent":
                lm = e.get("llm_message") or {}
                role = lm.get("role") or ("user" if e.get("source") == "user" else "assistant")
                if role in ("user", "assistant"):
                    text = _blocks_text(lm.get("content"))
                    if text.strip():
                        yield role, text
            elif kind == "ActionEvent":
                text = _blocks_text(e.get("thought"))
                if text.strip():
                    yield "assistant", text
                a = e.get("action") or {}
                if a.get("kind") == "FinishAction" and isinstance(a.get("message"), str) and a["message"].strip():
                    yield "assistant", a["message"]


def _walk_gemini(path):
    recs = _load_json_records(path)
    if len(recs) == 1 and isinstance(recs[0], list):
        recs = recs[0]
    for m in recs:
        if not isinstance(m, dict):
            continue
        role = {"user": "user", "model": "assistant"}.get(m.get("role"))
        if role is None:
            continue
        texts = [p["text"] for p in m.get("parts") or []
                 if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")]
        text = "\n\n".join(texts)
        if text.strip():
            yield role, text


def _walk_pi(path):
    for rec in _load_json_records(path):
        if not isinstance(rec, dict) or rec.get("type") != "message":
            continue
        msg = rec.get("message") or {}
        if msg.get("role") in ("user", "assistant"):
            text = _blocks_text(msg.get("content"))
            if text.strip():
                yield msg["role"], text


def _walk_atif(path):
    for rec in _load_json_records(path):
        if not isinstance(rec, dict) or rec.get("__header__"):
            continue
        src = rec.get("source")
        msg = rec.get("message")
        if not isinstance(msg, str) or not msg.strip():
            continue
        ev = (rec.get("extra") or {}).get("event_type")
        if src == "agent":
            yield "assistant", msg
        elif src == "user":
            yield "user", msg
        elif src == "system" and ev in ("task_selected", "subtask_start"):
            yield "user", msg


def _strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


def _walk_debug_gym(path):
    doc = _load_json_records(path)[0]
    for step in doc.get("log") or []:
        for pair in step.get("prompt_response_pairs") or []:
            prompt = pair.get("prompt") or []
            if prompt and prompt[0].get("role") == "user":
                content = prompt[0].get("content") or ""
                try:
                    content = "\n\n".join(_strings(json.loads(content)))
                except ValueError:
                    pass
                yield "user", content
                return


WALKERS = {
    "aider": _walk_aider,
    "atif": _walk_atif,
    "claude-agent-sdk-stream": _walk_claude,
    "claude-code": _walk_claude,
    "claude-code-chat-json": _walk_claude,
    "codex-rollout": _walk_codex,
    "debug-gym": _walk_debug_gym,
    "gemini-cli": _walk_gemini,
    "mini-swe-agent": _walk_mini,
    "openai-chat": _walk_openai,
    "openhands-v0": _walk_oh0,
    "openhands-v1": _walk_oh1,
    "pi-coding-agent": _walk_pi,
    "swe-agent": _walk_swe,
}


def layout_of(run: str) -> str:
    parts = run.replace(os.sep, "/").split("/")
    for p in reversed(parts[:-1]):
        if p in WALKERS:
            return p
    raise ValueError(f"{run}: no layout folder in the path (expected one of {', '.join(LAYOUTS)})")


# ---------------------------------------------------------------- splitting

_TEXT_CALL = re.compile(r"<function=[^>]*>.*?(?:</function>|\Z)", re.S)
_FENCE = re.compile(r"^\s*(```|~~~)")
_SPLIT_EN = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[`*_]*[A-Z0-9\u4e00-\u9fff])")
_NOT_AN_END = re.compile(r"(^\(?\d{1,3}[.)]|\b(?:e\.g|i\.e|vs|etc|approx|No|Dr|Mr|Mrs|Fig)\.)$")
_SPLIT_ZH = re.compile(r"(?<=[。！？；])")


def split_sentences(text: str) -> list[str]:
    """Drop fenced code blocks, split on line breaks, then on sentence ends (English and Chinese)."""
    out = []
    in_fence = False
    text = _TEXT_CALL.sub("\n", text)  # tool calls written inline as <function=...> markup
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        line = line.strip()
        if not line:
            continue
        for piece in _SPLIT_ZH.split(line):
            carry = ""
            for s in _SPLIT_EN.split(piece):
                s = (carry + " " + s.strip()).strip() if carry else s.strip()
                carry = ""
                if _NOT_AN_END.search(s):
                    carry = s          # "1." of a numbered list, "e.g.": not a sentence end
                    continue
                if s and any(ch.isalnum() for ch in s):
                    out.append(s[:MAX_LEN])
            if carry and any(ch.isalnum() for ch in carry):
                out.append(carry[:MAX_LEN])
    return out


def sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def sentences(root: str, run: str) -> list[dict]:
    """Every prose sentence of ``run`` with its locator, in file order."""
    walker = WALKERS[layout_of(run)]
    out = []
    for msg, (role, text) in enumerate(walker(os.path.join(root, run))):
        for sent, s in enumerate(split_sentences(text)):
            out.append({"run": run, "msg": msg, "sent": sent, "role": role, "sha1": sha1(s), "text": s})
    # messages whose text split into nothing still advance the ordinal, so locators stay stable
    return out


def _rank(s: dict) -> str:
    return sha1(f"{s['run']}\0{s['msg']}\0{s['sent']}")


def sample(items: list[dict], cap: int = CAP) -> list[dict]:
    """Deterministic stratified sample: user sentences (up to USER_SHARE), the last TAIL assistant
    sentences, then the rest by hash rank; repeated texts (same sha1) are kept once."""
    seen, uniq = set(), []
    for s in items:
        if s["sha1"] not in seen:
            seen.add(s["sha1"])
            uniq.append(s)
    if len(uniq) <= cap:
        return uniq
    users = [s for s in uniq if s["role"] == "user"]
    asst = [s for s in uniq if s["role"] != "user"]
    chosen = set()
    for s in sorted(users, key=_rank)[:USER_SHARE]:
        chosen.add(id(s))
    for s in asst[-TAIL:]:
        chosen.add(id(s))
    for s in sorted(uniq, key=_rank):
        if len(chosen) >= cap:
            break
        chosen.add(id(s))
    return [s for s in uniq if id(s) in chosen]


def all_runs(root: str) -> list[tuple[str, str]]:
    """(run, half) for split.json's runs, then any other run of a known layout under the root (tune)."""
    with open(SPLIT, encoding="utf-8") as fh:
        split = json.load(fh)["runs"]
    runs = [(r, v["half"]) for r, v in sorted(split.items())]
    known = set(split)
    for top in ("corpus", "trajectories-extra"):
        base = os.path.join(root, top)
        for lay in LAYOUTS:
            d = os.path.join(base, lay)
            if not os.path.isdir(d):
                continue
            for name in sorted(os.listdir(d)):
                rel = f"{top}/{lay}/{name}"
                if rel not in known and os.path.isfile(os.path.join(d, name)):
                    runs.append((rel, "tune"))
    return runs


def _context(root: str, run: str, cap: int) -> str:
    """Messages holding a sampled sentence, sampled ones in full with their locator, others cut."""
    items = sentences(root, run)
    picked = {(s["msg"], s["sent"]) for s in sample(items, cap)}
    msgs = {m for m, _ in picked}
    lines, cur = [], None
    for s in items:
        if s["msg"] not in msgs:
            continue
        if s["msg"] != cur:
            cur = s["msg"]
            lines.append(f"--- msg {cur} [{s['role']}]")
        if (s["msg"], s["sent"]) in picked:
            lines.append(f"{s['msg']}.{s['sent']}| {s['text'][:400]}")
        else:
            lines.append(f"      . {s['text'][:90]}")
    return "\n".join(lines)


def verify(root: str, labels_path: str) -> list[str]:
    """Problems with a labels file: locators that no longer exist or whose text changed."""
    problems, cache = [], {}
    with open(labels_path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            try:
                o = json.loads(line)
                run, key = o["run"], (o["msg"], o["sent"])
            except (ValueError, KeyError, TypeError) as exc:
                problems.append(f"{labels_path}:{lineno}: not a label record ({exc})")
                continue
            if run not in cache:
                cache[run] = {(s["msg"], s["sent"]): s["sha1"] for s in sentences(root, run)}
            got = cache[run].get(key)
            if got is None:
                problems.append(f"{labels_path}:{lineno}: {run} msg {key[0]} sent {key[1]} does not exist")
            elif got != o.get("sha1"):
                problems.append(f"{labels_path}:{lineno}: {run} msg {key[0]} sent {key[1]} text changed (sha1 {got})")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*")
    ap.add_argument("--root", default=default_root())
    ap.add_argument("--all", action="store_true", help="every sentence, not the sample")
    ap.add_argument("--cap", type=int, default=CAP)
    ap.add_argument("--context", action="store_true", help="print sampled sentences in their messages")
    ap.add_argument("--runs", dest="list_runs", action="store_true", help="list runs and halves")
    ap.add_argument("--verify", metavar="LABELS", help="check a labels file against the runs")
    a = ap.parse_args(argv)
    if a.verify:
        try:
            problems = verify(a.root, a.verify)
        except (OSError, ValueError) as exc:
            print(f"{a.verify}: cannot verify: {exc}", file=sys.stderr)
            return 2
        for p in problems:
            print(p, file=sys.stderr)
        return 2 if problems else 0
    if a.list_runs:
        for run, half in all_runs(a.root):
            print(f"{half}\t{run}")
        return 0
    for run in a.runs:
        try:
            if a.context:
                print(f"=== {run}")
                print(_context(a.root, run, a.cap))
                continue
            items = sentences(a.root, run)
            for s in items if a.all else sample(items, a.cap):
                print(json.dumps(s, ensure_ascii=False, sort_keys=True))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            print(f"{run}: cannot read: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
