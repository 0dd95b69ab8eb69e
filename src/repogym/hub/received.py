"""A pull checks what it received before anything reaches DEST.

The revision's ``manifest.json`` (written by every push) is the list a pull trusts: it must
name exactly the tasks that arrived (one task, for ``--task``), and each task's files must hash
to the ``content_hash`` the manifest gives it (push records there the hash of the files it
published). On a folder registry a revision's id is the hash of those (id, content_hash) pairs,
so the manifest itself is checked against the name it is stored under. A task edited, removed
or added after the push is refused with the task named; nothing is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repogym.hub._safety import RegistryError
from repogym.taskdir import TaskError, load_task

MANIFEST = "manifest.json"


def manifest_hashes(data: bytes | None, label: str) -> dict[str, str]:
    """``{task id: content_hash}`` from the bytes of a revision's ``manifest.json``; a missing
    or malformed manifest is refused (the revision cannot be checked without it)."""
    if data is None:
        raise RegistryError(f"{label}: {MANIFEST} is missing, so the revision cannot be checked")
    try:
        manifest: Any = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise RegistryError(f"{label}: {MANIFEST} is not JSON; refused") from None
    rows = manifest.get("tasks") if isinstance(manifest, dict) else None
    if not isinstance(rows, list):
        raise RegistryError(f"{label}: {MANIFEST} has no list of tasks; refused")
    hashes: dict[str, str] = {}
    for row in rows:
        task_id = row.get("id") if isinstance(row, dict) else None
        digest = row.get("content_hash") if isinstance(row, dict) else None
        if not isinstance(task_id, str) or not isinstance(digest, str) or task_id in hashes:
            raise RegistryError(f"{label}: {MANIFEST} lists a malformed or repeated task; refused")
        hashes[task_id] = digest
    return hashes


def check_received(
    root: Path,
    tasks: list[str],
    listed: dict[str, str],
    label: str,
    *,
    whole: bool,
) -> None:
    """Refuse unless ``root/tasks/<id>`` for each of ``tasks`` matches ``listed`` (from
    :func:`manifest_hashes`): the same set of tasks when ``whole``, and for every task the
    manifest's hash and the hash of its files equal.

    What this cannot catch: a registry's owner publishing a whole new, consistent revision (or,
    on the Hub, rewriting the manifest to match edited files); it catches files changed, lost or
    added after the push."""
    if whole:
        missing = sorted(set(listed) - set(tasks))
        if missing:
            raise RegistryError(
                f"{label}: {MANIFEST} lists task {missing[0]!r}, which the revision does not "
                "hold; refused"
            )
    extra = sorted(set(tasks) - set(listed))
    if extra:
        raise RegistryError(f"{label}: task {extra[0]!r} is not in {MANIFEST}; refused")
    for task_id in tasks:
        where = f"{label}: tasks/{task_id}"
        try:
            task = load_task(root / "tasks" / task_id)
        except TaskError as exc:
            raise RegistryError(f"{where}: {exc}") from None
        if listed[task_id] != task.compute_hash():
            raise RegistryError(
                f"{where}: its files do not match the content_hash in {MANIFEST} "
                "(changed after the push); refused"
            )
