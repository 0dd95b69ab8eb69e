"""What both registries share: dataset names, results, content revisions and the staging of a push.

:mod:`repogym.hub.file_registry` and :mod:`repogym.hub.hf_registry` import from here and never
from each other; :func:`repogym.hub.registry.open_registry` picks one from a URL.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from repogym.hub._safety import RegistryError, check_tree, copy_tree
from repogym.hub.card import dataset_card
from repogym.taskdir import (
    DuplicateIdError,
    Task,
    atomic_write,
    check_unique_ids,
    discover,
    iter_task_dirs,
)
from repogym.taskdir.dataset import build_manifest

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
META_FILES = ("registry.json", "manifest.json", "README.md")


def parse_dataset_ref(ref: str) -> tuple[str, str | None]:
    """``owner/name[@rev]`` → (``owner/name``, rev or None)."""
    name, _, rev = ref.partition("@")
    if not _NAME.match(name) or ".." in name:
        raise RegistryError(f"dataset name must look like owner/name, got {ref!r}")
    return name, rev or None


def check_name(name: str) -> list[str]:
    """``owner/name`` → ``[owner, name]``, refusing anything else."""
    if not _NAME.match(name) or ".." in name:
        raise RegistryError(f"dataset name must look like owner/name, got {name!r}")
    return name.split("/")


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


def revision_of(tasks: list[Task]) -> str:
    """The content revision of a set of tasks: 16 hex digits of sha256 over the sorted
    (task id, content_hash) pairs; the same tasks give the same revision on every registry."""
    return revision_of_pairs({task.id: task.compute_hash() for task in tasks})


def revision_of_pairs(hashes: dict[str, str]) -> str:
    """:func:`revision_of` from ``{task id: content_hash}`` (e.g. a revision's manifest)."""
    h = hashlib.sha256()
    for task_id in sorted(hashes):
        h.update(f"{task_id}\0{hashes[task_id]}\n".encode())
    return h.hexdigest()[:16]


def collect_tasks(src: Path) -> list[Task]:
    """The tasks under ``src``, refusing unreadable tasks, an empty folder, duplicate ids, and
    tasks holding a special file or a symlink that leaves the task or loops (checked before
    any file is read: a FIFO would block the content hash)."""
    for task_dir in iter_task_dirs(src):
        check_tree(task_dir, task_dir.name)
    found = discover(src)
    if found.invalid:
        path, exc = found.invalid[0]
        raise RegistryError(
            f"{len(found.invalid)} task(s) cannot be read, e.g. {path.name}: {exc.file}: {exc}"
        )
    if not found.tasks:
        raise RegistryError(f"{src}: no tasks to push")
    try:
        check_unique_ids(found.tasks)
    except DuplicateIdError as exc:
        raise RegistryError(str(exc)) from None
    return found.tasks


def stage_tasks(tasks: list[Task], staging: Path) -> list[Task]:
    """Copy tasks to ``staging/tasks/<id>`` (no symlink followed) and check every copy keeps
    its content hash."""
    (staging / "tasks").mkdir(parents=True, exist_ok=True)
    for task in tasks:
        copy_tree(task.path, staging / "tasks" / task.id, task.id)
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
    manifest = build_manifest(tasks, staging, name)
    # What a pull checks its tasks against: the hash of the files published, even where a
    # task's own task.toml records a stale one.
    actual = {task.id: task.compute_hash() for task in tasks}
    for row in manifest["tasks"]:
        row["content_hash"] = actual[row["id"]]
    atomic_write(staging / "manifest.json", json.dumps(manifest, indent=2) + "\n")
    card = dataset_card(name, rev, manifest, src, private=private, tasks=tasks, registry=registry)
    atomic_write(staging / "README.md", card)


__all__ = [
    "META_FILES",
    "PullResult",
    "PushResult",
    "RegistryError",
    "check_name",
    "collect_tasks",
    "parse_dataset_ref",
    "revision_of",
    "revision_of_pairs",
    "stage_tasks",
    "write_card_and_manifest",
]
