"""The optional LLM pass: it only ever polishes the Level 2 anchor, guarded, and falls back to
the deterministic anchor on any failure.

Importing this package imports no SDK: ``openai`` / ``anthropic`` are imported only when an
:class:`OpenAIProvider` / :class:`AnthropicProvider` is constructed.
"""

from __future__ import annotations

from .guards import AnswerError, ItemChange, Rejection, apply_guards, parse_answer
from .inputs import RefineInputs, prepare_refine, refine_inputs
from .prompt import (
    CHUNK_TOKENS,
    anchor_seed_json,
    anchor_view,
    build_context,
    context_budget,
    digest_steps,
    llm_context,
    build_merge_prompt,
    build_prompt,
    render_steps,
    split_context,
    steps_from_segments,
)
from .providers import (
    AnthropicProvider,
    CallableProvider,
    Completion,
    OpenAIProvider,
    Provider,
    ProviderError,
    provider_from_spec,
    safe_url,
)
from .refine import RefineOutcome, RefineReport, default_budget, refine_anchor, refine_from_config
from .support import support

__all__ = [
    "CHUNK_TOKENS",
    "AnswerError",
    "AnthropicProvider",
    "CallableProvider",
    "Completion",
    "ItemChange",
    "OpenAIProvider",
    "Provider",
    "ProviderError",
    "RefineOutcome",
    "RefineReport",
    "Rejection",
    "RefineInputs",
    "anchor_seed_json",
    "anchor_view",
    "apply_guards",
    "build_context",
    "context_budget",
    "digest_steps",
    "llm_context",
    "prepare_refine",
    "refine_inputs",
    "build_merge_prompt",
    "build_prompt",
    "default_budget",
    "parse_answer",
    "provider_from_spec",
    "refine_anchor",
    "refine_from_config",
    "render_steps",
    "safe_url",
    "split_context",
    "steps_from_segments",
    "support",
]
