"""Scripted LLM endpoints on loopback: the one component consolidation tests may fake.

``FakeLLM`` answers POST /chat/completions (OpenAI-compatible) and
POST /_inference/chat_completion/<id>/_stream (Elasticsearch, as an event stream) with the
next scripted answer, and records every request it saw.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class FakeLLM:
    def __init__(self) -> None:
        self.answers: deque[str | tuple[int, str]] = deque()  # text, or (status, body)
        self.requests: list[dict[str, Any]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def script(self, *answers: str | dict | tuple[int, str]) -> None:
        for answer in answers:
            self.answers.append(json.dumps(answer) if isinstance(answer, dict) else answer)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                if not fake.answers:
                    return self._send(500, "application/json", json.dumps({"error": "no scripted answer"}))
                answer = fake.answers.popleft()
                if isinstance(answer, tuple):
                    return self._send(answer[0], "application/json", answer[1])
                if self.path.endswith("/_stream"):
                    return self._send(200, "text/event-stream", es_stream(answer))
                completion = {"choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}]}
                self._send(200, "application/json", json.dumps(completion))

            def _send(self, status: int, kind: str, text: str) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def es_stream(answer: str, pieces: int = 3) -> str:
    """The answer as Elasticsearch's chat_completion event stream, split into a few deltas."""
    size = max(1, len(answer) // pieces + 1)
    chunks = [answer[i : i + size] for i in range(0, len(answer), size)]
    events = [{"chat_completion": {"choices": [{"delta": {"content": "", "role": "assistant"}, "index": 0}]}}]
    events += [{"chat_completion": {"choices": [{"delta": {"content": c}, "index": 0}]}} for c in chunks]
    events.append({"chat_completion": {"choices": [], "usage": {"total_tokens": 1}}})
    lines = [f"event: message\ndata: {json.dumps(e)}\n\n" for e in events]
    return "".join(lines) + "event: message\ndata: [DONE]\n\n"
