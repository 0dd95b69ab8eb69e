"""HTTP semantics shared by every answer of the explorer (routes and the fast search path).

Weak ETags ``W/"<store.version>-<hash of path and query>"`` (so a 304 costs no query),
``If-None-Match`` matching, ``Cache-Control`` values, ``Server-Timing``, gzip of bodies from
:data:`GZIP_MIN` bytes and the security headers (nosniff, referrer, frame, CSP). Standard library
only: FastAPI stays unimported until an app is created.
"""

import hashlib
import json
import zlib
from typing import Any

PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)
RAW_CSP = "default-src 'none'; sandbox; frame-ancestors 'none'"
CACHE_SEARCH = "public, max-age=30"
CACHE_PAGE = "public, max-age=60"
CACHE_DOC = "public, max-age=300"
CACHE_STATIC = "public, max-age=31536000, immutable"
COMMON_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]
SECURITY_HEADERS = [*COMMON_HEADERS, (b"content-security-policy", PAGE_CSP.encode())]
"""Every header :class:`SecurityHeaders` adds to a page answer, as raw ASGI headers."""
GZIP_MIN = 512
"""Bodies from this size are gzipped (the same threshold as GZipMiddleware)."""
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
"""``Host`` names of this machine: what the MCP endpoints accept by default."""
WILDCARD_ADDRESSES = ("", "0.0.0.0", "::", "[::]", "*")
"""Bind addresses that listen everywhere: any ``Host`` name is then accepted."""


def allowed_hosts_for(bind_host: str) -> list[str] | None:
    """The ``Host`` names the explorer's endpoints (MCP, playground, runs) accept when the
    explorer listens on ``bind_host``: loopback names, plus that address when it is another
    one; None (any) for a wildcard."""
    host = bind_host.strip()
    if host in WILDCARD_ADDRESSES:
        return None
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    names = list(LOOPBACK_HOSTS)
    if host.lower() not in names:
        names.append(host.lower())
    return names


def etag(path: str, query: str, version: str) -> str:
    """The weak ETag of an answer: snapshot version plus a hash of path and query."""
    key = path + "?" + query
    digest = hashlib.blake2b(key.encode("utf-8", "replace"), digest_size=8).hexdigest()
    return f'W/"{version}-{digest}"'


def matches(if_none_match: str | None, tag: str) -> bool:
    """Whether an ``If-None-Match`` header names ``tag`` (weakly) or ``*``: answer 304."""
    if not if_none_match:
        return False
    tags = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
    return "*" in tags or tag.removeprefix("W/") in tags


def timing(db: float, render: float) -> str:
    """A ``Server-Timing`` value: seconds in the store and in rendering."""
    return f"db;dur={db * 1000:.2f}, render;dur={render * 1000:.2f}"


def gzip(body: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return c.compress(body) + c.flush()


class CachedAnswer:
    """One JSON answer, serialised once (and gzipped on first need)."""

    __slots__ = ("body", "db", "gz")

    def __init__(self, body: bytes, db: float) -> None:
        self.body, self.db = body, db
        self.gz: bytes | None = None

    def gzipped(self) -> bytes:
        if self.gz is None:
            self.gz = gzip(self.body)
        return self.gz


class SecurityHeaders:
    """ASGI middleware adding nosniff/referrer/frame headers and the page CSP when none is set."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                names = {k.lower() for k, _ in headers}
                headers += [(k, v) for k, v in COMMON_HEADERS if k not in names]
                if b"content-security-policy" not in names:
                    headers.append((b"content-security-policy", PAGE_CSP.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def send_json(send: Any, status: int, obj: Any) -> None:
    """A whole JSON answer on a plain ASGI ``send`` (``Cache-Control: no-store``), for
    middleware and mounted apps that answer without the framework."""
    body = json.dumps(obj).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
