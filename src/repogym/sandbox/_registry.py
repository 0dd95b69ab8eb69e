"""A small OCI Distribution client (pull only) over httpx: no Docker daemon, no registry SDK.

* **Auth**: anonymous first; a ``401`` is answered by :mod:`._registry_auth` (a Bearer token
  from the realm, with the registry's credentials when ``docker login`` or
  ``REPOGYM_REGISTRY_USERNAME``/``PASSWORD`` give some; Basic with those credentials).
* **Manifests**: Docker v2 schema 2 and OCI image manifests; manifest lists and OCI indexes are
  resolved to this host's platform (``linux/amd64`` here). Schema 1 is refused. Every manifest
  is checked against the digest it was asked by (or the registry's ``Docker-Content-Digest``)
  and bounded in size.
* **Blobs** are streamed to a file, bounded in size and verified against their digest.

Which endpoint serves which registry is the caller's choice (:mod:`._pull`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # httpx is imported when a pull happens (the rootless tests run without it)
    import httpx

MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"
MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
INDEXES = (MANIFEST_LIST, OCI_INDEX)
MANIFESTS = (MANIFEST_V2, OCI_MANIFEST)
MAX_MANIFEST_BYTES = 4 << 20
MAX_CONFIG_BYTES = 8 << 20


class RegistryError(Exception):
    """The registry refused or sent something wrong; the message is one line."""


class Unreachable(RegistryError):
    """No answer from the endpoint (connection refused, DNS, timeout)."""


class NotFound(RegistryError):
    """The registry does not have that repository or reference."""


@dataclass(frozen=True)
class Resolved:
    """An image manifest for one platform."""

    digest: str
    """Digest of the platform's image manifest (what a pulled root is keyed by)."""
    manifest: dict[str, object]
    index_digest: str | None = None
    """Digest of the manifest list / index it was chosen from, if any."""
    raw: bytes = b""
    """The manifest's bytes (what ``digest`` is the digest of)."""

    @property
    def config_digest(self) -> str:
        return str(self.manifest["config"]["digest"])  # type: ignore[index]

    @property
    def layers(self) -> list[dict[str, object]]:
        return list(self.manifest.get("layers") or [])  # type: ignore[call-overload]


def _digest_ok(digest: str) -> bool:
    return bool(re.fullmatch(r"sha256:[0-9a-f]{64}", digest))


def _check_digest(data: bytes, digest: str) -> None:
    if not _digest_ok(digest):
        raise RegistryError(f"unsupported digest {digest[:80]!r} (only sha256)")
    got = "sha256:" + hashlib.sha256(data).hexdigest()
    if got != digest:
        raise RegistryError(f"content does not match its digest {digest} (got {got})")


class RegistryClient:
    """Pull-side client of one registry endpoint (``https://ghcr.io``, ``http://127.0.0.1:5000``)."""

    def __init__(
        self,
        endpoint: str,
        *,
        timeout_s: float = 30.0,
        platform: str = "",
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        import httpx

        self.endpoint = endpoint.rstrip("/")
        if not self.endpoint.startswith(("http://", "https://")):
            self.endpoint = "https://" + self.endpoint
        from repogym.sandbox._images import host_platform

        self.platform = platform or host_platform()
        self.http = httpx.Client(
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 5.0)),
            follow_redirects=True,
            headers={"User-Agent": "repogym-sandbox"},
            transport=transport,
        )
        self._tokens: dict[str, str] = {}

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport

    def _send(
        self, method: str, url: str, repo: str, headers: dict[str, str], *, stream: bool = False
    ) -> httpx.Response:
        import httpx

        scope = f"repository:{repo}:pull"
        for attempt in range(2):
            hdrs = dict(headers)
            if scope in self._tokens:
                hdrs["Authorization"] = self._tokens[scope]
            try:
                req = self.http.build_request(method, url, headers=hdrs)
                resp = self.http.send(req, stream=stream)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                raise Unreachable(f"registry {self.endpoint} is unreachable ({exc})") from None
            except httpx.HTTPError as exc:
                raise RegistryError(f"registry {self.endpoint}: {exc}") from None
            if resp.status_code != 401 or attempt:
                return resp
            challenge = resp.headers.get("www-authenticate", "")
            resp.close()
            self._tokens[scope] = self._answer(challenge, scope)
        raise AssertionError("unreachable")  # pragma: no cover

    def _answer(self, challenge: str, scope: str) -> str:
        """The ``Authorization`` header for a ``401``: anonymous Bearer tokens, or the
        credentials ``docker login`` / ``REPOGYM_REGISTRY_*`` give this registry
        (:mod:`._registry_auth`; never printed)."""
        from urllib.parse import urlsplit

        from repogym.sandbox._registry_auth import (
            AuthError,
            TokenUnavailable,
            challenge_answer,
            credentials_for,
        )

        creds = credentials_for(urlsplit(self.endpoint).netloc)
        try:
            return challenge_answer(self.http, challenge, [scope], creds, self.endpoint)
        except TokenUnavailable as exc:
            raise Unreachable(str(exc)) from None
        except AuthError as exc:
            raise RegistryError(str(exc)) from None

    # -- manifests

    def manifest(self, repo: str, reference: str) -> tuple[str, str, bytes]:
        """``(digest, media type, bytes)`` of a manifest (any kind), verified and bounded."""
        url = f"{self.endpoint}/v2/{repo}/manifests/{reference}"
        accept = ", ".join((*INDEXES, *MANIFESTS))
        resp = self._send("GET", url, repo, {"Accept": accept}, stream=True)
        try:
            if resp.status_code == 404:
                raise NotFound(f"{repo}:{reference} is not in registry {self.endpoint}")
            if resp.status_code != 200:
                raise RegistryError(
                    f"registry {self.endpoint} answered {resp.status_code} for manifest "
                    f"{repo}:{reference}"
                )
            data = b""
            for chunk in _body(resp, self.endpoint, f"manifest {repo}:{reference}"):
                data += chunk
                if len(data) > MAX_MANIFEST_BYTES:
                    raise RegistryError(f"manifest {repo}:{reference} is over 4 MiB")
            header = resp.headers.get("docker-content-digest", "")
            media = resp.headers.get("content-type", "").split(";")[0].strip()
        finally:
            resp.close()
        if reference.startswith("sha256:"):
            digest = reference
        elif header:
            digest = header
        else:
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
        _check_digest(data, digest)
        try:
            doc = json.loads(data)
        except ValueError:
            raise RegistryError(f"manifest {repo}:{reference} is not JSON") from None
        if not isinstance(doc, dict):
            raise RegistryError(f"manifest {repo}:{reference} is not a JSON object")
        media = str(doc.get("mediaType") or media)
        if doc.get("schemaVersion") == 1:
            raise RegistryError(f"{repo}:{reference} uses the retired schema 1 manifest")
        return digest, media, data

    def resolve(self, repo: str, reference: str) -> Resolved:
        """The image manifest of ``repo:reference`` for this host's platform."""
        digest, media, data = self.manifest(repo, reference)
        doc = json.loads(data)
        index_digest = None
        if media in INDEXES or "manifests" in doc:
            index_digest = digest
            child = self._pick(doc.get("manifests") or [], f"{repo}:{reference}")
            digest, media, data = self.manifest(repo, child)
            doc = json.loads(data)
        if media not in MANIFESTS and "layers" not in doc:
            raise RegistryError(f"{repo}:{reference}: unsupported manifest type {media!r}")
        cfg = doc.get("config")
        if not isinstance(cfg, dict) or not _digest_ok(str(cfg.get("digest", ""))):
            raise RegistryError(f"{repo}:{reference}: manifest without a sha256 config")
        for layer in doc.get("layers") or []:
            if not isinstance(layer, dict) or not _digest_ok(str(layer.get("digest", ""))):
                raise RegistryError(f"{repo}:{reference}: layer without a sha256 digest")
        return Resolved(digest, doc, index_digest, data)

    def _pick(self, entries: list[dict[str, object]], name: str) -> str:
        os_, arch = self.platform.split("/")[:2]
        found: list[tuple[str, dict[str, object]]] = []  # (variant, entry)
        for e in entries:
            plat = e.get("platform") or {}
            if not isinstance(plat, dict):
                continue
            if plat.get("os") == os_ and plat.get("architecture") == arch:
                found.append((str(plat.get("variant", "")), e))
        if not found:
            have = sorted(
                {
                    f"{p.get('os')}/{p.get('architecture')}"
                    for e in entries
                    if isinstance(p := e.get("platform"), dict)
                }
            )
            raise RegistryError(f"{name} has no {self.platform} image (has: {', '.join(have)})")
        # amd64 has no variants; for arm prefer v8 / none.
        found.sort(key=lambda vf: vf[0])
        return str(found[0][1]["digest"])

    # -- blobs

    def config(self, repo: str, resolved: Resolved) -> dict[str, object]:
        """The image configuration (``config`` part: Env, WorkingDir, User, …)."""
        path = b"".join(self._blob_chunks(repo, resolved.config_digest, MAX_CONFIG_BYTES))
        _check_digest(path, resolved.config_digest)
        try:
            doc = json.loads(path)
        except ValueError:
            raise RegistryError(f"config of {repo} is not JSON") from None
        return doc if isinstance(doc, dict) else {}

    def blob_to(self, repo: str, digest: str, dest: Path, *, max_bytes: int) -> int:
        """Stream a blob into ``dest``; verify its digest; returns its size."""
        h = hashlib.sha256()
        size = 0
        with open(dest, "wb") as fh:
            for chunk in self._blob_chunks(repo, digest, max_bytes):
                h.update(chunk)
                size += len(chunk)
                fh.write(chunk)
        got = "sha256:" + h.hexdigest()
        if got != digest:
            dest.unlink(missing_ok=True)
            raise RegistryError(f"blob {digest} of {repo} does not match its digest (got {got})")
        return size

    def _blob_chunks(self, repo: str, digest: str, max_bytes: int) -> Iterator[bytes]:
        if not _digest_ok(digest):
            raise RegistryError(f"unsupported digest {digest[:80]!r} (only sha256)")
        url = f"{self.endpoint}/v2/{repo}/blobs/{digest}"
        resp = self._send("GET", url, repo, {}, stream=True)
        try:
            if resp.status_code == 404:
                raise NotFound(f"blob {digest} of {repo} is not in registry {self.endpoint}")
            if resp.status_code != 200:
                raise RegistryError(
                    f"registry {self.endpoint} answered {resp.status_code} for blob {digest}"
                )
            size = 0
            for chunk in _body(resp, self.endpoint, f"blob {digest} of {repo}", 1 << 20):
                size += len(chunk)
                if size > max_bytes:
                    raise RegistryError(
                        f"blob {digest} of {repo} is over the size limit ({max_bytes >> 20} MiB)"
                    )
                yield chunk
        finally:
            resp.close()


def _body(
    resp: httpx.Response, endpoint: str, what: str, chunk: int | None = None
) -> Iterator[bytes]:
    """The response body in chunks; a connection cut or a timeout while reading it is a
    :class:`RegistryError` (one line), like any other broken answer."""
    import httpx

    try:
        yield from resp.iter_bytes(chunk)
    except httpx.HTTPError as exc:
        raise RegistryError(
            f"registry {endpoint}: {what} broke off ({type(exc).__name__})"
        ) from None
