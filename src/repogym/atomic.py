"""Writing files and folders so that readers see the old or the new content, never half of it.

Everything is first written to a temporary sibling (``mkstemp`` / ``mkdtemp``) and then renamed
into place. Those temporaries are created private (0600 / 0700) whatever the umask, which would
leak into the result: :func:`atomic_write` and :func:`make_temp_dir` give them the modes an
ordinary ``open()`` / ``mkdir()`` would (0666 / 0777 less the process umask) before the rename.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path


def current_umask() -> int:
    """The process umask, read without changing it where Linux allows (``/proc/self/status``);
    elsewhere set and restored at once."""
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode ``open()`` gives a new file under the current umask (0644 under 022)."""
    return 0o666 & ~current_umask()


def dir_mode() -> int:
    """The mode ``mkdir()`` gives a new folder under the current umask (0755 under 022)."""
    return 0o777 & ~current_umask()


def atomic_write(path: Path | str, data: bytes | str, *, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` atomically (UTF-8 for text); the file gets ``mode``, by
    default what ``open()`` would give it under the umask."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise naming(exc, path) from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            os.fchmod(fh.fileno(), file_mode() if mode is None else mode)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise naming(exc, path) from exc
        raise


def naming(exc: OSError, path: Path | str) -> OSError:
    """``exc`` as an error about ``path`` (the file the caller meant, not a temporary one):
    same errno, so the same subclass (``PermissionError``, …)."""
    if exc.errno is None:
        return exc
    return OSError(exc.errno, exc.strerror or os.strerror(exc.errno), str(path))


def make_temp_dir(parent: Path | str, *, prefix: str = ".", suffix: str = ".tmp") -> Path:
    """A new empty folder in ``parent`` (to fill, then rename into place) with the mode
    ``mkdir()`` would give it under the umask, not ``mkdtemp``'s 0700."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=parent))
    os.chmod(tmp, dir_mode())
    return tmp


def publish_dir(staging: Path, dest: Path) -> None:
    """Move a fully written folder into place atomically (replacing an older one)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
        os.replace(dest, old)
        os.replace(staging, dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staging, dest)


MIN_FREE_BYTES = 256 * 1024
"""Free space below which a command that is about to write output refuses to start."""


def prepare_output_folder(path: Path, *, min_free: int = MIN_FREE_BYTES) -> None:
    """Create ``path`` (and missing parents) and prove it takes a file with ``min_free`` bytes
    to spare, so a read-only or full disk stops a command before its work starts. On failure
    the folders made here are removed again and an :class:`OSError` naming ``path`` is
    raised (``ENOSPC`` for too little space)."""
    missing = missing_parents(Path(path))
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
        probe = Path(path) / f".repogym-probe-{os.getpid()}"
        try:
            probe.write_bytes(b"repogym")
        finally:
            probe.unlink(missing_ok=True)
        if free_bytes(path) < min_free:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    except OSError as exc:
        remove_empty(missing)
        raise naming(exc, path) from None


def free_bytes(path: Path | str) -> int:
    """Bytes an unprivileged writer may still use on ``path``'s file system (``OSError`` when
    it cannot be asked)."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def missing_parents(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist yet, deepest first (what a
    ``mkdir(parents=True)`` would create, so a failure can remove them again)."""
    missing = []
    while not os.path.lexists(folder) and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    return missing


def remove_empty(folders: list[Path]) -> None:
    """Remove ``folders`` (deepest first) while they are empty: what a failed write created."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


_STAGING = re.compile(
    r"^\.(?P<label>.*)\.repogym-(?P<kind>[a-z]+)-(?P<host>[0-9a-f]{6})-(?P<pid>\d+)-"
)
STALE_ELSEWHERE_S = 24 * 3600
"""Age after which a staging folder another machine left is swept too."""


def _host_tag() -> str:
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:6]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def staging_dir(parent: Path | str, kind: str, label: str = "") -> Path:
    """A new work folder in ``parent``, named ``.<label>.repogym-<kind>-<host>-<pid>-…`` (mode
    as ``mkdir()`` gives), after sweeping the folders of the same ``kind`` a killed run left
    there (:func:`sweep_staging`)."""
    sweep_staging(parent, kind)
    host = _host_tag()
    return make_temp_dir(parent, prefix=f".{label}.repogym-{kind}-{host}-{os.getpid()}-", suffix="")


def staging_file(parent: Path | str, kind: str, label: str = "", suffix: str = "") -> Path:
    """A fresh path (nothing there yet) for a work file in ``parent``, named like
    :func:`staging_dir`'s folders, after sweeping the files of ``kind`` a killed run left."""
    sweep_staging(parent, kind)
    prefix = f".{label}.repogym-{kind}-{_host_tag()}-{os.getpid()}-"
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=parent)
    os.close(fd)
    os.unlink(name)
    return Path(name)


def sweep_staging(parent: Path | str, kind: str) -> list[Path]:
    """Remove the staging folders (and files) of ``kind`` in ``parent`` whose process is gone
    (same machine), or that another machine left more than a day ago; the removed paths."""
    removed: list[Path] = []
    host, now = _host_tag(), time.time()
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        found = _STAGING.match(entry.name)
        if found is None or found["kind"] != kind:
            continue
        try:
            folder = entry.is_dir(follow_symlinks=False)
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        if found["host"] == host:
            stale = int(found["pid"]) != os.getpid() and not _alive(int(found["pid"]))
        else:
            stale = age > STALE_ELSEWHERE_S
        if stale:
            if folder:
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
            removed.append(Path(entry.path))
    return removed
