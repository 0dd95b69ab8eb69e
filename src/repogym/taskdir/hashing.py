"""``content_hash``: a task's identity, the same for the same bytes on any machine.

sha256 over every file of the task in sorted path order. Each file enters as its POSIX path
relative to the task, a NUL, its size, a NUL and its bytes; a symlink enters as its path and its
target text instead. ``task.toml`` enters as canonical JSON of its parsed content with
``[metadata.repo2env].content_hash`` and ``[metadata.repo2env.evaluation]`` removed — they describe
the content, they are not content — so ``verify`` can record results without staling the hash.
``__pycache__`` folders are skipped. mtimes, permissions and directory order never enter.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

HASH_PREFIX = "sha256:"
SKIP_DIRS = frozenset({"__pycache__"})


def _json_default(value: Any) -> str:
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    raise TypeError(f"cannot hash value of type {type(value).__name__}")


def canonical_task_toml(data: dict[str, Any]) -> bytes:
    """The bytes through which ``task.toml`` enters the hash: ``[metadata.repo2env]`` without
    ``content_hash`` and ``evaluation``, and a table left empty (or empty to begin with) the same
    as an absent one — so recording a hash into a task never changes what was hashed."""
    metadata = data.get("metadata")
    if isinstance(metadata, dict):
        # Copy only the path down to the block; the rest is shared, never mutated.
        block = metadata.get("repo2env")
        if isinstance(block, dict):
            block = {k: v for k, v in block.items() if k not in ("content_hash", "evaluation")}
            if block:
                metadata = {**metadata, "repo2env": block}
            else:
                metadata = {k: v for k, v in metadata.items() if k != "repo2env"}
        if metadata:
            data = {**data, "metadata": metadata}
        else:
            data = {k: v for k, v in data.items() if k != "metadata"}
    return json.dumps(
        data, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_json_default
    ).encode("utf-8")


_CHUNK = 1 << 16


def read_bytes(path: str, *, follow: bool = True) -> bytes:
    """Read a whole file with raw ``os`` calls (much cheaper than ``open()`` for small files).

    ``follow=False`` refuses a symlink as the last component (``OSError`` ELOOP)."""
    flags = os.O_RDONLY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        first = os.read(fd, _CHUNK)
        if len(first) < _CHUNK:  # a short read of a regular file is its end: no more syscalls
            return first
        chunks = [first]
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def list_task_files(task_dir: Path | str) -> list[tuple[str, bool]]:
    """Every file of a task as sorted (POSIX path relative to the task, is_symlink) pairs.

    Symlinks are listed, never followed.
    """
    base = os.fspath(task_dir)
    out: list[tuple[str, bool]] = []
    stack = [""]
    while stack:
        rel = stack.pop()
        with os.scandir(os.path.join(base, rel) if rel else base) as it:
            for entry in it:
                child = f"{rel}/{entry.name}" if rel else entry.name
                if entry.is_symlink():
                    out.append((child, True))
                elif entry.is_dir():
                    if entry.name not in SKIP_DIRS:
                        stack.append(child)
                else:
                    out.append((child, False))
    out.sort(key=lambda item: item[0].encode("utf-8", "surrogateescape"))
    return out


def iter_task_files(task_dir: Path | str) -> list[str]:
    """Every file (and symlink) of a task as sorted POSIX paths relative to ``task_dir``."""
    return [rel for rel, _link in list_task_files(task_dir)]


def content_hash(
    task_dir: Path | str,
    toml_data: dict[str, Any] | None = None,
    files: list[tuple[str, bool]] | None = None,
    read: Callable[[str], bytes] | None = None,
) -> str:
    """Compute the task's content hash.

    ``toml_data`` (parsed ``task.toml``), ``files`` (from :func:`list_task_files`) and ``read``
    (relative path → bytes, e.g. a cache) save work when the caller already has them.
    """
    base = os.fspath(task_dir)
    h = hashlib.sha256()
    for rel, is_link in files if files is not None else list_task_files(base):
        full = os.path.join(base, rel)
        name = rel.encode("utf-8", "surrogateescape")
        if is_link:
            target = os.readlink(full).encode("utf-8", "surrogateescape")
            h.update(b"L\0" + name + b"\0" + target + b"\0")
            continue
        if rel == "task.toml":
            if toml_data is None:
                toml_data = tomllib.loads(read_bytes(full).decode("utf-8"))
            body = canonical_task_toml(toml_data)
        elif read is not None:
            body = read(rel)
        else:
            body = read_bytes(full)
        h.update(b"F\0" + name + b"\0" + str(len(body)).encode() + b"\0")
        h.update(body)
    return HASH_PREFIX + h.hexdigest()
