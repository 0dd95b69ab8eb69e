"""The ``repogym`` typer application: the root command, ``--version`` and signal handling.

Commands live in the sibling modules (one per command group) and register themselves on
:data:`app` when :mod:`repogym.cli` is imported.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from repogym import __version__
from repogym.cli.errors import ASKS_FOR_HELP, OneLineGroup
from repogym.ui import fail, out

SIGTERM_EXIT = 128 + signal.SIGTERM


class App(typer.Typer):
    """A Typer app that treats SIGTERM like Ctrl-C: cleanup code (``finally`` blocks, temporary
    folders, partial outputs) runs the same way, then the process exits 143."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with sigterm_as_interrupt() as received:
            try:
                return super().__call__(*args, **kwargs)
            except SystemExit:
                if received:
                    sys.exit(SIGTERM_EXIT)
                raise


@contextmanager
def sigterm_as_interrupt() -> Iterator[list[int]]:
    """While inside, SIGTERM raises :class:`KeyboardInterrupt` in the main thread; yields a list
    that holds the signal number once one was received."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def on_term(signum: int, _frame: object) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def new_group(**kwargs: Any) -> typer.Typer:
    """A command group with the settings every group of the CLI shares: help text printed as
    written (no rich markup, so ``[metadata.repo2env]`` survives; flags shown as flags)."""
    kwargs.setdefault("rich_markup_mode", None)
    kwargs.setdefault("add_completion", False)
    kwargs.setdefault("pretty_exceptions_enable", False)
    return typer.Typer(**kwargs)


app = App(
    name="repogym",
    cls=OneLineGroup,
    help="Turn source repositories into verifiable RL environments for coding agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        out.print(f"repogym {__version__}")
        raise typer.Exit()


def _shared_cache(value: str | None) -> str | None:
    """``--shared-cache URL``: checked, then this process's and its Ray workers' cache."""
    if value is not None:
        from repogym.sandbox.shared_cache import SharedCacheError, use

        try:
            use(value)
        except SharedCacheError as exc:
            fail(str(exc))
            raise typer.Exit(2) from None
    return value


@app.callback()
def main(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = False,
    shared_cache: Annotated[
        str | None,
        typer.Option(
            "--shared-cache",
            metavar="URL",
            callback=_shared_cache,
            help="Share built environment layers and bootstrap recipes with other machines "
            "through this fsspec URL (file:///shared/cache, s3://bucket/prefix, ...), for the "
            "command that follows (generate, verify, run, ...). Default: $REPOGYM_SHARED_CACHE.",
        ),
    ] = None,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            help="Show the traceback of a failure instead of its one-line reason "
            "(also: REPOGYM_DEBUG=1).",
        ),
    ] = False,
) -> None:
    """repogym: generate, verify, run, serve, publish and explore RL tasks from repositories."""
    if not ctx.meta.get(ASKS_FOR_HELP):
        from repogym.cli.envvars import BadValue, check_environment

        try:
            check_environment()
        except BadValue as exc:
            fail(str(exc))
            raise typer.Exit(2) from None
