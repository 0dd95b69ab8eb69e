"""File operations of a session, run by a file worker forked inside the sandbox's chroot
(standard library only; loaded by :mod:`._forkserver` by its file name).

``read``/``write``/``stat``/``mkdir``/``remove``, ``copy_in``/``copy_out`` through descriptors
passed from the host (:class:`Copier`), and ``mount``/``umount`` of a detached tree.
"""

from __future__ import annotations

import errno
import os
import stat

TYPE_CHECKING = False  # typing is not imported at run time (interpreter start-up)
if TYPE_CHECKING:  # the checker sees the sibling as what it is, a module of the package
    from collections.abc import Collection
    from typing import Any, NoReturn

    from repogym.sandbox._forkserver_sys import (
        MOVE_MOUNT_F_EMPTY_PATH,
        SYS_MOVE_MOUNT,
        check,
        libc,
        report,
        resolve_user,
        to_bytes,
        umount,
        write_all,
    )
else:
    from _forkserver_sys import (
        MOVE_MOUNT_F_EMPTY_PATH,
        SYS_MOVE_MOUNT,
        check,
        libc,
        report,
        resolve_user,
        to_bytes,
        umount,
        write_all,
    )

# ------------------------------------------------------------------------------ file ops


def _makedirs(path: str) -> None:
    """``mkdir -p`` with root ownership and 0755 for created components."""
    os.makedirs(path, mode=0o755, exist_ok=True)


def _remove(path: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        _rmtree(path)
    else:
        os.unlink(path)


def _rmtree_fd(dirfd: int) -> None:
    for entry in os.scandir(dirfd):
        if entry.is_dir(follow_symlinks=False):
            sub = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dirfd)
            try:
                _rmtree_fd(sub)
            finally:
                os.close(sub)
            os.rmdir(entry.name, dir_fd=dirfd)
        else:
            os.unlink(entry.name, dir_fd=dirfd)


def _rmtree(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        _rmtree_fd(fd)
    finally:
        os.close(fd)
    os.rmdir(path)


def _copy_file(src_fd: int, dst_fd: int) -> None:
    while True:
        try:
            n = os.copy_file_range(src_fd, dst_fd, 1 << 30)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                raise
            break
        if n == 0:
            return
    while True:
        chunk = os.read(src_fd, 1 << 20)
        if not chunk:
            return
        write_all(dst_fd, chunk)


class Copier:
    """Copy a tree between two directory fds, creating entries by name only (no traversal)."""

    def __init__(
        self,
        owner: tuple[int, int] | None = None,
        chmod: int | None = None,
        include: Collection[str] | None = None,
        preserve_owner: bool = False,
    ) -> None:
        self.owner = owner
        self.chmod = chmod
        self.include = include
        self.preserve_owner = preserve_owner

    def _wanted(self, rel: str, is_dir: bool) -> bool:
        if self.include is None:
            return True
        if rel in self.include:
            return True
        return is_dir and (rel + "/") in self.include

    def _own(self, name: str, dirfd: int, st: os.stat_result, is_link: bool = False) -> None:
        if self.owner is not None:
            os.chown(name, self.owner[0], self.owner[1], dir_fd=dirfd, follow_symlinks=False)
        elif self.preserve_owner:
            os.chown(name, st.st_uid, st.st_gid, dir_fd=dirfd, follow_symlinks=False)
        if not is_link:
            mode = self.chmod if self.chmod is not None else stat.S_IMODE(st.st_mode)
            os.chmod(name, mode, dir_fd=dirfd)

    def _clear(self, name: str, dirfd: int, keep_dir: bool) -> os.stat_result | None:
        try:
            st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if stat.S_ISDIR(st.st_mode):
            if keep_dir:
                return st
            sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dirfd)
            try:
                _rmtree_fd(sub)
            finally:
                os.close(sub)
            os.rmdir(name, dir_fd=dirfd)
        else:
            os.unlink(name, dir_fd=dirfd)
        return None

    def entry(self, src_dir: int, name: str, dst_dir: int, dst_name: str, rel: str) -> None:
        st = os.stat(name, dir_fd=src_dir, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            if not self._wanted(rel, True):
                return
            existing = self._clear(dst_name, dst_dir, keep_dir=True)
            if existing is None:
                os.mkdir(dst_name, 0o700, dir_fd=dst_dir)
            sub_src = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=src_dir)
            sub_dst = os.open(
                dst_name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dst_dir
            )
            try:
                self.tree(sub_src, sub_dst, rel)
            finally:
                os.close(sub_src)
                os.close(sub_dst)
            self._own(dst_name, dst_dir, st)
            return
        if not self._wanted(rel, False):
            return
        self._clear(dst_name, dst_dir, keep_dir=False)
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(name, dir_fd=src_dir), dst_name, dir_fd=dst_dir)
            self._own(dst_name, dst_dir, st, is_link=True)
        elif stat.S_ISREG(st.st_mode):
            s = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=src_dir)
            try:
                d = os.open(
                    dst_name,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                    0o600,
                    dir_fd=dst_dir,
                )
                try:
                    _copy_file(s, d)
                finally:
                    os.close(d)
            finally:
                os.close(s)
            self._own(dst_name, dst_dir, st)
        # sockets, fifos and devices are skipped, like a build context.

    def tree(self, src_dir: int, dst_dir: int, rel: str = "") -> None:
        for entry in sorted(os.scandir(src_dir), key=lambda e: e.name):
            sub_rel = entry.name if not rel else rel + "/" + entry.name
            self.entry(src_dir, entry.name, dst_dir, entry.name, sub_rel)


def _open_dir(path: str) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY)


def file_op(req: dict[str, Any], fds: list[int]) -> NoReturn:
    """In a forked worker inside the sandbox root: one file operation. Never returns."""
    status_fd = fds[-1]
    try:
        result = _file_op(req, fds[:-1])
        report(status_fd, {"ok": True, "result": result})
        os._exit(0)
    except BaseException as exc:  # noqa: BLE001 - reported to the host
        try:
            err = getattr(exc, "errno", None)
            report(status_fd, {"error": f"{type(exc).__name__}: {exc}", "errno": err})
        finally:
            os._exit(1)


def _owner(spec: str | None) -> tuple[int, int] | None:
    if spec is None:
        return None
    uid, gid, _groups, _home = resolve_user(spec)
    return uid, gid


_FILE_OPS = ("read", "write", "remove", "mkdir", "stat", "copy_in", "copy_out", "mount", "umount")


def _file_op(req: dict[str, Any], fds: list[int]) -> dict[str, Any] | None:
    op = req["op"]
    if op not in _FILE_OPS:
        raise ValueError(f"unknown file operation {op!r}")
    path: str = req["path"]  # every operation names one
    if op == "read":
        with open(path, "rb") as fh:
            while True:
                chunk = fh.read(1 << 20)
                if not chunk:
                    break
                write_all(fds[0], chunk)
        os.close(fds[0])
        return None
    if op == "write":
        _makedirs(os.path.dirname(path) or "/")
        tmp = f"{path}.repogym-tmp-{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            while True:
                chunk = os.read(fds[0], 1 << 20)
                if not chunk:
                    break
                write_all(fd, chunk)
            os.fchmod(fd, req.get("mode", 0o644))
        finally:
            os.close(fd)
        owner = _owner(req.get("owner"))
        if owner:
            os.chown(tmp, owner[0], owner[1])
        os.rename(tmp, path)
        return None
    if op == "remove":
        _remove(path)
        return None
    if op == "mkdir":
        _makedirs(path)
        owner = _owner(req.get("owner"))
        if owner:
            os.chown(path, owner[0], owner[1])
        return None
    if op == "stat":
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return {"mode": st.st_mode, "size": st.st_size, "is_dir": stat.S_ISDIR(st.st_mode)}
    if op == "copy_in":
        # fds[0]: source (file or directory) on the host. ``path``: destination in the sandbox.
        src = fds[0]
        copier = Copier(_owner(req.get("owner")), req.get("chmod"), req.get("include"))
        src_is_dir = stat.S_ISDIR(os.fstat(src).st_mode)
        if req.get("replace"):
            _remove(path)
        parent, name = os.path.split(path.rstrip("/") or "/")
        _makedirs(parent)
        if src_is_dir:
            if not name:  # the root itself
                dst = _open_dir("/")
            else:
                try:
                    st = os.lstat(path)
                    if not stat.S_ISDIR(st.st_mode):
                        os.unlink(path)
                        raise FileNotFoundError
                except FileNotFoundError:
                    os.mkdir(path, 0o755)
                    if copier.owner:
                        os.chown(path, *copier.owner)
                dst = _open_dir(path)
            try:
                copier.tree(src, dst)
            finally:
                os.close(dst)
        else:
            if not name:
                raise IsADirectoryError(errno.EISDIR, "cannot replace / with a file", path)
            pdir = _open_dir(parent)
            try:
                st = os.fstat(src)
                copier._clear(name, pdir, keep_dir=False)
                d = os.open(
                    name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=pdir
                )
                try:
                    _copy_file(src, d)
                finally:
                    os.close(d)
                copier._own(name, pdir, st)
            finally:
                os.close(pdir)
        return None
    if op == "copy_out":
        # ``path``: source in the sandbox; fds[0]: host directory to create ``req['name']`` in.
        dst_dir = fds[0]
        parent, name = os.path.split(path.rstrip("/") or "/")
        src_dir = _open_dir(parent or "/")
        try:
            Copier(preserve_owner=False).entry(src_dir, name or ".", dst_dir, req["name"], "")
        finally:
            os.close(src_dir)
        return None
    if op == "mount":
        _makedirs(path)
        check(
            libc.syscall(
                SYS_MOVE_MOUNT, fds[0], b"", -100, to_bytes(path), MOVE_MOUNT_F_EMPTY_PATH
            ),
            "move_mount",
        )
        return None
    if op == "umount":
        umount(path)
        return None
    raise AssertionError(op)  # every name in _FILE_OPS is handled above
