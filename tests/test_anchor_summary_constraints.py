"""An earlier compaction's summary in the user's place binds only by the user's rules it quotes;
a question the user asks inside a longer sentence binds nothing."""

from __future__ import annotations

from compactor import compact
from compactor.anchor import to_markdown

SUMMARY = """This session is being continued from a previous conversation that ran out of context. \
The conversation is summarized below:
Analysis:
The user asked to add caching to the API client. I must keep the public API unchanged, as the design notes say.

Summary:
1. Primary Request and Intent:
   The user asked to add an LRU cache to fetch_user(). The user said: "do not add new dependencies" and "never push to main".
2. Key Technical Concepts:
   - The cache must be invalidated on writes.
3. Optional Next Step:
   We should not forget to run the benchmarks before merging.
Please continue the conversation from where we left it off without asking the user any further questions."""


def _constraints(msgs):
    return [c.text for c in compact(msgs, format="openai-chat").anchor.user_constraints]


def test_a_summary_gives_only_its_quoted_user_rules():
    got = _constraints([{"role": "user", "content": SUMMARY},
                        {"role": "assistant", "content": "Continuing with the eviction tests."}])
    assert got == ["do not add new dependencies", "never push to main"]


def test_the_same_rules_written_by_the_user_still_bind():
    # the summary's sentences are constraints when the user writes them (the filter is the summary, not the words)
    got = _constraints([{"role": "user", "content": "Add an LRU cache to fetch_user(). The cache must be "
                                                    "invalidated on writes. Do not add new dependencies."},
                        {"role": "assistant", "content": "On it."}])
    assert "The cache must be invalidated on writes." in got and "Do not add new dependencies." in got


def test_a_question_inside_a_sentence_is_no_constraint():
    msgs = [{"role": "user", "content": "Document the session format in docs/session.md."},
            {"role": "assistant", "content": "Done: the entry points at a tool result message."},
            {"role": "user", "content": "i doubt that is true? like, this can't point at a tool result, right? "
                                        "it must point at an assistant message, no? please read compaction.ts to "
                                        "understand. Never rewrite the changelog."}]
    got = _constraints(msgs)
    assert not any("doubt" in c or "no?" in c for c in got), got
    assert any("Never rewrite the changelog" in c for c in got), got
    md = to_markdown(compact(msgs, format="openai-chat").anchor)
    assert md == to_markdown(compact(msgs, format="openai-chat").anchor)
