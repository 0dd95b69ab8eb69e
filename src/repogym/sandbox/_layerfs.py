"""Files into and out of build layers: ``COPY``/``ADD`` sources copied in, ``ADD`` archives
unpacked (bounded), a finished step's upper copied out and stripped of what must not land on the
host (setuid bits, file capabilities, devices, FIFOs, sockets).
"""

from __future__ import annotations

import lzma
import os
import posixpath
import stat
import subprocess
import tarfile
import zlib
from pathlib import Path, PurePosixPath

from repogym.sandbox import _rootfs
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
) -> None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | (os.O_DIRECTORY if src.is_dir() else 0)
    fd = os.open(src, flags)
    try:
        proc.file_op(
            "copy_in",
            path=dest,
            fds=[fd],
            include=include,
            owner=owner,
            chmod=chmod,
            replace=False,
        )
    finally:
        os.close(fd)


def is_archive(path: Path) -> bool:
    try:
        return tarfile.is_tarfile(path)
    except OSError:
        return False


class ArchiveError(ValueError):
    """An archive ``ADD`` refuses (the message starts with the archive's name)."""


def extract_archive(archive: Path, dest: Path, *, storage_mb: int, label: str) -> None:
    """Unpack a tar archive (any compression) for ``ADD``, streamed and bounded.

    Its regular files may add up to the storage limit and it may have at most
    :data:`MAX_ARCHIVE_MEMBERS` members; both are checked from each member's header *before*
    its bytes are read, so a small archive expanding to gigabytes stops at the first header
    over the limit. Members with absolute names or ``..`` components, links pointing
    outside the destination (or absolute), and device/fifo members are refused; the
    extraction filter ``data`` enforces the same again and clears setuid bits.
    """
    budget = storage_mb << 20
    total = count = 0
    try:
        with tarfile.open(archive, mode="r|*") as tf:
            for m in tf:
                count += 1
                if count > MAX_ARCHIVE_MEMBERS:
                    raise ArchiveError(
                        f"{label}: the archive has more than {MAX_ARCHIVE_MEMBERS} members"
                    )
                why = unsafe_member(m)
                if why:
                    raise ArchiveError(f"{label}: archive member {m.name!r} {why}")
                if m.isreg():
                    total += m.size
                    if total > budget:
                        raise ArchiveError(
                            f"{label}: the archive expands beyond the storage limit "
                            f"({storage_mb} MB)"
                        )
                tf.extract(m, dest, set_attrs=True, filter="data")
    except ArchiveError:
        raise
    except (tarfile.TarError, OSError, EOFError, ValueError, zlib.error, lzma.LZMAError) as exc:
        # Never the archive's bytes: the kind of error and, at most, a member name.
        why = oneline(str(exc))[:200]
        raise ArchiveError(f"{label}: cannot unpack the archive ({why})") from None


def unsafe_member(m: tarfile.TarInfo) -> str | None:
    parts = PurePosixPath(m.name).parts
    if m.name.startswith("/") or ".." in parts:
        return "points outside the destination"
    if m.isdev() and not (m.isfifo() or m.ischr() or m.isblk()):  # pragma: no cover
        return "is a special file"
    if m.ischr() or m.isblk() or m.isfifo():
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
    0/0), FIFOs and sockets are deleted. Setgid on folders (group inheritance) stays.
    """
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(fs):
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            mode = st.st_mode
            if stat.S_ISREG(mode):
                bits = stat.S_IMODE(mode) & (stat.S_ISUID | stat.S_ISGID)
                if bits:
                    os.chmod(path, stat.S_IMODE(mode) & ~bits)
                    what = "setuid" if bits & stat.S_ISUID else "setgid"
                    if bits == stat.S_ISUID | stat.S_ISGID:
                        what = "setuid+setgid"
                    out.append(f"{shown(fs, path)}: {what} bit removed")
                try:
                    os.removexattr(path, "security.capability", follow_symlinks=False)
                except OSError:
                    pass
                else:
                    out.append(f"{shown(fs, path)}: file capabilities removed")
            elif stat.S_ISCHR(mode) and st.st_rdev == 0:
                continue  # an overlayfs whiteout: a deletion, not a device
            elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
                os.unlink(path)
                out.append(f"{shown(fs, path)}: device node removed")
            elif stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
                os.unlink(path)
                kind = "fifo" if stat.S_ISFIFO(mode) else "socket"
                out.append(f"{shown(fs, path)}: {kind} removed")
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
