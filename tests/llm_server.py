"""A local HTTP server speaking the chat-completions protocol, for testing the real client.

Each request takes the next scripted behaviour (or the default):
  ("ok", text)        200 with `text` as the answer and token usage
  ("slow", seconds)   sleep, then answer
  ("status", code)    an HTTP error status
  ("malformed", _)    200 with a body that is not JSON
  ("empty", _)        200 with empty content
  ("trickle", seconds) 200 with a valid answer sent one byte every `seconds`

A POST to /v1/embeddings answers with `embed(text)` for each input (a
deterministic bag of letters: texts sharing letters point the same way),
unless `embeddings_status` is set, then with that HTTP status.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def embed(text: str) -> list[float]:
    """Letter counts, a-z: a toy meaning that texts sharing letters share."""
    return [float(text.lower().count(chr(ord("a") + i))) for i in range(26)]


class FakeLLM:
    def __init__(self) -> None:
        self.embeddings_status: int | None = None
        #: When set, answers every request the script does not: the request body in,
        #: the answer's text out.
        self.respond: Callable[[dict[str, Any]], str] | None = None
        self.script: deque[tuple[str, Any]] = deque()
        self.requests: list[dict[str, Any]] = []
        self.default: tuple[str, Any] = ("ok", "I noted what we talked about.")
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                owner.requests.append({"path": self.path, "body": body})
                if self.path.endswith("/embeddings"):
                    self._embeddings(body)
                    return
                if owner.script:
                    kind, arg = owner.script.popleft()
                elif owner.respond is not None:
                    kind, arg = "ok", owner.respond(body)
                else:
                    kind, arg = owner.default
                if kind == "slow":
                    time.sleep(arg)
                    kind, arg = "ok", "slow answer"
                if kind == "trickle":
                    self._trickle(arg)
                    return
                if kind == "status":
                    self._send(arg, b'{"error": {"message": "scripted failure"}}')
                elif kind == "malformed":
                    self._send(200, b'{"choices": [ this is not json')
                else:
                    text = "" if kind == "empty" else str(arg)
                    prompt = sum(len(m.get("content", "")) for m in body.get("messages", []))
                    payload = {
                        "id": "cmpl-1",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model", "m"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": text},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": prompt // 4,
                            "completion_tokens": len(text) // 4,
                            "total_tokens": prompt // 4 + len(text) // 4,
                        },
                    }
                    self._send(200, json.dumps(payload).encode())

            def _embeddings(self, body: dict[str, Any]) -> None:
                if owner.embeddings_status is not None:
                    self._send(owner.embeddings_status, b'{"error": {"message": "scripted"}}')
                    return
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                data = [
                    {"object": "embedding", "index": i, "embedding": embed(t)}
                    for i, t in enumerate(texts)
                ]
                payload = {
                    "object": "list",
                    "data": data,
                    "model": body.get("model", "m"),
                    "usage": {"prompt_tokens": 1, "total_tokens": 1},
                }
                self._send(200, json.dumps(payload).encode())

            def _trickle(self, pause: float) -> None:
                payload = {
                    "id": "cmpl-1",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "slow " * 40},
                            "finish_reason": "stop",
                        }
                    ],
                }
                data = json.dumps(payload).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    for i in range(len(data)):
                        self.wfile.write(data[i : i + 1])
                        self.wfile.flush()
                        time.sleep(pause)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _send(self, code: int, data: bytes) -> None:
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> FakeLLM:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
