"""Content-addressed blobs: ``<cache>/oci/blobs/sha256/<hex>``, as in an OCI image layout.

Image layers, configs and manifests, pulled or made here, are kept under their digest so that a
second push, an export or another task of the same repository reuses them. A blob is written
under a temporary name, checked against its digest and renamed into place: whatever a killed
process leaves is never taken for a blob.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class BlobError(ValueError):
    """A blob whose bytes do not match its digest, or a digest this store does not take."""


def check_digest(digest: str) -> str:
    """The hex part of a ``sha256:`` digest (anything else is refused)."""
    if not _DIGEST.fullmatch(digest):
        raise BlobError(f"unsupported digest {digest[:80]!r} (only sha256)")
    return digest.split(":", 1)[1]


class HashingWriter:
    """A file being written whose SHA-256 and size are kept as it grows."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh = fh
        self.h = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self.h.update(data)
        self.size += len(data)
        return self.fh.write(data)

    def flush(self) -> None:
        self.fh.flush()

    @property
    def digest(self) -> str:
        return "sha256:" + self.h.hexdigest()


class BlobStore:
    """Blobs under ``root`` (``<root>/sha256/<hex>``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "sha256").mkdir(parents=True, exist_ok=True)

    def path(self, digest: str) -> Path:
        return self.root / "sha256" / check_digest(digest)

    def has(self, digest: str) -> bool:
        return self.path(digest).is_file()

    def size(self, digest: str) -> int:
        return self.path(digest).stat().st_size

    def read(self, digest: str) -> bytes:
        data = self.path(digest).read_bytes()
        if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
            raise BlobError(f"cached blob {digest} is corrupt")
        return data

    def put(self, data: bytes) -> str:
        """Store ``data``; returns its digest."""
        with self.writer() as w:
            w.write(data)
        return w.digest

    @contextlib.contextmanager
    def writer(self, expect: str | None = None) -> Iterator[HashingWriter]:
        """A temporary file that becomes the blob of what was written once the block ends
        (checked against ``expect`` when given); removed when the block raises."""
        tmp = self.root / f".tmp-{os.getpid()}-{secrets.token_hex(6)}"
        try:
            with open(tmp, "wb") as fh:
                w = HashingWriter(fh)
                yield w
            if expect is not None and w.digest != expect:
                raise BlobError(f"blob {expect} does not match its digest (got {w.digest})")
            dest = self.path(w.digest)
            if dest.is_file():
                tmp.unlink()
            else:
                os.chmod(tmp, 0o644)
                os.rename(tmp, dest)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def adopt(self, path: Path, digest: str, *, verified: bool = False) -> None:
        """Move the finished file ``path`` (on this filesystem) in as blob ``digest``, after
        checking its bytes (``verified``: the writer hashed them as it wrote them)."""
        if not verified:
            h = hashlib.sha256()
            with open(path, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            if "sha256:" + h.hexdigest() != digest:
                path.unlink(missing_ok=True)
                raise BlobError(f"blob {digest} does not match its digest")
        dest = self.path(digest)
        if dest.is_file():
            path.unlink()
        else:
            os.chmod(path, 0o644)
            os.rename(path, dest)
