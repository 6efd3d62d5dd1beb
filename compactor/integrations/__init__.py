"""Glue between compactor's public API and the agent hosts people already run.

Each module here is a thin layer over :func:`compactor.compact` / :class:`compactor.Compactor`;
none imports the pipeline's internals. Modules import compactor lazily, because hook commands
run on every tool call of an agent and must start fast.
"""
