"""Tool images without a registry: ``COPY --from=ghcr.io/astral-sh/uv:0.8.4 /uv /uvx /bin/``.

Some images are used only to copy a static binary out of them, and that binary also ships in
a package registry we can reach. :data:`._images.TOOL_IMAGES` names them; this module makes a
folder that looks like the image's root (``/uv``, ``/uvx``) from the PyPI wheel of that
version: found through PyPI's JSON API (``$REPOGYM_PYPI_JSON``, default
``https://pypi.org/pypi``), the wheel for this machine chosen by its platform tags
(``manylinux`` for this host's architecture and glibc, then ``musllinux``; never a macOS or
Windows one), fetched from its URL (resolved against the JSON page's, as it may be relative),
checked against the sha256 the index lists, and its ``*.data/scripts/<name>`` files
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
from urllib.parse import urljoin

import httpx

from repogym.sandbox._images import ImageRef, ToolImage, tool_version

PYPI_JSON_ENV = "REPOGYM_PYPI_JSON"
DEFAULT_PYPI_JSON = "https://pypi.org/pypi"
MAX_WHEEL_BYTES = 512 << 20


class ToolImageError(Exception):
    """The stand-in could not be made (message is one line)."""


def _arch() -> str:
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(os.uname().machine, os.uname().machine)


def _glibc() -> tuple[int, int] | None:
    """This host's glibc version (None: another C library)."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return None
    m = re.fullmatch(r"glibc (\d+)\.(\d+).*", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


_LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def _platform_rank(tag: str, arch: str, glibc: tuple[int, int] | None) -> int | None:
    """How well a wheel platform tag fits this host (lower is better; None: it cannot run
    here). manylinux (glibc no newer than the host's) comes first, then musllinux (its
    binaries are static), then a bare ``linux_<arch>``; macOS and Windows never fit."""
    m = re.fullmatch(r"(manylinux|musllinux)_(\d+)_(\d+)_(\w+)", tag)
    if m:
        kind, need, machine = m.group(1), (int(m.group(2)), int(m.group(3))), m.group(4)
    else:
        legacy, _, machine = tag.partition("_")
        if legacy in _LEGACY_MANYLINUX:
            kind, need = "manylinux", _LEGACY_MANYLINUX[legacy]
        elif legacy == "linux":
            kind, need = "linux", (0, 0)
        else:
            return None
    if machine != arch:
        return None
    if kind == "manylinux":
        return 0 if glibc is not None and need <= glibc else None
    return 1 if kind == "musllinux" else 2


def _pick_wheel(files: list[dict[str, object]]) -> dict[str, object] | None:
    """The wheel this machine runs best (:func:`_platform_rank`), or None."""
    arch, glibc = _arch(), _glibc()
    ranked = []
    for f in files:
        name = str(f.get("filename", ""))
        parts = name[: -len(".whl")].split("-") if name.endswith(".whl") else []
        if len(parts) < 5:
            continue
        ranks = [_platform_rank(t, arch, glibc) for t in parts[-1].split(".")]
        fits = [r for r in ranks if r is not None]
        if fits:
            ranked.append((min(fits), name, f))
    ranked.sort(key=lambda r: (r[0], r[1]))
    return ranked[0][2] if ranked else None


def _release_files(
    http: httpx.Client, base: str, project: str, version: str | None
) -> tuple[str, str, list[dict[str, object]]]:
    """(page URL, version, files) of ``project``'s release ``version`` (None: the newest) from
    PyPI's JSON API. A release page missing (404) is looked up in the project page's
    ``releases``: some mirrors and proxies serve only the project page."""
    resp = http.get(f"{base}/{project}/{version}/json" if version else f"{base}/{project}/json")
    if resp.status_code == 404 and version:
        resp = http.get(f"{base}/{project}/json")
        if resp.status_code != 404:
            resp.raise_for_status()
            files = (resp.json().get("releases") or {}).get(version)
            if isinstance(files, list) and files:
                return str(resp.url), version, files
        raise ToolImageError(f"PyPI has no {project} {version}")
    if resp.status_code == 404:
        raise ToolImageError(f"PyPI has no {project} {version or ''}".rstrip())
    resp.raise_for_status()
    info = resp.json()
    return str(resp.url), str(info["info"]["version"]), list(info.get("urls") or [])


def tool_root(ref: ImageRef, tool: ToolImage, cache_root: Path) -> tuple[Path, str]:
    """A folder standing in for the image's root, and the version it holds."""
    base = os.environ.get(PYPI_JSON_ENV, DEFAULT_PYPI_JSON).rstrip("/")
    version = tool_version(ref)
    if version:
        done = cache_root / "tools" / f"{tool.pypi}-{version}"
        if done.is_dir():
            return done, version
    try:
        with httpx.Client(timeout=60, follow_redirects=True) as http:
            page, version, files = _release_files(http, base, tool.pypi, version)
            done = cache_root / "tools" / f"{tool.pypi}-{version}"
            if done.is_dir():
                return done, version
            wheel = _pick_wheel(files)
            if wheel is None:
                raise ToolImageError(f"no {tool.pypi} {version} wheel for Linux {_arch()}")
            # PEP 691 and mirrors of the JSON API may give URLs relative to the page.
            wheel_url = urljoin(page, str(wheel["url"]))
            digests = wheel.get("digests") or wheel.get("hashes")  # JSON API, or PEP 691 names
            want = str(digests.get("sha256", "")) if isinstance(digests, dict) else ""
            if not re.fullmatch(r"[0-9a-f]{64}", want):
                raise ToolImageError(f"PyPI lists no sha256 for {wheel['filename']}")
            done.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=done.parent) as td:
                path = Path(td) / "w.whl"
                h = hashlib.sha256()
                size = 0
                with http.stream("GET", wheel_url) as r, open(path, "wb") as fh:
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
