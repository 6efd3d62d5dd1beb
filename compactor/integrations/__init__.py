"""Glue between compactor's public API and the agent hosts and frameworks people already run.

Each module imports its host package (``mcp``, ``langchain``, ``agents``) itself, so importing
this package costs nothing and needs none of them; hook modules import compactor lazily, because
hook commands run on every tool call of an agent and must start fast:

- :mod:`compactor.integrations.claude_code`: ``compactor hook claude-code ...`` (PostToolUse,
  PreCompact, SessionStart) and ``compactor hook codex ...`` (PreCompact, SessionStart), with
  :mod:`compactor.integrations.cli` parsing the ``hook`` command without the main CLI;
- :mod:`compactor.integrations.mcp_server`: ``compactor mcp``, an MCP server over stdio
  (``pip install 'compactor[mcp]'``);
- :mod:`compactor.integrations.langchain`: a summarizer for ``SummarizationMiddleware``, an edit
  for ``ContextEditingMiddleware`` and a budget middleware for ``create_agent``
  (``pip install 'compactor[langchain]'``);
- :mod:`compactor.integrations.openai_agents`: a ``call_model_input_filter`` and a ``Session``
  for the OpenAI Agents SDK (``pip install 'compactor[openai-agents]'``).
"""
