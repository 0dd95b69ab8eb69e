"""A dataset registry in a local folder (``file:///PATH``).

Layout::

    PATH/<owner>/<name>/revisions/<rev>/   one immutable copy per push: tasks, registry.json
                                           (pinned to <rev>), manifest.json, README.md (card)
    PATH/<owner>/<name>/refs/main          the newest revision id (written last, atomically)

``rev`` is the first 16 hex digits of sha256 over the sorted (task id, content_hash) pairs, so
pushing the same tasks twice gives the same revision.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from repogym.harbor import Task, atomic_write, discover
from repogym.harbor.dataset import build_manifest, build_registry
from repogym.hub.card import dataset_card

if TYPE_CHECKING:
    from repogym.hub.hf_registry import HfRegistry

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


class RegistryError(ValueError):
    """A push or pull cannot be done; the message is one line a user can act on."""


def parse_dataset_ref(ref: str) -> tuple[str, str | None]:
    """``owner/name[@rev]`` → (``owner/name``, rev or None)."""
    name, _, rev = ref.partition("@")
    if not _NAME.match(name) or ".." in name:
        raise RegistryError(f"dataset name must look like owner/name, got {ref!r}")
    return name, rev or None


@dataclass
class PushResult:
    name: str
    revision: str
    tasks: int
    location: Path | str
    """Where the revision lives: a folder, or the dataset's URL on a hosted registry."""
    unchanged: bool
    tasks_commit: str | None = None
    """On the Hub: the commit holding the tasks, which ``registry.json`` pins."""


@dataclass
class PullResult:
    name: str
    revision: str
    tasks: list[str]
    dest: Path


def _revision_of(tasks: list[Task]) -> str:
    h = hashlib.sha256()
    for task in sorted(tasks, key=lambda t: t.id):
        h.update(f"{task.id}\0{task.compute_hash()}\n".encode())
    return h.hexdigest()[:16]


def collect_tasks(src: Path) -> list[Task]:
    """The tasks under ``src``, refusing unreadable tasks, an empty folder and duplicate ids."""
    found = discover(src)
    if found.invalid:
        path, exc = found.invalid[0]
        raise RegistryError(
            f"{len(found.invalid)} task(s) cannot be read, e.g. {path.name}: {exc.file}: {exc}"
        )
    if not found.tasks:
        raise RegistryError(f"{src}: no tasks to push")
    ids = [t.id for t in found.tasks]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise RegistryError(f"two tasks share the id {dup!r}: task ids must be unique")
    return found.tasks


def stage_tasks(tasks: list[Task], staging: Path) -> list[Task]:
    """Copy tasks to ``staging/tasks/<id>`` and check every copy keeps its content hash."""
    for task in tasks:
        shutil.copytree(task.path, staging / "tasks" / task.id, symlinks=True)
    copied = discover(staging / "tasks").tasks
    for original, copy in zip(
        sorted(tasks, key=lambda t: t.id), sorted(copied, key=lambda t: t.id), strict=True
    ):
        if original.compute_hash() != copy.compute_hash():
            raise RegistryError(f"{original.id}: copy differs from the source")
    return copied


def write_card_and_manifest(
    staging: Path,
    tasks: list[Task],
    src: Path,
    name: str,
    rev: str,
    *,
    private: bool,
    registry: str = "<this registry>",
) -> None:
    """``manifest.json`` and the dataset card ``README.md`` of a staged revision."""
    manifest = build_manifest(tasks, staging)
    atomic_write(staging / "manifest.json", json.dumps(manifest, indent=2) + "\n")
    card = dataset_card(name, rev, manifest, src, private=private, tasks=tasks, registry=registry)
    atomic_write(staging / "README.md", card)


class FileRegistry:
    def __init__(self, root: Path) -> None:
        self.root = root

    def _dataset(self, name: str) -> Path:
        return self.root / name

    def revisions(self, name: str) -> list[str]:
        folder = self._dataset(name) / "revisions"
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []

    def resolve(self, name: str, rev: str | None) -> str:
        if rev is None or rev == "main":
            ref = self._dataset(name) / "refs" / "main"
            if not ref.is_file():
                raise RegistryError(f"no dataset {name} in {self.root}")
            return ref.read_text().strip()
        matches = [r for r in self.revisions(name) if r.startswith(rev)]
        if len(matches) != 1:
            known = ", ".join(self.revisions(name)) or "none"
            raise RegistryError(f"{name}: no single revision matches {rev!r} (known: {known})")
        return matches[0]

    def push(self, src: Path, name: str, *, private: bool = False) -> PushResult:
        tasks = collect_tasks(src)
        rev = _revision_of(tasks)
        target = self._dataset(name) / "revisions" / rev
        unchanged = target.is_dir()
        if not unchanged:
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{rev}.", dir=target.parent))
            try:
                copied = stage_tasks(tasks, staging)
                registry = build_registry(
                    copied,
                    staging,
                    name=name,
                    version=rev,
                    description=f"{name} at revision {rev}",
                )
                atomic_write(staging / "registry.json", json.dumps(registry, indent=2) + "\n")
                write_card_and_manifest(staging, copied, src, name, rev, private=private)
                os.replace(staging, target)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
        atomic_write(self._dataset(name) / "refs" / "main", rev + "\n")
        return PushResult(name, rev, len(tasks), target, unchanged)

    def pull(
        self, name: str, dest: Path, *, rev: str | None = None, task: str | None = None
    ) -> PullResult:
        revision = self.resolve(name, rev)
        source = self._dataset(name) / "revisions" / revision
        tasks = sorted(p.name for p in (source / "tasks").iterdir() if p.is_dir())
        if task is not None:
            if task not in tasks:
                raise RegistryError(f"{name}@{revision} has no task {task!r}")
            tasks = [task]
        if dest.exists() and any(dest.iterdir()):
            clash = [t for t in tasks if (dest / "tasks" / t).exists()]
            if clash:
                raise RegistryError(f"{dest}: tasks already present, e.g. {clash[0]}")
        (dest / "tasks").mkdir(parents=True, exist_ok=True)
        for task_id in tasks:
            staging = Path(tempfile.mkdtemp(prefix=f".{task_id}.", dir=dest / "tasks"))
            shutil.rmtree(staging)
            shutil.copytree(source / "tasks" / task_id, staging, symlinks=True)
            os.replace(staging, dest / "tasks" / task_id)
        for meta in ("registry.json", "manifest.json", "README.md"):
            if task is None and (source / meta).is_file():
                shutil.copyfile(source / meta, dest / meta)
        return PullResult(name, revision, tasks, dest)


def open_registry(url: str) -> FileRegistry | HfRegistry:
    """A registry from its URL: ``hf`` (``HF_ENDPOINT`` or the public Hub),
    ``hf+http(s)://HOST`` (a Hub at that address) or ``file:///PATH`` (a local folder)."""
    if url == "hf" or url.startswith("hf+"):
        from repogym.hub.hf_registry import HfRegistry, parse_hf_url

        return HfRegistry(parse_hf_url(url))
    parsed = urlparse(url)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        raise RegistryError(
            f"unsupported registry {url!r}: use hf, hf+https://HOST or file:///PATH"
        )
    root = Path(unquote(parsed.path))
    if not root.is_absolute():
        raise RegistryError(f"registry path must be absolute: {url!r}")
    return FileRegistry(root)
