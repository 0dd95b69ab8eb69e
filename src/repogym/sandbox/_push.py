"""Pushing images to any registry that speaks the OCI Distribution API, with no Docker daemon.

* **Blobs** already in the repository (``HEAD``) are skipped; one pushed before to another
  repository of the same registry is *mounted* (``POST …/uploads/?mount=…&from=…``), which
  copies nothing. Others are uploaded in chunks (``PATCH`` with ``Content-Range``, then ``PUT
  ?digest=``); a small blob goes in one ``PUT``. The registry's ``Docker-Content-Digest`` must
  be the digest we sent, and a blob it says it holds must have our size.
* **Manifests** are ``PUT`` by tag; the registry's answer must name the digest of our bytes.
* **Retries**: a connection error, a ``5xx`` or a ``429`` is retried (four tries, growing
  pauses); an upload starts again from its beginning.
* **Auth**: anonymous first, then the challenge is answered (:mod:`._registry_auth`).

Every failure is a :class:`PushError` of one line that names the registry, the repository and
what went wrong, never a credential.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from repogym.sandbox._registry_auth import (
    AuthError,
    Credentials,
    TokenUnavailable,
    challenge_answer,
)

if TYPE_CHECKING:
    import httpx

CHUNK = 16 << 20
"""Upload chunk size; a blob no larger goes in one request."""
TRIES = 4


class PushError(Exception):
    """The push failed; the message is one line."""


@dataclass
class PushStats:
    uploaded: int = 0
    """Bytes sent."""
    present: int = 0
    """Bytes the repository already had (skipped)."""
    mounted: int = 0
    """Bytes mounted from another repository of the registry (not sent)."""
    blobs: int = 0
    seconds: float = 0.0
    where: dict[str, str] = field(default_factory=dict)
    """Blob digest → a repository of this registry known to hold it (for mounts)."""

    def add(self, other: PushStats) -> None:
        self.uploaded += other.uploaded
        self.present += other.present
        self.mounted += other.mounted
        self.blobs += other.blobs
        self.seconds += other.seconds


def endpoint_of(host: str) -> str:
    """``http://`` for a loopback registry (as Docker allows), ``https://`` otherwise."""
    bare = host.split("/", 1)[0]
    if bare.startswith("["):  # [v6 address] with or without a port
        name = bare[1 : bare.find("]")] if "]" in bare else bare
    else:
        name = bare.rsplit(":", 1)[0] if bare.count(":") == 1 else bare
    loopback = name in ("localhost", "::1") or name.startswith("127.")
    return ("http://" if loopback else "https://") + bare


class Pusher:
    """Push side of one registry endpoint."""

    def __init__(
        self,
        endpoint: str,
        *,
        credentials: Credentials | None = None,
        timeout_s: float = 120.0,
        chunk: int = CHUNK,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        import httpx

        self.endpoint = endpoint.rstrip("/")
        self.creds = credentials
        self.chunk = chunk
        self.sleep = sleep
        self.http = httpx.Client(
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            follow_redirects=False,
            headers={"User-Agent": "repogym-push"},
            transport=transport,
        )
        self._auth: dict[str, str] = {}
        """Authorization header per scope set (``""``: basic, for every request)."""

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Pusher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport

    def _url(self, path_or_url: str) -> str:
        return urljoin(self.endpoint + "/", path_or_url)

    def _request(
        self,
        method: str,
        url: str,
        scopes: list[str],
        *,
        headers: dict[str, str] | None = None,
        content: bytes | None = None,
        params: dict[str, str] | None = None,
    ) -> httpx.Response:
        """One request, answering one auth challenge; no retry (see :meth:`_retry`)."""
        import httpx

        key = " ".join(scopes)
        full = self._url(url)
        # Credentials go to the registry only: an upload Location on another host (a storage
        # backend, or a registry that wants them) gets the bytes, never the Authorization.
        ours = urlsplit(full).netloc == urlsplit(self.endpoint).netloc
        for attempt in range(2):
            hdrs = dict(headers or {})
            auth = self._auth.get(key) or self._auth.get("")
            if auth and ours:
                hdrs["Authorization"] = auth
            try:
                resp = self.http.request(method, full, headers=hdrs, content=content, params=params)
            except httpx.HTTPError as exc:
                raise _Transient(f"{type(exc).__name__}: {str(exc)[:200]}") from None
            if resp.status_code != 401:
                return resp
            if not ours:
                raise PushError(
                    f"{urlsplit(full).netloc} (an upload location) asks for credentials"
                )
            if attempt:
                who = f"as {self.creds.username} ({self.creds.source})" if self.creds else ""
                raise PushError(
                    f"registry {self.endpoint} refused the credentials {who} for "
                    f"{key or 'push'}".replace("  ", " ")
                )
            challenge = resp.headers.get("www-authenticate", "")
            try:
                answer = challenge_answer(self.http, challenge, scopes, self.creds, self.endpoint)
            except TokenUnavailable as exc:
                raise _Transient(str(exc)) from None
            except AuthError as exc:
                raise PushError(str(exc)) from None
            self._auth["" if answer.startswith("Basic ") else key] = answer
        raise AssertionError("unreachable")  # pragma: no cover

    def _retry(self, what: str, fn: Callable[[], Any]) -> Any:
        delay = 0.5
        for attempt in range(1, TRIES + 1):
            try:
                return fn()
            except _Transient as exc:
                if attempt == TRIES:
                    raise PushError(f"{what}: {exc} (after {TRIES} tries)") from None
                self.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _check(resp: httpx.Response, ok: tuple[int, ...], what: str) -> None:
        if resp.status_code in ok:
            return
        if resp.status_code >= 500 or resp.status_code == 429:
            raise _Transient(f"answered {resp.status_code}")
        detail = _error_detail(resp)
        raise PushError(f"{what}: registry answered {resp.status_code}{detail}")

    # -- blobs

    def has_blob(self, repo: str, digest: str, size: int | None = None) -> bool:
        def once() -> bool:
            resp = self._request("HEAD", f"/v2/{repo}/blobs/{digest}", [f"repository:{repo}:pull"])
            if resp.status_code == 404:
                return False
            self._check(resp, (200,), f"{repo} blob {digest[:19]}")
            got = resp.headers.get("content-length")
            if size is not None and got is not None and got.isdigit() and int(got) != size:
                raise PushError(
                    f"registry {self.endpoint} says {repo} holds blob {digest[:19]} with "
                    f"{got} bytes, not {size}"
                )
            return True

        return bool(self._retry(f"checking {repo} blob {digest[:19]}", once))

    def push_blob(
        self, repo: str, digest: str, path: Path, stats: PushStats, *, mount_from: str | None = None
    ) -> str:
        """Make blob ``digest`` (the file ``path``) present in ``repo``: ``present``,
        ``mounted`` or ``uploaded``."""
        size = path.stat().st_size
        stats.blobs += 1
        if self.has_blob(repo, digest, size):
            stats.present += size
            stats.where.setdefault(digest, repo)
            return "present"
        source = mount_from or stats.where.get(digest)
        scopes = [f"repository:{repo}:pull,push"]
        if source and source != repo:
            scopes.append(f"repository:{source}:pull")

        def once() -> str:
            params = {"mount": digest, "from": source} if source and source != repo else None
            start = self._request("POST", f"/v2/{repo}/blobs/uploads/", scopes, params=params)
            if start.status_code == 201 and params:
                self._verify_put(start, digest, repo)
                return "mounted"
            self._check(start, (202,), f"starting the upload of {digest[:19]} to {repo}")
            location = start.headers.get("location")
            if not location:
                raise PushError(f"registry {self.endpoint} started an upload without a Location")
            self._upload(location, path, size, digest, repo, scopes)
            return "uploaded"

        how = str(self._retry(f"pushing blob {digest[:19]} to {repo}", once))
        if how == "mounted":
            stats.mounted += size
        else:
            stats.uploaded += size
        stats.where[digest] = repo
        return how

    def _upload(
        self, location: str, path: Path, size: int, digest: str, repo: str, scopes: list[str]
    ) -> None:
        with open(path, "rb") as fh:
            offset = 0
            while size > self.chunk and offset < size:
                data = fh.read(self.chunk)
                end = offset + len(data) - 1
                resp = self._request(
                    "PATCH",
                    location,
                    scopes,
                    content=data,
                    headers={
                        "Content-Type": "application/octet-stream",
                        "Content-Range": f"{offset}-{end}",
                        "Content-Length": str(len(data)),
                    },
                )
                self._check(resp, (202,), f"uploading {digest[:19]} to {repo}")
                location = resp.headers.get("location") or location
                offset = end + 1
            rest = fh.read() if offset < size else b""
        sep = "&" if "?" in location else "?"
        resp = self._request(
            "PUT",
            f"{location}{sep}digest={digest}",
            scopes,
            content=rest,
            headers={"Content-Type": "application/octet-stream", "Content-Length": str(len(rest))},
        )
        self._check(resp, (201,), f"finishing the upload of {digest[:19]} to {repo}")
        self._verify_put(resp, digest, repo)

    def _verify_put(self, resp: httpx.Response, digest: str, repo: str) -> None:
        got = resp.headers.get("docker-content-digest")
        if got and got != digest:
            raise PushError(
                f"registry {self.endpoint} stored blob {digest[:19]} of {repo} as {got[:19]}"
            )

    # -- manifests

    def put_manifest(self, repo: str, tag: str, body: bytes, media_type: str, digest: str) -> None:
        def once() -> None:
            resp = self._request(
                "PUT",
                f"/v2/{repo}/manifests/{tag}",
                [f"repository:{repo}:pull,push"],
                content=body,
                headers={"Content-Type": media_type},
            )
            self._check(resp, (200, 201), f"pushing manifest {repo}:{tag}")
            got = resp.headers.get("docker-content-digest")
            if got and got != digest:
                raise PushError(
                    f"registry {self.endpoint} stored manifest {repo}:{tag} as {got}, not {digest}"
                )

        self._retry(f"pushing manifest {repo}:{tag}", once)


class _Transient(Exception):
    """Worth another try: no answer, a 5xx or a 429."""


def _error_detail(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return ""
    errors = body.get("errors") if isinstance(body, dict) else None
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        code = str(errors[0].get("code", ""))[:40]
        msg = " ".join(str(errors[0].get("message", "")).split())[:160]
        return f" ({code}: {msg})" if code else f" ({msg})"
    return ""
