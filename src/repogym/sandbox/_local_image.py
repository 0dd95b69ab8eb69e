"""The image of a local build: what :func:`._image_export.assemble` needs, read from the local
backend's cache."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from repogym.sandbox._image_export import Image, assemble, epoch_from_env
from repogym.sandbox._images import host_platform
from repogym.sandbox.base import BuiltEnvironment

if TYPE_CHECKING:
    from repogym.sandbox.local import LocalSandbox


def image_of(
    sb: LocalSandbox,
    built: BuiltEnvironment,
    *,
    epoch: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Image:
    """The OCI image of ``built`` (a local build), every blob in ``sb.oci.blobs``.

    Raises :class:`._image_export.ExportError` when it has none (a base mapped onto the host,
    a layer with no image form)."""
    layers = sb._layers_of(built)
    rootfs = sb._rootfs_of(built)
    base: dict[str, Any] | None = None
    if rootfs is not None:
        base = json.loads((rootfs.parent / "image.json").read_text())
    d = built.details
    config = {
        "Env": dict(built.env),
        "WorkingDir": built.workdir,
        "User": built.user,
        "Cmd": d.get("cmd"),
        "Entrypoint": d.get("entrypoint"),
        "Labels": d.get("labels"),
        "ExposedPorts": d.get("exposed_ports"),
        "Volumes": d.get("volumes"),
        "StopSignal": d.get("stopsignal"),
    }
    steps = [s for s in d.get("steps") or [] if isinstance(s, dict)]  # type: ignore[attr-defined]
    return assemble(
        blobs=sb.oci.blobs,
        layers_root=sb.store.root,
        memo_dir=sb.oci.root / "exported",
        built_layers=layers,
        base=base,
        mapping=dict(built.base_mapping),
        config=config,
        steps=steps,
        platform=host_platform(),
        epoch=epoch_from_env() if epoch is None else epoch,
        progress=progress,
    )
