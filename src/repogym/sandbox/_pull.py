"""The pull path: which registry endpoint serves an image, and its cached read-only root.

**Selecting it.** A *registries* setting maps registry hosts to endpoints we can reach::

    REPOGYM_REGISTRY_MIRROR="docker.io=http://127.0.0.1:5000,ghcr.io=https://ghcr.example"
    REPOGYM_REGISTRY_MIRROR="http://127.0.0.1:5000"          # one endpoint for every registry

(or ``LocalSandbox(registries={...})``). An image whose registry (after normalisation:
``public.ecr.aws/docker/library/x`` is ``docker.io``) has an endpoint is pulled from it; an
image without one, or whose endpoint does not answer or lacks it, falls back to the host
mapping (:mod:`._toolchains`) and the mapping notes why. Nothing is probed by default: on a
machine whose registries are unreachable, a build never waits for a connection timeout.

**The cache.** ``<cache>/oci/<manifest digest>/rootfs`` holds the unpacked root, with
``image.json`` (digest, size, config, manifest); built in a temporary folder, renamed into
place under a per-digest lock, so a killed pull never leaves a half root that later counts as
pulled. The tag → digest answer is remembered (``refs/``), so a tag already pulled still builds
when the endpoint is down (noted). The layer blobs stay under ``<cache>/oci/blobs``
(:mod:`._blobs`): an image built on this one is pushed or exported with them as they are.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from repogym.sandbox import _registry, _unpack
from repogym.sandbox._blobs import BlobStore
from repogym.sandbox._images import ImageRef

if TYPE_CHECKING:
    from repogym.sandbox._shared_cache import SharedCache

ENV_VAR = "REPOGYM_REGISTRY_MIRROR"
DEFAULT_MAX_IMAGE_MB = 16384
MAX_LAYER_BLOB_MB = 8192


def parse_registries(text: str) -> dict[str, str]:
    """``host=url,host=url`` (or a bare ``url`` for every registry, key ``*``)."""
    out: dict[str, str] = {}
    for item in text.replace(";", ",").split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, url = item.partition("=")
        if not sep:
            host, url = "*", item
        out[host.strip().lower()] = url.strip()
    return out


def registries_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    return parse_registries((environ if environ is not None else os.environ).get(ENV_VAR, ""))


def endpoint_for(ref: ImageRef, registries: Mapping[str, str]) -> str | None:
    """The endpoint configured for the image's registry (``*`` as the catch-all)."""
    return registries.get(ref.registry) or registries.get("*")


@dataclass
class PulledImage:
    """An unpacked image root in the cache."""

    ref: ImageRef
    endpoint: str
    digest: str
    rootfs: Path
    size: int
    """Bytes of the unpacked files."""
    compressed: int
    """Bytes of the layer blobs as downloaded."""
    config: dict[str, object]
    cached: bool = False
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def image_config(self) -> dict[str, object]:
        cfg = self.config.get("config") or {}
        return cfg if isinstance(cfg, dict) else {}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


class ImageStore:
    """Pulled image roots under ``<cache>/oci``."""

    def __init__(self, root: Path, *, max_image_mb: int = DEFAULT_MAX_IMAGE_MB) -> None:
        self.root = root
        self.max_image_mb = max_image_mb
        (self.root / "refs").mkdir(parents=True, exist_ok=True)
        self.blobs = BlobStore(root / "blobs")
        self.shared: SharedCache | None = None
        """The cluster's shared cache: blobs come from it before the registry, and go to it."""

    def _dir(self, digest: str) -> Path:
        return self.root / digest.replace(":", "-")

    def _ref_file(self, endpoint: str, ref: ImageRef) -> Path:
        name = hashlib.sha256(
            f"{endpoint}\0{ref.registry}/{ref.repository}:{ref.tag_or_latest}".encode()
        ).hexdigest()
        return self.root / "refs" / name

    def cached(self, digest: str) -> PulledImage | None:
        d = self._dir(digest)
        meta = d / "image.json"
        if not meta.is_file():
            return None
        info = json.loads(meta.read_text())
        from repogym.sandbox._images import parse

        return PulledImage(
            ref=parse(info["ref"]),
            endpoint=info["endpoint"],
            digest=digest,
            rootfs=d / "rootfs",
            size=int(info["size"]),
            compressed=int(info.get("compressed", 0)),
            config=info.get("config") or {},
            cached=True,
        )

    def pull(self, ref: ImageRef, endpoint: str, *, scratch: Path | None = None) -> PulledImage:
        """The image's root, from the cache or pulled from ``endpoint``.

        Raises :class:`_registry.Unreachable` / :class:`_registry.NotFound` (the caller falls
        back to the host mapping) or :class:`_registry.RegistryError` /
        :class:`_unpack.UnpackError` (a broken image: an error, never a silent fallback).
        """
        t0 = time.monotonic()
        notes: list[str] = []
        if ref.digest:  # content-addressed: what the cache holds under it is that image
            hit = self.cached(ref.digest)
            if hit is not None:
                hit.seconds = time.monotonic() - t0
                return hit
        ref_file = self._ref_file(endpoint, ref)
        with _registry.RegistryClient(endpoint) as client:
            try:
                resolved = client.resolve(ref.repository, ref.reference)
            except _registry.Unreachable:
                known = ref.digest or (ref_file.read_text().strip() if ref_file.is_file() else "")
                hit = self.cached(known) if known else None
                if hit is None:
                    raise
                hit.notes.append(f"registry {endpoint} unreachable: used the cached {known}")
                hit.seconds = time.monotonic() - t0
                return hit
            if not ref.digest:
                tmp_ref = ref_file.with_suffix(f".{os.getpid()}.tmp")
                tmp_ref.write_text(resolved.digest)
                tmp_ref.replace(ref_file)
            with _locked(self.root / ".locks" / resolved.digest.replace(":", "-")):
                hit = self.cached(resolved.digest)
                if hit is not None:
                    hit.seconds = time.monotonic() - t0
                    return hit
                out = self._pull_new(client, ref, endpoint, resolved, scratch, notes)
        out.seconds = time.monotonic() - t0
        return out

    def _pull_new(
        self,
        client: _registry.RegistryClient,
        ref: ImageRef,
        endpoint: str,
        resolved: _registry.Resolved,
        scratch: Path | None,
        notes: list[str],
    ) -> PulledImage:
        config = client.config(ref.repository, resolved)
        shared = self.shared

        def fetch(digest: str, part: Path) -> None:
            if shared is not None and shared.fetch_blob(digest, part):
                return  # another node pulled it (checked against its digest)
            client.blob_to(ref.repository, digest, part, max_bytes=MAX_LAYER_BLOB_MB << 20)
            if shared is not None:
                shared.put_blob(digest, part)

        return self.install(ref, endpoint, resolved, config, fetch, notes)

    def install(
        self,
        ref: ImageRef,
        endpoint: str,
        resolved: _registry.Resolved,
        config: dict[str, object],
        fetch: Callable[[str, Path], None] | None,
        notes: list[str],
    ) -> PulledImage:
        """Unpack the image ``resolved`` into the cache from its blobs: those the store lacks
        are written by ``fetch(digest, path)``, which checks the bytes against the digest as it
        writes them (None: they must all be in the store already, e.g. brought by ``images
        import``). Returns the image as cached."""
        final = self._dir(resolved.digest)
        hit = self.cached(resolved.digest)
        if hit is not None:
            return hit
        tmp = self.root / f".tmp-{final.name}-{os.getpid()}-{secrets.token_hex(4)}"
        rootfs = tmp / "rootfs"
        rootfs.mkdir(parents=True)
        os.chmod(rootfs, 0o755)
        budget = _unpack.Budget(max_bytes=self.max_image_mb << 20)
        compressed = 0
        try:
            # The blobs are kept (by digest): a push of an image built on this one sends or
            # mounts them as they are, and another pull of a sharing image skips them.
            for layer in resolved.layers:
                digest = str(layer["digest"])
                if not self.blobs.has(digest):
                    if fetch is None:
                        raise _registry.RegistryError(
                            f"layer {digest} of {ref.familiar} is missing"
                        )
                    part = self.blobs.root / f".tmp-{os.getpid()}-{secrets.token_hex(6)}"
                    try:
                        fetch(digest, part)
                        self.blobs.adopt(part, digest, verified=True)
                    finally:
                        part.unlink(missing_ok=True)
                compressed += self.blobs.size(digest)
                _unpack.apply_layer(self.blobs.path(digest), rootfs, budget)
            self.blobs.put(resolved.raw)
            if budget.skipped:
                notes.append(f"{len(budget.skipped)} device/fifo entries skipped")
            info = {
                "ref": ref.canonical,
                "endpoint": endpoint,
                "digest": resolved.digest,
                "index_digest": resolved.index_digest,
                "size": budget.bytes,
                "compressed": compressed,
                "config": config,
                "manifest": json.loads(resolved.raw) if resolved.raw else resolved.manifest,
                "skipped": budget.skipped[:50],
                "pulled": time.time(),
            }
            (tmp / "image.json").write_text(json.dumps(info, indent=1))
            try:
                os.rename(tmp, final)
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return PulledImage(
            ref=ref,
            endpoint=endpoint,
            digest=resolved.digest,
            rootfs=final / "rootfs",
            size=budget.bytes,
            compressed=compressed,
            config=config,
            notes=notes,
        )


def runtime_dir(root: Path, hostname: str, dns: str) -> Path:
    """Files every pulled root gets on top, as Docker bind-mounts them: ``/etc/hosts``,
    ``/etc/hostname``, ``/etc/resolv.conf`` (slirp4netns's resolver)."""
    spec = f"{hostname}\0{dns}"
    target = root / "runtime" / hashlib.sha256(spec.encode()).hexdigest()[:16]
    if target.is_dir():
        return target
    tmp = target.with_name(f".tmp-{target.name}-{os.getpid()}-{secrets.token_hex(4)}")
    (tmp / "etc").mkdir(parents=True)
    (tmp / "etc" / "hostname").write_text(hostname + "\n")
    (tmp / "etc" / "hosts").write_text(
        f"127.0.0.1\tlocalhost {hostname}\n::1\tlocalhost ip6-localhost ip6-loopback\n"
    )
    (tmp / "etc" / "resolv.conf").write_text(f"nameserver {dns}\n")
    for p in (tmp, tmp / "etc"):
        os.chmod(p, 0o755)
    try:
        os.rename(tmp, target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
