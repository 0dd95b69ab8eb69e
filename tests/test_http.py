"""repogym.http: the one retry policy, Retry-After, redirects that stay on their origin."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from repogym import http
from repogym.sources import SourceError
from repogym.sources.github import GitHubSource

SECRET = "ghp_RedirectSecret0123456789"


def test_backoff_is_exponential_jittered_and_capped() -> None:
    policy = http.RetryPolicy(retries=6, backoff_s=1.0, max_backoff_s=8.0, jitter=0.1)
    for attempt, base in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (6, 8.0)]:
        delays = {policy.backoff(attempt) for _ in range(50)}
        assert all(base <= d <= base * 1.1 for d in delays), (attempt, delays)
        assert len(delays) > 1  # jittered
    assert policy.failure_delay(6) is not None and policy.failure_delay(7) is None


def test_rate_limit_waits_are_bounded() -> None:
    policy = http.RetryPolicy(max_wait_s=10, max_limit_waits=2)
    assert policy.limit_delay(3, 0) == 3
    assert policy.limit_delay(11, 0) is None  # too far away
    assert policy.limit_delay(3, 2) is None  # waited often enough


def test_retry_after_forms() -> None:
    assert http.retry_after_s({"Retry-After": "7"}) == 7
    assert http.retry_after_s({"retry-after-ms": "1500"}) == 1.5
    date = formatdate(1_000_030, usegmt=True)
    assert http.retry_after_s({"Retry-After": date}, now=1_000_000) == 30
    assert http.retry_after_s({"Retry-After": "soon"}) is None
    assert http.retry_after_s({}) is None


def test_send_with_retries_retries_5xx_and_429_then_succeeds() -> None:
    answers = iter(
        [
            httpx.Response(503),
            httpx.Response(429, headers={"Retry-After": "0"}),
            httpx.Response(200, text="ok"),
        ]
    )
    transport = httpx.MockTransport(lambda request: next(answers))
    waits: list[float] = []
    with httpx.Client(transport=transport) as client:
        resp = http.send_with_retries(
            lambda: client.get("http://api.test/x"),
            policy=http.RetryPolicy(backoff_s=0.01),
            sleep=waits.append,
        )
    assert resp.status_code == 200 and resp.text == "ok"
    assert len(waits) == 2 and waits[1] == 0


def test_send_with_retries_gives_up() -> None:
    calls = 0

    def fail(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        raise httpx.ConnectError("refused", request=request)

    with (
        httpx.Client(transport=httpx.MockTransport(fail)) as client,
        pytest.raises(httpx.ConnectError),
    ):
        http.send_with_retries(
            lambda: client.get("http://api.test/x"),
            policy=http.RetryPolicy(retries=2, backoff_s=0.0),
            sleep=lambda s: None,
        )
    assert calls == 3


class _Redirector(BaseHTTPRequestHandler):
    seen: list[tuple[str, str]] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        self.seen.append((self.path, self.headers.get("Authorization", "")))
        if self.path == "/repos/acme/moved":  # same origin: followed
            self.send_response(301)
            self.send_header("Location", "/repos/acme/widgets")
            self.end_headers()
            return
        if self.path == "/repos/acme/away":  # another host: refused, never contacted
            self.send_response(302)
            self.send_header("Location", "http://203.0.113.9/steal")
            self.end_headers()
            return
        body = b'{"default_branch": "trunk", "private": false, "full_name": "acme/widgets"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def redirector() -> Iterator[str]:
    _Redirector.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Redirector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_sources_follow_redirects_only_on_their_origin(redirector: str) -> None:
    moved = GitHubSource("acme/moved", token=SECRET, base_url=redirector, backoff_s=0.01)
    assert moved.repo_info().default_branch == "trunk"
    assert [p for p, _ in _Redirector.seen] == ["/repos/acme/moved", "/repos/acme/widgets"]
    away = GitHubSource("acme/away", token=SECRET, base_url=redirector, backoff_s=0.01)
    with pytest.raises(SourceError) as info:
        away.repo_info()
    msg = str(info.value)
    assert "redirect to another host refused (203.0.113.9)" in msg
    assert SECRET not in msg and "\n" not in msg


def test_follow_redirect_refuses_other_origins() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        where = {"/same": "/there", "/port": "http://api.test:8080/x", "/host": "http://evil/x"}
        return httpx.Response(302, headers={"Location": where[request.url.path]})

    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        assert http.follow_redirect(client.get("http://api.test/same")) == "http://api.test/there"
        for path, host in (("/port", "api.test"), ("/host", "evil")):
            with pytest.raises(http.RedirectRefused, match=f"to {host}"):
                http.follow_redirect(client.get(f"http://api.test{path}"))
        assert (
            http.follow_redirect(httpx.Response(200, request=httpx.Request("GET", "http://a")))
            is None
        )
