"""A loopback fake of the OpenAI Responses API (``POST /v1/responses``, streaming SSE) for
end-to-end tests of host software. Records every request; answers from a script that gets the
parsed request body and returns (output items, input token count to report)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Script = Callable[[dict[str, Any]], tuple[list[dict[str, Any]], int]]


def message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "id": "msg_fake",
            "content": [{"type": "output_text", "text": text}]}


def function_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "name": name,
            "arguments": json.dumps(arguments)}


class FakeResponses:
    def __init__(self, script: Script):
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.other: list[tuple[str, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _send(self, code: int, data: bytes, ctype: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                fake.other.append(("GET", self.path))
                self._send(404, b'{"error": {"message": "not here"}}')

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                if not self.path.split("?")[0].endswith("/responses"):
                    fake.other.append(("POST", self.path))
                    self._send(404, b'{"error": {"message": "not here"}}')
                    return
                body = json.loads(raw)
                fake.requests.append(body)
                rid = f"resp_{len(fake.requests):04d}"
                try:
                    items, tokens = fake.script(body)
                except Exception as exc:  # a script bug is a failed request, not a hang
                    self._send(500, json.dumps({"error": {"message": f"script: {exc!r}"}}).encode())
                    return
                events = [("response.created", {"type": "response.created", "response": {"id": rid}})]
                for i, item in enumerate(items):
                    events.append(("response.output_item.done", {"type": "response.output_item.done",
                                                                  "output_index": i, "item": item}))
                events.append(("response.completed", {"type": "response.completed", "response": {
                    "id": rid, "usage": {"input_tokens": tokens, "input_tokens_details": {"cached_tokens": 0},
                                         "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                                         "total_tokens": tokens + 5}}}))
                data = "".join(f"event: {n}\ndata: {json.dumps(d)}\n\n" for n, d in events).encode()
                self._send(200, data, "text/event-stream")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeResponses":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
