"""The layer cache: one directory per build step, keyed like Docker's build cache.

``<cache>/layers/<key>/`` holds ``meta.json`` and ``fs/<part>/`` (the overlay upper directory
of each root part the step changed). A key is ``sha256(parent key + normalized instruction
[+ content hash of copied files])``, so two Dockerfiles sharing their first N steps share N
layers.

Layers are built in ``.tmp-<key>-…`` directories and renamed into place only when complete, so
an interrupted build never leaves something that later counts as cached. A per-key file lock
makes concurrent builders of the same step wait for each other instead of racing.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from repogym.sandbox._host import pid_alive
from repogym.sandbox._rootfs import parts_present


def step_key(parent: str, *parts: str) -> str:
    """Cache key of a step: its parent's key plus the normalized instruction (and content)."""
    h = hashlib.sha256()
    h.update(parent.encode())
    for p in parts:
        h.update(b"\0")
        h.update(p.encode())
    return h.hexdigest()


def _rmtree(path: Path) -> None:
    """Remove a tree even where a step left read-only directories behind."""

    def onerror(func, p, _exc):  # type: ignore[no-untyped-def]
        # overlayfs leaves a mode-000 ``work/work``; unreadable when not root: open it up.
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
            if func in (os.open, os.scandir, os.listdir, os.lstat):
                shutil.rmtree(p, onerror=onerror)
            else:
                func(p)

    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, onerror=onerror)


class LayerStore:
    """Layer directories under ``root`` (``<cache>/layers``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / ".locks").mkdir(exist_ok=True)

    def path(self, key: str) -> Path:
        return self.root / key

    def exists(self, key: str) -> bool:
        return (self.root / key / "meta.json").is_file()

    def meta(self, key: str) -> dict[str, object]:
        return json.loads((self.root / key / "meta.json").read_text())

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """Exclusive per-key lock (waits for another process building the same step)."""
        fd = os.open(self.root / ".locks" / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def new_tmp(self, key: str) -> Path:
        """A fresh temp directory for building ``key`` (stale ones of that key are removed)."""
        for stale in self.root.glob(f".tmp-{key}-*"):
            _rmtree(stale)
        tmp = self.root / f".tmp-{key}-{os.getpid()}-{secrets.token_hex(4)}"
        (tmp / "fs").mkdir(parents=True)
        return tmp

    def commit(self, key: str, tmp: Path, meta: dict[str, object]) -> list[str]:
        """Finish a layer: drop scratch dirs, write ``meta.json``, rename into place."""
        for scratch in ("work", "merged"):
            _rmtree(tmp / scratch)
        fs = tmp / "fs"
        for part in list(fs.iterdir()) if fs.exists() else []:
            if part.is_dir() and not any(part.iterdir()):
                part.rmdir()
        parts = parts_present(fs)
        meta = {**meta, "key": key, "parts": parts, "created": time.time()}
        data = json.dumps(meta, indent=1, sort_keys=True)
        with open(tmp / "meta.json", "w") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.rename(tmp, self.root / key)
        except OSError:
            # Someone else committed it meanwhile (without our lock): theirs is as good.
            _rmtree(tmp)
        return parts

    def discard(self, tmp: Path) -> None:
        _rmtree(tmp)

    def prune_tmp(self, older_than_s: float = 86400.0) -> None:
        """Remove temp directories of builds whose process died (or that are very old)."""
        now = time.time()
        for tmp in self.root.glob(".tmp-*"):
            pid = tmp.name.rsplit("-", 2)[-2]
            with contextlib.suppress(OSError, ValueError):
                if not pid_alive(int(pid)) or now - tmp.stat().st_mtime > older_than_s:
                    _rmtree(tmp)
