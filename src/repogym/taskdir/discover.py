"""Find tasks by where their ``task.toml`` lies: ``tasks/<id>/``, ``<id>/``, nested groups."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from repogym.errors import RepogymError
from repogym.taskdir.task import TASK_TOML, Task, TaskError, load_task

# Folders that never hold tasks and can be large.
_SKIP = frozenset({".git", "node_modules", "__pycache__", ".venv", ".hg", ".svn"})


def iter_task_dirs(root: Path | str) -> Iterator[Path]:
    """Yield every folder under ``root`` (``root`` included) that holds a ``task.toml``.

    A task's own subfolders are not searched: tasks do not nest. Hidden folders and VCS or
    dependency folders are skipped. Order is sorted, so runs are reproducible. A folder that
    cannot be read is yielded too (reading it as a task then reports why), so a task folder
    without permissions is never silently left out.
    """
    root = Path(root)
    if (root / TASK_TOML).is_file():
        yield root
        return
    stack = [str(root)]
    found: list[str] = []
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as it:
                subdirs = []
                for entry in it:
                    name = entry.name
                    if name.startswith(".") or name in _SKIP:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        subdirs.append(entry.path)
        except PermissionError:
            found.append(current)
            continue
        except (NotADirectoryError, FileNotFoundError):
            continue
        for sub in subdirs:
            if os.path.isfile(os.path.join(sub, TASK_TOML)):
                found.append(sub)
            else:
                stack.append(sub)
    found.sort()
    for path in found:
        yield Path(path)


@dataclass
class Discovered:
    """The outcome of reading every task under a folder."""

    tasks: list[Task]
    invalid: list[tuple[Path, TaskError]]


def discover(root: Path | str) -> Discovered:
    """Read every task under ``root``; tasks that cannot be read are reported, not raised."""
    tasks: list[Task] = []
    invalid: list[tuple[Path, TaskError]] = []
    for path in iter_task_dirs(root):
        try:
            tasks.append(load_task(path))
        except TaskError as exc:
            invalid.append((path, exc))
    return Discovered(tasks=tasks, invalid=invalid)


# ---------------------------------------------------------------------------- unique ids


class DuplicateIdError(RepogymError, ValueError):
    """Two tasks of one dataset share an id (the message is one line)."""


def duplicate_ids(tasks: Iterable[Task | Path]) -> dict[str, list[Path]]:
    """The ids more than one of ``tasks`` (tasks or task folders) share, each with the folders
    that share it, in the order given.

    The rule every command applies (``push``, ``dataset index``, ``validate``): a task's id is
    its folder name (:attr:`Task.id`) and ids are unique within a dataset, whatever groups the
    folders sit in.
    """
    by_id: dict[str, list[Path]] = {}
    for item in tasks:
        path = item.path if isinstance(item, Task) else Path(item)
        by_id.setdefault(path.name, []).append(path)
    return {task_id: paths for task_id, paths in by_id.items() if len(paths) > 1}


def duplicate_id_message(task_id: str, paths: Iterable[Path | str]) -> str:
    """One line saying which folders share ``task_id``."""
    shown = ", ".join(str(p) for p in paths)
    return f"two tasks share the id {task_id!r} ({shown}): task ids must be unique"


def check_unique_ids(tasks: Iterable[Task | Path]) -> None:
    """Raise :class:`DuplicateIdError` naming the first id shared by two of ``tasks``."""
    for task_id, paths in duplicate_ids(tasks).items():
        raise DuplicateIdError(duplicate_id_message(task_id, paths))
