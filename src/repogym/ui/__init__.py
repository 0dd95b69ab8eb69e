"""Terminal output: one stdout console for results, one stderr console for progress and errors."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

T = TypeVar("T")


def fail(message: str) -> None:
    """Print a one-line error to stderr."""
    err.print(f"[bold red]error:[/] {escape(message)}")


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
