"""Reading zip / tar archives carried by row datasets, in memory and with limits.

An archive is read all or nothing: a member whose path escapes the task folder (``..``, an
absolute path, a drive letter), a link or device member, too many members, too many bytes, or
a compression ratio typical of a zip bomb rejects the whole archive with a one-line reason.
Nothing is ever written to disk; decompressed bytes are counted while they are read (the
sizes an archive declares are not trusted).
"""

from __future__ import annotations

import base64
import binascii
import bz2
import gzip
import io
import lzma
import re
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from typing import IO

__all__ = [
    "ArchiveLimits",
    "ArchiveRejected",
    "archive_bytes",
    "is_archive",
    "read_archive",
    "safe_member_path",
]


@dataclass(frozen=True, slots=True)
class ArchiveLimits:
    """Caps applied to one archive."""

    max_archive_bytes: int = 32 * 1024 * 1024  # the archive itself (compressed)
    max_members: int = 2000
    max_total_bytes: int = 64 * 1024 * 1024  # all members, uncompressed
    max_ratio: float = 100.0  # uncompressed / compressed, checked past ratio_floor bytes
    ratio_floor: int = 1024 * 1024


DEFAULT_LIMITS = ArchiveLimits()


class ArchiveRejected(ValueError):
    """The archive is unsafe or too big; the message is one line shown on the task page."""


_ZIP = b"PK\x03\x04"
_ZIP_EMPTY = b"PK\x05\x06"
_GZIP = b"\x1f\x8b"
_BZIP2 = b"BZh"
_XZ = b"\xfd7zXZ\x00"
_B64 = re.compile(rb"^[A-Za-z0-9+/=\s]+$")
# base64 of the magic numbers above: a cheap test before decoding a long string
_B64_PREFIXES = ("UEsDB", "UEsFB", "H4sI", "QlpoO", "QlpoM", "QlpoN", "/Td6WFo")


def _is_tar(data: bytes) -> bool:
    return len(data) >= 262 and data[257:262] == b"ustar"


def is_archive(data: bytes) -> bool:
    """Whether ``data`` starts like a zip, a tar, or a gzip / bzip2 / xz stream."""
    return data.startswith((_ZIP, _ZIP_EMPTY, _GZIP, _BZIP2, _XZ)) or _is_tar(data)


def archive_bytes(value: object, max_bytes: int = DEFAULT_LIMITS.max_archive_bytes) -> bytes | None:
    """The archive carried by a row value, or None when the value is not one.

    Accepts raw bytes, a base64 string, or a ``{"bytes": ...}`` mapping (how dataset tools
    store binary columns). Values too big to be a permitted archive are still returned when
    they are archives, so the caller can reject them with a reason.
    """
    if isinstance(value, dict) and "bytes" in value:
        value = value["bytes"]
    if isinstance(value, bytearray | memoryview):
        value = bytes(value)
    if isinstance(value, bytes):
        return value if is_archive(value) else None
    if not isinstance(value, str) or len(value) < 16:
        return None
    head = value.lstrip()[:12]
    if not head.startswith(_B64_PREFIXES):
        if len(value) < 400:
            return None
        # an uncompressed tar has its magic at byte 257: decode a prefix to look
        try:
            prefix = base64.b64decode(value.lstrip()[:400], validate=True)
        except (binascii.Error, ValueError):
            return None
        if not _is_tar(prefix):
            return None
    # base64 is 4/3 of the bytes: refuse to decode something over the cap
    if len(value) > (max_bytes * 4) // 3 + 1024:
        raise ArchiveRejected(f"archive is about {len(value) * 3 // 4} bytes (limit {max_bytes})")
    raw = value.encode("ascii", errors="replace")
    if not _B64.match(raw[:4096]):
        return None
    try:
        data = base64.b64decode(raw, validate=False)
    except (binascii.Error, ValueError):
        return None
    return data if is_archive(data) else None


def safe_member_path(name: str) -> str:
    """A member name as a POSIX path inside the task folder, or :class:`ArchiveRejected`."""
    if "\x00" in name:
        raise ArchiveRejected(f"member {name!r} has a NUL byte in its name")
    if "\\" in name:
        raise ArchiveRejected(f"member {name!r} uses backslashes in its path")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise ArchiveRejected(f"member {name!r} has an absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise ArchiveRejected(f"member {name!r} escapes the task folder (..)")
    if not parts:
        raise ArchiveRejected(f"member {name!r} has an empty path")
    return "/".join(parts)


class _Budget:
    """Counts bytes as they are decompressed, across every member of one archive."""

    def __init__(self, compressed: int, limits: ArchiveLimits) -> None:
        self.compressed = max(compressed, 1)
        self.limits = limits
        self.total = 0

    def add(self, n: int) -> None:
        self.total += n
        if self.total > self.limits.max_total_bytes:
            raise ArchiveRejected(
                f"archive expands past {self.limits.max_total_bytes} bytes (limit)"
            )
        if (
            self.total > self.limits.ratio_floor
            and self.total / self.compressed > self.limits.max_ratio
        ):
            raise ArchiveRejected(
                f"archive expands more than {self.limits.max_ratio:g}x its size (compression bomb)"
            )


class _CountingReader(io.RawIOBase):
    """A read-only stream that charges every byte read to a :class:`_Budget`."""

    def __init__(self, inner: io.BufferedIOBase | gzip.GzipFile, budget: _Budget) -> None:
        self.inner = inner
        self.budget = budget

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        chunk = self.inner.read(len(b))
        n = len(chunk)
        b[:n] = chunk
        self.budget.add(n)
        return n


def _read_capped(stream: IO[bytes], budget: _Budget, charge: bool = True) -> bytes:
    out = bytearray()
    while True:
        chunk = stream.read(64 * 1024)
        if not chunk:
            return bytes(out)
        if charge:
            budget.add(len(chunk))
        out += chunk


def _read_zip(data: bytes, limits: ArchiveLimits, budget: _Budget) -> dict[str, bytes]:
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise ArchiveRejected(f"not a readable zip archive ({exc})") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > limits.max_members:
            raise ArchiveRejected(f"archive has {len(infos)} members (limit {limits.max_members})")
        declared = sum(i.file_size for i in infos)
        if declared > limits.max_total_bytes:
            raise ArchiveRejected(
                f"archive declares {declared} bytes uncompressed (limit {limits.max_total_bytes})"
            )
        if declared > limits.ratio_floor and declared / budget.compressed > limits.max_ratio:
            raise ArchiveRejected(
                f"archive expands more than {limits.max_ratio:g}x its size (compression bomb)"
            )
        files: dict[str, bytes] = {}
        for info in infos:
            path = safe_member_path(info.filename)
            mode = info.external_attr >> 16
            if mode and stat.S_ISLNK(mode):
                raise ArchiveRejected(f"member {info.filename!r} is a symbolic link")
            if info.is_dir():
                continue
            if info.flag_bits & 0x1:
                raise ArchiveRejected(f"member {info.filename!r} is encrypted")
            try:
                with zf.open(info) as fh:
                    files.setdefault(path, _read_capped(fh, budget))
            except ArchiveRejected:
                raise
            except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
                raise ArchiveRejected(f"member {info.filename!r} cannot be read ({exc})") from None
        return files


def _decompressor(data: bytes, budget: _Budget) -> io.BufferedReader:
    raw: io.BufferedIOBase
    if data.startswith(_GZIP):
        raw = gzip.GzipFile(fileobj=io.BytesIO(data))
    elif data.startswith(_BZIP2):
        raw = bz2.BZ2File(io.BytesIO(data))  # noqa: SIM115
    elif data.startswith(_XZ):
        raw = lzma.LZMAFile(io.BytesIO(data))  # noqa: SIM115
    else:
        raw = io.BytesIO(data)
    return io.BufferedReader(_CountingReader(raw, budget), buffer_size=64 * 1024)


def _read_tar(data: bytes, limits: ArchiveLimits, budget: _Budget) -> dict[str, bytes]:
    # Stream mode ("r|"): members are read in order, every decompressed byte (headers, data,
    # padding) goes through the budget, so a bomb stops at the cap instead of being inflated.
    stream = _decompressor(data, budget)
    files: dict[str, bytes] = {}
    count = 0
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tf:
            for member in tf:
                count += 1
                if count > limits.max_members:
                    raise ArchiveRejected(f"archive has more than {limits.max_members} members")
                path = safe_member_path(member.name)
                if member.issym() or member.islnk():
                    raise ArchiveRejected(
                        f"member {member.name!r} is a link (to {member.linkname!r})"
                    )
                if member.isdir():
                    continue
                if not member.isfile():
                    raise ArchiveRejected(f"member {member.name!r} is not a regular file")
                if member.size > limits.max_total_bytes:
                    raise ArchiveRejected(
                        f"member {member.name!r} declares {member.size} bytes "
                        f"(limit {limits.max_total_bytes})"
                    )
                fh = tf.extractfile(member)
                if fh is None:
                    continue
                # bytes were already charged when the stream decompressed them
                files.setdefault(path, _read_capped(fh, budget, charge=False))
    except ArchiveRejected:
        raise
    except (tarfile.TarError, OSError, EOFError, ValueError, lzma.LZMAError) as exc:
        raise ArchiveRejected(f"not a readable tar archive ({exc})") from None
    return files


def read_archive(data: bytes, limits: ArchiveLimits = DEFAULT_LIMITS) -> dict[str, bytes]:
    """Every regular file of a zip / tar(.gz|.bz2|.xz) archive as ``{posix path: bytes}``.

    Raises :class:`ArchiveRejected` (one line) when the archive is unsafe or over a limit;
    nothing is returned from a rejected archive.
    """
    if len(data) > limits.max_archive_bytes:
        raise ArchiveRejected(f"archive is {len(data)} bytes (limit {limits.max_archive_bytes})")
    budget = _Budget(len(data), limits)
    if data.startswith((_ZIP, _ZIP_EMPTY)):
        return _read_zip(data, limits, budget)
    if data.startswith((_GZIP, _BZIP2, _XZ)) or _is_tar(data):
        return _read_tar(data, limits, budget)
    raise ArchiveRejected("not a zip or tar archive")
