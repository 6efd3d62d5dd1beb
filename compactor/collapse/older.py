"""Level 1, older than the recent window: lossless by reference, as short as observation masking.

After the per-output collapse, three passes over everything older than the recent window (the
last ``config.keep_recent`` tool outputs and the calls of those steps stay exactly as they are):

1. **same as** — a tool output identical to an earlier one becomes
   ``[same as s7 · ref c-…]``; a benign output identical *up to numbers and ids* becomes
   ``[same as s7 up to numbers · ref c-…]``. An output with errors is only folded into an
   exactly identical one (its numbers are evidence);
2. **older error outputs** keep their protected evidence (error lines, traces with their frames,
   exit codes, test failures), the output's first line, and one line per gap
   ``[… 37 lines · ref c-…]``;
3. **large call arguments** (heredoc file writes, editor ``create`` / ``str_replace`` payloads,
   long scripts) keep their command line, path and every short argument; each long body becomes
   ``[… 42 lines · ref c-…]``. Calls whose result failed stay verbatim: what was tried is the
   anti-repeat evidence.

Every reference expands to the complete original text of the output or call. A replacement is
used only when it is shorter than what Level 1 already produced. Tool outputs only: user and
assistant prose is never touched.
"""

from __future__ import annotations

import hashlib
import json
import operator
from typing import Any


from ..codeview import LOG, SOURCE, classify, is_edit_tool
from ..formats.calls import NOT_JSON, call_of, parse_arguments
from ..models import Placeholder, SegmentKind, ToolCall
from ..normalize import normalize
from ..segments import differing, segment_index
from ..lazyre import lazy_regex
from .delta import VIEW_MIN_LINES, call_key, read_diff, rerun_delta, view_line
from .store import content_id

__all__ = ["HardenMemo", "OlderPass", "harden", "evidence_spans", "failing_output", "output_digest", "call_has_body",
           "EVIDENCE_FAMILIES"]

EVIDENCE_FAMILIES = frozenset({"trace", "error", "exit-code", "test-failure"})
LOCATION_FAMILIES = frozenset({"fileref"})  # kept beside the evidence of an older error output
_SHAPE = lazy_regex(r"0x[0-9a-fA-F]+|\b[0-9a-f]{7,}\b|\d+")
_MIN_DUP_CHARS = 120  # shorter outputs cost less than the marker
_MAX_PREVIOUS = 256  # calls whose last older output is held to show a repeat of it as a delta
_BODY_LINES = 6  # argument strings with at least this many lines (or _BODY_CHARS) go by reference
_BODY_CHARS = 400
_BODY_KEYS = ("file_text", "new_str", "old_str", "new_string", "old_string", "oldText", "newText", "old_text", "new_text",
              "content", "new_content", "code", "text",
              "patch", "diff",
              "insert_text", "command", "cmd", "script", "input")


def _ref(store, text: str) -> tuple[str, str]:
    """(the store id, the sha256) ``text`` has; it is put in the store only when a replacement
    that refers to it is used (:meth:`OlderPass._change`)."""
    data = text.encode("utf-8", errors="surrogatepass")
    return content_id(data), hashlib.sha256(data).hexdigest()


def _est(text: str) -> int:
    return (len(text) + 3) // 4


_LOCATION_REACH = 2  # lines between a failure and its location printed apart (a blank between)


def evidence_spans(seg, spans, families: frozenset[str] = EVIDENCE_FAMILIES) -> list:
    """The evidence spans of a tool output that are evidence of what happened: not lines of a
    file the output shows (a ``raise ValueError`` in a ``cat`` of a source file), not file names
    of a listing, not the tool's own framing (:mod:`compactor.codeview`). ``families``: the span
    families looked at (the evidence families by default)."""
    ev = [sp for sp in spans if sp.family in families]
    if not ev or seg.kind != SegmentKind.tool_result:
        return ev
    from ..codeview import LOG, classify

    view = classify(normalize(seg.text), command=seg.command, tool=seg.tool_name)
    if view.kind == LOG:
        return ev
    return [sp for sp in ev if any(view.evidence_ok(i) for i in range(sp.line_start - 1, sp.line_end))]


def failing_output(seg, spans) -> bool:
    """Does the tool output ``seg`` (with its Level 1 ``spans``) fail: evidence of a failure, an
    error flag or a non-zero exit code? (A call none of whose outputs fails may be shortened.)"""
    return (bool(evidence_spans(seg, spans)) or bool(seg.is_error)
            or seg.exit_code not in (None, 0))


def output_digest(text: str) -> tuple[int, bytes, bytes]:
    """(normalised length, digest of the normalised text, digest of its shape up to numbers and
    ids) of a tool output: what the "same as" pass compares. Keyed by digests: the texts
    themselves would hold every older output a second time."""
    norm = normalize(text)
    exact = hashlib.sha256(norm.encode("utf-8", errors="surrogatepass")).digest()
    shape = hashlib.sha256(_SHAPE.sub("#", norm).encode("utf-8", errors="surrogatepass")).digest()
    return len(norm), exact, shape


def call_has_body(text: str) -> bool:
    """Is a call's text long enough (in characters or lines, or an escaped multi-line string) that
    its argument bodies may go by reference?"""
    return not (len(text) < _BODY_CHARS and text.count("\n") + 1 < _BODY_LINES and "\\n" not in text)


def _gap(n: int, ref: str) -> str:
    return f"[… {n} line{'s' if n != 1 else ''} · ref {ref}]"


def _evidence_view(text: str, spans, ref: str) -> str | None:
    """The output's first line, every line of its evidence spans and of its locations (a
    ``path:line`` in a run's output, such as a warning's ``x.py:557: UserWarning``, is a frame),
    one marker per gap. None when it has no evidence span."""
    norm = normalize(text)
    lines = norm.split("\n")
    keep: set[int] = set()
    evidence = False
    for sp in spans:
        if sp.family in EVIDENCE_FAMILIES or sp.family in LOCATION_FAMILIES:
            evidence = evidence or sp.family in EVIDENCE_FAMILIES
            keep.update(range(sp.line_start - 1, min(sp.line_end, len(lines))))
    if not evidence:
        return None
    first = next((i for i, ln in enumerate(lines) if ln.strip()), 0)
    keep.add(first)
    out: list[str] = []
    gap = 0
    for i, ln in enumerate(lines):
        if i in keep:
            if gap:
                out.append(_gap(gap, ref))
                gap = 0
            out.append(ln)
        else:
            gap += 1
    if gap:
        out.append(_gap(gap, ref))
    return "\n".join(out)


def _shorten_args(text: str, ref: str, call: ToolCall) -> str | None:
    """The call with each long argument body replaced by a reference line, or None. ``text`` is
    the call's current text: its reader's parsed arguments serve while it is the text read."""
    if call.arguments is not None and text == call.raw:
        args: Any = call.arguments
    else:  # rewritten by an earlier stage, or not a JSON object: the edge's one parser
        args = parse_arguments(text)
        if args is NOT_JSON:
            args = None
    if isinstance(args, dict):
        changed = False
        new: dict[str, Any] = {}
        for k, v in args.items():
            if isinstance(v, str) and (v.count("\n") + 1 >= _BODY_LINES or len(v) >= _BODY_CHARS) and k in _BODY_KEYS:
                body = v.split("\n")
                head = body[0] if k in ("command", "cmd", "script", "input") and len(body[0]) < 300 else ""
                rest = len(body) - (1 if head else 0)
                new[k] = (head + "\n" if head else "") + _gap(rest, ref)
                changed = True
            else:
                new[k] = v
        if not changed:
            return None
        return json.dumps(new, ensure_ascii=False)
    if isinstance(args, (list, int, float)) or args is not None:
        return None  # other JSON: leave it
    body = text.split("\n")
    if len(body) < _BODY_LINES and len(text) < _BODY_CHARS:
        return None
    head = body[0] if len(body[0]) < 300 else ""
    rest = len(body) - (1 if head else 0)
    return (head + "\n" if head else "") + _gap(rest, ref)


class OlderPass:
    """The three passes as a fold: one segment at a time, in conversation order. :func:`harden`
    runs it over a state's segment list; the streamed pipeline runs it over a file's messages.

    It holds the first-seen maps of the "same as" pass (digest -> step id of the first output with
    it). Each step returns the segment's new text and its placeholder, or None (kept as it is).
    What the steps are told is decided by the caller, who sees the conversation: whether an output
    is older than the recent window, whether it fails, and which calls may be shortened (calls of
    a step before the first recent output, none of whose outputs fails)."""

    __slots__ = ("store", "count", "seen_exact", "seen_shape", "previous")

    def __init__(self, store, counter, seen_exact: dict | None = None, seen_shape: dict | None = None,
                 previous: dict | None = None) -> None:
        self.store = store
        self.count = counter.count
        self.seen_exact: dict[bytes, str] = {} if seen_exact is None else seen_exact
        self.seen_shape: dict[bytes, str] = {} if seen_shape is None else seen_shape
        # call key -> (segment, its view, its failure lines, those naming a failure) of the last older output of
        # that call: what a re-run or a re-read is shown against (:mod:`compactor.collapse.delta`)
        self.previous: dict[str, tuple] = {} if previous is None else previous

    def result(self, seg, text: str, spans, *, old: bool, failing: bool,
               digest: tuple[int, bytes, bytes] | None = None) -> tuple[str, Placeholder] | None:
        """A tool output (not harness text) with its current ``text`` and Level 1 ``spans`` (or a
        function giving them, asked only when they are read): it is recorded as seen; when ``old``
        (before the recent window) it becomes a "same as" line, or, when ``failing``, its evidence
        view. ``digest``: :func:`output_digest` of it, if known."""
        chars, exact, shape = digest if digest is not None else output_digest(seg.text)
        earlier_exact = self.seen_exact.get(exact)
        earlier_shape = None if failing else self.seen_shape.get(shape)
        self.seen_exact.setdefault(exact, seg.step_id)
        if not failing:
            self.seen_shape.setdefault(shape, seg.step_id)
        if not old:
            return None
        repeat = self._repeat(seg, spans, failing)
        if chars < _MIN_DUP_CHARS:
            return None
        held: set[int] | None = None  # the lines of spans the self-check holds to the output

        def held_lines() -> set[int]:
            nonlocal held
            if held is None:
                held = set()
                for sp in (spans() if callable(spans) else spans):
                    if sp.family in EVIDENCE_FAMILIES or sp.family == "number":
                        held.update(range(sp.line_start - 1, sp.line_end))
            return held

        if earlier_exact is None and repeat is not None and repeat[1][1].kind == SOURCE:
            # a file read again that differs: what changed is the diff, not "same up to numbers"
            change = self._delta(seg, text, repeat, held_lines())
            if change is not None:
                return change
            repeat = None
        if earlier_exact is not None or earlier_shape is not None:
            ref, sha = _ref(self.store, seg.text)
            if earlier_exact is not None:
                line = f"[same as {earlier_exact} · ref {ref}]"
            else:
                line = f"[same as {earlier_shape} up to numbers · ref {ref}]"
            return self._change(seg, text, line, "collapse.same-as", line[1:].split(" · ref")[0], ref, sha)
        if repeat is not None:
            change = self._delta(seg, text, repeat, held_lines())
            if change is not None:
                return change
        ev = evidence_spans(seg, list(spans() if callable(spans) else spans),
                            EVIDENCE_FAMILIES | LOCATION_FAMILIES) if failing else []
        if ev:
            ref, sha = _ref(self.store, seg.text)
            view = _evidence_view(seg.text, ev, ref)
            if view is not None:
                return self._change(seg, text, view, "collapse.old-error", "older error output: evidence kept",
                                    ref, sha)
        elif not failing and seg.text.count("\n") + 1 >= VIEW_MIN_LINES:
            # (a line the self-check holds, such as an error word in a file's code or a number in
            # search hits, would be put back by it: such a view stays as Level 1 left it)
            cur = repeat[1] if repeat is not None else None
            view = cur[1] if cur is not None else classify(normalize(seg.text), command=seg.command,
                                                           tool=seg.tool_name)
            ref, sha = _ref(self.store, seg.text)
            line = view_line(normalize(seg.text).split("\n"), view, ref, held_lines())
            if line is not None:
                return self._change(seg, text, line, "collapse.old-view", "older file view by reference", ref, sha)
        return None

    def _repeat(self, seg, spans, failing: bool) -> tuple | None:
        """Record an older output as the last of its call; return (the previous one of the same
        call, this one) as (segment, view, failure lines) pairs, or None when it is the first."""
        key = call_key(seg.tool_name, seg.command)
        if key is None or is_edit_tool(seg.tool_name):  # two edits of a file are not a re-read
            return None
        view = classify(normalize(seg.text), command=seg.command, tool=seg.tool_name)
        if view.kind not in (LOG, SOURCE):  # only runs and file views are shown as deltas
            return None
        fails: tuple[int, ...] = ()
        named: tuple[int, ...] = ()
        if failing and view.kind == LOG:
            lines: set[int] = set()
            by_family: dict[str, set[int]] = {}
            all_spans = list(spans() if callable(spans) else spans)
            for sp in evidence_spans(seg, all_spans):
                lines.update(range(sp.line_start - 1, sp.line_end))
                if not sp.rule_id.endswith(".summary"):  # a run's counts are not a failure's name
                    by_family.setdefault(sp.family, set()).update(range(sp.line_start - 1, sp.line_end))
            # a failure's location printed on a line of its own next to it (a linter's
            # 'src/a.ts:205:2 parse ━━━' header above its message, a '╭─[flake.nix:192:18]' below)
            # goes with it: a failure shown without where it is cannot be acted on
            if lines:
                near = frozenset(lines)
                lines.update(i for sp in all_spans if sp.family == "fileref"
                             for i in range(sp.line_start - 1, sp.line_end)
                             if any(j in near for j in range(i - _LOCATION_REACH, i + _LOCATION_REACH + 1)))
            fails = tuple(sorted(lines))
            # what names a failure: the failing tests' lines, else the error statements
            named = tuple(sorted(by_family.get("test-failure", set()) | by_family.get("error", set())))
        cur = (seg, view, fails, named)
        prev = self.previous.pop(key, None)
        self.previous[key] = cur  # the most recently seen call last
        if len(self.previous) > _MAX_PREVIOUS:  # bounded (a streamed file): the longest unseen call goes
            del self.previous[next(iter(self.previous))]
        return None if prev is None else (prev, cur)

    def _delta(self, seg, text: str, repeat: tuple, held: set[int]) -> tuple[str, Placeholder] | None:
        """A re-run as what changed against the previous run, a re-read as the diff since the last
        read (:mod:`compactor.collapse.delta`); None when neither applies or is shorter. ``held``:
        the lines the self-check holds to the output (a re-run keeps them; a re-read with any is
        not cut to its diff)."""
        (pseg, pview, pfails, pnamed), (_, view, fails, _) = repeat
        if view.kind != pview.kind or view.kind not in (LOG, SOURCE):
            return None
        if view.kind == SOURCE and held:
            return None
        ref, sha = _ref(self.store, seg.text)
        lines = normalize(seg.text).split("\n")
        plines = normalize(pseg.text).split("\n")
        if view.kind == LOG:
            new = rerun_delta(lines, fails, pseg.step_id, plines, pfails, ref, pnamed, keep=held)
            rule, summary = "collapse.rerun-delta", f"re-run of {pseg.step_id}: what changed"
        else:
            new = read_diff(lines, view, pseg.step_id, plines, pview, ref)
            rule, summary = "collapse.reread-diff", f"read again: diff since {pseg.step_id}"
        if new is None:
            return None
        # longer than Level 1's own text (a one-line summary, a read's line range), a delta is
        # still shown when it tells what changed (the diff, the failures resolved) in at most a
        # third of the output's tokens
        tells = view.kind == SOURCE or "\nresolved since " in new
        return self._change(seg, text, new, rule, summary, ref, sha,
                            or_below=self.count(seg.text) // 3 if tells else 0)

    def call(self, seg, text: str) -> tuple[str, Placeholder] | None:
        """A call that may be shortened, with its current ``text``: each long argument body by
        reference (see :func:`call_has_body`)."""
        if not call_has_body(text):
            return None
        ref, sha = _ref(self.store, seg.text)
        new = _shorten_args(text, ref, call_of(seg))
        if new is None:
            return None
        return self._change(seg, text, new, "collapse.call-body", "call argument body", ref, sha)

    def _change(self, seg, cur: str, new: str, rule: str, summary: str, ref: str,
                sha: str, or_below: int = 0) -> tuple[str, Placeholder] | None:
        """A replacement, used only when it is shorter than the current text (or, with
        ``or_below``, at most that many tokens)."""
        if new == cur:
            return None
        n = self.count(new)
        if n >= self.count(cur) and n > or_below:
            return None
        if self.store.put(seg.text.encode("utf-8", errors="surrogatepass")) != ref:
            return None  # a store that names content otherwise: the reference would not expand
        return new, Placeholder(
            id=ref, rule_id=rule, summary=summary, sha256=sha, segment_id=seg.id,
            line_start=1, line_end=max(1, seg.text.count("\n") + 1),
            tokens_before=_est(cur), tokens_after=_est(new))


class HardenMemo:
    """What :func:`harden` decided for a conversation's settled prefix, so the next call on the
    grown conversation resumes where that prefix ends instead of starting over.

    A segment is *settled* once no later message can change its decision: a message, a meta
    segment, an output older than the recent window, a call of a step before the first recent
    output (a call's decision also depends on whether any output of it failed: a failing output
    that arrives later for a call already shortened starts the pass over). The memo holds the
    settled prefix (its segments, Level 1 texts and spans), the first-seen maps at its end, and the
    replacements and placeholders made in it. Kept per conversation, never shared."""

    def __init__(self) -> None:
        self.tag: Any = None
        self.boundary = 0  # the collapse boundary and first recent step the prefix was settled under
        self.first_recent_step: int | None = None
        self.segs: list = []
        self.generation: int | None = None  # the segment index generation ``segs`` were taken from
        self.ids: list[str] = []
        self.outs: list = []  # their Level 1 outcomes (the same objects next time: nothing to compare)
        self.texts: list[str] = []
        self.spans: list[tuple] = []
        self.seen_exact: dict[bytes, str] = {}
        self.seen_shape: dict[bytes, str] = {}
        self.previous: dict[str, tuple] = {}  # call key -> the last older output of that call
        self.changes: dict[str, str] = {}
        self.placeholders: list[Placeholder] = []
        self.runs: int | None = None  # the conversation's outcome log runs at the last call
        self.calls_kept: set[str] = set()  # call ids decided while none of their outputs failed
        self.calls_failed: set[str] = set()  # call ids left verbatim because an output of theirs failed
        self.failing: dict[str, tuple] = {}  # segment id -> (segment, spans, failing)
        self.digests: dict[str, tuple] = {}  # segment id -> (segment, chars, exact digest, shape digest)
        # failed_calls' last answer: (the outputs, or the index generation they came from, their
        # outcomes, failing or not per output, call id -> how many of its outputs fail)
        self._fail: tuple[list, list, list[bool], dict[str, int]] = ([], [], [], {})

    def reset(self, tag: Any) -> None:
        failing, digests, fail = self.failing, self.digests, self._fail
        self.__init__()
        self.tag = tag
        self.failing, self.digests, self._fail = failing, digests, fail

    def failed_calls(self, results: list, outcomes: list, generation: int | None = None) -> set[str]:
        """The call ids of which a tool output fails (``results`` with their Level 1
        ``outcomes``); only the outputs whose outcome changed since the last call are judged again.
        ``generation``: the conversation's segment index generation ``results`` come from (while
        it is the same, the results of the last call are the first ones of these)."""
        prev_res, prev_outs, flags, counts = self._fail
        n = len(flags)
        if generation is not None and prev_res == generation:
            if n > len(results):
                n, flags, counts = 0, [], {}
        elif not (type(prev_res) is list and n <= len(results) and all(map(operator.is_, prev_res, results))):
            n, flags, counts = 0, [], {}

        def judge(i: int) -> bool:
            return bool(results[i].call_id) and self.is_failing(results[i], outcomes[i])

        def count(i: int, step: int) -> None:
            cid = results[i].call_id
            c = counts.get(cid, 0) + step
            if c:
                counts[cid] = c
            else:
                counts.pop(cid, None)

        for i in differing(prev_outs[:n], outcomes):
            new = judge(i)
            if new != flags[i]:
                count(i, 1 if new else -1)
                flags[i] = new
        for i in range(n, len(results)):
            new = judge(i)
            flags.append(new)
            if new:
                count(i, 1)
        self._fail = (generation if generation is not None else list(results), outcomes, flags, counts)
        return set(counts)

    def digest(self, seg) -> tuple[int, bytes, bytes]:
        """(normalised length, digest of the normalised text, digest of its shape) of a tool
        output: what the duplicate pass compares (cached per segment; the recent outputs are
        looked at again every turn)."""
        hit = self.digests.get(seg.id)
        if hit is not None and hit[0] is seg:
            return hit[1]
        val = output_digest(seg.text)
        self.digests[seg.id] = (seg, val)
        return val

    def is_failing(self, seg, outcome) -> bool:
        """:func:`failing_output` of a tool output with its Level 1 outcome (cached per segment)."""
        hit = self.failing.get(seg.id)
        if hit is not None and hit[0] is seg and hit[1] is outcome:
            return hit[2]
        spans = tuple(outcome.spans) if outcome is not None else ()
        if hit is not None and hit[0] is seg and hit[3] == spans:
            val = hit[2]
        else:
            val = failing_output(seg, spans)
        self.failing[seg.id] = (seg, outcome, val, spans)
        return val


def harden(state, store, counter, memo: HardenMemo | None = None) -> None:
    """Apply the three passes to a pipeline state after the per-output Level 1 (see above).

    With a ``memo`` (one per conversation) the settled prefix of the previous call is reused: the
    result is the same as without it, the work is what is new."""
    cfg = state.config
    if not (cfg.level == "auto" or (isinstance(cfg.level, int) and cfg.level >= 1)):
        return
    segs = state.segments
    idx = segment_index(getattr(state, "conversation", None), segs)
    results = idx.live
    if len(results) <= 1:
        return
    # "older" is what the Level 1 stage collapsed: the outputs before its boundary, which moves in
    # batches (so the rewritten history stays a stable prefix for prompt caches)
    every = idx.results
    boundary = state.boundary if state.boundary is not None else max(0, len(every) - cfg.keep_recent)
    pos = idx.result_pos

    def is_old(seg) -> bool:  # among the outputs before the boundary
        return pos.get(seg.id, boundary) < boundary

    first_recent_step = min((s.step for s in every[boundary:] if not s.meta and not is_old(s)), default=None)
    outcomes = state.outcomes
    texts = state.texts
    no_spans: tuple = ()

    def spans_of(seg) -> tuple:
        o = outcomes.get(seg.id)
        return tuple(o.spans) if o is not None else no_spans

    fresh = memo is None
    if memo is None:
        memo = HardenMemo()
    failed_calls = memo.failed_calls(results, list(map(outcomes.get, idx.live_ids)), idx.generation)

    start = 0
    if not fresh:
        n = len(memo.segs)
        # what was older stays older only while the boundary and the first recent step do not move back
        ok = memo.tag == state.cache_tag and n <= len(segs) and boundary >= memo.boundary \
            and (memo.first_recent_step is None or (first_recent_step is not None
                                                    and first_recent_step >= memo.first_recent_step)) \
            and not (memo.calls_kept & failed_calls) and memo.calls_failed <= failed_calls \
            and memo.generation == idx.generation  # the index saw the list grow: its first n are memo.segs
        if ok:
            # the outcomes the Level 1 stage may have changed since the last call (from ``lo`` on)
            log = getattr(state.conversation, "outcome_log", None)
            lo = log.since(memo.runs, idx) if log is not None else None
            lo = 0 if lo is None else min(lo, n)
            cur = list(map(outcomes.get, memo.ids[lo:] if lo else memo.ids))
            if not all(map(operator.is_, memo.outs[lo:] if lo else memo.outs, cur)):
                # a changed outcome: compare what harden reads
                for i in range(lo, n):
                    s = segs[i]
                    if cur[i - lo] is not memo.outs[i] and (texts[s.id] != memo.texts[i] or (
                            s.kind == SegmentKind.tool_result and spans_of(s) != memo.spans[i])):
                        ok = False
                        break
        if ok:
            start = n
            texts.update(memo.changes)
            if memo.changes:
                state.level = max(state.level, 1)
            state.placeholders.extend(memo.placeholders)
        else:
            memo.reset(state.cache_tag)
        memo.boundary, memo.first_recent_step = boundary, first_recent_step
        memo.generation = idx.generation
    log = getattr(getattr(state, "conversation", None), "outcome_log", None)
    memo.runs = log.runs if log is not None else None
    step = OlderPass(store, counter, memo.seen_exact, memo.seen_shape, memo.previous)
    settled = True  # still extending the memo's settled prefix

    def apply(seg, change) -> None:
        if change is None:
            return
        new, ph = change
        texts[seg.id] = new
        state.placeholders.append(ph)
        state.level = max(state.level, 1)
        if settled:
            memo.changes[seg.id] = new
            memo.placeholders.append(ph)

    for i in range(start, len(segs)):
        seg = segs[i]
        if settled:
            if seg.kind == SegmentKind.tool_result and not seg.meta:
                settled = is_old(seg)
            elif seg.kind == SegmentKind.tool_call and not seg.meta:
                settled = first_recent_step is not None and seg.step < first_recent_step
            if settled:
                memo.segs.append(seg)
                memo.ids.append(seg.id)
                memo.outs.append(outcomes.get(seg.id))
                memo.texts.append(texts[seg.id])
                memo.spans.append(spans_of(seg) if seg.kind == SegmentKind.tool_result else no_spans)
            else:  # the rest is decided again next time: first-seen entries go to a copy
                step.seen_exact, step.seen_shape = dict(step.seen_exact), dict(step.seen_shape)
                step.previous = dict(step.previous)
        if seg.meta:
            continue
        if seg.kind == SegmentKind.tool_result:
            if not is_old(seg):
                # a recent output is kept as it is, and what it would record as seen could only
                # matter to an older output after it: there is none (the outputs before the
                # boundary come first), and the pass is started again from the settled prefix
                # next time
                continue
            # (its spans are read only when it may be cut to its evidence)
            apply(seg, step.result(seg, texts[seg.id], lambda seg=seg: spans_of(seg), old=True,
                                   failing=memo.is_failing(seg, outcomes.get(seg.id)), digest=memo.digest(seg)))
        elif seg.kind == SegmentKind.tool_call:
            if first_recent_step is None or seg.step >= first_recent_step:
                continue
            if seg.call_id and seg.call_id in failed_calls:
                if settled:
                    memo.calls_failed.add(seg.call_id)
                continue
            if settled and seg.call_id:
                memo.calls_kept.add(seg.call_id)
            apply(seg, step.call(seg, texts[seg.id]))
