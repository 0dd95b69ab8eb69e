"""Sandboxes: one small protocol (:mod:`repogym.sandbox.base`), several lazily imported backends.

Backends are entries of :data:`BACKENDS`: the built-ins below, and plug-ins declared as entry
points of the ``repogym.sandboxes`` group (an entry point names a :class:`Sandbox` subclass).
``fake`` (:mod:`repogym.sandbox.fake`, no isolation) is for tests and is not listed.
"""

from __future__ import annotations

from pathlib import Path

from repogym.plugins import Builtin, PluginError, Registry, UnknownPlugin, subclass_of
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

BACKENDS: Registry[type[Sandbox]] = Registry(
    "sandbox backend",
    group="repogym.sandboxes",
    builtins={
        "local": "repogym.sandbox.local:LocalSandbox",
        "docker": Builtin("repogym.sandbox.docker:DockerSandbox", extra="docker"),
        "fake": Builtin("repogym.sandbox.fake:FakeSandbox", hidden=True),
    },
    check=subclass_of(Sandbox, "a repogym.sandbox.Sandbox subclass"),
)


def backend_names() -> list[str]:
    """The backends a user chooses from (test-only ones left out)."""
    return BACKENDS.names()


def host_node_installs() -> dict[str, str]:
    """Node installs on this host the local backend can map ``node:*`` onto: version → real
    path of ``node`` (the one on ``PATH`` first)."""
    from repogym.sandbox._toolchains import host_node_installs as find

    return find()


def host_jdks() -> dict[str, Path]:
    """JDKs on this host the local backend can map ``eclipse-temurin:<major>`` (and the other
    official JDK images) onto: major version → JDK home."""
    from repogym.sandbox._toolchains import host_jdks as find

    return find()


def default_cache_root() -> Path:
    """The local cache root: ``$REPOGYM_CACHE`` or ``~/.cache/repogym``."""
    from repogym.sandbox._host import default_cache_root as root

    return root()


def registry_mirrors(environ: dict[str, str] | None = None) -> dict[str, str]:
    """``$REPOGYM_REGISTRY_MIRROR`` parsed: registry host (``*`` for all) → endpoint URL."""
    from repogym.sandbox._pull import registries_from_env

    return registries_from_env(environ)


def interrupt_sandboxes() -> None:
    """An interrupted run (Ctrl-C, SIGTERM): close the local sandboxes this process has running,
    so that work waiting on them ends now rather than when their commands would, and start no
    new one until :func:`resume_sandboxes`."""
    from repogym.sandbox._runtime import interrupt_all

    interrupt_all()


def resume_sandboxes() -> None:
    """Let local sandboxes start again after :func:`interrupt_sandboxes`."""
    from repogym.sandbox._runtime import resume_all

    resume_all()


def get_backend(name: str, **kwargs: object) -> Sandbox:
    """Instantiate a backend by name; its module (and SDK) is imported only now."""
    try:
        cls = BACKENDS.get(name)
    except UnknownPlugin as exc:
        raise SandboxError(str(exc)) from None
    except PluginError as exc:
        raise SandboxError(str(exc)) from exc
    return cls(**kwargs)


__all__ = [
    "BACKENDS",
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
    "host_jdks",
    "host_node_installs",
    "registry_mirrors",
]
