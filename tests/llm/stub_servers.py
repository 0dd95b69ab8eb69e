"""Tiny local HTTP servers that answer like the OpenAI and Anthropic chat APIs.

Each server replays a script of ``(status, body, headers)`` replies (the last one repeats) and
records every request it saw, so tests can count attempts and inspect headers.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, dict[str, Any], dict[str, str]]
Script = Reply | Callable[[dict[str, Any]], Reply]
"""A fixed reply, or a function of the request's JSON body (a model that reads the
conversation, e.g. to answer with what a tool printed)."""


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
    script: list[Script]
    requests: list[dict[str, Any]] = field(default_factory=list)
    host: str = "127.0.0.1"
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _next_reply(self) -> Reply:
        index = min(len(self.requests) - 1, len(self.script) - 1)
        item = self.script[index]
        return item(self.requests[-1]["json"]) if callable(item) else item

    def __enter__(self) -> StubServer:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real APIs

            def setup(self) -> None:
                super().setup()
                # Headers and body are written separately: without this, Nagle's algorithm and
                # the client's delayed ACK hold every reply back ~40 ms.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                with stub._lock:
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


def openai_stub(*script: Script, host: str = "127.0.0.1") -> StubServer:
    """A stub of ``POST /v1/chat/completions``; use ``base_url + '/v1'`` as the endpoint.
    ``host`` is the address it listens on (a routed one for sandboxes to reach)."""
    return StubServer("/v1/chat/completions", list(script) or [openai_ok()], host=host)


def anthropic_stub(*script: Script) -> StubServer:
    """A stub of ``POST /v1/messages``; use ``base_url`` as the endpoint."""
    return StubServer("/v1/messages", list(script) or [anthropic_ok()])


# -- tool calling --------------------------------------------------------------------------------

ToolCallSpec = tuple[str, dict[str, Any] | str]
"""``(tool name, arguments)``; a string is sent as the raw argument text (malformed on purpose)."""

_ids = itertools.count(1)


def openai_tools(
    calls: Sequence[ToolCallSpec],
    text: str = "",
    *,
    prompt_tokens: int = 100,
    completion_tokens: int = 20,
    token_ids: bool = False,
    logprobs: bool = False,
    finish_reason: str | None = None,
) -> Reply:
    """A ``/v1/chat/completions`` reply that calls tools. ``token_ids``/``logprobs`` add
    vLLM's ``prompt_token_ids`` and ``choices[0].token_ids`` and per-token logprobs."""
    tool_calls = [
        {
            "id": f"call_{next(_ids)}",
            "type": "function",
            "function": {
                "name": name,
                "arguments": args if isinstance(args, str) else json.dumps(args),
            },
        }
        for name, args in calls
    ]
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    choice: dict[str, Any] = {
        "index": 0,
        "message": message,
        "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
    }
    body: dict[str, Any] = {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": "stub",
        "choices": [choice],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    if token_ids:
        body["prompt_token_ids"] = list(range(1, prompt_tokens + 1))
        choice["token_ids"] = list(range(1000, 1000 + completion_tokens))
    if logprobs:
        choice["logprobs"] = {
            "content": [
                {"token": f"t{i}", "logprob": -0.01 * i, "bytes": None, "top_logprobs": []}
                for i in range(completion_tokens)
            ]
        }
    return 200, body, {}


def anthropic_tools(
    calls: Sequence[ToolCallSpec],
    text: str = "",
    *,
    input_tokens: int = 100,
    output_tokens: int = 20,
) -> Reply:
    """A ``/v1/messages`` reply that calls tools (``tool_use`` blocks)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for name, args in calls:
        content.append(
            {
                "type": "tool_use",
                "id": f"toolu_{next(_ids)}",
                "name": name,
                "input": json.loads(args) if isinstance(args, str) else args,
            }
        )
    body = {
        "id": "msg_stub",
        "type": "message",
        "role": "assistant",
        "model": "stub",
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }
    return 200, body, {}


def tool_outputs(request: dict[str, Any]) -> list[str]:
    """Every tool result the client has sent so far, in order, in either API's format."""
    found: list[str] = []
    for m in request.get("messages", []):
        if m.get("role") == "tool":
            found.append(str(m.get("content")))
        elif m.get("role") == "user" and isinstance(m.get("content"), list):
            for block in m["content"]:
                if block.get("type") == "tool_result":
                    found.append(str(block.get("content")))
    return found


def by_turn(*replies: Script) -> Callable[[dict[str, Any]], Reply]:
    """A model whose reply depends only on how many turns it has taken in the conversation it
    is sent, so many conversations can share one stub concurrently (the last reply repeats)."""

    def reply(request: dict[str, Any]) -> Reply:
        turns = sum(1 for m in request.get("messages", []) if m.get("role") == "assistant")
        item = replies[min(turns, len(replies) - 1)]
        return item(request) if callable(item) else item

    return reply
