"""Publishing datasets: push a dataset folder to a registry, pull it back by name and revision.

Registries are named by URL: ``file:///PATH`` is a registry in a local folder (offline, same
layout and revisions as a hosted one). Each push is an immutable revision; ``main`` points at
the newest. Pulled tasks are byte-identical (same ``content_hash``).
"""

from __future__ import annotations

from repogym.hub.file_registry import (
    FileRegistry,
    PullResult,
    PushResult,
    RegistryError,
    open_registry,
    parse_dataset_ref,
)

__all__ = [
    "FileRegistry",
    "PullResult",
    "PushResult",
    "RegistryError",
    "open_registry",
    "parse_dataset_ref",
]
