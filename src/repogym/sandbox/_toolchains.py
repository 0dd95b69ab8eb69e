"""``FROM`` mapping: official image names → this host's matching toolchain.

``python:3.X*`` → host CPython 3.X (pyenv), relocated into ``/usr/local`` like the official
image (only the standard library and pip/setuptools/wheel — never the host's other packages);
``node:<version>`` → the host node/npm install with that version prefix, else the one whose
major is closest (the substitution is noted in the mapping; installs on ``PATH`` and under
``/opt/*/bin``, ``/usr/local/lib/nodejs/*/bin`` and ``/usr/local/n/versions/node/*/bin`` count);
``rust:*`` → host rustup toolchain under ``/usr/local/{cargo,rustup}``; ``golang:*`` → host go;
``maven:<v>-<jdk image>-<N>`` → host JDK N and a host Maven (:mod:`._maven_image`);
``debian``/``ubuntu``/``buildpack-deps`` → the host base itself (noting where the release it
stands for differs, e.g. ``ubuntu:24.04``'s Python 3.12 on a Debian 12 host's 3.11). Image
names are normalised first (:mod:`._images`: registries, mirrors, digests), and well-known
derived images (:data:`._images.DERIVED`) map like the official image they build on."""

from __future__ import annotations

import contextlib
import functools
import glob
import hashlib
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from repogym.sandbox import _images
from repogym.sandbox._rootfs import ROOT_VERSION

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PYENV_ROOTS = ("/root/.pyenv/versions", "/usr/local/pyenv/versions", "/opt/pyenv/versions")
# Host directories sandboxes see: /usr, and the /opt toolchains of opt_toolchain_dirs().
_BASE_DIRS = ("/usr/", "/opt/")


class UnsupportedBase(ValueError):
    """The ``FROM`` image cannot be mapped onto this host."""


@dataclass
class BaseImage:
    image: str
    kind: str
    mapping: dict[str, str]
    env: dict[str, str]
    workdir: str = "/"
    fingerprint: str = ""
    populate: Callable[[Path], None] | None = None
    """Fills a fresh layer's ``fs/`` with the toolchain (None: nothing to add)."""
    post_commands: list[str] = field(default_factory=list)
    """Commands run in the sandbox after ``populate`` (same layer), e.g. ``ldconfig``."""
    rootfs: Path | None = None
    """A pulled image's root (:mod:`._pull`): the base instead of the host's ``/usr``."""
    lowers: list[Path] = field(default_factory=list)
    """With ``rootfs``: every read-only folder under the layers, top→bottom."""

    @property
    def host_mapped(self) -> bool:
        """True when the base is this host's system (``apt-get`` installs the host's
        distribution's packages)."""
        return self.rootfs is None


def _split_image(image: str) -> tuple[str, str]:
    try:
        ref = _images.parse(image)
    except _images.ImageRefError as exc:
        raise UnsupportedBase(str(exc)) from None
    return ref.short, ref.tag_or_latest


def _fingerprint(*parts: object) -> str:
    # The root's version enters every base: layers built on another root are never reused.
    return hashlib.sha256(repr((ROOT_VERSION, *parts)).encode()).hexdigest()


def _os_release() -> str:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return "unknown"
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)', text, re.M)
    return m.group(1) if m else "unknown"


def resolve(image: str) -> BaseImage:
    """Map a ``FROM`` image onto the host; raises :class:`UnsupportedBase`."""
    try:
        ref = _images.parse(image)
    except _images.ImageRefError as exc:
        raise UnsupportedBase(str(exc)) from None
    found = _images.derived(ref)
    if found is not None:
        official, entry = found
        base = _resolve(image, official)
        base.mapping["stands_for"] = official.familiar
        notes = [f"{ref.short} is {official.familiar} + {entry.adds}"]
        missing = [t for t in entry.adds_tools if not shutil.which(t, path="/usr/bin:/bin")]
        if missing:
            notes.append(f"the host base lacks {', '.join(missing)}")
        if base.mapping.get("note"):
            notes.append(base.mapping["note"])
        base.mapping["note"] = "; ".join(notes)
        return base
    return _resolve(image, ref)


def _resolve(image: str, ref: _images.ImageRef) -> BaseImage:
    name, tag = ref.short, ref.tag_or_latest
    host = _os_release()
    if name == "python":
        return _python(image, tag, host)
    if name == "node":
        return _node(image, tag, host)
    if name == "rust":
        return _rust(image, tag, host)
    if name == "golang":
        return _golang(image, tag, host)
    if name == "gcc":
        return _gcc(image, tag, host)
    if name in JDK_IMAGES:
        return _jdk(image, tag, host)
    if name == "maven":
        from repogym.sandbox._maven_image import maven_image

        return maven_image(image, tag, host)
    if name in ("debian", "ubuntu", "buildpack-deps") or name.startswith(("debian", "ubuntu")):
        base = _host_base(image, host, f"host base ({host})", distro_note(name, tag, host))
        if _before_pep668(name, tag) and _host_externally_managed():
            # pip installs into the system Python there; the host's refuses (PEP 668)
            base.env["PIP_BREAK_SYSTEM_PACKAGES"] = "1"
            note = f"{image} lets pip install into the system Python: PIP_BREAK_SYSTEM_PACKAGES=1"
            base.mapping["note"] = "; ".join(filter(None, [base.mapping.get("note"), note]))
            base.fingerprint = _fingerprint("host", host + "+pip-system")
        return base
    raise UnsupportedBase(
        f"cannot map base image {image!r} onto this host (supported: python:3.X, node, rust, "
        "golang, gcc, eclipse-temurin/openjdk, maven, debian, ubuntu, buildpack-deps, and the"
        " derived images in docs/sandbox.md)"
    )


def _host_base(image: str, host: str, label: str, note: str | None = None) -> BaseImage:
    mapping = {"from": image, "host": label}
    if note:
        mapping["note"] = note
    return BaseImage(
        image=image,
        kind="host",
        mapping=mapping,
        env={"PATH": DEFAULT_PATH},
        fingerprint=_fingerprint("host", host),
    )


def _gcc(image: str, tag: str, host: str) -> BaseImage:
    """``gcc:N`` is ``buildpack-deps`` (Debian) with GCC N: the host base with its own GCC."""
    have = (
        _tool_version(["/usr/bin/gcc", "-dumpfullversion"])
        if os.path.exists("/usr/bin/gcc")
        else ""
    )
    if not have:
        raise UnsupportedBase(f"{image}: the host base has no gcc (apt-get install gcc g++)")
    wanted = tag.split("-")[0]
    note = None
    if wanted != "latest" and not have.startswith(wanted.split(".")[0] + "."):
        note = f"{image} stands for GCC {wanted}; the host base has GCC {have}"
    return _host_base(image, host, f"host base ({host}) with GCC {have}", note)


JDK_IMAGES = ("eclipse-temurin", "openjdk", "amazoncorretto", "sapmachine", "ibmjava")
"""Official JDK images: mapped onto the host base with the host's JDK of the same major."""


def host_jdks() -> dict[str, Path]:
    """Major version → JDK home under /usr/lib/jvm (one with ``bin/javac``)."""
    found: dict[str, Path] = {}
    root = Path("/usr/lib/jvm")
    for home in sorted(root.iterdir()) if root.is_dir() else []:
        if home.is_symlink() or not (home / "bin" / "javac").is_file():
            continue
        m = re.search(r"(?:java|jdk|temurin|openjdk|corretto)-?(\d+)", home.name)
        if m:
            found.setdefault(m.group(1), home)
    return found


def _jdk(image: str, tag: str, host: str) -> BaseImage:
    m = re.match(r"^(\d+)", tag)
    jdks = host_jdks()
    major = m.group(1) if m else (max(jdks, key=int) if jdks else "")
    home = jdks.get(major)
    if home is None:
        have = ", ".join(f"JDK {k}" for k in sorted(jdks, key=int)) or "no JDK"
        raise UnsupportedBase(
            f"{image} needs JDK {major or '(latest)'}; this host has {have} under /usr/lib/jvm"
        )
    notes = [f"{image} is a JDK {major} image; its JDK is the host's {home}"]
    for codename, release in (("jammy", "22.04"), ("focal", "20.04"), ("noble", "24.04")):
        if codename in tag:
            distro = distro_note("ubuntu", release, host)
            if distro:
                notes.append(distro)
    base = _host_base(image, host, f"host base ({host}) with JDK {major}", "; ".join(notes))
    base.env = {"JAVA_HOME": str(home), "PATH": f"{home}/bin:{DEFAULT_PATH}"}
    base.fingerprint = _fingerprint("host", host, str(home))
    return base


# Releases an image tag stands for, with the python3 they ship (what tasks notice first).
DISTROS: dict[tuple[str, str], tuple[str, str]] = {
    ("ubuntu", "20.04"): ("Ubuntu 20.04", "3.8"),
    ("ubuntu", "focal"): ("Ubuntu 20.04", "3.8"),
    ("ubuntu", "22.04"): ("Ubuntu 22.04", "3.10"),
    ("ubuntu", "jammy"): ("Ubuntu 22.04", "3.10"),
    ("ubuntu", "24.04"): ("Ubuntu 24.04", "3.12"),
    ("ubuntu", "noble"): ("Ubuntu 24.04", "3.12"),
    ("ubuntu", "latest"): ("Ubuntu 24.04", "3.12"),
    ("debian", "11"): ("Debian 11", "3.9"),
    ("debian", "bullseye"): ("Debian 11", "3.9"),
    ("debian", "12"): ("Debian 12", "3.11"),
    ("debian", "bookworm"): ("Debian 12", "3.11"),
    ("debian", "13"): ("Debian 13", "3.13"),
    ("debian", "trixie"): ("Debian 13", "3.13"),
    ("debian", "latest"): ("Debian 12", "3.11"),
}


PRE_PEP668 = {"Ubuntu 20.04", "Ubuntu 22.04", "Debian 11"}
"""Releases whose system Python is not marked externally managed: ``pip install`` works."""


def _before_pep668(name: str, tag: str) -> bool:
    wanted = DISTROS.get((name, tag.split("-")[0]))
    return wanted is not None and wanted[0] in PRE_PEP668


@functools.lru_cache(maxsize=1)
def _host_externally_managed() -> bool:
    """The host's system Python refuses ``pip install`` outside a venv (PEP 668)."""
    return bool(glob.glob("/usr/lib/python3*/EXTERNALLY-MANAGED"))


@functools.lru_cache(maxsize=1)
def _host_python3() -> str:
    exists = os.path.exists("/usr/bin/python3")
    out = _tool_version(["/usr/bin/python3", "--version"]) if exists else ""
    m = re.search(r"(\d+\.\d+)", out)
    return m.group(1) if m else ""


def distro_note(name: str, tag: str, host: str) -> str | None:
    """How the host base differs from the release ``name:tag`` stands for (None: same)."""
    release = tag.split("-")[0]
    if name == "debian" and release in ("stable", "stable-slim"):
        release = "latest"
    wanted = DISTROS.get((name, release))
    if wanted is None:
        return None
    label, py = wanted
    number = label.split()[-1]
    if label.split()[0].lower() in host.lower() and f" {number}" in f" {host}":
        return None
    have = _host_python3()
    py_part = f" (python3 {py})" if py else ""
    host_py = f" (python3 {have})" if have else ""
    return f"{name}:{tag} stands for {label}{py_part}; mapped onto the host base {host}{host_py}"


# ---------------------------------------------------------------------------------- python


def python_installs() -> dict[str, Path]:
    """Installed CPython prefixes by full version (``3.11.7`` → prefix)."""
    out: dict[str, Path] = {}
    roots = list(PYENV_ROOTS)
    if os.environ.get("PYENV_ROOT"):
        roots.insert(0, os.path.join(os.environ["PYENV_ROOT"], "versions"))
    for root in roots:
        for d in sorted(glob.glob(os.path.join(root, "[0-9]*"))):
            version = os.path.basename(d)
            if re.fullmatch(r"\d+\.\d+\.\d+", version) and os.path.exists(
                os.path.join(d, "bin", "python" + ".".join(version.split(".")[:2]))
            ):
                out.setdefault(version, Path(d))
    return out


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def _python(image: str, tag: str, host: str) -> BaseImage:
    m = re.match(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?", tag)
    installs = python_installs()
    if tag in ("latest", "slim") or tag.startswith(("slim-", "bookworm", "bullseye")):
        want: tuple[int, ...] = (3,)
    elif m:
        want = tuple(int(x) for x in m.groups() if x is not None)
    else:
        raise UnsupportedBase(f"cannot understand python image tag {tag!r}")
    candidates = [v for v in installs if _vkey(v)[: len(want)] == want]
    if not candidates and len(want) == 3:
        candidates = [v for v in installs if _vkey(v)[:2] == want[:2]]
    if not candidates:
        have = ", ".join(sorted(installs, key=_vkey)) or "none"
        raise UnsupportedBase(
            f"{image} needs CPython {'.'.join(map(str, want))}, which is not installed on this "
            f"host (installed: {have})"
        )
    version = max(candidates, key=_vkey)
    prefix = installs[version]
    short = ".".join(version.split(".")[:2])
    binary = prefix / "bin" / f"python{short}"
    st = binary.stat()
    return BaseImage(
        image=image,
        kind="python",
        mapping={
            "from": image,
            "host": str(prefix),
            "python": version,
            "path": "/usr/local",
            "base": f"host base ({host})",
        },
        env={
            "PATH": "/usr/local/bin:" + DEFAULT_PATH.replace("/usr/local/bin:", ""),
            "LANG": "C.UTF-8",
            "PYTHON_VERSION": version,
        },
        fingerprint=_fingerprint("python", str(prefix), version, st.st_size, st.st_mtime_ns, host),
        populate=lambda fs: _populate_python(prefix, short, fs),
        post_commands=["ldconfig"],
    )


_KEEP_SITE = re.compile(
    r"^(pip|setuptools|wheel|_distutils_hack|pkg_resources|distutils-precedence)"
)
_KEEP_BIN = re.compile(r"^(python|pip|pydoc|idle|2to3)[0-9.]*(-config)?$")
_SKIP_STDLIB = {"test", "tests", "idle_test", "site-packages", "__pycache__"}


class _Linker:
    """Hard-link files into the layer when on the same filesystem, else copy them."""

    def __init__(self, dest: Path) -> None:
        self.dest_dev = dest.stat().st_dev if dest.exists() else None

    def file(self, src: Path, dst: Path) -> None:
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
            return
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    def tree(self, src: Path, dst: Path, skip: Callable[[Path], bool] | None = None) -> None:
        dst.mkdir(parents=True, exist_ok=True)
        shutil.copystat(src, dst)
        for entry in os.scandir(src):
            s, d = Path(entry.path), dst / entry.name
            if skip and skip(s):
                continue
            if entry.is_dir(follow_symlinks=False):
                self.tree(s, d, skip)
            elif entry.is_file(follow_symlinks=False) or entry.is_symlink():
                self.file(s, d)


def _rewrite(src: Path, dst: Path, old: str, new: str) -> None:
    """Copy a text file replacing the old install prefix (a new inode: never the host's)."""
    data = src.read_bytes()
    dst.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        dst.unlink()
    dst.write_bytes(data.replace(old.encode(), new.encode()))
    shutil.copystat(src, dst)


def _is_text_with(path: Path, needle: bytes) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(65536)
    except OSError:
        return False
    return b"\0" not in head[:4096] and needle in head


def _populate_python(prefix: Path, short: str, fs: Path) -> None:
    dest = fs / "usr" / "local"
    dest.mkdir(parents=True, exist_ok=True)
    link = _Linker(dest)
    old, new = str(prefix), "/usr/local"
    for entry in sorted((prefix / "bin").iterdir()):
        if not _KEEP_BIN.match(entry.name):
            continue
        target = dest / "bin" / entry.name
        if not entry.is_symlink() and _is_text_with(entry, old.encode()):
            _rewrite(entry, target, old, new)
        else:
            link.file(entry, target)
    lib = prefix / "lib"
    for entry in sorted(lib.iterdir()):
        if entry.name.startswith("libpython"):
            link.file(entry, dest / "lib" / entry.name)
    pc = lib / "pkgconfig"
    if pc.is_dir():
        for entry in pc.iterdir():
            if entry.is_symlink():
                link.file(entry, dest / "lib" / "pkgconfig" / entry.name)
            else:
                _rewrite(entry, dest / "lib" / "pkgconfig" / entry.name, old, new)
    stdlib = lib / f"python{short}"

    def skip(p: Path) -> bool:
        return (
            p.parent == stdlib
            and p.name in ("site-packages",)
            or (p.is_dir() and p.name in ("test", "tests", "idle_test"))
        )

    link.tree(stdlib, dest / "lib" / f"python{short}", skip)
    # Files that carry the build prefix: rewrite so tools see /usr/local.
    for f in list(stdlib.glob("_sysconfigdata*.py")) + list(stdlib.glob("config-*/*")):
        if f.is_file() and not f.is_symlink() and _is_text_with(f, old.encode()):
            _rewrite(f, dest / "lib" / f"python{short}" / f.relative_to(stdlib), old, new)
    for pyc in (dest / "lib" / f"python{short}" / "__pycache__").glob("_sysconfigdata*"):
        pyc.unlink()
    site = stdlib / "site-packages"
    site_dst = dest / "lib" / f"python{short}" / "site-packages"
    site_dst.mkdir(parents=True, exist_ok=True)
    if site.is_dir():
        for entry in sorted(site.iterdir()):
            if _KEEP_SITE.match(entry.name):
                if entry.is_dir() and not entry.is_symlink():
                    link.tree(entry, site_dst / entry.name)
                else:
                    link.file(entry, site_dst / entry.name)
    include = prefix / "include" / f"python{short}"
    if include.is_dir():
        link.tree(include, dest / "include" / f"python{short}")
    for name in ("python", "python3"):
        p = dest / "bin" / name
        if not p.exists() and not p.is_symlink():
            p.symlink_to(f"python{short}")
    for name in ("pip", "pip3"):
        p = dest / "bin" / name
        if not p.exists() and (dest / "bin" / f"pip{short}").exists():
            p.symlink_to(f"pip{short}")


# ---------------------------------------------------------------------------- node / go


def _tool_version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else ""


def _visible(path: str) -> bool:
    return path.startswith(_BASE_DIRS)


NODE_GLOBS = (
    "/opt/*/bin/node",
    "/opt/*/*/bin/node",
    "/usr/local/lib/nodejs/*/bin/node",
    "/usr/local/n/versions/node/*/bin/node",
)
"""Where Node installs besides the one on ``PATH`` are looked for (only ``/usr`` and ``/opt`` are
visible inside sandboxes; nvm's ``~/.nvm`` is not)."""


@functools.lru_cache(maxsize=1)
def host_node_installs() -> dict[str, str]:
    """Node installs the sandbox can map ``node:*`` onto: version → real path of ``node``.

    The one on ``PATH`` comes first; a version found twice keeps its first path.
    """
    found: dict[str, str] = {}
    candidates = [shutil.which("node") or ""]
    for pattern in NODE_GLOBS:
        candidates += sorted(glob.glob(pattern))
    for path in candidates:
        if not path:
            continue
        real = os.path.realpath(path)
        if not _visible(real) or not os.access(real, os.X_OK):
            continue
        version = _tool_version([real, "--version"]).lstrip("v")
        if re.fullmatch(r"\d+\.\d+\.\d+", version) and version not in found:
            found[version] = real
    return found


def default_node() -> str | None:
    """The version of the ``node`` on ``PATH`` (None without one)."""
    node = shutil.which("node")
    if not node:
        return None
    real = os.path.realpath(node)
    return next((v for v, p in host_node_installs().items() if p == real), None)


def choose_node_install(tag: str) -> tuple[str, str, str | None]:
    """The host install for a ``node:<tag>`` image: ``(version, node path, note)``.

    A tag naming a version (``22``, ``22.12``, ``22.12.0-slim``) maps onto the newest install
    with that prefix, else onto the install whose major is closest (a newer one wins a tie) and
    the note says so; other tags (``latest``, ``slim``, ``lts``, ``current``) take the one on
    ``PATH``. Raises :class:`UnsupportedBase` without any install.
    """
    installs = host_node_installs()
    if not installs:
        raise UnsupportedBase(f"node:{tag} needs node, which is not installed on this host")
    default = default_node() or next(iter(installs))
    m = re.match(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?", tag)
    if not m:
        return default, installs[default], None
    want = tuple(int(x) for x in m.groups() if x is not None)
    exact = [v for v in installs if _vkey(v)[: len(want)] == want]
    if exact:
        version = max(exact, key=_vkey)
        return version, installs[version], None
    major = want[0]
    version = min(
        installs,
        key=lambda v: (abs(_vkey(v)[0] - major), _vkey(v)[0] < major, [-x for x in _vkey(v)]),
    )
    have = ", ".join(sorted(installs, key=_vkey))
    wanted = ".".join(map(str, want))
    note = f"requested node {wanted}, host has {have}: mapped to the closest, {version}"
    return version, installs[version], note


def opt_toolchain_dirs() -> list[str]:
    """Names of the ``/opt`` entries the ``FROM`` mapping needs inside sandboxes.

    Sandboxes see an empty ``/opt``; node or go installed under ``/opt/<name>`` (and a pyenv
    root there) are bound in read-only, nothing else of the host's ``/opt``.
    """
    names: set[str] = set()
    paths = [os.path.realpath(p) for t in ("node", "npm", "go") if (p := shutil.which(t))]
    paths += list(host_node_installs().values())
    roots = list(PYENV_ROOTS)
    if os.environ.get("PYENV_ROOT"):
        roots.append(os.path.join(os.environ["PYENV_ROOT"], "versions"))
    paths += [os.path.realpath(r) for r in roots if os.path.isdir(r)]
    for path in paths:
        parts = path.split("/")
        if len(parts) > 3 and parts[1] == "opt" and os.path.isdir(f"/opt/{parts[2]}"):
            names.add(parts[2])
    return sorted(names)


def _node(image: str, tag: str, host: str) -> BaseImage:
    if not host_node_installs():
        node = shutil.which("node")
        if node:
            raise UnsupportedBase(
                f"{image}: host node lives at {os.path.realpath(node)}, outside the directories"
                " the sandbox sees (/usr, /opt); install node system-wide"
            )
        raise UnsupportedBase(f"{image} needs node, which is not installed on this host")
    version, real, note = choose_node_install(tag)
    mapping = {"from": image, "host": real, "node": version, "base": f"host base ({host})"}
    if note:
        mapping["note"] = note
    bindir = os.path.dirname(real)
    path = DEFAULT_PATH if bindir in DEFAULT_PATH.split(":") else f"{bindir}:{DEFAULT_PATH}"
    return BaseImage(
        image=image,
        kind="node",
        mapping=mapping,
        env={"PATH": path, "NODE_VERSION": version},
        fingerprint=_fingerprint("node", real, version, host),
    )


def _golang(image: str, tag: str, host: str) -> BaseImage:
    go = shutil.which("go")
    if not go:
        raise UnsupportedBase(f"{image} needs Go, which is not installed on this host")
    real = os.path.realpath(go)
    if not _visible(real):
        raise UnsupportedBase(f"{image}: host go lives at {real}, outside /usr or /opt")
    out = _tool_version([go, "version"])
    m = re.search(r"go(\d+\.\d+(?:\.\d+)?)", out)
    version = m.group(1) if m else "unknown"
    mapping = {"from": image, "host": real, "go": version, "base": f"host base ({host})"}
    want = re.match(r"^(\d+\.\d+)", tag)
    if want and not version.startswith(want.group(1)):
        mapping["note"] = f"requested go {want.group(1)}, host has {version}"

    def populate(fs: Path) -> None:
        for sub in ("src", "bin"):
            d = fs / "@root" / "go" / sub
            d.mkdir(parents=True, exist_ok=True)
            d.chmod(0o777)
        (fs / "@root" / "go").chmod(0o777)

    return BaseImage(
        image=image,
        kind="golang",
        mapping=mapping,
        env={
            "GOLANG_VERSION": version,
            "GOTOOLCHAIN": "local",
            "GOPATH": "/go",
            "PATH": "/go/bin:/usr/local/go/bin:" + DEFAULT_PATH,
        },
        workdir="/go",
        fingerprint=_fingerprint("golang", real, version, host),
        populate=populate,
    )


# ------------------------------------------------------------------------------------ rust


def _rust(image: str, tag: str, host: str) -> BaseImage:
    cargo_home = Path(os.environ.get("CARGO_HOME", "/root/.cargo"))
    rustup_home = Path(os.environ.get("RUSTUP_HOME", "/root/.rustup"))
    if not (cargo_home / "bin" / "cargo").exists():
        raise UnsupportedBase(f"{image} needs cargo, which is not installed on this host")
    toolchain = None
    settings = rustup_home / "settings.toml"
    if settings.is_file():
        m = re.search(r'^default_toolchain\s*=\s*"([^"]+)"', settings.read_text(), re.M)
        if m:
            toolchain = m.group(1)
    tc_dir = rustup_home / "toolchains" / toolchain if toolchain else None
    if tc_dir is None or not tc_dir.is_dir():
        raise UnsupportedBase(f"{image}: no default rustup toolchain found under {rustup_home}")
    out = _tool_version([str(tc_dir / "bin" / "rustc"), "--version"])
    m = re.search(r"rustc (\d+\.\d+\.\d+)", out)
    version = m.group(1) if m else "unknown"
    mapping = {"from": image, "host": str(tc_dir), "rust": version, "path": "/usr/local/rustup"}
    want = re.match(r"^(\d+\.\d+)", tag)
    if want and not version.startswith(want.group(1)):
        mapping["note"] = f"requested rust {want.group(1)}, host has {version}"
    st = (tc_dir / "bin" / "rustc").stat()

    def populate(fs: Path) -> None:
        local = fs / "usr" / "local"
        link = _Linker(local)
        bin_dst = local / "cargo" / "bin"
        bin_dst.mkdir(parents=True, exist_ok=True)
        for entry in (cargo_home / "bin").iterdir():
            link.file(entry, bin_dst / entry.name)
        ru = local / "rustup"
        ru.mkdir(parents=True, exist_ok=True)
        (ru / "settings.toml").write_text(
            f'version = "12"\ndefault_toolchain = "{toolchain}"\nprofile = "default"\n'
        )
        link.tree(tc_dir, ru / "toolchains" / str(toolchain))
        # The official image names its toolchain by version: RUSTUP_TOOLCHAIN=<version> (how
        # recipes override a repository's rust-toolchain file) must find it here too.
        triple = str(toolchain).split("-", 1)[1] if "-" in str(toolchain) else ""
        by_version = ru / "toolchains" / (f"{version}-{triple}" if triple else version)
        if not by_version.exists():
            by_version.symlink_to(str(toolchain))
        for d in (local / "cargo", ru):
            for p in [d, *d.rglob("*")]:
                if p.is_dir() and not p.is_symlink():
                    p.chmod(p.stat().st_mode | stat.S_IWGRP | stat.S_IWOTH | stat.S_IXOTH)

    return BaseImage(
        image=image,
        kind="rust",
        mapping=mapping,
        env={
            "RUSTUP_HOME": "/usr/local/rustup",
            "CARGO_HOME": "/usr/local/cargo",
            "PATH": "/usr/local/cargo/bin:" + DEFAULT_PATH,
            "RUST_VERSION": version,
        },
        fingerprint=_fingerprint(
            "rust", str(tc_dir), version, st.st_size, st.st_mtime_ns, host, "by-version"
        ),
        populate=populate,
    )
