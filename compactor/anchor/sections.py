"""The anchor's sections, derived from the run model: one small function each.

:data:`PRIORITY` is the one order in which the sections survive a size bound (the anchor's own,
:mod:`compactor.anchor.bound`, and Level 3 in :mod:`compactor.budget`): status, live failure,
constraints, changes, failed approaches, next step, then the rest. The definitions of the
sections are in ``docs/anchor.md``.
"""

from __future__ import annotations

from functools import lru_cache

import regex

from ..lazyre import lazy_regex
from ..models import (ChangeMade, Decision, ErrorLife, Evidence, ExcludedApproach, FailedAttempt, Fact, FileTouch,
                      NextStep, OpenQuestion, RunModel, RunStep, UserConstraint)
from ._text import item_id
from .cues import CHROME_FACT, TOOL_CHROME, label_sentence
from .runmodel import HOOK_BLOCK, chrome_line, command_family, is_check

__all__ = ["PRIORITY", "changes", "constraints", "decisions", "evidence", "failed_approaches", "facts", "searched_steps",
           "live_failure", "live_failure_line", "next_steps", "open_questions", "status_line"]

# the sections in the order they are kept under a size bound (the rest: intent, open questions,
# excluded approaches, facts, resolved evidence, the files trail)
PRIORITY = ("status", "live_failure", "constraints", "changes", "failed_approaches", "next_step",
            "decisions", "intent", "open_questions", "excluded_approaches", "facts", "resolved_evidence", "files")

_WORDS = {
    "en": {
        "working": "Working", "finished": "Finished", "submitted": "Submitted",
        "stopped-limit": "Stopped by a step or cost limit", "stopped-error": "Stopped by an API or harness error",
        "waiting": "Waiting for the user", "at": "at", "calls": "tool calls", "last": "last",
        "ok": "succeeded", "failed": "failed", "pending": "no result yet", "evidence": "evidence",
        "no_check": "no passing check after the last change", "none": "none", "seen": "seen",
        "times": "times", "from": "from", "no_calls": "no tool calls", "last_change": "last change",
        "no_change": "no change yet", "last_check": "last run",
    },
    "zh": {
        "working": "进行中", "finished": "已完成", "submitted": "已提交", "stopped-limit": "因步数或费用上限停止",
        "stopped-error": "因 API 或运行环境错误停止", "waiting": "等待用户回复", "at": "于", "calls": "次工具调用",
        "last": "最后", "ok": "成功", "failed": "失败", "pending": "尚无结果", "evidence": "证据",
        "no_check": "最后一次改动之后没有通过的检查", "none": "无", "seen": "出现", "times": "次", "from": "来自",
        "no_calls": "没有工具调用", "last_change": "最后一次改动", "no_change": "尚无改动", "last_check": "最后一次运行",
    },
}
_SEP = {"en": ": ", "zh": "："}


@lru_cache(maxsize=4096)
def _num(step: str) -> int:
    digits = "".join(ch for ch in step if ch.isdigit())
    return int(digits) if digits else 0


def _code(text: str) -> str:
    text = text.replace("\n", " ").strip()
    return f"`{text}`" if "`" not in text else text


def _evidence_step(run: RunModel) -> RunStep | None:
    """The last passing check (a test or a run) after the last change."""
    last_change = _num(run.last_change_step)
    for st in reversed(run.steps):
        if st.done and st.ok and _num(st.step) >= last_change and is_check(st):
            return st
    return None


def status_line(run: RunModel, lang: str = "en") -> str:
    """Where the task stands, in one line, from the outcomes the tools reported."""
    W = _WORDS["zh" if lang == "zh" else "en"]
    sep = _SEP["zh" if lang == "zh" else "en"]
    head = W[run.status]
    where = f" {W['at']} {run.status_step}" if run.status_step else ""
    if run.status in ("stopped-limit", "stopped-error", "waiting"):
        return f"{head}{where}{sep}{run.status_note}" if run.status_note else head + where
    if not run.calls:
        return f"{head}{where} ({W['no_calls']})"
    if run.status in ("finished", "submitted"):
        ev = _evidence_step(run)
        if ev is not None:
            counts = f", {ev.passed} passed" if ev.passed else ""
            return f"{head}{where} ({W['evidence']}{sep}{_code(ev.target[:120])} {W['ok']} {W['at']} {ev.step}{counts})"
        return f"{head}{where} ({W['no_check']})" if run.last_change_step else head + where
    # what moved the work: the last change and the last check (reads and searches do not)
    parts = [f"{W['last_change']} {W['at']} {run.last_change_step}" if run.last_change_step else W["no_change"]]
    check = next((st for st in reversed(run.steps) if st.action in ("test", "run", "install", "submit")), None)
    if check is not None:
        outcome = W["pending"] if not check.done else (W["ok"] if check.ok else W["failed"])
        parts.append(f"{W['last_check']}{sep}{_code(check.target[:120])} {outcome} {W['at']} {check.step}")
    return f"{head}{sep}" + "; ".join(parts)


# The next steps the anchor derives from the run (not the agent's own words) are written in
# English in the model; the Chinese rendering says them in Chinese. Each pattern is one template
# of this module or of build.py, its parts (steps, commands, error lines) kept verbatim.
_STEP_ZH = (
    (lazy_regex(r"^resolve the live failure: (.*?)(?:; then re-run (`[^`\n]*`))?$", regex.S),
     lambda m: f"解决当前失败：{m.group(1)}" + (f"；然后重新运行 {m.group(2)}" if m.group(2) else "")),
    (lazy_regex(r"^check the change of (\S+): re-run (`.*?`) \(it failed at (\S+) with (`.*`)\)$", regex.S),
     lambda m: f"检查 {m.group(1)} 的改动：重新运行 {m.group(2)}（它在 {m.group(3)} 失败：{m.group(4)}）"),
    (lazy_regex(r"^verify the change of (\S+): run (.*) again \(no passing run since\)$", regex.S),
     lambda m: f"验证 {m.group(1)} 的改动：再运行一次 {m.group(2)}（此后没有通过的运行）"),
    (lazy_regex(r"^carry out the stated plan: (.*)$", regex.S), lambda m: f"执行已说明的计划：{m.group(1)}"),
    (lazy_regex(r"^the run stopped at its step or cost limit \((\S+)\); continue from where it stopped$"),
     lambda m: f"运行在 {m.group(1)} 因步数或费用上限停止；从停下的地方继续"),
    (lazy_regex(r"^the run stopped on an API or harness error \((\S+)\)(?:: retry (`.*`))?$", regex.S),
     lambda m: f"运行在 {m.group(1)} 因 API 或运行环境错误停止" + (f"：重试 {m.group(2)}" if m.group(2) else "")),
    (lazy_regex(r"^answer the pending requests?: (.*)$", regex.S), lambda m: f"答复待处理的需求：{m.group(1)}"),
)


def step_text(text: str, lang: str = "en") -> str:
    """A next step as the rendering in ``lang`` shows it: a derived step in that language, the
    agent's own words as they were written."""
    if lang != "zh" or not text[:1].islower():
        return text
    for pat, say in _STEP_ZH:
        m = pat.match(text)
        if m:
            return say(m)
    return text


def live_failure(run: RunModel) -> ErrorLife | None:
    """The newest error that is neither resolved nor stale."""
    live = [e for e in run.errors if e.state == "live"]
    return max(live, key=lambda e: (_num(e.last_step), run.errors.index(e))) if live else None


def live_failure_line(run: RunModel, lang: str = "en") -> str:
    """The live failure in one line, or "none" (reads ``run.errors`` only)."""
    W = _WORDS["zh" if lang == "zh" else "en"]
    e = live_failure(run)
    if e is None:
        return W["none"]
    where = f" ({e.location})" if e.location else ""
    seen = f"{e.first_step}–{e.last_step}, {W['seen']} {e.count} {W['times']}" if e.count > 1 else e.last_step
    return f"{_code(e.text)}{where} — {W['from']} {_code(e.family[:100])} ({seen})"


def _memoised(memo: dict | None, key: tuple, make):
    """``make()``, or what it gave for an equal ``key`` last time (the key's records are compared
    by identity first: an unchanged record is the same object)."""
    if memo is None:
        return make()
    held = memo.get(key[0])
    if held is not None and held[0] == key:
        return held[1]
    got = make()
    memo[key[0]] = (key, got)
    return got


def index(run: RunModel) -> tuple[dict, dict, dict]:
    """(file lives by path, command families by name, the recent steps by step id) of ``run``."""
    by_step: dict[str, list[RunStep]] = {}
    for st in run.steps:
        by_step.setdefault(st.step, []).append(st)
    return {f.path: f for f in run.files}, {f.family: f for f in run.families}, by_step


def changes(items: list[ChangeMade], run: RunModel, memo: dict | None = None,
            idx: tuple[dict, dict, dict] | None = None, fold=None) -> list[ChangeMade]:
    """Net changes, per file: a change whose file was reverted, or created and deleted again, is
    gone; a change whose call failed (an install that exited 100, an edit the tool rejected) is
    failed; a call that never returned is pending."""
    if not run.calls:
        return items
    files, fams, by_step = idx if idx is not None else index(run)
    out = []
    if fold is not None and memo is not None:
        # (a fold's stamps: the item is derived again only when a step, file or family it reads
        # changed since)
        held_of, sf, ss, fam_rev, rev = memo.get, fold.stamp_file, fold.stamp_step, fold.fam_rev, fold.rev
        for c in items:
            held = held_of(("chs", c.id))
            if held is not None and held[0] is c:
                cf = c.files
                if not cf:
                    newest = fam_rev
                elif len(cf) == 1:
                    newest = sf.get(cf[0], 0)
                else:
                    newest = max(sf.get(p, 0) for p in cf)
                if newest <= held[1] and ss.get(c.source_step, 0) <= held[1]:
                    if held[2] is not None:
                        out.append(held[2])
                    continue
            got = _change(c, files, by_step, fams)
            memo[("chs", c.id)] = (c, rev, got)
            if got is not None:
                out.append(got)
        return out
    for c in items:
        steps = tuple(by_step.get(c.source_step, ()))
        key = (("ch", c.id), c, tuple(files.get(p) for p in c.files), steps,
               tuple(fams.get(st.family) for st in steps))
        got = _memoised(memo, key, lambda c=c: _change(c, files, by_step, fams))
        if got is not None:
            out.append(got)
    return out


def _change(c: ChangeMade, files: dict, by_step: dict, fams: dict) -> ChangeMade | None:
    status = c.status
    if c.files:
        lives = [files.get(p) for p in c.files]
        reverted = [f for f in lives if f is not None and f.change == "reverted"]
        if len(reverted) == len(lives):
            return None
        if reverted:  # part of the call's effect was undone later: the rest stays
            note = "; ".join(f"{f.path} restored at {f.last_step}" for f in reverted)
            c = c.model_copy(update={"files": [p for p in c.files if p not in {f.path for f in reverted}],
                                     "description": f"{c.description} ({note})"})
        steps = [s for s in by_step.get(c.source_step, ()) if set(s.files) & set(c.files)]
        if steps and all(s.done and not s.ok for s in steps):
            status = "failed"
    else:
        steps = [s for s in by_step.get(c.source_step, ()) if s.action in ("install", "run", "edit")]
        later_ok = any((f := fams.get(s.family)) is not None and f.last_ok and f.attempts > 1 for s in steps)
        if steps and not later_ok:
            if all(s.done and not s.ok for s in steps):
                status = "failed"
            elif all(not s.done for s in steps):
                status = "pending"
    return c if status == c.status else c.model_copy(update={"status": status})


def failed_approaches(items: list[FailedAttempt], run: RunModel, net: list[ChangeMade],
                      memo: dict | None = None, idx: tuple[dict, dict, dict] | None = None) -> list[FailedAttempt]:
    """Attempts the tools reported as failed (a call that succeeded is never one, whatever its
    output says), resolved when the same command later succeeded."""
    if not run.calls:
        return items
    _, fams, by_step = idx if idx is not None else index(run)
    final = {c.description for c in net if c.status == "applied"}
    out = []
    for fa in items:
        fam = fams.get(command_family(fa.command))
        steps = by_step.get(fa.source_step, [])
        key = (("fa", fa.id), fa, fa.command in final, fam, tuple(steps))
        got = _memoised(memo, key, lambda fa=fa, fam=fam, steps=steps: _failed(fa, fam, steps, final))
        if got is not None:
            out.append(got)
    return out


# a read or search of a path that is not there: the agent looking around, not an approach that failed
_MISSING = lazy_regex(r"\b(?:File|Path|Directory) does not exist\b", regex.I)  # (a read tool's own words)


def _failed(fa: FailedAttempt, fam, steps: list, final: set) -> FailedAttempt | None:
    if fa.command in final:
        return None
    if steps and all(s.done and s.ok for s in steps):
        return None
    mine = [s for s in steps if s.target == fa.command] or steps  # (a step may hold several calls)
    if mine and all(s.action in ("read", "search") for s in mine) and _MISSING.search(fa.error):
        return None
    # the decisive line as the tool reported it, when what was taken for the error is chrome or markup
    if steps and (not fa.error or chrome_line(fa.error) or _MARKUP.match(fa.error)):
        err = next((s.error for s in steps if s.done and not s.ok and s.error), "")
        if err and err != fa.error:
            fa = fa.model_copy(update={"error": err})
    if fa.status != "resolved" and fam is not None and fam.last_ok and _num(fam.last_step) > _num(fa.last_step):
        fa = fa.model_copy(update={"status": "resolved", "resolved_at": fam.last_step})
    return fa


def dead_ends(items: list[ExcludedApproach], net: list[ChangeMade]) -> list[ExcludedApproach]:
    """Excluded approaches, without an edit that is part of the final change."""
    final = [c.description for c in net if c.status == "applied"]
    return [x for x in items if not any(x.approach and (x.approach in d or d in x.approach) for d in final)]


# a line a tool printed that is never error evidence, whatever word it contains: a line of a
# numbered source listing (a debugger's ``list``, ``cat -n``), a passing test's line
# ("(pass) parser > rejects invalid status", "test_x PASSED", "test_y ... ok")
_NOT_ERROR_LINE = lazy_regex(
    r"^(?:[ ]{2,}\d{1,6}|\s*\d{1,6}\t)(?!\s+(?:failed|passed|errors?|warnings?|skipped|tests?|xfailed)\b)(?:\s*(?:->|>>|B))?\s+\S(?!.*\b(?:Error|Exception|FAILED|failed)\b:)|"
    r"^\s*(?:\(pass\)|\[pass\]|✓|✔|√|PASS\b|ok \d+\b)|::\S+\s+PASSED\b|\s\.\.\.\s+ok\s*$")


def _chrome_evidence(e: Evidence, searched: frozenset[str] = frozenset()) -> bool:
    if e.family not in ("error", "test-failure", "exit-code", "verification"):
        return False
    if e.family == "verification":  # a package manager's "Successfully installed": not a check
        return "\n" not in e.text.strip("\n") and chrome_line(e.text.strip())
    # a line a search printed is a hit in the code ("1430-   tracing::error!(...)"), not an error of the run
    return _chrome_error_line(e.text) or ("\n" not in e.text.strip("\n") and e.source_step in searched)


@lru_cache(maxsize=4096)
def _chrome_error_line(text: str) -> bool:
    # (every item is checked again whenever the run moves on: the verdict on its text is kept)
    if "\n" in text.strip("\n"):
        return False
    s = text.strip()
    return bool(_NOT_ERROR_LINE.search(text) or CHROME_FACT.match(s) or TOOL_CHROME.match(s))


def searched_steps(run: RunModel) -> frozenset[str]:
    """The steps whose every call was a search (grep, find, a search tool)."""
    acts: dict[str, set[str]] = {}
    for st in run.steps:
        acts.setdefault(st.step, set()).add(st.action)
    return frozenset(k for k, v in acts.items() if v == {"search"})


def evidence(items: list[Evidence], run: RunModel, memo: dict | None = None,
             searched: frozenset[str] | None = None, failed: list[FailedAttempt] | None = None,
             idx: tuple[dict, dict, dict] | None = None) -> list[Evidence]:
    """Error evidence takes the state of its error's life: live only while that error is live.
    Chrome is never evidence (a listing's line, a passing test's line, build progress, a search
    hit, a package manager's success line).
    (Of ``run`` it reads ``calls``, ``errors`` and the steps that only searched (``searched``, from
    :func:`searched_steps` when not given): the anchor's fold keeps the result while they and
    ``items`` are equal.)"""
    if searched is None:
        searched = searched_steps(run) if run.calls else frozenset()
    if any(_chrome_evidence(e, searched) for e in items):
        items = [e for e in items if not _chrome_evidence(e, searched)]
    if not run.calls:
        return select_evidence(items, run, failed, idx)
    errors = tuple(run.errors)
    items = [_memoised(memo, (("ev", e.id), e, errors), lambda e=e: _evidence(e, run)) for e in items]
    return select_evidence(items, run, failed, idx)


_ERROR_FAMILIES = ("error", "trace", "exit-code", "test-failure")
_FAILED_TEST = lazy_regex(r"^\s*FAILED\s+\S+::")  # a failing test with its reason: the best key line
# what differs between two sightings of one error: a duration, an address, a process id
_MASK = lazy_regex(r"\b\d+(?:\.\d+)?\s*(?:s|ms|sec|seconds?)\b|\b0x[0-9a-fA-F]+\b|\b(?:pid|PID)[ =:]?\d+")


def select_evidence(items: list[Evidence], run: RunModel, failed: list[FailedAttempt] | None = None,
                    idx: tuple[dict, dict, dict] | None = None) -> list[Evidence]:
    """What of the run's output a successor needs as evidence, decided by the run model:
    the live failure's lines; an error that is no longer live only where it backs a failed
    approach (a step of a failed attempt), marked with what resolved it; of a check run
    several times, the failing lines of its last run only; each error once (the same line with
    other numbers is the same error: the newest stays). Never a passing or success line (the
    status line carries the check that passed), nor the log lines of a run that succeeded (a
    suite that passed while logging ERROR lines on purpose)."""
    _, fams, by_step = idx if idx is not None else index(run)
    fa_at = {s: fa.id for fa in failed or () for s in (fa.source_step, fa.last_step) if s}
    failed_steps = set(fa_at)
    failed_fams = {command_family(fa.command) for fa in failed or ()}
    live = live_failure(run)
    keep: list[tuple[tuple | None, Evidence]] = []
    ranks: dict[int, tuple] = {}
    newest_out: dict[str, str] = {}  # per command family, the newest step that printed an error
    for e in items:
        if e.family in _ERROR_FAMILIES:
            for st in by_step.get(e.source_step, ()):
                if st.family and _num(e.source_step) > _num(newest_out.get(st.family, "")):
                    newest_out[st.family] = e.source_step
    checks = [e for e in items if e.family == "verification"]
    # of the passing checks only the newest: the run's last word on what works (the earlier
    # passes and success lines say nothing a successor needs)
    shown_check = checks[-1] if checks else None
    for e in items:
        if e.family == "verification" and e is not shown_check:
            continue
        if e.family in _ERROR_FAMILIES and run.calls:
            life = _life(e, run)
            backs = e.source_step in failed_steps or (life is not None and (life is live or life.family in failed_fams))
            steps = by_step.get(e.source_step, [])
            if (steps and all(s.done and s.ok and not s.failed for s in steps)
                    and any(s.passed for s in steps) and not backs):
                continue  # the log of a suite that passed (N passed, 0 failed)
            if e.status == "live" and not backs and steps:
                newer = [f for f in (fams.get(s.family) for s in steps if s.family)
                         if f is not None and _num(f.last_step) > _num(e.source_step)]
                if newer and len(newer) == len(steps):
                    if not all(f.last_ok for f in newer) or any(
                            _num(newest_out.get(f.family, "")) > _num(e.source_step) for f in newer):
                        continue  # an earlier run of a command whose later run failed too: the newer output stands
                    # the same command ran clean later: what it printed is what the run fixed, resolved there
                    keep.append((None, e.model_copy(update={
                        "status": "resolved", "resolved_at": max((f.last_step for f in newer), key=_num)})))
                    continue
            if e.status != "live":
                # resolved by a later run or fix (what the run's change fixed) or backing a failed
                # approach: once, as its key line; stale and backing nothing: gone
                if not backs and e.status != "resolved":
                    continue
                e = _key_line(e, life)
                # (what backs a failed attempt once per attempt: the same error after another try is
                # the lesson of that try)
                once = (("fa", fa_at[e.source_step]) if e.source_step in fa_at else
                        ("life", life.signature) if life is not None else ("step", e.source_step))
                rank = (_num(e.source_step), bool(_FAILED_TEST.match(e.text)),
                        bool(life and life.text and life.text in e.text),
                        bool(_ERROR_LINE.match(e.text)), -len(keep))
                keep.append((once, e))
                ranks[id(e)] = rank
                continue
        keep.append((None, e))
    # each error once: of an error's sightings the newest, of one sighting its key line (the line
    # the run model took for the error, else the first error line of that output)
    chosen: dict[tuple, Evidence] = {}
    for once, e in keep:
        if once is None:
            continue
        held = chosen.get(once)
        if held is None or ranks[id(e)] > ranks[id(held)]:
            chosen[once] = e
    seen: set[str] = set()
    out: list[Evidence] = []
    for once, e in reversed(keep):
        if once is not None and chosen[once] is not e:
            continue
        sig = _MASK.sub("#", _key_text(e.text).rstrip("\"'.,;")) if e.family in _ERROR_FAMILIES else e.id
        if sig in seen:
            continue
        seen.add(sig)
        out.append(e)
    out.reverse()
    return out


def _life(e: Evidence, run: RunModel) -> ErrorLife | None:
    """The run model's life of the error ``e`` shows (by its line, else by its step)."""
    life = next((x for x in reversed(run.errors) if x.text and (x.text in e.text or e.text in x.text)), None)
    if life is None:
        life = next((x for x in reversed(run.errors) if x.first_step == e.source_step or x.last_step == e.source_step),
                    None)
    return life


_ERROR_LINE = lazy_regex(r"^\s*(?:[\w.]*(?:Error|Exception|Exit|Interrupt)\b|error(?:\[\w+\])?:|E\s{2,}\S|FAILED\b).*$", regex.M)


def _key_text(text: str) -> str:
    """An error's key line: the text itself when one line, else its last exception or error line."""
    if "\n" not in text.strip("\n"):
        return text.strip()
    hits = _ERROR_LINE.findall(text)
    return hits[-1].strip() if hits else text.strip()


def _key_line(e: Evidence, life: ErrorLife | None) -> Evidence:
    """A traceback that is no longer live, as its key line (the exception), not the frames."""
    if "\n" not in e.text.strip("\n"):
        return e
    if life is not None and life.text and life.text in e.text:
        line = life.text
    else:
        hits = _ERROR_LINE.findall(e.text)
        line = hits[-1].strip() if hits else ""
    return e.model_copy(update={"text": line}) if line else e


def _evidence(e: Evidence, run: RunModel) -> Evidence:
    if e.family not in ("trace", "error", "exit-code", "test-failure"):
        return e
    life = _life(e, run)
    if life is not None:
        state, at = life.state, life.at
    else:
        state, at = e.status, e.resolved_at
    if state == "live" and e.status == "resolved":
        state, at = "resolved", e.resolved_at
    if state != e.status or (state != "live" and at != e.resolved_at):
        e = e.model_copy(update={"status": state, "resolved_at": (at or life.last_step) if state != "live" else ""})
    return e


@lru_cache(maxsize=4096)
def _label(text: str, role: str) -> str:
    return label_sentence(text, {"role": role})


# a sentence cut where its content begins: "The cleanest approach would be to:", "it should"
# (the list or the code that followed is the content, and it is not in the sentence)
_LEAD_IN = lazy_regex(r"(?:^|\s)(?:to|be|is|are|was|were|the following|following|these|this|as follows|would|will|"
                      r"should|must|shall|can|need to|have to|and|or|with|of|for)\s*[:：,;]?\s*$", regex.I)
_SHORT_LEAD_IN = lazy_regex(r"^\s*\S+(?:\s+\S+){0,2}\s*$")


def _cut(text: str, *, colon: bool) -> bool:
    t = text.strip()
    if colon:  # a decision that announces what follows ends on a colon
        return t.endswith((":", "：")) and bool(_LEAD_IN.search(t[:-1]))
    return bool(_SHORT_LEAD_IN.match(t) and _LEAD_IN.search(t))


def decisions(items: list[Decision]) -> list[Decision]:
    """Explicit choices: a decision sentence, or a choice with its reason; never a lead-in whose
    choice is in what followed it."""
    return [d for d in items if not _cut(d.decision, colon=True) and (
        d.reason or _label(d.decision, "assistant") == "decision" or _label(d.decision, "user") == "decision")]


def constraints(items: list[UserConstraint]) -> list[UserConstraint]:
    """The user's rules, without a sentence the splitter cut before its content ("it should" of
    "it should 1. remember the bounds 2. ...")."""
    return [c for c in items if not _cut(c.text, colon=False)]


_MARKUP = lazy_regex(r"^\s*(?:</?[\w:-]+>\s*)+$")
_HEDGE_Q = lazy_regex(r"[?？]\s*$")


def open_questions(items: list[OpenQuestion]) -> list[OpenQuestion]:
    """Questions put to the user and not answered: a rhetorical question or self-talk is not one."""
    return [q for q in items if q.status != "open" or not _HEDGE_Q.search(q.text)
            or _label(q.text, "assistant") == "question"]


def facts(items: list[Fact]) -> list[Fact]:
    """Facts, without harness, frontend and tool-notice chrome (what an install reports it
    installed stays a fact)."""
    return [f for f in items if not chrome_fact(f.text)]


@lru_cache(maxsize=4096)
def chrome_fact(text: str) -> bool:
    """A line of chrome, not a fact (a harness or frontend notice, a search hit, a listing)."""
    return chrome_line(text, outcome=False) or bool(TOOL_CHROME.match(text.strip()))


def next_steps(items: list[NextStep], run: RunModel, files: list[FileTouch]) -> list[NextStep]:
    """From the status, the live failure and the agent's last plan that was not carried out;
    empty rather than a template. Steps the old state derived from a failure are replaced.
    (The anchor's fold keeps the result while the fields of ``run`` read here are equal: a field
    read anew joins that key, in ``build._State._run_sections``.)"""
    keep = [n for n in items if not n.text.startswith("resolve the live failure")]
    if run.status in ("finished", "waiting") and run.status_step:
        # the agent's last word came after the request: answering it is a step carried out
        keep = [n for n in keep if not (n.status == "pending" and n.text.startswith("answer the pending")
                                        and _num(n.source_step) < _num(run.status_step))]
    if not run.calls:
        return keep
    if run.status == "submitted":
        # the harness took the work: nothing is left for a successor to do in this run (the live
        # failure stays on its own line, for the record)
        return [n for n in keep if n.status != "pending" or n.text.startswith("answer the pending")]
    derived: list[tuple[str, str]] = []
    live = live_failure(run)
    if run.status == "stopped-limit":
        derived.append((f"the run stopped at its step or cost limit ({run.status_step}); continue from where it stopped",
                        run.status_step))
    elif run.status == "stopped-error":
        last = next((s for s in reversed(run.steps)), None)
        what = f": retry `{last.target[:120]}`" if last is not None else ""
        derived.append((f"the run stopped on an API or harness error ({run.status_step}){what}", run.status_step))
    blocked = HOOK_BLOCK.search(live.text) if live is not None else None
    if blocked is not None:
        # re-running what a hook forbids fails the same way: the work has to take another road
        derived.append((f"`{live.family[:120]}` was refused ({blocked.group(1)[:200]}): reach the goal another way, "
                        f"without it", live.last_step))
    elif live is not None:
        where = f" ({live.location})" if live.location else ""
        rerun = f"; then re-run `{live.family[:120]}`" if live.action in ("run", "test", "install") else ""
        derived.append((f"resolve the live failure: {live.text[:300]}{where}{rerun}", live.last_step))
    elif run.status in ("working", "stopped-limit", "stopped-error"):
        stale = [e for e in run.errors if e.state == "stale" and e.why.startswith("changed since")]
        if stale:
            e = max(stale, key=lambda x: _num(x.at))
            derived.append((f"check the change of {e.at}: re-run `{e.family[:120]}` (it failed at {e.last_step} "
                            f"with `{e.text[:160]}`)", e.at))
    if run.plan and not run.plan_acted and run.status not in ("submitted",) \
            and not any(run.plan in n.text or n.text in run.plan for n in keep):
        derived.append((f"carry out the stated plan: {run.plan}", run.plan_step))
    out = keep
    for text, step in derived:
        nid = item_id("ns", text)
        if all(n.id != nid for n in out):
            out.append(NextStep(id=nid, source_step=step, text=text))
    return out
