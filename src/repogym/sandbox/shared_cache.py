"""The public face of the shared environment cache (``REPOGYM_SHARED_CACHE``,
``repogym --shared-cache URL``): what callers outside the sandbox package use — the CLI, the
bootstrap recipe cache, the executors and ``repogym cluster status``. The cache itself (layout,
uploads, counters) lives in :mod:`._shared_cache` and is re-exported here.
"""

from __future__ import annotations

from repogym.sandbox._shared_cache import (
    ENV_VAR,
    SharedCache,
    SharedCacheError,
    check_url,
    configured_url,
    forwarded_env,
    from_env,
    read_stats,
    shown_url,
    use,
)

__all__ = [
    "ENV_VAR",
    "SharedCache",
    "SharedCacheError",
    "check_url",
    "configured_url",
    "forwarded_env",
    "from_env",
    "read_stats",
    "shown_url",
    "use",
]
