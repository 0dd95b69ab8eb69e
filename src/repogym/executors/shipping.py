"""Folders as data, for workers that do not share the driver's disk.

The driver packs a task folder into a tar archive (:func:`pack_folder`) and hands it to the
executor once (:meth:`~repogym.executors.Executor.put`); a worker unpacks it into
its own cache under a key (the task's content hash), atomically, and every later unit of the
same task on that machine reuses the copy (:func:`unpacked`). What a worker produces (a trial
folder) comes back as ``{relative path: bytes}`` (:func:`folder_files`) and the driver alone
writes it (:func:`write_files`), refusing any path that would leave the destination.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from repogym.atomic import atomic_write

__all__ = ["folder_files", "pack_folder", "shipped_cache", "unpacked", "write_files"]

SKIP_DIRS = frozenset({"__pycache__"})


def shipped_cache() -> Path:
    """Where a worker keeps unpacked folders: ``$REPOGYM_CACHE/shipped`` (``~/.cache/repogym``)."""
    env = os.environ.get("REPOGYM_CACHE")
    return (Path(env).expanduser() if env else Path.home() / ".cache" / "repogym") / "shipped"


def _skip(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    return None if PurePosixPath(info.name).name in SKIP_DIRS else info


def pack_folder(folder: Path) -> bytes:
    """``folder`` as a gzip'd tar archive (symlinks kept as links, ``__pycache__`` left out)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        tar.add(folder, arcname=".", filter=_skip)
    return buf.getvalue()


def unpacked(archive: bytes | Any, key: str, name: str, root: Path | None = None) -> Path:
    """The folder ``<root>/<key>/<name>`` unpacked from ``archive`` (bytes, or a callable that
    returns them: read only when the folder is not there yet). Unpacked into a temporary
    sibling and renamed into place, so a folder that exists is complete; when two processes
    race, one copy wins and the other is dropped."""
    base = (root or shipped_cache()) / key
    final = base / name
    if final.is_dir():
        return final
    data = archive() if callable(archive) else archive
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=base))
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
            if hasattr(tarfile, "data_filter"):  # links leaving the folder, devices: refused
                tar.extractall(tmp, filter="data")
            else:  # pragma: no cover - Python < 3.11.4
                tar.extractall(tmp)  # noqa: S202 - our own archive of a checked task
        tmp.chmod(0o755)
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def folder_files(folder: Path) -> dict[str, bytes]:
    """Every regular file under ``folder`` as ``{POSIX path relative to it: bytes}``."""
    out: dict[str, bytes] = {}
    if not folder.is_dir():
        return out
    for dirpath, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not Path(dirpath, d).is_symlink())
        for name in sorted(files):
            path = Path(dirpath, name)
            if path.is_file() and not path.is_symlink():
                out[path.relative_to(folder).as_posix()] = path.read_bytes()
    return out


def _safe(rel: str) -> PurePosixPath:
    path = PurePosixPath(rel)
    if not rel or path.is_absolute() or any(part in ("", ".", "..") for part in path.parts):
        raise ValueError(f"refused path from a worker: {rel!r}")
    return path


def write_files(dest: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` (from :func:`folder_files`) under ``dest``, each atomically; a path that
    is absolute or climbs out of ``dest`` is a ValueError, before anything is written."""
    checked = [(_safe(rel), data) for rel, data in files.items()]
    for rel, data in checked:
        atomic_write(dest.joinpath(*rel.parts), data)
