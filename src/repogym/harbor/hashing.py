"""``content_hash``: a task's identity, the same for the same bytes on any machine.

sha256 over every file of the task in sorted path order. Each file enters as its POSIX path
relative to the task, a NUL, its size, a NUL and its bytes; a symlink enters as its path and its
target text instead. ``task.toml`` enters as canonical JSON of its parsed content with
``[metadata.repo2env].content_hash`` and ``[metadata.repo2env.evaluation]`` removed — they describe
the content, they are not content — so ``verify`` can record results without staling the hash.
``__pycache__`` folders are skipped. mtimes, permissions and directory order never enter.
"""

from __future__ import annotations

import copy
import datetime as _dt
import hashlib
import json
import os
import tomllib
from pathlib import Path
from typing import Any

HASH_PREFIX = "sha256:"
SKIP_DIRS = frozenset({"__pycache__"})


def _json_default(value: Any) -> str:
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    raise TypeError(f"cannot hash value of type {type(value).__name__}")


def canonical_task_toml(data: dict[str, Any]) -> bytes:
    """The bytes through which ``task.toml`` enters the hash."""
    data = copy.deepcopy(data)
    block = data.get("metadata", {}).get("repo2env")
    if isinstance(block, dict):
        block.pop("content_hash", None)
        block.pop("evaluation", None)
    return json.dumps(
        data, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_json_default
    ).encode("utf-8")


def iter_task_files(task_dir: Path) -> list[str]:
    """Every file (and symlink) of a task as sorted POSIX paths relative to ``task_dir``."""
    out: list[str] = []
    stack = [""]
    while stack:
        rel = stack.pop()
        with os.scandir(task_dir / rel if rel else task_dir) as it:
            for entry in it:
                child = f"{rel}/{entry.name}" if rel else entry.name
                if entry.is_symlink():
                    out.append(child)
                elif entry.is_dir():
                    if entry.name not in SKIP_DIRS:
                        stack.append(child)
                else:
                    out.append(child)
    out.sort(key=lambda p: p.encode("utf-8", "surrogateescape"))
    return out


def content_hash(task_dir: Path, toml_data: dict[str, Any] | None = None) -> str:
    """Compute the task's content hash. ``toml_data`` saves re-parsing ``task.toml`` when known."""
    h = hashlib.sha256()
    for rel in iter_task_files(task_dir):
        full = task_dir / rel
        name = rel.encode("utf-8", "surrogateescape")
        if full.is_symlink():
            target = os.readlink(full).encode("utf-8", "surrogateescape")
            h.update(b"L\0" + name + b"\0" + target + b"\0")
            continue
        if rel == "task.toml":
            if toml_data is None:
                toml_data = tomllib.loads(full.read_text(encoding="utf-8"))
            body = canonical_task_toml(toml_data)
        else:
            body = full.read_bytes()
        h.update(b"F\0" + name + b"\0" + str(len(body)).encode() + b"\0")
        h.update(body)
    return HASH_PREFIX + h.hexdigest()
