"""A real Docker engine for the tests, started here and kept offline.

The engine (Debian's ``docker.io``) runs with its socket, data and exec roots under a temporary
folder, without a bridge network or firewall rules (``--bridge=none --iptables=false …``), and
with its proxy pointed at a closed loopback port, so any pull fails at once instead of leaving
the machine. Docker Hub is not reachable from the project's machines, so the base images the
tests' Dockerfiles name are **stand-ins** made from Debian's packages (``debootstrap
--variant=minbase bookworm`` and ``docker import``), kept faithful to the real slim images: no
``git``, no ``patch``. ``python:3.11-slim`` is Debian's own Python 3.11.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CACHE = Path(os.environ.get("REPOGYM_TEST_CACHE", Path.home() / ".cache" / "repogym-tests"))
CLOSED_PORT = "http://127.0.0.1:9"
"""Where the engine's proxy points: nothing listens there, so a pull fails at once."""
STAND_INS = {
    # tag: packages added to the minimal bookworm root
    "python:3.11-slim": ("python3", "ca-certificates"),
    "debian:bookworm-slim": (),
}


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


def why_no_engine() -> str | None:
    """None when an engine can be started here, else the reason."""
    if os.geteuid() != 0:
        return "starting a Docker engine needs root"
    for tool in ("dockerd", "docker"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/setup.sh test installs docker.io)"
    return None


def start_engine() -> Engine:
    """Start an engine (about 5 s) and wait until it answers."""
    root = Path(tempfile.mkdtemp(prefix="rg-dockerd-", dir="/tmp"))  # short: socket paths
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
            "--storage-driver=overlay2",
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


def stand_in(engine: Engine, tag: str) -> None:
    """Make ``tag`` on ``engine`` from Debian's packages (cached as a tarball)."""
    if engine.docker("image", "inspect", tag).returncode == 0:
        return
    packages = STAND_INS[tag]
    key = hashlib.sha256(repr(("bookworm", packages)).encode()).hexdigest()[:12]
    tarball = CACHE / "images" / f"bookworm-{key}.tar"
    if not tarball.is_file():
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
            if "python3" in packages:  # the slim images' `python` and /usr/local/bin
                (rootfs / "usr/local/bin/python").symlink_to("/usr/bin/python3")
                (rootfs / "usr/local/bin/python3").symlink_to("/usr/bin/python3")
            shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
            partial = tarball.with_suffix(".part")
            subprocess.run(["tar", "-C", str(rootfs), "-cf", str(partial), "."], check=True)
            partial.rename(tarball)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    with open(tarball, "rb") as fh:
        done = subprocess.run(
            ["docker", "import", "--change", 'CMD ["bash"]', "-", tag],
            stdin=fh,
            env={**os.environ, "DOCKER_HOST": engine.host},
            capture_output=True,
            text=True,
        )
    if done.returncode != 0:
        raise RuntimeError(f"docker import {tag}: {done.stderr.strip()}")
