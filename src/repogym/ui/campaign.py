"""What ``repogym generate --repos`` prints on stderr: a line per finished repository, then a
summary table."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from repogym.ui import err, escape

_STYLE = {"complete": "green", "pending": "dim", "stopped": "yellow", "interrupted": "yellow"}


def _top_drops(dropped: dict[str, int], n: int = 2) -> str:
    top = sorted(dropped.items(), key=lambda kv: -kv[1])[:n]
    return ", ".join(f"{reason} {count}" for reason, count in top)


def repo_line(row: Any) -> None:
    """One repository finished (whatever its status)."""
    style = _STYLE.get(row.status, "red")
    what = f"{row.candidates} candidate(s), {row.kept} kept"
    if row.error:
        what += f"; {row.error}"
    err.print(
        f"[{style}]{escape(row.status)}[/] {escape(row.repo_id)} ({escape(row.pipeline)}): "
        f"{escape(what)} ({row.seconds:.1f} s)"
    )


def summary(report: Any) -> None:
    """The campaign's table: one row per repository, totals last."""
    table = Table(title="campaign", title_justify="left")
    for name, justify in (
        ("repository", "left"),
        ("pipeline", "left"),
        ("status", "left"),
        ("candidates", "right"),
        ("kept", "right"),
        ("tasks", "right"),
        ("top drops", "left"),
        ("s", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in report.repos:
        style = _STYLE.get(row.status, "red")
        table.add_row(
            escape(row.repo_id),
            escape(row.pipeline),
            f"[{style}]{escape(row.status)}[/]",
            str(row.candidates),
            str(row.kept),
            str(row.tasks),
            escape(row.error or _top_drops(row.dropped)),
            f"{row.seconds:.0f}",
        )
    table.add_row(
        "[bold]total[/]",
        "",
        escape(report.status),
        str(sum(r.candidates for r in report.repos)),
        str(report.kept),
        str(report.tasks),
        "",
        f"{report.seconds:.0f}",
    )
    err.print(table)
    err.print(f"report: {escape(str(report.inp.out / 'campaign-report.json'))}")
