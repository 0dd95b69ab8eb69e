"""How ``repogym validate`` shows its results: one line per problem, the adversarial floors
(``--deep``), the totals and the problems by check; with ``--runnable``, one line per refusal.
The figures come from :class:`repogym.taskdir.validate_summary.ValidationSummary` and
:class:`repogym.run.preflight.RunnableSummary`; nothing here computes one."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from repogym.ui import escape, escape_name, out


def print_validation(summary: Any, *, deep: bool) -> None:
    """Every problem, then (``deep``) the recorded adversarial floors, then the totals."""
    for report in summary.reports:
        for p in report.problems:
            colour = "red" if p.severity == "error" else "yellow"
            label = "ERROR" if p.severity == "error" else "warn "
            where = f"{escape_name(report.task_id)}: {escape_name(p.file)}"
            out.print(f"[{colour}]{label}[/] {where}: {escape(p.message)}")
    measured = summary.measured
    if deep and measured:
        out.print(_floors(measured))
    if deep and len(measured) < summary.tasks:
        out.print(
            f"{summary.tasks - len(measured)} task(s) never measured by red-team candidates "
            "(repogym verify --adversarial)"
        )
    table = Table(title=f"validate {escape(str(summary.path))}", title_justify="left")
    table.add_column("tasks", justify="right")
    table.add_column("valid", justify="right", style="green")
    table.add_column("invalid", justify="right", style="red")
    table.add_column("warnings", justify="right", style="yellow")
    table.add_row(
        str(summary.tasks), str(summary.valid), str(summary.invalid), str(summary.warnings)
    )
    out.print(table)
    by_check = summary.by_check()
    if by_check:
        checks = Table(title="problems by check", title_justify="left")
        checks.add_column("severity")
        checks.add_column("check")
        checks.add_column("count", justify="right")
        for severity, check, count in by_check:
            checks.add_row(severity, check, str(count))
        out.print(checks)


def _floors(measured: list[Any]) -> Table:
    """The adversarial floor, gap and candidates each measured task recorded."""
    floors = Table(title="adversarial floor (as recorded by generate or verify --adversarial)")
    for col in ("task", "floor", "gap", "candidates"):
        floors.add_column(col)
    for r in measured:
        fig = r.adversarial or {}
        gap = fig.get("gameability_gap", 0)
        colour = "red" if isinstance(gap, int | float) and gap > 0 else "green"
        floors.add_row(
            escape_name(r.task_id),
            f"[{colour}]{fig.get('adversarial_floor')}[/]",
            str(gap),
            str(fig.get("adversarial_candidates", 0)),
        )
    return floors


def print_runnable(summary: Any) -> None:
    """``validate --runnable``: one line per refusal, then how many tasks would run."""
    for row in summary.refused:
        for reason in row.refusals:
            out.print(f"[red]refused[/] {escape_name(row.task_id)}: {escape(reason)}")
    for row in summary.rows:
        for warning in getattr(row, "warnings", []):
            out.print(f"[yellow]warning[/] {escape_name(row.task_id)}: {escape(warning)}")
    out.print(f"{summary.runnable} of {len(summary.rows)} task(s) would run on {summary.sandbox}")
