"""What Rust and Go projects share: the project model, host toolchain versions, registry access.

Both languages are supported only where they can work here: the toolchain must be on the host
(the local sandbox maps ``rust:*`` / ``golang:*`` to it) and third-party crates or modules must
come from a ``vendor/`` folder or a registry this machine can reach (crates.io and the Go module
proxy are usually not). Each language's detection and recipe: :mod:`.rust`, :mod:`.go`.
"""

from __future__ import annotations

import re
import socket
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=8)
def reachable(host: str, port: int = 443, timeout: float = 3.0) -> bool:
    """Whether a TCP connection to ``host:port`` succeeds (cached per process)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def tool_version(exe: str | None, *args: str) -> str | None:
    """The stripped stdout of ``exe *args``; None when it is missing, fails or hangs."""
    if not exe:
        return None
    try:
        out = subprocess.run([exe, *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def version_tuple(text: str) -> tuple[int, ...]:
    """Up to three numbers of a version string (``"1.21rc1"`` -> ``(1, 21, 1)``)."""
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


@dataclass
class NativeProject:
    """A Rust or Go repository: toolchain found, external dependencies, what blocks it."""

    language: str
    toolchain: str | None = None
    toolchain_version: str | None = None
    external: list[str] = field(default_factory=list)
    vendored: bool = False
    fetch: bool = False
    """Dependencies are downloaded in the dependency layer (registry reachable)."""
    manifests: list[str] = field(default_factory=list)
    override: bool = False
    """The repository pins a toolchain (``rust-toolchain(.toml)``, go.mod ``toolchain``) that the
    host's stands for."""
    install: str | None = None
    """A toolchain installed at build time (rustup channel) instead of the host's."""
    components: list[str] = field(default_factory=list)
    """Toolchain components installed with it (``rust-src`` …)."""
    rustflags: bool = False
    """The repository's ``.cargo/config`` sets rustflags (the recipe leaves RUSTFLAGS alone)."""
    tags: str | None = None
    """Go build tags the CI's ``go test`` passes."""
    lock_date: str | None = None
    """Resolve unpinned dependencies as published by this date (RFC 3339; None: not needed)."""
    notes: list[str] = field(default_factory=list)
    problem: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)
