"""Fixtures for the MCP bridge tests: a live ``repogym serve`` and small local HTTP servers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("mcp.server", reason="needs the mcp extra: pip install 'repogym[mcp]'")
pytest.importorskip("openenv.core", reason="needs the openenv extra")

from tests.openenv.conftest import Server, serve_examples  # noqa: E402


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``repogym serve examples/tasks`` with three sessions at most."""
    yield from serve_examples(tmp_path_factory, "--max-sessions", "3")


class Local:
    """A tiny HTTP server on 127.0.0.1 that answers with ``routes`` and counts its hits."""

    def __init__(self, routes: dict[tuple[str, str], tuple[int, dict[str, str], bytes]]) -> None:
        self.routes = routes
        self.hits: list[tuple[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # what a WebSocket client expects to read

            def _answer(self, method: str) -> None:
                outer.hits.append((method, self.path))
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                status, headers, body = outer.routes.get((method, self.path), (404, {}, b"{}"))
                self.send_response(status)
                for name, value in {"content-type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                self._answer("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._answer("POST")

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def local() -> Iterator[type[Local]]:
    """Start :class:`Local` servers; every one started is stopped afterwards."""
    started: list[Local] = []

    class Tracked(Local):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            started.append(self)

    yield Tracked
    for srv in started:
        srv.close()
