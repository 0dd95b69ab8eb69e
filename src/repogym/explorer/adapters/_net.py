"""Network reads with a total deadline, for adapters that read remote sources.

A per-read timeout does not bound a request: a server that sends one byte a second keeps every
read short and the request alive forever. :func:`get` bounds the whole request — connecting,
the status line and headers, and the body — by a monotonic deadline (through
:func:`repogym.http.get_bounded`: the body is read chunk by chunk with the deadline checked
between chunks, and a watchdog timer shuts the socket down when the deadline passes, which ends
a read blocked on a trickling status line too). :func:`call`
runs a library call (``huggingface_hub``) in a worker thread and gives up on it at its deadline.

Both raise :class:`DeadlineExceeded` (an :class:`~repogym.explorer.adapters.base.AdapterError`)
with one line naming the URL and the deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from repogym import http
from repogym.explorer.adapters.base import AdapterError

__all__ = ["DeadlineExceeded", "Response", "call", "get"]

T = TypeVar("T")

Response = http.BoundedResponse


class DeadlineExceeded(AdapterError):
    """A network read did not finish within its total deadline."""


def _expired(url: str, deadline: float) -> DeadlineExceeded:
    return DeadlineExceeded(f"{url}: no complete answer within the {deadline:g} s deadline")


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
    more byte is read so the caller can tell the answer was larger). See
    :func:`repogym.http.get_bounded`.

    Raises :class:`DeadlineExceeded`, or :class:`httpx.HTTPError` / :class:`ValueError` for a
    connection that fails.
    """
    try:
        return http.get_bounded(
            url, timeout=timeout, deadline=deadline, max_bytes=max_bytes, headers=headers
        )
    except http.DeadlineExceeded:
        raise _expired(url, deadline) from None


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
