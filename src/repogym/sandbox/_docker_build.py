"""Images of the ``docker`` backend: the build of a task's ``environment/`` on the engine, the
images its ``FROM`` lines name, the build's identity, and the network and pull settings that
builds and sessions share."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from repogym.sandbox.base import BuildError, EnvironmentSpec, SandboxError

NETWORK_ENV = "REPOGYM_DOCKER_NETWORK"
"""Which network builds and network-enabled phases use: unset for the engine's default
(``bridge``), ``host``, or ``none`` (no phase may have a network)."""


def network_setting() -> str | None:
    """The configured network (None: the engine's default bridge)."""
    value = os.environ.get(NETWORK_ENV, "").strip().lower()
    if value in ("", "default", "bridge"):
        return None
    if value not in ("host", "none"):
        raise SandboxError(f"{NETWORK_ENV}={value!r}: use host, none, or leave it unset")
    return value


PULL_ENV = "REPOGYM_DOCKER_PULL"
"""When the engine may pull an image it does not have: ``missing`` (the default) or ``never``
(an absent image is an error that says how to supply it; for offline and air-gapped engines)."""


def pull_setting() -> str:
    """The configured pull policy: ``missing`` or ``never``."""
    value = os.environ.get(PULL_ENV, "").strip().lower() or "missing"
    if value not in ("missing", "never"):
        raise SandboxError(f"{PULL_ENV}={value!r}: use missing or never")
    return value


def supply_hint(name: str) -> str:
    """How to give the engine the image ``name`` it cannot pull."""
    return (
        f"supply {name} with `docker load -i FILE` (saved where a registry is reachable) "
        "or a registry mirror the engine can reach"
    )


def from_images(dockerfile: str) -> list[str]:
    """The images a Dockerfile's ``FROM`` lines name, in order, without ``scratch``, earlier
    stages (``FROM x AS name`` … ``FROM name``) or names built from build arguments."""
    stages: set[str] = set()
    out: list[str] = []
    for line in dockerfile.splitlines():
        words = line.split()
        if len(words) < 2 or words[0].upper() != "FROM":
            continue
        rest = [w for w in words[1:] if not w.startswith("--")]
        if not rest:
            continue
        image = rest[0]
        if len(rest) >= 3 and rest[1].upper() == "AS":
            stages.add(rest[2].lower())
        if image.lower() == "scratch" or image.lower() in stages or "$" in image:
            continue
        if image not in out:
            out.append(image)
    return out


def present(client: Any, name: str) -> Any:
    """The image ``name`` if the engine has it (by name or digest), else None."""
    try:
        return client.images.get(name)
    except Exception:  # noqa: BLE001 - docker.errors.ImageNotFound
        return None


def build_image(
    client: Any, context: Path, spec: EnvironmentSpec, tag: str, log: Path | None
) -> Any:
    """``docker build`` of ``spec.target`` (the last stage when None), its log written to
    ``log`` whether it succeeds or not, intermediate containers removed even on failure;
    a build past ``build_timeout_sec`` is stopped (the engine cancels a build whose client
    goes) and reported as such."""
    lines: list[str] = []
    error = None
    limit = float(spec.build_timeout_sec)
    text = (context / spec.dockerfile).read_text(errors="replace")
    policy = pull_setting()
    absent = [name for name in from_images(text) if present(client, name) is None]
    if absent and policy == "never":
        raise BuildError(
            f"FROM {absent[0]} is not on the engine and {PULL_ENV}=never: {supply_hint(absent[0])}"
        )
    try:
        stream = client.api.build(
            path=str(context),
            dockerfile=spec.dockerfile,
            tag=tag,
            rm=True,
            forcerm=True,
            target=spec.target,
            decode=True,
            timeout=int(limit) + 5,
            network_mode=network_setting(),
        )
        for chunk in stream:
            if "stream" in chunk:
                lines.append(str(chunk["stream"]))
            if "error" in chunk:
                error = str(chunk.get("error") or "").strip()
                lines.append(error + "\n")
    except Exception as exc:  # noqa: BLE001 - requests' timeouts and API errors
        kind = type(exc).__name__
        first = str(exc).splitlines()[0][:300] if str(exc) else ""
        error = (
            f"build timed out after {limit:g} s (build_timeout_sec)"
            if "Timeout" in kind
            else f"{kind}: {first}"
        )
        lines.append(error + "\n")
    finally:
        if log is not None:
            log.write_text("".join(lines), encoding="utf-8", errors="replace")
    if error is not None:
        steps = [line.split(" : ", 1)[-1].split() for line in lines if line.startswith("Step ")]
        last = steps[-1] if steps else []
        image = next((w for w in last[1:] if not w.startswith("--")), "")
        if last[:1] == ["FROM"] and image in absent and present(client, image) is None:
            # The engine stopped at a FROM it could not pull.
            raise BuildError(f"cannot pull FROM {image} ({error[:200]}); {supply_hint(image)}")
        raise BuildError(f"docker build failed: {error}")
    try:
        return client.images.get(tag)
    except Exception as exc:  # noqa: BLE001
        raise BuildError(f"docker build gave no image {tag}: {type(exc).__name__}") from None


def context_digest(context: Path, spec: EnvironmentSpec) -> str:
    """The build's identity: every entry of the context (a link by its text, never followed,
    so a dangling one is fine), the Dockerfile's name and the stage."""
    digest = hashlib.sha256(f"{spec.dockerfile}\0{spec.target or ''}\0".encode())
    for root, dirs, files in os.walk(context):
        dirs.sort()
        for name in sorted(files + [d for d in dirs if (Path(root) / d).is_symlink()]):
            p = Path(root) / name
            digest.update(str(p.relative_to(context)).encode() + b"\0")
            if p.is_symlink():
                digest.update(b"L" + os.readlink(p).encode(errors="surrogateescape"))
            elif p.is_file():
                digest.update(b"F" + p.read_bytes())
    return digest.hexdigest()
