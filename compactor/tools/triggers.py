"""When to compact: the seed-001 trigger signals, mechanised.

:func:`should_compact` looks at a conversation (anything :func:`compactor.load_document`
accepts, or a :class:`~compactor.formats.Document`) and returns a :class:`TriggerDecision`: whether to
compact now, which level to start from, and every signal that fired with its value and the
threshold it crossed. The signals (seed 001, "触发时机"):

- ``turns`` — the session is over 20–30 turns (``turn_threshold``, default 25);
- ``usage`` — context usage over 60–70 % of the window (``usage_threshold``, default 0.65);
  ``usage-critical`` at ``critical_threshold`` (default 0.9) suggests Level 3;
- ``tool-share`` / ``large-outputs`` — tool output piling up: its share of the tokens since the
  last compaction, or N large raw outputs since then;
- ``repeat-command`` / ``repeat-search`` / ``repeat-error`` / ``repeat-question`` — the agent
  repeating itself (same command, same search, same error, same question ``repeat_threshold``
  times; compared after normalisation);
- ``user-request`` — the newest user message asks for it (English and Chinese phrasings);
- ``every-n-steps`` — a fixed cadence (seed 000: "every N steps", typically 10).

"Short tasks compact later, long or high-risk ones earlier": a short session (few turns, no
risk) gets a higher usage threshold; a high-risk one (many errors, destructive commands) gets
lower usage and turn thresholds. The adjustment is reported in :attr:`TriggerDecision.notes` and in
every reason's threshold.

Token counts are estimated (characters / 4, CJK one per character) and counted exactly with
the configured tokenizer only when the estimate reaches half the usage threshold (far below it,
the decision cannot change); :attr:`TriggerDecision.token_counter` says which.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import regex
from pydantic import BaseModel, ConfigDict, Field

from ..formats.calls import call_of
from ..models import CallKind, Role, Segment, SegmentKind
from ..normalize import normalize
from ..syntax import is_summary_text
from ..tokens import get_counter
from ..tokens import _Estimate  # noqa: PLC2701 - the documented fallback estimate
from ..lazyre import lazy_regex

__all__ = ["Reason", "TriggerDecision", "should_compact"]



class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Reason(_Frozen):
    code: str = Field(description="stable code: turns, usage, usage-critical, tool-share, large-outputs, "
                                  "repeat-command, repeat-search, repeat-error, repeat-question, user-request, "
                                  "every-n-steps")
    message: str
    value: float | int | str
    threshold: float | int | str
    level: int = Field(default=1, ge=1, le=3, description="the level this signal suggests")


class TriggerDecision(_Frozen):
    compact: bool
    level_hint: int = Field(ge=0, le=3, description="0 = do not compact; else the level to start from")
    reasons: list[Reason] = Field(default_factory=list)
    profile: str = Field(default="normal", description="short | normal | long")
    risk: str = Field(default="normal", description="normal | high")
    notes: list[str] = Field(default_factory=list, description="threshold adjustments and why")
    turns: int = 0
    tokens: int = 0
    context_window: int = 0
    usage: float = 0.0
    token_counter: str = ""
    steps_since_compaction: int = 0

    def __bool__(self) -> bool:  # ``if should_compact(msgs): ...``
        return self.compact


# ---------------------------------------------------------------------------- phrasings

_ASK_EN = lazy_regex(
    r"""(?ix)
    (?:^|\W)/compact\b
    | \b(?:compact|compress|condense|shrink|trim|clean\s*up|tidy(?:\s*up)?|prune|clear\s+out)\s+
        (?:(?:the|our|your|this|my)\s+)?(?:(?:chat|conversation|session)\s+)?(?:context|history|conversation|memory|transcript|chat)\b
    | \b(?:summari[sz]e|recap|sum\s+up|write\s+up|give\s+me\s+(?:a\s+)?(?:summary|recap)\s+of)\s+
        (?:(?:the|our|your|this|my)\s+)?(?:progress|work\s+so\s+far|what\s+(?:we|you)(?:'ve|\s+have)\s+(?:done|tried|learned)|
           (?:the\s+)?(?:conversation|session|history|context)|where\s+(?:we|you)\s+(?:are|stand))
    | \b(?:summari[sz]e|recap)\b[^.?!\n]{0,30}\bso\s+far\b
    | \b(?:progress|status)\s+(?:summary|report|recap)\b
    | \bwhere\s+(?:are\s+we|do\s+we\s+stand)\b
    """
)
_ASK_ZH = lazy_regex(
    r"(?:整理|压缩|清理|精简|梳理|收拾)(?:一下|下)?(?:当前|目前|现在|之前|前面|我们的|你的)?的?(?:上下文|历史|对话|会话|记录|进度|context)"
    r"|(?:总结|汇总|回顾|概括|小结)(?:一下|下)?(?:当前|目前|现在|之前|我们的|你的|已有的)?的?(?:进度|进展|上下文|历史|对话|工作|情况|状态)"
    r"|(?:上下文|历史|对话)(?:太长|太多|满了|快满)"
)

# ---------------------------------------------------------------------------- risk
_DESTRUCTIVE = lazy_regex(
    r"""(?ix)
    \brm\s+(?:-[a-z]*[rf][a-z]*\s+)+ | \brm\s+--(?:recursive|force)\b
    | \bgit\s+(?:push\s+(?:[^\n;|&]*\s)?(?:--force\b|-f\b|--force-with-lease\b)|reset\s+--hard\b|clean\s+-[a-z]*f|checkout\s+--\s|branch\s+-D\b|rebase\b|filter-branch\b)
    | \b(?:drop|truncate)\s+(?:table|database|schema)\b | \bdelete\s+from\s+\w+\s*(?:;|$)
    | \bkubectl\s+delete\b | \bterraform\s+(?:apply|destroy)\b | \bhelm\s+(?:uninstall|delete)\b
    | \bdocker\s+(?:system\s+prune|rm\s+-f|volume\s+rm)\b | \bmkfs\b | \bdd\s+[^\n]*\bof=/dev/ | \bchmod\s+-R\s+777\b
    | \bshutdown\b | \breboot\b | >\s*/dev/sd[a-z]\b | \bsudo\s
    | \bnpm\s+publish\b | \bpip\s+uninstall\b | \baws\s+s3\s+rm\b
    """
)
_ERROR_LINE = lazy_regex(
    r"(?m)^.{0,300}?(?:\b[A-Z]\w*(?:Error|Exception)\b:?|\berror(?:\[E\d+\])?:|\bERROR\b|\bFAILED\b|\bfatal:|\bpanic:|"
    r"Traceback \(most recent call last\)|command not found|No such file or directory|Permission denied|"
    r"Segmentation fault|npm ERR!|错误|失败).{0,300}$"
)
_TRACE_HEAD = lazy_regex(r"^(?:Traceback \(most recent call last\)|During handling|The above exception)")

# ---------------------------------------------------------------------------- normalisation
_WS = lazy_regex(r"\s+")
_NUM = lazy_regex(r"0x[0-9a-fA-F]+|\b\d+(?:\.\d+)*\b")
_QUOTES = str.maketrans({"'": '"', "`": '"', "\u2018": '"', "\u2019": '"', "\u201c": '"', "\u201d": '"'})
_CD_PREFIX = lazy_regex(r"^(?:cd\s+\S+\s*(?:&&|;)\s*)+")
_TRAILER = lazy_regex(r"\s*(?:2>&1|\|\s*(?:head|tail)(?:\s+-n?\s*\d+)?|;\s*echo\s+\$\?)\s*$")
_SEARCH_CMD = lazy_regex(r"^(?:grep|rg|ag|ack|find|fd|locate|search_dir|search_file|find_file|git\s+grep)\b")


_ARG_NOISE = {"timeout", "is_input", "security_risk", "thought", "description", "blocking", "run_in_background"}


def _call_key(seg: Segment) -> str:
    """What makes two calls 'the same': the normalised command plus the other arguments (an
    editor call's path, old and new text), ignoring incidental ones (timeouts, thoughts)."""
    key = _norm_command(seg.command or "")
    args = call_of(seg).arguments
    if args is not None and seg.text.strip() != (seg.command or "").strip():
        rest = {k: v for k, v in args.items() if k not in _ARG_NOISE and v != seg.command}
        if rest:
            import json

            key += " " + json.dumps(rest, sort_keys=True, ensure_ascii=False)
    return key


def _norm_command(cmd: str) -> str:
    t = cmd.strip().translate(_QUOTES)
    t = _CD_PREFIX.sub("", t)
    for _ in range(3):
        t2 = _TRAILER.sub("", t)
        if t2 == t:
            break
        t = t2
    return _WS.sub(" ", t).strip()


def _norm_error(line: str) -> str:
    t = line.strip().translate(_QUOTES)
    t = regex.sub(r"(?i)\bline \d+", "line #", t)
    t = _NUM.sub("#", t)
    return _WS.sub(" ", t).strip().casefold()[:300]


def _norm_question(text: str) -> str:
    t = _NUM.sub("#", text.translate(_QUOTES).casefold())
    return _WS.sub(" ", t).strip()[:500]


_LISTING = lazy_regex(r"^\s*\d+(?:\t|:\s|\s{2,}|\s*\|)")  # a numbered source listing (cat -n, an editor view)
_EXC_LINE = lazy_regex(r"^\s*[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b(?::|$)")


def _error_signature(text: str) -> tuple[str, str] | None:
    """The exception / error line of an output, normalised (None when the output shows no error).

    The last exception line (``KeyError: 'x'``) wins; else the last error line. A bare marker
    (``Error:``) takes the next line with it, so different errors do not look the same.
    """
    t = normalize(text[-20_000:]) if len(text) > 20_000 else normalize(text)
    best = exc = None
    for m in _ERROR_LINE.finditer(t):
        line = m.group(0).strip()
        if not line or _TRACE_HEAD.match(line) or _LISTING.match(m.group(0)):
            continue
        if len(line) < 16:  # 'Error:' alone: the detail is on the next line
            nxt = t[m.end():m.end() + 400].lstrip("\n").split("\n", 1)[0].strip()
            line = f"{line} {nxt}".strip()
        if _EXC_LINE.match(m.group(0)):
            exc = line
        best = line  # the last error line is the most specific (exception line after a trace)
    sig = exc or best
    return (_norm_error(sig), sig[:200]) if sig else None


# ---------------------------------------------------------------------------- the decision


def _doc(conversation: Any, format: str):
    from ..formats import load_document

    return load_document(conversation, format=format)


def _turns(segs: list[Segment]) -> int:
    return len({s.step for s in segs if s.step > 0})


def should_compact(
    conversation: Any,
    *,
    context_window: int = 128_000,
    usage_threshold: float = 0.65,
    critical_threshold: float = 0.9,
    turn_threshold: int = 25,
    every_n_steps: int | None = None,
    repeat_threshold: int = 3,
    tool_share_threshold: float = 0.6,
    tool_share_min_tokens: int = 8_000,
    large_output_tokens: int = 2_000,
    large_output_count: int = 5,
    short_task_turns: int = 8,
    risk_errors: int = 5,
    adjust_for_risk: bool = True,
    encoding: str = "cl100k_base",
    format: str = "auto",
) -> TriggerDecision:
    """Decide whether to compact now, and why. See the module docstring for the signals."""
    if context_window < 1:
        from ..errors import ConfigError

        raise ConfigError(f"context_window must be at least 1 (got {context_window})")
    if not 0 < usage_threshold <= 1 or not 0 < critical_threshold <= 1:
        from ..errors import ConfigError

        raise ConfigError("usage_threshold and critical_threshold must be in (0, 1]")
    doc = _doc(conversation, format)
    segs = list(doc.segments)
    turns = _turns(segs)

    # the last compaction: the newest segment that is a summary we inserted
    last = -1
    for i, s in enumerate(segs):
        if s.kind == SegmentKind.message and s.role in (Role.user, Role.system) and is_summary_text(s.text):
            last = i
    since = segs[last + 1:] if last >= 0 else segs
    last_step = segs[last].step if last >= 0 else 0
    steps_since = len({s.step for s in since if s.step > last_step}) if last >= 0 else turns

    # tokens: estimate, count exactly when near a threshold
    est = _Estimate()
    seg_tokens = [est.count(s.text) for s in segs]
    total = sum(seg_tokens)
    counter_name = est.name
    near = total >= 0.5 * usage_threshold * context_window  # the estimate can be off by 2x (code, CJK)
    if near:
        counter = get_counter(encoding)
        if counter.name != est.name:
            seg_tokens = [counter.count(s.text) for s in segs]
            total = sum(seg_tokens)
            counter_name = counter.name
    usage = total / context_window

    # risk and task profile
    errors = 0
    destructive: list[str] = []
    err_sigs: Counter[str] = Counter()
    cmds: Counter[str] = Counter()
    searches: Counter[str] = Counter()
    questions: Counter[str] = Counter()
    example: dict[tuple[str, str], str] = {}
    tool_tokens = 0
    since_tokens = 0
    large = 0
    first_since = last + 1 if last >= 0 else 0
    for i, s in enumerate(segs):
        in_window = i >= first_since
        if s.kind == SegmentKind.tool_call or (s.kind == SegmentKind.message and s.role == Role.assistant and s.command):
            cmd = s.command or s.text
            if cmd and _DESTRUCTIVE.search(cmd[:4000]):
                destructive.append(_WS.sub(" ", cmd.strip())[:120])
        if s.kind == SegmentKind.tool_result:
            failed = s.is_error is True or (s.exit_code not in (None, 0))
            got = _error_signature(s.text) if (failed or s.is_error is None) else None
            if failed or got:
                errors += 1
            if in_window and got:
                err_sigs[got[0]] += 1
                example.setdefault(("error", got[0]), got[1])
        if not in_window:
            continue
        since_tokens += seg_tokens[i]
        if s.kind == SegmentKind.tool_result:
            collapsed = "· ref c-" in s.text
            if not collapsed:
                tool_tokens += seg_tokens[i]
                if seg_tokens[i] >= large_output_tokens:
                    large += 1
        if s.kind == SegmentKind.tool_call and s.command:
            key = _call_key(s)
            if not key:
                continue
            if call_of(s).kind is CallKind.search or _SEARCH_CMD.match(key):
                searches[key] += 1
                example.setdefault(("search", key), s.command.strip()[:160])
            else:
                cmds[key] += 1
                example.setdefault(("command", key), s.command.strip()[:160])
        elif s.kind == SegmentKind.message and s.role == Role.assistant and "?" in s.text[-400:]:
            q = _norm_question(s.text)
            if len(q) >= 24:
                questions[q] += 1
                example.setdefault(("question", q), " ".join(s.text.split())[:160])

    high_risk = adjust_for_risk and (errors >= risk_errors or bool(destructive))
    profile = "short" if turns <= short_task_turns else ("long" if turns >= turn_threshold else "normal")
    notes: list[str] = []
    u_thr, t_thr = usage_threshold, turn_threshold
    if high_risk:
        why = []
        if errors >= risk_errors:
            why.append(f"{errors} failed tool outputs")
        if destructive:
            why.append(f"{len(destructive)} destructive command(s), e.g. {destructive[0]!r}")
        u_thr = max(0.4, round(usage_threshold - 0.1, 4))
        t_thr = max(5, int(round(turn_threshold * 0.8)))
        notes.append(f"high-risk task ({'; '.join(why)}): compact earlier — usage threshold "
                     f"{usage_threshold:.0%} → {u_thr:.0%}, turn threshold {turn_threshold} → {t_thr}")
    elif adjust_for_risk and profile == "short":
        u_thr = min(critical_threshold - 0.05, round(usage_threshold + 0.1, 4))
        u_thr = max(u_thr, usage_threshold)
        notes.append(f"short task ({turns} turns, no risk signals): compact later — usage threshold "
                     f"{usage_threshold:.0%} → {u_thr:.0%}")
    elif profile == "long":
        u_thr = max(0.4, round(usage_threshold - 0.05, 4))
        notes.append(f"long session ({turns} turns): compact earlier — usage threshold "
                     f"{usage_threshold:.0%} → {u_thr:.0%}")

    reasons: list[Reason] = []
    if usage >= critical_threshold:
        reasons.append(Reason(code="usage-critical", level=3, value=round(usage, 4), threshold=critical_threshold,
                              message=f"context usage {usage:.0%} of {context_window} tokens is at or over "
                                      f"{critical_threshold:.0%}: compact hard now (Level 3; consider a new session)"))
    elif usage >= u_thr:
        reasons.append(Reason(code="usage", level=2, value=round(usage, 4), threshold=u_thr,
                              message=f"context usage {usage:.0%} ({total} of {context_window} tokens) is over "
                                      f"{u_thr:.0%}: compact while the agent is still clear-headed"))
    if steps_since >= t_thr:
        reasons.append(Reason(code="turns", level=1, value=steps_since, threshold=t_thr,
                              message=f"{steps_since} turns since the {'last compaction' if last >= 0 else 'start'} "
                                      f"(threshold {t_thr})"))
    share = tool_tokens / since_tokens if since_tokens else 0.0
    if share >= tool_share_threshold and tool_tokens >= tool_share_min_tokens:
        reasons.append(Reason(code="tool-share", level=1, value=round(share, 4), threshold=tool_share_threshold,
                              message=f"raw tool output is {share:.0%} of the context ({tool_tokens} tokens) "
                                      f"since the last compaction"))
    if large >= large_output_count:
        reasons.append(Reason(code="large-outputs", level=1, value=large, threshold=large_output_count,
                              message=f"{large} raw tool outputs of {large_output_tokens}+ tokens since the last "
                                      f"compaction"))
    for code, label, counter_ in (("repeat-command", "command", cmds), ("repeat-search", "search", searches),
                                  ("repeat-error", "error", err_sigs), ("repeat-question", "question", questions)):
        if not counter_:
            continue
        key, n = sorted(counter_.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        if n >= repeat_threshold:
            ex = example.get((label, key), key)
            reasons.append(Reason(code=code, level=2, value=n, threshold=repeat_threshold,
                                  message=f"the same {label} {n} times: {ex!r} — record it as an excluded "
                                          f"approach so it is not tried again"))
    newest_user = None
    for s in reversed(segs):
        if s.role == Role.user and s.kind == SegmentKind.message and not s.meta and s.text.strip():
            newest_user = s
            break
    if newest_user is not None and (last < 0 or newest_user.index > segs[last].index) and \
            not is_summary_text(newest_user.text):
        head = newest_user.text[:2000]
        m = _ASK_EN.search(head) or _ASK_ZH.search(head)
        if m:
            reasons.append(Reason(code="user-request", level=2, value=m.group(0).strip(), threshold="explicit request",
                                  message=f"the user asked for it ({m.group(0).strip()!r}, step {newest_user.step_id})"))
    if every_n_steps and steps_since >= every_n_steps:
        reasons.append(Reason(code="every-n-steps", level=2, value=steps_since, threshold=every_n_steps,
                              message=f"{steps_since} steps since the {'last compaction' if last >= 0 else 'start'} "
                                      f"(every {every_n_steps})"))
    level = max((r.level for r in reasons), default=0)
    return TriggerDecision(compact=bool(reasons), level_hint=level, reasons=reasons, profile=profile,
                    risk="high" if high_risk else "normal", notes=notes, turns=turns, tokens=total,
                    context_window=context_window, usage=round(usage, 4), token_counter=counter_name,
                    steps_since_compaction=steps_since)
