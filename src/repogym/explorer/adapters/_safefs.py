"""Reading files of an untrusted folder without ever following a symbolic link out of it.

A dataset is data from anyone: ``instruction.md`` may be a symlink to ``~/.ssh/id_rsa``, a
folder of a task may be a symlink to ``/etc``, a file may be a FIFO that blocks a reader
forever. Every file the explorer's adapters read inside a task (or a dataset folder) is opened
here, relative to that folder's root:

* the root is opened once (as given: the user named it); every component below it is opened
  with ``O_NOFOLLOW`` relative to its parent's descriptor (``dir_fd``), so no symlink is
  followed anywhere on the way — not the file, not a folder above it — and a folder swapped for
  a symlink between a listing and a read changes nothing;
* only regular files are read (``O_NONBLOCK`` opens a FIFO without waiting; ``fstat`` then
  refuses it, and devices and sockets alike);
* the opened file's real path (``/proc/self/fd``) must lie inside the root's real path.

A refused file raises :class:`UnsafeFile`, whose message is a one-line reason fit to show
(:func:`link_note` says what a symlink is without following it: its target only when it stays
inside the root).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "LEAVING",
    "UnsafeFile",
    "is_dir_inside",
    "is_file_inside",
    "link_note",
    "link_or_none",
    "open_inside",
    "read_inside",
    "read_text_inside",
    "rel_to",
    "walk_inside",
]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
_FILE = (
    os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
)
LEAVING = "symlink leaving the task, not followed"


class UnsafeFile(OSError):
    """A file that is not read: a symlink, a special file, or a path leaving its root.
    ``at`` is the path (relative to the root) of the entry that is the problem: the file
    itself, or a folder above it."""

    def __init__(self, reason: str, at: str = "") -> None:
        super().__init__(reason)
        self.at = at

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "not read"


def _parts(rel: str) -> list[str]:
    parts = rel.split("/")
    if not rel or any(p in ("", ".", "..") or "\x00" in p for p in parts):
        raise UnsafeFile(f"{rel!r}: not a plain relative path")
    return parts


def _fd_path(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def _stays_inside(root: str, rel: str, target: str) -> bool:
    """Whether symlink ``rel`` (under ``root``) with ``target`` points inside ``root``, judged
    both on the text (no absolute target, no ``..`` above the root) and on the real path."""
    if os.path.isabs(target) or "\x00" in target:
        return False
    joined = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    if joined == ".." or joined.startswith("../") or os.path.isabs(joined):
        return False
    real_root = os.path.realpath(root)
    real = os.path.realpath(os.path.join(root, rel))
    return real == real_root or real.startswith(real_root.rstrip("/") + "/")


def link_note(root: str | os.PathLike[str], rel: str) -> str:
    """What the symlink ``rel`` under ``root`` is, without following it: ``symlink to
    TARGET, not followed`` when it stays inside ``root``, else :data:`LEAVING`."""
    base = os.fspath(root)
    try:
        target = os.readlink(os.path.join(base, rel))
    except OSError:
        return LEAVING
    if not _stays_inside(base, rel, target):
        return LEAVING
    return f"symlink to {target}, not followed"


def _refuse(dir_fd: int, name: str, root: str, rel: str, exc: OSError) -> OSError:
    """The error to raise when opening ``name`` (under ``dir_fd``) failed with ``exc``."""
    try:
        st = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return FileNotFoundError(exc.errno, f"{rel}: no such file")
    except OSError:
        return exc
    if stat.S_ISLNK(st.st_mode):
        return UnsafeFile(link_note(root, rel), rel)
    if not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        return UnsafeFile("not a regular file, not read", rel)
    return exc


@contextlib.contextmanager
def _dir_fd(root: str, parts: list[str]) -> Iterator[int]:
    """A descriptor of the folder ``root/parts…``, every part opened without following."""
    fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC)
    try:
        for i, part in enumerate(parts):
            try:
                nxt = os.open(part, _DIR, dir_fd=fd)
            except OSError as exc:
                raise _refuse(fd, part, root, "/".join(parts[: i + 1]), exc) from None
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def open_inside(root: str | os.PathLike[str], rel: str) -> int:
    """A read-only descriptor of the regular file ``rel`` under ``root`` (see the module doc).

    Raises :class:`FileNotFoundError`, :class:`UnsafeFile` (a symlink anywhere on the path, a
    special file, a path leaving the root) or another :class:`OSError`.
    """
    base = os.fspath(root)
    parts = _parts(rel)
    with _dir_fd(base, parts[:-1]) as dfd:
        try:
            fd = os.open(parts[-1], _FILE, dir_fd=dfd)
        except OSError as exc:
            raise _refuse(dfd, parts[-1], base, rel, exc) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile("not a regular file, not read", rel)
        real = _fd_path(fd)
        if real is not None:
            real_root = os.path.realpath(base).rstrip("/") + "/"
            if not real.startswith(real_root):
                raise UnsafeFile(LEAVING, rel)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_inside(root: str | os.PathLike[str], rel: str, limit: int = 1 << 20) -> bytes:
    """At most ``limit`` bytes of the regular file ``rel`` under ``root`` (see
    :func:`open_inside`)."""
    fd = open_inside(root, rel)
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit)


def read_text_inside(root: str | os.PathLike[str], rel: str, limit: int = 1 << 20) -> str | None:
    """The text of ``rel`` under ``root`` (UTF-8, bad bytes replaced); None when it is missing,
    unreadable or refused (:func:`link_or_none` tells a symlink apart)."""
    try:
        data = read_inside(root, rel, limit)
    except OSError:
        return None
    return data.decode("utf-8", "replace")


def _lstat_inside(root: str | os.PathLike[str], rel: str) -> os.stat_result | None:
    base = os.fspath(root)
    try:
        parts = _parts(rel)
        with _dir_fd(base, parts[:-1]) as dfd:
            return os.lstat(parts[-1], dir_fd=dfd)
    except OSError:
        return None


def is_file_inside(root: str | os.PathLike[str], rel: str) -> bool:
    """Whether ``rel`` under ``root`` is a regular file reached without any symlink."""
    st = _lstat_inside(root, rel)
    return st is not None and stat.S_ISREG(st.st_mode)


def is_dir_inside(root: str | os.PathLike[str], rel: str) -> bool:
    """Whether ``rel`` under ``root`` is a folder reached without any symlink."""
    st = _lstat_inside(root, rel)
    return st is not None and stat.S_ISDIR(st.st_mode)


def link_or_none(root: str | os.PathLike[str], rel: str) -> str | None:
    """:func:`link_note` when ``rel`` under ``root`` is a symlink (or lies below one), else None."""
    base = os.fspath(root)
    try:
        parts = _parts(rel)
    except UnsafeFile:
        return None
    for i in range(len(parts)):
        sub = "/".join(parts[: i + 1])
        if os.path.islink(os.path.join(base, sub)):
            return link_note(base, sub)
    return None


def walk_inside(
    root: str | os.PathLike[str], *, skip: frozenset[str] = frozenset(), limit: int = 5000
) -> list[tuple[str, str, int]]:
    """Every entry under ``root`` that is not a folder, sorted: ``(rel, kind, size)`` with kind
    ``file``, ``link`` (never followed: its folder is not entered either) or ``special``. Folders
    are opened without following, relative to their parent; names in ``skip`` are left out; at
    most ``limit`` entries."""
    base = os.fspath(root)
    out: list[tuple[str, str, int]] = []
    stack: list[str] = [""]
    while stack and len(out) < limit:
        rel_dir = stack.pop()
        try:
            with _dir_fd(base, rel_dir.split("/") if rel_dir else []) as dfd:
                names = os.listdir(dfd)
                for name in names:
                    if name in skip:
                        continue
                    rel = f"{rel_dir}/{name}" if rel_dir else name
                    try:
                        st = os.lstat(name, dir_fd=dfd)
                    except OSError:
                        continue
                    if stat.S_ISDIR(st.st_mode):
                        stack.append(rel)
                    elif stat.S_ISLNK(st.st_mode):
                        out.append((rel, "link", 0))
                    elif stat.S_ISREG(st.st_mode):
                        out.append((rel, "file", st.st_size))
                    else:
                        out.append((rel, "special", 0))
        except OSError:
            continue
    out.sort(key=lambda t: t[0])
    return out[:limit]


def rel_to(root: Path, path: Path) -> str:
    """``path`` relative to ``root`` as a POSIX string ("" for the root itself)."""
    rel = os.path.relpath(path, root).replace(os.sep, "/")
    return "" if rel == "." else rel
