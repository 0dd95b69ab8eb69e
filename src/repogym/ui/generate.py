"""The live view and the final yield table of ``repogym generate``."""

from __future__ import annotations

from typing import Any

from rich.live import Live
from rich.table import Table

from repogym.ui import err, escape, out


class GenerateView:
    """Candidates seen, running, kept, drops by reason and elapsed time, refreshed live on a
    terminal; one line per finished candidate otherwise."""

    def __init__(self, *, enabled: bool, title: str) -> None:
        self.enabled = enabled
        self.title = title
        self.stats: Any = None
        self.live: Live | None = None

    def __enter__(self) -> GenerateView:
        if self.enabled and err.is_terminal:
            self.live = Live(self._table(), console=err, refresh_per_second=4, transient=True)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)

    def _table(self) -> Table:
        table = Table(title=escape(self.title), title_justify="left", show_header=False)
        s = self.stats
        if s is None:
            table.add_row("starting…", "")
            return table
        table.add_row("elapsed", f"{s.elapsed:,.0f} s")
        table.add_row("candidates seen", str(s.seen))
        table.add_row("running", str(s.running))
        table.add_row("tasks emitted", f"[green]{s.kept}[/]")
        for reason, count in s.drops.most_common(8):
            table.add_row(f"  skipped: {escape(reason)}", str(count))
        return table

    def _refresh(self, stats: Any) -> None:
        self.stats = stats
        if self.live is not None:
            self.live.update(self._table())

    def outcome(self, outcome: Any, stats: Any) -> None:
        self._refresh(stats)
        if self.enabled and self.live is None:
            what = "[green]kept[/]" if outcome.kept else f"dropped: {escape(outcome.reason or '')}"
            err.print(f"  {escape(outcome.candidate.task_id)}: {what} ({outcome.seconds:.1f} s)")
        elif self.live is not None and outcome.kept:
            self.live.console.print(f"  [green]+[/] {escape(outcome.candidate.task_id)}")

    def drop(self, key: str, reason: str, stats: Any) -> None:
        self._refresh(stats)

    def final(self, stats: Any, result: Any) -> None:
        table = Table(title="yield", title_justify="left")
        table.add_column("stage")
        table.add_column("count", justify="right")
        table.add_row("candidates", str(stats.seen))
        for reason, count in stats.drops.most_common():
            table.add_row(f"  dropped: {escape(reason)}", str(count))
        table.add_row("[green]tasks emitted[/]", f"[green]{stats.kept}[/]")
        out.print(table)
        ratio = stats.elapsed / stats.test_seconds if stats.test_seconds else float("nan")
        out.print(
            f"{stats.elapsed:.1f} s total, {stats.test_seconds:.1f} s inside test runs "
            f"(overhead ratio {ratio:.2f}); tasks in {escape(str(result.out / 'tasks'))}, "
            f"report {escape(str(result.report))}"
        )
