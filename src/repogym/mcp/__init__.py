"""MCP servers on the official ``mcp`` SDK: environments (task sets) the explorer knows, for
coding agents to browse over stdio or Streamable HTTP.

- :mod:`repogym.mcp.environment`: the tools over an explorer store (``EnvironmentCatalog``), the
  SDK server built from them (``build_server``) and the stdio entry (``run_stdio``);
- :mod:`repogym.mcp.web`: the Streamable HTTP endpoints ``/mcp/d/<env>`` of the explorer app;
- :mod:`repogym.mcp.bridge`: an MCP bridge to a live OpenEnv server (``repogym mcp --openenv``).

Nothing here imports the ``mcp`` package at import time: ``import repogym`` (or this package)
works without it; the SDK is imported by the functions that need it.
"""

from __future__ import annotations

import importlib.util

__all__ = ["INSTALL_HINT", "sdk_available"]

INSTALL_HINT = "MCP needs the mcp package: pip install 'repogym[mcp]'"


def sdk_available() -> bool:
    """Whether the ``mcp`` SDK can be imported (without importing it)."""
    try:
        return importlib.util.find_spec("mcp") is not None
    except (ImportError, ValueError):
        return False
