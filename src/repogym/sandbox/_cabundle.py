"""A CA bundle offered to sandboxes, for networks whose TLS is intercepted by a proxy.

Nothing is taken from the host implicitly: the bundle is given with ``--ca-bundle PATH`` (or
``$REPOGYM_CA_BUNDLE``), e.g. ``--ca-bundle "$SSL_CERT_FILE"``. A private copy (checked to hold
PEM certificates) is bind-mounted read-only at :data:`SANDBOX_PATH` in every sandbox — build
steps and sessions — and the usual variables point at it (:data:`VARIABLES`); a Dockerfile or
task that sets one of them itself keeps its own value, unless that value names a file missing
from the sandbox — the proxy CA its author expected the builder to inject — which the bundle
then stands in for (:func:`resolve_env`). The mount lives on the sandbox's
``/dev`` (a tmpfs of its own), so it never enters a build layer or a step's cache key.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

ENV_VAR = "REPOGYM_CA_BUNDLE"
SANDBOX_PATH = "/dev/repogym/ca-bundle.pem"
VARIABLES = (
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "PIP_CERT",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
)
"""OpenSSL and Python (``SSL_CERT_FILE``), requests, curl, pip, Node (added to its own roots),
git; uv reads ``SSL_CERT_FILE`` too."""
MAX_BYTES = 16 << 20
_PEM = b"-----BEGIN CERTIFICATE-----"


class CaBundleError(ValueError):
    """The bundle cannot be used (one line)."""


@dataclass(frozen=True)
class CaBundle:
    """A validated private copy of a CA bundle."""

    source: str
    """The path it was given as (shown in results, never read again)."""
    copy: Path
    sha256: str
    certificates: int

    @property
    def env(self) -> dict[str, str]:
        """The variables pointing at the mounted copy."""
        return dict.fromkeys(VARIABLES, SANDBOX_PATH)

    def bwrap_args(self) -> list[str]:
        """bubblewrap arguments that mount it (after ``--dev /dev``)."""
        return ["--ro-bind", str(self.copy), SANDBOX_PATH]


def resolve_env(
    bundle: CaBundle | None, env: Mapping[str, str], exists: Callable[[str], bool]
) -> dict[str, str]:
    """``env`` with the bundle's variables: the task's own value of one is kept unless it is an
    absolute path ``exists`` says is missing in the sandbox, which the bundle replaces."""
    if bundle is None:
        return dict(env)
    out = {**bundle.env, **env}
    for name in VARIABLES:
        value = env.get(name, "")
        if value.startswith("/") and value != SANDBOX_PATH and not exists(value):
            out[name] = SANDBOX_PATH
    return out


def load(path: str | os.PathLike[str], cache_root: Path) -> CaBundle:
    """Check ``path`` holds PEM certificates and copy it under ``cache_root/ca``."""
    shown = str(path)
    try:
        with open(path, "rb") as fh:
            if not os.path.isfile(fh.name) or os.fstat(fh.fileno()).st_size > MAX_BYTES:
                raise CaBundleError(f"CA bundle {shown}: not a regular file under 16 MiB")
            data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise CaBundleError(f"CA bundle {shown}: {exc.strerror or exc}") from None
    count = data.count(_PEM)
    if not count:
        raise CaBundleError(f"CA bundle {shown}: no PEM certificate in it")
    digest = hashlib.sha256(data).hexdigest()
    folder = cache_root / "ca"
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / f"{digest}.pem"
    if not copy.is_file():
        tmp = folder / f".{digest}.{os.getpid()}.tmp"
        tmp.write_bytes(data)
        tmp.chmod(0o644)
        tmp.replace(copy)
    return CaBundle(shown, copy, digest, count)


def from_env(cache_root: Path, environ: dict[str, str] | None = None) -> CaBundle | None:
    """The bundle named by ``$REPOGYM_CA_BUNDLE`` (None when unset)."""
    value = (environ if environ is not None else os.environ).get(ENV_VAR, "").strip()
    return load(value, cache_root) if value else None
