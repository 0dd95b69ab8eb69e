"""Unpack untrusted tar archives (image layers, ``ADD`` archives, shared-cache layers, a
container's files) through the confined unpacker of :mod:`._untar`.

:func:`run` starts ``python -I -S _untar.py`` with the destination folder as its root: the
process closes every other descriptor, ``chroot``\\ s into the destination, drops its
capabilities and only then reads the archive from its standard input, resolving every path
inside the destination (:mod:`._confine`). Nothing it does can name a host path outside the
destination, whatever the archive holds: symlinked folders, whiteouts or hard links through
symlinks, a folder replaced by a link before its deferred mode, ``..`` in names or links,
devices, setuid files, or a million entries (bounded by :class:`Budget`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from repogym.sandbox._untar import MAX_MEMBERS, OPAQUE, WHITEOUT, Budget, UnpackError

__all__ = ["MAX_MEMBERS", "OPAQUE", "WHITEOUT", "Budget", "UnpackError", "apply_layer", "run"]

_SCRIPT = Path(__file__).with_name("_untar.py")
_CHUNK = 1 << 20


def run(kind: str, src: Path | IO[bytes], dest: Path, **spec: Any) -> dict[str, Any]:
    """Unpack the archive ``src`` (a file, or a readable stream) of ``kind`` (``oci``,
    ``plain`` or ``layer``) into the existing folder ``dest`` in a confined process; returns
    its result (``bytes``, ``members``, ``skipped``; ``meta`` for layers).

    Raises :class:`UnpackError` for an archive that cannot be unpacked safely, ``OSError``
    for a full disk or a process that could not start.
    """
    root_fd = os.open(dest, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    owned: IO[bytes] | None = None
    try:
        if isinstance(src, Path):
            owned = open(src, "rb")  # noqa: SIM115 - closed below
            stdin: Any = owned
        elif _real_fd(src):
            stdin = src
        else:
            stdin = subprocess.PIPE
        args = json.dumps({"kind": kind, "root_fd": root_fd, **spec})
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", str(_SCRIPT), "--", args],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=[root_fd],
            close_fds=True,
        )
    finally:
        os.close(root_fd)
    try:
        pump = None
        if stdin is subprocess.PIPE:
            sink, proc.stdin = proc.stdin, None  # the pump owns it; communicate() reads only
            pump = threading.Thread(target=_pump, args=(src, sink), daemon=True)
            pump.start()
        out, err = proc.communicate()
        if pump is not None:
            pump.join()
    finally:
        if owned is not None:
            owned.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = out.decode("utf-8", "replace").strip().splitlines()
    try:
        result = json.loads(lines[-1]) if lines else None
    except ValueError:
        result = None
    if not isinstance(result, dict):
        why = " ".join(err.decode("utf-8", "replace").split())[-300:] or f"exit {proc.returncode}"
        raise OSError(f"the confined unpacker failed: {why}")
    if "error" in result:
        if result.get("kind") == "unpack":
            raise UnpackError(str(result["error"]))
        raise OSError(result.get("errno") or 0, str(result["error"]))
    return result


def _real_fd(stream: Any) -> bool:
    """Whether ``stream`` is backed by a file descriptor of a regular file or pipe whose
    position is the start of what remains to read (then it is passed as is)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    try:
        return bool(stream.tell() == os.lseek(fd, 0, os.SEEK_CUR))
    except (AttributeError, OSError, ValueError):
        return False


def _pump(src: IO[bytes], sink: IO[bytes]) -> None:
    try:
        while True:
            chunk = src.read(_CHUNK)
            if not chunk:
                break
            sink.write(chunk)
    except (BrokenPipeError, ValueError, OSError):
        pass  # the unpacker stopped reading (it refused the archive): its answer says why
    finally:
        with contextlib.suppress(OSError):
            sink.close()


def apply_layer(archive: Path, root: Path, budget: Budget) -> None:
    """Apply one image layer (tar; gzip/bzip2/xz detected) onto ``root``, within ``budget``
    (what is left of it is passed on; the counts come back)."""
    result = run(
        "oci",
        archive,
        root,
        max_bytes=max(budget.max_bytes - budget.bytes, 0),
        max_members=max(budget.max_members - budget.members, 0),
        too_many=f"image has more than {budget.max_members} files",
        too_big=f"image is larger than the limit ({budget.max_bytes >> 20} MiB)",
    )
    budget.bytes += int(result.get("bytes", 0))
    budget.members += int(result.get("members", 0))
    budget.skipped.extend(str(s) for s in result.get("skipped") or [])


def extract_fresh(
    src: Path | IO[bytes], dest: Path, budget: Budget, *, kind: str = "plain"
) -> None:
    """Unpack a ``plain`` (or ``copy``) archive into ``dest``, created here (it must not
    exist); on any failure ``dest`` is removed again."""
    dest.mkdir(mode=0o700)
    try:
        result = run(
            kind,
            src,
            dest,
            max_bytes=budget.max_bytes,
            max_members=budget.max_members,
            too_many=budget.too_many,
            too_big=budget.too_big,
            owners=kind != "copy",
        )
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    budget.bytes += int(result.get("bytes", 0))
    budget.members += int(result.get("members", 0))
    budget.skipped.extend(str(x) for x in result.get("skipped") or [])
