"""The data model: the frozen typed records that leave the pipeline.

Everything here is immutable and strict about unknown fields. They are :class:`~.record.Record`
classes: the pipeline builds them from its own values without validation (no pydantic at
start-up); data from outside is validated with ``Model.model_validate(data)``, which checks it
against the equivalent pydantic model. Internals may keep mutable working state; only these
models are returned to users, written to JSON, or read back.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from .record import Field, Record

__all__ = [
    "SCHEMA_VERSION",
    "Anchor",
    "AnchorCursor",
    "CallKind",
    "ChangeMade",
    "CutItem",
    "CompactionResult",
    "Decision",
    "Diagnostic",
    "Evidence",
    "ExcludedApproach",
    "Fact",
    "FailedAttempt",
    "FileTouch",
    "Intent",
    "IntentItem",
    "NextStep",
    "OpenQuestion",
    "PendingCall",
    "Placeholder",
    "Report",
    "Role",
    "Segment",
    "SegmentKind",
    "SelfCheck",
    "Severity",
    "Span",
    "ToolCall",
    "UserConstraint",
]

SCHEMA_VERSION = "1"


class Frozen(Record):
    """Read-only, unknown fields refused (a record's default)."""

    __slots__ = ()


class Role(str, Enum):
    system = "system"
    user = "user"
    assistant = "assistant"
    tool = "tool"


class SegmentKind(str, Enum):
    message = "message"
    tool_call = "tool_call"
    tool_result = "tool_result"


class CallKind(str, Enum):
    """What a tool call does, by the harness's tool vocabulary (``compactor/formats/tools.toml``)."""

    read = "read"
    edit = "edit"
    shell = "shell"
    search = "search"
    other = "other"


class ToolCall(Record, plain=True):
    """One tool call as the reader found it: a plain read-only record (built once per call at the
    reader edge, so cheap: slots, no validation).

    - ``name``: the tool name as written (``None`` when the layout has none);
    - ``kind``: read / edit / shell / search / other, from the harness vocabulary;
    - ``paths``: the files or directories its arguments name;
    - ``command``: the command the reader took from the call (a shell line, ``view <path>``, ...);
    - ``arguments``: the JSON object the argument text holds, parsed once (``None`` when the text
      is not a JSON object); read-only by convention, never changed after the read. Left out of
      equality and hashing: it is parsed from ``raw``, which is compared;
    - ``raw``: the argument text exactly as in the input (the call segment's text).
    """

    name: str | None
    kind: CallKind
    paths: tuple[str, ...]
    command: str | None
    arguments: dict[str, Any] | None = Field(compare=False)
    raw: str

    def __repr__(self) -> str:
        return (f"ToolCall(name={self.name!r}, kind={self.kind.value}, paths={self.paths!r}, "
                f"command={(self.command or '')[:60]!r})")


class Segment(Frozen):
    """One piece of conversation text, as a reader found it.

    ``origin`` locates the text in the layout's document (a path of keys and indices) so a
    writer can put a compacted text back in the same place. ``step`` is the 1-based step (turn)
    the segment belongs to: a tool call and its result share a step. A ``tool_call`` segment
    carries its typed :class:`ToolCall` (``call``), built once by the reader.
    """

    id: str = Field(description="stable id within the document, e.g. 'm12' or 'm12.1'")
    index: int = Field(ge=0, description="position in conversation order")
    step: int = Field(ge=0, description="1-based step; 0 for the system prompt")
    step_id: str = Field(description="the step's public name: the layout's own id ('s3') or 's<step>'")
    role: Role
    kind: SegmentKind
    text: str
    call_id: str | None = None
    tool_name: str | None = None
    command: str | None = Field(default=None, description="the command / arguments of the call (on results: of the paired call)")
    is_error: bool | None = None
    exit_code: int | None = None
    meta: bool = Field(default=False, description="harness text (demonstration, hook output), not authored by the human")
    origin: tuple[str | int, ...] = ()
    call: ToolCall | None = Field(default=None, description="the typed tool call (tool_call segments only)")


class Span(Frozen):
    """A protected region found by a protect rule. ``text`` is kept verbatim."""

    rule_id: str
    family: str
    segment_id: str | None = None
    start: int = Field(ge=0, description="character offset in the segment text (normalised)")
    end: int = Field(ge=0)
    line_start: int = Field(ge=1, description="1-based first line")
    line_end: int = Field(ge=1, description="1-based last line (inclusive)")
    text: str
    priority: int = 50
    step_id: str | None = None
    elided: bool = Field(default=False, description="a long trace whose middle was elided (first/last lines and every frame kept)")


class Placeholder(Frozen):
    """A collapsed region: the summary that replaced it and how to get it back."""

    id: str = Field(pattern=r"^c-[0-9a-f]{16}$")
    rule_id: str
    summary: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    segment_id: str | None = None
    line_start: int = 1
    line_end: int = 1
    tokens_before: int = 0
    tokens_after: int = 0


class Severity(str, Enum):
    info = "info"
    warning = "warning"
    error = "error"


class Diagnostic(Frozen):
    code: str = Field(description="stable machine code, e.g. 'rule-timeout', 'invalid-utf8'")
    severity: Severity = Severity.info
    message: str
    rule_id: str | None = None
    segment_id: str | None = None
    position: str | None = None


# --------------------------------------------------------------------------- anchor items


class Item(Frozen):
    id: str = Field(description="stable id: derived from the item's content")
    source_step: str = Field(default="", description="the step the item came from ('' if not traceable)")


class Fact(Item):
    text: str
    via: str = Field(default="", description="the action whose observation stated the fact (shortened)")


class Decision(Item):
    decision: str
    reason: str = ""
    status: Literal["active", "superseded"] = "active"


class ExcludedApproach(Item):
    approach: str
    why: str = ""
    evidence: str = Field(default="", description="verbatim evidence that it failed")
    status: Literal["excluded", "reopened"] = "excluded"


class FailedAttempt(Item):
    """A tool call that failed (non-zero exit, error flag, or error output): what was tried,
    verbatim, and the first error line. Not a concluded dead end (those are ``dead_ends``), but
    the anti-repeat list a fresh agent needs so it does not run the same failing command again."""

    command: str = Field(description="the call's command, verbatim (its first line, at most 300 characters)")
    error: str = Field(default="", description="the first error line of the result, verbatim")
    exit_code: int | None = None
    count: int = Field(default=1, ge=1, description="how many times this command failed")
    last_step: str = ""
    status: Literal["failed", "resolved"] = Field(
        default="failed", description="resolved: a later run of the same command (or a fix of its cause) succeeded")
    resolved_at: str = Field(default="", description="the step that resolved it")


class ChangeMade(Item):
    description: str
    files: list[str] = Field(default_factory=list)
    tool: str = ""
    status: Literal["pending", "applied", "failed"] = Field(
        default="applied", description="pending: no result seen yet; failed: the result reported an error")


class UserConstraint(Item):
    text: str = Field(description="verbatim")
    status: Literal["active", "superseded"] = "active"


class Evidence(Item):
    text: str = Field(description="verbatim protected span")
    rule_id: str = ""
    family: str = ""
    status: Literal["live", "resolved", "stale"] = Field(
        default="live", description="resolved: a later run of the same command (or a fix of its cause) succeeded; "
                                    "stale: the run changed the code or moved on and never re-ran it")
    resolved_at: str = Field(default="", description="the step that resolved it")


class OpenQuestion(Item):
    text: str
    status: Literal["open", "resolved"] = "open"


class NextStep(Item):
    text: str
    status: Literal["pending", "done"] = "pending"


class IntentItem(Item):
    kind: Literal["initial", "clarification", "rejected", "assumption", "request"]
    text: str
    status: Literal["active", "superseded", "done"] = "active"


class Intent(Frozen):
    initial: str = ""
    current: str = Field(default="", description="the current consensus: the newest request that is not finished")
    newest_request: str = ""
    newest_request_step: str = ""
    history: list[IntentItem] = Field(default_factory=list, description="initial request, clarifications, rejections, assumptions, requests")


class FileTouch(Frozen):
    path: str
    actions: list[Literal["read", "created", "modified", "deleted"]] = Field(default_factory=list)
    first_step: str = ""
    last_step: str = ""
    read_superseded: bool = Field(default=False, description="read before a later edit: the read content is stale")
    related: list[str] = Field(default_factory=list)
    unfinished: bool = False


class Overflow(Frozen):
    """Items of one section that did not fit the anchor's size bound: counted, and reachable by
    their ids and source steps (the trajectory keeps the originals)."""

    section: str
    count: int = Field(ge=1)
    ids: list[str] = Field(default_factory=list)
    steps: list[str] = Field(default_factory=list)


class PendingCall(Frozen):
    """A tool call whose result has not been seen yet (anchor bookkeeping)."""

    call_id: str = ""
    step_id: str = ""
    kind: Literal["edit", "shell", "read", "other"] = "other"
    commands: int = Field(default=0, description="simple commands in a shell line")
    change_ids: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list, description="files the call writes")
    action: str = Field(default="", description="short text of the call")


# --------------------------------------------------------------------------- the run model
# (built from typed tool calls and outputs by compactor.anchor.runmodel; the anchor's status, live
# failure, changes, failed approaches and next step are derived from it)


class RunStep(Frozen):
    """One tool call and its outcome as the tool reported it."""

    step: str = ""
    action: Literal["edit", "run", "test", "read", "search", "install", "submit", "message"] = "run"
    target: str = Field(default="", description="the file, or the command's first line")
    family: str = Field(default="", description="what counts as the same command again")
    call_id: str = ""
    done: bool = Field(default=False, description="a result was seen")
    ok: bool = True
    exit_code: int | None = None
    error: str = Field(default="", description="the decisive error line, verbatim")
    signature: str = Field(default="", description="the error with numbers and addresses masked")
    location: str = Field(default="", description="file:line the error points at")
    passed: int | None = None
    failed: int | None = None
    files: tuple[str, ...] = ()


class FileLife(Frozen):
    path: str
    change: Literal["created", "modified", "reverted", "deleted", "created-deleted"] = "modified"
    first_step: str = ""
    last_step: str = ""
    edits: int = 0
    failed_edits: int = 0


class ErrorLife(Frozen):
    signature: str
    text: str = ""
    family: str = ""
    action: str = ""
    location: str = ""
    first_step: str = ""
    last_step: str = ""
    count: int = 1
    state: Literal["live", "resolved", "stale"] = "live"
    why: str = Field(default="", description="what resolved it or made it stale")
    at: str = Field(default="", description="the step that resolved it or made it stale")


class TestLife(Frozen):
    test: str
    status: Literal["passed", "failed"] = "failed"
    step: str = ""


class FamilyLife(Frozen):
    family: str
    action: str = ""
    attempts: int = 0
    failures: int = 0
    last_step: str = ""
    last_ok: bool = True


class RunModel(Frozen):
    """The run as its tools reported it: steps, each entity's life and the task status."""

    steps: list[RunStep] = Field(default_factory=list, description="the most recent calls (at most 64)")
    calls: int = 0
    files: list[FileLife] = Field(default_factory=list)
    errors: list[ErrorLife] = Field(default_factory=list)
    tests: list[TestLife] = Field(default_factory=list)
    families: list[FamilyLife] = Field(default_factory=list)
    status: Literal["working", "finished", "submitted", "stopped-limit", "stopped-error", "waiting"] = "working"
    status_step: str = ""
    status_note: str = Field(default="", description="the line that stopped the run, the question asked, the final claim")
    last_change_step: str = ""
    last_step: str = ""
    plan: str = Field(default="", description="the agent's last stated plan")
    plan_step: str = ""
    plan_acted: bool = Field(default=False, description="a call came after the plan")
    harness_rules: list[str] = Field(default_factory=list, description="binding lines of the harness's instructions")
    seq: int = 0
    open_file: str = Field(default="", description="the file an editor-style agent has open")


class AnchorCursor(Frozen):
    """Bookkeeping that lets :func:`compactor.anchor.merge` continue exactly where the last build stopped.

    Not part of the memory shown to an agent (never rendered); kept in the anchor so that
    merging step by step gives the same anchor as building from the whole trajectory.
    """

    objective: str = ""
    seq: int = Field(default=0, ge=0, description="segments folded in so far")
    last_step: str = ""
    open_file: str = Field(default="", description="the file an editor-style agent (SWE-agent) has open")
    step_files: list[str] = Field(default_factory=list, description="files changed in last_step")
    file_seq: dict[str, tuple[int, int, int]] = Field(
        default_factory=dict, description="path -> (seq of last read, of last write, of last delete)")
    pending_calls: list[PendingCall] = Field(default_factory=list)
    last_attempt: str = ""
    last_attempt_step: str = ""
    last_error: str = ""
    last_error_step: str = ""
    last_result_error: bool = False
    awaiting_answer: list[str] = Field(default_factory=list, description="ids of questions the user's next message answers")
    recent_assumptions: list[str] = Field(default_factory=list, description="ids of assumptions made since the last user message")
    acted: bool = Field(default=False, description="a tool call happened since the last assistant prose")
    plan_steps: list[str] = Field(default_factory=list, description="ids of next steps from explicit plan lists (checkboxes)")
    user_messages: int = 0
    current_request: str = Field(default="", description="id of the active request in intent.history")
    error_keys: dict[str, list[str]] = Field(
        default_factory=dict, description="command key -> ids of the evidence and failed attempts it produced")
    derived_ids: list[str] = Field(default_factory=list, description="ids of items derived at freeze (next steps from the state, scratch-file lines)")
    collapsed_changes: list[ChangeMade] = Field(default_factory=list, description="changes folded into a scratch-file line at freeze")
    raw_next_steps: list[NextStep] = Field(default_factory=list, description="the next steps before freeze presented them")
    finished: bool = Field(default=False, description="the work was submitted / declared finished after the last request")
    answered: bool = Field(default=False, description="the agent acted or replied after the newest user request")
    run: RunModel = Field(default_factory=RunModel, description="the run model the derived sections come from")
    # the sections as extracted, when the run model changed what the anchor shows (else empty)
    raw_failed: list[FailedAttempt] = Field(default_factory=list)
    raw_evidence: list[Evidence] = Field(default_factory=list)
    raw_dead: list[ExcludedApproach] = Field(default_factory=list)
    raw_facts: list[Fact] = Field(default_factory=list)
    raw_decisions: list[Decision] = Field(default_factory=list)
    raw_questions: list[OpenQuestion] = Field(default_factory=list)
    raw_constraints: list[UserConstraint] = Field(default_factory=list)


class Anchor(Frozen):
    """The working memory: seed-000 fields plus seed-001 sections plus the files-touched trail."""

    schema_version: str = SCHEMA_VERSION
    status: str = Field(default="", description="one line: where the task stands, from the run model")
    live_failure: str = Field(default="", description="the newest unresolved error with its location, or 'none'")
    # seed 000
    objective_state: str = ""
    facts_learned: list[Fact] = Field(default_factory=list)
    decisions_made: list[Decision] = Field(default_factory=list)
    open_questions: list[OpenQuestion] = Field(default_factory=list)
    dead_ends: list[ExcludedApproach] = Field(default_factory=list, description="seed-001 'excluded approaches'")
    failed_attempts: list[FailedAttempt] = Field(default_factory=list, description="commands that failed, verbatim, with their first error line")
    next_action_hint: str = Field(default="", description="non-binding suggestion")
    # seed 001
    intent: Intent = Field(default_factory=Intent)
    changes_made: list[ChangeMade] = Field(default_factory=list)
    next_steps: list[NextStep] = Field(default_factory=list)
    key_evidence: list[Evidence] = Field(default_factory=list)
    user_constraints: list[UserConstraint] = Field(default_factory=list)
    files_touched: list[FileTouch] = Field(default_factory=list)
    overflow: list[Overflow] = Field(default_factory=list, description="items left out by the size bound, per section")
    # bookkeeping
    steps_seen: int = 0
    cursor: AnchorCursor = Field(default_factory=AnchorCursor, description="merge bookkeeping; never rendered")

    @property
    def excluded_approaches(self) -> list[ExcludedApproach]:
        return self.dead_ends

    def is_empty(self) -> bool:
        return not (
            self.objective_state
            or self.facts_learned
            or self.decisions_made
            or self.open_questions
            or self.dead_ends
            or self.changes_made
            or self.key_evidence
            or self.user_constraints
            or self.files_touched
            or self.intent.current
        )


# --------------------------------------------------------------------------- results


class SelfCheck(Frozen):
    continuity: bool = True
    anti_repeat: bool = True
    evidence_chain: bool = True
    backfilled: list[str] = Field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.continuity and self.anti_repeat and self.evidence_chain


class CutItem(Frozen):
    """Something the budget cut from the verbatim output (it stays reachable by reference)."""

    priority: int = Field(ge=1, le=6, description="ladder priority: 1 request/constraints … 6 the rest")
    what: str
    step: str = ""
    ref: str | None = Field(default=None, description="reference that expands to the original, when it has its own")
    text: str = ""


class Report(Frozen):
    schema_version: str = SCHEMA_VERSION
    format: str
    tokens_before: int
    tokens_after: int
    token_counter: str = Field(description="which counter produced the numbers, e.g. 'tiktoken:cl100k_base' or 'estimate:chars/4'")
    level: int = Field(ge=0, le=3, description="highest level applied (0 = nothing collapsed)")
    levels_available: list[int] = Field(default_factory=list)
    budget: int | None = None
    protected: list[Span] = Field(default_factory=list)
    placeholders: list[Placeholder] = Field(default_factory=list)
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    self_check: SelfCheck | None = None
    exit_signal: bool = Field(default=False, description="Level 3 was needed: the session is getting too long")
    recommend_new_session: bool = False
    segments: int = 0
    stages: list[str] = Field(default_factory=list)
    redacted: dict[str, int] = Field(default_factory=dict, description="secrets redacted per rule id (--redact)")
    llm: dict[str, Any] | None = Field(default=None, description="what the optional LLM pass changed, rejected, sent and received")
    floor: int | None = Field(default=None, description="with a budget: the smallest output the budget can reach (newest request, user constraints, live error header), tokens as written")
    tokens_sent: int | None = Field(default=None, description="with a budget: tokens of the output as written in the layout and read back (mirror copies included)")
    cut: list[CutItem] = Field(default_factory=list, description="with a budget: what was cut to fit, in priority order; folded originals expand back")

    @property
    def ratio(self) -> float:
        return self.tokens_before / self.tokens_after if self.tokens_after else float("inf")


class CompactionResult(Frozen):
    format: str
    messages: Any = Field(description="the compacted document, in the input's layout")
    anchor: Anchor | None = None
    report: Report
    handoff: str | None = None

    def to_json_dict(self, *, report: bool = True) -> dict[str, Any]:
        """The result as JSON data (``report=False``: the report is left for the caller to add)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "format": self.format,
            "messages": self.messages,
            "anchor": self.anchor.model_dump(mode="json") if self.anchor is not None else None,
            "report": self.report.model_dump(mode="json") if report else None,
        }
