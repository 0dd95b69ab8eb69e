"""Defences against hostile datasets and registries, shared by push and pull.

A dataset or a registry may come from anyone, so nothing here follows a symlink:

* :func:`check_tree` — a task holds only folders, regular files and symlinks that stay inside
  it (relative, resolving inside the task, never a loop); no FIFO, socket or device; at most
  :data:`MAX_DEPTH` folders deep.
* :func:`copy_tree` — copy a folder through descriptors opened with ``O_NOFOLLOW`` at every
  level: a symlink is copied as a symlink (its text), never as what it names; a special file is
  refused; setuid/setgid/sticky bits are dropped.
* :func:`safe_relpath` — whether a registry-supplied path stays inside the folder it is joined to.
* :class:`PullStage` — a pull is staged in a temporary folder beside its destination and renamed
  into place; on any error nothing is left behind and an existing destination is untouched.

Every refusal is a :class:`RegistryError` with a one-line message (names from a registry are
shown with ``repr``, so a hostile name cannot span lines).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections import defaultdict
from pathlib import Path, PureWindowsPath
from types import TracebackType

from repogym.atomic import staging_dir


class RegistryError(ValueError):
    """A push or pull cannot be done; the message is one line a user can act on."""


MAX_DEPTH = 128
"""Deepest folder nesting a task may have (real repositories stay far below)."""
MAX_LINK_HOPS = 40
"""Symlinks followed while resolving one path before it counts as a loop (Linux's limit)."""

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_CHUNK = 1 << 20

Parts = tuple[str, ...]


def _rel(parts: Parts) -> str:
    return repr("/".join(parts) or ".")


def special_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device node"
    return "a special file"


def _special(label: str, parts: Parts, mode: int) -> RegistryError:
    return RegistryError(
        f"{label}: {_rel(parts)} is {special_kind(mode)}; "
        "a dataset holds only folders, regular files and symlinks"
    )


def _too_deep(label: str, parts: Parts) -> RegistryError:
    return RegistryError(f"{label}: {_rel(parts)} is nested deeper than {MAX_DEPTH} folders")


# --------------------------------------------------------------------------------- checking


def check_tree(task_dir: Path, label: str) -> None:
    """Refuse special files, too deep nesting, and symlinks leaving ``task_dir`` or looping."""
    links: list[Parts] = []
    stack: list[Parts] = [()]
    while stack:
        parts = stack.pop()
        if len(parts) > MAX_DEPTH:
            raise _too_deep(label, parts)
        try:
            with os.scandir(os.path.join(task_dir, *parts)) as it:
                entries = [(e.name, e.stat(follow_symlinks=False).st_mode) for e in it]
        except OSError as exc:
            raise RegistryError(f"{label}: cannot read {_rel(parts)} ({exc.strerror})") from None
        for name, mode in entries:
            child = (*parts, name)
            if stat.S_ISLNK(mode):
                links.append(child)
            elif stat.S_ISDIR(mode):
                stack.append(child)
            elif not stat.S_ISREG(mode):
                raise _special(label, child, mode)
    check_links(task_dir, links, label)


def check_links(root: Path, links: list[Parts], label: str) -> None:
    """Every symlink in ``links`` (paths relative to ``root``) resolves inside ``root``, and
    following symlinks to folders can never come back to where it started."""
    dir_targets: dict[Parts, Parts] = {}
    for link in sorted(links):
        target = _resolve(root, link, label)
        try:
            is_dir = stat.S_ISDIR(os.lstat(os.path.join(root, *target)).st_mode)
        except OSError:
            is_dir = False  # dangling, but inside the task: harmless
        if is_dir:
            dir_targets[link] = target
    # Following link L leads into folder T; from there every folder-link below T is reachable.
    below: dict[Parts, list[Parts]] = defaultdict(list)
    for link in dir_targets:
        for i in range(len(link)):
            below[link[:i]].append(link)
    state: dict[Parts, int] = {}  # 1: on the current path, 2: done
    for start in sorted(dir_targets):
        if start in state:
            continue
        state[start] = 1
        path = [(start, iter(below.get(dir_targets[start], ())))]
        while path:
            node, successors = path[-1]
            nxt = next(successors, None)
            if nxt is None:
                state[node] = 2
                path.pop()
            elif state.get(nxt) == 1:
                raise RegistryError(
                    f"{label}: {_rel(nxt)} is a symlink loop (following it comes back to it)"
                )
            elif nxt not in state:
                state[nxt] = 1
                path.append((nxt, iter(below.get(dir_targets[nxt], ()))))


def _resolve(root: Path, link: Parts, label: str) -> Parts:
    """Where the symlink ``link`` leads, as parts relative to ``root`` (every part a real
    folder or file, or — past the first missing one — taken lexically)."""

    def read(parts: Parts) -> str:
        try:
            text = os.readlink(os.path.join(root, *parts))
        except OSError as exc:
            raise RegistryError(
                f"{label}: cannot read symlink {_rel(parts)} ({exc.strerror})"
            ) from None
        if text.startswith("/"):
            raise RegistryError(
                f"{label}: {_rel(link)} is a symlink leaving the task (absolute target {text!r})"
            )
        return text

    current = list(link[:-1])
    pending = read(link).split("/")[::-1]
    hops = 1
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not current:
                raise RegistryError(
                    f"{label}: {_rel(link)} is a symlink leaving the task "
                    f"(target {os.readlink(os.path.join(root, *link))!r})"
                )
            current.pop()
            continue
        current.append(part)
        try:
            mode = os.lstat(os.path.join(root, *current)).st_mode
        except OSError:
            continue  # nothing there: the rest of the path is taken lexically
        if stat.S_ISLNK(mode):
            hops += 1
            if hops > MAX_LINK_HOPS:
                raise RegistryError(f"{label}: {_rel(link)} is a symlink loop")
            text = read(tuple(current))
            current.pop()
            pending.extend(text.split("/")[::-1])
    return tuple(current)


def safe_relpath(path: str) -> bool:
    """A relative POSIX path with no empty, ``.`` or ``..`` part, no backslash, NUL or drive:
    joined to a folder, it names something inside that folder on any system."""
    if not path or path.startswith("/") or "\\" in path or "\0" in path:
        return False
    for part in path.split("/"):
        if part in ("", ".", ".."):
            return False
        windows = PureWindowsPath(part)
        if windows.drive or windows.root:
            return False
    return True


# ---------------------------------------------------------------------------------- copying


def copy_tree(src: str | Path, dst: Path, label: str, *, dir_fd: int | None = None) -> None:
    """Copy the folder ``src`` (relative to ``dir_fd`` when given) to the new folder ``dst``
    without following any symlink: ``src`` itself must be a real folder, symlinks inside are
    recreated with the same text (check them with :func:`check_tree`), special files refused."""
    try:
        fd = os.open(src, DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise _open_error(label, exc) from None
    try:
        _copy_dir(fd, dst, label, ())
    finally:
        os.close(fd)


def _open_error(label: str, exc: OSError, what: str = "") -> RegistryError:
    where = f"{label}{': ' + what if what else ''}"
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # a symlink or a file where a folder must be
        return RegistryError(f"{where}: is a symlink or not a folder; refused")
    return RegistryError(f"{where}: cannot read ({exc.strerror})")


def _copy_dir(fd: int, dst: Path, label: str, parts: Parts) -> None:
    if len(parts) > MAX_DEPTH:
        raise _too_deep(label, parts)
    mode = os.fstat(fd).st_mode
    os.mkdir(dst, 0o700)
    try:
        with os.scandir(fd) as it:
            names = sorted(e.name for e in it)
    except OSError as exc:
        raise RegistryError(f"{label}: cannot read {_rel(parts)} ({exc.strerror})") from None
    for name in names:
        child = (*parts, name)
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                sub = os.open(name, DIR_FLAGS, dir_fd=fd)
                try:
                    _copy_dir(sub, dst / name, label, child)
                finally:
                    os.close(sub)
            elif stat.S_ISREG(st.st_mode):
                _copy_file(fd, name, dst / name, label, child)
            elif stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(name, dir_fd=fd), dst / name)
            else:
                raise _special(label, child, st.st_mode)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # it changed under us
                raise RegistryError(f"{label}: {_rel(child)} changed while copying") from None
            raise RegistryError(f"{label}: cannot copy {_rel(child)} ({exc.strerror})") from None
    os.chmod(dst, (mode & 0o777) | 0o700)


def _copy_file(dir_fd: int, name: str, dst: Path, label: str, parts: Parts) -> None:
    src = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    try:
        st = os.fstat(src)
        if not stat.S_ISREG(st.st_mode):
            raise _special(label, parts, st.st_mode)
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            while chunk := os.read(src, _CHUNK):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view) :]
            os.fchmod(out, st.st_mode & 0o777)
            os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(out)
    finally:
        os.close(src)


def copy_regular_file(dir_fd: int, name: str, dst: Path, label: str) -> bool:
    """Copy the regular file ``name`` (relative to ``dir_fd``, not followed) to ``dst``;
    False when there is none; a symlink or special file there is refused."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise RegistryError(f"{label}: cannot read {name!r} ({exc.strerror})") from None
    if stat.S_ISLNK(st.st_mode):
        raise RegistryError(f"{label}: {name!r} is a symlink; refused")
    try:
        _copy_file(dir_fd, name, dst, label, (name,))
    except OSError as exc:
        raise RegistryError(f"{label}: cannot copy {name!r} ({exc.strerror})") from None
    return True


# --------------------------------------------------------------------------------- staging


class PullStage:
    """A temporary folder beside ``dest``: fill :attr:`out` (``tasks/<id>/``, meta files), use
    :attr:`work` for scratch, then :meth:`commit`. Leaving the ``with`` block removes the
    temporary folder, and on an error also the parents of ``dest`` it had to create."""

    def __init__(self, dest: Path) -> None:
        self.dest = dest
        self._created: list[Path] = []
        self.tmp = self.out = self.work = Path()

    def __enter__(self) -> PullStage:
        dest = self.dest
        if os.path.lexists(dest) and not dest.is_dir():
            raise RegistryError(f"{dest}: exists and is not a folder")
        parent = dest.absolute().parent
        missing = []
        while not parent.exists():
            missing.append(parent)
            parent = parent.parent
        for folder in reversed(missing):
            try:
                folder.mkdir()
            except OSError as exc:
                self._remove_created()
                raise RegistryError(f"cannot create {folder} ({exc.strerror})") from None
            self._created.insert(0, folder)
        where = dest.absolute().parent
        if dest.is_dir() and os.stat(dest).st_dev != os.stat(where).st_dev:
            where = dest  # a mount point: a rename from beside it would cross file systems
        try:
            self.tmp = staging_dir(where, "pull", dest.name)
        except OSError as exc:
            self._remove_created()
            raise RegistryError(f"cannot write beside {dest} ({exc.strerror})") from None
        self.out, self.work = self.tmp / "out", self.tmp / "work"
        (self.out / "tasks").mkdir(parents=True)
        self.work.mkdir()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)
        if kind is not None:
            self._remove_created()

    def _remove_created(self) -> None:
        for folder in self._created:
            with contextlib.suppress(OSError):
                folder.rmdir()

    def commit(self, tasks: list[str], metas: list[str]) -> None:
        """Move the staged tasks and meta files into ``dest``: one rename when ``dest`` does not
        exist; else task by task, undoing every move if one fails (meta files already in
        ``dest`` are replaced, and put back on failure)."""
        dest = self.dest
        if not os.path.lexists(dest):
            try:
                os.rename(self.out, dest)
            except OSError as exc:
                raise RegistryError(f"cannot write {dest} ({exc.strerror})") from None
            return
        done: list[tuple[Path, Path]] = []
        made_tasks = False
        try:
            if not (dest / "tasks").exists():
                (dest / "tasks").mkdir()
                made_tasks = True
            for task in tasks:
                target = dest / "tasks" / task
                if os.path.lexists(target):
                    raise RegistryError(f"{dest}: tasks already present, e.g. {task}")
                os.rename(self.out / "tasks" / task, target)
                done.append((self.out / "tasks" / task, target))
            for meta in metas:
                target = dest / meta
                if os.path.lexists(target):
                    os.rename(target, self.tmp / f"previous-{meta}")
                    done.append((target, self.tmp / f"previous-{meta}"))
                os.rename(self.out / meta, target)
                done.append((self.out / meta, target))
        except BaseException as exc:
            for before, after in reversed(done):
                with contextlib.suppress(OSError):
                    os.rename(after, before)
            if made_tasks:
                with contextlib.suppress(OSError):
                    (dest / "tasks").rmdir()
            if isinstance(exc, OSError):
                raise RegistryError(f"cannot write {dest} ({exc.strerror})") from None
            raise
