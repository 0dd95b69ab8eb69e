"""``repogym images push``: every task's environment as an image in an OCI registry.

For each task with an ``environment/``, the local backend builds it (cached layer by layer),
:mod:`repogym.sandbox._image_export` makes the image (the base's layers as pulled, one layer per
build step) and :mod:`repogym.sandbox._push` pushes it to ``<prefix>/<repository>:<task id>``,
where the repository is named after the task's source repository (the task id before its last
``-``), so tasks of one repository share one registry repository and every layer they share is
stored once. The task then records it:

* ``[environment].docker_image = "<prefix>/<repository>@sha256:…"`` (Harbor's key: Harbor,
  verifiers, OpenEnv and repogym pull it instead of building);
* ``[metadata.repo2env.reproducibility]`` ``mode = "registry"``, ``image_ref`` (the tag) and
  ``image_digest``.

The Dockerfile stays, so anyone can build the image again. The image reference is task content:
``content_hash`` is computed again after it is recorded.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym.errors import RepogymError
from repogym.taskdir import Task, TaskConfig, discover, update_task_toml

_REPO_PART = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")


class ImagesError(RepogymError, ValueError):
    """Bad input to an images command (one line)."""


@dataclass(frozen=True)
class Prefix:
    """Where images go: ``host[:port]/path`` (``http://``/``https://`` may lead)."""

    host: str
    path: str
    endpoint: str

    def repository(self, name: str) -> str:
        return f"{self.path}/{name}" if self.path else name


def parse_prefix(text: str) -> Prefix:
    from repogym.sandbox.images import endpoint_of

    raw = text.strip().rstrip("/")
    scheme = ""
    m = re.match(r"^(https?)://", raw)
    if m:
        scheme, raw = m.group(1), raw[m.end() :]
    host, _, path = raw.partition("/")
    if not host or ("." not in host and ":" not in host and host != "localhost"):
        raise ImagesError(
            f"--registry {text!r}: give a registry host first, e.g. 127.0.0.1:5000/repogym or "
            "ghcr.io/OWNER"
        )
    for part in path.split("/") if path else []:
        if not _REPO_PART.fullmatch(part):
            raise ImagesError(
                f"--registry {text!r}: {part!r} is not a repository name part (lowercase "
                "letters, digits and . _ - between them)"
            )
    endpoint = f"{scheme}://{host}" if scheme else endpoint_of(host)
    return Prefix(host.lower(), path, endpoint)


def repository_name(task_id: str) -> str:
    """The registry repository of a task: its id before the last ``-``, made valid."""
    stem = task_id.rsplit("-", 1)[0] if "-" in task_id else task_id
    name = re.sub(r"[^a-z0-9._-]+", "-", stem.lower())
    name = re.sub(r"[._-]*([._]|__|-+)[._-]*", lambda m: m.group(1), name).strip("._-")
    return name or "task"


def tag_name(task_id: str) -> str:
    tag = re.sub(r"[^A-Za-z0-9_.-]+", "-", task_id).lstrip(".-")[:128]
    if not _TAG.fullmatch(tag):
        tag = "task-" + tag[:123]
    return tag


@dataclass
class TaskImage:
    """What happened to one task."""

    task: str
    status: str
    """``pushed`` | ``skipped`` (no environment) | ``failed``."""
    image: str = ""
    """``ref@digest`` as recorded."""
    tag: str = ""
    digest: str = ""
    size: int = 0
    """Bytes of the image (its layers and config), as stored compressed."""
    uploaded: int = 0
    present: int = 0
    mounted: int = 0
    layers: int = 0
    base: str | None = None
    seconds: float = 0.0
    build_seconds: float = 0.0
    """Building the environment (0 when the layer cache had every step)."""
    push_seconds: float = 0.0
    """Sending what the registry lacked (after the image was made)."""
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in ("", None)}


@dataclass
class PushReport:
    registry: str
    tasks: list[TaskImage] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(t.status != "failed" for t in self.tasks)

    def totals(self) -> dict[str, Any]:
        pushed = [t for t in self.tasks if t.status == "pushed"]
        uploaded = sum(t.uploaded for t in pushed)
        images = sum(t.size for t in pushed)
        pushing = sum(t.push_seconds for t in pushed)
        return {
            "tasks": len(self.tasks),
            "pushed": len(pushed),
            "skipped": sum(t.status == "skipped" for t in self.tasks),
            "failed": sum(t.status == "failed" for t in self.tasks),
            "bytes_uploaded": uploaded,
            "bytes_deduplicated": images - uploaded,
            "bytes_mounted": sum(t.mounted for t in pushed),
            "sum_of_images": images,
            "seconds": round(self.seconds, 3),
            "push_seconds": round(sum(t.push_seconds for t in pushed), 3),
            "upload_mb_per_s": round(uploaded / 1e6 / pushing, 2) if pushing else 0,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "registry": self.registry,
            "totals": self.totals(),
            "tasks": [t.to_json() for t in self.tasks],
        }


def record_image(task_dir: Path, image: str, tag_ref: str, digest: str) -> None:
    """Write the image into ``task.toml`` (see the module docstring); the hash is redone."""

    def change(cfg: TaskConfig) -> None:
        cfg.environment.docker_image = image
        block = cfg.metadata.setdefault("repo2env", {})
        repro = dict(block.get("reproducibility") or {})
        repro.update({"mode": "registry", "image_ref": tag_ref, "image_digest": digest})
        block["reproducibility"] = repro

    update_task_toml(task_dir, change)


def tasks_and_sandbox(dataset: Path, sandbox: Any) -> tuple[list[Task], Any]:
    """The tasks under ``dataset`` (an unreadable one, or none, is an :class:`ImagesError`)
    and the local sandbox to build them in (``sandbox``, else one with defaults)."""
    found = discover(dataset)
    if found.invalid:
        path, exc = found.invalid[0]
        raise ImagesError(f"{path}: {exc}")
    if not found.tasks:
        raise ImagesError(f"no tasks under {dataset}")
    if sandbox is None:
        from repogym.sandbox.local import LocalSandbox

        sandbox = LocalSandbox()
    return found.tasks, sandbox


def push_images(
    dataset: Path,
    prefix: str,
    *,
    sandbox: Any = None,
    jobs: int = 1,
    record: bool = True,
    progress: Callable[[str], None] | None = None,
    log_dir: Path | None = None,
) -> PushReport:
    """Build, export and push every task's environment under ``dataset`` (see the module
    docstring). ``sandbox`` is a :class:`~repogym.sandbox.local.LocalSandbox` (made with
    defaults when None)."""
    from repogym.sandbox.images import Pusher, PushStats, credentials_for

    where = parse_prefix(prefix)
    tasks, sandbox = tasks_and_sandbox(dataset, sandbox)
    report = PushReport(registry=f"{where.host}/{where.path}".rstrip("/"))
    shared = PushStats()
    lock = threading.Lock()
    started = time.monotonic()
    creds = credentials_for(where.host)
    with Pusher(where.endpoint, credentials=creds) as pusher:

        def one(task: Task) -> TaskImage:
            out = _push_task(task, where, sandbox, pusher, shared, lock, record, log_dir)
            if progress is not None:
                progress(_line(out))
            return out

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            report.tasks = list(pool.map(one, tasks))
    report.seconds = time.monotonic() - started
    return report


def _line(t: TaskImage) -> str:
    if t.status == "pushed":
        return (
            f"{t.task}: pushed {t.image} ({t.layers} layers, {t.size / 1e6:.1f} MB; sent "
            f"{t.uploaded / 1e6:.1f} MB, {(t.present + t.mounted) / 1e6:.1f} MB already there)"
        )
    return f"{t.task}: {t.status}" + (f" ({t.error})" if t.error else "")


def _push_task(
    task: Task,
    where: Prefix,
    sandbox: Any,
    pusher: Any,
    shared: Any,
    lock: threading.Lock,
    record: bool,
    log_dir: Path | None,
) -> TaskImage:
    from repogym.run.plan import declared_environment, is_text_only
    from repogym.sandbox import SandboxError
    from repogym.sandbox.images import BlobError, ExportError, PushError, PushStats, image_of

    t0 = time.monotonic()
    if is_text_only(task) or not (task.environment_dir / "Dockerfile").is_file():
        return TaskImage(task.id, "skipped", error="no environment/Dockerfile")
    repo = where.repository(repository_name(task.id))
    tag = tag_name(task.id)
    res = TaskImage(task.id, "failed", tag=f"{where.host}/{repo}:{tag}")
    try:
        spec = declared_environment(task)
        log = (log_dir / f"{task.id}.build.log") if log_dir is not None else None
        built = sandbox.build(spec, log=log)
        res.build_seconds = round(time.monotonic() - t0, 3)
        image = image_of(sandbox, built)
        t_push = time.monotonic()
        stats = PushStats()
        with lock:
            stats.where = shared.where  # mounts across repositories of this push
        blobs = sandbox.oci.blobs
        for layer in image.layers:
            pusher.push_blob(repo, layer.digest, blobs.path(layer.digest), stats)
        pusher.push_blob(repo, image.config_digest, blobs.path(image.config_digest), stats)
        pusher.put_manifest(
            repo,
            tag,
            image.manifest,
            "application/vnd.oci.image.manifest.v1+json",
            image.digest,
        )
    except (SandboxError, ExportError, PushError, BlobError, OSError) as exc:
        res.error = " ".join(str(exc).split())[:400]
        res.seconds = time.monotonic() - t0
        return res
    res.status = "pushed"
    res.push_seconds = round(time.monotonic() - t_push, 3)
    res.digest = image.digest
    res.image = f"{where.host}/{repo}@{image.digest}"
    res.layers = len(image.layers)
    res.size = sum(x.size for x in image.layers) + len(image.config)
    res.uploaded, res.present, res.mounted = stats.uploaded, stats.present, stats.mounted
    res.base = image.base
    if record:
        record_image(task.path, res.image, res.tag, image.digest)
    res.seconds = time.monotonic() - t0
    return res


@dataclass
class CheckedImage:
    task: str
    status: str
    """``same`` | ``different`` | ``unrecorded`` (no image_digest) | ``failed``."""
    recorded: str = ""
    rebuilt: str = ""
    layers: list[str] = field(default_factory=list)
    """The steps whose layers differ from the recorded image's (when its manifest is read)."""
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in ("", [], None)}


def check_images(
    dataset: Path, *, sandbox: Any, progress: Callable[[str], None] | None = None
) -> list[CheckedImage]:
    """Build each published task's image again and compare its digest with the recorded one;
    where they differ and the registry answers, name the steps whose layers differ."""
    from repogym.run.plan import declared_environment
    from repogym.sandbox import SandboxError
    from repogym.sandbox.images import ExportError, image_of

    tasks, sandbox = tasks_and_sandbox(dataset, sandbox)
    out: list[CheckedImage] = []
    for task in tasks:
        prov = task.provenance
        repro = prov.reproducibility if prov is not None else None
        recorded = str(getattr(repro, "image_digest", "") or "") if repro is not None else ""
        res = CheckedImage(task.id, "unrecorded", recorded)
        if recorded and (task.environment_dir / "Dockerfile").is_file():
            try:
                image = image_of(sandbox, sandbox.build(declared_environment(task)))
            except (SandboxError, ExportError) as exc:
                res.status, res.error = "failed", " ".join(str(exc).split())[:300]
            else:
                res.rebuilt = image.digest
                res.status = "same" if image.digest == recorded else "different"
                if res.status == "different":
                    res.layers = _differing_steps(task, image)
        out.append(res)
        if progress is not None:
            progress(f"{task.id}: {res.status}" + (f" ({res.error})" if res.error else ""))
    return out


def _differing_steps(task: Task, image: Any) -> list[str]:
    """The build steps whose layers differ from the recorded image's (or why that image's
    manifest cannot be read)."""
    import json

    from repogym.sandbox import images as _img
    from repogym.sandbox.images import endpoint_for_image

    ref_text = task.config.environment.docker_image or ""
    try:
        ref = _img.parse_image_ref(ref_text)
        with _img.RegistryClient(endpoint_for_image(ref, {})) as client:
            _digest, _media, raw = client.manifest(ref.repository, ref.reference)
        theirs = [str(x.get("digest")) for x in json.loads(raw).get("layers") or []]
    except (_img.ImageRefError, _img.RegistryError, ValueError, AttributeError) as exc:
        return [f"(the recorded image cannot be read: {' '.join(str(exc).split())[:160]})"]
    return [
        layer.created_by or f"layer {i}"
        for i, layer in enumerate(image.layers)
        if i >= len(theirs) or theirs[i] != layer.digest
    ]
