"""Archives between the host and a Docker engine: what the engine sends (``get_archive``)
unpacked by the confined unpacker, and a container's changes exported from the engine's diff."""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import stat
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from repogym.sandbox import _unpack
from repogym.sandbox._confine import Root, remove_entry, walk_fd
from repogym.sandbox.base import Change, ChangeSet, SandboxError

MAX_COPY_BYTES = 64 << 30
"""What one ``download``/export archive from the engine may unpack to (files, in bytes)."""
MAX_COPY_MEMBERS = 1_000_000


def export_changes(container: Any, root: str, dest: Path) -> ChangeSet:
    """The container's changes under ``root`` from the engine's diff (``docker diff``),
    content fetched with ``get_archive``; nothing runs inside the container."""
    root = posixpath.normpath(root)
    if root == "/":
        raise SandboxError("changes can only be exported for a folder below /, not / itself")
    prefix = root + "/"
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    entries = sorted(
        (d["Path"], int(d["Kind"]))
        for d in (container.diff() or [])
        if d["Path"] == root or d["Path"].startswith(prefix)
    )
    changes: list[Change] = []
    whole: list[str] = []  # added folders fetched with everything below them
    for path, kind in entries:
        rel = "." if path == root else path[len(prefix) :]
        if any(rel == w or rel.startswith(w + "/") for w in whole if w != "."):
            continue
        if kind == 2:  # deleted
            changes.append(Change(rel, "deleted"))
            continue
        if rel == "." and kind == 0:
            continue  # the root itself only holds changed entries
        try:
            stream, st = container.get_archive(path)
        except Exception:  # noqa: BLE001 - gone again (e.g. a temporary file)
            continue
        is_dir = bool(int(st.get("mode", 0)) & (1 << 31))
        if is_dir and kind == 0:
            close = getattr(stream, "close", None)
            if close:
                close()
            changes.append(Change(rel, "dir", mode=0o755))
            (dest / rel).mkdir(parents=True, exist_ok=True)
            continue
        if kind == 1 and is_dir:
            whole.append(rel)
            if rel == ".":
                changes.append(Change(".", "deleted"))
        stage_archive(stream, dest, rel, changes)
    return ChangeSet(root, changes, dest)


def root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """A tar filter: the entry owned by root."""
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def unpack_engine_archive(stream: Iterable[bytes], into: Path) -> str | None:
    """Unpack an archive from ``get_archive`` into the new folder ``into`` with the confined
    unpacker (kind ``copy``); the name of its one top entry (None: empty)."""
    with tempfile.TemporaryFile() as fh:
        for chunk in stream:
            fh.write(chunk)
        fh.seek(0)
        budget = _unpack.Budget(MAX_COPY_BYTES, MAX_COPY_MEMBERS)
        _unpack.extract_fresh(fh, into, budget, kind="copy")
    names = os.listdir(into)
    return names[0] if len(names) == 1 else None


def stage_archive(stream: Iterable[bytes], dest: Path, rel: str, changes: list[Change]) -> None:
    """Stage an archive of one changed path (``get_archive`` names its top entry after the
    path's last component) at ``dest/rel``, recording each entry. The archive is unpacked
    confined into a fresh folder; links are kept as written, never followed; nothing lands
    outside ``dest``."""
    tmp = Path(tempfile.mkdtemp(prefix=".stage-", dir=dest))
    try:
        try:
            top = unpack_engine_archive(stream, tmp / "x")
        except _unpack.UnpackError:
            return
        if top is None:
            return
        src = tmp / "x" / top
        found: list[Change] = []
        st = os.lstat(src)
        entries = [("", st)]
        if stat.S_ISDIR(st.st_mode):
            fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            try:
                entries += [(inner, est) for _d, inner, est in walk_fd(fd)]
            finally:
                os.close(fd)
        for inner, est in entries:
            out = posixpath.join(rel, inner) if inner else rel
            out = posixpath.normpath(out) if out != "." else "."
            if stat.S_ISDIR(est.st_mode):
                if out != ".":
                    found.append(Change(out, "dir", mode=0o755))
            elif stat.S_ISLNK(est.st_mode):
                target = os.readlink(src / inner if inner else src)
                found.append(Change(out, "symlink", mode=0o777, target=target))
            elif stat.S_ISREG(est.st_mode):
                mode = stat.S_IMODE(est.st_mode) & 0o777
                found.append(Change(out, "file", mode=mode, size=est.st_size))
        with Root.at(dest, beneath=True, symlinks=False) as root:
            if rel == ".":
                for name in sorted(os.listdir(src)) if stat.S_ISDIR(st.st_mode) else []:
                    with contextlib.suppress(FileNotFoundError):
                        remove_entry(root.fd, name)
                    os.rename(src / name, dest / name)
            else:
                pfd, name = root.parent(rel, create=True)
                try:
                    remove_entry(pfd, name)
                    os.rename(src, name, dst_dir_fd=pfd)
                finally:
                    os.close(pfd)
        changes.extend(found)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
