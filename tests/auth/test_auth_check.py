"""auth check against local servers that answer like GitHub, GitLab, the Hub and LLM APIs."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from typer.testing import CliRunner

from repogym.auth import check_credentials
from repogym.cli import app

GOOD = "tok_GOOD_0123456789abcdef"
BAD = "tok_BAD_9876543210fedcba"


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        auth = (
            self.headers.get("Authorization", "").removeprefix("Bearer ")
            or self.headers.get("PRIVATE-TOKEN", "")
            or self.headers.get("x-api-key", "")
        )
        routes = {
            "/user": "login",
            "/api/v4/user": "username",
            "/api/whoami-v2": "name",
            "/models": None,
            "/v1/models": None,
        }
        if self.path not in routes:
            self.send_response(404)
            self.end_headers()
            return
        if auth != GOOD:
            body = json.dumps({"message": f"Bad credentials: {auth}"}).encode()
            self.send_response(401)
        else:
            key = routes[self.path]
            body = json.dumps({key: "ada"} if key else {"data": []}).encode()
            self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def stub() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def env_for(url: str, token: str) -> dict[str, str]:
    return {
        "GITHUB_TOKEN": token,
        "GITLAB_TOKEN": token,
        "HF_TOKEN": token,
        "OPENAI_API_KEY": token,
        "ANTHROPIC_API_KEY": token,
        "REPOGYM_GITHUB_API": url,
        "REPOGYM_GITLAB_URL": url,
        "HF_ENDPOINT": url,
        "OPENAI_BASE_URL": url,
        "ANTHROPIC_BASE_URL": url,
        "PATH": "/usr/bin:/bin",
    }


def test_working_credentials(stub: str) -> None:
    statuses = {s.service: s for s in check_credentials(env_for(stub, GOOD))}
    assert all(s.present and s.ok for s in statuses.values()), statuses
    assert statuses["github"].source == "GITHUB_TOKEN" and "as ada" in statuses["github"].detail


def test_rejected_credentials_never_leak(stub: str, monkeypatch: pytest.MonkeyPatch) -> None:
    statuses = check_credentials(env_for(stub, BAD))
    assert all(s.ok is False for s in statuses)
    dumped = json.dumps([s.to_json() for s in statuses])
    assert BAD not in dumped and BAD[:12] not in dumped
    for key, value in env_for(stub, BAD).items():
        monkeypatch.setenv(key, value)
    res = CliRunner().invoke(app, ["auth", "check", "--json"])
    assert res.exit_code == 1
    assert BAD not in res.output and BAD[4:16] not in res.output


def test_absent_and_unreachable() -> None:
    statuses = {s.service: s for s in check_credentials({"PATH": "/nonexistent"})}
    assert all(not s.present and s.detail == "not set" for s in statuses.values())
    env = {"GITLAB_TOKEN": GOOD, "REPOGYM_GITLAB_URL": "http://127.0.0.1:9", "PATH": "/nonexistent"}
    gitlab = next(s for s in check_credentials(env, timeout_s=2) if s.service == "gitlab")
    assert gitlab.present and gitlab.ok is None and "unreachable" in gitlab.detail
