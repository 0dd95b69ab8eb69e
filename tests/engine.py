"""A real Docker engine for the tests, started here and kept offline.

The engine (Debian's ``docker.io``) runs with its socket, data and exec roots under a temporary
folder, without a bridge network or firewall rules (``--bridge=none --iptables=false …``), and
with its proxy pointed at a closed loopback port, so any pull fails at once instead of leaving
the machine. Docker Hub is not reachable from the project's machines, so the base images the
tests' Dockerfiles name are **stand-ins** made from Debian's packages (``debootstrap
--variant=minbase bookworm`` and ``docker import``), kept faithful to the real slim images: no
``git``, no ``patch``. ``python:3.11-slim`` is Debian's own Python 3.11 with pip;
``python:3.X-slim`` (3.9, 3.10, 3.12, 3.13) is the host's pyenv build copied in; ``node:20-slim`` is the host's
Node 20 with its npm. Each carries the host's CA bundle (see ``HOST_BUNDLE``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(os.environ.get("REPOGYM_TEST_CACHE", Path.home() / ".cache" / "repogym-tests"))
CLOSED_PORT = "http://127.0.0.1:9"
"""Where the engine's proxy points: nothing listens there, so a pull fails at once."""
HOST_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
"""The host's CA bundle: the package registries' certificate chain here is signed by it, so the
stand-ins carry it (a build that installs from PyPI or npm over the host network needs it)."""
CA_VARIABLES = ("SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")


@dataclass(frozen=True)
class StandIn:
    """How to make a stand-in of an image from Debian's packages and the host's toolchains."""

    packages: tuple[str, ...] = ()
    """Debian packages added to the minimal bookworm root."""
    python: str | None = None
    """A host pyenv version folder copied in at the same path (``bin/`` on ``PATH``, ``python3``,
    ``python`` and ``pip`` linked in ``/usr/local/bin``), as the official Python images have their
    own build under ``/usr/local``."""
    node: bool = False
    """The host's Node (``/usr/bin/node`` and its bundled npm) under ``/usr/local``, as in the
    official Node images."""


PYENV = Path("/root/.pyenv/versions")
PYTHON_LIBS = (
    "ca-certificates",
    "libffi8",
    "libsqlite3-0",
    "libreadline8",
    "libncursesw6",
    "libgdbm6",
)


def _pyenv(minor: str) -> str | None:
    """The newest host pyenv build of Python ``3.<minor>``."""
    found = sorted(PYENV.glob(f"3.{minor}.*"), key=lambda p: [int(x) for x in p.name.split(".")])
    return found[-1].name if found else None


STAND_INS = {
    # Debian's Python 3.11 with pip, allowed to install system-wide as the official image is
    "python:3.11-slim": StandIn(("python3", "python3-pip", "python3-venv", "ca-certificates")),
    **{
        f"python:3.{minor}-slim": StandIn(PYTHON_LIBS, python=_pyenv(str(minor)))
        for minor in (9, 10, 12, 13)
        if _pyenv(str(minor))
    },
    "node:20-slim": StandIn(("ca-certificates",), node=True),
    "debian:bookworm-slim": StandIn(),
}
EAGER = ("python:3.11-slim", "debian:bookworm-slim")
"""Stand-ins made when the tests' engine starts; a test that needs another calls ``stand_in``."""
PREPARED = (*EAGER, "python:3.12-slim")
"""Stand-ins whose root tarballs are made before the tests (``python:3.12-slim``: the base of
the generated tasks ``tests/hub/test_images.py`` pushes)."""


class Engine:
    """A running engine: ``host`` is its ``DOCKER_HOST``."""

    def __init__(self, root: Path, proc: subprocess.Popen[bytes]) -> None:
        self.root = root
        self.proc = proc
        self.host = f"unix://{root}/docker.sock"

    def docker(self, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "DOCKER_HOST": self.host}
        return subprocess.run(  # type: ignore[call-overload, no-any-return]
            ["docker", *args], env=env, capture_output=True, text=True, **kw
        )

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        # Overlay mounts the engine left under its data root go before the folder does.
        subprocess.run(
            f"grep -o ' {self.root}[^ ]*' /proc/self/mounts | sort -r | xargs -r -n1 umount -l",
            shell=True,
            check=False,
        )
        shutil.rmtree(self.root, ignore_errors=True)


GIVEN_ENGINE = "REPOGYM_TEST_DOCKER_HOST"
"""Set to a ``DOCKER_HOST`` (e.g. ``unix:///run/user/1000/podman/podman.sock``) to run the engine
tests against that engine instead of starting one."""


class ExternalEngine(Engine):
    """An engine this module did not start: never stopped here."""

    def __init__(self, host: str) -> None:
        self.root = Path(tempfile.gettempdir())
        self.host = host

    def stop(self) -> None:
        return None


def why_no_engine(driver: str = "overlay2") -> str | None:
    """None when an engine with that storage driver can be started here, else the reason."""
    if os.geteuid() != 0:
        return "starting a Docker engine needs root"
    for tool in ("dockerd", "docker"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/setup.sh test installs docker.io)"
    if driver == "btrfs":
        if shutil.which("mkfs.btrfs") is None:
            return "mkfs.btrfs is not installed (scripts/setup.sh test installs btrfs-progs)"
        if "btrfs" not in Path("/proc/filesystems").read_text():
            return "this kernel has no btrfs"
    return None


def start_engine(driver: str = "overlay2") -> Engine:
    """Start an engine (about 5 s) and wait until it answers. ``btrfs``: its data root is a
    btrfs file system in a sparse file (the storage driver with a size quota on any kernel
    that has btrfs; overlay2's needs xfs with project quotas)."""
    root = Path(tempfile.mkdtemp(prefix="rg-dockerd-", dir="/tmp"))  # short: socket paths
    if driver == "btrfs":
        image = root / "data.img"
        with open(image, "wb") as fh:
            fh.truncate(16 << 30)
        (root / "data").mkdir()
        subprocess.run(["mkfs.btrfs", "-q", str(image)], check=True, capture_output=True)
        subprocess.run(["mount", "-o", "loop", str(image), str(root / "data")], check=True)
    env = {
        **os.environ,
        "HTTP_PROXY": CLOSED_PORT,
        "HTTPS_PROXY": CLOSED_PORT,
        "http_proxy": CLOSED_PORT,
        "https_proxy": CLOSED_PORT,
        "NO_PROXY": "",
    }
    log = open(root / "dockerd.log", "wb")  # noqa: SIM115 - the engine's lifetime
    proc = subprocess.Popen(
        [
            "dockerd",
            f"--host=unix://{root}/docker.sock",
            f"--data-root={root}/data",
            f"--exec-root={root}/exec",
            f"--pidfile={root}/docker.pid",
            "--bridge=none",
            "--iptables=false",
            "--ip6tables=false",
            "--ip-forward=false",
            "--ip-masq=false",
            f"--storage-driver={driver}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    engine = Engine(root, proc)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if engine.docker("version", timeout=30).returncode == 0:
            return engine
        time.sleep(0.5)
    text = (root / "dockerd.log").read_text(errors="replace")[-2000:]
    engine.stop()
    raise RuntimeError(f"the Docker engine did not start:\n{text}")


def _mirror() -> str:
    """Debian's mirror as apt's sources name it."""
    for path in sorted(Path("/etc/apt").glob("sources.list*")) + sorted(
        Path("/etc/apt/sources.list.d").glob("*")
    ):
        if not path.is_file():
            continue
        for line in path.read_text(errors="replace").splitlines():
            line = line.strip()
            if line.startswith("URIs:") and "debian" in line and "security" not in line:
                return line.split()[1]
            if line.startswith("deb ") and "debian" in line and "security" not in line:
                return [w for w in line.split() if "://" in w][0]
    return "http://deb.debian.org/debian"


def _debootstrap(packages: tuple[str, ...]) -> Path:
    """A minimal bookworm root with ``packages``, cached as a tarball."""
    key = hashlib.sha256(repr(("bookworm", packages)).encode()).hexdigest()[:12]
    tarball = CACHE / "images" / f"bookworm-{key}.tar"
    if tarball.is_file():
        return tarball
    tarball.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rg-debootstrap-"))
    try:
        rootfs = work / "root"
        include = ["--include=" + ",".join(packages)] if packages else []
        subprocess.run(
            ["debootstrap", "--variant=minbase", *include, "bookworm", str(rootfs), _mirror()],
            check=True,
            capture_output=True,
            timeout=1200,
        )
        shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
        partial = tarball.with_suffix(".part")
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(partial), "."], check=True)
        partial.rename(tarball)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tarball


def _link(root: Path, at: str, target: str) -> None:
    path = root / at.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        path.unlink()
    path.symlink_to(target)


def _image_tarball(tag: str, recipe: StandIn) -> tuple[Path, list[str]]:
    """The stand-in's root as a tarball (cached, keyed by the recipe and the host parts it
    copies) and the ``ENV`` lines of its configuration."""
    base = _debootstrap(recipe.packages)
    path = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
    bundle = HOST_BUNDLE.read_bytes() if HOST_BUNDLE.is_file() else b""
    env = [f"{name}={HOST_BUNDLE}" for name in CA_VARIABLES] if bundle else []
    host_python = PYENV / recipe.python if recipe.python else None
    if host_python is not None:
        path.insert(0, f"{host_python}/bin")
    env.append("PATH=" + ":".join(path))
    parts = repr((tag, recipe, hashlib.sha256(bundle).hexdigest(), base.name))
    key = hashlib.sha256(parts.encode()).hexdigest()[:12]
    tarball = CACHE / "images" / f"{tag.replace(':', '-')}-{key}.tar"
    if tarball.is_file():
        return tarball, env
    work = Path(tempfile.mkdtemp(prefix="rg-standin-"))
    try:
        rootfs = work / "root"
        rootfs.mkdir()
        subprocess.run(["tar", "-C", str(rootfs), "-xf", str(base)], check=True)
        if bundle:
            (rootfs / HOST_BUNDLE.relative_to("/")).parent.mkdir(parents=True, exist_ok=True)
            (rootfs / HOST_BUNDLE.relative_to("/")).write_bytes(bundle)
        if "python3" in recipe.packages:  # the official image's `python`, `pip`, no PEP 668 lock
            for name, target in (("python", "python3"), ("python3", "python3"), ("pip", "pip3")):
                _link(rootfs, f"/usr/local/bin/{name}", f"/usr/bin/{target}")
            for marker in rootfs.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
                marker.unlink()
        if host_python is not None:
            if not host_python.is_dir():
                raise RuntimeError(f"{tag} needs the host's Python at {host_python}")
            shutil.copytree(host_python, rootfs / str(host_python).lstrip("/"), symlinks=True)
            for name in ("python", "python3", "pip", "pip3"):
                real = "pip3" if name.startswith("pip") else "python3"
                _link(rootfs, f"/usr/local/bin/{name}", f"{host_python}/bin/{real}")
        if recipe.node:
            shutil.copy2("/usr/bin/node", rootfs / "usr/local/bin/node")
            shutil.copytree(
                "/usr/lib/node_modules/npm",
                rootfs / "usr/local/lib/node_modules/npm",
                symlinks=True,
            )
            _link(rootfs, "/usr/local/bin/npm", "../lib/node_modules/npm/bin/npm-cli.js")
            _link(rootfs, "/usr/local/bin/npx", "../lib/node_modules/npm/bin/npx-cli.js")
        partial = tarball.with_suffix(".part")
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(partial), "."], check=True)
        partial.rename(tarball)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tarball, env


def stand_in(engine: Engine, tag: str) -> None:
    """Make ``tag`` on ``engine`` from Debian's packages and the host's toolchains (cached)."""
    if engine.docker("image", "inspect", tag).returncode == 0:
        return
    tarball, env = _image_tarball(tag, STAND_INS[tag])
    changes = ["--change", 'CMD ["bash"]']
    for line in env:
        changes += ["--change", f"ENV {line}"]
    with open(tarball, "rb") as fh:
        done = subprocess.run(
            ["docker", "import", *changes, "-", tag],
            stdin=fh,
            env={**os.environ, "DOCKER_HOST": engine.host},
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        raise RuntimeError(f"docker import {tag}: {done.stderr.strip()}")


def no_engine(why: str | None) -> None:
    """Skip the test when no engine can start (``why``), or fail it where one is required
    (``REPOGYM_REQUIRE_ENGINE=1``, set by ``scripts/test.sh`` as root)."""
    import pytest  # noqa: PLC0415 - this module is also used outside pytest

    if why is None:
        return
    if os.environ.get("REPOGYM_REQUIRE_ENGINE") == "1":
        pytest.fail(f"REPOGYM_REQUIRE_ENGINE=1 but {why}")
    pytest.skip(why)


def engine_fixture() -> Iterator[Engine]:
    """The tests' engine for a session, with ``DOCKER_HOST`` pointing at it meanwhile and the
    small stand-ins made (others: call :func:`stand_in` first)."""
    given = os.environ.get(GIVEN_ENGINE, "").strip()
    running: Engine
    if given:  # an engine someone else runs (rootless Docker, Podman's Docker API)
        running = ExternalEngine(given)
    else:
        no_engine(why_no_engine())
        running = start_engine()
    before = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = running.host
    try:
        for tag in EAGER:
            stand_in(running, tag)
        yield running
    finally:
        if before is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = before
        running.stop()  # an ExternalEngine is left running


def prepare() -> None:
    """Make the stand-ins' root tarballs the engine fixture imports (cached; minutes the first
    time): run by ``scripts/test.sh`` before pytest, so no test's time limit pays for them."""
    if why_no_engine() is not None:
        return
    for tag in PREPARED:
        if tag not in STAND_INS:
            continue
        started = time.monotonic()
        _image_tarball(tag, STAND_INS[tag])
        took = time.monotonic() - started
        if took > 1:
            print(f"test engine: stand-in {tag} made in {took:.0f} s", flush=True)


if __name__ == "__main__":
    prepare()
