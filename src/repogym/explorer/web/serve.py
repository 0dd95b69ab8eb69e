"""Serving the explorer app with uvicorn: one process over a store (:func:`serve`), or several
worker processes over one published snapshot (:func:`serve_workers`: each worker opens the
snapshot itself in :func:`.app.snapshot_app`, told where by environment variables).

The mounts (the MCP endpoints, for one) are the caller's: ``create_app(mounts=…)`` takes them in
one process, and worker processes load the same factory by its dotted name
(:data:`MOUNTS_ENV`), so this package imports none of them.
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from repogym.explorer.web.app import MountFactory, settle_heap

__all__ = [
    "HOST_ENV",
    "MOUNTS_ENV",
    "SNAPSHOT_ENV",
    "load_mounts",
    "mounts_name",
    "serve",
    "serve_workers",
    "when_ready",
]

SNAPSHOT_ENV = "REPOGYM_EXPLORE_SNAPSHOT"
"""The snapshot folder each worker process serves."""
HOST_ENV = "REPOGYM_EXPLORE_HOST"
"""The address the workers listen on (their allowed ``Host`` names follow from it)."""
MOUNTS_ENV = "REPOGYM_EXPLORE_MOUNTS"
"""``module:function`` of the mounts factory the workers use (unset: no mounts)."""


def when_ready(
    store: Any, t0: float, *, ready: Callable[[float], None], failed: Callable[[str], None]
) -> threading.Thread:
    """A daemon thread waiting for a background-indexing ``store``: ``ready(seconds since t0)``
    when its task pages are packed, ``failed(first line of the first error)`` when indexing
    stopped."""

    def wait() -> None:
        store.ready.wait()
        errors = getattr(store, "build_errors", None)
        if errors:
            failed(str(errors[0]).splitlines()[0])
        else:
            ready(time.perf_counter() - t0)

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread


def mounts_name(mounts: MountFactory | None) -> str | None:
    """The dotted ``module:function`` name of a module-level ``mounts`` factory."""
    if mounts is None:
        return None
    return f"{mounts.__module__}:{mounts.__qualname__}"


def load_mounts(name: str | None) -> MountFactory | None:
    """The mounts factory named ``module:function`` (:data:`MOUNTS_ENV`); None for none."""
    if not name:
        return None
    module, _, attr = name.partition(":")
    found: MountFactory = getattr(importlib.import_module(module), attr)
    return found


def serve(app: Any, *, host: str, port: int) -> None:
    """Serve ``app`` in this process until stopped (the heap settled first)."""
    import uvicorn

    settle_heap()
    uvicorn.run(app, host=host, port=port, log_level="warning")


def serve_workers(
    snapshot: Path, *, host: str, port: int, workers: int, mounts: MountFactory | None
) -> None:
    """Serve the published ``snapshot`` with ``workers`` processes until stopped."""
    import uvicorn

    os.environ[SNAPSHOT_ENV] = str(snapshot)
    os.environ[HOST_ENV] = host
    name = mounts_name(mounts)
    if name is None:
        os.environ.pop(MOUNTS_ENV, None)
    else:
        os.environ[MOUNTS_ENV] = name
    uvicorn.run(
        "repogym.explorer.web.app:snapshot_app",
        factory=True,
        workers=workers,
        host=host,
        port=port,
        log_level="warning",
    )
