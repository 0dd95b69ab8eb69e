"""``repogym jobs``: list, show, compare and export the job folders ``repogym run`` wrote."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from repogym.cli.app import app, new_group
from repogym.cli.common import JsonOpt, bad_input
from repogym.ui.jobs import render_comparison, render_export, render_job, render_jobs

if TYPE_CHECKING:
    from repogym.run.records import JobRecord

jobs_app = new_group(
    help="Run records: list the jobs 'repogym run' wrote, show one per task, compare two "
    "(paired bootstrap interval, flipped tasks), export trials as JSON Lines or parquet."
)
app.add_typer(jobs_app, name="jobs")

JobsDirOpt = Annotated[
    Path,
    typer.Option("--jobs-dir", help="The folder holding job folders (repogym run's default)."),
]
JobArg = Annotated[
    str, typer.Argument(metavar="JOB", help="A job folder, or a job's name under --jobs-dir.")
]

# --- reading, with CLI errors ----------------------------------------------------------------


def _read_or_exit(ref: str, jobs_dir: Path) -> JobRecord:
    from repogym.run.records import RecordError, read_job, resolve_job

    try:
        return read_job(resolve_job(ref, jobs_dir))
    except RecordError as exc:
        raise bad_input(str(exc)) from None
    except OSError as exc:  # e.g. a folder we may not list
        raise bad_input(f"{ref}: {exc.strerror or exc}") from None


def _dump(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2) + "\n")


# --- commands --------------------------------------------------------------------------------


@jobs_app.command("list")
def jobs_list(jobs_dir: JobsDirOpt = Path("jobs"), json_out: JsonOpt = False) -> None:
    """Every job under --jobs-dir: agent, start, tasks, trials, mean reward, resolved, pass@1,
    errors, tokens, cost. A job whose files cannot be read is listed as broken with the reason;
    a job without job.json yet (running) is read from its finished trials."""
    from repogym.run.records import JOB_FILE, JobListing

    if not jobs_dir.is_dir():
        what = "is not a folder" if jobs_dir.exists() else "no such folder"
        raise bad_input(
            f"{jobs_dir}: {what} (repogym run writes jobs under jobs/; --jobs-dir names another)"
        )
    if (jobs_dir / JOB_FILE).exists():
        raise bad_input(
            f"{jobs_dir}: is a job folder, not a folder of jobs (repogym jobs show {jobs_dir})"
        )
    try:
        listing = JobListing.read(jobs_dir)
    except OSError as exc:
        raise bad_input(f"{jobs_dir}: {exc.strerror or exc}") from None
    if json_out:
        _dump(listing.to_json())
        return
    render_jobs(listing.jobs_dir, listing.jobs)


@jobs_app.command("show")
def jobs_show(job: JobArg, jobs_dir: JobsDirOpt = Path("jobs"), json_out: JsonOpt = False) -> None:
    """One job, per task: reward (mean over attempts), resolved attempts, pass@1 and pass@k
    (k = attempts), tokens in/out, cost, mean trial duration, errors (first line).

    Exit 1 when a file of the job is missing or corrupt (what could be read is shown)."""
    record = _read_or_exit(job, jobs_dir)
    tasks = record.by_task()
    if json_out:
        _dump(record.to_json(tasks=True))
        raise typer.Exit(1 if record.problems else 0)
    render_job(record, tasks)
    raise typer.Exit(1 if record.problems else 0)


@jobs_app.command("compare")
def jobs_compare(
    job_a: Annotated[
        str, typer.Argument(metavar="JOB_A", help="Job A (the baseline): folder or name.")
    ],
    job_b: Annotated[str, typer.Argument(metavar="JOB_B", help="Job B: folder or name.")],
    jobs_dir: JobsDirOpt = Path("jobs"),
    json_out: JsonOpt = False,
) -> None:
    """Job B against job A over the tasks both ran: per-task rewards, the tasks that flipped
    (resolved by one and not the other), and the mean reward difference B − A with a paired
    bootstrap 95% interval (tasks resampled 10,000 times, fixed seed). Tasks only one job ran
    are named.

    Exit 1 when a file of either job is missing or corrupt (what could be read is compared)."""
    from repogym.run.compare import compare_jobs

    a = _read_or_exit(job_a, jobs_dir)
    b = _read_or_exit(job_b, jobs_dir)
    cmp = compare_jobs(a, b)
    broken = bool(a.problems or b.problems)
    if json_out:
        _dump(cmp.to_json())
        raise typer.Exit(1 if broken else 0)
    render_comparison(a, b, cmp)
    raise typer.Exit(1 if broken else 0)


@jobs_app.command("export")
def jobs_export(
    jobs: Annotated[
        list[str],
        typer.Argument(
            metavar="JOB", help="Job folders or names under --jobs-dir.", show_default=False
        ),
    ],
    out_file: Annotated[
        Path, typer.Option("--out", help="The file to write (replaced atomically).")
    ],
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="jsonl | parquet (parquet needs pyarrow); default: from --out's suffix "
            "(.parquet, else jsonl).",
        ),
    ] = None,
    jobs_dir: JobsDirOpt = Path("jobs"),
    json_out: JsonOpt = False,
) -> None:
    """One row per trial of the jobs: job, agent, model, task_id, attempt, reward, rewards (a
    JSON object as text), resolved, error, tokens in/out, cost, model calls, steps, durations,
    verification mode, start and finish times.

    Exit 1 when a file of a job is missing or corrupt (the readable trials are written)."""
    from repogym.run.records import EXPORT_FORMATS, RecordError, export_jobs, require_pyarrow

    if fmt is None:
        fmt = "parquet" if out_file.suffix.lower() == ".parquet" else "jsonl"
    if fmt not in EXPORT_FORMATS:
        raise bad_input(f"--format {fmt}: use jsonl or parquet")
    if out_file.is_dir():
        raise bad_input(f"--out {out_file}: is a folder; give a file name")
    if fmt == "parquet":
        try:
            require_pyarrow()
        except RecordError as exc:
            raise bad_input(str(exc)) from None
    records = [_read_or_exit(ref, jobs_dir) for ref in jobs]
    try:
        written = export_jobs(records, out_file, fmt)
    except OSError as exc:
        raise bad_input(f"--out {out_file}: {exc.strerror or exc}") from None
    if json_out:
        _dump(written.to_json())
    else:
        render_export(written.jobs, written.rows, written.out)
    raise typer.Exit(1 if written.broken else 0)
