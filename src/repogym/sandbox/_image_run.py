"""Starting a local sandbox from a task's published image instead of building it.

A task published with ``images push`` pins ``[environment].docker_image`` by digest. The local
backend pulls that image (from the endpoint configured for its registry, else from the
registry itself: ``http://`` for a loopback one, ``https://`` otherwise), checks every blob
against its digest, unpacks it once into the image cache and starts sessions on it: no build
step runs. When the image cannot be had (no answer, not there, credentials refused, a broken
blob), the Dockerfile is built instead (a task with none: the image as a one-line ``FROM``,
which a configured registry or the host mapping may still serve), and the reason is printed
and kept in the build's ``base_mapping`` (``image_fallback``), never silently.

Only tasks published this way (reproducibility mode ``registry``) reach out to the image's own
registry; a Dockerfile's ``FROM`` and a task naming just an image keep the rule of
:mod:`._pull` (a configured endpoint, else the host mapping; nothing probed).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from repogym.sandbox import _images, _pull, _registry, _unpack
from repogym.sandbox._push import endpoint_of
from repogym.sandbox._registry_auth import AuthError
from repogym.sandbox.base import BuiltEnvironment, EnvironmentSpec

if TYPE_CHECKING:
    from repogym.sandbox.local import LocalSandbox

_log = logging.getLogger("repogym.sandbox")


def endpoint_for_image(ref: _images.ImageRef, registries: dict[str, str]) -> str:
    """The configured endpoint for the image's registry, else the registry itself."""
    configured = _pull.endpoint_for(ref, registries)
    if configured:
        return configured
    if ref.registry == _images.DOCKER_HUB:
        return "https://registry-1.docker.io"
    return endpoint_of(ref.registry)


def pull_task_image(sb: LocalSandbox, image: str) -> tuple[_pull.PulledImage | None, str]:
    """``(pulled, "")`` or ``(None, why not)``."""
    try:
        ref = _images.parse(image)
    except _images.ImageRefError as exc:
        return None, str(exc)
    if sb.rootless:
        return None, "pulled images need root"
    endpoint = endpoint_for_image(ref, sb.registries)
    try:
        return sb.oci.pull(ref, endpoint, scratch=sb.cache_root / "run"), ""
    except (_registry.RegistryError, _unpack.UnpackError, AuthError, OSError) as exc:
        return None, " ".join(str(exc).split())[:300] or type(exc).__name__


def build_from_image(
    sb: LocalSandbox, spec: EnvironmentSpec, log: Path | None
) -> tuple[BuiltEnvironment | None, str]:
    """The environment started from ``spec.docker_image`` with nothing built, or
    ``(None, reason)`` when the image cannot be had (the caller builds the Dockerfile)."""
    assert spec.docker_image
    pulled, why = pull_task_image(sb, spec.docker_image)
    if pulled is None:
        message = f"task image {spec.docker_image} not used ({why})"
        has_dockerfile = spec.context_dir is not None and (
            Path(spec.context_dir, spec.dockerfile).is_file()
        )
        instead = f"environment/{spec.dockerfile}" if has_dockerfile else "it as a FROM line"
        _log.warning("%s: building %s instead", message, instead)
        return None, message
    pinned = f"{pulled.ref.registry}/{pulled.ref.repository}@{pulled.digest}"
    one_line = dataclasses.replace(
        spec, context_dir=None, docker_image=pinned, image_first=False, target=None
    )
    built = sb.build(one_line, log=log)
    built.base_mapping["image"] = spec.docker_image
    built.base_mapping["image_pulled"] = "cached" if pulled.cached else "pulled"
    built.details["image"] = {
        "ref": spec.docker_image,
        "digest": pulled.digest,
        "endpoint": pulled.endpoint,
        "cached": pulled.cached,
        "seconds": round(pulled.seconds, 3),
        "bytes": pulled.compressed,
    }
    return built, ""
