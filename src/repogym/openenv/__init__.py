"""Serve any task set as an OpenEnv environment, and export it as a deployable package.

Importing this package does not import ``openenv``: :func:`build_app` and the environment classes
load it on first use, and fail with an actionable message when the extra is not installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

INSTALL_HINT = "OpenEnv support needs the optional extra: pip install 'repogym[openenv]'"

if TYPE_CHECKING:
    from repogym.openenv.app import build_app as build_app


class OpenEnvMissing(ImportError):
    """Neither ``openenv-core`` nor ``openenv`` (>= 0.10) is installed."""


def require_openenv() -> None:
    """Raise :class:`OpenEnvMissing` with the install hint when ``openenv.core`` is absent
    (it comes with ``openenv-core`` or with ``openenv`` >= 0.10; either works)."""
    try:
        import openenv.core  # noqa: F401
    except ImportError as exc:
        raise OpenEnvMissing(f"{INSTALL_HINT} ({exc})") from None


def __getattr__(name: str) -> Any:
    if name == "build_app":
        require_openenv()
        from repogym.openenv.app import build_app

        return build_app
    raise AttributeError(name)


__all__ = ["INSTALL_HINT", "OpenEnvMissing", "build_app", "require_openenv"]
