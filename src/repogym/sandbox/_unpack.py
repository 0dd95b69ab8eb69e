"""Unpack OCI/Docker image layers (tar, gzip-compressed or not) into a root folder, safely.

Each layer is applied in two passes, as the OCI image spec describes: first its whiteouts
(``.wh.<name>`` deletes ``<name>`` of the layers below, ``.wh..wh..opq`` empties its folder of
what the layers below put there), then its entries. Paths are resolved inside the root like a
chroot would (absolute symlinks and ``..`` never leave it), member names with ``..`` are
refused, hard links must point at a file already in the root, device nodes and FIFOs are
skipped, and setuid/setgid bits are dropped (the unpacked root lives in the host's cache as
ordinary files, like the layer store's, see ``_layerfs.strip_layer``). Sizes are bounded: total
bytes written and the number of members.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
MAX_MEMBERS = 500_000
_MAX_LINKS = 40


class UnpackError(ValueError):
    """A layer that cannot be unpacked safely (the message names the member)."""


@dataclass
class Budget:
    """What the layers of one image may write in total."""

    max_bytes: int
    max_members: int = MAX_MEMBERS
    bytes: int = 0
    members: int = 0
    skipped: list[str] = field(default_factory=list)


def _member_path(name: str) -> list[str]:
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise UnpackError(f"layer member {name!r} has a '..' component")
    return parts


def scoped(root: Path, parts: list[str], *, follow_last: bool = False) -> Path:
    """Resolve ``parts`` under ``root`` following symlinks as if ``root`` were ``/``.

    Intermediate symlinks (and the last one with ``follow_last``) are followed; absolute targets
    restart at ``root`` and ``..`` stops at it, so the result is always inside ``root``.
    """
    todo = list(parts)
    done: list[str] = []
    hops = 0
    while todo:
        name = todo.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            if done:
                done.pop()
            continue
        path = root.joinpath(*done, name)
        if (todo or follow_last) and path.is_symlink():
            hops += 1
            if hops > _MAX_LINKS:
                raise UnpackError(f"too many levels of symbolic links at /{'/'.join(done)}")
            target = os.readlink(path)
            if target.startswith("/"):
                done = []
            todo = [p for p in target.split("/") if p] + todo
            continue
        done.append(name)
    return root.joinpath(*done)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def apply_layer(archive: Path, root: Path, budget: Budget) -> None:
    """Apply one layer archive (tar; gzip/bzip2/xz detected) onto ``root``."""
    try:
        with tarfile.open(archive, "r:*") as tf:
            members = []
            for m in tf:
                budget.members += 1
                if budget.members > budget.max_members:
                    raise UnpackError(f"image has more than {budget.max_members} files")
                members.append(m)
            # Pass 1: whiteouts of this layer apply to the layers below.
            for m in members:
                parts = _member_path(m.name)
                if not parts:
                    continue
                base = parts[-1]
                if base == OPAQUE:
                    folder = scoped(root, parts[:-1])
                    if folder.is_dir() and not folder.is_symlink():
                        for child in list(folder.iterdir()):
                            _remove(child)
                elif base.startswith(WHITEOUT):
                    victim = scoped(root, [*parts[:-1], base[len(WHITEOUT) :]])
                    _remove(victim)
            # Pass 2: entries.
            dirs: list[tuple[Path, tarfile.TarInfo]] = []
            for m in members:
                parts = _member_path(m.name)
                if not parts or parts[-1].startswith(WHITEOUT):
                    continue
                target = scoped(root, parts)
                _entry(tf, m, root, target, budget, dirs)
            # Folder modes last: a read-only folder must not stop its own entries.
            for path, m in reversed(dirs):
                _meta(path, m)
    except tarfile.TarError as exc:
        raise UnpackError(f"layer is not a readable tar archive ({exc})") from None


def _entry(
    tf: tarfile.TarFile,
    m: tarfile.TarInfo,
    root: Path,
    target: Path,
    budget: Budget,
    dirs: list[tuple[Path, tarfile.TarInfo]],
) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if m.isdir():
        if target.is_symlink() or (target.exists() and not target.is_dir()):
            _remove(target)
        target.mkdir(exist_ok=True)
        dirs.append((target, m))
        return
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif target.exists() or target.is_symlink():
        target.unlink()
    if m.isreg():
        budget.bytes += m.size
        if budget.bytes > budget.max_bytes:
            raise UnpackError(f"image is larger than the limit ({budget.max_bytes >> 20} MiB)")
        src = tf.extractfile(m)
        assert src is not None
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        _meta(target, m)
    elif m.issym():
        os.symlink(m.linkname, target)
        with contextlib.suppress(OSError):
            os.lchown(target, m.uid, m.gid)
    elif m.islnk():
        source = scoped(root, _member_path(m.linkname))
        if not source.is_file() or source.is_symlink():
            raise UnpackError(f"hard link {m.name!r} points at {m.linkname!r}, not a file")
        os.link(source, target)
    else:  # devices and FIFOs: never on the host
        budget.skipped.append(m.name)


def _meta(path: Path, m: tarfile.TarInfo) -> None:
    with contextlib.suppress(OSError):
        os.lchown(path, m.uid, m.gid)
    mode = stat.S_IMODE(m.mode) & ~(stat.S_ISUID | stat.S_ISGID)
    if m.isdir():
        mode = stat.S_IMODE(m.mode)  # setgid on folders (group inheritance) stays
    os.chmod(path, mode)
    with contextlib.suppress(OSError):
        os.utime(path, (m.mtime, m.mtime), follow_symlinks=False)
