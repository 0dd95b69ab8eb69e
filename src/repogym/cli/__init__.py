"""The ``repogym`` command line. Thin: each command parses its flags, calls the layers below
and prints; one module per command group, each registering its commands on :data:`app`.

``repogym = "repogym.cli:app"`` (pyproject) and ``from repogym.cli import app`` both use it.
"""

from __future__ import annotations

import importlib

from repogym.cli.app import app

COMMAND_MODULES = (
    "validate",
    "run",
    "rollout",
    "jobs",
    "generate",
    "serve",
    "hub",
    "images",
    "dataset",
    "explore",
    "explore_admin",
    "mcp",
    "cluster",
)
"""In the order ``repogym --help`` lists their commands."""

for _module in COMMAND_MODULES:
    importlib.import_module(f"repogym.cli.{_module}")

__all__ = ["COMMAND_MODULES", "app"]
