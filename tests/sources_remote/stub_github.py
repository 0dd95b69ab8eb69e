"""A tiny GitHub REST API stand-in on 127.0.0.1 (random port, background thread)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

Reply = tuple[int, dict[str, str], Any]


class StubServer:
    """Serves ``route(method, path, query, headers) -> (status, headers, json)``; faults first."""

    def __init__(self) -> None:
        self.requests: list[tuple[float, str, dict[str, str]]] = []
        self.faults: list[tuple[str, Callable[[], Reply]]] = []  # (path prefix, one-shot reply)
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                stub.requests.append(
                    (time.time(), self.path, {k.lower(): v for k, v in self.headers.items()})
                )
                status, headers, body = stub.dispatch(
                    self.path, {k.lower(): v for k, v in self.headers.items()}
                )
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> StubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def dispatch(self, raw: str, headers: dict[str, str]) -> Reply:
        parts = urlsplit(raw)
        for i, (prefix, reply) in enumerate(self.faults):
            if parts.path.startswith(prefix):
                del self.faults[i]
                return reply()
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        return self.route(parts.path, query, headers)

    def route(self, path: str, query: dict[str, str], headers: dict[str, str]) -> Reply:
        return 404, {}, {"message": "Not Found"}

    def page(self, path: str, query: dict[str, str], items: list[Any]) -> Reply:
        """One page of ``items`` with a GitHub-style ``Link`` header."""
        per_page = int(query.get("per_page", "30"))
        page = int(query.get("page", "1"))
        chunk = items[(page - 1) * per_page : page * per_page]
        headers = {}
        if page * per_page < len(items):
            rest = "&".join(f"{k}={v}" for k, v in query.items() if k != "page")
            headers["Link"] = (
                f'<{self.url}{path}?{rest}&page={page + 1}>; rel="next", '
                f'<{self.url}{path}?{rest}&page=1>; rel="first"'
            )
        return 200, headers, chunk


def rate_limited(reset_in: float, *, status: int = 403) -> Callable[[], Reply]:
    """A one-shot GitHub primary rate-limit answer; the reset is computed when it is served."""

    def reply() -> Reply:
        reset = int(time.time() + reset_in) + 1
        headers = {
            "X-RateLimit-Limit": "60",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": str(reset),
        }
        return status, headers, {"message": "API rate limit exceeded"}

    return reply


def server_error(status: int = 502) -> Callable[[], Reply]:
    """A one-shot 5xx."""
    return lambda: (status, {}, {"message": "Server Error"})


class GitHubStub(StubServer):
    """``acme/widgets`` (public, 250 closed PRs, every third unmerged) and ``acme/secret`` (404)."""

    REPO = "/repos/acme/widgets"

    def __init__(self, clone_url: str = "", n_pulls: int = 250, n_files: int = 230) -> None:
        super().__init__()
        self.clone_url = clone_url
        self.pulls = [
            {
                "number": n,
                "title": f"PR {n}",
                "body": f"Fixes #{1000 + n}" if n % 10 == 0 else "",
                "merged_at": None if n % 3 == 0 else "2026-01-01T00:00:00Z",
                "merge_commit_sha": f"m{n:039d}",
                "base": {"sha": f"b{n:039d}"},
                "head": {"sha": f"h{n:039d}"},
                "draft": n == 1,
                "user": {"login": "dev"},
                "html_url": f"https://github.com/acme/widgets/pull/{n}",
            }
            for n in range(n_pulls, 0, -1)
        ]
        self.files = [
            {
                "filename": f"src/f{i}.py",
                "status": "modified",
                "additions": i,
                "deletions": 1,
                "patch": "@@ -1 +1 @@",
            }
            for i in range(n_files)
        ]
        self.files[0] = {"filename": "img.png", "status": "added", "additions": 0, "deletions": 0}
        self.files[1] = {
            "filename": "new.py",
            "status": "renamed",
            "previous_filename": "old.py",
            "additions": 0,
            "deletions": 0,
            "patch": "",
        }
        self.files[2] = {
            "filename": "gone.py",
            "status": "removed",
            "additions": 0,
            "deletions": 3,
            "patch": "@@ -1,3 +0,0 @@",
        }

    def route(self, path: str, query: dict[str, str], headers: dict[str, str]) -> Reply:
        if headers.get("authorization") == "Bearer bad-token":
            return 401, {}, {"message": "Bad credentials"}
        if path == self.REPO:
            return (
                200,
                {},
                {
                    "full_name": "acme/widgets",
                    "default_branch": "trunk",
                    "private": False,
                    "clone_url": self.clone_url,
                },
            )
        if path == f"{self.REPO}/pulls":
            return self.page(path, query, self.pulls)
        if path.startswith(f"{self.REPO}/pulls/") and path.endswith("/files"):
            return self.page(path, query, self.files)
        if path.startswith(f"{self.REPO}/issues/"):
            num = int(path.rsplit("/", 1)[1])
            if num == 404:
                return 404, {}, {"message": "Not Found"}
            return (
                200,
                {},
                {
                    "number": num,
                    "title": f"Issue {num}",
                    "body": f"body {num}",
                    "labels": [{"name": "bug"}],
                },
            )
        return 404, {}, {"message": "Not Found"}
