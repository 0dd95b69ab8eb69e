"""A registry from its URL: the one place that knows every kind.

Kinds are entries of :data:`REGISTRIES`, keyed by the URL's scheme (``hf`` for ``hf`` and
``hf+https://HOST``); plug-ins add kinds as entry points of the ``repogym.registries`` group
naming a ``factory(url) -> registry``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from repogym.hub.base import RegistryError
from repogym.hub.file_registry import FileRegistry
from repogym.hub.hf_registry import HfRegistry, parse_hf_url
from repogym.plugins import PluginError, Registry, UnknownPlugin, callable_check

RegistryFactory = Callable[[str], Any]
UNSUPPORTED = "unsupported registry {url!r}: use hf, hf+https://HOST or file:///PATH"


def _hf(url: str) -> HfRegistry:
    return HfRegistry(parse_hf_url(url))


def _file(url: str) -> FileRegistry:
    parsed = urlparse(url)
    if parsed.netloc not in ("", "localhost"):
        raise RegistryError(UNSUPPORTED.format(url=url))
    root = Path(unquote(parsed.path))
    if not root.is_absolute():
        raise RegistryError(f"registry path must be absolute: {url!r}")
    return FileRegistry(root)


REGISTRIES: Registry[RegistryFactory] = Registry(
    "dataset registry",
    group="repogym.registries",
    builtins={"hf": _hf, "file": _file},
    check=callable_check("a registry factory"),
)


def _scheme(url: str) -> str:
    if url == "hf" or url.startswith("hf+"):
        return "hf"
    return urlparse(url).scheme


def open_registry(url: str) -> FileRegistry | HfRegistry:
    """A registry from its URL: ``hf`` (``HF_ENDPOINT`` or the public Hub),
    ``hf+http(s)://HOST`` (a Hub at that address) or ``file:///PATH`` (a local folder)."""
    try:
        factory = REGISTRIES.get(_scheme(url))
    except UnknownPlugin:
        raise RegistryError(UNSUPPORTED.format(url=url)) from None
    except PluginError as exc:
        raise RegistryError(str(exc)) from None
    registry: FileRegistry | HfRegistry = factory(url)
    return registry
