"""Files into and out of build layers: ``COPY``/``ADD`` sources copied in, ``ADD`` archives
unpacked (bounded), a finished step's upper copied out and stripped of what must not land on the
host (setuid bits, file capabilities, devices, FIFOs, sockets).
"""

from __future__ import annotations

import os
import stat
import subprocess
import tarfile
from pathlib import Path

from repogym.sandbox import _confine, _rootfs, _unpack
from repogym.sandbox._runtime import SandboxProcess
from repogym.sandbox.base import SandboxError

MAX_ARCHIVE_MEMBERS = 100_000
"""``ADD`` refuses archives with more members than this (their bytes are bounded by storage)."""


def copy_in(
    proc: SandboxProcess,
    src: Path,
    dest: str,
    *,
    include: set[str] | None,
    owner: str | None,
    chmod: int | None,
    mtime: int | None = None,
) -> None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | (os.O_DIRECTORY if src.is_dir() else 0)
    fd = os.open(src, flags)
    try:
        copy_fd_in(proc, fd, dest, include=include, owner=owner, chmod=chmod, mtime=mtime)
    finally:
        os.close(fd)


def copy_fd_in(
    proc: SandboxProcess,
    fd: int,
    dest: str,
    *,
    include: set[str] | None,
    owner: str | None,
    chmod: int | None,
    mtime: int | None = None,
) -> None:
    """Copy the host file or folder open as ``fd`` to ``dest`` in the sandbox (a long
    ``include`` list in several operations: see :func:`include_parts`); ``mtime`` is every
    copied entry's time (None: the time of the copy)."""
    for part in include_parts(include):
        proc.file_op(
            "copy_in",
            path=dest,
            fds=[fd],
            include=part,
            owner=owner,
            chmod=chmod,
            replace=False,
            mtime=mtime,
        )


INCLUDE_PART_BYTES = 64 * 1024
"""The most bytes of entry names one ``copy_in`` request carries: a request is one
``SOCK_SEQPACKET`` message, which the kernel bounds by the socket's send buffer (~200 KiB by
default); a repository with thousands of test files (woodstox) went over it."""


def include_parts(
    include: set[str] | None, limit: int = INCLUDE_PART_BYTES
) -> list[set[str] | None]:
    """``include`` cut into sets of at most about ``limit`` bytes of names, each with the
    folders (``a/``, ``a/b/``) above its entries, so that copying every part into the same
    destination (folders merge) copies exactly ``include``."""
    if include is None or sum(len(e) + 8 for e in include) <= limit:
        return [include]
    parts: list[set[str] | None] = []
    current: set[str] = set()
    size = 0
    for entry in sorted(include):
        names = {entry} | _parents(entry)
        grow = sum(len(n) + 8 for n in names - current)
        if current and size + grow > limit:
            parts.append(current)
            current, size = set(), 0
            grow = sum(len(n) + 8 for n in names)
        current |= names
        size += grow
    if current:
        parts.append(current)
    return parts


def _parents(entry: str) -> set[str]:
    """``{"a/", "a/b/"}`` for ``a/b/c`` (or ``a/b/c/``)."""
    bits = entry.rstrip("/").split("/")[:-1]
    return {"/".join(bits[: i + 1]) + "/" for i in range(len(bits))}


def is_archive(path: Path) -> bool:
    try:
        return tarfile.is_tarfile(path)
    except OSError:
        return False


class ArchiveError(ValueError):
    """An archive ``ADD`` refuses (the message starts with the archive's name)."""


def extract_archive(archive: Path, dest: Path, *, storage_mb: int, label: str) -> None:
    """Unpack a tar archive (any compression) for ``ADD`` into the new folder ``dest``.

    It runs in the confined unpacker (:mod:`._unpack`), streamed and bounded: its regular
    files may add up to the storage limit and it may have at most
    :data:`MAX_ARCHIVE_MEMBERS` members, both checked from each member's header *before* its
    bytes are read, so a small archive expanding to gigabytes stops at the first header over
    the limit. Members with absolute names or ``..`` components, links that are absolute or
    lead above the archive, and devices or FIFOs are refused; setuid bits are cleared.
    """
    budget = _unpack.Budget(
        storage_mb << 20,
        MAX_ARCHIVE_MEMBERS,
        too_many=f"the archive has more than {MAX_ARCHIVE_MEMBERS} members",
        too_big=f"the archive expands beyond the storage limit ({storage_mb} MB)",
    )
    try:
        _unpack.extract_fresh(archive, dest, budget)
    except _unpack.UnpackError as exc:
        why = oneline(str(exc))
        if why.startswith("not a readable") or why.startswith("truncated"):
            why = f"cannot unpack the archive ({why})"
        raise ArchiveError(f"{label}: {why[:300]}") from None
    except OSError as exc:
        raise ArchiveError(
            f"{label}: cannot unpack the archive ({oneline(str(exc))[:200]})"
        ) from None


def oneline(text: str) -> str:
    """``text`` on one line (names from a stranger's files may hold newlines)."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


STRIPPED_KEPT = 1000
"""At most this many stripped entries are listed in a layer's metadata (the count is exact)."""


def shown(fs: Path, path: str) -> str:
    """A layer path as the sandbox sees it (``fs/@root/x`` → ``/x``, ``fs/usr/x`` → ``/usr/x``)."""
    rel = os.path.relpath(path, fs)
    part, _, rest = rel.partition("/")
    return oneline("/" + rest if part == _rootfs.ROOT_PART else "/" + rel)


def strip_layer(fs: Path) -> list[str]:
    """Make a finished layer safe to keep on the host; returns what was stripped.

    Layers live in the host's cache as ordinary files, so nothing in them may grant
    privileges or act as a device there: setuid/setgid bits of files and file capabilities
    (``security.capability``) are removed, device nodes (except overlayfs whiteouts, char
    0/0), FIFOs and sockets are deleted. Setgid on folders (group inheritance) stays. The walk
    never follows a link, and every change goes through the entry's own descriptor.
    """
    out: list[str] = []
    root = os.open(fs, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for dirfd, rel, st in _confine.walk_fd(root):
            mode = st.st_mode
            name = rel.rpartition("/")[2]
            where = shown(fs, str(fs / rel))
            if stat.S_ISREG(mode):
                fd = _confine.open_entry(dirfd, name)
                try:
                    if not _confine.same_entry(fd, (st.st_dev, st.st_ino)):
                        continue
                    bits = stat.S_IMODE(mode) & (stat.S_ISUID | stat.S_ISGID)
                    if bits:
                        os.fchmod(fd, stat.S_IMODE(mode) & ~bits)
                        what = "setuid" if bits & stat.S_ISUID else "setgid"
                        if bits == stat.S_ISUID | stat.S_ISGID:
                            what = "setuid+setgid"
                        out.append(f"{where}: {what} bit removed")
                    try:
                        os.removexattr(fd, "security.capability")
                    except OSError:
                        pass
                    else:
                        out.append(f"{where}: file capabilities removed")
                finally:
                    os.close(fd)
            elif stat.S_ISCHR(mode) and st.st_rdev == 0:
                continue  # an overlayfs whiteout: a deletion, not a device
            elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
                os.unlink(name, dir_fd=dirfd)
                out.append(f"{where}: device node removed")
            elif stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
                os.unlink(name, dir_fd=dirfd)
                kind = "fifo" if stat.S_ISFIFO(mode) else "socket"
                out.append(f"{where}: {kind} removed")
    finally:
        os.close(root)
    return out


def export_upper(upper: Path, fs: Path) -> None:
    """Copy a build step's upper layer (on its tmpfs) into the layer being built."""
    fs.mkdir(parents=True, exist_ok=True)
    run = subprocess.run(
        ["cp", "-a", "--", f"{upper}/.", f"{fs}/"],
        capture_output=True,
        stdin=subprocess.DEVNULL,
    )
    if run.returncode != 0:
        lines = run.stderr.decode(errors="replace").strip().splitlines() or ["(no output)"]
        raise SandboxError(f"could not save the build step's files: {oneline(lines[-1])[:300]}")
