"""Probing the host for the local backend: bubblewrap and slirp4netns (installed from Debian when
missing, as root), whether rootless user namespaces work, memory, the platform ARGs, the cache root,
whether a process is alive.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from repogym.sandbox.base import SandboxError

BWRAP = "/usr/bin/bwrap"
INSTALL_HINT = "install the Debian package `bubblewrap` (apt-get install bubblewrap)"
SLIRP4NETNS = "/usr/bin/slirp4netns"
# User-mode networking for sandboxes: no route to the host's loopback (10.0.2.2 is not mapped
# to it), its own mount namespace and a seccomp filter for slirp4netns itself.
SLIRP_FLAGS = (
    "--configure",
    "--mtu=65520",
    "--disable-host-loopback",
    "--enable-sandbox",
    "--enable-seccomp",
)
SLIRP_HINT = "install the Debian package `slirp4netns` (apt-get install slirp4netns)"
_install_lock = threading.Lock()


def default_cache_root() -> Path:
    """``$REPOGYM_CACHE`` or ``~/.cache/repogym``."""
    env = os.environ.get("REPOGYM_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "repogym"


def find_bwrap() -> str | None:
    if os.access(BWRAP, os.X_OK):
        return BWRAP
    return shutil.which("bwrap")


def apt_install(package: str, find: Callable[[], str | None]) -> str | None:
    """``apt-get install -y PACKAGE`` (after ``apt-get update`` if needed), as root."""
    with _install_lock:
        if find():
            return find()
        if os.geteuid() != 0 or not shutil.which("apt-get"):
            return None
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        cmd = ["apt-get", "install", "-y", "--no-install-recommends", package]
        run = subprocess.run(cmd, env=env, capture_output=True, timeout=600)
        if run.returncode != 0:
            subprocess.run(["apt-get", "update"], env=env, capture_output=True, timeout=600)
            subprocess.run(cmd, env=env, capture_output=True, timeout=600)
        return find()


def install_bwrap() -> str | None:
    """``apt-get install -y bubblewrap`` (after ``apt-get update`` if needed), as root."""
    return apt_install("bubblewrap", find_bwrap)


def find_slirp() -> str | None:
    if os.access(SLIRP4NETNS, os.X_OK):
        return SLIRP4NETNS
    return shutil.which("slirp4netns")


def slirp_argv(*, install: bool = True) -> list[str]:
    """The slirp4netns command line of networked sandboxes (target pid and tap name follow).

    Installs the Debian package as root when it is missing; raises :class:`SandboxError` with
    a one-line message when it cannot be had (never a fallback to the host's network).
    """
    path = find_slirp() or (apt_install("slirp4netns", find_slirp) if install else None)
    if path is None:
        raise SandboxError(f"slirp4netns is missing: networked sandboxes need it; {SLIRP_HINT}")
    return [path, *SLIRP_FLAGS]


_rootless_check: tuple[bool, str] | None = None


def rootless_ok() -> tuple[bool, str]:
    """Whether unprivileged user namespaces with overlayfs work here (checked once)."""
    global _rootless_check
    if _rootless_check is None:
        release = tuple(int(x) for x in re.findall(r"\d+", os.uname().release)[:2])
        if release < (5, 11):
            _rootless_check = (False, "without root the local sandbox needs Linux >= 5.11")
        else:
            probe = subprocess.run(
                [find_bwrap() or BWRAP, "--ro-bind", "/", "/", "--unshare-user", "true"],
                capture_output=True,
                timeout=30,
            )
            _rootless_check = (
                (True, "")
                if probe.returncode == 0
                else (
                    False,
                    "without root the local sandbox needs unprivileged user namespaces "
                    "(sysctl kernel.unprivileged_userns_clone=1); or run as root",
                )
            )
    return _rootless_check


def memtotal_mb() -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 8192


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (one owned by another user counts).

    The one check for leftovers named after the process that made them (session cgroups,
    temporary layer folders): a folder whose owner is gone may be removed.
    """
    if pid <= 0:
        return False  # 0 and negative numbers name process groups, not a process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True


def platform_arg(name: str) -> str | None:
    return platform_args().get(name)


def platform_args() -> dict[str, str]:
    """The automatic platform ARGs (``TARGETPLATFORM``, ``BUILDPLATFORM``, …) of this host."""
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)
    return {
        "TARGETPLATFORM": f"linux/{arch}",
        "BUILDPLATFORM": f"linux/{arch}",
        "TARGETOS": "linux",
        "BUILDOS": "linux",
        "TARGETARCH": arch,
        "BUILDARCH": arch,
        "TARGETVARIANT": "",
        "BUILDVARIANT": "",
    }
