"""Terminal output: one stdout console for results, one stderr console for progress and errors."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from rich.console import Console
from rich.markup import escape as _escape_markup
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

T = TypeVar("T")

# C0 controls except tab and newline, DEL, and C1 controls (a terminal acts on all of them).
_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)] if c not in (9, 10)}
_CONTROL.update({0x2028: "\\u2028", 0x2029: "\\u2029"})


def safe_text(text: str) -> str:
    """``text`` with terminal control characters shown as ``\\x1b``-style escapes, so a name
    taken from a dataset cannot move the cursor, recolour or retitle the user's terminal."""
    return text.translate(_CONTROL)


def escape(text: str) -> str:
    """Safe to embed in rich markup: markup escaped and control characters made visible."""
    return _escape_markup(safe_text(text))


def escape_name(text: str) -> str:
    """:func:`escape` for a name (task id, trial, path) on one line: newlines and tabs shown
    as ``\\n`` and ``\\t`` too, so a folder named with them cannot split an output line."""
    return escape(text.replace("\n", "\\n").replace("\t", "\\t"))


def fail(message: str) -> None:
    """Print a one-line error to stderr (a newline in it is shown as ``\\n``)."""
    err.print(f"[bold red]error:[/] {escape(message.replace(chr(10), chr(92) + 'n'))}")


def fmt_reward(value: float | None) -> str:
    """A reward in three significant digits; — when there is none."""
    return "—" if value is None else f"{value:.3g}"


def warn(message: str) -> None:
    err.print(f"[yellow]warning:[/] {escape(message)}")


@contextmanager
def progress(description: str, total: int | None, *, enabled: bool = True) -> Iterator[Progress]:
    """A transient progress bar on stderr (silent when not a terminal or disabled)."""
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not enabled or not err.is_terminal,
    )
    with bar:
        bar.add_task(description, total=total)
        yield bar


def track(items: Iterable[T], description: str, total: int, *, enabled: bool = True) -> Iterator[T]:
    with progress(description, total, enabled=enabled) as bar:
        task_id = bar.task_ids[0]
        for item in items:
            yield item
            bar.advance(task_id)
