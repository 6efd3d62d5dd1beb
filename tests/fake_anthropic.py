"""A loopback fake of the Anthropic Messages API for end-to-end tests of host software.

It speaks ``POST /v1/messages`` (streaming SSE and plain JSON) and ``/v1/messages/count_tokens``,
records every request (path, headers that matter, parsed body) and answers from a *script*: a
function that gets the parsed request body and returns the assistant's content blocks and stop
reason. Anything else gets a 404 and is recorded too, so a test can see what the host tried.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Reply = tuple[list[dict[str, Any]], str]  # (content blocks, stop_reason)
Script = Callable[[dict[str, Any]], Reply]


def text_reply(text: str) -> Reply:
    return [{"type": "text", "text": text}], "end_turn"


def tool_reply(tool_id: str, name: str, tool_input: dict[str, Any], text: str = "") -> Reply:
    blocks: list[dict[str, Any]] = []
    if text:
        blocks.append({"type": "text", "text": text})
    blocks.append({"type": "tool_use", "id": tool_id, "name": name, "input": tool_input})
    return blocks, "tool_use"


def request_text(body: dict[str, Any]) -> str:
    """Everything the model is sent in one request, as one string (system, messages, tool results)."""
    parts: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            parts.append(v)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for k, x in v.items():
                if k in ("tools", "input_schema", "cache_control", "metadata"):
                    continue
                walk(x)

    walk(body.get("system"))
    walk(body.get("messages"))
    return "\n".join(parts)


class FakeAnthropic:
    def __init__(self, script: Script):
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.other: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._n = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def _body(self) -> bytes:
                n = int(self.headers.get("content-length") or 0)
                return self.rfile.read(n) if n else b""

            def _send(self, code: int, data: bytes, ctype: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                with fake._lock:
                    fake.other.append(("GET", self.path))
                self._send(404, b'{"type":"error","error":{"type":"not_found_error","message":"not here"}}')

            def do_HEAD(self):
                self._send(200, b"")

            def do_POST(self):
                raw = self._body()
                path = self.path.split("?")[0]
                if path.endswith("/v1/messages/count_tokens"):
                    with fake._lock:
                        fake.other.append(("POST", self.path))
                    body = json.loads(raw or b"{}")
                    n = max(1, len(json.dumps(body)) // 4)
                    self._send(200, json.dumps({"input_tokens": n}).encode())
                    return
                if not path.endswith("/v1/messages"):
                    with fake._lock:
                        fake.other.append(("POST", self.path))
                    self._send(404, b'{"type":"error","error":{"type":"not_found_error","message":"not here"}}')
                    return
                body = json.loads(raw)
                with fake._lock:
                    fake.requests.append(body)
                    fake._n += 1
                    mid = f"msg_fake_{fake._n:04d}"
                try:
                    blocks, stop = fake.script(body)
                except Exception as exc:  # a script bug shows up as a failed request, not a hang
                    self._send(500, json.dumps({"type": "error", "error": {"type": "api_error",
                                                                           "message": f"script: {exc!r}"}}).encode())
                    return
                model = body.get("model", "claude-fake")
                usage = {"input_tokens": max(1, len(raw) // 4), "output_tokens": 8,
                         "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
                if not body.get("stream"):
                    msg = {"id": mid, "type": "message", "role": "assistant", "model": model, "content": blocks,
                           "stop_reason": stop, "stop_sequence": None, "usage": usage}
                    self._send(200, json.dumps(msg).encode())
                    return
                self._stream(mid, model, blocks, stop, usage)

            def _stream(self, mid, model, blocks, stop, usage):
                events: list[tuple[str, dict]] = [("message_start", {"type": "message_start", "message": {
                    "id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
                    "stop_reason": None, "stop_sequence": None, "usage": usage}})]
                for i, b in enumerate(blocks):
                    if b["type"] == "text":
                        events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                               "content_block": {"type": "text", "text": ""}}))
                        events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                               "delta": {"type": "text_delta", "text": b["text"]}}))
                    else:
                        events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                               "content_block": {"type": "tool_use", "id": b["id"],
                                                                                 "name": b["name"], "input": {}}}))
                        events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                               "delta": {"type": "input_json_delta",
                                                                         "partial_json": json.dumps(b["input"])}}))
                    events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
                events.append(("message_delta", {"type": "message_delta",
                                                 "delta": {"stop_reason": stop, "stop_sequence": None},
                                                 "usage": {"output_tokens": usage["output_tokens"]}}))
                events.append(("message_stop", {"type": "message_stop"}))
                data = "".join(f"event: {name}\ndata: {json.dumps(d)}\n\n" for name, d in events).encode()
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeAnthropic":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
