"""Network reads with a total deadline, for adapters that read remote sources.

A per-read timeout does not bound a request: a server that sends one byte a second keeps every
read short and the request alive forever. :func:`get` bounds the whole request — connecting,
the status line and headers, and the body — by a monotonic deadline: the body is read chunk by
chunk with the deadline checked between chunks, and a watchdog timer shuts the socket down when
the deadline passes, which ends a read blocked on a trickling status line too. :func:`call`
runs a library call (``huggingface_hub``) in a worker thread and gives up on it at its deadline.

Both raise :class:`DeadlineExceeded` (an :class:`~repogym.explorer.adapters.base.AdapterError`)
with one line naming the URL and the deadline.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from repogym.explorer.adapters.base import AdapterError

__all__ = ["DeadlineExceeded", "Response", "call", "get"]

T = TypeVar("T")
_CHUNK = 64 * 1024


class DeadlineExceeded(AdapterError):
    """A network read did not finish within its total deadline."""


def _expired(url: str, deadline: float) -> DeadlineExceeded:
    return DeadlineExceeded(f"{url}: no complete answer within the {deadline:g} s deadline")


@dataclass(slots=True)
class Response:
    status: int
    reason: str
    headers: dict[str, str]
    body: bytes


def get(
    url: str,
    *,
    timeout: float,
    deadline: float,
    max_bytes: int,
    headers: dict[str, str] | None = None,
) -> Response:
    """GET ``url`` (no redirects followed: a 3xx is returned as it is) within ``deadline``
    seconds in total, each socket read within ``timeout``; at most ``max_bytes`` of body (one
    more byte is read so the caller can tell the answer was larger).

    Raises :class:`DeadlineExceeded`, or :class:`OSError` / :class:`http.client.HTTPException`
    for a connection that fails.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    per_read = max(min(timeout, deadline), 0.001)
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(
            host, port, timeout=per_read, context=ssl.create_default_context()
        )
    else:
        conn = http.client.HTTPConnection(host, port, timeout=per_read)
    end = time.monotonic() + deadline
    fired = threading.Event()

    def watchdog() -> None:
        fired.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(deadline, watchdog)
    timer.daemon = True
    timer.start()
    try:
        try:
            conn.request("GET", target, headers=headers or {})
            resp = conn.getresponse()
            body = bytearray()
            while len(body) <= max_bytes:
                if time.monotonic() >= end:
                    raise _expired(url, deadline)
                chunk = resp.read1(min(_CHUNK, max_bytes + 1 - len(body)))
                if not chunk:
                    break
                body += chunk
            if fired.is_set():  # the watchdog cut the answer short
                raise _expired(url, deadline)
        except DeadlineExceeded:
            raise
        except (OSError, http.client.HTTPException):
            if fired.is_set() or time.monotonic() >= end:
                raise _expired(url, deadline) from None
            raise
        return Response(
            resp.status,
            resp.reason,
            {k.lower(): v for k, v in resp.getheaders()},
            bytes(body),
        )
    finally:
        timer.cancel()
        conn.close()


def call(fn: Callable[[], T], *, deadline: float, url: str) -> T:
    """``fn()`` run in a worker thread, given up at ``deadline`` seconds with
    :class:`DeadlineExceeded` naming ``url``; its exception is re-raised here. A call given up
    on is left to end by itself (a daemon thread: it never holds up the exit)."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=run, name="repogym-explorer-net", daemon=True)
    worker.start()
    if not done.wait(deadline):
        raise _expired(url, deadline)
    if "error" in box:
        raise box["error"]
    return box["value"]
