"""The continuation check: ask the anchor the questions a fresh agent needs answered, and
back-fill from the trajectory what it cannot answer.

The questions (:data:`QUESTIONS`): what is the task? which files changed? what failed? what is
the live error? what must not be done (constraints)? what is next? Each is answered from the
anchor's own sections; when the trajectory holds an answer that the anchor lacks, the item is
added (verbatim, with its source step) and the report names it. A question the trajectory does
not answer either (nothing failed, the work is finished) is not a gap.

Pure: no I/O; the self-check calls it with the anchor and the segments it was built from. A
conversation may pass a :class:`ContinuationMemo`: what the check reads of each segment (is it a
user message, a failed run, the constraints in its own words) is then taken once per segment, and
the answer is the same as without it.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

from ..models import Anchor, ChangeMade, Evidence, IntentItem, NextStep, Role, Segment, SegmentKind, UserConstraint
from . import cues as C
from . import sections as S
from ._text import item_id, prose_of, sentences, shorten
from .sections import live_failure
from .build import NOT_FAILURE, _benign_exit, _condense_request, _error_line, _own_words
from ..codeview import classify

__all__ = ["QUESTIONS", "ContinuationMemo", "continuation_check"]

QUESTIONS = ("task", "files_changed", "what_failed", "live_error", "constraints", "next_step")


def _is_user_message(s: Segment) -> bool:
    return (s.role == Role.user and s.kind == SegmentKind.message and not s.meta
            and bool(s.text.strip()) and not s.text.lstrip().startswith("/"))


def _is_assistant_message(s: Segment) -> bool:
    return s.role == Role.assistant and s.kind == SegmentKind.message and bool(s.text.strip())


def _user_messages(segments: Sequence[Segment]) -> list[Segment]:
    return [s for s in segments if _is_user_message(s)]


def _results(segments: Sequence[Segment]) -> list[Segment]:
    return [s for s in segments if s.kind == SegmentKind.tool_result and not s.meta]


def _constraint_sentences(text: str) -> list[str]:
    """The sentences of a user message's own words that read as constraints (and are verbatim in it)."""
    own, _ = _own_words(text)
    return [s for s in sentences(prose_of(own)) if (C.CONSTRAINT.search(s) or C.STOP.match(s)) and s in text]


class ContinuationMemo:
    """What :func:`continuation_check` reads of a conversation's segments, extended segment by
    segment while the segments it saw are the first ones of the next call (the same objects)."""

    def __init__(self) -> None:
        self.segs: list[Segment] = []
        self.mark: tuple[int, int] | None = None  # with a segment index: the segments read (SegmentIndex.mark)
        self.users: list[Segment] = []
        self.results: list[Segment] = []  # the last tool output (the check reads no other)
        self.failed: list[Segment] = []  # the last failed one
        self.last_assistant: Segment | None = None
        self.constraints: dict[int, tuple[Segment, list[str]]] = {}
        self.plan: tuple[Segment, list[str]] | None = None  # the last assistant message and its plan sentences

    def update(self, segments: Sequence[Segment], index=None) -> None:
        """Read the segments not read yet. ``index``: the conversation's segment index, updated
        with ``segments`` (its mark says, without a pass, whether the segments read are still the
        first ones)."""
        if index is not None:
            if not index.extends(self.mark):
                self.__init__()
            start = self.mark[1] if self.mark is not None else 0
        else:
            old = self.segs
            if self.mark is not None or not (len(old) <= len(segments) and all(map(operator.is_, old, segments))):
                self.__init__()
            start = len(self.segs)
        feed = self.feed
        for s in segments[start:]:
            feed(s)
        if index is not None:
            self.mark, self.segs = index.mark(), []
        else:
            self.segs = list(segments)

    def feed(self, s: Segment) -> None:
        """Read one segment (the next one of the conversation). A reader that holds no segment
        list feeds them one at a time and passes no segments to :func:`continuation_check`."""
        if _is_user_message(s):
            self.users.append(s)
        elif s.kind == SegmentKind.tool_result and not s.meta:
            self.results[:] = [s]
            if _failed(s):
                self.failed[:] = [s]
        elif _is_assistant_message(s):
            self.last_assistant = s

    def plan_sentences(self, seg: Segment) -> list[str]:
        """:func:`_plan_sentences` of the last assistant message, kept while it is the last one
        (every tool output that follows asks again)."""
        hit = self.plan
        if hit is None or hit[0] is not seg:
            hit = self.plan = (seg, _plan_sentences(seg.text))
        return hit[1]

    def constraint_sentences(self, seg: Segment) -> list[str]:
        hit = self.constraints.get(id(seg))
        if hit is None or hit[0] is not seg:
            hit = self.constraints[id(seg)] = (seg, _constraint_sentences(seg.text))
        return hit[1]


def _plan_sentences(text: str) -> list[str]:
    """The sentences of a message's prose that state a next step."""
    return [s for s in sentences(prose_of(text)) if C.NEXT_STEP.search(s)]


def _failed(seg: Segment) -> bool:
    flagged = seg.is_error is True or (seg.exit_code is not None and seg.exit_code != 0)
    if not flagged:
        return False
    return not _benign_exit(seg.command or "", seg.exit_code, seg.text)


def continuation_check(anchor: Anchor, segments: Sequence[Segment],
                       memo: ContinuationMemo | None = None, index=None) -> tuple[Anchor, list[str]]:
    """(the anchor with back-filled answers, what was back-filled as ``question:id:step``).
    ``index``: the conversation's segment index (with ``memo``: see :meth:`ContinuationMemo.update`)."""
    filled: list[str] = []
    upd: dict = {}
    if memo is not None:
        memo.update(segments, index)
        users, results, failed_any = memo.users, memo.results, memo.failed
        last_said = memo.last_assistant
        said = memo.constraint_sentences
        plan_of = memo.plan_sentences
    else:
        users, results = _user_messages(segments), _results(segments)
        failed_any = [r for r in results if _failed(r)]
        last_said = next((s for s in reversed(segments) if _is_assistant_message(s)), None)

        def said(u: Segment) -> list[str]:
            return _constraint_sentences(u.text)

        def plan_of(seg: Segment) -> list[str]:
            return _plan_sentences(seg.text)

    # task?
    if not (anchor.intent.current or anchor.intent.initial) and users:
        first = users[0]
        text = _condense_request(first.text)
        iid = item_id("in", "initial", text)
        hist = [*anchor.intent.history, IntentItem(id=iid, source_step=first.step_id, kind="initial", text=text)]
        upd["intent"] = anchor.intent.model_copy(update={"initial": text, "current": text, "history": hist})
        filled.append(f"task:{iid}:{first.step_id}")

    # which files changed? (a file only touched is back-filled as the run model derives its change
    # (sections.changes): none when the call of its last touch failed, e.g. an edit the tool
    # rejected changed nothing, as in the anchor's own fold; pending while that call has no result)
    changed = {p for c in anchor.changes_made if c.status != "failed" for p in c.files}
    touched = []
    for f in anchor.files_touched:
        acts = [a for a in f.actions if a != "read"]
        if acts and f.path not in changed:
            desc = f"{acts[-1]} {f.path}"
            touched.append(ChangeMade(id=item_id("ch", desc), source_step=f.last_step, description=desc, files=[f.path]))
    changes = list(anchor.changes_made)
    for c in S.changes(touched, anchor.cursor.run) if touched else ():
        if c.status != "failed":
            changes.append(c)
            filled.append(f"files_changed:{c.id}:{c.source_step}")
    if len(changes) != len(anchor.changes_made):
        upd["changes_made"] = changes

    # what failed? / the live error?
    tried = {fa.command.split("\n", 1)[0].strip() for fa in anchor.failed_attempts}
    evidence = list(anchor.key_evidence)
    if failed_any and not anchor.failed_attempts and not any(
            d.status == "excluded" for d in anchor.dead_ends):
        r = failed_any[-1]
        line = _error_line(r.text[:4000], classify(r.text, command=r.command, tool=r.tool_name), [], None, "other")
        cmd = (r.command or "").split("\n", 1)[0].strip()
        if line and cmd not in tried:
            eid = item_id("ev", line, exact=True)
            if all(e.id != eid for e in evidence):
                evidence.append(Evidence(id=eid, source_step=r.step_id, text=line, rule_id="anchor.backfill",
                                         family="error"))
                filled.append(f"what_failed:{eid}:{r.step_id}")
    if results and (results[-1] is failed_any[-1] if failed_any else False):
        live = [e for e in evidence if e.status == "live" and e.family not in NOT_FAILURE]
        if not live:
            r = results[-1]
            line = _error_line(r.text[:4000], classify(r.text, command=r.command, tool=r.tool_name), [], None, "other")
            if line:
                eid = item_id("ev", line, exact=True)
                evidence = [e for e in evidence if e.id != eid]
                evidence.append(Evidence(id=eid, source_step=r.step_id, text=line, rule_id="anchor.backfill",
                                         family="error"))
                filled.append(f"live_error:{eid}:{r.step_id}")
    if len(evidence) != len(anchor.key_evidence) or any(a is not b for a, b in zip(evidence, anchor.key_evidence)):
        upd["key_evidence"] = evidence

    # constraints?
    if not [c for c in anchor.user_constraints if c.status == "active"]:
        cons = []
        seen: set[str] = set()
        for u in users:
            for s in said(u):
                # a rule restated (a harness's reminder re-sent every turn) is one constraint, with
                # the step that first stated it
                key = item_id("uc", s)
                if key in seen:
                    continue
                seen.add(key)
                cid = item_id("uc", s, exact=True)
                cons.append(UserConstraint(id=cid, source_step=u.step_id, text=s))
                filled.append(f"constraints:{cid}:{u.step_id}")
        if cons:
            upd["user_constraints"] = [*anchor.user_constraints, *cons]

    # what is next?
    pending = [n for n in anchor.next_steps if n.status == "pending"]
    open_q = [q for q in anchor.open_questions if q.status == "open"]
    if not pending and not open_q and not anchor.cursor.finished:
        live = [e for e in upd.get("key_evidence", anchor.key_evidence) if e.status == "live"
                and e.family not in NOT_FAILURE]
        if anchor.cursor.run.calls and live_failure(anchor.cursor.run) is None:
            live = []  # the run model knows the tools' outcomes: no live failure, no step to resolve one
        text, step = "", ""
        if live:
            text, step = f"resolve the live failure: {shorten(live[-1].text.split(chr(10))[-1], 300)}", live[-1].source_step
        else:
            if last_said is not None and users and last_said.index > users[-1].index:
                plan = plan_of(last_said)
                if plan:
                    text, step = plan[-1], last_said.step_id
        if text:
            nid = item_id("ns", text)
            upd["next_steps"] = [*anchor.next_steps, NextStep(id=nid, source_step=step, text=text)]
            filled.append(f"next_step:{nid}:{step}")
    return (anchor.model_copy(update=upd) if upd else anchor), filled
