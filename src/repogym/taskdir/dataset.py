"""Dataset-level files: Harbor's ``registry.json`` and repogym's ``manifest.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repogym.taskdir.provenance import Provenance
from repogym.taskdir.task import Task, atomic_write

REGISTRY_FILE = "registry.json"
MANIFEST_FILE = "manifest.json"


def _count(value: Any) -> int | None:
    if isinstance(value, list):
        return len(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return None


def _id_list_len(task: Task, rel: str) -> int | None:
    p = task.path / rel
    try:
        value = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return len(value) if isinstance(value, list) else None


def manifest_row(task: Task, root: Path) -> dict[str, Any]:
    """One row of ``manifest.json`` for a task."""
    prov = task.provenance or Provenance()
    sub = prov.pipeline_table or {}
    f2p = _count(sub.get("fail_to_pass"))
    p2p = _count(sub.get("pass_to_pass"))
    if f2p is None:
        f2p = _id_list_len(task, "tests/f2p.json")
    if p2p is None:
        p2p = _id_list_len(task, "tests/p2p.json")
    return {
        "id": task.id,
        "name": task.name,
        "path": task.path.relative_to(root).as_posix() if task.path != root else ".",
        "repo": prov.repo,
        "ref": prov.ref,
        "pipeline": prov.pipeline,
        "reward_kinds": prov.reward_kinds if prov.reward_kinds is not None else [],
        "f2p": f2p,
        "p2p": p2p,
        "difficulty": task.config.metadata.get("difficulty"),
        "category": task.config.metadata.get("category"),
        "network_mode": task.config.environment.network_mode,
        "verification": prov.evaluation.get("status"),
        "content_hash": prov.content_hash or task.compute_hash(),
    }


def build_manifest(tasks: list[Task], root: Path) -> dict[str, Any]:
    rows = [manifest_row(t, root) for t in sorted(tasks, key=lambda t: t.id)]
    return {"schema": "repogym.manifest/1", "count": len(rows), "tasks": rows}


def build_registry(
    tasks: list[Task],
    root: Path,
    *,
    name: str,
    version: str = "1.0",
    description: str = "",
    git_url: str | None = None,
    git_commit_id: str | None = None,
) -> list[dict[str, Any]]:
    """Harbor's registry list format: one dataset entry with its tasks and a mean-reward metric."""
    entries = []
    for task in sorted(tasks, key=lambda t: t.id):
        entry: dict[str, Any] = {"name": task.id}
        if git_url:
            entry["git_url"] = git_url
            if git_commit_id:
                entry["git_commit_id"] = git_commit_id
        entry["path"] = task.path.relative_to(root).as_posix() if task.path != root else "."
        entries.append(entry)
    return [
        {
            "name": name,
            "version": version,
            "description": description,
            "tasks": entries,
            "metrics": [{"type": "mean"}],
        }
    ]


def write_dataset_index(
    root: Path,
    tasks: list[Task],
    *,
    name: str | None = None,
    version: str = "1.0",
    description: str = "",
) -> tuple[Path, Path]:
    """Write ``registry.json`` and ``manifest.json`` at the dataset root (atomically)."""
    name = name or root.resolve().name
    registry = build_registry(tasks, root, name=name, version=version, description=description)
    manifest = build_manifest(tasks, root)
    reg_path, man_path = root / REGISTRY_FILE, root / MANIFEST_FILE
    atomic_write(reg_path, json.dumps(registry, indent=2, ensure_ascii=False) + "\n")
    atomic_write(man_path, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return reg_path, man_path
