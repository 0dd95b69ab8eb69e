"""Reading what a local session changed: its overlayfs upper layer, seen from the host.

Every write inside a local sandbox lands in the session's upper directory (a tmpfs mounted in
the session server's private mount namespace, reachable from the host through
``/proc/<bwrap pid>/root``). That directory *is* the session's diff against the built layers:

* a regular file, symlink or folder there is new or changed (folders also appear as parents of
  changed entries);
* a character device 0/0 (or, on newer kernels, a file with an ``overlay.whiteout`` xattr) is a
  *whiteout*: the path was deleted;
* a folder with the ``overlay.opaque`` xattr was deleted and created again: nothing of the lower
  layers shows through it any more;
* ``overlay.redirect`` (a renamed folder) and ``overlay.metacopy`` (metadata-only copy-up) keep
  the content in the lower layers: those entries are read through the merged view instead.

The reader never follows a symlink (every step is ``openat`` with ``O_NOFOLLOW``) and never runs
anything inside the sandbox; the caller kills every sandbox process first, so nothing changes
while it reads. Xattrs are ``trusted.overlay.*`` as root and ``user.overlay.*`` without root
(``userxattr``).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from repogym.sandbox.base import Change, SandboxError

MAX_CHANGES = 200_000
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_XATTR_PREFIXES = ("trusted.overlay.", "user.overlay.")


def _xattr(fd: int, name: str) -> bytes | None:
    for prefix in _XATTR_PREFIXES:
        try:
            return os.getxattr(fd, prefix + name)
        except OSError as exc:
            if exc.errno not in (errno.ENODATA, errno.ENOTSUP, errno.EPERM, errno.EACCES):
                raise
    return None


def _is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


class _Reader:
    def __init__(self, merged_root: Path, root_rel: str, dest: Path) -> None:
        self.merged_root = merged_root
        self.root_rel = root_rel
        self.dest = dest
        self.changes: list[Change] = []

    def add(self, change: Change) -> None:
        if len(self.changes) >= MAX_CHANGES:
            raise SandboxError(
                f"more than {MAX_CHANGES} paths changed under the working directory: "
                "too many to carry over"
            )
        self.changes.append(change)

    # -- staging

    def _stage_dir(self, rel: str) -> None:
        (self.dest / rel).mkdir(parents=True, exist_ok=True)

    def _stage_file(self, src_fd: int, rel: str, st: os.stat_result) -> None:
        target = self.dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        mode = stat.S_IMODE(st.st_mode) & 0o777
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            while True:
                chunk = os.read(src_fd, 1 << 20)
                if not chunk:
                    break
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view) :]
            os.fchmod(out, mode)
        finally:
            os.close(out)
        self.add(Change(rel, "file", mode=mode, size=st.st_size))

    def _stage_link(self, target_text: str, rel: str) -> None:
        target = self.dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target_text, target)
        self.add(Change(rel, "symlink", mode=0o777, target=target_text))

    # -- walking

    def _merged_fd(self, rel: str) -> int:
        """An fd of ``rel`` (under the root) in the session's merged view, no symlink followed."""
        fd = os.open(self.merged_root, _O_DIR)
        try:
            for part in [p for p in f"{self.root_rel}/{rel}".split("/") if p and p != "."]:
                nxt = os.open(part, _O_DIR, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _merged_file(self, rel: str) -> int:
        parent, _, name = rel.rpartition("/")
        pfd = self._merged_fd(parent)
        try:
            return os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=pfd)
        finally:
            os.close(pfd)

    def entry(self, dirfd: int, name: str, rel: str, *, merged: bool) -> None:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
        if _is_whiteout(st):
            self.add(Change(rel, "deleted"))
            return
        if stat.S_ISDIR(st.st_mode):
            fd = os.open(name, _O_DIR, dir_fd=dirfd)
            try:
                if not merged and _xattr(fd, "redirect") is not None:
                    # A renamed folder: its content still lives in the lower layers.
                    self.add(Change(rel, "deleted"))
                    self.add(Change(rel, "dir", mode=0o755))
                    self._stage_dir(rel)
                    mfd = self._merged_fd(rel)
                    try:
                        self.tree(mfd, rel, merged=True)
                    finally:
                        os.close(mfd)
                    return
                if not merged and _xattr(fd, "opaque") == b"y":
                    self.add(Change(rel, "deleted"))
                self.add(Change(rel, "dir", mode=0o755))
                self._stage_dir(rel)
                self.tree(fd, rel, merged=merged)
            finally:
                os.close(fd)
            return
        if stat.S_ISLNK(st.st_mode):
            self._stage_link(os.readlink(name, dir_fd=dirfd), rel)
            return
        if not stat.S_ISREG(st.st_mode):
            self.add(Change(rel, "special", mode=stat.S_IMODE(st.st_mode)))
            return
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dirfd)
        try:
            if not merged and _xattr(fd, "whiteout") is not None:
                self.add(Change(rel, "deleted"))
                return
            if not merged and _xattr(fd, "metacopy") is not None:
                # Metadata-only copy-up: the data is in a lower layer.
                data = self._merged_file(rel)
                try:
                    self._stage_file(data, rel, os.fstat(data))
                finally:
                    os.close(data)
                return
            self._stage_file(fd, rel, st)
        finally:
            os.close(fd)

    def tree(self, dirfd: int, rel: str, *, merged: bool) -> None:
        names = sorted(os.listdir(dirfd))
        for name in names:
            self.entry(dirfd, name, f"{rel}/{name}" if rel != "." else name, merged=merged)


def read_upper(upper_part: Path, merged_root: Path, root_rel: str, dest: Path) -> list[Change]:
    """Changes under ``root_rel`` (a path inside one overlay part, e.g. ``workspace`` in the
    ``@root`` part) from that part's upper directory; new content is staged under ``dest``.

    ``merged_root`` is the session's whole root as mounted (for content kept in lower layers).
    """
    dest.mkdir(parents=True, exist_ok=True)
    reader = _Reader(merged_root, root_rel, dest)
    try:
        fd = os.open(upper_part, _O_DIR)
    except FileNotFoundError:
        return []
    try:
        replaced = redirected = False
        for part in [p for p in root_rel.split("/") if p]:
            try:
                st = os.stat(part, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                return []  # nothing was written on the way to the root
            if not stat.S_ISDIR(st.st_mode):
                # The root (or a folder above it) was deleted or replaced by a file/symlink:
                # nothing of the environment's tree is left there.
                return [Change(".", "deleted")]
            nxt = os.open(part, _O_DIR, dir_fd=fd)
            os.close(fd)
            fd = nxt
            replaced = replaced or _xattr(fd, "opaque") == b"y"
            redirected = redirected or _xattr(fd, "redirect") is not None
        if redirected:
            # A folder on the way was renamed: read the whole root through the merged view.
            reader.add(Change(".", "deleted"))
            mfd = reader._merged_fd(".")
            try:
                reader.tree(mfd, ".", merged=True)
            finally:
                os.close(mfd)
            return reader.changes
        if replaced:
            reader.add(Change(".", "deleted"))
        reader.tree(fd, ".", merged=False)
    finally:
        os.close(fd)
    return reader.changes
