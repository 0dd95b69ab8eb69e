"""A test double speaking the OCI Distribution API: a real HTTP server on 127.0.0.1 (standard
library only) that keeps blobs and manifests in memory, for the push and pull clients' tests.

It serves ``GET /v2/``; ``HEAD``/``GET`` of blobs; uploads (``POST …/blobs/uploads/`` with
``?mount=&from=``, ``PATCH`` with ``Content-Range``, ``PUT ?digest=``, which checks the digest
of what it received); ``PUT``/``GET``/``HEAD`` of manifests by tag or digest. Repository names
may contain slashes. Misbehaviour is set per instance (attributes, changeable between
requests): failing statuses, lying digests, truncated, corrupt or cut-off blobs, and Basic or
Bearer auth (with a ``/token`` endpoint). Every request is logged (:attr:`FakeRegistry.log`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal
from urllib.parse import parse_qs, urlsplit

Auth = tuple[Literal["basic", "bearer"], str, str]
LOGGED_HEADERS = ("authorization", "content-range", "content-length", "content-type")
_ROUTES = [
    ("base", re.compile(r"/v2/?")),
    ("uploads", re.compile(r"/v2/(?P<name>.+)/blobs/uploads/?")),
    ("upload", re.compile(r"/v2/(?P<name>.+)/blobs/uploads/(?P<uid>[0-9a-f]+)")),
    ("blob", re.compile(r"/v2/(?P<name>.+)/blobs/(?P<ref>sha256:[0-9a-f]{64})")),
    ("manifest", re.compile(r"/v2/(?P<name>.+)/manifests/(?P<ref>[\w.:-]+)")),
    ("token", re.compile(r"/token")),
]


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class Logged:
    """One request as the server saw it, and its answer's status."""

    method: str
    path: str
    """Path and query, as sent."""
    headers: dict[str, str]
    """The :data:`LOGGED_HEADERS` that were present (lower-case names)."""
    status: int = 0


@dataclass
class FakeRegistry:
    """The server; ``with FakeRegistry() as reg:`` starts it and stops it."""

    auth: Auth | None = None
    fail_status: int | None = None
    """Answer requests with this status (and an ``UNAVAILABLE`` error body) …"""
    fail_count: int | None = None
    """… only the first N of them (None: every one) …"""
    fail_method: str | None = None
    """… only requests of this method (None: any)."""
    lie_blob_digest: bool = False
    """A finished upload or mount answers another ``Docker-Content-Digest``."""
    lie_manifest_digest: bool = False
    truncate_blobs: bool | set[str] = False
    """``GET`` of a blob (all, or those digests) serves its first half only."""
    corrupt_blobs: bool | set[str] = False
    """``GET`` of a blob serves other bytes of the same length."""
    cut_blobs: bool | set[str] = False
    """``GET`` of a blob announces its full length, sends half, then closes the connection."""
    absolute_locations: bool = False
    location_host: str | None = None
    """Upload ``Location`` headers name this ``host:port`` (another name of this server)."""
    blobs: dict[str, dict[str, bytes]] = field(default_factory=dict)
    """Repository → digest → bytes."""
    manifests: dict[str, dict[str, tuple[bytes, str]]] = field(default_factory=dict)
    """Repository → tag or digest → (bytes, media type)."""
    log: list[Logged] = field(default_factory=list)
    tokens_issued: list[str] = field(default_factory=list)
    _uploads: dict[str, tuple[str, bytearray]] = field(default_factory=dict)
    _failed: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    def start(self) -> FakeRegistry:
        registry = self

        class Handler(_Handler):
            reg = registry

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        serve = self._server.serve_forever
        threading.Thread(target=serve, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeRegistry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def host(self) -> str:
        assert self._server is not None, "not started"
        return f"127.0.0.1:{self._server.server_address[1]}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def requests(self, method: str | None = None, path_part: str = "") -> list[Logged]:
        """The log, filtered by method and a substring of the path."""
        with self._lock:
            log = list(self.log)
        return [r for r in log if method in (None, r.method) and path_part in r.path]

    def _should_fail(self, method: str) -> bool:
        if self.fail_status is None or self.fail_method not in (None, method):
            return False
        with self._lock:
            if self.fail_count is not None and self._failed >= self.fail_count:
                return False
            self._failed += 1
            return True

    def _challenge(self, route: str, name: str, method: str, header: str) -> str | None:
        """The ``WWW-Authenticate`` to answer with, or None when the request may go on."""
        if self.auth is None:
            return None
        kind, user, password = self.auth
        if kind == "basic":
            return None if header == _basic(user, password) else 'Basic realm="fake"'
        scheme, _, token = header.partition(" ")
        if scheme == "Bearer" and token in self.tokens_issued:
            return None
        action = "pull" if method in ("GET", "HEAD") else "pull,push"
        scope = f',scope="repository:{name}:{action}"' if route != "base" else ""
        return f'Bearer realm="{self.url}/token",service="fake"{scope}'


def _route(path: str) -> tuple[str, re.Match[str]] | None:
    for route, pattern in _ROUTES:
        if m := pattern.fullmatch(path):
            return route, m
    return None


def _misbehaves(flag: bool | set[str], digest: str) -> bool:
    return flag is True or (isinstance(flag, set) and digest in flag)


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _error(code: str, message: str) -> bytes:
    return json.dumps({"errors": [{"code": code, "message": message}]}).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    reg: FakeRegistry
    _entry: Logged

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._handle()

    do_HEAD = do_POST = do_PATCH = do_PUT = do_DELETE = do_GET

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self._entry.status = status
        self.send_response(status)
        hdrs = {"Content-Length": str(len(body)), **(headers or {})}
        for key, value in hdrs.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _location(self, path: str) -> str:
        if self.reg.location_host:
            return f"http://{self.reg.location_host}{path}"
        return f"{self.reg.url}{path}" if self.reg.absolute_locations else path

    def _handle(self) -> None:
        reg, method = self.reg, self.command
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        headers = {k: v for k in LOGGED_HEADERS if (v := self.headers.get(k)) is not None}
        self._entry = Logged(method, self.path, headers)
        with reg._lock:
            reg.log.append(self._entry)
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        if reg._should_fail(method):
            self._send(reg.fail_status or 500, _error("UNAVAILABLE", "told to fail"))
            return
        found = _route(url.path)
        if found is None:
            self._send(404, _error("NAME_UNKNOWN", f"no route {url.path}"))
            return
        route, m = found
        name, ref = m.groupdict().get("name", ""), m.groupdict().get("ref", "")
        if route == "token":
            self._token()
            return
        challenge = reg._challenge(route, name, method, self.headers.get("authorization", ""))
        if challenge is not None:
            body = _error("UNAUTHORIZED", "authentication required")
            self._send(401, body, {"WWW-Authenticate": challenge})
        elif route == "base":
            self._send(200, b"{}", {"Content-Type": "application/json"})
        elif route == "uploads" and method == "POST":
            self._start_upload(name, query)
        elif route == "upload" and method in ("PATCH", "PUT"):
            self._continue_upload(name, m["uid"], body, query)
        elif route == "blob" and method in ("GET", "HEAD"):
            self._get_blob(name, ref)
        elif route == "manifest" and method == "PUT":
            self._put_manifest(name, ref, body)
        elif route == "manifest" and method in ("GET", "HEAD"):
            stored = reg.manifests.get(name, {}).get(ref)
            if stored is None:
                self._send(404, _error("MANIFEST_UNKNOWN", f"{name}:{ref}"))
                return
            data, media = stored
            digest = sha256(data)
            self._send(200, data, {"Content-Type": media, "Docker-Content-Digest": digest})
        else:
            self._send(405, _error("UNSUPPORTED", f"{method} {url.path}"))

    def _token(self) -> None:
        reg = self.reg
        if reg.auth is not None and self.headers.get("authorization") != _basic(*reg.auth[1:]):
            self._send(401, _error("UNAUTHORIZED", "bad credentials"))
            return
        token = secrets.token_hex(16)
        with reg._lock:
            reg.tokens_issued.append(token)
        self._send(200, json.dumps({"token": token}).encode(), {"Content-Type": "application/json"})

    def _stored(self, name: str, digest: str) -> dict[str, str]:
        shown = sha256(digest.encode()) if self.reg.lie_blob_digest else digest
        return {
            "Location": self._location(f"/v2/{name}/blobs/{digest}"),
            "Docker-Content-Digest": shown,
        }

    def _start_upload(self, name: str, query: dict[str, str]) -> None:
        reg = self.reg
        mount, source = query.get("mount"), query.get("from")
        if mount and source and mount in reg.blobs.get(source, {}):
            with reg._lock:
                reg.blobs.setdefault(name, {})[mount] = reg.blobs[source][mount]
            self._send(201, b"", self._stored(name, mount))
            return
        uid = secrets.token_hex(8)
        with reg._lock:
            reg._uploads[uid] = (name, bytearray())
        location = self._location(f"/v2/{name}/blobs/uploads/{uid}?_state={uid[:4]}")
        self._send(202, b"", {"Location": location, "Range": "0-0", "Docker-Upload-UUID": uid})

    def _continue_upload(self, name: str, uid: str, body: bytes, query: dict[str, str]) -> None:
        reg = self.reg
        upload = reg._uploads.get(uid)
        if upload is None or upload[0] != name:
            self._send(404, _error("BLOB_UPLOAD_UNKNOWN", uid))
            return
        data = upload[1]
        if self.command == "PATCH":
            start = (self.headers.get("content-range") or f"{len(data)}-").split("-")[0]
            if int(start) != len(data):
                self._send(416, _error("BLOB_UPLOAD_INVALID", f"range starts at {start}"))
                return
            data += body
            location = self._location(f"/v2/{name}/blobs/uploads/{uid}?_state={len(data)}")
            self._send(202, b"", {"Location": location, "Range": f"0-{len(data) - 1}"})
            return
        data += body
        digest = query.get("digest", "")
        if sha256(bytes(data)) != digest:
            self._send(400, _error("DIGEST_INVALID", f"received bytes are not {digest}"))
            return
        with reg._lock:
            reg.blobs.setdefault(name, {})[digest] = bytes(data)
            del reg._uploads[uid]
        self._send(201, b"", self._stored(name, digest))

    def _get_blob(self, name: str, digest: str) -> None:
        reg = self.reg
        data = reg.blobs.get(name, {}).get(digest)
        if data is None:
            self._send(404, _error("BLOB_UNKNOWN", digest))
            return
        headers = {"Docker-Content-Digest": digest, "Content-Type": "application/octet-stream"}
        if self.command == "HEAD":
            self._send(200, b"", {**headers, "Content-Length": str(len(data))})
        elif _misbehaves(reg.cut_blobs, digest):
            self._send(200, data[: len(data) // 2], {**headers, "Content-Length": str(len(data))})
            self.close_connection = True
        elif _misbehaves(reg.truncate_blobs, digest):
            self._send(200, data[: len(data) // 2], headers)
        elif _misbehaves(reg.corrupt_blobs, digest):
            self._send(200, bytes(b ^ 0x55 for b in data), headers)
        else:
            self._send(200, data, headers)

    def _put_manifest(self, name: str, ref: str, body: bytes) -> None:
        reg = self.reg
        try:
            doc = json.loads(body)
        except ValueError:
            self._send(400, _error("MANIFEST_INVALID", "not JSON"))
            return
        have_blobs, have_manifests = reg.blobs.get(name, {}), reg.manifests.get(name, {})
        needed = [doc.get("config", {})] + list(doc.get("layers") or [])
        missing = [d["digest"] for d in needed if d and d.get("digest") not in have_blobs]
        missing += [
            d["digest"] for d in doc.get("manifests") or [] if d["digest"] not in have_manifests
        ]
        if missing:
            self._send(400, _error("MANIFEST_BLOB_UNKNOWN", f"unknown {missing[0]}"))
            return
        digest = sha256(body)
        media = self.headers.get("content-type") or str(doc.get("mediaType", ""))
        with reg._lock:
            reg.manifests.setdefault(name, {}).update({ref: (body, media), digest: (body, media)})
        shown = sha256(body + b"lie") if reg.lie_manifest_digest else digest
        location = self._location(f"/v2/{name}/manifests/{digest}")
        self._send(201, b"", {"Location": location, "Docker-Content-Digest": shown})
