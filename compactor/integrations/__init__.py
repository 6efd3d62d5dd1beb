"""Glue between compactor's public API and the agent hosts and frameworks people already run.

Each module here is a thin layer over the public API (:func:`compactor.compact`,
:class:`compactor.Compactor`); none imports the pipeline's internals. Each imports its host
package itself, and compactor lazily, so importing this package costs nothing, needs none of
them, and hook commands (run on every tool call of an agent) start fast:

- :mod:`compactor.integrations.claude_code`: ``compactor hook claude-code ...`` (PostToolUse,
  PreCompact, SessionStart) and ``compactor hook codex ...`` (PreCompact, SessionStart);
  :mod:`compactor.integrations.cli` parses ``compactor hook`` without building the main CLI;
- :mod:`compactor.integrations.mcp_server`: ``compactor mcp``, an MCP server over stdio
  (``pip install 'context-compactor[mcp]'``);
- :mod:`compactor.integrations.langchain`: a summarizer for ``SummarizationMiddleware``, an edit
  for ``ContextEditingMiddleware`` and a budget middleware for ``create_agent``
  (``pip install 'context-compactor[langchain]'``);
- :mod:`compactor.integrations.openai_agents`: a ``call_model_input_filter`` and a ``Session``
  for the OpenAI Agents SDK (``pip install 'context-compactor[openai-agents]'``);
- :mod:`compactor.integrations.ray`: ``compact_dataset`` over a Ray Data ``Dataset`` and
  ``compactor batch --engine ray``, the same :func:`compactor.batch.compact_record` in Ray actors
  (``pip install 'context-compactor[ray]'``).
"""
