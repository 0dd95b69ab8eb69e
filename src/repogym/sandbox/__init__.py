"""Sandboxes: one small protocol (:mod:`repogym.sandbox.base`), several lazily imported backends."""

from __future__ import annotations

import importlib
from pathlib import Path

from repogym.sandbox._context import glob_regex
from repogym.sandbox.base import (
    BuildError,
    BuiltEnvironment,
    Change,
    ChangeSet,
    DirEntry,
    EnvironmentSpec,
    ExecResult,
    Sandbox,
    SandboxError,
    Session,
)

_BACKENDS: dict[str, str] = {
    "local": "repogym.sandbox.local:LocalSandbox",
    "docker": "repogym.sandbox.docker:DockerSandbox",
}


def backend_names() -> list[str]:
    return sorted(_BACKENDS)


def host_node_installs() -> dict[str, str]:
    """Node installs on this host the local backend can map ``node:*`` onto: version → real
    path of ``node`` (the one on ``PATH`` first)."""
    from repogym.sandbox._toolchains import host_node_installs as find

    return find()


def default_cache_root() -> Path:
    """The local cache root: ``$REPOGYM_CACHE`` or ``~/.cache/repogym``."""
    from repogym.sandbox._host import default_cache_root as root

    return root()


def get_backend(name: str, **kwargs: object) -> Sandbox:
    """Instantiate a backend by name; its module (and SDK) is imported only now."""
    try:
        target = _BACKENDS[name]
    except KeyError:
        raise SandboxError(
            f"unknown sandbox backend {name!r}; choose one of: {', '.join(backend_names())}"
        ) from None
    module_name, _, cls_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    return cls(**kwargs)


__all__ = [
    "BuildError",
    "BuiltEnvironment",
    "Change",
    "ChangeSet",
    "DirEntry",
    "EnvironmentSpec",
    "ExecResult",
    "Sandbox",
    "SandboxError",
    "Session",
    "backend_names",
    "default_cache_root",
    "get_backend",
    "glob_regex",
    "host_node_installs",
]
