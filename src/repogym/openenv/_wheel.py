"""A wheel of the running repogym, for packages whose image must install this very build.

repogym is pure Python, so its wheel is a zip of the package folder and the installed
distribution's metadata (``METADATA``, ``entry_points.txt``, licence files) with a fresh
``WHEEL`` and ``RECORD``. It works for an editable install of a checkout as for an install from
a wheel file. Entries are written in sorted order with a fixed timestamp: the same sources give
the same bytes (and a Docker build reuses its cached layer).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import os
import zipfile
from pathlib import Path

import repogym

DIST = "repogym"
FIXED_TIME = (1980, 1, 1, 0, 0, 0)
_SKIP_DIRS = {"__pycache__"}
_SKIP_SUFFIXES = (".pyc", ".pyo")


class NoWheel(ValueError):
    """The running repogym cannot be packed as a wheel (no installed metadata)."""


def installed_from_index() -> bool:
    """True when the installed distribution came from a package index (installers record a
    ``direct_url.json`` only for a local folder, a file or a URL: PEP 610)."""
    try:
        dist = importlib.metadata.distribution(DIST)
    except importlib.metadata.PackageNotFoundError:
        return False
    return dist.read_text("direct_url.json") is None


def installed_source() -> str:
    """Where the running repogym was installed from, for messages (a URL or ``an index``)."""
    try:
        text = importlib.metadata.distribution(DIST).read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return "a source tree without installed metadata"
    if text is None:
        return "a package index"
    try:
        return str(json.loads(text).get("url") or "a local path")
    except ValueError:
        return "a local path"


def _record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def build_own_wheel(dest_dir: Path) -> Path:
    """Write ``repogym-<version>-py3-none-any.whl`` of the running repogym into ``dest_dir``."""
    try:
        dist = importlib.metadata.distribution(DIST)
    except importlib.metadata.PackageNotFoundError:
        raise NoWheel(
            "repogym runs from a source tree without installed metadata: install it "
            "(pip install -e .) or pass --requirement with a wheel"
        ) from None
    metadata = dist.read_text("METADATA")
    if not metadata:
        raise NoWheel("the installed repogym has no METADATA: pass --requirement with a wheel")
    version = dist.version
    info = f"{DIST}-{version}.dist-info"
    entries: list[tuple[str, bytes, int]] = []  # (name in the wheel, bytes, mode)
    package = Path(repogym.__file__).parent
    for root, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(files):
            if name.endswith(_SKIP_SUFFIXES):
                continue
            path = Path(root, name)
            rel = path.relative_to(package.parent).as_posix()
            entries.append((rel, path.read_bytes(), path.stat().st_mode & 0o777))
    entries.append((f"{info}/METADATA", metadata.encode(), 0o644))
    for extra in dist.files or []:
        parts = extra.parts
        if parts[0] != info or len(parts) < 2:
            continue
        if parts[1] == "entry_points.txt" or parts[1] == "licenses":
            data = Path(str(dist.locate_file(extra))).read_bytes()
            entries.append(("/".join(parts), data, 0o644))
    wheel_meta = (
        "Wheel-Version: 1.0\nGenerator: repogym export\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    entries.append((f"{info}/WHEEL", wheel_meta.encode(), 0o644))
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data, _ in entries)
    record += f"{info}/RECORD,,\n"
    entries.append((f"{info}/RECORD", record.encode(), 0o644))
    dest_dir.mkdir(parents=True, exist_ok=True)
    out = dest_dir / f"{DIST}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data, mode in entries:
            zinfo = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            zinfo.external_attr = (0o100000 | mode) << 16
            zinfo.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zinfo, data)
    return out
