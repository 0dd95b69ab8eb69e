"""Dataset-level files: Harbor's ``registry.json`` and repogym's ``manifest.json``; the
``harbor run`` lines that run a dataset.

Harbor reads a local registry's task paths as given: a relative one against the folder
``harbor`` runs in, whatever folder ``registry.json`` is in (0.24 to 0.26 alike). So the
paths of local tasks are written absolute, and ``harbor run --registry-path`` works from
anywhere; a dataset moved elsewhere is indexed again (``repogym dataset index``). Tasks with a
``git_url`` keep paths relative to their repository. A dataset name holding ``/`` means a
package of Harbor's Hub to ``-d``, so ``owner/name`` is written ``owner__name``.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from repogym.taskdir.provenance import Provenance
from repogym.taskdir.task import Task, atomic_write

REGISTRY_FILE = "registry.json"
MANIFEST_FILE = "manifest.json"
HARBOR_PLUGIN = "repogym.integrations.harbor:RepogymEnvironment"
TASK_FILE = "task.toml"


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


def build_manifest(tasks: list[Task], root: Path, name: str | None = None) -> dict[str, Any]:
    """repogym's dataset manifest; ``name`` as given (``owner/name``), where registry.json holds
    Harbor's form of it (:func:`harbor_name`)."""
    rows = [manifest_row(t, root) for t in sorted(tasks, key=lambda t: t.id)]
    named = {"name": name} if name else {}
    return {"schema": "repogym.manifest/1", **named, "count": len(rows), "tasks": rows}


def build_registry(
    tasks: list[Task],
    root: Path,
    *,
    name: str,
    version: str = "1.0",
    description: str = "",
    git_url: str | None = None,
    git_commit_id: str | None = None,
    final_root: Path | None = None,
) -> list[dict[str, Any]]:
    """Harbor's registry list format: one dataset entry with its tasks and a mean-reward metric
    (local tasks by absolute path, below ``final_root`` when ``root`` is a staging folder
    renamed there later; git tasks by their path in the repository)."""
    entries = []
    for task in sorted(tasks, key=lambda t: t.id):
        entry: dict[str, Any] = {"name": task.id}
        rel = task.path.relative_to(root).as_posix() if task.path != root else "."
        if git_url:
            entry["git_url"] = git_url
            if git_commit_id:
                entry["git_commit_id"] = git_commit_id
            entry["path"] = rel
        else:
            entry["path"] = ((final_root or root).resolve() / rel).as_posix()
        entries.append(entry)
    return [
        {
            "name": harbor_name(name),
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
    manifest = build_manifest(tasks, root, name)
    reg_path, man_path = root / REGISTRY_FILE, root / MANIFEST_FILE
    atomic_write(reg_path, json.dumps(registry, indent=2, ensure_ascii=False) + "\n")
    atomic_write(man_path, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return reg_path, man_path


def harbor_name(name: str) -> str:
    """``name`` as a local registry's dataset name for ``harbor run -d NAME@VERSION``."""
    return name.replace("/", "__")


def _holds_tasks(folder: Path) -> bool:
    try:
        return any((child / TASK_FILE).is_file() for child in folder.iterdir())
    except OSError:
        return False


def harbor_tasks_folder(root: Path) -> Path | None:
    """The folder ``harbor run -p`` takes for the dataset at ``root``: Harbor runs the task
    folders right below it, so ``root`` when they are there (or ``root`` is a task), else
    ``root/tasks`` (repogym's layout); None when neither holds a task."""
    root = root.resolve()
    if (root / TASK_FILE).is_file() or _holds_tasks(root):
        return root
    if _holds_tasks(root / "tasks"):
        return root / "tasks"
    return None


def harbor_run_lines(root: Path, registry: Path | None = None) -> list[str]:
    """The ``harbor run`` commands (oracle agent, repogym's environment) that run the
    dataset at ``root``: by folder (``-p``) and by name from its ``registry.json``
    (``registry`` or the one at ``root``; left out when there is none or it is unreadable)."""
    tail = f"-a oracle -e {HARBOR_PLUGIN}"
    lines = []
    folder = harbor_tasks_folder(root)
    if folder is not None:
        lines.append(f"harbor run -p {shlex.quote(str(folder))} {tail}")
    registry = registry or root / REGISTRY_FILE
    try:
        entry = json.loads(registry.read_text(encoding="utf-8"))[0]
        ref = shlex.quote(f"{entry['name']}@{entry['version']}")
    except (OSError, ValueError, LookupError, TypeError):
        return lines
    path = shlex.quote(str(registry.resolve()))
    lines.append(f"harbor run --registry-path {path} -d {ref} {tail}")
    return lines


def rebase_registry(path: Path, old_root: Path, new_root: Path) -> None:
    """Point the local task paths of the ``registry.json`` at ``path`` from below ``old_root``
    to the same place below ``new_root`` (the dataset was copied there). Other paths, and a
    file that is not a registry, are left as they are."""
    try:
        registry = json.loads(path.read_text(encoding="utf-8"))
        entries = [t for d in registry for t in d["tasks"] if "git_url" not in t]
    except (OSError, ValueError, LookupError, TypeError):
        return
    old, new = old_root.resolve(), new_root.resolve()
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("path"), str):
            task = Path(entry["path"])
            if task.is_relative_to(old):
                entry["path"] = (new / task.relative_to(old)).as_posix()
    atomic_write(path, json.dumps(registry, indent=2, ensure_ascii=False) + "\n")
