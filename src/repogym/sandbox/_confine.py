"""Lookups that cannot leave a root: the one resolver of every host-side file operation on a
sandbox's files (standard library only: the fork server loads it by file name).

A sandbox's files belong to whoever runs inside it. Any path that names one of them is resolved
here, relative to a descriptor of the sandbox's root (or of a folder the operation must stay
below), and never with an ordinary kernel lookup:

* **inside the root** (:attr:`Root.beneath` false): absolute symlinks restart at the root and
  ``..`` stops there, as in a chroot (``RESOLVE_IN_ROOT``);
* **beneath the root** (:attr:`Root.beneath` true): a lookup that would leave the folder, by
  ``..``, an absolute path or an absolute symlink, fails with ``EXDEV`` (``RESOLVE_BENEATH``);
* **no magic link** is ever followed: ``/proc/<pid>/fd/*``, ``cwd``, ``root``, ``exe``,
  ``map_files/*`` jump to whatever a process holds, the host included
  (``RESOLVE_NO_MAGICLINKS``);
* optionally **no symlink at all** (:attr:`Root.symlinks` false, ``RESOLVE_NO_SYMLINKS``).

On Linux ≥ 5.6 the kernel does it in one ``openat2`` call. Elsewhere (or with
``REPOGYM_CONFINE=walk``) the same rules are applied by a walk of ``O_PATH | O_NOFOLLOW``
descriptors, one component at a time: a symlink's *text* is read and resolved again inside
the root, so a magic link is never traversed, only its text taken as a path under the root.

Callers get descriptors, never checked paths: what was resolved is what is used, so a link
swapped in between cannot redirect anything (no check-then-use). Metadata is set through the
descriptor of the entry itself (:func:`set_meta`), never by path.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat

TYPE_CHECKING = False  # typing is not imported at run time (fork server start-up)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

RESOLVE_NO_XDEV = 0x01
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
RESOLVE_IN_ROOT = 0x10
SYS_OPENAT2 = 437  # the same number on every architecture (added in 5.6)
MAX_HOPS = 40
"""Symlinks followed in one lookup, as the kernel's ``MAXSYMLINKS``."""
_EAGAIN_TRIES = 16
_O_PATH = getattr(os, "O_PATH", 0o10000000)
_DIR_PATH = _O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
_ENTRY = _O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_RDIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_have_openat2: bool | None = None


def _openat2(dirfd: int, path: str, flags: int, mode: int, resolve: int) -> int:
    tmpfile = getattr(os, "O_TMPFILE", 0)  # includes O_DIRECTORY's bit: compare it whole
    creates = flags & os.O_CREAT or (tmpfile and flags & tmpfile == tmpfile)
    how = _OpenHow(flags, mode if creates else 0)
    how.resolve = resolve
    raw = os.fsencode(path)
    for _ in range(_EAGAIN_TRIES):
        fd = _libc.syscall(SYS_OPENAT2, dirfd, raw, ctypes.byref(how), ctypes.sizeof(how))
        if fd >= 0:
            return int(fd)
        err = ctypes.get_errno()
        if err != errno.EAGAIN:  # EAGAIN: a concurrent rename; the kernel asks to retry
            break
    raise OSError(err, os.strerror(err), path)


def kernel_resolver() -> bool:
    """Whether ``openat2`` is used (False: the descriptor walk)."""
    global _have_openat2
    if _have_openat2 is None:
        if os.environ.get("REPOGYM_CONFINE") == "walk":
            _have_openat2 = False
        else:
            try:
                os.close(_openat2(-100, "/", _DIR_PATH, 0, RESOLVE_NO_MAGICLINKS))
                _have_openat2 = True
            except OSError as exc:
                # ENOSYS: an older kernel; EPERM: a seccomp filter that does not know it.
                if exc.errno not in (errno.ENOSYS, errno.EPERM, errno.EINVAL):
                    raise
                _have_openat2 = False
    return _have_openat2


def split(path: str) -> list[str]:
    """The components of ``path`` (empty ones and ``.`` dropped; ``..`` kept)."""
    return [p for p in path.split("/") if p and p != "."]


class Root:
    """A folder that lookups cannot leave (see the module doc).

    ``fd`` is any descriptor of the folder (``O_PATH`` is enough); it is owned (closed by
    :meth:`close`) unless ``owned`` is false.
    """

    def __init__(
        self, fd: int, *, beneath: bool = False, symlinks: bool = True, owned: bool = True
    ) -> None:
        self.fd = fd
        self.beneath = beneath
        self.symlinks = symlinks
        self.owned = owned

    @classmethod
    def at(
        cls, path: str | os.PathLike[str], *, beneath: bool = False, symlinks: bool = True
    ) -> Root:
        """The host folder ``path`` as a root (the path itself is the caller's, trusted)."""
        return cls(os.open(path, _DIR_PATH), beneath=beneath, symlinks=symlinks)

    def close(self) -> None:
        if self.owned and self.fd >= 0:
            os.close(self.fd)
        self.fd = -1

    def __enter__(self) -> Root:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- lookups ------------------------------------------------------------------------

    def _resolve_flags(self) -> int:
        flags = RESOLVE_NO_MAGICLINKS
        flags |= RESOLVE_BENEATH if self.beneath else RESOLVE_IN_ROOT
        if not self.symlinks:
            flags |= RESOLVE_NO_SYMLINKS
        return flags

    def open(
        self, path: str, flags: int = os.O_RDONLY, mode: int = 0o600, *, follow: bool = True
    ) -> int:
        """A descriptor of ``path`` opened with ``flags`` (a last symlink is followed, inside
        the root, unless ``follow`` is false: then it is refused, or with ``O_PATH`` opened
        as the link itself)."""
        flags |= os.O_CLOEXEC
        if not follow:
            flags |= os.O_NOFOLLOW
        rel = "/".join(split(path)) or "."
        try:
            if kernel_resolver():
                return _openat2(self.fd, rel, flags, mode, self._resolve_flags())
            return self._walk(rel, flags, mode)
        except OSError as exc:
            if exc.filename == path or exc.errno is None:
                raise
            raise OSError(exc.errno, exc.strerror, path) from None

    def dir(self, path: str) -> int:
        """An ``O_PATH`` descriptor of the folder ``path`` (symlinks followed inside)."""
        return self.open(path, _DIR_PATH)

    def names(self, path: str) -> list[str]:
        """The names in the folder ``path`` (symlinks followed inside), sorted."""
        fd = self.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            return sorted(os.listdir(fd))
        finally:
            os.close(fd)

    def lstat(self, path: str) -> os.stat_result | None:
        """``lstat`` of ``path`` (the last component not followed); None when absent."""
        return self._stat(path, follow=False)

    def stat(self, path: str) -> os.stat_result | None:
        """``stat`` of ``path`` (symlinks followed inside); None when absent."""
        return self._stat(path, follow=True)

    def _stat(self, path: str, *, follow: bool) -> os.stat_result | None:
        try:
            fd = self.open(path, _O_PATH, follow=follow)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            return os.fstat(fd)
        finally:
            os.close(fd)

    def parent(self, path: str, *, create: bool = False) -> tuple[int, str]:
        """``(folder fd, name)`` of the entry ``path`` names: the folder resolved inside the
        root (created with ``create``), the name its last component, never followed here.
        Raises ``IsADirectoryError`` for the root itself, ``ValueError`` for ``..``."""
        parts = split(path)
        if not parts:
            raise IsADirectoryError(errno.EISDIR, "the root has no parent folder", path or "/")
        name = parts[-1]
        if name == "..":
            raise ValueError(f"{path!r} ends in '..'")
        folder = "/".join(parts[:-1])
        fd = self.makedirs(folder) if create else self.dir(folder)
        return fd, name

    def makedirs(self, path: str, mode: int = 0o755, owner: tuple[int, int] | None = None) -> int:
        """``mkdir -p`` inside the root (symlinks on the way followed inside it, a missing
        target created); an ``O_PATH`` descriptor of the folder. Created folders get
        ``mode`` (and ``owner``); existing ones are left as they are."""
        try:
            return self.dir(path)
        except FileNotFoundError:
            pass
        todo = split(path)
        done: list[str] = []  # the folders reached so far, none of them a link
        hops = 0
        while todo:
            name = todo.pop(0)
            if name == "..":
                if done:
                    done.pop()
                elif self.beneath:
                    raise OSError(errno.EXDEV, "path leaves its folder", path)
                continue
            pfd = self.dir("/".join(done))
            try:
                try:
                    st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
                except FileNotFoundError:
                    try:
                        os.mkdir(name, mode, dir_fd=pfd)
                    except FileExistsError:
                        todo.insert(0, name)  # made meanwhile: look again
                        continue
                    fd = os.open(name, _RDIR, dir_fd=pfd)
                    try:
                        set_meta(fd, owner=owner, mode=mode)
                    finally:
                        os.close(fd)
                    done.append(name)
                    continue
                if stat.S_ISLNK(st.st_mode):
                    if not self.symlinks:
                        raise OSError(errno.ELOOP, "symbolic link not followed", path)
                    hops += 1
                    if hops > MAX_HOPS:
                        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
                    target = os.readlink(name, dir_fd=pfd)
                    if _magic(pfd, target):
                        raise OSError(errno.ELOOP, "magic link not followed", path)
                    if target.startswith("/"):
                        if self.beneath:
                            raise OSError(errno.EXDEV, "path leaves its folder", path)
                        done = []
                    todo[:0] = split(target)
                    continue
                if not stat.S_ISDIR(st.st_mode):
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
                done.append(name)
            finally:
                os.close(pfd)
        return self.dir("/".join(done))

    # -- the descriptor walk ------------------------------------------------------------

    def _walk(self, rel: str, flags: int, mode: int) -> int:
        """``openat2``'s rules by hand (see the module doc)."""
        follow_last = not flags & os.O_NOFOLLOW
        stack = [os.dup(self.fd)]
        todo = split(rel)
        hops = 0
        try:
            while True:
                if not todo:  # the folder on top of the stack is what was asked for
                    return os.open(
                        ".", flags & ~os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=stack[-1]
                    )
                name = todo.pop(0)
                if name == "..":
                    if len(stack) > 1:
                        os.close(stack.pop())
                    elif self.beneath:
                        raise OSError(errno.EXDEV, "path leaves its folder", rel)
                    continue
                last = not todo
                try:
                    fd = os.open(name, _ENTRY, dir_fd=stack[-1])
                except FileNotFoundError:
                    if last and flags & os.O_CREAT:
                        return os.open(name, flags | os.O_NOFOLLOW, mode, dir_fd=stack[-1])
                    raise
                try:
                    st = os.fstat(fd)
                    if stat.S_ISLNK(st.st_mode) and (not last or follow_last):
                        if not self.symlinks:
                            raise OSError(errno.ELOOP, "symbolic link not followed", rel)
                        hops += 1
                        if hops > MAX_HOPS:
                            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), rel)
                        target = os.readlink("", dir_fd=fd)
                        if _magic(stack[-1], target):
                            raise OSError(errno.ELOOP, "magic link not followed", rel)
                        if target.startswith("/"):
                            if self.beneath:
                                raise OSError(errno.EXDEV, "path leaves its folder", rel)
                            while len(stack) > 1:
                                os.close(stack.pop())
                        todo[:0] = split(target)
                        continue
                    if last:
                        if stat.S_ISLNK(st.st_mode) and not self.symlinks and not flags & _O_PATH:
                            raise OSError(errno.ELOOP, "symbolic link not followed", rel)
                        # Opened by name once more, never following: a link swapped in since
                        # the check above makes this fail rather than lead anywhere.
                        return os.open(name, flags | os.O_NOFOLLOW, mode, dir_fd=stack[-1])
                    if not stat.S_ISDIR(st.st_mode):
                        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), rel)
                    stack.append(fd)
                    fd = -1
                finally:
                    if fd >= 0:
                        os.close(fd)
        finally:
            for fd in stack:
                os.close(fd)


PROC_SUPER_MAGIC = 0x9FA0


def _magic(dirfd: int, target: str) -> bool:
    """Whether a link with text ``target`` in the folder ``dirfd`` is one of procfs's magic
    links (``fd/*``, ``cwd``, ``root``, ``exe``, ``map_files/*``, ``ns/*``): their text is a
    path of whatever the process holds, or ``pipe:[…]`` and the like; procfs's ordinary links
    (``self``, ``thread-self``, ``mounts``, ``net``) are relative and plain."""
    if not target.startswith("/") and ":" not in target:
        return False
    buf = ctypes.create_string_buffer(256)  # struct statfs; f_type is its first word
    if _libc.fstatfs(dirfd, buf) != 0:
        return True  # cannot tell: refuse, as the kernel's rule would
    return ctypes.c_long.from_buffer(buf).value == PROC_SUPER_MAGIC


# -- operations on (folder fd, name) entries: nothing is ever followed ------------------------


def remove_entry(dirfd: int, name: str) -> None:
    """Remove the entry ``name`` of the folder ``dirfd`` (a folder with everything below it);
    no error when absent. Links are removed, never followed."""
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        sub = os.open(
            name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirfd
        )
        try:
            clear_folder(sub)
        finally:
            os.close(sub)
        os.rmdir(name, dir_fd=dirfd)
    else:
        os.unlink(name, dir_fd=dirfd)


def clear_folder(dirfd: int) -> None:
    """Remove everything inside the folder ``dirfd`` (an ``O_RDONLY`` descriptor)."""
    for entry in list(os.scandir(dirfd)):
        remove_entry(dirfd, entry.name)


def open_entry(dirfd: int, name: str, *, directory: bool | None = None) -> int:
    """An ``O_RDONLY`` descriptor of the regular file or folder ``name`` (never a link:
    ``ELOOP``; special files are opened ``O_PATH``, enough for metadata)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
    if directory:
        flags |= os.O_DIRECTORY
    return os.open(name, flags, dir_fd=dirfd)


def set_meta(
    fd: int,
    *,
    owner: tuple[int, int] | None = None,
    mode: int | None = None,
    mtime: float | None = None,
) -> None:
    """Owner, then mode, then times of the open entry ``fd`` (in that order: a change of
    owner clears setuid bits)."""
    if owner is not None:
        os.fchown(fd, owner[0], owner[1])
    if mode is not None:
        os.fchmod(fd, mode)
    if mtime is not None:
        os.utime(fd, (mtime, mtime))


def link_meta(
    dirfd: int, name: str, *, owner: tuple[int, int] | None = None, mtime: float | None = None
) -> None:
    """Owner and times of the symlink ``name`` itself (``AT_SYMLINK_NOFOLLOW``)."""
    if owner is not None:
        os.chown(name, owner[0], owner[1], dir_fd=dirfd, follow_symlinks=False)
    if mtime is not None:
        os.utime(name, (mtime, mtime), dir_fd=dirfd, follow_symlinks=False)


def copy_exact(
    read: Callable[[int], bytes],
    fd: int,
    size: int,
    on_chunk: Callable[[bytes], object] | None = None,
) -> bool:
    """Write exactly ``size`` bytes from ``read`` to ``fd`` (``on_chunk`` sees each piece);
    False when the source ends before."""
    left = size
    while left > 0:
        chunk = read(min(1 << 20, left))
        if not chunk:
            return False
        if on_chunk is not None:
            on_chunk(chunk)
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view) :]
        left -= len(chunk)
    return True


def same_entry(fd: int, ident: tuple[int, int]) -> bool:
    """Whether the open ``fd`` is the file ``(st_dev, st_ino)``."""
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino) == ident


def walk_fd(dirfd: int, rel: str = "") -> Iterator[tuple[int, str, os.stat_result]]:
    """Every entry below the folder ``dirfd`` as ``(folder fd, relative path, lstat)``,
    folders before their content, never following a link. The folder fd is valid only until
    the next item."""
    for entry in sorted(os.scandir(dirfd), key=lambda e: e.name):
        path = f"{rel}/{entry.name}" if rel else entry.name
        st = os.stat(entry.name, dir_fd=dirfd, follow_symlinks=False)
        yield dirfd, path, st
        if stat.S_ISDIR(st.st_mode):
            try:
                sub = os.open(
                    entry.name,
                    os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                    dir_fd=dirfd,
                )
            except OSError:
                continue  # removed or replaced meanwhile: nothing below it to visit
            try:
                yield from walk_fd(sub, path)
            finally:
                os.close(sub)
