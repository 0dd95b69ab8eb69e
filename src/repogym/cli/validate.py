"""``repogym validate``: static checks of task directories (and ``--runnable``)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from repogym.cli.app import app
from repogym.cli.common import MAX_JOBS, JsonOpt, bad_input, sandbox_or_exit, task_dirs_or_exit
from repogym.ui import escape, out, track


@app.command()
def validate(
    path: Annotated[Path, typer.Argument(help="A task folder or a dataset folder.")],
    deep: Annotated[
        bool, typer.Option("--deep", help="Also compile verifier scripts, parse patches and JSON.")
    ] = False,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs", "-j", min=0, max=MAX_JOBS, help="Worker processes (0 = two per core)."
        ),
    ] = 0,
    runnable: Annotated[
        bool,
        typer.Option(
            "--runnable",
            help="Instead: what `run` would refuse on --sandbox and why (no building); one "
            "line per refusal.",
        ),
    ] = False,
    sandbox: Annotated[
        str, typer.Option("--sandbox", help="Backend for --runnable: local or docker.")
    ] = "local",
    json_out: JsonOpt = False,
) -> None:
    """Static checks of task directories. Exit 1 if any task fails, 2 for unusable input."""
    from repogym.taskdir.validate import default_jobs, mark_duplicate_ids, validate_many

    if runnable:
        validate_runnable(path, sandbox, json_out)
    dirs = task_dirs_or_exit(path)
    jobs = jobs or default_jobs()
    reports = list(
        track(
            validate_many(dirs, deep=deep, jobs=jobs), "validating", len(dirs), enabled=not json_out
        )
    )
    mark_duplicate_ids(reports)
    failed = [r for r in reports if not r.ok]
    n_warn = sum(len(r.warnings) for r in reports)
    if json_out:
        payload = {
            "path": str(path),
            "summary": {
                "tasks": len(reports),
                "valid": len(reports) - len(failed),
                "invalid": len(failed),
                "warnings": n_warn,
            },
            "tasks": [r.to_json() for r in reports],
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        raise typer.Exit(1 if failed else 0)
    by_check: Counter[str] = Counter()
    for report in reports:
        for p in report.problems:
            by_check[f"{p.severity}:{p.check}"] += 1
            colour = "red" if p.severity == "error" else "yellow"
            label = "ERROR" if p.severity == "error" else "warn "
            where = f"{escape(report.task_id)}: {escape(p.file)}"
            out.print(f"[{colour}]{label}[/] {where}: {escape(p.message)}")
    measured = [r for r in reports if r.adversarial is not None]
    if deep and measured:
        floors = Table(title="adversarial floor (as recorded by generate or verify --adversarial)")
        for col in ("task", "floor", "gap", "candidates"):
            floors.add_column(col)
        for r in measured:
            fig = r.adversarial or {}
            gap = fig.get("gameability_gap", 0)
            colour = "red" if isinstance(gap, int | float) and gap > 0 else "green"
            floors.add_row(
                escape(r.task_id),
                f"[{colour}]{fig.get('adversarial_floor')}[/]",
                str(gap),
                str(fig.get("adversarial_candidates", 0)),
            )
        out.print(floors)
    if deep and len(measured) < len(reports):
        out.print(
            f"{len(reports) - len(measured)} task(s) never measured by red-team candidates "
            "(repogym verify --adversarial)"
        )
    table = Table(title=f"validate {escape(str(path))}", title_justify="left")
    table.add_column("tasks", justify="right")
    table.add_column("valid", justify="right", style="green")
    table.add_column("invalid", justify="right", style="red")
    table.add_column("warnings", justify="right", style="yellow")
    table.add_row(str(len(reports)), str(len(reports) - len(failed)), str(len(failed)), str(n_warn))
    out.print(table)
    if by_check:
        checks = Table(title="problems by check", title_justify="left")
        checks.add_column("severity")
        checks.add_column("check")
        checks.add_column("count", justify="right")
        for key, count in sorted(by_check.items()):
            severity, check = key.split(":", 1)
            checks.add_row(severity, check, str(count))
        out.print(checks)
    raise typer.Exit(1 if failed else 0)


def validate_runnable(path: Path, sandbox: str, json_out: bool) -> None:
    """``validate --runnable``: the backend's preflight over every task; exits."""
    from repogym.run.preflight import load_backend, preflight
    from repogym.taskdir.trust import check_task, load_limits

    sandbox_or_exit(sandbox, here=False)  # an unknown name is bad input, not a per-task refusal
    dirs = task_dirs_or_exit(path)
    backend, why = load_backend(sandbox)
    try:
        limits = load_limits()
    except ValueError as exc:
        raise bad_input(str(exc)) from None
    rows: list[dict[str, Any]] = []  # the JSON report's rows
    for d in dirs:
        trust = check_task(d, limits)
        reasons = list(trust.problems)
        if trust.error is not None:
            reasons.append(f"{trust.error.file}: {trust.error}")
        if trust.task is not None and not reasons:
            reasons = preflight(trust.task, backend=backend, limits=limits)
        if why:
            reasons.insert(0, why)
        rows.append(
            {"task_id": d.name, "path": str(d), "runnable": not reasons, "refusals": reasons}
        )
    refused = [r for r in rows if not r["runnable"]]
    if json_out:
        summary = {
            "tasks": len(rows),
            "runnable": len(rows) - len(refused),
            "refused": len(refused),
        }
        payload = {"path": str(path), "sandbox": sandbox, "summary": summary, "tasks": rows}
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        for r in refused:
            for reason in r["refusals"]:
                out.print(f"[red]refused[/] {escape(r['task_id'])}: {escape(reason)}")
        out.print(f"{len(rows) - len(refused)} of {len(rows)} task(s) would run on {sandbox}")
    raise typer.Exit(1 if refused else 0)
