"""Where the explorer finds the folder of a task it may run, and the task's run key.

Only Harbor folders the operator gave the explorer (the paths of ``repogym explore PATH…``,
already through the trust check, or ``--run-tasks DIR`` beside a snapshot) are ever run: an
environment's ``source`` is looked up among those roots, never taken from a request. The run key
is the task's content hash, computed from the folder (so it names exactly what ran) and cached by
a stat fingerprint of the folder.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repogym.explorer.adapters.base import stat_fingerprint
from repogym.explorer.adapters.harbor import HarborReader
from repogym.taskdir.hashing import content_hash

__all__ = ["Located", "TaskLocator"]


@dataclass(frozen=True)
class Located:
    """A runnable task: its folder and content hash."""

    path: Path
    key: str


class TaskLocator:
    """Maps ``(env id, task id)`` of the explorer's store to a task folder under the roots."""

    def __init__(self, store: Any, roots: Iterable[str | Path]) -> None:
        self.store = store
        self.roots = [Path(r).resolve() for r in roots if Path(r).is_dir()]
        self._readers: dict[str, HarborReader] = {}
        self._hashes: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return bool(self.roots)

    def _root_of(self, source: str) -> Path | None:
        try:
            path = Path(source).resolve()
        except (OSError, ValueError):
            return None
        for root in self.roots:
            if path == root or root in path.parents:
                return path
        return None

    def folder(self, env_id: str, task_id: str) -> Path | None:
        """The task's folder, or None when the explorer may not run it."""
        env = self.store.env(env_id)
        if not isinstance(env, dict) or env.get("kind") != "harbor":
            return None
        root = self._root_of(str(env.get("source") or ""))
        if root is None:
            return None
        with self._lock:
            reader = self._readers.get(str(root))
            if reader is None:
                reader = self._readers[str(root)] = HarborReader(root)
        return reader.task_paths().get(task_id)

    def locate(self, env_id: str, task_id: str) -> Located | None:
        """Folder and content hash of a task the explorer may run."""
        path = self.folder(env_id, task_id)
        if path is None or not (path / "task.toml").is_file():
            return None
        return Located(path, self.key(path))

    def key(self, path: Path) -> str:
        """The folder's content hash, recomputed only when the folder changed."""
        stamp = stat_fingerprint(path) or ""
        with self._lock:
            hit = self._hashes.get(str(path))
        if hit is not None and hit[0] == stamp:
            return hit[1]
        digest = content_hash(path)
        with self._lock:
            self._hashes[str(path)] = (stamp, digest)
        return digest
