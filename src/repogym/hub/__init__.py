"""Publishing datasets: push a dataset folder to a registry, pull it back by name and revision.

Registries are named by URL: ``hf`` is the Hugging Face Hub (``HF_ENDPOINT``) through
``huggingface_hub``, ``hf+https://HOST`` a Hub-compatible server at that address, and
``file:///PATH`` a registry in a local folder (offline). Each push is an immutable revision;
``main`` points at the newest. Pulled tasks are byte-identical (same ``content_hash``).
``huggingface_hub`` is imported only when a Hub registry is used.
"""

from __future__ import annotations

from repogym.hub.base import PullResult, PushResult, RegistryError, parse_dataset_ref
from repogym.hub.file_registry import FileRegistry
from repogym.hub.hf_registry import HfRegistry
from repogym.hub.registry import open_registry

__all__ = [
    "FileRegistry",
    "HfRegistry",
    "PullResult",
    "PushResult",
    "RegistryError",
    "open_registry",
    "parse_dataset_ref",
]
