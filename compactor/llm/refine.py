"""refine: the optional LLM pass over the Level 2 anchor. It can only improve the result.

``refine_anchor`` sends the seed-000 prompt (objective, the deterministic context, budget) to a
provider and maps the JSON answer onto the deterministic anchor through the guards
(:mod:`compactor.llm.guards`). Any failure — timeout, HTTP error, bad JSON, an answer still
over twice the budget after one tighter re-ask, a secret that survived redaction — returns the
deterministic anchor unchanged, with diagnostics saying why.

Egress is fail-closed: the objective, the context and the step texts are redacted with one
:class:`~compactor.secrets.Redactor` (shared numbering), and every request body is re-scanned
with the same rules right before the call; if anything still matches, nothing is sent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field

from ..errors import LLMError
from ..models import Anchor, Diagnostic, Severity
from ..secrets import Redactor, SecretScanError, SecretScanner, default_scanner
from .guards import AnswerError, GuardResult, apply_guards, parse_answer
from .prompt import CHUNK_TOKENS, SEED_FIELDS, anchor_seed_json, build_merge_prompt, build_prompt, split_context
from .providers import Completion, Provider, ProviderError, provider_from_spec

__all__ = ["RefineOutcome", "RefineReport", "default_budget", "refine_anchor", "refine_from_config"]

MAX_TEMPERATURE = 0.2
MIN_BUDGET = 300
MAX_DEFAULT_BUDGET = 1000


class RefineReport(BaseModel):
    """What the LLM pass did. Carries no secret and no key (rule ids and counts only)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str = ""
    used_llm: bool = Field(default=False, description="the returned anchor contains LLM changes")
    fallback: bool = Field(default=False, description="the LLM result was discarded entirely")
    fallback_code: str = ""
    calls: int = 0
    chunks: int = 0
    budget: int = 0
    temperature: float = 0.0
    answer_tokens: int = Field(default=0, description="tokens of the last answer (counted locally)")
    tokens_sent: int = Field(default=0, description="prompt tokens sent, counted locally")
    tokens_received: int = Field(default=0, description="answer tokens received, counted locally")
    provider_tokens_in: int = Field(default=0, description="as reported by the provider (0 if not)")
    provider_tokens_out: int = 0
    token_counter: str = ""
    secrets_redacted: dict[str, int] = Field(default_factory=dict, description="rule id -> occurrences redacted")
    added: list[dict[str, str]] = Field(default_factory=list)
    removed: list[dict[str, str]] = Field(default_factory=list)
    reworded: list[dict[str, str]] = Field(default_factory=list)
    restored: list[dict[str, str]] = Field(default_factory=list)
    rejected: list[dict[str, str]] = Field(default_factory=list)

    def summary(self) -> str:
        if self.fallback:
            return f"LLM refine fell back to the deterministic anchor ({self.fallback_code})"
        return (f"LLM refine: {len(self.added)} added, {len(self.removed)} removed, {len(self.reworded)} "
                f"reworded, {len(self.restored)} put back, {len(self.rejected)} rejected; "
                f"{self.tokens_sent} tokens sent, {self.tokens_received} received in {self.calls} call(s)")


@dataclass(frozen=True)
class RefineOutcome:
    anchor: Anchor
    diagnostics: list[Diagnostic]
    report: RefineReport


class _Fallback(Exception):
    def __init__(self, code: str, message: str):
        self.code = code
        self.message = message
        super().__init__(message)


def default_budget(anchor: Anchor, counter) -> int:
    """No budget given: the size of the deterministic anchor's seed-000 fields (what the answer
    replaces), within [300, 1000]."""
    seed = anchor_seed_json(anchor)
    n = counter.count(json.dumps({k: seed.get(k) for k in SEED_FIELDS}, ensure_ascii=False))
    return max(MIN_BUDGET, min(MAX_DEFAULT_BUDGET, n))


class _Run:
    def __init__(self, provider: Provider, counter, scanner: SecretScanner, temperature: float):
        self.provider = provider
        self.counter = counter
        self.scanner = scanner
        self.redactor = Redactor(scanner)
        self.temperature = temperature
        self.diagnostics: list[Diagnostic] = []
        self.calls = 0
        self.tokens_sent = 0
        self.tokens_received = 0
        self.provider_in = 0
        self.provider_out = 0
        self.answer_tokens = 0

    def safe(self, items) -> list[dict[str, str]]:
        """Report entries with every secret replaced by its placeholder (the report may be logged)."""
        out = []
        for it in items:
            d = it.as_dict()
            for k, v in d.items():
                if v:
                    try:
                        d[k] = self.redactor.redact(v)[0]
                    except SecretScanError:
                        d[k] = "[REDACTED:unverified]"
            out.append(d)
        return out

    # ------------------------------------------------------------------ egress
    def redact(self, text: str) -> str:
        try:
            red, _ = self.redactor.redact(text)
        except SecretScanError as exc:
            raise _Fallback("llm-secret-scan-failed", f"{exc.message}; nothing was sent") from None
        return red

    def send(self, prompt: str, max_tokens: int) -> str:
        red = self.redact(prompt)
        bodies = [red, json.dumps({"messages": [{"role": "user", "content": red}]}),
                  json.dumps({"messages": [{"role": "user", "content": red}]}, ensure_ascii=False)]
        try:
            residue = [f for b in bodies for f in self.scanner.find(b)]
        except SecretScanError as exc:
            raise _Fallback("llm-secret-scan-failed", f"{exc.message}; nothing was sent") from None
        if residue:
            rules = sorted({f.rule_id for f in residue})
            raise _Fallback("llm-egress-blocked",
                            f"{len(residue)} secret match(es) remained after redaction ({', '.join(rules)}): "
                            "nothing was sent")
        self.calls += 1
        self.tokens_sent += self.counter.count(red)
        try:
            comp = self.provider.complete(red, max_tokens=max_tokens, temperature=self.temperature)
        except ProviderError as exc:
            raise _Fallback(exc.code, exc.message) from None
        except LLMError as exc:
            raise _Fallback("llm-error", exc.one_line()) from None
        except Exception as exc:  # a custom provider: never let it crash compaction
            raise _Fallback("llm-error", f"provider raised {type(exc).__name__}") from None
        if isinstance(comp, str):
            comp = Completion(comp)
        if not isinstance(comp, Completion):
            raise _Fallback("llm-bad-response", f"provider returned {type(comp).__name__}")
        self.tokens_received += self.counter.count(comp.text)
        self.provider_in += comp.tokens_in
        self.provider_out += comp.tokens_out
        return comp.text

    # ------------------------------------------------------------------ one question
    def ask(self, make_prompt: Callable[[int, int | None], str], budget: int) -> dict[str, Any]:
        """Ask; if the answer is over 2x the budget, ask once more with a tighter cap."""
        max_tokens = min(max(3 * budget + 256, 512), 16_384)
        text = self.send(make_prompt(budget, None), max_tokens)
        n = self.counter.count(text)
        if n > 2 * budget:
            tight = max(32, budget // 2)
            self.diagnostics.append(Diagnostic(
                code="llm-over-budget", severity=Severity.info,
                message=f"the answer was {n} tokens, over twice the budget of {budget}: asked once more "
                        f"with a cap of {tight}"))
            text = self.send(make_prompt(tight, n), min(max(3 * tight + 256, 512), 16_384))
            n = self.counter.count(text)
            if n > 2 * budget:
                raise _Fallback("llm-over-budget",
                                f"the answer was still {n} tokens after a tighter re-ask (budget {budget})")
        self.answer_tokens = n
        try:
            return parse_answer(text)
        except AnswerError as exc:
            raise _Fallback(exc.code, exc.message) from None


def refine_anchor(anchor: Anchor, *, steps: dict[str, str], context: str, objective: str,
                  budget: int | None, provider: Provider, counter=None, temperature: float = 0.0,
                  chunk_tokens: int = CHUNK_TOKENS, scanner: SecretScanner | None = None) -> RefineOutcome:
    """Polish the deterministic ``anchor`` with an LLM, guarded; fall back to it on any failure.

    ``steps`` maps step ids to the step's text (the guards check every cited fact against it);
    ``context`` is what the LLM sees (Level 1 output + the anchor: never the raw history).
    ``budget`` is the target size of the answer in tokens (None: the size of the deterministic
    anchor's seed-000 fields, within [300, 1000]). ``temperature`` is clamped to [0, 0.2].
    """
    if counter is None:
        from ..tokens import get_counter

        counter = get_counter()
    temperature = min(max(float(temperature), 0.0), MAX_TEMPERATURE)
    budget = int(budget) if budget else default_budget(anchor, counter)
    scanner = scanner or default_scanner()
    run = _Run(provider, counter, scanner, temperature)
    name = getattr(provider, "name", type(provider).__name__)
    chunks_n = 0
    try:
        red_objective = run.redact(objective or "")
        red_context = run.redact(context or "")
        red_steps = {sid: run.redact(text) for sid, text in steps.items()}
        counts = run.redactor.counts()
        if counts:
            run.diagnostics.append(Diagnostic(
                code="llm-secrets-redacted", severity=Severity.info,
                message=f"{sum(counts.values())} secret(s) redacted before sending: "
                        + ", ".join(f"{k} x{v}" for k, v in counts.items())))
        chunks = split_context(red_context, counter, chunk_tokens)
        chunks_n = len(chunks)
        if len(chunks) == 1:
            answer = run.ask(lambda b, prev: build_prompt(red_objective, red_context, b, previous_tokens=prev), budget)
        else:
            summaries = []
            for i, chunk in enumerate(chunks, 1):
                part = run.ask(lambda b, prev, c=chunk, i=i: build_prompt(
                    red_objective, c, b, part=(i, len(chunks)), previous_tokens=prev), budget)
                summaries.append(json.dumps(part, ensure_ascii=False))
            answer = run.ask(lambda b, prev: build_merge_prompt(red_objective, summaries, b, previous_tokens=prev),
                             budget)
        result: GuardResult = apply_guards(anchor, answer, red_steps, shown=red_context, objective=red_objective)
    except _Fallback as fb:
        return _fallback(anchor, run, name, budget, temperature, chunks_n, fb)
    except Exception as exc:  # a bug in the guards must never lose the deterministic anchor
        return _fallback(anchor, run, name, budget, temperature, chunks_n,
                         _Fallback("llm-internal-error", f"refine failed internally ({type(exc).__name__})"))
    diagnostics = run.diagnostics + result.diagnostics
    report = RefineReport(
        provider=name, used_llm=result.changed, fallback=False, calls=run.calls, chunks=chunks_n, budget=budget,
        temperature=temperature, answer_tokens=run.answer_tokens, tokens_sent=run.tokens_sent,
        tokens_received=run.tokens_received, provider_tokens_in=run.provider_in, provider_tokens_out=run.provider_out,
        token_counter=getattr(counter, "name", ""), secrets_redacted=run.redactor.counts(),
        added=run.safe(result.added), removed=run.safe(result.removed), reworded=run.safe(result.reworded),
        restored=run.safe(result.restored), rejected=run.safe(result.rejected),
    )
    return RefineOutcome(anchor=result.anchor if result.changed else anchor, diagnostics=diagnostics, report=report)


def _fallback(anchor: Anchor, run: _Run, name: str, budget: int, temperature: float, chunks: int,
              fb: _Fallback) -> RefineOutcome:
    diags = run.diagnostics + [
        Diagnostic(code=fb.code, severity=Severity.warning, message=fb.message),
        Diagnostic(code="llm-fallback", severity=Severity.warning,
                   message="the LLM result was not used: the deterministic anchor is kept"),
    ]
    report = RefineReport(
        provider=name, used_llm=False, fallback=True, fallback_code=fb.code, calls=run.calls, chunks=chunks,
        budget=budget, temperature=temperature, answer_tokens=run.answer_tokens, tokens_sent=run.tokens_sent,
        tokens_received=run.tokens_received, provider_tokens_in=run.provider_in, provider_tokens_out=run.provider_out,
        token_counter=getattr(run.counter, "name", ""), secrets_redacted=run.redactor.counts(),
    )
    return RefineOutcome(anchor=anchor, diagnostics=diags, report=report)


def refine_from_config(anchor: Anchor, steps: dict[str, str], context: str, objective: str | None,
                       budget: int | None, config, *, counter=None, provider: Provider | None = None) -> RefineOutcome:
    """The CLI / pipeline entry point: the provider comes from ``config.llm`` (``openai:MODEL`` /
    ``anthropic:MODEL``), ``llm_base_url``, ``llm_timeout`` and ``llm_retries``.

    Without ``config.llm`` (and no ``provider``) nothing is sent and the anchor is returned as is.
    A malformed spec raises ConfigError; a missing SDK or API key falls back with a diagnostic.
    """
    if counter is None:
        from ..tokens import get_counter

        counter = get_counter(getattr(config, "encoding", "cl100k_base"))
    objective = objective or getattr(config, "objective", None) or anchor.intent.current or anchor.objective_state
    if provider is None:
        spec = getattr(config, "llm", None)
        if not spec:
            return RefineOutcome(anchor=anchor, diagnostics=[], report=RefineReport(token_counter=getattr(counter, "name", "")))
        try:
            provider = provider_from_spec(spec, base_url=getattr(config, "llm_base_url", None),
                                          timeout=getattr(config, "llm_timeout", 60.0),
                                          retries=getattr(config, "llm_retries", 2))
        except ProviderError as exc:
            return _unavailable(anchor, spec, exc.code, exc.message, counter)
        except LLMError as exc:
            return _unavailable(anchor, spec, "llm-unavailable", exc.one_line(), counter)
    return refine_anchor(anchor, steps=steps, context=context, objective=objective or "", budget=budget,
                         provider=provider, counter=counter)


def _unavailable(anchor: Anchor, spec: str, code: str, message: str, counter) -> RefineOutcome:
    diags = [Diagnostic(code=code, severity=Severity.warning, message=message),
             Diagnostic(code="llm-fallback", severity=Severity.warning,
                        message="the LLM result was not used: the deterministic anchor is kept")]
    return RefineOutcome(anchor=anchor, diagnostics=diags,
                         report=RefineReport(provider=spec, fallback=True, fallback_code=code,
                                             token_counter=getattr(counter, "name", "")))
