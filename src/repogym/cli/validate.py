"""``repogym validate``: static checks of task directories (and ``--runnable``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from repogym.cli.app import app
from repogym.cli.common import MAX_JOBS, JsonOpt, bad_input, sandbox_or_exit, task_dirs_or_exit
from repogym.ui import track


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
    from repogym.taskdir.validate import default_jobs, validate_many
    from repogym.taskdir.validate_summary import summarize_validation
    from repogym.ui.validate import print_validation

    if runnable:
        validate_runnable(path, sandbox, json_out)
    dirs = task_dirs_or_exit(path)
    jobs = jobs or default_jobs()
    reports = list(
        track(
            validate_many(dirs, deep=deep, jobs=jobs), "validating", len(dirs), enabled=not json_out
        )
    )
    summary = summarize_validation(path, reports)
    if json_out:
        sys.stdout.write(summary.to_text())
    else:
        print_validation(summary, deep=deep)
    raise typer.Exit(0 if summary.ok else 1)


def validate_runnable(path: Path, sandbox: str, json_out: bool) -> None:
    """``validate --runnable``: the backend's preflight over every task; exits."""
    from repogym.run.preflight import runnable_summary
    from repogym.taskdir.trust import load_limits
    from repogym.ui.validate import print_runnable

    sandbox_or_exit(sandbox, here=False)  # an unknown name is bad input, not a per-task refusal
    dirs = task_dirs_or_exit(path)
    try:
        limits = load_limits()
    except ValueError as exc:
        raise bad_input(str(exc)) from None
    summary = runnable_summary(path, dirs, sandbox, limits)
    if json_out:
        sys.stdout.write(summary.to_text())
    else:
        print_runnable(summary)
    raise typer.Exit(1 if summary.refused else 0)
