"""compactor in an OpenAI Agents SDK run, offline: the session keeps every item, and the input
filter compacts what each model call is sent.

    pip install -e '.[openai-agents,offline]'
    python examples/openai_agents_offline.py

The model here is a scripted stand-in (``ScriptedModel``) that asks for two shell commands and then
answers; it records what it was sent, which is what a real model would receive. To use a real
model, pass ``model="gpt-4.1"`` (or any ``Model``) to the ``Agent`` and drop ``ScriptedModel``.

Tracing is disabled: the SDK's default trace processor sends every run's spans to OpenAI's tracing
endpoint when the run ends (a network call, which needs an OpenAI API key and ships the run's
tool outputs off the machine). Keep it disabled for local or private runs, or set your own
processor with ``agents.set_trace_processors``.
"""

from __future__ import annotations

import asyncio
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from compactor.integrations.openai_agents import CompactorSession

set_tracing_disabled(True)  # see the module docstring: no trace upload, no network

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
OUTPUTS = {"npm install": NPM_INSTALL, "npm test": NPM_TEST}


@function_tool
def bash(command: str) -> str:
    """Run a shell command and return its output (canned here: no command really runs)."""
    return OUTPUTS.get(command, f"bash: {command}: command not found")


class ScriptedModel(Model):
    """Answers with the next scripted tool call, then with a final message; keeps every input."""

    def __init__(self, commands: list[str], answer: str):
        self.commands = commands
        self.answer = answer
        self.inputs: list[list[dict[str, Any]]] = []

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, **kwargs) -> ModelResponse:
        self.inputs.append(list(input) if isinstance(input, list) else [{"role": "user", "content": input}])
        k = len(self.inputs)
        if k <= len(self.commands):
            item: Any = ResponseFunctionToolCall(type="function_call", id=f"fc_{k}", call_id=f"call_{k}", name="bash",
                                                 arguments=f'{{"command": "{self.commands[k - 1]}"}}', status="completed")
        else:
            item = ResponseOutputMessage(id=f"msg_{k}", type="message", role="assistant", status="completed", content=[
                ResponseOutputText(type="output_text", text=self.answer, annotations=[])])
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("this example runs without streaming")


def _text(items: list[dict[str, Any]]) -> str:
    out = []
    for it in items:
        content = it.get("output") if it.get("type") == "function_call_output" else it.get("content")
        out.append(content if isinstance(content, str) else str(content or ""))
    return "\n".join(out)


async def main(store_dir: Path) -> int:
    model = ScriptedModel(["npm install", "npm test"], "The pool is never released on the error path of create().")
    agent = Agent(name="coder", instructions="You are a coding agent.", tools=[bash], model=model)
    session = CompactorSession("orders-bug", store_dir / "sessions.sqlite")
    # keep_recent=1: only the newest tool output reaches the model raw; older ones become placeholders
    config = RunConfig(call_model_input_filter=session.input_filter(keep_recent=1))
    result = await Runner.run(agent, "The orders test fails under load. Fix it. Don't use TypeScript.",
                              session=session, run_config=config, max_turns=10)

    last = model.inputs[-1]
    sent = _text(last)
    print(f"model calls: {len(model.inputs)}; final answer: {result.final_output}")
    print(f"last call was sent {len(sent)} characters; the two raw outputs are {len(NPM_INSTALL) + len(NPM_TEST)}")
    refs = re.findall(r"ref (c-[0-9a-f]{16})", sent)
    print("placeholder the model saw:", next(line for line in sent.splitlines() if "ref c-" in line))
    print("the failing test reached it verbatim:", "ConnectionPoolExhausted: pool_size=20" in sent)
    original = session.expand(refs[0])
    print(f"session.expand({refs[0]}) gives back the original: {original == NPM_INSTALL}")
    stored = await session.get_items()
    print(f"the session keeps every item in full: {NPM_INSTALL in _text(stored)}")
    return 0 if original == NPM_INSTALL and "ConnectionPoolExhausted" in sent else 1


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="compactor-example-") as tmp:
        sys.exit(asyncio.run(main(Path(tmp))))
