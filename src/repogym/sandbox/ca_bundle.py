"""The public hook for ``--ca-bundle``: a CA bundle offered to every sandbox this process starts.

Callers outside the sandbox package (the CLI, API users) use :func:`use_ca_bundle`; the
details (the private copy, its mount point, the variables pointing at it) live in
:mod:`._cabundle` and are re-exported here.
"""

from __future__ import annotations

import os
from pathlib import Path

from repogym.sandbox._cabundle import (
    ENV_VAR,
    SANDBOX_PATH,
    VARIABLES,
    CaBundle,
    CaBundleError,
    load,
)

__all__ = [
    "ENV_VAR",
    "SANDBOX_PATH",
    "VARIABLES",
    "CaBundle",
    "CaBundleError",
    "load",
    "use_ca_bundle",
]


def use_ca_bundle(path: str | os.PathLike[str], cache_root: Path | None = None) -> CaBundle:
    """Check that ``path`` holds PEM certificates (copied privately under the cache) and offer
    it to every sandbox backend created afterwards in this process (``$REPOGYM_CA_BUNDLE``).

    Raises :class:`CaBundleError` (one line) when the file cannot be used; nothing is set then.
    """
    if cache_root is None:
        from repogym.sandbox._host import default_cache_root

        cache_root = default_cache_root()
    bundle = load(path, cache_root)
    os.environ[ENV_VAR] = str(Path(path).resolve())
    return bundle
