"""A local stand-in for the OSV query API (``POST /v1/query``), on 127.0.0.1.

It answers ``{"package": {...}}`` and ``{"commit": sha}`` queries from the records it is given,
``page_size`` records a page with ``next_page_token`` (as osv.dev paginates), and records every
request body it received.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class OsvStub:
    records: list[dict[str, Any]]
    page_size: int = 1
    status: int = 200
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def matches(self, query: dict[str, Any], record: dict[str, Any]) -> bool:
        if "commit" in query:
            return any(
                query["commit"] in (e.get("fixed"), e.get("introduced"))
                for a in record.get("affected", [])
                for r in a.get("ranges", [])
                for e in r.get("events", [])
            )
        package = query.get("package") or {}
        return any(
            (a.get("package") or {}).get("name", "").lower() == package.get("name", "").lower()
            for a in record.get("affected", [])
        )

    def answer(self, query: dict[str, Any]) -> dict[str, Any]:
        found = [r for r in self.records if self.matches(query, r)]
        start = int(query.get("page_token") or 0)
        page: dict[str, Any] = {"vulns": found[start : start + self.page_size]}
        if start + self.page_size < len(found):
            page["next_page_token"] = str(start + self.page_size)
        return page


@contextmanager
def serve(stub: OsvStub) -> Iterator[OsvStub]:
    """Run ``stub`` on a free port of 127.0.0.1 (``stub.url`` is its base URL)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server spelling
            size = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(size) or b"{}")
            stub.requests.append({"path": self.path, "body": body})
            if self.path != "/v1/query":
                return self._send(404, {"code": 5, "message": "Not Found"})
            if stub.status != 200:
                return self._send(stub.status, {"code": 3, "message": "Invalid query."})
            self._send(200, stub.answer(body))

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    stub.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
