"""``repogym mcp``: serve environments' tasks to coding agents over MCP (stdio), or bridge a
live OpenEnv server (``--openenv URL``)."""

from __future__ import annotations

import contextlib
import sys
from typing import Annotated

import typer

from repogym.cli.app import app
from repogym.cli.common import bad_input
from repogym.cli.explore import bundled_examples, trusted_folders_or_exit
from repogym.ui import err

BRIDGE_MODULE = "repogym.mcp.bridge"


@app.command("mcp")
def mcp_serve(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="PATH",
            help="A task folder, a dataset folder, or several. Default: the bundled examples.",
            show_default=False,
        ),
    ] = None,
    openenv: Annotated[
        str | None,
        typer.Option(
            "--openenv",
            metavar="URL",
            help="Bridge to a live OpenEnv server instead (its tools over MCP).",
        ),
    ] = None,
) -> None:
    """Serve environments (task sets) to coding agents over MCP on stdin/stdout: describe,
    list, search and read tasks, answers withheld. Add it to an agent as a stdio server."""
    from repogym.mcp import INSTALL_HINT, sdk_available

    if not sdk_available():
        raise bad_input(INSTALL_HINT)
    if openenv is not None:
        if paths:
            raise bad_input("give PATH... or --openenv URL, not both")
        run_bridge(openenv)
        return
    paths = list(paths or [])
    if not paths:
        examples = bundled_examples()
        if examples is None:
            raise bad_input("nothing to serve: give task or dataset folders (repogym mcp PATH)")
        paths = [str(examples)]
    trusted_folders_or_exit(paths, None)
    from repogym.explorer.adapters.base import AdapterError
    from repogym.explorer.pack import PackError
    from repogym.explorer.snapshot import SnapshotError
    from repogym.explorer.store import open_store
    from repogym.mcp.environment import run_stdio

    try:
        # stdout is the protocol's: anything the indexer might print goes to stderr
        with contextlib.redirect_stdout(sys.stderr):
            store = open_store(paths)
    except (AdapterError, SnapshotError, PackError, OSError, ValueError) as exc:
        raise bad_input(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    try:
        envs = store.search(size=1)["total"]
        tasks = store.search_tasks(size=1)["total"]
        err.print(f"repogym mcp: {envs} environment(s), {tasks} task(s) on stdio")
        run_stdio(store)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    finally:
        store.close()


def run_bridge(url: str) -> None:
    """``repogym.mcp.bridge.run_stdio(url)``, or one line and exit 2 when it is missing."""
    import importlib

    try:
        bridge = importlib.import_module(BRIDGE_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name in (BRIDGE_MODULE, "repogym.mcp"):
            raise bad_input("--openenv: the OpenEnv bridge is not available") from None
        raise bad_input(f"--openenv: not available ({exc})") from None
    runner = getattr(bridge, "run_stdio", None)
    if runner is None:
        raise bad_input("--openenv: the OpenEnv bridge is not available")
    from repogym.errors import RepogymError

    try:
        runner(url)
    except RepogymError as exc:
        raise bad_input(str(exc)) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
