"""File operations of a session, run by a file worker forked inside the sandbox's chroot
(standard library only; loaded by :mod:`._forkserver` by its file name).

``read``/``write``/``stat``/``list``/``mkdir``/``remove``, ``copy_in``/``copy_out`` through
descriptors passed from the host (:class:`Copier`), and ``mount``/``umount`` of a detached tree.

Everything a worker touches belongs to the sandbox, whose processes may have planted links
anywhere, magic links of ``/proc`` included. So, before it looks at a path, a worker

1. closes every descriptor it inherited from the session server (host folders, cgroup files,
   sockets) but the ones passed for this operation, and puts ``/dev/null`` on 0, 1 and 2;
2. drops every capability the operation does not need (``CAP_SYS_ADMIN`` only for mounts;
   never ``CAP_SYS_CHROOT`` or ``CAP_SYS_PTRACE``), or becomes the requested user;
3. resolves every path through :class:`_confine.Root` (inside the root, never through a magic
   link) and changes metadata only through the descriptor of the entry it created or opened.

A descriptor passed for a copy is used only as the host end of that copy.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import signal
import socket
import stat

TYPE_CHECKING = False  # typing is not imported at run time (interpreter start-up)
if TYPE_CHECKING:  # the checker sees the siblings as what they are, modules of the package
    from collections.abc import Collection
    from typing import Any, NoReturn

    from repogym.sandbox._confine import Root, link_meta, remove_entry, set_meta
    from repogym.sandbox._forkserver_sys import (
        MOVE_MOUNT_F_EMPTY_PATH,
        PR_SET_PDEATHSIG,
        SYS_MOVE_MOUNT,
        cap_sets,
        check,
        close_other_fds,
        keep_only_caps,
        libc,
        prctl,
        recv,
        report,
        resolve_user,
        write_all,
    )
else:
    from _confine import Root, link_meta, remove_entry, set_meta
    from _forkserver_sys import (
        MOVE_MOUNT_F_EMPTY_PATH,
        PR_SET_PDEATHSIG,
        SYS_MOVE_MOUNT,
        cap_sets,
        check,
        close_other_fds,
        keep_only_caps,
        libc,
        prctl,
        recv,
        report,
        resolve_user,
        write_all,
    )

MOVE_MOUNT_T_EMPTY_PATH = 0x40
MNT_DETACH = 0x2
UMOUNT_NOFOLLOW = 0x8
CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID = 0, 1, 2, 3, 4
CAP_SETGID, CAP_SETUID = 6, 7
CAP_SYS_ADMIN = 21
FILE_CAPS = (CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID)
MAX_LIST = 10_000
_RDIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_RFILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

# ---------------------------------------------------------------------------- the worker


# Built once in the session server; a worker only makes the system call.
_FILE_CAP_SETS = cap_sets(FILE_CAPS)
_SERVER_CAP_SETS = cap_sets((*FILE_CAPS, CAP_SETGID, CAP_SETUID))  # its workers switch users
_MOUNT_CAP_SETS = cap_sets((*FILE_CAPS, CAP_SYS_ADMIN))


def _become(spec: str | None, rootless: bool) -> None:
    """Switch to the sandbox user ``spec`` (its uid, gid and groups; a user other than root
    has no capabilities left)."""
    uid, gid, groups, _home = resolve_user(spec)
    if uid == 0 and gid == 0:
        return
    if rootless:
        raise PermissionError(
            errno.EPERM, f"user {spec} (uid {uid}) does not exist in a rootless sandbox"
        )
    os.setgroups(groups)
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def file_op(
    req: dict[str, Any], fds: list[int], rootless: bool = False, *, prepared: bool = False
) -> NoReturn:
    """In a forked worker inside the sandbox root: one file operation. Never returns.

    Forked from the session server it first gives up what it inherited; forked from the file
    server (``prepared``) that was done once, when the server started."""
    gc.disable()  # a collection would touch (and copy) every page shared with the parent
    status_fd = fds[-1]
    try:
        if not prepared:
            close_other_fds(fds)
            os.umask(0o022)
        user = req.get("as_user")
        if user is not None:
            _become(user, rootless)
        op = req.get("op")
        if os.geteuid() == 0:  # (another user has no capabilities left to drop)
            keep_only_caps(_MOUNT_CAP_SETS if op in ("mount", "umount") else _FILE_CAP_SETS)
        result = _file_op(req, fds[:-1])
        report(status_fd, {"ok": True, "result": result})
        os._exit(0)
    except BaseException as exc:  # noqa: BLE001 - reported to the host
        try:
            err = getattr(exc, "errno", None)
            report(status_fd, {"error": f"{type(exc).__name__}: {exc}", "errno": err})
        finally:
            os._exit(1)


_FORKED_OPS = frozenset({"copy_in", "copy_out", "remove"})
"""Operations that may take long (a whole tree): a worker of their own, so that the file
server goes on answering."""


def file_server(sock_fd: int, rootless: bool) -> NoReturn:
    """The session's file server: a process inside the sandbox's root that holds no host
    descriptor but its socket, only the file capabilities, and answers the host's file
    operations one by one (the short ones itself, without a fork each; long ones and those
    made as another user in a worker forked from it). Never returns."""
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        close_other_fds([sock_fd])
        os.umask(0o022)
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped by the kernel
        keep_only_caps(_SERVER_CAP_SETS)
        sock = socket.socket(fileno=sock_fd)
    except BaseException:  # noqa: BLE001 - the host sees the socket close and falls back
        os._exit(1)
    while True:
        try:
            msg, fds = recv(sock)
        except OSError:
            os._exit(1)
        if msg is None:
            os._exit(0)
        if not fds:
            continue
        if msg.get("as_user") is not None or msg.get("op") in _FORKED_OPS:
            try:
                pid = os.fork()
            except OSError as exc:
                _answer_error(fds[-1], exc)
                pid = -1
            if pid == 0:
                file_op(msg, fds, rootless, prepared=True)
        else:
            try:
                result = _file_op(msg, fds[:-1])
            except BaseException as exc:  # noqa: BLE001 - reported to the host
                _answer_error(fds[-1], exc)
            else:
                with contextlib.suppress(OSError):
                    report(fds[-1], {"ok": True, "result": result})
            fds = fds[:-1]  # the status pipe is closed by the report
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def _answer_error(status_fd: int, exc: BaseException) -> None:
    with contextlib.suppress(OSError):
        err = getattr(exc, "errno", None)
        report(status_fd, {"error": f"{type(exc).__name__}: {exc}", "errno": err})


# ------------------------------------------------------------------------------- copying


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
    """Copy a tree between two folder descriptors, entry by entry: every entry is created by
    name in its folder, links are recreated (never followed), metadata is set through the
    new entry's descriptor. ``strip_suid`` drops setuid/setgid bits (copies to the host)."""

    def __init__(
        self,
        owner: tuple[int, int] | None = None,
        chmod: int | None = None,
        include: Collection[str] | None = None,
        preserve_owner: bool = False,
        strip_suid: bool = False,
        mtime: int | None = None,
    ) -> None:
        self.owner = owner
        self.chmod = chmod
        self.include = include
        self.preserve_owner = preserve_owner
        self.strip_suid = strip_suid
        self.mtime = mtime
        """Every copied entry's modification time (None: the time of the copy)."""

    def _wanted(self, rel: str, is_dir: bool) -> bool:
        if self.include is None:
            return True
        if rel in self.include:
            return True
        return is_dir and (rel + "/") in self.include

    def _owner_of(self, st: os.stat_result) -> tuple[int, int] | None:
        if self.owner is not None:
            return self.owner
        return (st.st_uid, st.st_gid) if self.preserve_owner else None

    def _meta(self, fd: int, st: os.stat_result) -> None:
        mode = self.chmod if self.chmod is not None else stat.S_IMODE(st.st_mode)
        if self.strip_suid:
            mode &= ~(stat.S_ISUID | stat.S_ISGID)
        set_meta(fd, owner=self._owner_of(st), mode=mode, mtime=self.mtime)

    def clear(self, name: str, dirfd: int, keep_dir: bool) -> os.stat_result | None:
        """Make room for ``name`` in ``dirfd``; a folder stays with ``keep_dir`` (returned)."""
        try:
            st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if stat.S_ISDIR(st.st_mode) and keep_dir:
            return st
        remove_entry(dirfd, name)
        return None

    def entry(self, src_dir: int, name: str, dst_dir: int, dst_name: str, rel: str) -> None:
        st = os.stat(name, dir_fd=src_dir, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            if not self._wanted(rel, True):
                return
            if self.clear(dst_name, dst_dir, keep_dir=True) is None:
                os.mkdir(dst_name, 0o700, dir_fd=dst_dir)
            sub_src = os.open(name, _RDIR, dir_fd=src_dir)
            try:
                sub_dst = os.open(dst_name, _RDIR, dir_fd=dst_dir)
                try:
                    self.tree(sub_src, sub_dst, rel)
                    self._meta(sub_dst, st)
                finally:
                    os.close(sub_dst)
            finally:
                os.close(sub_src)
            return
        if not self._wanted(rel, False):
            return
        self.clear(dst_name, dst_dir, keep_dir=False)
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(name, dir_fd=src_dir), dst_name, dir_fd=dst_dir)
            owner = self._owner_of(st)
            if owner is not None or self.mtime is not None:
                link_meta(dst_dir, dst_name, owner=owner, mtime=self.mtime)
        elif stat.S_ISREG(st.st_mode):
            s = os.open(name, _RFILE, dir_fd=src_dir)
            try:
                if not stat.S_ISREG(os.fstat(s).st_mode):
                    return  # replaced by something else since the listing: not copied
                d = os.open(dst_name, _NEW, 0o600, dir_fd=dst_dir)
                try:
                    _copy_file(s, d)
                    self._meta(d, st)
                finally:
                    os.close(d)
            finally:
                os.close(s)
        # sockets, fifos and devices are skipped, like a build context.

    def tree(self, src_dir: int, dst_dir: int, rel: str = "") -> None:
        for entry in sorted(os.scandir(src_dir), key=lambda e: e.name):
            sub_rel = entry.name if not rel else rel + "/" + entry.name
            self.entry(src_dir, entry.name, dst_dir, entry.name, sub_rel)


# ---------------------------------------------------------------------------- operations


def _owner(spec: str | None) -> tuple[int, int] | None:
    if spec is None:
        return None
    uid, gid, _groups, _home = resolve_user(spec)
    return uid, gid


_FILE_OPS = (
    "read",
    "write",
    "remove",
    "mkdir",
    "stat",
    "list",
    "copy_in",
    "copy_out",
    "mount",
    "umount",
)


def _root(req: dict[str, Any]) -> tuple[Root, str]:
    """The root lookups of ``req`` stay in, and the path to resolve in it: the sandbox's root,
    or (``beneath``) a folder of it that the path must not leave."""
    sandbox_root = Root(os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
    path: str = req["path"]
    beneath = req.get("beneath")
    if not beneath:
        return sandbox_root, path
    try:
        base = sandbox_root.dir(beneath)
    finally:
        sandbox_root.close()
    folder = "/" + "/".join(p for p in beneath.split("/") if p and p != ".")
    if folder == "/":
        rel = path
    elif path == folder:
        rel = ""
    elif path.startswith(folder.rstrip("/") + "/"):
        rel = path[len(folder) :]
    else:
        os.close(base)
        raise OSError(errno.EXDEV, f"{path} is not below {folder}")
    return Root(base, beneath=True), rel


def _file_op(req: dict[str, Any], fds: list[int]) -> dict[str, Any] | list[Any] | None:
    op = req["op"]
    if op not in _FILE_OPS:
        raise ValueError(f"unknown file operation {op!r}")
    root, path = _root(req)
    with root:
        return _FILE_FUNCS[op](root, path, req, fds)


def _read(root: Root, path: str, req: dict[str, Any], fds: list[int]) -> None:
    fd = root.open(path, _RFILE & ~os.O_NOFOLLOW)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        os.set_blocking(fd, True)
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            write_all(fds[0], chunk)
    finally:
        os.close(fd)


def _write(root: Root, path: str, req: dict[str, Any], fds: list[int]) -> None:
    mode = int(req.get("mode", 0o644))
    owner = _owner(req.get("owner"))
    if req.get("in_place"):
        # As a shell's ``>``: the file is truncated and written where it is (a last symlink
        # followed inside the root), keeping its owner and mode; new files get ``mode``.
        parts = [p for p in path.split("/") if p and p != "."]
        os.close(root.makedirs("/".join(parts[:-1])))
        fd = root.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK, mode)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file", path)
            os.set_blocking(fd, True)
            _pump(fds[0], fd)
        finally:
            os.close(fd)
        return
    pfd, name = root.parent(path, create=True)
    try:
        tmp = f".repogym-tmp-{os.getpid()}"
        fd = os.open(tmp, _NEW, 0o600, dir_fd=pfd)
        try:
            try:
                _pump(fds[0], fd)
                set_meta(fd, owner=owner, mode=mode)
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=pfd)
            raise
    finally:
        os.close(pfd)


def _pump(src: int, dst: int) -> None:
    while True:
        chunk = os.read(src, 1 << 20)
        if not chunk:
            return
        write_all(dst, chunk)


def _remove(root: Root, path: str, req: dict[str, Any], fds: list[int]) -> None:
    try:
        pfd, name = root.parent(path)
    except (FileNotFoundError, NotADirectoryError):
        return  # its folder is not there: neither is it
    try:
        remove_entry(pfd, name)
    finally:
        os.close(pfd)


def _mkdir(root: Root, path: str, req: dict[str, Any], fds: list[int]) -> None:
    os.close(root.makedirs(path))
    owner = _owner(req.get("owner"))
    if owner:
        fd = root.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            set_meta(fd, owner=owner)
        finally:
            os.close(fd)


def _stat(root: Root, path: str, req: dict[str, Any], fds: list[int]) -> dict[str, Any] | None:
    st = root.lstat(path) if req.get("nofollow") else root.stat(path)
    if st is None:
        return None
    return {
        "mode": st.st_mode,
        "size": st.st_size,
        "is_dir": stat.S_ISDIR(st.st_mode),
        "uid": st.st_uid,
        "gid": st.st_gid,
    }


_KINDS = {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink"}


def _list(root: Root, path: str, req: dict[str, Any], fds: list[int]) -> list[Any]:
    fd = root.open(path, os.O_RDONLY | os.O_DIRECTORY)
    out: list[Any] = []
    try:
        for entry in os.scandir(fd):
            if len(out) >= MAX_LIST:
                break
            try:
                st = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            kind = _KINDS.get(stat.S_IFMT(st.st_mode), "special")
            out.append([entry.name, kind, st.st_size if kind == "file" else 0])
    finally:
        os.close(fd)
    return sorted(out)


def _copy_in(root: Root, path: str, req: dict[str, Any], fds: list[int]) -> None:
    # fds[0]: source (file or folder) on the host, used only as the source of the copy.
    src = fds[0]
    copier = Copier(
        _owner(req.get("owner")), req.get("chmod"), req.get("include"), mtime=req.get("mtime")
    )
    src_st = os.fstat(src)
    parts = [p for p in path.split("/") if p and p != "."]
    if not parts:  # the root itself
        if not stat.S_ISDIR(src_st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "cannot replace / with a file", path)
        dst = root.open("/", _RDIR & ~os.O_NOFOLLOW)
        try:
            copier.tree(src, dst)
        finally:
            os.close(dst)
        return
    pfd, name = root.parent(path, create=True)
    try:
        if req.get("replace"):
            remove_entry(pfd, name)
        if stat.S_ISLNK(src_st.st_mode):  # an O_PATH descriptor of a link: recreated
            copier.clear(name, pfd, keep_dir=False)
            os.symlink(os.readlink("", dir_fd=src), name, dir_fd=pfd)
            if copier.owner is not None or copier.mtime is not None:
                link_meta(pfd, name, owner=copier.owner, mtime=copier.mtime)
        elif stat.S_ISDIR(src_st.st_mode):
            existing = copier.clear(name, pfd, keep_dir=True)
            if existing is None:
                os.mkdir(name, 0o755, dir_fd=pfd)
            dst = os.open(name, _RDIR, dir_fd=pfd)
            try:
                if existing is None:
                    set_meta(dst, owner=copier.owner, mode=0o755)
                copier.tree(src, dst)
                if copier.mtime is not None:
                    set_meta(dst, mtime=copier.mtime)
            finally:
                os.close(dst)
        elif stat.S_ISREG(src_st.st_mode):
            copier.clear(name, pfd, keep_dir=False)
            d = os.open(name, _NEW, 0o600, dir_fd=pfd)
            try:
                _copy_file(src, d)
                copier._meta(d, src_st)
            finally:
                os.close(d)
        else:
            raise OSError(errno.EINVAL, "not a file, folder or symlink", path)
    finally:
        os.close(pfd)


def _copy_out(root: Root, path: str, req: dict[str, Any], fds: list[int]) -> None:
    # ``path``: source in the sandbox; fds[0]: the host folder to create ``req['name']`` in.
    dst_dir = fds[0]
    copier = Copier(strip_suid=True)
    if not [p for p in path.split("/") if p and p != "."]:
        src_dir, name = root.dir("/"), "."
    else:
        src_dir, name = root.parent(path)
    try:
        copier.entry(src_dir, name, dst_dir, req["name"], "")
    finally:
        os.close(src_dir)


def _mount(root: Root, path: str, req: dict[str, Any], fds: list[int]) -> None:
    target = root.makedirs(path)
    try:
        flags = MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH
        check(libc.syscall(SYS_MOVE_MOUNT, fds[0], b"", target, b"", flags), "move_mount")
    finally:
        os.close(target)


def _umount(root: Root, path: str, req: dict[str, Any], fds: list[int]) -> None:
    target = root.open(path, os.O_PATH | os.O_DIRECTORY, follow=False)
    try:
        os.fchdir(target)
    finally:
        os.close(target)
    check(libc.umount2(b".", MNT_DETACH | UMOUNT_NOFOLLOW), "umount " + path)


_FILE_FUNCS = {
    "read": _read,
    "write": _write,
    "remove": _remove,
    "mkdir": _mkdir,
    "stat": _stat,
    "list": _list,
    "copy_in": _copy_in,
    "copy_out": _copy_out,
    "mount": _mount,
    "umount": _umount,
}

__all__ = ["Copier", "file_op", "file_server"]
