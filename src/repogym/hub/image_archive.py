"""``repogym images export`` / ``import``: task images in one file, for machines without a
registry (air-gapped clusters, HPC sites where no Docker daemon is allowed).

The file is a tar holding an **OCI image layout** (``oci-layout``, ``index.json``,
``blobs/sha256/…``; each blob once, however many tasks share it) and, beside it, the
``manifest.json`` that ``docker load`` reads, pointing at the same blobs. So it is at once:

* what ``repogym images import FILE`` loads into the local backend's cache (tasks recorded with
  ``images push`` then start from their image with no registry: it is found by its digest);
* an ``oci-archive:`` for Apptainer/Singularity (``apptainer build task.sif oci-archive:FILE``)
  and skopeo, podman and containerd (``ctr images import``);
* a ``docker load -i FILE`` archive (images are tagged with the task's ``image_ref``).

Exporting builds what is not built yet (cached, as for ``images push``) and needs no network
once the bases are in the cache. The archive is written under a temporary name and renamed into
place; importing checks every blob against its digest and unpacks an image only when all of it
is there, so a truncated or altered file imports nothing of what it spoiled.
"""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym.hub.images import ImagesError, repository_name, tag_name, tasks_and_sandbox

_NAMES = re.compile(
    r"(oci-layout|index\.json|manifest\.json|repositories|blobs/sha256/[0-9a-f]{64})"
)
MAX_JSON = 16 << 20


@dataclass
class ArchiveReport:
    path: str
    images: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    blobs: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _name_of(task: Any) -> str:
    """The tag an exported image carries: the recorded ``image_ref``, else a local name."""
    prov = task.provenance
    ref = prov.reproducibility.image_ref if prov is not None else None
    if ref and "@" not in ref and ":" in ref.rsplit("/", 1)[-1]:
        return str(ref)
    return f"repogym/{repository_name(task.id)}:{tag_name(task.id)}"


def _add(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    ti = tarfile.TarInfo(name)
    ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
    tf.addfile(ti, io.BytesIO(data))


def export_images(
    dataset: Path,
    out: Path,
    *,
    sandbox: Any = None,
    progress: Callable[[str], None] | None = None,
) -> ArchiveReport:
    """Write every task's image under ``dataset`` into the archive ``out``."""
    from repogym.run.plan import declared_environment
    from repogym.sandbox import SandboxError
    from repogym.sandbox.images import ExportError, image_of

    tasks, sandbox = tasks_and_sandbox(dataset, sandbox)
    started = time.monotonic()
    report = ArchiveReport(str(out))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ImagesError(f"{out}: {exc.strerror or exc}") from None
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    written: set[str] = set()
    index: list[dict[str, Any]] = []
    docker: list[dict[str, Any]] = []
    try:
        with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tf:
            _add(tf, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
            for task in tasks:
                if not (task.environment_dir / "Dockerfile").is_file():
                    report.skipped.append({"task": task.id, "reason": "no environment/Dockerfile"})
                    continue
                try:
                    built = sandbox.build(declared_environment(task))
                    image = image_of(sandbox, built)
                except (SandboxError, ExportError) as exc:
                    raise ImagesError(f"{task.id}: {' '.join(str(exc).split())[:300]}") from None
                blobs = sandbox.oci.blobs
                for digest in [x.digest for x in image.layers] + [image.config_digest]:
                    if digest not in written:
                        tf.add(blobs.path(digest), f"blobs/sha256/{digest.split(':')[1]}")
                        written.add(digest)
                        report.bytes += blobs.size(digest)
                if image.digest not in written:
                    _add(tf, f"blobs/sha256/{image.digest.split(':')[1]}", image.manifest)
                    written.add(image.digest)
                name = _name_of(task)
                index.append(
                    {
                        "mediaType": "application/vnd.oci.image.manifest.v1+json",
                        "digest": image.digest,
                        "size": len(image.manifest),
                        "annotations": {
                            "io.containerd.image.name": name,
                            "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1],
                            "io.repogym.task": task.id,
                        },
                    }
                )
                docker.append(
                    {
                        "Config": f"blobs/sha256/{image.config_digest.split(':')[1]}",
                        "RepoTags": [name],
                        "Layers": [f"blobs/sha256/{x.digest.split(':')[1]}" for x in image.layers],
                    }
                )
                report.images.append({"task": task.id, "name": name, "digest": image.digest})
                if progress is not None:
                    progress(f"{task.id}: {name} ({image.digest[:19]})")
            doc = {"schemaVersion": 2, "manifests": index}
            _add(tf, "index.json", json.dumps(doc, indent=1).encode())
            _add(tf, "manifest.json", json.dumps(docker, indent=1).encode())
        os.replace(tmp, out)
    except OSError as exc:
        raise ImagesError(f"{out}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    report.blobs = len(written)
    report.seconds = round(time.monotonic() - started, 3)
    return report


def import_images(
    archive: Path, *, sandbox: Any = None, progress: Callable[[str], None] | None = None
) -> ArchiveReport:
    """Load every image of ``archive`` into the local backend's image cache."""
    from repogym.sandbox import images as _img
    from repogym.sandbox.images import BlobError

    if sandbox is None:
        from repogym.sandbox.local import LocalSandbox

        sandbox = LocalSandbox()
    started = time.monotonic()
    report = ArchiveReport(str(archive))
    store = sandbox.oci
    docs: dict[str, bytes] = {}
    try:
        with tarfile.open(archive, "r|*") as tf:
            for member in tf:
                name = member.name.removeprefix("./")
                if member.isdir() and name in ("", ".", "blobs", "blobs/sha256"):
                    continue
                if not member.isfile() or not _NAMES.fullmatch(name):
                    raise ImagesError(f"{archive}: unexpected entry {name[:120]!r}")
                src = tf.extractfile(member)
                assert src is not None
                if not name.startswith("blobs/"):
                    if member.size > MAX_JSON:
                        raise ImagesError(f"{archive}: {name} is too large")
                    docs[name] = src.read()
                    continue
                digest = "sha256:" + name.rsplit("/", 1)[1]
                with store.blobs.writer(expect=digest) as w:
                    while chunk := src.read(1 << 20):
                        w.write(chunk)
                report.blobs += 1
                report.bytes += member.size
    except (tarfile.TarError, OSError, EOFError, BlobError) as exc:
        raise ImagesError(f"{archive}: {' '.join(str(exc).split())[:300]}") from None
    try:
        index = json.loads(docs.get("index.json", b"null"))
        manifests = index["manifests"]
    except (ValueError, KeyError, TypeError):
        raise ImagesError(f"{archive}: no OCI index.json (not an image archive)") from None
    for entry in manifests:
        digest = str(entry.get("digest", ""))
        name = str((entry.get("annotations") or {}).get("io.containerd.image.name") or "")
        try:
            raw = store.blobs.read(digest)
            manifest = json.loads(raw)
            config = json.loads(store.blobs.read(str(manifest["config"]["digest"])))
            ref = _img.parse_image_ref(f"{name.rsplit(':', 1)[0] or 'repogym/imported'}@{digest}")
            resolved = _img.Resolved(digest, manifest, None, raw)
            store.install(ref, "archive", resolved, config, None, [])
        except (
            BlobError,
            FileNotFoundError,
            ValueError,
            KeyError,
            TypeError,
            _img.RegistryError,
            _img.UnpackError,
        ) as exc:
            raise ImagesError(f"{archive}: image {digest[:19]}: {str(exc)[:200]}") from None
        report.images.append({"name": name, "digest": digest})
        if progress is not None:
            progress(f"imported {name or digest}")
    report.seconds = round(time.monotonic() - started, 3)
    return report
