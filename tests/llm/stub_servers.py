"""Tiny local HTTP servers that answer like the OpenAI and Anthropic chat APIs.

Each server replays a script of ``(status, body, headers)`` replies (the last one repeats) and
records every request it saw, so tests can count attempts and inspect headers.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, dict[str, Any], dict[str, str]]


def openai_ok(text: str = "hello", prompt_tokens: int = 12, completion_tokens: int = 5) -> Reply:
    """A successful ``/v1/chat/completions`` reply."""
    body = {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": "stub",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return 200, body, {}


def anthropic_ok(text: str = "hello", input_tokens: int = 20, output_tokens: int = 7) -> Reply:
    """A successful ``/v1/messages`` reply."""
    body = {
        "id": "msg_stub",
        "type": "message",
        "role": "assistant",
        "model": "stub",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }
    return 200, body, {}


def error(status: int, message: str = "boom", headers: dict[str, str] | None = None) -> Reply:
    """An error reply in the shape both services use."""
    body = {"type": "error", "error": {"type": "api_error", "message": message}}
    return status, body, dict(headers or {})


@dataclass
class StubServer:
    """A running stub; use as a context manager."""

    path: str
    script: list[Reply]
    requests: list[dict[str, Any]] = field(default_factory=list)
    host: str = "127.0.0.1"
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _next_reply(self) -> Reply:
        index = min(len(self.requests) - 1, len(self.script) - 1)
        return self.script[index]

    def __enter__(self) -> StubServer:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                stub.requests.append(
                    {
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "json": json.loads(raw or b"{}"),
                    }
                )
                if self.path.split("?")[0] != stub.path:
                    status, body, headers = error(404, f"no route {self.path}")
                else:
                    status, body, headers = stub._next_reply()
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        self._server = ThreadingHTTPServer((self.host, 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def openai_stub(*script: Reply, host: str = "127.0.0.1") -> StubServer:
    """A stub of ``POST /v1/chat/completions``; use ``base_url + '/v1'`` as the endpoint.
    ``host`` is the address it listens on (a routed one for sandboxes to reach)."""
    return StubServer("/v1/chat/completions", list(script) or [openai_ok()], host=host)


def anthropic_stub(*script: Reply) -> StubServer:
    """A stub of ``POST /v1/messages``; use ``base_url`` as the endpoint."""
    return StubServer("/v1/messages", list(script) or [anthropic_ok()])
