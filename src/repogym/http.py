"""Every outbound HTTP request repogym makes goes through here: one client, one retry policy.

The client is httpx. :func:`client` builds it with what every caller wants: a per-operation
timeout, the ``repogym`` user agent, the system's certificate store (one SSL context per process,
so a client is cheap to build), and **no redirects followed**: a caller that follows redirects
does so through :func:`follow_redirect`, which refuses a redirect to another origin (a header
that carries a credential must never travel to a host it was not meant for).

:func:`get_bounded` adds what a per-read timeout cannot give: a **total deadline**. A server that
sends one byte a second keeps every read short and the request alive forever, so the whole
exchange (connect, status line, headers, body) is bounded by a monotonic deadline: the body is
read chunk by chunk with the deadline checked between chunks, and a watchdog timer shuts the
socket down when the deadline passes, which ends a read blocked on a trickling status line too.
The body is capped at ``max_bytes`` (one more byte is read so the caller can tell it was larger).

:class:`RetryPolicy` is the one retry/backoff rule: 429 and 5xx answers and connection errors
are retried a bounded number of times, after the server's ``Retry-After`` when it gives one
(seconds, milliseconds or an HTTP date; one further away than ``max_wait_s`` is not waited for),
else after a jittered exponential backoff (:meth:`RetryPolicy.backoff`). :func:`send_with_retries`
runs that loop for httpx requests; :mod:`repogym.llm` uses the same policy around the LLM SDKs'
calls (their own retries are switched off).

Errors raised here never carry request headers, so a token in a header cannot leak through
them; callers still pass their messages through :func:`repogym._secrets.redact` for URLs.
"""

from __future__ import annotations

import contextlib
import functools
import random
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

if TYPE_CHECKING:  # httpx is imported where a request is made: importing this module is cheap
    import httpx

__all__ = [
    "USER_AGENT",
    "BoundedResponse",
    "DeadlineExceeded",
    "RedirectRefused",
    "RetryPolicy",
    "client",
    "follow_redirect",
    "get_bounded",
    "is_retryable_status",
    "reason",
    "retry_after_s",
    "same_origin",
    "default_rate_limit",
    "send_with_retries",
]

USER_AGENT = "repogym"


def url_problem(value: str) -> str | None:
    """Why ``value`` is not an absolute http(s) URL with a host (and a valid port), or None:
    the one rule for every URL a user gives (variables, ``--llm-endpoint``, options)."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F or c.isspace() for c in value):
        return "holds whitespace or control characters"
    try:
        parts = urlsplit(value)
        port = parts.port  # a bad port raises here
        host = parts.hostname
    except ValueError as exc:
        return f"is not a URL ({exc})"
    if parts.scheme not in ("http", "https") or not host:
        return "is not an http(s) URL with a host"
    if port == 0:
        return "names port 0"
    return None


class DeadlineExceeded(Exception):
    """A request did not finish within its total deadline."""


class RedirectRefused(Exception):
    """A redirect pointed at another origin (scheme, host and port) than the request's."""


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """The system's certificate store (honours ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``)."""
    return ssl.create_default_context()


def client(
    *,
    timeout: float,
    headers: Mapping[str, str] | None = None,
    connect_timeout: float | None = None,
    event_hooks: Mapping[str, list[Callable[..., Any]]] | None = None,
) -> httpx.Client:
    """An httpx client: ``timeout`` seconds for each connect / read / write (``connect_timeout``
    for the connect when given), the repogym user agent plus ``headers``, redirects not
    followed. Close it (``with client(...) as c:``)."""
    import httpx

    return httpx.Client(
        timeout=httpx.Timeout(timeout, connect=connect_timeout or timeout),
        headers={"User-Agent": USER_AGENT, **(headers or {})},
        follow_redirects=False,
        verify=_ssl_context(),
        event_hooks=dict(event_hooks or {}),
    )


def reason(exc: BaseException) -> str:
    """A one-line reason for a failed connection (no headers, no body)."""
    cause: BaseException | None = exc
    while cause is not None:  # the socket error under httpx's wrapper names the problem best
        text = getattr(cause, "strerror", None)
        if text:
            return str(text).splitlines()[0]
        cause = cause.__cause__ or cause.__context__
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _origin(url: str | httpx.URL) -> tuple[str, str, int | None]:
    parts = urlsplit(str(url))
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or default


def same_origin(a: str | httpx.URL, b: str | httpx.URL) -> bool:
    """Whether two URLs share scheme, host and port (the origin a credential was meant for)."""
    return _origin(a) == _origin(b)


def follow_redirect(response: httpx.Response) -> str | None:
    """The URL a 3xx ``response`` points at when it stays on the request's origin; None when
    it is not a redirect; :class:`RedirectRefused` (naming only the other host) otherwise."""
    if not response.is_redirect:
        return None
    target = urljoin(str(response.request.url), response.headers.get("location", ""))
    if not same_origin(target, response.request.url):
        where = urlsplit(target).hostname or "elsewhere"
        raise RedirectRefused(f"HTTP {response.status_code} redirect refused (to {where})")
    return target


# -- total deadline ------------------------------------------------------------------------


@dataclass(slots=True)
class BoundedResponse:
    """A finished GET: status, reason phrase, headers (lower-case names) and body."""

    status: int
    reason: str
    headers: dict[str, str]
    body: bytes


def get_bounded(
    url: str,
    *,
    timeout: float,
    deadline: float,
    max_bytes: int,
    headers: Mapping[str, str] | None = None,
) -> BoundedResponse:
    """GET ``url`` (no redirects followed: a 3xx is returned as it is) within ``deadline``
    seconds in total, each socket operation within ``timeout``; at most ``max_bytes`` of body
    (one more byte is read so the caller can tell the answer was larger).

    Raises :class:`DeadlineExceeded` (one line naming the URL and the deadline), or
    :class:`httpx.HTTPError` / :class:`ValueError` for a request that fails otherwise.
    """
    import httpx

    per_op = max(min(timeout, deadline), 0.001)
    end = time.monotonic() + deadline
    fired = threading.Event()
    sockets: list[socket.socket] = []
    lock = threading.Lock()

    def shut(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

    def trace(event: str, info: dict[str, Any]) -> None:
        # Keep hold of the connection's socket so the watchdog can cut it.
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if isinstance(sock, socket.socket):
                with lock:
                    sockets.append(sock)
                    if fired.is_set():
                        shut(sock)

    def watchdog() -> None:
        with lock:
            fired.set()
            for sock in sockets:
                shut(sock)

    def expired() -> DeadlineExceeded:
        return DeadlineExceeded(f"{url}: no complete answer within the {deadline:g} s deadline")

    timer = threading.Timer(deadline, watchdog)
    timer.daemon = True
    timer.start()
    try:
        # identity: the body cap counts the bytes that arrive (no decompression bomb)
        with client(
            timeout=per_op, headers={"Accept-Encoding": "identity", **(headers or {})}
        ) as http:
            request = http.build_request("GET", url, extensions={"trace": trace})
            try:
                resp = http.send(request, stream=True)
                try:
                    body = bytearray()
                    for chunk in resp.iter_raw():
                        if time.monotonic() >= end:
                            raise expired()
                        body += chunk
                        if len(body) > max_bytes:
                            del body[max_bytes + 1 :]
                            break
                    if fired.is_set():  # the watchdog cut the answer short
                        raise expired()
                finally:
                    resp.close()
            except DeadlineExceeded:
                raise
            except (OSError, httpx.HTTPError):
                if fired.is_set() or time.monotonic() >= end:
                    raise expired() from None
                raise
            return BoundedResponse(
                resp.status_code,
                resp.reason_phrase,
                {k.lower(): v for k, v in resp.headers.items()},
                bytes(body),
            )
    finally:
        timer.cancel()


# -- retries -------------------------------------------------------------------------------


def is_retryable_status(status: int) -> bool:
    """429 (too many requests) and every 5xx are worth another try."""
    return status == 429 or status >= 500


def retry_after_s(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date),
    None when absent or unreadable. ``now`` is the epoch an HTTP date is measured from."""
    lower = {k.lower(): v for k, v in headers.items()}
    try:
        ms = lower.get("retry-after-ms")
        if ms is not None:
            return max(float(ms) / 1000, 0.0)
    except ValueError:
        pass
    value = (lower.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(when - (time.time() if now is None else now), 0.0)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long to retry.

    Failures (a connection error, a 5xx answer) get ``retries`` further attempts, the ``n``-th
    after ``backoff_s * 2**(n-1)`` seconds (at most ``max_backoff_s``) plus up to ``jitter`` of
    that at random. Rate limits (a 429, or an answer the caller says is one) are waited out
    when they reset within ``max_wait_s``, at most ``max_limit_waits`` times per request, and
    do not use up the failures' retries.
    """

    retries: int = 4
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    jitter: float = 0.1
    max_wait_s: float = 60.0
    max_limit_waits: int = 3

    def backoff(self, attempt: int) -> float:
        """The jittered delay before retry number ``attempt`` (1-based)."""
        base = min(self.backoff_s * 2 ** max(attempt - 1, 0), self.max_backoff_s)
        return base * (1 + self.jitter * random.random())

    def failure_delay(self, failures: int) -> float | None:
        """Seconds to wait after the ``failures``-th failure, or None: give up."""
        return self.backoff(failures) if failures <= self.retries else None

    def limit_delay(self, seconds: float, waits: int) -> float | None:
        """Seconds to wait out a rate limit that resets in ``seconds`` after ``waits`` earlier
        waits, or None: too far away or waited too often."""
        if seconds > self.max_wait_s or waits >= self.max_limit_waits:
            return None
        return max(seconds, 0.0)


def default_rate_limit(response: httpx.Response) -> float | None:
    """Seconds until a 429 (or a 503 with ``Retry-After``) answer's limit resets, else None.
    A 429 that does not say when is given 60 s."""
    status = response.status_code
    if status not in (429, 503):
        return None
    wait = retry_after_s(response.headers)
    if wait is None and status == 429:
        return 60.0
    return wait


def send_with_retries(
    send: Callable[[], httpx.Response],
    *,
    policy: RetryPolicy,
    sleep: Callable[[float], None] = time.sleep,
    rate_limit: Callable[[httpx.Response], float | None] = default_rate_limit,
) -> httpx.Response:
    """``send()`` again while it fails as ``policy`` allows; the last answer once it succeeds,
    fails for good or the retries are used up (a connection error is then raised).

    ``rate_limit(response)`` says whether an answer is a rate limit and in how many seconds it
    resets (None: not one); a rate limit that cannot be waited out is returned to the caller.
    Every other 5xx answer, and every :class:`httpx.TransportError`, is a failure. Every wait
    goes through ``sleep``.
    """
    import httpx

    failures = 0
    limit_waits = 0
    while True:
        try:
            response = send()
        except httpx.TransportError:
            failures += 1
            wait = policy.failure_delay(failures)
            if wait is None:
                raise
            sleep(wait)
            continue
        if response.is_success:
            return response
        reset = rate_limit(response)
        if reset is not None:
            wait = policy.limit_delay(reset, limit_waits)
            limit_waits += 1
        elif response.status_code >= 500:
            failures += 1
            wait = policy.failure_delay(failures)
        else:
            wait = None
        if wait is None:
            return response
        response.close()
        sleep(wait)
