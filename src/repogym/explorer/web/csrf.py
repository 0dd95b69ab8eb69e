"""Cross-site request defences of the explorer's state-changing JSON API (playground, runs).

A request that changes something (``POST``, ``PUT``, ``PATCH``, ``DELETE``) is accepted only when
all of these hold:

- its body, when it may have one, is ``Content-Type: application/json`` (an HTML form cannot
  send that cross-site without a CORS preflight, which the explorer never grants);
- ``Sec-Fetch-Site`` is not ``cross-site``, and an ``Origin`` header, when present, names the
  request's own ``Host`` (``null`` and other schemes are refused);
- the double-submit token matches: the page sets the ``rg_csrf`` cookie (``SameSite=Strict``,
  ``Path=/``) and its script echoes the value in the ``X-CSRF-Token`` header. Another site can
  neither read the cookie nor make the browser send it.

:func:`host_allowed` is the ``Host`` allow-list check (DNS rebinding: a foreign name resolved to
this machine is same-origin for the browser, so the ``Origin`` test alone cannot catch it).
Standard library only; the request and response are Starlette's, used by duck typing.
"""

from __future__ import annotations

import hmac
import re
import secrets
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "COOKIE",
    "HEADER",
    "check_csrf",
    "csrf_cookie_token",
    "ensure_csrf_cookie",
    "host_allowed",
]

COOKIE = "rg_csrf"
"""The double-submit cookie."""
HEADER = "X-CSRF-Token"
"""The header the page's script echoes the cookie in."""
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{32,128}$")


def csrf_cookie_token(request: Any) -> str | None:
    """The browser's ``rg_csrf`` cookie, when it holds a well-formed token."""
    value = request.cookies.get(COOKIE)
    return value if isinstance(value, str) and _TOKEN.match(value) else None


def ensure_csrf_cookie(response: Any, request: Any) -> str:
    """The browser's token: the one its cookie holds, or a new one set on ``response``
    (``SameSite=Strict``, ``Path=/``, ``Secure`` over https; readable by the page's script,
    which echoes it)."""
    token = csrf_cookie_token(request)
    if token is None:
        token = secrets.token_urlsafe(32)
        response.set_cookie(
            COOKIE,
            token,
            path="/",
            samesite="strict",
            secure=request.url.scheme == "https",
            httponly=False,
        )
    return token


def check_csrf(request: Any) -> str | None:
    """Why a state-changing ``request`` is refused (one line), or None when it may proceed.
    Safe methods (``GET``, ``HEAD``, ``OPTIONS``) always pass."""
    method = str(request.method).upper()
    if method not in UNSAFE_METHODS:
        return None
    headers = request.headers
    if method in BODY_METHODS:
        ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if ctype != "application/json":
            return "the request body must be Content-Type: application/json"
    if headers.get("sec-fetch-site", "").strip().lower() == "cross-site":
        return "cross-site request refused"
    origin = headers.get("origin")
    if origin is not None:
        parts = urlsplit(origin.strip())
        host = headers.get("host", "").strip().lower()
        if parts.scheme not in ("http", "https") or not host or parts.netloc.lower() != host:
            return "cross-origin request refused (Origin does not match Host)"
    cookie = csrf_cookie_token(request)
    if cookie is None:
        return f"no CSRF cookie ({COOKIE}): reload the page"
    sent = headers.get(HEADER.lower(), "")
    if not hmac.compare_digest(sent.encode("utf-8", "replace"), cookie.encode()):
        return f"missing or wrong {HEADER} header: reload the page"
    return None


def host_allowed(host: str, names: Sequence[str] | None) -> bool:
    """Whether a ``Host`` header (name, optionally ``:port``) is one of ``names`` (lower-case;
    ``[::1]`` style for IPv6); None allows any host."""
    if names is None:
        return True
    host = host.strip().lower()
    for name in names:
        name = name.lower()
        if host == name or (host.startswith(name + ":") and host[len(name) + 1 :].isdigit()):
            return True
    return False
