"""Building and merging the anchor: one left fold over segments.

:func:`merge` turns an :class:`~compactor.models.Anchor` back into a mutable working state,
feeds it the new segments one by one, and freezes the state again. Everything the fold needs to
continue (the open file, calls waiting for their results, the last error, ...) is kept in
``Anchor.cursor``, so merging step by step gives exactly the anchor that building from the whole
trajectory gives. Item ids come from content, so re-extracting an item finds the existing one:
no duplicates, and an item's status (superseded, resolved, done) is never reset by seeing it again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import SimpleNamespace
from typing import Any

from ..models import (
    Anchor,
    AnchorCursor,
    CallKind,
    ChangeMade,
    Decision,
    Evidence,
    ExcludedApproach,
    FailedAttempt,
    Fact,
    FileTouch,
    Intent,
    IntentItem,
    NextStep,
    OpenQuestion,
    PendingCall,
    Role,
    Segment,
    SegmentKind,
    Span,
    ToolCall,
    UserConstraint,
)
from ..codeview import View, call_kind, classify, split_commands
from ..formats.calls import call_of, json_task_text, parse_arguments, vocabulary
from ..normalize import normalize
from . import cues as C
from .cues import CUES
from ._text import item_id, norm_key, prose_of, sentences, shorten, split_reason, squash
from .files import call_effects, looks_like_file
from ._tables import NOT_FAILURE, TOOL_ERROR, EvidenceTable, FailedTable, dedupe_line
from .ledger import FactLedger
from . import sections as S
from .runmodel import RunFold, harness_note
from ..lazyre import lazy_regex

__all__ = ["EVIDENCE_FAMILIES", "AnchorFold", "build_anchor", "merge"]

EVIDENCE_FAMILIES = ("trace", "error", "exit-code", "test-failure")
# key evidence that is not a failure: a passing check, where the task says the bug is
_FAMILY_RANK = {"trace": 0, "test-failure": 1, "error": 2, "exit-code": 3}
_MAX_PENDING = 64
_MAX_PROSE_FACTS = 8
_MAX_LINE_FACTS = 6
_MAX_FACT_SCAN = 400_000  # characters of one tool output scanned for facts
_FACT_EDGE_LINES = 200  # lines of a long output's head and tail scanned for structured facts
_REQUEST_CHARS = 300
_TASK_CHARS = 400  # a long task statement: its first meaningful lines up to this many characters


def build_anchor(segments: Sequence[Segment], spans: Iterable[Span] = (), *, objective: str | None = None) -> Anchor:
    """Build the anchor of a whole trajectory (segments in conversation order)."""
    return build_anchor_live(segments, spans, objective=objective)[0]


def build_anchor_live(segments: Sequence[Segment], spans: Iterable[Span] = (), *,
                      objective: str | None = None) -> tuple[Anchor, "_State"]:
    """:func:`build_anchor`, and the working state it froze from (for :func:`merge_live`)."""
    base = Anchor(cursor=AnchorCursor(objective=objective or ""))
    return merge_live(base, segments, spans)


def merge(anchor: Anchor, new_segments: Sequence[Segment], spans: Iterable[Span] = ()) -> Anchor:
    """Evolve ``anchor`` with segments that came after the ones it was built from."""
    return merge_live(anchor, new_segments, spans)[0]


def merge_live(anchor: Anchor, new_segments: Sequence[Segment], spans: Iterable[Span] = (),
               live: "_State | None" = None) -> tuple[Anchor, "_State"]:
    """:func:`merge`, continuing ``live`` (the working state the previous merge returned) when
    ``anchor`` is what that state froze into: the fold goes on from where it stopped, as one
    :func:`build_anchor` of every segment would, instead of unpacking the anchor again. Returns the
    new anchor and the working state it froze from (to pass to the next merge, once)."""
    by_seg: dict[str, list[Span]] = {}
    ids = {s.id for s in new_segments}
    for sp in spans:
        if sp.segment_id is not None and sp.segment_id in ids:
            by_seg.setdefault(sp.segment_id, []).append(sp)
    for lst in by_seg.values():
        lst.sort(key=_span_key)
    if live is not None and live.frozen is anchor:
        st = live
        st.frozen = None  # taken: a merge that fails half-way leaves no state to continue
    else:
        st = _State(anchor)
    for seg in new_segments:
        st.feed(seg, by_seg.get(seg.id, ()))
    a = st.freeze()
    st.frozen = a
    st._remember(a)
    return a, st


def _span_key(sp: Span) -> tuple:
    return (sp.start, sp.end, sp.rule_id)


class AnchorFold:
    """:func:`build_anchor` one segment at a time, for a reader that cannot hold the segments:
    ``feed`` each segment (in conversation order, with its spans), ``freeze`` at the end gives the
    anchor ``build_anchor`` gives of all of them (segment ids unique)."""

    def __init__(self, *, objective: str | None = None, bound: tuple[int, Any, str] | None = None) -> None:
        """``bound``: (max tokens, count, lang) of the size bound the frozen anchor goes to
        (:func:`~compactor.anchor.bound.bound_anchor`): the facts it can never show are not held
        (:class:`~compactor.anchor.ledger.FactLedger`, :attr:`facts`; pass it to the bound)."""
        self._st = _State(Anchor(cursor=AnchorCursor(objective=objective or "")))
        self.facts: FactLedger | None = None
        if bound is not None and bound[0]:
            self.facts = self._st.facts = FactLedger(*bound)

    def feed(self, seg: Segment, spans: Iterable[Span] = ()) -> None:
        own = sorted((sp for sp in spans if sp.segment_id is not None and sp.segment_id == seg.id), key=_span_key)
        self._st.feed(seg, own)

    def freeze(self) -> Anchor:
        """The anchor of the segments fed; with a bound, its ``facts_learned`` are the facts the
        bound can still show (:attr:`facts` holds every one's id and step)."""
        if self.facts is not None:
            self.facts.settle()
        return self._st.freeze()


# ---------------------------------------------------------------------------------------


_CHAT_COMMAND = lazy_regex(r"^\s*/([a-z][a-z-]{1,20})(?:\s+|$)")
_REQUEST_COMMANDS = frozenset({"ask", "code", "architect", "copy-context", "context", "help"})
_VOCAB = vocabulary()
_FINISH_TOOLS = frozenset({"submit", "finish", "attempt_completion", "task_complete", "complete_task", "done"})
# where a task statement ends and the harness's instructions begin (rules/cue/cue.harness-part.toml)
_HARNESS_PART = C.HARNESS_PART
# a pasted issue / PR text: the reporter's prose, not the user's constraints
_ISSUE_BLOCK = lazy_regex(
    r"<(issue_description|pr_description|issue)>.*?(?:</\1>|\Z)|^ISSUE:\n.*?(?=^INSTRUCTIONS:|\Z)", C.regex.S | C.regex.M)


_REQUIREMENT = lazy_regex(
    r"\b(?:must(?: not)?|mustn't|shall not|should not|shouldn't|is required|are required|has to|have to|"
    r"keep\b[^!?\n]{0,80}?\bworking|without (?:breaking|changing)|do not (?:change|modify|break|touch))\b", C.regex.I)
_ANALYSIS = lazy_regex(
    r"\b(?:would|could|might|I believe|I think|I found|I guess|it seems|seems to|probably|perhaps|maybe|"
    r"suggestions?|possibilit(?:y|ies)|for example|e\.g\.|such as|motivating|when debugging|we never)\b", C.regex.I)


# git's report of a new commit: "[main a5b48f0] message", "[feat/x (root-commit) 1a2b3c4] message"
_COMMIT_SHA = lazy_regex(r"^\[[^\]\s]+(?: \([^)\n]*\))? ([0-9a-f]{7,40})\] ", C.regex.M)


# "<command-message>x is running…</command-message> <command-name>/x</command-name> [<command-args>a</command-args>]"
# (the tags come in either order: newer clients write the name first)
_COMMAND_ECHO = lazy_regex(
    r"^\s*(?:<command-(?:message|args)>[^<]*</command-(?:message|args)>\s*)*<command-name>(/[^<\s]+)</command-name>\s*"
    r"(?:<command-message>[^<]*</command-message>\s*)?(?:<command-args>([^<]*)</command-args>\s*)?"
    r"(?:<command-message>[^<]*</command-message>\s*)?$")


# a tool that hands out work: an issue tracker's, a task queue's
_TASK_TOOL = lazy_regex(r"(?:^|[_.:-])(?:issues?|tasks?|tickets?)(?:[_.:-]|$)", C.regex.I)


# an earlier compaction's summary put in the user's place: its prose, its "next step" and its
# design notes are the previous agent's account, not the user's rules; only what it quotes the
# user as saying can bind
_SUMMARY_HEAD = lazy_regex(
    r"^\s*(?:This session is being continued from a previous conversation|"
    r"The conversation history before this point was compacted|"
    r"(?:Here is |This is )?(?:a |the )?summary of (?:the |our )?(?:previous|earlier|prior) (?:conversation|session)|"
    r"<summary>)", C.I)
_QUOTED = lazy_regex(r"[\"“「]([^\"”」\n]{4,300})[\"”」]")


def _summary_rules(text: str) -> list[str]:
    """The user's rules an earlier compaction's summary quotes verbatim (a quoted "do not add new
    dependencies"); nothing else of the summary is a constraint."""
    return [q.strip() for q in _QUOTED.findall(text) if (CUES["constraint"].search(q) or C.STOP.match(q))
            and not _asks(q)]


_QUESTION_END = lazy_regex(r"(?<=[?？])\s+")


def _asks(s: str) -> bool:
    """A question that does not itself order ("Can you make sure tests/ stays as is?" orders)."""
    return s.rstrip().endswith(("?", "？")) and not _ORDER_QUESTION.match(s)


_ORDER_QUESTION = lazy_regex(
    r"^(?:please\s+)?(?:can|could|would|will) you (?:please\s+)?(?:make sure|ensure|not\b|avoid|never|always|only|keep|stop)"
    r"|^(?:你)?(?:能|可以)(?:不能)?(?:请)?(?:确保|不要|别)", C.I)


def _own_words(text: str) -> tuple[str, str]:
    """(what the user wrote themselves, a pasted issue / PR text): the text before the harness's
    instructions, split into the user's own words and the issue block."""
    m = _HARNESS_PART.search(text)
    own = text[: m.start()] if m else text
    issue = ""
    if "<" in own or "ISSUE:" in own:
        issue = "\n".join(x.group(0) for x in _ISSUE_BLOCK.finditer(own))
        own = _ISSUE_BLOCK.sub("\n", own)
    return own, issue


def harness_start(text: str) -> int | None:
    """Where the harness's instructions appended to a task begin: the first harness heading
    (``<instructions>``, ``INSTRUCTIONS:``, ``## Environment``, ...) that is not inside a pasted
    issue / PR block opened before it. None when the text has none (a user's own message)."""
    hits = list(_HARNESS_PART.finditer(text))
    if not hits:
        return None
    blocks = [(b.start(), b.end()) for b in _ISSUE_BLOCK.finditer(text)] if "<" in text or "ISSUE:" in text else []
    for m in hits:
        if not any(a < m.start() < b for a, b in blocks):
            return m.start()
    return None


_EDITOR_VERB = lazy_regex(r"^(view|create|str_replace|insert|undo_edit)\s+(\S+)\s*$")
_EDITOR_NAMES = frozenset({"str_replace_editor", "file_editor", "edit_file", "editor", "str_replace_based_edit_tool"})


def _editor_verb_call(eff, tool: str, command: str, raw: str) -> None:
    """An editor call whose reader kept only "<verb> <path>" as its command and the new text as
    its body (OpenHands v0): a view reads the file, the other verbs change it."""
    if tool.lower() not in _EDITOR_NAMES:
        return
    m = _EDITOR_VERB.match(command.strip())
    if not m:
        return
    verb, path = m.group(1), m.group(2)
    eff.commands = 1
    if verb == "view":
        eff.kind = "read"
        if looks_like_file(path):
            eff.add(path, "read")
        eff.action = f"view {path}"
        return
    eff.kind = "edit"
    eff.add(path, "write" if verb == "create" else "modify")
    eff.action = f"{verb} {path}"
    body = raw.strip() if raw.strip() != command.strip() and raw.strip() != path else ""
    if body:
        eff.detail = f"{verb}: `{shorten(body, 300)}`"


_COMMIT_MSG = lazy_regex(r"\bgit\b[^\n]*\bcommit\b[^\n]*?(?:-m\s+(?:\"\$\(cat <<-?\s*'?(\w+)'?\n(.+?)\n|([\"'])(.+?)\3))", C.regex.S)


def _commit_message(command: str) -> str:
    """The first line of the message of a ``git commit -m`` in a command (here-document too)."""
    if "commit" not in command:
        return ""
    m = _COMMIT_MSG.search(command[:20_000])
    if not m:
        return ""
    msg = m.group(2) if m.group(2) is not None else (m.group(4) or "")
    return shorten(msg.strip().split("\n", 1)[0], 120)


def _revises(prev: IntentItem | None, text: str) -> bool:
    """A request that starts like the previous one (the user re-asking, then extending it): the
    previous wording stays part of the intent."""
    if prev is None:
        return False
    a, b = squash(prev.text), squash(text)
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    if a == b or n < 8:
        return False
    if n >= len(a.rstrip(" .。?？!！")):
        return True  # the new request extends the previous one
    return n >= 16 and n * 10 >= len(a) * 4 and not _REPLACES.search(b[n:])


_REPLACES = lazy_regex(r"(?i)\b(?:instead|rather than|not|no longer)\b|而不是|改成|改为|换成|不要")


def _finish_message(text: str, call: ToolCall | None) -> str:
    """The final message of a finishing call: its message-like arguments when its text is JSON
    (the arguments, or a command made of them), else the text."""
    t = text.strip()
    if t.startswith("{") and call is not None and call.arguments is not None:
        d = call.arguments
        return " ".join(str(v) for k, v in d.items() if isinstance(v, str) and k in ("message", "thought", "summary", "result", "text"))
    return t


_TAG_RE = lazy_regex(r"</?[A-Za-z_][\w-]{0,40}>")
_LABEL_RE = lazy_regex(r"[A-Z][A-Z _-]{1,30}:")
_INTRO_RE = lazy_regex(r"(?i)\bfollowing\b|\bhere is\b|\bhere's\b|以下")
_BARE_PATH_RE = lazy_regex(r"[/~.][^\s]*")
_WORD_RE = lazy_regex(r"[A-Za-z][\w.+#-]{2,}")
_HAN_RUN_RE = lazy_regex(r"\p{Han}{2,}")
_PRONOUN_RE = lazy_regex(r"(?i)^(?:it|this|that|still|same|no|nope)\b")
_NO_RE = lazy_regex(r"(?i)^(?:no|nope|nah|不|不是|不对|不行)")
_WRAPPER_RE = lazy_regex(r"^</?\w+>\s*$|^<returncode>")
def _whole_zh(found: list[str], sents: list[str]) -> list[str]:
    """A Chinese decision or dead end found as a clause (the protect rules stop at '；') is the
    whole sentence it is part of: its reason often goes on after the semicolon ("决定用 A，因为 B
    会把时区写死；而 A 在所有浏览器里都按本地时间处理。")."""
    out = []
    for t in found:
        if C.HAN.search(t):
            t = next((s for s in sents if t in s and len(s) <= 300), t)
        if t not in out:
            out.append(t)
    return out


def _zh_reason_next(sentence: str, nxt: str, cue: dict) -> str:
    """The reason of a Chinese dead end stated in the sentence after it ("改成 gbk 不行。旧文件是带
    BOM 的 UTF-8……"): taken when the dead end gives none itself and the next sentence is Chinese
    prose that is neither another dead end, a decision nor a plan."""
    if not nxt or not C.HAN.search(sentence) or not C.HAN.search(nxt) or split_reason(sentence)[1]:
        return ""
    low = nxt.lower()
    if any(c is not None and c.search(nxt, low) for c in (cue.get("dead_end"), cue.get("decision"), cue.get("next_step"))):
        return ""
    return nxt.strip().rstrip("。.")


_REASON_NEXT = lazy_regex(r"(?i)^(?:this is because|that's because|because|the reason is|原因是|因为)")
_ASK = lazy_regex(r"(?i)\b(?:please|can you|could you|I want you to|I need you to|your task is|help me)\b|请|帮我|需要你")
_ROLE_LINE = lazy_regex(r"(?i)^you are (?:an?|the) ")




def _condense_request(text: str) -> str:
    """The gist of a user request: harness boilerplate dropped, first meaningful line(s), bounded.

    Among the first lines, one that asks for something ("please ...", "请 ...") wins; otherwise
    the first line (an issue's title), with the next one when it is very short.
    """
    t = text.strip()
    inner = json_task_text(t)
    if inner:
        t = inner
    if len(t) <= _REQUEST_CHARS:
        return squash(t)
    lines = _meaningful_lines(t, 8)
    if lines and len(lines[0]) <= 100 and not lines[0].endswith((".", "。", ":", "：")) and not _ASK.search(lines[0]):
        return shorten(lines[0], _REQUEST_CHARS)  # an issue title
    ask = next((i for i, ln in enumerate(lines) if _ASK.search(ln)), None)
    if ask is not None:
        # the request and the lines that detail it, up to a bound
        out = lines[ask]
        for ln in lines[ask + 1:]:
            if len(out) + 1 + len(ln) > _TASK_CHARS:
                break
            out += " " + ln
        return shorten(out, _TASK_CHARS)
    kept = lines[:1]
    if kept and len(kept[0]) < 25 and len(lines) > 1:
        kept.append(lines[1])
    return shorten(" ".join(kept) if kept else t, _REQUEST_CHARS)


_EXPECTED_HEAD = lazy_regex(
    r"^[ \t#*>_]*(?:expected (?:behaviou?r|results?|outcome|output)|what (?:did )?you expect(?:ed)?(?: to happen)?|期望(?:行为|结果)|预期(?:行为|结果))"
    r"[ \t*_]*[:：]?[ \t*_]*$", C.regex.I | C.regex.M)
_EXPECTED_CHARS = 240


def _expected_behaviour(own: str, issue: str) -> str:
    """The first sentence under an "Expected behavior" heading of a task statement (an issue's
    requirement: what "done" means), verbatim; '' when there is none."""
    for t in (issue, own):
        m = _EXPECTED_HEAD.search(t[:20_000]) if t else None
        if m is None:
            continue
        lines = _meaningful_lines(t[m.end():m.end() + 4000], 3)
        if not lines or _EXPECTED_HEAD.match(lines[0]) or lines[0].startswith(("**", "__")):
            continue
        first = (sentences(lines[0]) or [lines[0]])[0]
        return shorten(first, _EXPECTED_CHARS)
    return ""


# an HTML comment of an issue or PR template ("<!-- Please be sure to check out ... -->"): never the request
_HTML_COMMENT = lazy_regex(r"<!--.*?(?:-->|\Z)", C.regex.S)


def _meaningful_lines(t: str, limit: int) -> list[str]:
    kept: list[str] = []
    in_fence = False
    t = _HTML_COMMENT.sub("", t)
    for raw in t.split("\n"):
        line = raw.strip()
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        line = _TAG_RE.sub(" ", line).strip()
        line = line.strip("#*> ").strip()
        if not line:
            continue
        if _LABEL_RE.fullmatch(line):
            continue
        if line.endswith(":") and len(line) < 200 and _INTRO_RE.search(line):
            continue
        if _BARE_PATH_RE.fullmatch(line) or _ROLE_LINE.match(line):
            continue
        kept.append(line)
        if len(kept) >= limit:
            break
    return kept


def _terms(text: str) -> set[str]:
    words = {w.casefold() for w in _WORD_RE.findall(text)}
    han = set(_HAN_RUN_RE.findall(text))
    return words | han


_MSG_LINE = lazy_regex(r"^\s*(?:[\w.$]+(?:Error|Exception|Exhausted|Failure|Panic)\b|[\w.$]+: \S|panic: |fatal error|error\b|Error\b|FAIL\b)")
_FRAME_LINE = lazy_regex(r"^\s*(?:at |File \"|#\d+ |\d+ \||> \d+ \||\||from |\.\.\. \d+ more|goroutine )")


def _first_error_line(span_text: str) -> str:
    lines = [ln.rstrip() for ln in span_text.split("\n") if ln.strip()]
    if not lines:
        return ""
    if lines[0].lstrip().startswith("Traceback"):
        return lines[-1].strip()  # a Python traceback's exception line is its last line
    if len(lines) > 3:
        # the message of a trace: its first "Type: message" / error line that is not a frame
        for ln in lines[1:]:
            if _MSG_LINE.match(ln) and not _FRAME_LINE.match(ln):
                return ln.strip()
        # a compiler's diagnostic (``error[E0599]: ...`` then its location and source excerpt):
        # the message is the header, not the caret line under the excerpt
        return (lines[0] if _MSG_LINE.match(lines[0]) else lines[-1]).strip()
    return lines[0].strip()


def _resolved_evidence(e: Evidence, step: str) -> Evidence:
    """Evidence a later step resolved: history, not the live failure. Its decisive error line
    stays (verbatim, marked resolved at ``step``); the frames of a resolved trace are not kept,
    they are reachable at the evidence's source step."""
    text = e.text
    if "\n" in text.strip():
        lines = [ln.strip() for ln in text.split("\n") if ln.strip()]
        assertion = next((ln for ln in lines if ln.startswith("E ")), "")  # pytest's failing assertion
        if assertion:
            text = assertion
        else:
            text = _first_error_line(text) or text
    return e.model_copy(update={"status": "resolved", "resolved_at": step, "text": text})


class _State:
    """Mutable working state of the fold. ``freeze`` gives the frozen Anchor."""

    def __init__(self, a: Anchor) -> None:
        self._kept_parts: dict[str, tuple] = {}  # freeze's derived parts and what they read (see _kept)
        self._memo: dict = {}  # the run-model sections' per-item results and what they read (sections.py)
        self._fact_shapes: dict[str, bool] = {}
        self._via: tuple[str, str] = ("", "")  # the last 'via' of a fact and its shortened form
        c0 = a.cursor
        self.run = RunFold(c0.run)
        self.facts: dict[str, Fact] | FactLedger = {x.id: x for x in (c0.raw_facts or a.facts_learned)}
        self.decisions: dict[str, Decision] = {x.id: x for x in (c0.raw_decisions or a.decisions_made)}
        self.questions: dict[str, OpenQuestion] = {x.id: x for x in (c0.raw_questions or a.open_questions)}
        self.dead: dict[str, ExcludedApproach] = {x.id: x for x in (c0.raw_dead or a.dead_ends)}
        self.failed: FailedTable = FailedTable(c0.raw_failed or a.failed_attempts)
        derived = set(a.cursor.derived_ids)
        # freeze folds scratch files into one line; the unfolded list is kept in the cursor
        raw_changes = a.cursor.collapsed_changes or a.changes_made
        self.changes: dict[str, ChangeMade] = {x.id: x for x in raw_changes}
        raw_steps = a.cursor.raw_next_steps or [x for x in a.next_steps if x.id not in derived]
        self.next_steps: dict[str, NextStep] = {x.id: x for x in raw_steps}
        self.evidence: EvidenceTable = EvidenceTable(c0.raw_evidence or a.key_evidence)
        # evidence the last dedupe kept only because it came from that step (see _dedupe_evidence)
        self._dedupe_kept: list[str] = []
        self.constraints: dict[str, UserConstraint] = {x.id: x for x in (c0.raw_constraints or a.user_constraints)}
        self.intent: dict[str, IntentItem] = {x.id: x for x in a.intent.history}
        self.files: dict[str, dict[str, Any]] = {
            f.path: {"actions": list(f.actions), "first_step": f.first_step, "last_step": f.last_step,
                     "related": list(f.related), "unfinished": f.unfinished}
            for f in a.files_touched
        }
        self.frozen: Anchor | None = None  # the anchor this state last froze into (see merge_live)
        self._remember(a, derived)
        self.steps_seen = a.steps_seen
        c = a.cursor
        self.objective = c.objective
        self.seq = c.seq
        self.last_step = c.last_step
        self.open_file = c.open_file
        self.step_files = list(c.step_files)
        self.file_seq: dict[str, list[int]] = {k: list(v) for k, v in c.file_seq.items()}
        self.pending: list[PendingCall] = list(c.pending_calls)
        self.last_attempt = c.last_attempt
        self.last_attempt_step = c.last_attempt_step
        self.last_error = c.last_error
        self.last_error_step = c.last_error_step
        self.last_result_error = c.last_result_error
        self.awaiting = list(c.awaiting_answer)
        self.recent_assumptions = list(c.recent_assumptions)
        self.acted = c.acted
        self.plan_steps = list(c.plan_steps)
        self.user_messages = c.user_messages
        self.current_request = c.current_request
        self.error_keys: dict[str, list[str]] = {k: list(v) for k, v in c.error_keys.items()}
        self.finished = c.finished
        self.answered = c.answered

    def _remember(self, a: Anchor, derived: set[str] | None = None) -> None:
        """The items freeze derives again every time: an equal one is taken as it was in ``a``
        (the same object, so what renders it can tell nothing changed)."""
        if derived is None:
            derived = set(a.cursor.derived_ids)
        self._was: dict[tuple[str, str], Any] = {("file", f.path): f for f in a.files_touched}
        self._was.update((("next", n.id), n) for n in a.next_steps if n.id in derived)

    # ------------------------------------------------------------------ feeding
    def feed(self, seg: Segment, spans: Sequence[Span]) -> None:
        self.seq += 1
        if seg.step_id != self.last_step:
            self.steps_seen += 1
            self.last_step = seg.step_id
        if seg.role == Role.system or seg.meta:
            self.run.feed(seg)
            if seg.meta and "<cwd>" in seg.text:
                m = _CWD.search(seg.text)
                if m:  # the harness names the working directory: where the task's files are
                    self._add_fact(m.group(0), seg.step_id, "environment")
            return
        text = normalize(seg.text)
        self.run.feed(seg, text)
        # key evidence comes from tool output only (not from the task text, not from the agent
        # restating an error), and only from lines that are not a view of a file: see _result
        if seg.kind == SegmentKind.tool_call:
            self._call(seg, text, spans)
        elif seg.kind == SegmentKind.tool_result:
            self._result(seg, text, spans)
        elif seg.role == Role.user:
            self._user(seg, text, spans)
        elif seg.role == Role.assistant:
            self._assistant(seg, text, spans)

    # ------------------------------------------------------------------ items
    def _evidence(self, sp: Span, step: str, key: str = "") -> str:
        eid = item_id("ev", sp.text, exact=True)
        old = self.evidence.get(eid)
        if old is None or old.status == "resolved":
            # seen again after it was resolved: it is live again (a regression)
            self.evidence[eid] = Evidence(id=eid, source_step=sp.step_id or step, text=sp.text,
                                          rule_id=sp.rule_id, family=sp.family)
        if key:
            ids = self.error_keys.setdefault(key, [])
            if eid not in ids:
                ids.append(eid)
        return eid

    def _dedupe_evidence(self, step: str) -> None:
        """An earlier one-line error that a failed attempt already carries verbatim is not shown
        again as evidence: the newest failure's line stays (it is the live one)."""
        # an error line is carried by a failed attempt whole or as one of its " … " parts
        carried = self.failed.carried
        if not carried:
            return
        # after each dedupe no item of another step has a carried line; so only these can now:
        # items assigned since, the ones kept last time for being of that step, and the items
        # whose line became carried since
        ev = self.evidence
        look = dict.fromkeys(ev.take_changed())
        look.update(dict.fromkeys(self._dedupe_kept))
        for line in self.failed.take_new_carried():
            look.update(ev.by_line.get(line, {}))
        kept = []
        for eid in look:
            e = ev.get(eid)
            if e is not None and dedupe_line(e) in carried:
                if e.source_step != step:
                    del ev[eid]
                else:
                    kept.append(eid)
        self._dedupe_kept = kept

    def _verification(self, line: str, step: str, key: str) -> None:
        """The newest passing check of a command (tests passed, the reproduction now succeeds)."""
        vkey = "verify:" + key
        for oid in self.error_keys.pop(vkey, []):
            self.evidence.pop(oid, None)
        eid = item_id("ev", line, exact=True)
        self.evidence.pop(eid, None)
        self.evidence[eid] = Evidence(id=eid, source_step=step, text=line, rule_id="anchor.verification",
                                      family="verification")
        self.error_keys[vkey] = [eid]

    def _resolve(self, key: str, step: str, *, module: str = "") -> None:
        """Mark what an earlier failure of ``key`` left (evidence, failed attempts) as resolved at
        ``step``; with ``module``, also every live "No module named 'module'" error."""
        ids = list(self.error_keys.pop(key, [])) if key else []
        if module and "'" in module:
            needle = f"No module named '{module}'"
            ev = self.evidence
            ids += [eid for eid in ev.live if needle in ev[eid].text]
            ids += [f.id for f in self.failed.values() if f.status == "failed" and needle in f.error]
        elif module:
            ids += list(self.evidence.live_by_module.get(module, ()))
            ids += list(self.failed.failing_by_module.get(module, ()))
        for iid in ids:
            e = self.evidence.get(iid)
            if e is not None and e.status == "live":
                self.evidence[iid] = _resolved_evidence(e, step)
            f = self.failed.get(iid)
            if f is not None and f.status == "failed":
                self.failed[iid] = f.model_copy(update={"status": "resolved", "resolved_at": step})

    def _add_decision(self, sentence: str, step: str, reason: str = "") -> None:
        if C.OBSERVATION.match(sentence) or not C.CHOICE.search(sentence):
            return  # an observation or a routine step is not a decision (decision laundering)
        decision, why = split_reason(sentence)
        if reason and not why:
            why = reason
        did = item_id("de", decision)
        if did not in self.decisions:
            self.decisions[did] = Decision(id=did, source_step=step, decision=decision, reason=why)

    def _add_dead_end(self, sentence: str, step: str, reason: str = "") -> None:
        head, why = split_reason(sentence)
        if reason and not why:
            head, why = sentence.strip().rstrip("。.；;"), reason
        words = sentence.split()
        pronoun_led = bool(_PRONOUN_RE.match(sentence)) or (
            len(words) < 5 and not C.HAN.search(sentence))
        approach = head
        if not why:
            m = C.DEAD_END.search(head)
            colon = head.find(": ", m.end() if m else 0)
            if m and colon > 0 and colon + 2 < len(head):
                approach, why = head[:colon].strip(), head[colon + 2:].strip()
        if pronoun_led and self.last_attempt:
            # "That didn't help." — the approach is the last thing the agent tried
            approach = self.last_attempt
            why = why or sentence
        xid = item_id("ex", approach)
        if xid not in self.dead:
            self.dead[xid] = ExcludedApproach(id=xid, source_step=step, approach=approach, why=why or "",
                                              evidence=self.last_error)

    def _add_failed_attempt(self, seg: Segment, pc: PendingCall | None, error: str, step: str, key: str = "") -> None:
        command = seg.command or (pc.action if pc is not None else "")
        first = next((ln.strip() for ln in command.split("\n") if ln.strip()), "")[:300]
        if not first:
            return
        err = error if len(error) <= 400 else error[:400]
        # one item per command and kind of error: the same command failing two ways is two lessons
        fid = item_id("fx", first, _error_class(err))
        prev = next(reversed(self.failed.values()), None) if pc is not None and pc.kind in ("edit", "read") else None
        if prev is not None and fid not in self.failed and prev.status == "failed" \
                and prev.command.split(" ", 1)[0] == first.split(" ", 1)[0] \
                and _error_class(prev.error.split(" … ")[-1]) == _error_class(err):
            # the editor failing the same way on the next path it tried (a parent directory, a
            # sibling file): one lesson, from the first path tried to the newest
            # the error is the newest one; the first (the path the agent meant) stays the key
            # evidence, the ones in between are the same lesson again
            fid = prev.id
            first = f"{prev.command.split(' … ', 1)[0]} … {first}"
            self.failed[fid] = prev.model_copy(update={"command": first, "error": err})
            cls = _error_class(err)
            ev = self.evidence
            for eid in list(ev.live):
                e = ev[eid]
                if e.source_step != prev.source_step and "\n" not in e.text.strip() \
                        and e.family not in NOT_FAILURE and _error_class(e.text.strip()) == cls:
                    del ev[eid]
        old = self.failed.get(fid)
        if old is None or old.status == "resolved":
            self.failed[fid] = FailedAttempt(id=fid, source_step=step, command=first, error=err,
                                             exit_code=seg.exit_code, last_step=step,
                                             count=1 if old is None else old.count + 1)
        else:
            if err and old.error and err in old.error:
                err = old.error
            elif err and old.error:
                # the same command failing with a new error: keep the first and the newest
                first_err = old.error.split(" … ", 1)[0]
                err = f"{first_err} … {err}" if len(first_err) + len(err) < 400 else err
            self.failed[fid] = old.model_copy(update={"count": old.count + 1, "last_step": step,
                                                      "error": err or old.error,
                                                      "exit_code": seg.exit_code if seg.exit_code is not None else old.exit_code})
        if key:
            ids = self.error_keys.setdefault(key, [])
            if fid not in ids:
                ids.append(fid)

    def _add_question(self, text: str, step: str) -> str:
        qid = item_id("oq", text)
        if qid not in self.questions:
            self.questions[qid] = OpenQuestion(id=qid, source_step=step, text=text)
        return qid

    def _add_intent(self, kind: str, text: str, step: str) -> str:
        iid = item_id("in", kind, text)
        if iid not in self.intent:
            self.intent[iid] = IntentItem(id=iid, source_step=step, kind=kind, text=text)  # type: ignore[arg-type]
        return iid

    def _set_intent_status(self, iid: str, status: str) -> None:
        it = self.intent.get(iid)
        if it is not None and it.status != status:
            self.intent[iid] = it.model_copy(update={"status": status})

    def _add_constraint(self, text: str, step: str) -> None:
        t = text.strip()
        cid = item_id("uc", t, exact=True)
        key = norm_key(t)
        if cid not in self.constraints and not any(norm_key(c.text) == key for c in self.constraints.values()):
            self.constraints[cid] = UserConstraint(id=cid, source_step=step, text=t)

    def _add_fact(self, text: str, step: str, via: str) -> None:
        if C.CHROME_FACT.match(text.strip()) or S.chrome_fact(text):
            # tool banners, package-manager chatter, cost lines, what a search or listing prints:
            # chrome, not facts (not taken in, so a streamed fold and the list agree)
            return
        fid = item_id("fa", text)
        if fid not in self.facts:
            if via:
                # the facts of one observation share one shortened 'via' (one string, not one each)
                last = self._via
                if last[0] != via:
                    last = self._via = (via, shorten(via, 100))
                via = last[1]
            self.facts[fid] = Fact(id=fid, source_step=step, text=text, via=via)

    # ------------------------------------------------------------------ roles
    def _span_sentences(self, spans: Sequence[Span], family: str) -> list[str]:
        return [sp.text.strip() for sp in spans if sp.family == family and sp.text.strip()]

    def _assistant(self, seg: Segment, text: str, spans: Sequence[Span]) -> None:
        prose = prose_of(text)
        if prose.strip():
            self.answered = True
        if C.FINISHED.search(prose):
            self.finished = True
        self._prose(seg.step_id, prose, spans, author="assistant")

    def _prose(self, step: str, prose: str, spans: Sequence[Span], *, author: str) -> None:
        sents = sentences(prose)
        span_dec = _whole_zh(self._span_sentences(spans, "decision"), sents)
        span_dead = _whole_zh(self._span_sentences(spans, "failed-approach"), sents)
        for t in span_dec:
            self._add_decision(t, step)
        for t in span_dead:
            self._add_dead_end(t, step)
        new_questions: list[str] = []
        boxes: list[str] = []
        said: list[str] = []
        done_boxes: list[str] = []
        if "[" in prose:
            for m in C.CHECKBOX.finditer(prose):
                (done_boxes if m.group(1) in "xX" else boxes).append(m.group(2).strip())
        low = prose.lower()
        cue = {name: c for name, c in CUES.items() if c.possible(low)}  # cues that can match at all
        dec, dead = cue.get("decision"), cue.get("dead_end")
        que, ass, nxt = cue.get("question"), cue.get("assumption"), cue.get("next_step")
        for i, s in enumerate(sents):
            ls = s.lower()
            covered = bool(span_dec or span_dead) and any(s in t or t in s for t in span_dec + span_dead)
            if not covered and dead is not None and dead.search(s, ls):
                self._add_dead_end(s, step, _zh_reason_next(s, sents[i + 1] if i + 1 < len(sents) else "", cue))
            elif not covered and dec is not None and dec.search(s, ls):
                reason = ""
                if i + 1 < len(sents) and _REASON_NEXT.match(sents[i + 1]):
                    reason = sents[i + 1]
                self._add_decision(s, step, reason)
            if author != "assistant":
                continue
            if (s.endswith("?") or s.endswith("？")) and len(s) >= 12:
                new_questions.append(self._add_question(s, step))  # asked: the user's reply answers it
            elif que is not None and que.search(s, ls):
                self._add_question(s, step)
            if ass is not None and ass.search(s, ls):
                self.recent_assumptions.append(self._add_intent("assumption", s, step))
            if nxt is not None and not s.endswith("?") and nxt.search(s, ls) and not C.CHECKBOX.match(s):
                said.append(s)
        if author != "assistant":
            return
        if self.acted:
            # the agent acted since it last wrote: what it said it would do next is behind it
            sticky = set(self.plan_steps)
            for nid, ns in list(self.next_steps.items()):
                if ns.status == "pending" and nid not in sticky:
                    self.next_steps[nid] = ns.model_copy(update={"status": "done"})
            self.acted = False
        if boxes or said:
            if boxes:  # a new explicit plan replaces the old one
                for nid in self.plan_steps:
                    ns = self.next_steps.get(nid)
                    if ns is not None and ns.status == "pending":
                        self.next_steps[nid] = ns.model_copy(update={"status": "done"})
                self.plan_steps = []
            for p, is_box in [(b, True) for b in boxes] + [(x, False) for x in said]:
                nid = item_id("ns", p)
                if nid not in self.next_steps:
                    self.next_steps[nid] = NextStep(id=nid, source_step=step, text=p)
                if is_box and nid not in self.plan_steps:
                    self.plan_steps.append(nid)
        for d in done_boxes:
            nid = item_id("ns", d)
            if nid in self.next_steps and self.next_steps[nid].status != "done":
                self.next_steps[nid] = self.next_steps[nid].model_copy(update={"status": "done"})
        self.awaiting = new_questions

    def _handed_task(self, seg: Segment, text: str, step: str) -> None:
        """No one has asked for anything yet and an issue or task tool handed the agent its work
        (``issue_ready`` → ``{"number": 703, "title": ...}``): that issue is the task."""
        if not _TASK_TOOL.search(seg.tool_name or "") or not text.lstrip().startswith("{"):
            return
        data = parse_arguments(text)  # (a tool's JSON answer: parsed where the readers parse)
        if not isinstance(data, dict) or not isinstance(data.get("title"), str) or not data["title"].strip():
            return
        num = data.get("number", data.get("id"))
        ref = f"#{num} " if isinstance(num, (int, str)) and str(num).strip() else ""
        self.current_request = self._add_intent("initial", shorten(f"{ref}{squash(data['title'])}", _REQUEST_CHARS), step)

    def _user(self, seg: Segment, text: str, spans: Sequence[Span]) -> None:
        step = seg.step_id
        if harness_note(text):
            return  # the harness's note in the user's place: its rule is the run model's, it asks for nothing
        m_echo = _COMMAND_ECHO.match(text)
        if m_echo:  # a chat client's echo of a slash command the user ran: the request is the command
            text = f"{m_echo.group(1)} {m_echo.group(2) or ''}".strip()
        m_cmd = _CHAT_COMMAND.match(text)
        if m_cmd:
            if m_cmd.group(1).lower() not in _REQUEST_COMMANDS or not text[m_cmd.end():].strip():
                return  # a chat-tool command (/add files, /drop, ...), not a request
            text = text[m_cmd.end():].strip()  # "/ask <question>": the question is the request
        initial = self.user_messages == 0
        self.user_messages += 1
        self.finished = False
        self.answered = False
        prose = prose_of(text)
        sents = sentences(prose)
        # constraints: only from what the user wrote (not the harness's instructions appended to
        # the task, not the prose of a pasted issue): spans first (verbatim), then cue sentences
        own, issue = _own_words(text)
        cons = CUES["constraint"]
        if _SUMMARY_HEAD.match(text):
            for q in _summary_rules(text):
                self._add_constraint(q, step)
            own, issue = "", ""  # (the summary's own prose binds nothing)
        # a question asks, it does not bind ("What should we do next?", "don't we load it once?"),
        # unless it is an order put as a question ("Can you make sure you don't touch tests/?")
        span_cons = [t for t in self._span_sentences(spans, "constraint")
                     if t in own and not any(_asks(x) for x in sentences(t) or [t])]
        for t in span_cons:
            self._add_constraint(t, step)
        constraint_sents = []
        # (a question inside a sentence the splitter kept whole — "i doubt that? it must be X, no?" — asks too)
        for s in [p for x in sentences(prose_of(own)) for p in _QUESTION_END.split(x) if p.strip()]:
            if _asks(s):
                continue  # "don't we load all entries on construction?" asks, it does not bind
            if cons.search(s) or C.STOP.match(s) or _ORDER_QUESTION.match(s):
                constraint_sents.append(s)
                if not any(s in t or t in s for t in span_cons):
                    self._add_constraint(s, step)
        self._reported(issue or own, spans, step)
        # a pasted issue: its author's requirements bound the solution, its analysis does not
        for s in sentences(prose_of(issue)):
            if _REQUIREMENT.search(s) and not _ANALYSIS.search(s):
                self._add_constraint(s, step)
        if initial:
            request = _condense_request(text)
            expected = _expected_behaviour(own if own.strip() else text, issue)
            if expected and squash(expected) not in request:
                request = f"{request} — expected: {expected}"
            iid = self._add_intent("initial", request, step)
            self.current_request = iid
            if len(text) <= 600:
                self._prose(step, prose, spans, author="user")
            self.awaiting = []
            self.recent_assumptions = []
            return
        self._prose(step, prose, spans, author="user")
        first = sents[0] if sents else squash(text)
        confirm = bool(C.CONFIRM.match(first))
        rejects = [s for s in sents if C.REJECT.search(s)]
        starts_no = bool(rejects) and rejects[0] == first and bool(_NO_RE.match(first))
        for aid in self.recent_assumptions:
            if confirm:
                self._set_intent_status(aid, "done")
            elif starts_no:
                self._set_intent_status(aid, "superseded")
        answered = list(self.awaiting)
        for qid in answered:
            q = self.questions.get(qid)
            if q is not None and q.status == "open":
                self.questions[qid] = q.model_copy(update={"status": "resolved"})
        self.awaiting = []
        self.recent_assumptions = []
        for s in rejects:
            self._add_intent("rejected", s, step)
            for m in C.USE_OBJECT.finditer(s):
                obj = (m.group(1) or m.group(2) or "").casefold()
                if not obj:
                    continue
                for did, d in list(self.decisions.items()):
                    if d.status == "active" and obj in d.decision.casefold() and d.source_step != step:
                        self.decisions[did] = d.model_copy(update={"status": "superseded"})
        for s in sents:
            if CUES["relax"].search(s):
                terms = _terms(C.RELAX.sub(" ", s))
                for cid, c in list(self.constraints.items()):
                    if c.status == "active" and c.source_step != step and terms & _terms(c.text):
                        self.constraints[cid] = c.model_copy(update={"status": "superseded"})
        rest = [s for s in sents if s not in rejects]
        if not rest:
            return
        remainder = C.CONFIRM.sub("", first, count=1).strip(" ,，.。!！") if confirm else first
        if confirm and len(sents) == 1 and len(remainder) < 4:
            return  # just "yes"
        lead = rest[0]
        new_cue = bool(C.NEW_REQUEST.search(lead))
        if not new_cue and (rejects or all(s in constraint_sents for s in rest)
                            or any(C.CLARIFY.search(s) for s in rest) or answered):
            # refining the current request: an answer, a correction, a constraint, "I mean ..."
            self._add_intent("clarification", _condense_request(" ".join(rest)), step)
            return
        # a new request: the previous one is finished (acknowledged / "now do Y") or replaced
        finished = bool(C.ACK.match(lead) or new_cue)
        prev = self.current_request
        req_text = _condense_request(" ".join(rest) if rejects else text)
        new_id = item_id("in", "request", req_text)
        if new_id in self.intent:  # the same request again: it is the newest one now
            self.intent[new_id] = self.intent.pop(new_id).model_copy(update={"source_step": step})
        else:
            self._add_intent("request", req_text, step)
        if prev and prev != new_id and (C.ADDITIVE.search(lead) or _revises(self.intent.get(prev), req_text)):
            pass  # "also do Y", or the same request asked again more precisely: the earlier one stays open
        elif prev and prev != new_id:
            self._set_intent_status(prev, "done" if finished else "superseded")
            for iid, it in list(self.intent.items()):
                if it.kind == "clarification" and it.status == "active":
                    self._set_intent_status(iid, "done" if finished else "superseded")
        self._set_intent_status(new_id, "active")
        self.current_request = new_id

    def _reproduction(self, text: str, view: View, step: str, key: str) -> None:
        """What the agent's reproduction script printed, when it is short (the bug's symptom, or
        the changed output after a fix): verbatim, the newest run live, an earlier different
        output resolved at the run that changed it."""
        lines = text.split("\n")
        keep = [i for i, ln in enumerate(lines[:200]) if ln.strip() and view.evidence_ok(i)
                and not _WRAPPER_RE.match(ln.strip())]
        if not keep or len(keep) > 4 or keep[-1] - keep[0] + 1 != len(keep):
            return
        out = "\n".join(lines[keep[0]:keep[-1] + 1]).strip()
        if not out or len(out) > 240:
            return
        rkey = "repro:" + key
        eid = item_id("ev", out, exact=True)
        for oid in self.error_keys.get(rkey, []):
            e = self.evidence.get(oid)
            if oid != eid and e is not None and e.status == "live":
                self.evidence[oid] = _resolved_evidence(e, step)
        if eid not in self.evidence or self.evidence[eid].status == "resolved":
            self.evidence[eid] = Evidence(id=eid, source_step=step, text=out, rule_id="anchor.reproduction",
                                          family="reproduction")
        ids = self.error_keys.setdefault(rkey, [])
        if eid not in ids:
            ids.append(eid)

    def _reproduced(self, ev_spans: Sequence[Span]) -> None:
        """An error the task reported, now seen in a run's output: the run's evidence is the
        live one, the reported copy goes."""
        ev = self.evidence
        for eid in list(ev.by_rule["anchor.reported"]):
            e = ev[eid]
            if e.status == "live":
                last = e.text.rsplit("\n", 1)[-1].strip()
                if any(last in sp.text for sp in ev_spans):
                    del ev[eid]

    def _reported(self, region: str, spans: Sequence[Span], step: str) -> None:
        """What the task itself reports (the user's words or a pasted issue, not the harness's
        instructions): the error it quotes, with the frame that raised it, and the sentences
        that say where the bug is ("on line 101", ``fields.py#L1474``). Key evidence until a run
        reproduces the error (the run's evidence replaces it) or a passing check resolves it."""
        if not region.strip():
            return
        errors = [sp for sp in spans if (sp.rule_id == "error.exception-line" or sp.family == "trace")
                  and sp.text.strip() and sp.text.strip() in region]
        # a trace's message is its last line; a trace span of one line is only the header
        lines = [sp.text.strip().rsplit("\n", 1)[-1].strip() for sp in errors if sp.rule_id == "error.exception-line"
                 or "\n" in sp.text.strip()]
        lines = [ln for ln in lines if ln and ln in region]
        if lines:
            line = max(lines, key=region.rfind)
            pos = region.rfind(line)
            before = [ln for ln in region[max(0, pos - 2000):pos].split("\n") if ln.strip()][-2:]
            frame = next((ln for ln in before if _FRAME_AT.search(ln)), None)
            start = region.rfind(frame, 0, pos) if frame is not None else -1
            text = region[start:pos + len(line)] if start >= 0 else line  # verbatim, from the frame
            self._evidence(Span(rule_id="anchor.reported", family="error", start=0, end=len(text),
                                line_start=1, line_end=1, text=text, step_id=step), step)
        n = 0
        for sent in sentences(prose_of(region)):
            if n >= 3 or not _LOCATION_SENT.search(sent) or len(sent) > 300 or sent.endswith(("?", "？")):
                continue
            self._evidence(Span(rule_id="anchor.reported-location", family="location", start=0, end=len(sent),
                                line_start=1, line_end=1, text=sent, step_id=step), step)
            n += 1

    # ------------------------------------------------------------------ tools
    def _applied_diff(self, text: str, step: str, tool: str) -> None:
        """A diff the tool printed (an editor's result, ``git diff``, a submitted patch): the net
        change of each file it names, recorded when no edit of that file already says what
        changed (files written by a shell here-document or a script, files the editor created)."""
        for path, created, deleted, removed, added in _parse_diff(text):
            p = self._canon(path)
            described = any(p in c.files and c.tool and not _VOCAB.is_kind(c.tool, CallKind.shell) and "`" in c.description
                            for c in self.changes.values())
            if described:
                continue
            action = "created" if created else ("deleted" if deleted else "modified")
            parts = []
            if removed and not created:
                parts.append("− " + removed)
            if added:
                parts.append("+ " + added)
            desc = f"{action} {p}" + (f" (diff: `{' '.join(parts)}`)" if parts else "")
            cid = item_id("ch", desc)
            if cid not in self.changes:
                self.changes[cid] = ChangeMade(id=cid, source_step=step, description=desc, files=[p], tool=tool,
                                               status="applied")
            if p not in self.files or action != "modified" or "modified" not in self.files[p]["actions"]:
                self._touch(p, action, step)

    def _final_message(self, message: str, step: str) -> None:
        """The agent's closing message: what it asks the user to do is an open question."""
        for s in sentences(prose_of(message)):
            if C.ASKS_USER.search(s) or s.endswith(("?", "？")):
                self._add_question(s, step)
            elif _GAVE_UP.search(s):
                # the agent closing on what it could not do: the state the work is left in
                self._evidence(Span(rule_id="anchor.closing", family="error", start=0, end=len(s), line_start=1,
                                    line_end=1, text=s, step_id=step), step)

    def _canon(self, path: str) -> str:
        """One name per file: an absolute path and a relative one that is its unique suffix
        (``/repo/src/a.py`` and ``src/a.py``) are the same file; the first name seen is kept."""
        if path in self.files:
            return path
        if path.startswith("/"):
            hits = [k for k in self.files if not k.startswith("/") and path.endswith("/" + k)]
        else:
            hits = [k for k in self.files if k.startswith("/") and k.endswith("/" + path)]
        return hits[0] if len(hits) == 1 else path

    def _touch(self, path: str, action: str, step: str) -> None:
        f = self.files.get(path)
        if f is None:
            f = self.files[path] = {"actions": [], "first_step": step, "last_step": step, "related": [],
                                    "unfinished": False}
        if action not in f["actions"]:
            f["actions"].append(action)
        f["last_step"] = step
        seqs = self.file_seq.setdefault(path, [0, 0, 0])
        seqs[{"read": 0, "deleted": 2}.get(action, 1)] = self.seq

    def _call(self, seg: Segment, text: str, spans: Sequence[Span]) -> None:
        step = seg.step_id
        raw = seg.text
        if raw and not raw.lstrip().startswith("{") and seg.command and raw.strip() != seg.command.strip():
            # a text action (SWE-agent 0.x): the reply holds the model's prose and the command
            self._prose(step, prose_of(text), spans, author="assistant")
        for qid in self.awaiting:
            # the agent asked and went on without an answer: a rhetorical or self-answered question
            q = self.questions.get(qid)
            if q is not None and q.status == "open":
                self.questions[qid] = q.model_copy(update={"status": "resolved"})
        self.awaiting = []
        self.acted = True
        self.answered = True
        call = call_of(seg)
        name = (seg.tool_name or "").lower()
        cmd0 = (seg.command or raw or "").strip()
        if name in _FINISH_TOOLS or cmd0 in _FINISH_TOOLS or "COMPLETE_TASK_AND_SUBMIT" in cmd0:
            self.finished = True
            self._final_message(_finish_message(seg.command or raw, call), step)
        hit = self.run.effects  # the run model's fold read this call just before: its effects, not again
        self.run.effects = None
        eff = hit[2] if hit is not None and hit[0] == seg.id and hit[1] == self.open_file \
            else call_effects(call, self.open_file)
        if seg.command and not eff.ops and eff.kind in ("other", "shell"):
            _editor_verb_call(eff, seg.tool_name or "", seg.command, raw)
        commit = ""
        if eff.state_change or eff.kind == "shell":
            msg = _commit_message(seg.command or raw)
            if msg:
                # the message is quoted once: the command up to its "-m" shows how it was run
                eff.action = eff.action.split(" -m ", 1)[0].rstrip() if " -m " in eff.action else eff.action
                commit = f" — commit “{msg}”"
        if eff.open_file is not None:
            self.open_file = eff.open_file
        writes: list[tuple[str, str]] = []
        for raw_path, op in eff.ops:
            path = self._canon(raw_path)
            if op == "read":
                self._touch(path, "read", step)
                continue
            if op == "write":
                seqs = self.file_seq.get(path)
                gone = seqs is not None and seqs[2] > seqs[1]
                action = "created" if path not in self.files or gone else "modified"
            elif op == "modify":
                action = "modified"
            else:
                action = "deleted"
            self._touch(path, action, step)
            if all(p != path for p, _ in writes):
                writes.append((path, action))
        change_ids: list[str] = []
        if writes or eff.state_change:
            files = [p for p, _ in writes]
            if eff.kind == "shell":
                desc = f"ran `{eff.action or eff.state_change}`{commit}"
                if writes:
                    desc += ": " + ", ".join(f"{a} {p}" for p, a in writes)
            else:
                desc = ", ".join(f"{a} {p}" for p, a in writes)
                if eff.detail:
                    desc += f" ({eff.detail})"
            cid = item_id("ch", desc, *files, raw if eff.kind != "shell" else (seg.command or raw))
            tool = seg.tool_name or ""
            old = self.changes.get(cid)
            if old is None:
                self.changes[cid] = ChangeMade(id=cid, source_step=step, description=desc, files=files,
                                               tool=tool, status="pending")
            elif old.status != "pending":
                self.changes[cid] = old.model_copy(update={"status": "pending"})
            change_ids.append(cid)
            self.last_attempt = desc
            self.last_attempt_step = step
            self.last_error = ""
            # files changed in the same step are related
            if self.step_files and self.step_files[0] != step:
                self.step_files = []
            if not self.step_files:
                self.step_files = [step]
            for p in files:
                for q in self.step_files[1:]:
                    if q != p:
                        self._relate(p, q)
                if p not in self.step_files[1:]:
                    self.step_files.append(p)
        self.pending.append(PendingCall(call_id=seg.call_id or "", step_id=step, kind=eff.kind,  # type: ignore[arg-type]
                                        commands=eff.commands, change_ids=change_ids, files=[p for p, _ in writes],
                                        action=shorten(eff.action or seg.command or "", 160)))
        if len(self.pending) > _MAX_PENDING:
            self.pending = self.pending[-_MAX_PENDING:]

    def _relate(self, a: str, b: str) -> None:
        for x, y in ((a, b), (b, a)):
            f = self.files.get(x)
            if f is not None and y not in f["related"]:
                f["related"].append(y)

    def _match_call(self, seg: Segment) -> PendingCall | None:
        idx = None
        if seg.call_id:
            for i, pc in enumerate(self.pending):
                if pc.call_id == seg.call_id:
                    idx = i
                    break
        if idx is None:
            for i in range(len(self.pending) - 1, -1, -1):
                if self.pending[i].step_id == seg.step_id and (not seg.call_id or not self.pending[i].call_id):
                    idx = i
                    break
        if idx is None:
            return None
        return self.pending.pop(idx)

    def _result(self, seg: Segment, text: str, spans: Sequence[Span]) -> None:
        step = seg.step_id
        pc = self._match_call(seg)
        if self.user_messages == 0 and not self.current_request:
            self._handed_task(seg, text, step)
        if (seg.tool_name or "").lower() in _FINISH_TOOLS:
            self._final_message(text, step)
            return  # the agent's closing message echoed back: not an observation of the environment
        kind = pc.kind if pc is not None else "other"
        command = seg.command or (pc.action if pc is not None else "") or ""
        lazy = _LazyView(text, command, seg.tool_name)  # classified only when a decision needs it
        # evidence only from lines that are not a file's content, a listing or the tool's framing
        ev_spans = [sp for sp in spans if sp.family in EVIDENCE_FAMILIES and sp.family != "exit-code"
                    and sp.text.strip() and not _LABEL_ONLY.match(sp.text.strip())]
        if ev_spans:
            ev_spans = [sp for sp in ev_spans if _span_is_evidence(sp, lazy.v)]
        flagged = seg.is_error is True or (seg.exit_code is not None and seg.exit_code != 0)
        head = text[:4000]
        m_fail = C.EDIT_FAILED.search(head) if kind in ("edit", "read") else None
        if m_fail is not None and lazy.v.shows_code and not _line_is_evidence(head, m_fail.start(), lazy.v):
            m_fail = None  # the failure phrase is a line of the file the editor shows
        benign = flagged and _benign_exit(command, seg.exit_code, text)
        if benign:
            flagged = False
        if kind in ("edit", "read"):
            # an editor echoes file contents: error-looking lines in them are not failures
            failed = flagged or m_fail is not None
        else:
            failed = flagged or bool(ev_spans)
        # a tool that reported success (exit 0, or its own passed / success flag): the error lines
        # in its output are evidence of what it printed (a reproduction, an e2e test exercising
        # error handlers), not of an approach that failed
        reported_ok = not flagged and (seg.exit_code == 0 or seg.is_error is False and seg.exit_code is None)
        timed_out = seg.exit_code is not None and seg.exit_code < 0 or bool(_TIMEOUT.search(head))
        if pc is not None:
            # a compound shell line's exit status belongs to its last command, not to its writes;
            # a timeout or a harness exception stops all of it
            attributable = pc.kind != "shell" or pc.commands <= 1 or timed_out
            change_failed = (flagged or m_fail is not None) and attributable
            noop_commit = "nothing to commit" in head and "commit" in command
            for cid in pc.change_ids:
                ch = self.changes.get(cid)
                if ch is not None and noop_commit and not ch.files and "commit" in ch.description:
                    del self.changes[cid]  # a commit that found nothing to commit changed nothing
                    continue
                if ch is not None:
                    if change_failed and kind == "edit":
                        # an edit the tool rejected changed nothing: it is a failed attempt, not a change
                        del self.changes[cid]
                        continue
                    status = "failed" if change_failed else "applied"
                    upd = {"status": status} if ch.status != status else {}
                    m_sha = _COMMIT_SHA.search(head) if status == "applied" and " — commit “" in ch.description else None
                    if m_sha is not None and m_sha.group(1) not in ch.description:
                        # the commit's id, as git printed it: what a successor checks out or reverts
                        upd["description"] = ch.description.replace(" — commit “", f" — commit {m_sha.group(1)} “", 1)
                    if upd:
                        self.changes[cid] = ch.model_copy(update=upd)
            for p in pc.files:
                f = self.files.get(p)
                if f is not None:
                    f["unfinished"] = change_failed
        key = _command_key(command, kind, pc) if failed or self.error_keys or kind == "shell" else ""
        if failed:
            line = _error_line(head, lazy.v, ev_spans, m_fail, kind)
            self.last_error = shorten(line, 400) if len(line) > 400 else line
            self.last_error_step = step
            self.last_result_error = True
            for sp in ev_spans:
                self._evidence(sp, step, key)
            self._reproduced(ev_spans)
            if not ev_spans and line and kind in ("edit", "read") or (timed_out and line):
                # an editor's or the harness's own error message is the evidence of this failure;
                # earlier ones of that kind live on in their failed attempts, not here twice
                for eid in list(self.evidence.by_rule[TOOL_ERROR]):
                    del self.evidence[eid]
                self._evidence(Span(rule_id=TOOL_ERROR, family="error", segment_id=seg.id, start=0,
                                    end=len(line), line_start=1, line_end=1, text=line, step_id=step), step, key)
            if not reported_ok and not _expected_failure(command, line) and not self._probe_before_change(command, line):
                self._add_failed_attempt(seg, pc, line, step, key)
                self._dedupe_evidence(step)
            ok = _passing_line(text, lazy.v) if reported_ok and command and _PASSING.search(text[-20_000:]) else ""
            if ok:  # the check passed as its tool reports: its passing line is the verification
                self._verification(ok, step, key or command)
        else:
            self.last_result_error = False
            self._resolve(key, step, module=_installed_module(command))
            checked = key and kind == "shell" or reported_ok and command and pc is None  # (a harness's check)
            ok = _passing_line(text, lazy.v) if checked and _PASSING.search(text[-20_000:]) else ""
            if ok:
                self._verification(ok, step, key or command)
            elif key and kind == "shell" and _runs_repro(command):
                self._reproduction(text, lazy.v, step, key)
        diffish = text.startswith("@@ ") or "\n@@ " in text[:200_000]
        if diffish and not failed and lazy.v.kind == "diff":
            self._applied_diff(text, step, seg.tool_name or "")
        if "to the chat" in text:
            # a chat tool's context: the files the user put in scope, each run of those lines
            # one fact (verbatim)
            for m in _ADDED_BLOCK.finditer(text[:200_000]):
                fact = m.group(0).strip()
                fid = item_id("fa", fact)
                if fid not in self.facts:
                    self.facts[fid] = Fact(id=fid, source_step=step, text=fact, via="")
        if "Applied edit to " in text:
            # a chat tool's edit (aider): the file it reports as edited changed
            for m in _APPLIED_EDIT.finditer(text[:200_000]):
                p = self._canon(m.group(1))
                desc = f"modified {p} (edit applied by the tool)"
                cid = item_id("ch", desc, step)
                if cid not in self.changes:
                    self.changes[cid] = ChangeMade(id=cid, source_step=step, description=desc, files=[p],
                                                   tool=seg.tool_name or "", status="applied")
                self._touch(p, "modified", step)
        if not failed and _PASS_RESOLVES and self.evidence.verified_steps.get(step):
            # a passing check after the failures: earlier run errors are superseded by it
            ev = self.evidence
            for eid in list(ev.resolvable):
                e = ev[eid]
                if e.source_step != step:
                    ev[eid] = _resolved_evidence(e, step)
        if kind in ("read", "edit"):
            return  # file contents, not observations
        via = pc.action if pc is not None else (seg.command or "")
        if (diffish and lazy.v.kind == "diff") or call_kind(command, seg.tool_name) in ("source", "diff", "listing"):
            return  # a file's content or a directory listing states no facts
        self._facts(text, spans, step, via, prose=kind == "other", skip=[sp.text for sp in ev_spans],
                    own_script=self._runs_own_script(command))

    def _probe_before_change(self, command: str, error: str) -> bool:
        """A script the agent wrote, run before it changed any file it did not create, failing for
        a reason that is not the environment: it shows the bug, as intended (a reproduction)."""
        if _ENV_ERROR.search(error) or not self._runs_own_script(command):
            return False
        return not any("created" not in f["actions"] and ("modified" in f["actions"] or "deleted" in f["actions"])
                       for f in self.files.values())

    def _runs_own_script(self, command: str) -> bool:
        """The command runs a script the agent itself wrote in this trajectory."""
        for argv in _argvs(command):
            prog = argv[0].rsplit("/", 1)[-1]
            ops = [a for a in argv[1:] if not a.startswith("-")]
            if prog.startswith(("python", "node", "ruby", "bash", "sh")) and ops:
                f = self.files.get(self._canon(ops[0].removeprefix("./")))
                if f is not None and "created" in f["actions"]:
                    return True
        return False

    def _facts(self, text: str, spans: Sequence[Span], step: str, via: str, *, prose: bool,
               skip: Sequence[str] = (), view: View | None = None, own_script: bool = False) -> None:
        """Facts stated by one observation: verbatim lines / sentences (never rephrased).

        Lines that are already key evidence are not repeated as facts. The output of a script the
        agent wrote is its own probe: only test summaries and installs are facts there, not its
        "name: number" lines."""
        body = text[:_MAX_FACT_SCAN]
        if not body.strip():
            return
        # number spans from the protect rules: the line they sit on is a fact
        for sp in spans:
            if sp.family == "number" and not own_script:
                start = body.rfind("\n", 0, sp.start) + 1
                end = body.find("\n", sp.end)
                line = body[start:end if end >= 0 else len(body)].strip()
                if 0 < len(line) <= 300:
                    self._add_fact(line, step, via)
        nonempty = [ln.strip() for ln in body.split("\n") if ln.strip()] if prose and len(body) <= 20_000 else []
        if nonempty and sum(1 for ln in nonempty if _is_prose_line(ln)) * 2 >= len(nonempty):
            n = 0
            for s in sentences("\n".join(nonempty)):
                if n >= _MAX_PROSE_FACTS:
                    break
                if _is_fact_sentence(s) and not any(s in t for t in skip):
                    self._add_fact(s, step, via)
                    n += 1
            for s in sentences("\n".join(nonempty)):
                if CUES["hedge"].search(s):
                    q = f"{shorten(via, 120)}: {s}" if via else s
                    self._add_question(q, step)
            return
        if body.count("\n") > 2 * _FACT_EDGE_LINES:
            # long output: its head and its tail (where runners print summaries) are scanned
            head = body[: _nth(body, "\n", _FACT_EDGE_LINES)]
            tail = body[_nth_from_end(body, "\n", _FACT_EDGE_LINES) + 1:]
            body = head + "\n" + tail
        n = 0
        verdicts = self._fact_shapes
        for m in _DIGIT_LINE.finditer(body):  # every structured fact holds a digit
            if n >= _MAX_LINE_FACTS:
                break
            raw = m.group(0)
            ln = raw.strip()
            if len(ln) > 200 or (skip and any(ln in t for t in skip)):
                continue
            # the patterns below treat every digit alike: lines that differ only in their digits
            # (download lists, progress lines) get the same verdict, computed once
            if own_script and not (C.TEST_SUMMARY.search(ln) or C.INSTALLED.search(ln)):
                continue
            shape = raw.translate(_SHAPE)
            ok = verdicts.get(shape)
            if ok is None:
                ok = not C.CODEISH.search(raw) and bool(
                    C.TEST_SUMMARY.search(ln) or C.INSTALLED.search(ln) or (len(ln) <= 80 and C.VERSION.match(ln))
                    or (len(ln) <= 160 and not ln.startswith("<") and C.KEY_NUM.search(ln)))
                if len(verdicts) > 50_000:
                    verdicts.clear()
                verdicts[shape] = ok
            if ok:
                self._add_fact(ln, step, via)
                n += 1

    # ------------------------------------------------------------------ freezing
    def freeze(self) -> Anchor:
        history = list(self.intent.values())
        intent = self._kept("intent", (history, self.current_request, self.objective), lambda: self._intent(history))
        files = []
        was_get = self._was.get
        for path, f in self.files.items():
            seqs = self.file_seq.get(path, [0, 0, 0])
            superseded = bool(seqs[0] and max(seqs[1], seqs[2]) > seqs[0])
            was = was_get(("file", path))
            # the entry the anchor had, when every field is the same (what ``_same`` would keep, without
            # validating a new entry only to compare it)
            if was is not None and was.first_step == f["first_step"] and was.last_step == f["last_step"] \
                    and was.read_superseded is superseded and was.unfinished is bool(f["unfinished"]) \
                    and was.actions == f["actions"] and was.related == f["related"]:
                files.append(was)
                continue
            files.append(self._same(("file", path), FileTouch(
                path=path, actions=list(f["actions"]), first_step=f["first_step"], last_step=f["last_step"],
                read_superseded=superseded, related=list(f["related"]), unfinished=bool(f["unfinished"]))))
        fields = dict(
            facts_learned=list(self.facts.values()),
            decisions_made=list(self.decisions.values()),
            open_questions=list(self.questions.values()),
            dead_ends=list(self.dead.values()),
            failed_attempts=list(self.failed.values()),
            intent=intent,
            key_evidence=list(self.evidence.values()),
            user_constraints=list(self.constraints.values()),
            files_touched=files,
            steps_seen=self.steps_seen,
        )
        # what the derived items are computed from: the anchor's fields as read (a plain view, not a
        # validated model: the one model is built once, below, with everything in it)
        raw_changes = list(self.changes.values())
        raw_next = list(self.next_steps.values())
        draft = SimpleNamespace(**fields, changes_made=raw_changes, next_steps=raw_next, overflow=[])
        # (the key: all _next_steps reads, _unverified's included)
        next_steps = list(self._kept("next_steps", (raw_next, fields["key_evidence"], files, raw_changes, history,
                                                    self.current_request, self.finished, self.answered,
                                                    self.last_result_error, self.last_error, self.last_error_step),
                                     lambda: self._next_steps(draft)))
        # the sections the run model decides (see sections.py); the extracted lists are kept in
        # the cursor when they differ, so a merge continues from them
        run = self.run.model()
        raw = {k: fields[k] for k in ("failed_attempts", "key_evidence", "dead_ends", "facts_learned",
                                       "decisions_made", "open_questions", "user_constraints")}
        rev = self.run.rev  # (the run's steps, files, errors and families are unchanged while it is)
        net0 = _net_changes(draft)
        idx = self._kept("run_index", (rev,), self.run.index)
        net = self._kept("run_changes", (rev, net0), lambda: S.changes(net0, run, self._memo, idx, self.run))
        derived_view = self._run_sections(run, raw, net, next_steps, files, idx)
        fields.update(derived_view[0])
        next_steps = derived_view[1]
        derived = [n.id for n in next_steps if n.id not in self.next_steps]
        derived += [c.id for c in net if c.id not in self.changes]
        collapsed = raw_changes if net != raw_changes else []
        raw_steps = raw_next if [n.id for n in next_steps if n.id in self.next_steps] != \
            [n.id for n in raw_next] else []
        cursor = AnchorCursor(
            objective=self.objective, seq=self.seq, last_step=self.last_step, open_file=self.open_file,
            step_files=list(self.step_files), file_seq={k: (v[0], v[1], v[2]) for k, v in self.file_seq.items()},
            pending_calls=list(self.pending), last_attempt=self.last_attempt,
            last_attempt_step=self.last_attempt_step, last_error=self.last_error,
            last_error_step=self.last_error_step, last_result_error=self.last_result_error,
            awaiting_answer=list(self.awaiting), recent_assumptions=list(self.recent_assumptions),
            acted=self.acted, plan_steps=list(self.plan_steps),
            user_messages=self.user_messages, current_request=self.current_request,
            error_keys={k: list(v) for k, v in self.error_keys.items()}, finished=self.finished,
            answered=self.answered, derived_ids=derived, collapsed_changes=collapsed, raw_next_steps=raw_steps,
            run=run, **{name: (raw[field] if raw[field] is not fields[field] and raw[field] != fields[field] else [])
                        for name, field in (("raw_failed", "failed_attempts"), ("raw_evidence", "key_evidence"),
                                            ("raw_dead", "dead_ends"), ("raw_facts", "facts_learned"),
                                            ("raw_decisions", "decisions_made"), ("raw_questions", "open_questions"),
                                            ("raw_constraints", "user_constraints"))},
        )
        view = SimpleNamespace(**fields, changes_made=net, next_steps=next_steps, cursor=cursor, overflow=[])
        return Anchor(**fields, changes_made=net, next_steps=next_steps, cursor=cursor,
                      status=self._kept("status", (rev, run.status, run.status_step, run.status_note),
                                        lambda: S.status_line(run)),
                      live_failure=self._kept("live", (run.errors,), lambda: S.live_failure_line(run)),
                      objective_state=_objective_text(self._objective_parts(view), self.steps_seen),
                      next_action_hint=next_action_hint(view))

    def _run_sections(self, run, raw: dict, net: list, next_steps: list, files: list,
                      idx: tuple) -> tuple[dict, list]:
        """The sections the run model decides, from the extracted lists (each kept while what it
        reads is the same: the run's calls and results, or the list it filters)."""
        rev, kept, memo = self.run.rev, self._kept, self._memo
        searched = S.searched_steps(run) if run.calls else frozenset()
        facts = raw["facts_learned"]
        if not isinstance(self.facts, FactLedger):
            # (chrome is not taken in at all (``_add_fact``): a streamed fold's ledger holds the same)
            facts = kept("run_facts", (facts,), lambda: S.facts(facts))
        failed = kept("run_failed", (rev, raw["failed_attempts"], net),
                      lambda: S.failed_approaches(raw["failed_attempts"], run, net, memo, idx))
        return ({
            "failed_attempts": failed,
            # (evidence reads the run's errors, its recent steps and command families, which steps
            # only searched and the failed approaches: kept while they are the same)
            "key_evidence": kept("run_evidence", (run.calls > 0, run.errors, run.steps, run.families, searched,
                                                  failed, raw["key_evidence"]),
                                 lambda: S.evidence(raw["key_evidence"], run, memo, searched, failed, idx)),
            "dead_ends": raw["dead_ends"],
            "facts_learned": facts,
            "decisions_made": kept("run_decisions", (raw["decisions_made"],),
                                   lambda: S.decisions(raw["decisions_made"])),
            "open_questions": kept("run_questions", (raw["open_questions"],),
                                   lambda: S.open_questions(raw["open_questions"])),
            "user_constraints": kept("run_constraints", (raw["user_constraints"],),
                                     lambda: S.constraints(raw["user_constraints"])),
        }, kept("run_next", (run.status, run.status_step, run.calls > 0, run.errors, run.plan, run.plan_step,
                             run.plan_acted, run.steps[-1:] if run.status == "stopped-error" else None, next_steps),
                lambda: S.next_steps(next_steps, run, files)))  # (all that next_steps reads of the run)

    def _objective_parts(self, view: SimpleNamespace) -> tuple[list[str], list[str], list[str]]:
        """``_objective_parts`` of the anchor being frozen (kept while all it reads is equal)."""
        facts = self._facts_told()
        cur = view.cursor
        key = (cur.objective, view.intent.current, view.intent.newest_request, view.intent.history,
               facts if facts is not None else view.facts_learned, view.changes_made, view.files_touched,
               view.dead_ends, view.open_questions, cur.last_result_error, cur.last_error, cur.last_error_step)
        return self._kept("objective", key, lambda: _objective_parts(view, facts))

    def _kept(self, part: str, key: tuple, make):
        """``make()``, or what it gave the last freeze when ``key`` (everything it reads) compares
        equal to that freeze's: the anchor's lists are compared item by item in C, and an
        unchanged item is the same object. (The result is shared: not to be changed in place.)"""
        held = self._kept_parts.get(part)
        if held is not None and held[0] == key:
            return held[1]
        got = make()
        self._kept_parts[part] = (key, got)
        return got

    def _facts_told(self) -> tuple[int, str, str] | None:
        """(how many facts, the first and the last step that stated one) when the facts are not all
        held (a :class:`FactLedger`), else None (:func:`objective_state` reads the list)."""
        f = self.facts
        return (len(f), f.first_step, f.last_step) if isinstance(f, FactLedger) else None

    def _next_steps(self, a: Anchor) -> list[NextStep]:
        """The plan's pending steps (none once the work is finished), then what the state itself
        asks for: the live failure, a request nobody has answered yet. Never a template."""
        out = [n for n in a.next_steps if not (self.finished and n.status == "pending")]
        derived: list[tuple[str, str]] = []
        live = [e for e in a.key_evidence if e.status == "live" and e.family not in NOT_FAILURE]
        if self.last_result_error and self.last_error:
            derived.append((f"resolve the live failure: {self.last_error}", self.last_error_step))
        elif live and not self.finished:
            e = live[-1]
            derived.append((f"resolve the live failure: {_first_error_line(e.text)}", e.source_step))
        verify = self._unverified(a)
        if verify:
            derived.append(verify)
        cur = self.intent.get(self.current_request)
        if not self.answered and cur is not None and cur.status == "active":
            # every request still open, the newest first (none of them has an answer yet)
            still_open = _still_open(list(self.intent.values()), cur)
            pending = "; ".join([cur.text, *still_open])
            label = "answer the pending requests" if still_open else "answer the pending request"
            derived.append((f"{label}: {pending}", cur.source_step))
        for text, step in derived:
            nid = item_id("ns", text)
            if all(n.id != nid for n in out):
                out.append(self._same(("next", nid), NextStep(id=nid, source_step=step, text=text)))
        return out

    def _same(self, key: tuple[str, str], item: Any) -> Any:
        """``item``, or the equal one the anchor this state was built from had."""
        was = self._was.get(key)
        return was if was is not None and was == item else item

    def _unverified(self, a: Anchor) -> tuple[str, str] | None:
        """A change to the code that no passing run came after, while the agent's reproduction
        script is still there: running it is the next step (unless the work was handed in)."""
        if self.finished:
            return None
        repro = [f.path for f in a.files_touched if "created" in f.actions and f.actions[-1] != "deleted"
                 and _REPRO_SCRIPT.search(f.path)]
        if not repro:
            return None
        code = [c for c in a.changes_made if c.status == "applied" and c.files
                and any(p not in repro and any(p == f.path and "modified" in f.actions for f in a.files_touched)
                        for p in c.files)]
        if not code:
            return None
        last_change = max(_step_num(c.source_step) for c in code)
        # (a passing check is not shown as evidence: the builder's table still holds it)
        checks = [_step_num(e.source_step) for e in self.evidence.values() if e.family == "verification"]
        if checks and max(checks) > last_change:
            return None
        step = max((c.source_step for c in code), key=_step_num)
        return f"verify the change of {step}: run {repro[-1]} again (no passing run since)", step

    def _intent(self, history: list[IntentItem]) -> Intent:
        initial = next((it.text for it in history if it.kind == "initial"), "")
        requests = [it for it in history if it.kind in ("initial", "request")]
        cur = self.intent.get(self.current_request)
        newest = cur if cur is not None else (requests[-1] if requests else None)
        current = ""
        if cur is not None and cur.status == "active":
            current = cur.text
            seen = False
            clar = []
            for it in history:
                if it.id == cur.id:
                    seen = True
                elif seen and it.kind == "clarification" and it.status == "active":
                    clar.append(it.text)
            if clar:
                current = current + " — clarified: " + "; ".join(clar)
            still_open = _still_open(history, cur)[::-1]
            if still_open:
                current = current + " — still open: " + "; ".join(still_open)
        if not current:
            current = self.objective
        return Intent(initial=initial or self.objective, current=current,
                      newest_request=newest.text if newest else "",
                      newest_request_step=newest.source_step if newest else "", history=history)


# ------------------------------------------------------------------ tool results


_FRAME_AT = lazy_regex(r'^\s*File "[^"]+", line \d+|^\s*at \S.*[:(]\d+|\.\w{1,5}:\d+')
# a sentence of a task statement that says where the bug is: a line number, a file:line, a link to a line
_LOCATION_SENT = lazy_regex(r"\b(?:on |at |in )?line \d+\b|\b[\w/.-]+\.\w{1,5}:\d+\b|\.\w{1,5}#L\d+\b")
_TIMEOUT = lazy_regex(r"timed out after [\d.]+ ?(?:seconds|s)\b|\bTimeoutExpired\b|\bCommand timed out\b")
_HARNESS_EXC = lazy_regex(r"^<exception>An error occurred while executing the command:")
_SEARCHERS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "find", "fd", "locate", "which", "pgrep"})
_COMPARERS = frozenset({"diff", "cmp", "comm", "test", "[", "[[", "git-diff"})
_SHELL_NOISE = frozenset({"cd", "export", "set", "source", ".", "pushd", "popd", "true", "echo", "sleep"})
_FILTERS = frozenset({"head", "tail", "sort", "uniq", "wc", "cut", "tr", "tee", "cat", "less", "more", "xargs", "column"})
_ENV_ERROR = lazy_regex(r"No module named|ModuleNotFoundError|ImportError|command not found|not installed|"
                             r"Permission denied|No such file or directory|timed out|SECRET_KEY|ImproperlyConfigured|"
                             r"Connection refused|Could not resolve|ENOENT|cannot open shared object")
_REPRO_SCRIPT = lazy_regex(r"(?i)(?:^|[/_-])(?:repro\w*|reproduce\w*)\.\w+$")
_ERRORISH = lazy_regex(r"^(?:- )?E\d{3} |\b[A-Z]\w*(?:Error|Exception)\b:|^error(?:\[\w+\])?:|^fatal:|^FAIL|"
                            r"No replacement was performed|is required for command|did not appear verbatim|does not exist|"
                            r"No such file|not found|timed out")
_LABEL_ONLY = lazy_regex(r"^(?:ERRORS?|Error|error|WARNING|Warning)\s*:?\s*$")
_PASSING = lazy_regex(r"(?i)\b(?:\d+ passed|\d+ pass$|all (?:\w+ )*(?:tests? )?pass(?:ed)?|tests? passed|ran \d+ tests?|"
                           r"completed successfully|fix works|^ok$|^ok \(|success(?:ful(?:ly)?)?\b)")
_INSTALL = lazy_regex(r"^(?:pip3?|python3? -m pip|conda|mamba|uv pip|poetry|apt(?:-get)?|npm|yarn|pnpm)\b.*\b(?:install|add)\b")


def _argvs(command: str) -> list[list[str]]:
    return [a for a in split_commands(command) if a and a[0].rsplit("/", 1)[-1] not in _SHELL_NOISE
            and ">" not in a and ">>" not in a]


def _command_key(command: str, kind: str, pc: PendingCall | None) -> str:
    """What counts as "the same command again": an edit of the same file, a run of the same
    program and script (``python reproduce.py``, ``python -m pytest``)."""
    if kind in ("edit", "read"):
        files = pc.files if pc is not None and pc.files else []
        target = files[0] if files else next(iter(command.split()[1:2]), command.strip()[:120])
        return f"{kind}:{target}"
    argvs = _argvs(command)
    if not argvs:
        return ""
    argv = argvs[0]
    prog = argv[0].rsplit("/", 1)[-1]
    ops = [a for a in argv[1:] if not a.startswith("-")]
    if prog.startswith("python") and len(argv) > 2 and argv[1] == "-m":
        return f"python -m {argv[2]}"
    if prog.startswith("python") and len(argv) > 2 and argv[1] == "-c":
        return f"python -c {argv[2][:80]}"
    return " ".join([prog] + ops[:1])


_PASS_RESOLVES = True


class _LazyView:
    """codeview's view of one tool output, computed on first use."""

    __slots__ = ("_args", "_view")

    def __init__(self, text: str, command: str, tool: str | None) -> None:
        self._args = (text, command, tool)
        self._view: View | None = None

    @property
    def v(self) -> View:
        if self._view is None:
            text, command, tool = self._args
            self._view = classify(text, command=command, tool=tool)
        return self._view
def _still_open(history: list[IntentItem], cur: IntentItem) -> list[str]:
    """The requests besides ``cur`` that are still open, newest first; one the user asked again
    in longer words (its text is part of a later request's) is that request."""
    texts = [it.text for it in reversed(history)
             if it.kind in ("initial", "request") and it.status == "active" and it.id != cur.id]
    out: list[str] = []
    for t in texts:
        if t in cur.text or any(t in o for o in texts if o != t):
            continue
        if t not in out:
            out.append(t)
    return out


def _runs_repro(command: str) -> bool:
    """The command runs a reproduction script (``python reproduce.py``)."""
    for argv in _argvs(command):
        prog = argv[0].rsplit("/", 1)[-1]
        ops = [a for a in argv[1:] if not a.startswith("-")]
        if prog.startswith(("python", "node", "ruby", "bash", "sh")) and ops and _REPRO_SCRIPT.search(ops[0]):
            return True
    return False


def _step_num(step: str) -> int:
    digits = "".join(ch for ch in step if ch.isdigit())
    return int(digits) if digits else 0


_ADDED_BLOCK = lazy_regex(r"^Added \S+ to the chat[ \t]*(?:\nAdded \S+ to the chat[ \t]*)*$", C.regex.M)
_CWD = lazy_regex(r"<cwd>[^<\n]+</cwd>")
_GAVE_UP = lazy_regex(r"(?i)^(?:it seems (?:that )?)?(?:I (?:am|was) )?(?:unable to|could not|couldn't|was not able to|failed to)\b|无法|未能")
_APPLIED_EDIT = lazy_regex(r"^Applied edit to (\S+?)\s*$", C.regex.M)
_DIFF_FILE = lazy_regex(r"^\+\+\+ (\S+)|^--- (\S+)")
_HUNK = lazy_regex(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")
_DIFF_CHARS = 300


def _parse_diff(text: str) -> list[tuple[str, bool, bool, str, str]]:
    """Per file of a unified diff: (path, created, deleted, removed lines, added lines), the
    lines joined with `` ⏎ `` and bounded."""
    out: list[tuple[str, bool, bool, str, str]] = []
    cur: list = []

    def flush() -> None:
        if cur and cur[0]:
            # created: from /dev/null, or a first hunk at -0,0 that removes nothing
            created = cur[1] or (bool(cur[5]) and not cur[3])
            out.append((cur[0], created, cur[2], _join(cur[3]), _join(cur[4])))

    old_path = ""
    in_hunk = False
    for ln in text.split("\n")[:5000]:
        if ln.startswith("--- ") and not in_hunk or ln.startswith("--- a/") or (ln.startswith("--- /") and not in_hunk):
            old_path = ln[4:].split("\t", 1)[0].strip()
            continue
        if ln.startswith("+++ ") and (not in_hunk or ln.startswith(("+++ b/", "+++ /"))):
            flush()
            new_path = ln[4:].split("\t", 1)[0].strip()
            deleted = new_path == "/dev/null"
            path = old_path if deleted else new_path
            if path.startswith(("a/", "b/")):
                path = path[2:]
            cur[:] = [path, old_path == "/dev/null", deleted, [], [], None]
            in_hunk = False
            continue
        m = _HUNK.match(ln)
        if m and cur:
            in_hunk = True
            if cur[5] is None:  # the first hunk of a file
                cur[5] = m.group(1) == "0" and (m.group(2) or "1") == "0"
            continue
        if in_hunk and cur:
            if ln.startswith("+") and ln[1:].strip():
                cur[4].append(ln[1:].strip())
            elif ln.startswith("-") and ln[1:].strip():
                cur[3].append(ln[1:].strip())
            elif ln.startswith("diff "):
                in_hunk = False
    flush()
    return out


def _join(lines: list[str]) -> str:
    parts: list[str] = []
    size = 0
    for ln in dict.fromkeys(lines):
        if size + len(ln) > _DIFF_CHARS and parts:
            parts.append("…")
            break
        parts.append(ln if len(ln) <= _DIFF_CHARS else ln[: _DIFF_CHARS - 1] + "…")
        size += len(ln) + 3
    return " ⏎ ".join(parts)


def _line_is_evidence(text: str, pos: int, view: View) -> bool:
    return view.evidence_ok(text.count("\n", 0, pos))


def _span_is_evidence(sp: Span, view: View) -> bool:
    return any(view.evidence_ok(i) for i in range(sp.line_start - 1, sp.line_end))


def _benign_exit(command: str, exit_code: int | None, text: str) -> bool:
    """A non-zero exit that is an answer, not a failure: a search that found nothing, a compare
    that found a difference, a test that was false, a commit with nothing to commit."""
    if "nothing to commit" in text and "git" in command and "commit" in command:
        return True
    if exit_code != 1:
        return False
    argvs = [a for a in _argvs(command) if a[0].rsplit("/", 1)[-1] not in _FILTERS]
    if not argvs:
        return False
    last = argvs[-1][0].rsplit("/", 1)[-1]
    if last == "git" and len(argvs[-1]) > 1 and argvs[-1][1] in ("grep", "diff"):
        return True
    return last in _SEARCHERS or last in _COMPARERS


def _error_line(head: str, view: View, ev_spans: Sequence[Span], m_fail, kind: str) -> str:
    """The decisive error line of a failed result, verbatim."""
    if _HARNESS_EXC.match(head.lstrip()):
        m = _TIMEOUT.search(head)
        if m:
            return m.group(0)
    if ev_spans and kind not in ("edit", "read"):
        best = min(ev_spans, key=lambda sp: (_FAMILY_RANK.get(sp.family, 9), sp.start))
        line = _first_error_line(best.text)
        if line and not _LABEL_ONLY.match(line):
            return line
    lines = head.split("\n")
    cands = [ln.strip() for i, ln in enumerate(lines) if ln.strip() and view.evidence_ok(i)
             and not _WRAPPER_RE.match(ln.strip()) and not _LABEL_ONLY.match(ln.strip())]
    for ln in cands:
        if _ERRORISH.search(ln):
            return ln[2:] if ln.startswith("- ") else ln
    if m_fail is not None:
        line = head[m_fail.start():].split("\n", 1)[0].strip()
        if line and not _LABEL_ONLY.match(line):
            return line
    return cands[0] if cands else ""


def _error_class(error: str) -> str:
    """The kind of an error line: its text up to the first quoted part or number (so that the
    same failure with a different argument is the same kind)."""
    cut = C.regex.split(r"[`'\"\d]", error, maxsplit=1)[0]
    return cut[:80]


def _expected_failure(command: str, error: str) -> bool:
    """A bug reproduction that fails as intended is not a failed attempt (an environment error
    while reproducing still is)."""
    for argv in _argvs(command):
        prog = argv[0].rsplit("/", 1)[-1]
        if prog.startswith(("python", "node", "ruby", "bash", "sh", "go", "cargo")):
            ops = [a for a in argv[1:] if not a.startswith("-")]
            if ops and _REPRO_SCRIPT.search(ops[0]) and not _ENV_ERROR.search(error):
                return True
    return False


def _installed_module(command: str) -> str:
    """The package a successful install command installed (its first one), for resolving
    "No module named 'x'" errors."""
    first = command.strip().split("\n", 1)[0]
    if not _INSTALL.search(first):
        return ""
    argv = next(iter(_argvs(first)), [])
    pkgs = [a for a in argv[2:] if not a.startswith("-") and a not in ("install", "add")]
    return C.regex.split(r"[<>=\[]", pkgs[0], maxsplit=1)[0] if pkgs else ""


def _passing_line(text: str, view: View) -> str:
    """The line of a successful run that says a check passed, verbatim (the last one)."""
    lines = text.split("\n")
    found = ""
    # the last such line of the last 400: looked for from the end (a runner's summary is there)
    for ln in reversed(lines[-400:]):
        s = ln.strip()
        if s and len(s) <= 200 and _PASSING.search(s) and not s.startswith(("Successfully installed", "WARNING")):
            found = s
            break
    if found:
        idx = next(i for i, ln in enumerate(lines) if found in ln and ln.strip() == found)  # (its first occurrence)
        if not view.evidence_ok(idx):
            return ""
    return found


def _nth(text: str, ch: str, n: int) -> int:
    i = -1
    for _ in range(n):
        i = text.find(ch, i + 1)
        if i < 0:
            return len(text)
    return i


def _nth_from_end(text: str, ch: str, n: int) -> int:
    i = len(text)
    for _ in range(n):
        i = text.rfind(ch, 0, i)
        if i < 0:
            return -1
    return i


_CODE_CHARS = frozenset("{}[]=<>;|$\\`")
_SHAPE = str.maketrans("123456789", "000000000")
_DIGIT_LINE = lazy_regex(r"^[^\n\d]{0,200}\d[^\n]*", C.regex.M)


def _is_prose_line(line: str) -> bool:
    if C.HAN.search(line):
        return len(line) >= 6 and not C.CODEISH.search(line)
    words = line.split()
    if len(words) < 5 or C.CODEISH.search(line):
        return False
    code = sum(1 for ch in line if ch in _CODE_CHARS)
    if code * 25 > len(line):
        return False
    alpha = sum(1 for w in words if w[:1].isalpha() or w[:1] in "\"'(")
    return alpha * 10 >= len(words) * 6


def _is_fact_sentence(s: str) -> bool:
    if s.endswith("?") or s.endswith("？") or C.HEDGE.search(s) or C.PROSE_SKIP.match(s):
        return False
    if C.HAN.search(s):
        return len(s) >= 6 and bool(C.HAS_DIGIT.search(s) or len(s) >= 12)
    if len(s) < 20 or len(s.split()) < 4:
        return False
    return bool(C.HAS_DIGIT.search(s) or C.NAME_WORD.search(s))


# --------------------------------------------------------------------------- derived text


def _goal(a: Anchor) -> str:
    return a.cursor.objective or a.intent.current or a.intent.newest_request


def objective_state(a: Anchor, facts: tuple[int, str, str] | None = None) -> str:
    """One short paragraph: where the work stands relative to the goal (deterministic template).
    ``facts``: (how many, the first and the last step that stated one), when ``a`` does not hold
    every fact."""
    return _objective_text(_objective_parts(a, facts), a.steps_seen)


def _objective_parts(a: Anchor, facts: tuple[int, str, str] | None) -> tuple[list[str], list[str], list[str]]:
    """:func:`objective_state` but the count of steps: (the sentences before "So far", its
    counts after the steps, the sentences after it). Read from the goal, the requests' history,
    the facts (or ``facts``), changes, files, dead ends, the latest error and open questions
    (``_State.freeze`` keeps them while none of those changed: every step changes the count)."""
    head: list[str] = []
    goal = _goal(a)
    if goal:
        head.append(f"Goal: {shorten(goal, 200)}")
    done = [it for it in a.intent.history if it.kind in ("initial", "request") and it.status == "done"]
    if done:
        head.append(f"{_n(len(done), 'earlier request')} finished")
    counts: list[str] = []
    if facts is None and a.facts_learned:
        steps = [f.source_step for f in a.facts_learned if f.source_step]
        facts = (len(a.facts_learned), steps[0] if steps else "", steps[-1] if steps else "")
    if facts is not None and facts[0]:
        n, first, last = facts
        rng = f" ({first}–{last})" if first and first != last else (f" ({first})" if first else "")
        counts.append(f"{_n(n, 'fact')} learned{rng}")
    if a.changes_made:
        failed = sum(1 for c in a.changes_made if c.status == "failed")
        counts.append(_n(len(a.changes_made), "change") + (f" ({failed} failed)" if failed else ""))
    modified = [f for f in a.files_touched if any(x != "read" for x in f.actions)]
    if modified:
        counts.append(f"{_n(len(modified), 'file')} changed")
    active_dead = [d for d in a.dead_ends if d.status == "excluded"]
    if active_dead:
        counts.append(f"{_n(len(active_dead), 'approach', 'approaches')} excluded")
    tail: list[str] = []
    if a.cursor.last_result_error and a.cursor.last_error:
        tail.append(f"The latest result ({a.cursor.last_error_step}) is an error: {shorten(a.cursor.last_error, 160)}")
    open_q = [q for q in a.open_questions if q.status == "open"]
    if open_q:
        tail.append(f"Open: {shorten(open_q[-1].text, 200)}")
    return head, counts, tail


def _objective_text(parts: tuple[list[str], list[str], list[str]], steps_seen: int) -> str:
    head, counts, tail = parts
    so_far = "So far: " + ", ".join([_n(steps_seen, "step"), *counts])
    return " ".join(_sentence_end(p) for p in (*head, so_far, *tail))


def _sentence_end(p: str) -> str:
    p = p.rstrip()
    return p if p.endswith((".", "!", "?", "。", "！", "？", "…")) else p + "."


def _n(count: int, word: str, plural: str = "") -> str:
    return f"{count} {word if count == 1 else (plural or word + 's')}"


def next_action_hint(a: Anchor) -> str:
    """One non-binding suggestion: the first pending next step, else the last open question;
    empty when the anchor has neither (never a template restating the task)."""
    pending = [n for n in a.next_steps if n.status == "pending"]
    if pending:
        return shorten(pending[0].text, 300)
    open_q = [q for q in a.open_questions if q.status == "open"]
    if open_q:
        return shorten(open_q[-1].text, 300)
    return ""


_SCRATCH_DESC = "scratch file {path}: created {first}, deleted {last}"


def _net_changes(a: Anchor) -> list[ChangeMade]:
    """The net effect per file: a scratch file the agent created and deleted again is one line."""
    scratch = {f.path: f for f in a.files_touched
               if "created" in f.actions and f.actions[-1] == "deleted"}
    if not scratch:
        return list(a.changes_made)
    out: list[ChangeMade] = []
    done: set[str] = set()
    for c in a.changes_made:
        only = [p for p in c.files if p in scratch]
        if c.files and len(only) == len(c.files):
            for p in only:
                if p not in done:
                    done.add(p)
                    f = scratch[p]
                    desc = _SCRATCH_DESC.format(path=p, first=f.first_step, last=f.last_step)
                    out.append(ChangeMade(id=item_id("ch", desc), source_step=f.first_step, description=desc,
                                          files=[p], tool=c.tool, status="applied"))
            continue
        out.append(c)
    return out

