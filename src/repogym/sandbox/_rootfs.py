"""The sandbox root filesystem: which host directories form the base and how layers stack on it.

A sandbox root is one overlay per *part*:

* ``@root`` — the top level. Its base is a generated skeleton holding only the allow-listed
  top-level entries of the host (``/usr``-merge symlinks, empty ``/root``, ``/home``, ``/tmp``,
  ``/mnt``, ...). Everything else on the host (``/work``, ``/farm``, caches, other tasks) simply
  does not exist inside.
* one part per host base directory (``usr``, ``etc``, ``var``, ``opt``). ``usr`` has the host
  directory itself as its read-only base, so the host's programs and libraries are there and
  ``apt-get install`` writes only to the session's upper layer. ``etc``, ``var`` and ``opt`` have
  a *minimal root* instead (:func:`ensure_root`): generated once per host state in the cache, it
  holds only what a Debian image of the same packages would hold — the packages' unmodified
  configuration files, system accounts, CA certificates, the package database — and none of the
  host's own additions (``/etc/pip.conf``, ``/opt/wheels``, a database under ``/var``, users).
  Toolchains the ``FROM`` mapping needs from ``/opt`` are bound in read-only.

A layer stores its diff per part (``<layer>/fs/<part>``), exactly what overlayfs wrote into the
upper directory of that part. Keeping the parts separate (instead of one overlay with the host
``/`` as its lowest layer) is what lets the layer cache live on the same filesystem as ``/``
without overlayfs refusing the mount for overlapping layers.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import os
import re
import secrets
import shutil
import stat
from dataclasses import dataclass, field
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


# --------------------------------------------------------------------------- minimal root

ROOT_VERSION = "minimal-1"
"""Enters every ``FROM`` layer key: layers built on another root are never reused."""
SANDBOX_HOSTNAME = "sandbox"
SANDBOX_DNS = "10.0.2.3"  # slirp4netns's resolver (forwards to the host's nameserver)
SYNTH_PARTS = ("etc", "var", "opt")
NOBODY = 65534

# Files under /etc not shipped by any package that a Debian image has anyway (made by
# maintainer scripts, ``update-*`` tools or the image builder). ``dir/**`` is a whole tree.
ETC_GENERATED = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d/*",
    "ca-certificates.conf",
    "ssl/certs/**",
    "alternatives/*",
    "localtime",
    "timezone",
    "locale.gen",
    "default/locale",
    "mtab",
    "profile",
    "inputrc",
    "shells",
    "networks",
    "dpkg/origins/*",
    "dpkg/dpkg.cfg.d/*",
    "apt/sources.list",
    "apt/sources.list.d/*.list",
    "apt/sources.list.d/*.sources",
    "apt/apt.conf.d/*",
    "apt/preferences.d/*",
    "apt/trusted.gpg",
    "apt/trusted.gpg.d/*",
    "apt/keyrings/*",
    "pam.d/common-*",
    "python3/debian_config",
    "fonts/conf.d/*",
)
# Never copied, whoever owns them: secrets, host identity, credentials, preloads.
ETC_DENIED = (
    "shadow*",
    "gshadow*",
    "passwd-",
    "group-",
    "subuid*",
    "subgid*",
    "ssh/ssh_host_*",
    "ssl/private/*",
    "apt/auth.conf",
    "apt/auth.conf.d/*",
    "security/opasswd",
    "machine-id",
    "ld.so.preload",
    "environment",
    ".pwd.lock",
)
# Written by us (see _synth_etc).
ETC_SYNTHESIZED = (
    "passwd",
    "group",
    "shadow",
    "gshadow",
    "hosts",
    "hostname",
    "resolv.conf",
    "nsswitch.conf",
)
# /var: the package manager's description of /usr, and empty standard directories.
VAR_TREES = ("lib/dpkg", "lib/ucf", "lib/pam")
VAR_FILES = ("lib/apt/extended_states", "cache/debconf/config.dat", "cache/debconf/templates.dat")
VAR_DIRS = (
    "backups",
    "cache/apt/archives/partial",
    "cache/ldconfig",
    "lib/apt/lists/partial",
    "lib/misc",
    "local",
    "log/apt",
    "mail",
    "opt",
    "spool",
    "tmp",
)
VAR_SKIP = re.compile(r"(-old|\.\d+)$|^lib/dpkg/lock")
_CREDENTIALS = re.compile(rb"(?i)proxy|://[^/\s\"']*@")

_NSSWITCH = """\
passwd:         files
group:          files
shadow:         files
gshadow:        files

hosts:          files dns
networks:       files

protocols:      db files
services:       db files
ethers:         db files
rpc:            db files

netgroup:       nis
"""


def _match(rel: str, patterns: tuple[str, ...]) -> bool:
    for pat in patterns:
        if pat.endswith("/**"):
            if rel.startswith(pat[:-2]):
                return True
        elif fnmatch.fnmatchcase(rel, pat) and rel.count("/") == pat.count("/"):
            return True
    return False


def _walk_stats(top: str) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []

    def walk(d: str) -> None:
        try:
            it = os.scandir(d)
        except OSError:
            return
        with it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                out.append((e.path, st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns))
                if stat.S_ISDIR(st.st_mode):
                    walk(e.path)

    walk(top)
    return out


def _root_fingerprint(opt_keep: tuple[str, ...]) -> str:
    """Cheap identity of the host state the minimal root is made from (stat only)."""
    stats: list[object] = [ROOT_VERSION, os.geteuid() == 0, opt_keep, _walk_stats("/etc")]
    dpkg = "/var/lib/dpkg"
    for rel in ("", "info", "alternatives", "triggers", "updates"):
        with contextlib.suppress(OSError):
            st = os.stat(os.path.join(dpkg, rel))
            stats.append((rel, st.st_mtime_ns, st.st_ino))
    for rel in ("lib/dpkg/status", "lib/dpkg/diversions", "lib/dpkg/statoverride", *VAR_FILES):
        with contextlib.suppress(OSError):
            st = os.stat(os.path.join("/var", rel))
            stats.append((rel, st.st_size, st.st_mtime_ns, st.st_ino))
    for name in opt_keep:
        with contextlib.suppress(OSError):
            stats.append((name, os.stat(os.path.join("/opt", name)).st_mode))
    return hashlib.sha256(repr(stats).encode()).hexdigest()[:16]


def _dpkg_checksums() -> tuple[dict[str, str], set[str]]:
    """(path → expected md5 of every pristine /etc file, every /etc path packages ship)."""
    sums: dict[str, str] = {}
    owned: set[str] = set()
    info = Path("/var/lib/dpkg/info")
    with contextlib.suppress(OSError):
        for entry in os.scandir(info):
            if entry.name.endswith(".list"):
                with open(entry.path, encoding="utf-8", errors="surrogateescape") as fh:
                    owned.update(
                        line.rstrip("\n") for line in fh if line.startswith(("/etc/", "/etc\n"))
                    )
            elif entry.name.endswith(".md5sums"):
                with open(entry.path, encoding="utf-8", errors="surrogateescape") as fh:
                    for line in fh:
                        digest, _, rel = line.rstrip("\n").partition("  ")
                        if rel.startswith("etc/"):
                            sums["/" + rel] = digest
    # ucf-managed files: registered with the checksum of the version the package installed.
    with contextlib.suppress(OSError):
        for line in Path("/var/lib/ucf/hashfile").read_text(errors="surrogateescape").splitlines():
            digest, _, path = line.partition("  ")
            if path.startswith("/etc/"):
                sums.setdefault(path, digest)
                owned.add(path)
    # Conffiles (from the status database) win: they are what dpkg compares against.
    with contextlib.suppress(OSError):
        in_conf = False
        with open("/var/lib/dpkg/status", encoding="utf-8", errors="surrogateescape") as fh:
            for line in fh:
                if line.startswith("Conffiles:"):
                    in_conf = True
                    continue
                if in_conf and line.startswith(" "):
                    fields = line.split()
                    if len(fields) >= 2 and fields[0].startswith("/etc/"):
                        sums[fields[0]] = fields[1]
                    continue
                in_conf = False
    return sums, owned


def _md5(path: str) -> str | None:
    h = hashlib.md5(usedforsecurity=False)
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


class _Copier:
    """Copies host entries into a new tree, keeping mode and (as root) ownership."""

    def __init__(self, src_top: str, dest_top: Path, *, link: bool = False) -> None:
        self.src_top = src_top
        self.dest_top = dest_top
        self.root = os.geteuid() == 0
        self.link = link
        """Hard-link regular files when possible (the package database: thousands of files
        that dpkg only ever replaces by renaming, so a link is a snapshot)."""

    def _meta(self, dst: Path, st: os.stat_result) -> None:
        if self.root:
            with contextlib.suppress(OSError):
                os.chown(dst, st.st_uid, st.st_gid, follow_symlinks=False)
        if not stat.S_ISLNK(st.st_mode):
            os.chmod(dst, stat.S_IMODE(st.st_mode))

    def parents(self, rel: str) -> None:
        parts = rel.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            self.dir("/".join(parts[:i]))

    def dir(self, rel: str, default_mode: int = 0o755) -> None:
        dst = self.dest_top / rel
        if dst.is_dir():
            return
        self.parents(rel)
        dst.mkdir()
        try:
            st = os.lstat(os.path.join(self.src_top, rel))
        except OSError:
            dst.chmod(default_mode)
            return
        if stat.S_ISDIR(st.st_mode):
            self._meta(dst, st)
        else:
            dst.chmod(default_mode)

    def entry(self, rel: str) -> bool:
        """Copy one file or symlink (not a directory); False when unreadable or absent."""
        src = os.path.join(self.src_top, rel)
        try:
            st = os.lstat(src)
        except OSError:
            return False
        dst = self.dest_top / rel
        if stat.S_ISLNK(st.st_mode):
            self.parents(rel)
            with contextlib.suppress(FileNotFoundError):
                dst.unlink()
            dst.symlink_to(os.readlink(src))
        elif stat.S_ISREG(st.st_mode):
            self.parents(rel)
            if self.link:
                try:
                    os.link(src, dst, follow_symlinks=False)
                    return True  # same inode: mode and owner are the host's already
                except OSError:
                    pass
            try:
                data = Path(src).read_bytes()
            except OSError:
                return False
            with contextlib.suppress(FileNotFoundError):
                dst.unlink()
            dst.write_bytes(data)
        elif stat.S_ISDIR(st.st_mode):
            self.dir(rel)
            return True
        else:
            return False
        self._meta(dst, st)
        return True

    def tree(self, rel: str, skip: re.Pattern[str] | None = None) -> None:
        src = os.path.join(self.src_top, rel)
        if not os.path.isdir(src) or os.path.islink(src):
            return
        self.dir(rel)
        for entry in sorted(os.listdir(src)):
            sub = f"{rel}/{entry}"
            if skip is not None and skip.search(sub):
                continue
            if os.path.isdir(os.path.join(src, entry)) and not os.path.islink(
                os.path.join(src, entry)
            ):
                self.tree(sub, skip)
            else:
                self.entry(sub)


def _read_db(path: str) -> list[list[str]]:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return []
    return [line.split(":") for line in text.splitlines() if line and not line.startswith("#")]


def _write_db(path: Path, rows: list[list[str]], like: str, mode: int) -> None:
    path.write_text(
        "".join(":".join(r) + "\n" for r in rows), encoding="utf-8", errors="surrogateescape"
    )
    try:
        st = os.stat(like)
        if os.geteuid() == 0:
            os.chown(path, st.st_uid, st.st_gid)
        os.chmod(path, stat.S_IMODE(st.st_mode))
    except OSError:
        os.chmod(path, mode)


def _system_id(value: str) -> bool:
    return value.isdigit() and (int(value) < 1000 or int(value) == NOBODY)


def _synth_accounts(etc: Path) -> None:
    """System accounts only (uid/gid < 1000, plus nobody/nogroup), no password hashes."""
    users = [r for r in _read_db("/etc/passwd") if len(r) >= 7 and _system_id(r[2])]
    if not any(r[0] == "root" for r in users):
        users.insert(0, ["root", "x", "0", "0", "root", "/root", "/bin/bash"])
    names = {r[0] for r in users}
    groups = []
    for r in _read_db("/etc/group"):
        if len(r) >= 4 and _system_id(r[2]):
            r[1] = "x"
            r[3] = ",".join(m for m in r[3].split(",") if m in names)
            groups.append(r[:4])
    if not any(r[0] == "root" for r in groups):
        groups.insert(0, ["root", "x", "0", ""])
    shadow_rows = {r[0]: r for r in _read_db("/etc/shadow") if len(r) >= 2}
    shadow = []
    for u in users:
        row = list(shadow_rows.get(u[0], [u[0], "*", "", "0", "99999", "7", "", "", ""]))
        row[1] = "*" if row[1] not in ("!", "!*") else row[1]
        shadow.append(row + [""] * (9 - len(row)))
    gshadow = []
    for g in groups:
        gshadow.append([g[0], "*", "", g[3]])
    _write_db(etc / "passwd", users, "/etc/passwd", 0o644)
    _write_db(etc / "group", groups, "/etc/group", 0o644)
    _write_db(etc / "shadow", shadow, "/etc/shadow", 0o640)
    _write_db(etc / "gshadow", gshadow, "/etc/gshadow", 0o640)


def _synth_etc(etc: Path) -> None:
    copier = _Copier("/etc", etc)
    etc.mkdir()
    etc.chmod(0o755)
    sums, owned = _dpkg_checksums()
    keep: list[str] = []
    for path in sorted(owned):
        rel = path[len("/etc/") :]
        if not rel or _match(rel, ETC_DENIED) or rel in ETC_SYNTHESIZED:
            continue
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            copier.dir(rel)
            continue
        pristine = stat.S_ISREG(st.st_mode) and path in sums and _md5(path) == sums[path]
        if stat.S_ISLNK(st.st_mode) or pristine:
            keep.append(rel)
    for dirpath, dirnames, filenames in os.walk("/etc"):
        dirnames.sort()
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(f"{dirpath}/{d}")]):
            rel = os.path.relpath(os.path.join(dirpath, name), "/etc")
            if f"/etc/{rel}" in owned or rel in ETC_SYNTHESIZED or _match(rel, ETC_DENIED):
                continue
            if not _match(rel, ETC_GENERATED):
                continue
            if rel.startswith("apt/") and os.path.isfile(f"/etc/{rel}"):
                with contextlib.suppress(OSError):
                    if _CREDENTIALS.search(Path(f"/etc/{rel}").read_bytes()):
                        continue
            keep.append(rel)
    for rel in keep:
        copier.entry(rel)
    _synth_accounts(etc)
    (etc / "hostname").write_text(SANDBOX_HOSTNAME + "\n")
    (etc / "hosts").write_text(
        "127.0.0.1\tlocalhost\n"
        "::1\tlocalhost ip6-localhost ip6-loopback\n"
        "ff02::1\tip6-allnodes\n"
        "ff02::2\tip6-allrouters\n"
        f"127.0.1.1\t{SANDBOX_HOSTNAME}\n"
    )
    (etc / "resolv.conf").write_text(f"nameserver {SANDBOX_DNS}\n")
    (etc / "nsswitch.conf").write_text(_NSSWITCH)
    for name in ("hostname", "hosts", "resolv.conf", "nsswitch.conf"):
        (etc / name).chmod(0o644)


def _synth_var(var: Path) -> None:
    copier = _Copier("/var", var, link=True)
    var.mkdir()
    with contextlib.suppress(OSError):
        var.chmod(stat.S_IMODE(os.stat("/var").st_mode))
    for rel in VAR_TREES:
        copier.tree(rel, VAR_SKIP)
    for rel in VAR_FILES:
        copier.entry(rel)
    for rel in VAR_DIRS:
        copier.dir(rel, 0o1777 if rel == "tmp" else 0o755)
    for rel in ("lock", "run"):
        if os.path.islink(f"/var/{rel}"):
            copier.entry(rel)
    for rel in ("log", "tmp"):
        (var / rel).chmod(0o755 if rel == "log" else 0o1777)


def _synth_opt(opt: Path, opt_keep: tuple[str, ...]) -> None:
    opt.mkdir()
    with contextlib.suppress(OSError):
        opt.chmod(stat.S_IMODE(os.stat("/opt").st_mode))
    for name in opt_keep:
        (opt / name).mkdir()  # mount point of a read-only bind of /opt/<name>


def ensure_root(cache_root: Path, opt_keep: tuple[str, ...] = ()) -> dict[str, Path]:
    """Create (once per host state) the minimal ``/etc``, ``/var`` and ``/opt`` of sandboxes.

    ``/etc`` holds the packages' configuration files that are unmodified (checksum as
    recorded by dpkg or ucf), the generated files a Debian image has (:data:`ETC_GENERATED`:
    CA certificates, alternatives, ``ld.so.cache``, apt sources …) and our own accounts,
    ``hosts``, ``hostname``, ``resolv.conf`` and ``nsswitch.conf``; never what the host's
    administrator added (``/etc/pip.conf`` …), private keys or password hashes. ``/var`` holds
    the package database and empty standard directories. ``/opt`` is empty but for mount points
    of ``opt_keep`` (toolchains bound in read-only). Returns the directory of each part.
    """
    opt_keep = tuple(sorted(set(opt_keep)))
    digest = _root_fingerprint(opt_keep)
    target = cache_root / "root" / digest
    if not target.is_dir():
        tmp = cache_root / "root" / f".tmp-{digest}-{os.getpid()}-{secrets.token_hex(4)}"
        tmp.mkdir(parents=True)
        try:
            _synth_etc(tmp / "etc")
            _synth_var(tmp / "var")
            _synth_opt(tmp / "opt", opt_keep)
            tmp.chmod(0o755)
            try:
                tmp.rename(target)
            except OSError:
                if not target.is_dir():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return {part: target / part for part in SYNTH_PARTS}


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
    binds: list[tuple[str, str]] = field(default_factory=list)
    """(host directory, mount point in the root): bound read-only over the overlays."""

    def to_request(self) -> dict[str, object]:
        return {
            "rootless": self.rootless,
            "root": self.root,
            "tmpfs": self.tmpfs,
            "mkdirs": self.mkdirs,
            "overlays": self.overlays,
            "mount_cwd": self.mount_cwd,
            "binds": self.binds,
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
    bases: dict[str, Path] | None = None,
    binds: list[str] | None = None,
    image: list[Path] | None = None,
) -> MountPlan:
    """Plan the overlays of a root.

    ``layers`` is bottom→top ``(layer key, parts present)``. With ``upper_dir`` the upper layers
    are written to disk under it (``fs/<part>`` + ``work/<part>``: a build step); otherwise they
    live on a tmpfs of ``storage_bytes`` mounted at ``mountpoint`` (a session). ``bases``
    replaces the host directory under a part (the minimal root, :func:`ensure_root`); ``binds``
    are absolute host directories shown read-only at the same path (toolchains under /opt).
    ``image`` (top→bottom folders: runtime files, a pulled image's root) replaces the host base
    altogether: one overlay for the whole root, whose layers hold only the ``@root`` part.
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
    for part in [ROOT_PART] if image else all_parts():
        lowers = [f"{key}/fs/{part}" for key, parts in reversed(layers) if part in parts]
        if image:
            lowers += [str(p) for p in image]
        elif part == ROOT_PART:
            lowers.append(str(skeleton))
        else:
            lowers.append(str(bases[part]) if bases and part in bases else f"/{part}")
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
    bind_plan = [] if image else [(src, str(root / src.lstrip("/"))) for src in binds or ()]
    return MountPlan(str(root), tmpfs, mkdirs, overlays, str(layers_dir), rootless, bind_plan)


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
