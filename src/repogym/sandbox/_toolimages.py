"""Tool images without a registry: ``COPY --from=ghcr.io/astral-sh/uv:0.8.4 /uv /uvx /bin/``.

Some images are used only to copy a static binary out of them, and that binary also ships in
a package registry we can reach. :data:`._images.TOOL_IMAGES` names them; this module makes a
folder that looks like the image's root (``/uv``, ``/uvx``) from the PyPI wheel of that
version: found through PyPI's JSON API (``$REPOGYM_PYPI_JSON``, default
``https://pypi.org/pypi``), the wheel for this machine (``manylinux`` before ``musllinux``)
downloaded, checked against the sha256 PyPI lists, and its ``*.data/scripts/<name>`` files
extracted. Cached under ``<cache>/tools/<project>-<version>/``.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import tempfile
import zipfile
from pathlib import Path

import httpx

from repogym.sandbox._images import ImageRef, ToolImage, tool_version

PYPI_JSON_ENV = "REPOGYM_PYPI_JSON"
DEFAULT_PYPI_JSON = "https://pypi.org/pypi"
MAX_WHEEL_BYTES = 512 << 20


class ToolImageError(Exception):
    """The stand-in could not be made (message is one line)."""


def _arch() -> str:
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(os.uname().machine, os.uname().machine)


def _pick_wheel(files: list[dict[str, object]]) -> dict[str, object] | None:
    arch = _arch()
    wheels = [
        f
        for f in files
        if str(f.get("filename", "")).endswith(".whl") and arch in str(f.get("filename", ""))
    ]
    wheels.sort(key=lambda f: ("musllinux" in str(f["filename"]), str(f["filename"])))
    return wheels[0] if wheels else None


def tool_root(ref: ImageRef, tool: ToolImage, cache_root: Path) -> tuple[Path, str]:
    """A folder standing in for the image's root, and the version it holds."""
    base = os.environ.get(PYPI_JSON_ENV, DEFAULT_PYPI_JSON).rstrip("/")
    version = tool_version(ref)
    if version:
        done = cache_root / "tools" / f"{tool.pypi}-{version}"
        if done.is_dir():
            return done, version
    url = f"{base}/{tool.pypi}/{version}/json" if version else f"{base}/{tool.pypi}/json"
    try:
        with httpx.Client(timeout=60, follow_redirects=True) as http:
            resp = http.get(url)
            if resp.status_code == 404:
                raise ToolImageError(f"PyPI has no {tool.pypi} {version or ''}".rstrip())
            resp.raise_for_status()
            info = resp.json()
            version = str(info["info"]["version"])
            done = cache_root / "tools" / f"{tool.pypi}-{version}"
            if done.is_dir():
                return done, version
            wheel = _pick_wheel(list(info.get("urls") or []))
            if wheel is None:
                raise ToolImageError(f"PyPI has no {tool.pypi} {version} wheel for {_arch()}")
            digests = wheel.get("digests")
            want = str(digests.get("sha256", "")) if isinstance(digests, dict) else ""
            if not re.fullmatch(r"[0-9a-f]{64}", want):
                raise ToolImageError(f"PyPI lists no sha256 for {wheel['filename']}")
            done.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=done.parent) as td:
                path = Path(td) / "w.whl"
                h = hashlib.sha256()
                size = 0
                with http.stream("GET", str(wheel["url"])) as r, open(path, "wb") as fh:
                    r.raise_for_status()
                    for chunk in r.iter_bytes(1 << 20):
                        size += len(chunk)
                        if size > MAX_WHEEL_BYTES:
                            raise ToolImageError(f"{wheel['filename']} is over 512 MiB")
                        h.update(chunk)
                        fh.write(chunk)
                if h.hexdigest() != want:
                    raise ToolImageError(f"{wheel['filename']} does not match PyPI's sha256")
                _extract(path, tool, version, done)
    except httpx.HTTPError as exc:
        raise ToolImageError(f"cannot fetch {tool.pypi} from {base} ({exc})") from None
    return done, version


def _extract(wheel: Path, tool: ToolImage, version: str, done: Path) -> None:
    tmp = done.with_name(f".tmp-{done.name}-{os.getpid()}-{secrets.token_hex(4)}")
    tmp.mkdir(parents=True)
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = {n.rsplit("/", 1)[-1]: n for n in zf.namelist() if "/scripts/" in n}
            for path in tool.files:
                name = path.lstrip("/")
                if name not in names:
                    raise ToolImageError(f"the {tool.pypi} {version} wheel has no {name}")
                with zf.open(names[name]) as src, open(tmp / name, "wb") as out:
                    shutil.copyfileobj(src, out)
                os.chmod(tmp / name, 0o755)
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, done)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
