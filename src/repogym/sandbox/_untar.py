"""Unpacking untrusted tar streams where nothing can reach the host (standard library only).

Archives come from strangers: image layers from a registry, ``ADD`` archives of a build
context, build layers from a shared cache, a container's files from an engine. Each is unpacked
behind two walls:

1. **Every lookup is confined** (:mod:`._confine`): paths resolve inside the destination (an
   absolute symlink restarts at it, ``..`` stops there), magic links are never followed, and
   every entry is created by name in a folder descriptor, its owner, mode and times set through
   the descriptor of the entry just created. A folder's mode is applied at the end only if the
   path still names the folder that was created (same inode), through a fresh ``O_NOFOLLOW``
   descriptor.
2. **The unpacker runs where a bug could not reach the host anyway**: :func:`run` starts this
   file as its own interpreter (``python -I -S``), which closes every descriptor but its input,
   enters a new mount namespace (and a user namespace without root), ``chroot``\\ s into the
   destination, drops every capability it does not need (never ``CAP_SYS_CHROOT``), sets
   ``no_new_privs``, and only then reads the archive. Its only writable host path is the
   destination.

Kinds of archives (``kind``):

* ``oci`` — an OCI/Docker image layer applied onto a root: ``.wh.<name>`` deletes ``<name>`` of
  the layers below, ``.wh..wh..opq`` empties a folder of what the layers below put there (both
  apply only to lower layers, never to entries of the same layer); devices and FIFOs are
  skipped; setuid/setgid bits of files are dropped; sizes and member counts are bounded.
* ``plain`` — an archive unpacked into an empty folder (``ADD``): member names with ``..`` or
  absolute ones are refused, links leading out are refused, devices and FIFOs refused,
  setuid/setgid bits dropped.
* ``copy`` — a copy of files (a container's, from the engine) into an empty folder: as
  ``plain``, but symlinks are kept as written (they are data, never followed here) and devices
  and FIFOs are skipped (listed in ``skipped``).
* ``layer`` — a build layer of the shared cache, see :mod:`._layertar`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import posixpath
import stat
import sys
import tarfile

if __name__ == "__main__":  # run as the confined unpacker: the siblings by file name
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))

TYPE_CHECKING = False  # typing is not imported at run time (interpreter start-up)
if TYPE_CHECKING:
    from typing import IO, Any
if TYPE_CHECKING or __name__ != "__main__":
    from repogym.sandbox._confine import (
        Root,
        copy_exact,
        link_meta,
        open_entry,
        remove_entry,
        same_entry,
        set_meta,
    )
else:
    from _confine import (
        Root,
        copy_exact,
        link_meta,
        open_entry,
        remove_entry,
        same_entry,
        set_meta,
    )

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
MAX_MEMBERS = 500_000
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_SUID = stat.S_ISUID | stat.S_ISGID


class UnpackError(ValueError):
    """An archive that cannot be unpacked safely (the message names the member)."""


def oneline(text: str) -> str:
    """``text`` on one line (names from a stranger's files may hold newlines)."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


class Budget:
    """What the archives of one job may write in total (bytes of files, member count)."""

    def __init__(
        self,
        max_bytes: int,
        max_members: int = MAX_MEMBERS,
        *,
        too_many: str = "",
        too_big: str = "",
    ) -> None:
        self.max_bytes = max_bytes
        self.max_members = max_members
        self.bytes = 0
        self.members = 0
        self.skipped: list[str] = []
        self.too_many = too_many or f"more than {max_members} files"
        """The refusal when there are more members than allowed."""
        self.too_big = too_big or f"larger than the limit ({max_bytes >> 20} MiB)"
        """The refusal when the files add up to more bytes than allowed."""

    def count(self, m: tarfile.TarInfo) -> None:
        """Count ``m`` from its header, before any of its bytes are read."""
        self.members += 1
        if self.members > self.max_members:
            raise UnpackError(self.too_many)
        if m.isreg():
            self.bytes += m.size
            if self.bytes > self.max_bytes:
                raise UnpackError(self.too_big)


def member_parts(name: str) -> list[str]:
    """The components of a member name (``./`` and a leading ``/`` dropped); ``..`` refused."""
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnpackError(f"member {name!r} has a '..' component")
    return parts


def plain_refusal(m: tarfile.TarInfo) -> str | None:
    """Why a ``plain`` archive may not hold ``m`` (None: it may)."""
    if m.name.startswith("/") or ".." in m.name.replace("\\", "/").split("/"):
        return "points outside the destination"
    if (
        m.ischr()
        or m.isblk()
        or m.isfifo()
        or not (m.isreg() or m.isdir() or m.issym() or m.islnk())
    ):
        return "is a device or fifo"
    if m.issym() or m.islnk():
        link = m.linkname
        if link.startswith("/"):
            return f"links to an absolute path ({link!r})"
        base = posixpath.dirname(m.name) if m.issym() else ""
        resolved = posixpath.normpath(posixpath.join(base, link))
        if resolved == ".." or resolved.startswith("../"):
            return f"links outside the destination ({link!r})"
    return None


class Extractor:
    """Writes the members of one archive under ``root`` (see the module doc)."""

    def __init__(self, root: Root, budget: Budget, *, kind: str, owners: bool) -> None:
        self.root = root
        self.budget = budget
        self.kind = kind
        self.owners = owners
        self.created: set[str] = set()
        """Paths this archive created (whiteouts never remove them)."""
        self.dirs: list[tuple[str, str, int, int, tarfile.TarInfo]] = []
        """Folders whose metadata is applied last: (parent, name, st_dev, st_ino, member)."""

    # -- one member ---------------------------------------------------------------------

    def add(self, tf: tarfile.TarFile, m: tarfile.TarInfo) -> None:
        self.budget.count(m)
        if self.kind == "plain":
            why = plain_refusal(m)
            if why:
                raise UnpackError(f"archive member {m.name!r} {why}")
        elif self.kind == "copy" and (m.name.startswith("/") or ".." in m.name.split("/")):
            raise UnpackError(f"archive member {m.name!r} points outside the destination")
        parts = member_parts(m.name)
        if not parts:
            return  # the root itself: its metadata stays the destination's
        base = parts[-1]
        if self.kind == "oci" and base.startswith(WHITEOUT):
            self._whiteout(parts)
            return
        if not (m.isreg() or m.isdir() or m.issym() or m.islnk()):
            self.budget.skipped.append(oneline(m.name))
            return
        parent = "/".join(parts[:-1])
        pfd = self.root.makedirs(parent)
        try:
            self._entry(tf, m, pfd, parent, base)
        finally:
            os.close(pfd)
        self.created.add("/".join(parts))

    def _whiteout(self, parts: list[str]) -> None:
        folder = "/".join(parts[:-1])
        try:
            pfd = self.root.dir(folder)
        except (FileNotFoundError, NotADirectoryError):
            return  # nothing below to hide
        try:
            if parts[-1] == OPAQUE:
                sub = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=pfd)
                try:
                    prefix = f"{folder}/" if folder else ""
                    for entry in list(os.scandir(sub)):
                        if prefix + entry.name not in self.created:
                            remove_entry(sub, entry.name)
                finally:
                    os.close(sub)
                return
            name = parts[-1][len(WHITEOUT) :]
            if name in ("", ".", "..") or "/".join([*parts[:-1], name]) in self.created:
                return
            remove_entry(pfd, name)
        finally:
            os.close(pfd)

    def _entry(
        self, tf: tarfile.TarFile, m: tarfile.TarInfo, pfd: int, parent: str, name: str
    ) -> None:
        try:
            st: os.stat_result | None = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        owner = (m.uid, m.gid) if self.owners else None
        if m.isdir():
            if st is not None and not stat.S_ISDIR(st.st_mode):
                remove_entry(pfd, name)
                st = None
            if st is None:
                os.mkdir(name, 0o700, dir_fd=pfd)
            fd = open_entry(pfd, name, directory=True)
            try:
                ident = os.fstat(fd)
            finally:
                os.close(fd)
            self.dirs.append((parent, name, ident.st_dev, ident.st_ino, m))
            return
        if st is not None:
            remove_entry(pfd, name)
        if m.isreg():
            src = tf.extractfile(m)
            if src is None:
                raise UnpackError(f"{oneline(m.name)}: unreadable")
            fd = os.open(name, _NEW, 0o600, dir_fd=pfd)
            try:
                if not copy_exact(src.read, fd, m.size):
                    raise UnpackError(f"{oneline(m.name)}: truncated")
                set_meta(fd, owner=owner, mode=stat.S_IMODE(m.mode) & ~_SUID, mtime=m.mtime)
            finally:
                os.close(fd)
        elif m.issym():
            os.symlink(m.linkname, name, dir_fd=pfd)
            # An owner this host does not allow: the link stays the unpacker's.
            with contextlib.suppress(OSError):
                link_meta(pfd, name, owner=owner, mtime=m.mtime)
        elif m.islnk():
            self._hardlink(m, pfd, name)

    def _hardlink(self, m: tarfile.TarInfo, pfd: int, name: str) -> None:
        what = f"hard link {m.name!r} points at {m.linkname!r}"
        try:
            src_dir, src_name = self.root.parent("/".join(member_parts(m.linkname)))
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError, ValueError):
            raise UnpackError(f"{what}, not a file") from None
        try:
            try:
                st = os.stat(src_name, dir_fd=src_dir, follow_symlinks=False)
            except FileNotFoundError:
                raise UnpackError(f"{what}, not a file") from None
            if not stat.S_ISREG(st.st_mode):
                raise UnpackError(f"{what}, not a file")
            os.link(src_name, name, src_dir_fd=src_dir, dst_dir_fd=pfd, follow_symlinks=False)
        finally:
            os.close(src_dir)

    # -- the end ------------------------------------------------------------------------

    def finish(self) -> None:
        """Folder metadata, deepest last-listed first; a folder replaced since it was created
        (another inode, a link) is left alone."""
        for parent, name, dev, ino, m in reversed(self.dirs):
            try:
                pfd = self.root.dir(parent)
            except OSError:
                continue
            try:
                fd = open_entry(pfd, name, directory=True)
            except OSError:
                continue  # gone, or now a link or a file: not the folder we made
            finally:
                os.close(pfd)
            try:
                if not same_entry(fd, (dev, ino)):
                    continue
                owner = (m.uid, m.gid) if self.owners else None
                try:
                    set_meta(fd, owner=owner, mode=stat.S_IMODE(m.mode), mtime=m.mtime)
                except PermissionError:
                    set_meta(fd, mode=stat.S_IMODE(m.mode), mtime=m.mtime)
            finally:
                os.close(fd)


def extract(stream: IO[bytes], root: Root, budget: Budget, *, kind: str, owners: bool) -> None:
    """Unpack the tar ``stream`` (any compression) under ``root``, in this process."""
    ex = Extractor(root, budget, kind=kind, owners=owners)
    try:
        with tarfile.open(fileobj=stream, mode="r|*") as tf:
            for m in tf:
                ex.add(tf, m)
    except tarfile.TarError as exc:
        raise UnpackError(f"not a readable tar archive ({oneline(str(exc))[:200]})") from None
    except (EOFError, OSError) as exc:
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise
        if isinstance(exc, OSError) and exc.errno is not None:
            raise UnpackError(f"cannot unpack ({oneline(str(exc))[:200]})") from None
        raise UnpackError(f"truncated or corrupt archive ({type(exc).__name__})") from None
    ex.finish()


# ------------------------------------------------------------------- the confined process

CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID = 0, 1, 2, 3, 4
CAP_MKNOD, CAP_SYS_ADMIN = 27, 21
PR_SET_NO_NEW_PRIVS = 38


def _confine_self(root_fd: int, keep: list[int], caps: list[int]) -> None:
    """Enter the destination as ``/`` and give up everything else (see the module doc)."""
    # The fork server's system calls (by file name: this runs as a script).
    fs: Any = __import__("_forkserver_sys")
    fs.close_other_fds([*keep, root_fd])
    if os.geteuid() != 0:  # a user namespace of our own grants chroot without root
        fs.become_root_of_a_user_namespace()
    os.fchdir(root_fd)
    os.chroot(".")
    os.chdir("/")
    os.close(root_fd)
    fs.check(fs.libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl")
    fs.keep_only_caps(fs.cap_sets(caps))


def main() -> None:
    """``python -I -S _untar.py SPEC``: unpack the tar on stdin into the folder passed as
    descriptor ``SPEC["root_fd"]``; one JSON line on stdout (the result or ``error``)."""
    spec: dict[str, Any] = json.loads(sys.argv[1])
    out = os.fdopen(os.dup(1), "w")
    # Compression modules must be loaded before the chroot hides the standard library.
    import gzip  # noqa: F401
    import zlib  # noqa: F401

    for optional in ("bz2", "lzma"):
        with contextlib.suppress(ImportError):
            __import__(optional)
    kind = spec["kind"]
    # The layer format's reader, loaded (by its file name) before the chroot.
    layertar: Any = __import__("_layertar") if kind == "layer" else None
    try:
        caps = [CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID]
        if kind == "layer":
            caps += [CAP_MKNOD, CAP_SYS_ADMIN]  # whiteouts; trusted.overlay.* attributes
        owners = os.geteuid() == 0 and spec.get("owners", True)
        _confine_self(spec["root_fd"], [0, 1, 2, out.fileno()], caps)
        stdin = os.fdopen(0, "rb", buffering=1 << 20)
        root = Root(os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
        if kind == "layer":
            result: dict[str, Any] = {
                "meta": layertar.unpack_into(
                    stdin, root, spec["key"], xattr_prefix=spec["xattr_prefix"]
                )
            }
        else:
            budget = Budget(
                spec["max_bytes"],
                spec["max_members"],
                too_many=spec.get("too_many", ""),
                too_big=spec.get("too_big", ""),
            )
            extract(stdin, root, budget, kind=kind, owners=owners)
            result = {
                "bytes": budget.bytes,
                "members": budget.members,
                "skipped": budget.skipped[:1000],
            }
        out.write(json.dumps({"ok": True, **result}) + "\n")
    except (UnpackError, ValueError) as exc:
        out.write(json.dumps({"error": str(exc), "kind": "unpack"}) + "\n")
    except OSError as exc:
        out.write(json.dumps({"error": f"{exc.strerror or exc}", "errno": exc.errno}) + "\n")
    out.flush()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--"]:
        sys.argv.pop(1)
    main()
