"""The sandbox root filesystem: which host directories form the base and how layers stack on it.

A sandbox root is one overlay per *part*:

* ``@root`` — the top level. Its base is a generated skeleton holding only the allow-listed
  top-level entries of the host (``/usr``-merge symlinks, empty ``/root``, ``/home``, ``/tmp``,
  ``/mnt``, ...). Everything else on the host (``/work``, ``/farm``, caches, other tasks) simply
  does not exist inside.
* one part per host base directory (``usr``, ``etc``, ``var``, ``opt``) — its base is the host
  directory itself, read-only under the overlay, so ``apt-get install`` works and writes only to
  the session's upper layer.

A layer stores its diff per part (``<layer>/fs/<part>``), exactly what overlayfs wrote into the
upper directory of that part. Keeping the parts separate (instead of one overlay with the host
``/`` as its lowest layer) is what lets the layer cache live on the same filesystem as ``/``
without overlayfs refusing the mount for overlapping layers.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

ROOT_PART = "@root"
BASE_DIRS = ("usr", "etc", "var", "opt")
# Top-level directories that exist inside but start empty (mode).
FRESH_DIRS = {
    "bin": 0o755,
    "boot": 0o755,
    "dev": 0o755,
    "home": 0o755,
    "lib": 0o755,
    "lib32": 0o755,
    "lib64": 0o755,
    "libx32": 0o755,
    "media": 0o755,
    "mnt": 0o755,
    "proc": 0o555,
    "root": 0o700,
    "run": 0o755,
    "sbin": 0o755,
    "srv": 0o755,
    "sys": 0o555,
    "tmp": 0o1777,
}
# Directories whose host content becomes part of the base when they are real directories
# (on systems without the /usr merge).
MERGED_USR = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
MAX_MOUNT_DATA = 4000


def base_dirs() -> list[str]:
    """Host directories overlaid as base parts (``usr``, ``etc``, ``var``, ``opt`` + unmerged)."""
    parts = [d for d in BASE_DIRS if Path("/", d).is_dir()]
    for name in MERGED_USR:
        p = Path("/", name)
        if p.is_dir() and not p.is_symlink():
            parts.append(name)
    return parts


def all_parts() -> list[str]:
    return [ROOT_PART, *base_dirs()]


def _skeleton_spec() -> list[tuple[str, str, str]]:
    """(name, kind, value) entries of the skeleton: kind is ``dir`` (mode) or ``link`` (target)."""
    entries: list[tuple[str, str, str]] = []
    overlaid = set(base_dirs())
    names = set(FRESH_DIRS) | overlaid
    for name in sorted(names):
        host = Path("/", name)
        if host.is_symlink():
            entries.append((name, "link", os.readlink(host)))
        elif name in overlaid:
            entries.append((name, "dir", "755"))
        elif name in FRESH_DIRS and (host.exists() or name not in MERGED_USR):
            entries.append((name, "dir", oct(FRESH_DIRS[name])[2:]))
    return entries


def ensure_skeleton(cache_root: Path) -> Path:
    """Create (once) the top-level skeleton for this host; returns its directory."""
    spec = _skeleton_spec()
    digest = hashlib.sha256(repr(spec).encode()).hexdigest()[:16]
    target = cache_root / "skel" / digest
    if target.is_dir():
        return target
    tmp = cache_root / "skel" / f".tmp-{digest}-{os.getpid()}-{secrets.token_hex(4)}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name, kind, value in spec:
        p = tmp / name
        if kind == "link":
            p.symlink_to(value)
        else:
            p.mkdir()
            p.chmod(int(value, 8))
    tmp.chmod(0o755)
    try:
        tmp.rename(target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


_SECRET_FILES = ("shadow", "shadow-", "gshadow", "gshadow-")


def ensure_base_mask(cache_root: Path) -> Path | None:
    """A layer that sits right on the host ``/etc`` and hides its secrets (root only).

    Sandboxes run as root, so they could read the host's password hashes and private keys
    through the base. The mask replaces ``/etc/{g,}shadow*`` with copies whose password
    fields are ``*`` and whites out SSH host keys and ``/etc/ssl/private``. Returns the
    mask's ``etc`` directory, or None when there is nothing to hide.
    """
    if os.geteuid() != 0:
        return None  # unprivileged sandboxes cannot read these files anyway
    files: dict[str, tuple[bytes, os.stat_result]] = {}
    for name in _SECRET_FILES:
        p = Path("/etc", name)
        with contextlib.suppress(OSError):
            lines = []
            for line in p.read_bytes().splitlines():
                fields = line.split(b":")
                if len(fields) > 1:
                    fields[1] = b"*"
                lines.append(b":".join(fields))
            files[name] = (b"\n".join(lines) + b"\n", p.stat())
    hidden = sorted(
        str(p.relative_to("/etc"))
        for p in [*Path("/etc/ssh").glob("ssh_host_*_key"), *Path("/etc/ssl/private").glob("*")]
    )
    if not files and not hidden:
        return None
    digest = hashlib.sha256(repr((sorted(files.items()), hidden)).encode()).hexdigest()[:16]
    target = cache_root / "mask" / digest
    if (target / "etc").is_dir():
        return target / "etc"
    tmp = cache_root / "mask" / f".tmp-{digest}-{os.getpid()}-{secrets.token_hex(4)}"
    etc = tmp / "etc"
    etc.mkdir(parents=True)
    for name, (data, st) in files.items():
        (etc / name).write_bytes(data)
        os.chown(etc / name, st.st_uid, st.st_gid)
        os.chmod(etc / name, stat.S_IMODE(st.st_mode))
    for rel in hidden:
        (etc / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copystat(Path("/etc", rel).parent, (etc / rel).parent)
        os.mknod(etc / rel, stat.S_IFCHR | 0o000, os.makedev(0, 0))  # overlayfs whiteout
    try:
        tmp.rename(target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return target / "etc"


def _escape(path: str) -> str:
    return path.replace("\\", "\\\\").replace(":", "\\:").replace(",", "\\,")


@dataclass
class MountPlan:
    """Everything the session server needs to mount a root (see ``_forkserver.setup_root``)."""

    root: str
    tmpfs: dict[str, str] | None
    mkdirs: list[str]
    overlays: list[tuple[str, str]]
    mount_cwd: str
    rootless: bool = False

    def to_request(self) -> dict[str, object]:
        return {
            "rootless": self.rootless,
            "root": self.root,
            "tmpfs": self.tmpfs,
            "mkdirs": self.mkdirs,
            "overlays": self.overlays,
            "mount_cwd": self.mount_cwd,
        }


def plan_mounts(
    *,
    layers_dir: Path,
    layers: list[tuple[str, list[str]]],
    skeleton: Path,
    mountpoint: Path,
    upper_dir: Path | None = None,
    storage_bytes: int | None = None,
    rootless: bool = False,
    masks: dict[str, Path] | None = None,
) -> MountPlan:
    """Plan the overlays of a root.

    ``layers`` is bottom→top ``(layer key, parts present)``. With ``upper_dir`` the upper layers
    are written to disk under it (``fs/<part>`` + ``work/<part>``: a build step); otherwise they
    live on a tmpfs of ``storage_bytes`` mounted at ``mountpoint`` (a session).
    """
    if upper_dir is not None:
        up_base, work_base, root = upper_dir / "fs", upper_dir / "work", upper_dir / "merged"
        tmpfs = None
    else:
        up_base, work_base, root = mountpoint / "u", mountpoint / "w", mountpoint / "root"
        size = f"size={storage_bytes}" if storage_bytes else "size=50%"
        tmpfs = {"path": str(mountpoint), "options": f"{size},mode=755"}
    mkdirs = [str(root)]
    overlays: list[tuple[str, str]] = []
    for part in all_parts():
        lowers = [f"{key}/fs/{part}" for key, parts in reversed(layers) if part in parts]
        if masks and part in masks:
            lowers.append(str(masks[part]))
        lowers.append(str(skeleton) if part == ROOT_PART else f"/{part}")
        upper, work = up_base / part, work_base / part
        mkdirs += [str(upper), str(work)]
        target = root if part == ROOT_PART else root / part
        options = (
            "lowerdir="
            + ":".join(_escape(x) for x in lowers)
            + f",upperdir={_escape(str(upper))},workdir={_escape(str(work))}"
            + (",userxattr" if rootless else "")
        )
        if len(options) > MAX_MOUNT_DATA:
            raise ValueError(
                f"too many filesystem layers ({len(lowers)}) for one overlay mount; "
                "merge RUN steps in the Dockerfile"
            )
        overlays.append((str(target), options))
    return MountPlan(str(root), tmpfs, mkdirs, overlays, str(layers_dir), rootless)


def parts_present(fs_dir: Path) -> list[str]:
    """Parts of a finished layer's ``fs/`` that hold anything."""
    out = []
    with contextlib.suppress(FileNotFoundError):
        for p in sorted(fs_dir.iterdir()):
            if p.is_dir() and any(p.iterdir()):
                out.append(p.name)
    return out


def is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0
