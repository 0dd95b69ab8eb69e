"""A registry from its URL: the one place that knows both kinds."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from repogym.hub.base import RegistryError
from repogym.hub.file_registry import FileRegistry
from repogym.hub.hf_registry import HfRegistry, parse_hf_url


def open_registry(url: str) -> FileRegistry | HfRegistry:
    """A registry from its URL: ``hf`` (``HF_ENDPOINT`` or the public Hub),
    ``hf+http(s)://HOST`` (a Hub at that address) or ``file:///PATH`` (a local folder)."""
    if url == "hf" or url.startswith("hf+"):
        return HfRegistry(parse_hf_url(url))
    parsed = urlparse(url)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        raise RegistryError(
            f"unsupported registry {url!r}: use hf, hf+https://HOST or file:///PATH"
        )
    root = Path(unquote(parsed.path))
    if not root.is_absolute():
        raise RegistryError(f"registry path must be absolute: {url!r}")
    return FileRegistry(root)
