"""The CLI's one error path: every failure a user can meet ends as one line on stderr.

:class:`OneLineGroup` is the root command's class. Around every command it turns

* a :class:`~repogym.errors.RepogymError` (a refusal meant for users) into ``error: <message>``
  and exit 2;
* an :class:`OSError` on a path (a read-only or full disk, a file where a folder belongs, a
  permission) into ``error: <path>: <reason>`` and exit 2;
* a usage error into ``error: <message> (see 'repogym <command> --help')`` and exit 2;
* anything else (a bug) into ``error: internal error: <type>: <message> (rerun with --debug for
  the traceback)`` and exit 1.

``repogym --debug …`` (or ``REPOGYM_DEBUG=1``) lets the traceback through instead.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer
import typer.core

try:  # newer typer vendors click; its exceptions are then not click's
    from typer._click.exceptions import ClickException, UsageError
except ImportError:  # pragma: no cover - a typer on plain click
    from click.exceptions import ClickException, UsageError  # type: ignore[assignment]

from repogym.errors import RepogymError
from repogym.ui import fail

_PASS_THROUGH = (typer.Exit, typer.Abort, ClickException, KeyboardInterrupt)

DEBUG_ENV = "REPOGYM_DEBUG"


def debug_wanted(ctx: Any = None) -> bool:
    """``--debug`` on the command line, or ``REPOGYM_DEBUG`` set to a true value."""
    if ctx is not None and ctx.find_root().params.get("debug"):
        return True
    return os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def os_error_line(exc: OSError) -> str:
    """``PATH: reason`` for an OS error (both paths of a rename or link)."""
    reason = exc.strerror or type(exc).__name__
    if exc.errno == errno.ENOSPC:
        reason = "no space left on the device"
    paths = [p for p in (exc.filename, exc.filename2) if p is not None]
    if not paths:
        return reason
    return " → ".join(os.fsdecode(p) for p in paths) + f": {reason}"


ASKS_FOR_HELP = "repogym.asks_for_help"
"""``ctx.meta`` key: whether the command line holds ``--help`` (then the environment is not
checked: help is always available)."""


class OneLineGroup(typer.core.TyperGroup):
    """The root command: see the module's docstring."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        ctx.meta[ASKS_FOR_HELP] = "--help" in args
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _PASS_THROUGH:
            raise
        except RepogymError as exc:
            if debug_wanted(ctx):
                raise
            fail(str(exc) or type(exc).__name__)
            raise typer.Exit(2) from None
        except OSError as exc:
            if exc.errno == errno.EPIPE or debug_wanted(ctx):
                raise
            fail(os_error_line(exc))
            raise typer.Exit(2) from None
        except Exception as exc:
            if debug_wanted(ctx):
                raise
            detail = str(exc).splitlines()[0] if str(exc) else ""
            fail(
                f"internal error: {type(exc).__name__}"
                + (f": {detail}" if detail else "")
                + " (rerun with --debug for the traceback)"
            )
            raise typer.Exit(1) from None

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        run = functools.partial(
            super().main,
            args,
            prog_name,
            complete_var,
            standalone_mode=False,
            windows_expand_args=windows_expand_args,
            **extra,
        )
        if not standalone_mode:
            return run()
        try:
            code = run()
        except UsageError as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # a group run bare: its help
                exc.show()
                sys.exit(exc.exit_code)
            where = exc.ctx.command_path if exc.ctx is not None else "repogym"
            fail(f"{exc.format_message()} (see '{where} --help')")
            sys.exit(exc.exit_code)
        except ClickException as exc:
            fail(exc.format_message())
            sys.exit(exc.exit_code)
        except typer.Abort:
            fail("aborted")
            sys.exit(1)
        sys.exit(code if isinstance(code, int) and not isinstance(code, bool) else 0)
