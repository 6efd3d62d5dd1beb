"""compactor in a LangChain v1 agent (``create_agent``), offline: old tool results become Level 1
placeholders (errors verbatim) instead of "[cleared]", and every model request is kept under a
token budget.

    pip install -e '.[langchain,offline]'
    python examples/langchain_offline.py

The chat model here is langchain's own fake (``GenericFakeChatModel``) playing a script of tool
calls; it records every request, which is what a real model would be sent. To use a real model,
replace ``ScriptedModel(...)`` with e.g. ``init_chat_model("openai:gpt-4.1")``.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from langchain.agents import create_agent
from langchain.agents.middleware import ContextEditingMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from compactor import Compactor
from compactor.integrations.langchain import CompactorMiddleware, Level1Edit

NPM_INSTALL = "\n".join(
    [f"npm http fetch GET 200 https://registry.npmjs.org/pkg-{i} {10 + i % 50}ms (cache miss)" for i in range(300)]
    + ["npm WARN deprecated inflight@1.0.6: This module is not supported", "",
       "added 234 packages, and audited 235 packages in 12s", "", "found 0 vulnerabilities"])
NPM_TEST = "\n".join([
    "> api@1.4.0 test", "> jest --ci", "", "FAIL src/__tests__/orders.test.js",
    "  ● orders › creates an order under load", "",
    "    ConnectionPoolExhausted: pool_size=20, queue_depth=347, timeout in _acquireConnection", "",
    "      at Pool._acquireConnection (src/db/pool.js:142:11)",
    "      at async OrderService.create (src/services/orders.js:57:18)", "",
    "Tests:       1 failed, 11 passed, 12 total"])
SOURCE = "\n".join(f"{i:4d}  const line{i} = pool.acquire({i});" for i in range(1, 200))
OUTPUTS = {"npm install": NPM_INSTALL, "npm test": NPM_TEST, "cat src/db/pool.js": SOURCE}


@tool
def bash(command: str) -> str:
    """Run a shell command and return its output (canned here: no command really runs)."""
    return OUTPUTS.get(command, f"bash: {command}: command not found")


class ScriptedModel(GenericFakeChatModel):
    """langchain's fake chat model, recording every request it is sent; tools are accepted as given."""

    requests: list = []

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.requests.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def script() -> list[AIMessage]:
    calls = ["npm install", "npm test", "cat src/db/pool.js", "npm test"]
    return [AIMessage(content=f"Running {c}.", tool_calls=[{"name": "bash", "args": {"command": c}, "id": f"call_{i}"}])
            for i, c in enumerate(calls, 1)] + [AIMessage(content="The pool is never released on the error path.")]


def text_of(messages) -> str:
    return "\n".join(m.content if isinstance(m.content, str) else str(m.content) for m in messages)


def run(middleware: list) -> ScriptedModel:
    model = ScriptedModel(messages=iter(script()), requests=[])
    agent = create_agent(model, tools=[bash], system_prompt="You are a coding agent.", middleware=middleware)
    agent.invoke({"messages": [HumanMessage("The orders test fails under load. Fix it. Don't use TypeScript.")]})
    return model


def main(store_dir: Path) -> int:
    comp = Compactor(store=str(store_dir / "store.sqlite"))
    plain = run([])
    # 1. old tool results get Level 1 (placeholders that keep counts and status; errors verbatim)
    edited = run([ContextEditingMiddleware(edits=[Level1Edit(trigger=1_000, keep=1, compactor=comp)])])
    # 2. or: every model request compacted to a token budget; the agent's state keeps everything
    budgeted = run([CompactorMiddleware(budget=1_500, keep_recent=1, compactor=comp)])

    ok = True
    for name, model in (("no compactor", plain), ("Level1Edit", edited), ("CompactorMiddleware(1500)", budgeted)):
        last = text_of(model.requests[-1])
        verbatim = "ConnectionPoolExhausted: pool_size=20" in last
        print(f"{name:27s} last request {len(last):6d} characters; failing test verbatim: {verbatim}")
        ok = ok and verbatim
    last = text_of(edited.requests[-1])
    ref = re.search(r"ref (c-[0-9a-f]{16})", last).group(1)
    print("placeholder the model saw:", next(line for line in last.splitlines() if ref in line))
    back = comp.expand(ref)
    print(f"compactor.expand({ref}) gives back the original: {back in OUTPUTS.values()}")
    shorter = len(text_of(edited.requests[-1])) < len(text_of(plain.requests[-1]))
    return 0 if ok and back in OUTPUTS.values() and shorter else 1


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="compactor-example-") as tmp:
        sys.exit(main(Path(tmp)))
