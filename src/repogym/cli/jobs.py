"""``repogym jobs``: list, show, compare and export the job folders ``repogym run`` wrote."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.table import Table

from repogym.cli.app import app, new_group
from repogym.cli.common import JsonOpt, bad_input
from repogym.ui import err, escape, fmt_reward, out, warn

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
NONE = "—"


# --- formatting ----------------------------------------------------------------------------


def fmt_count(value: int | None) -> str:
    """A token count, compact: 1,234 / 12.3k / 4.56M; — when unknown."""
    if value is None:
        return NONE
    if value < 10_000:
        return f"{value:,}"
    if value < 1_000_000:
        return f"{value / 1000:.1f}k"
    return f"{value / 1_000_000:.2f}M"


def fmt_tokens(tokens_in: int | None, tokens_out: int | None) -> str:
    if tokens_in is None and tokens_out is None:
        return NONE
    return f"{fmt_count(tokens_in)} / {fmt_count(tokens_out)}"


def fmt_cost(value: float | None) -> str:
    if value is None:
        return NONE
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


def fmt_seconds(value: float | None) -> str:
    return NONE if value is None else f"{value:.1f} s"


def fmt_time(iso: str | None) -> str:
    """An ISO time as ``YYYY-MM-DD HH:MM`` (as recorded: UTC for repogym run)."""
    return NONE if not iso else iso[:16].replace("T", " ")


def fmt_signed(value: float | None) -> str:
    return NONE if value is None else f"{value:+.3g}"


def fmt_status(status: str) -> str:
    colour = {"done": "green", "running": "yellow", "broken": "red"}.get(status, "white")
    return f"[{colour}]{status}[/]"


def agent_label(job: JobRecord) -> str:
    """The agent, with the model(s) its trials report when the agent spec does not name them."""
    agent = job.agent or NONE
    extra = [m for m in job.models if m not in agent]
    return f"{agent} ({', '.join(extra)})" if extra else agent


# --- reading, with CLI errors ----------------------------------------------------------------


def _read_or_exit(ref: str, jobs_dir: Path) -> JobRecord:
    from repogym.run.records import RecordError, read_job, resolve_job

    try:
        return read_job(resolve_job(ref, jobs_dir))
    except RecordError as exc:
        raise bad_input(str(exc)) from None
    except OSError as exc:  # e.g. a folder we may not list
        raise bad_input(f"{ref}: {exc.strerror or exc}") from None


def _report_problems(job: JobRecord) -> None:
    """One warning line per unreadable file, and a note for a job without job.json."""
    for problem in job.problems:
        warn(f"{job.name}: {problem}")
    if job.status == "running":
        busy = f"; {len(job.in_progress)} trial(s) in progress" if job.in_progress else ""
        err.print(
            f"[yellow]note:[/] {escape(job.name)}: no job.json yet (still running, or stopped "
            f"before the end): showing the {len(job.trials)} finished trial(s){busy}"
        )
    if job.ignored:
        err.print(
            f"[dim]{escape(job.name)}: {len(job.ignored)} trial folder(s) not in job.json "
            "ignored (left by an earlier run in the same folder)[/]"
        )


def _dump(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2) + "\n")


# --- commands --------------------------------------------------------------------------------


@jobs_app.command("list")
def jobs_list(jobs_dir: JobsDirOpt = Path("jobs"), json_out: JsonOpt = False) -> None:
    """Every job under --jobs-dir: agent, start, tasks, trials, mean reward, resolved, pass@1,
    errors, tokens, cost. A job whose files cannot be read is listed as broken with the reason;
    a job without job.json yet (running) is read from its finished trials."""
    from repogym.run.records import JOB_FILE, list_jobs

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
        jobs = list_jobs(jobs_dir)
    except OSError as exc:
        raise bad_input(f"{jobs_dir}: {exc.strerror or exc}") from None
    if json_out:
        _dump({"jobs_dir": str(jobs_dir), "jobs": [j.to_json() for j in jobs]})
        return
    if not jobs:
        out.print(f"no jobs under {escape(str(jobs_dir))}")
        return
    table = Table(
        title=f"jobs in {escape(str(jobs_dir))}",
        title_justify="left",
        box=box.SIMPLE_HEAD,  # twelve columns: no rules between them, to fit 120 columns
        padding=0,
        show_edge=False,
    )
    table.add_column("job", overflow="fold", min_width=10)
    table.add_column("status")
    table.add_column("agent", overflow="fold", min_width=8)
    table.add_column("started", min_width=10)
    for col in ("tasks", "trials", "reward", "resolved", "pass@1", "errors"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("tokens in/out", justify="right", min_width=7)
    table.add_column("cost", justify="right", no_wrap=True)
    for job in jobs:
        s = job.stats()
        table.add_row(
            escape(job.name),
            fmt_status(job.status),
            escape(agent_label(job)),
            fmt_time(job.started_at),
            str(s.tasks),
            str(s.trials),
            fmt_reward(s.mean_reward),
            str(s.resolved),
            fmt_reward(s.pass_at_1),
            str(s.errors),
            fmt_tokens(s.input_tokens, s.output_tokens),
            fmt_cost(s.cost_usd),
        )
    out.print(table)
    for job in jobs:
        if job.problems:
            warn(f"{job.name}: broken: {job.problems[0]}" + _more(len(job.problems) - 1))


def _more(n: int) -> str:
    return f" (and {n} more)" if n > 0 else ""


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
    s = record.stats()
    ks = {t.k for t in tasks.values()}
    pass_k = f"pass@{next(iter(ks))}" if len(ks) == 1 else "pass@n"
    title = (
        f"job {escape(record.name)} · {escape(agent_label(record))} · "
        f"{fmt_status(record.status)} · started {fmt_time(record.started_at)}"
    )
    table = Table(title=title, title_justify="left")
    # Long task ids wrap; the numbers never do (a squeezed number would read "1…").
    table.add_column("task", overflow="fold", min_width=16)
    for col in ("reward", "resolved", "pass@1", pass_k, "tokens in/out", "cost", "duration"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("errors", overflow="fold", min_width=8)
    for t in tasks.values():
        first = t.errors[0][:160] if t.errors else ""
        table.add_row(
            escape(t.task_id),
            fmt_reward(t.reward),
            f"{t.resolved}/{t.attempts}",
            fmt_reward(t.pass_at_1),
            fmt_reward(t.pass_at_k),
            fmt_tokens(t.input_tokens, t.output_tokens),
            fmt_cost(t.cost_usd),
            fmt_seconds(t.duration_s),
            escape(first) + (f" [dim](+{len(t.errors) - 1} more)[/]" if len(t.errors) > 1 else ""),
        )
    table.add_section()
    table.add_row(
        f"[bold]all {s.tasks}[/]",
        fmt_reward(s.mean_reward),
        f"{s.resolved}/{s.trials}",
        fmt_reward(s.pass_at_1),
        fmt_reward(s.pass_at_k) if len(ks) <= 1 else f"{fmt_reward(s.pass_at_k)} (k={s.k})",
        fmt_tokens(s.input_tokens, s.output_tokens),
        fmt_cost(s.cost_usd),
        "",
        f"{s.errors} error(s)" if s.errors else "",
    )
    out.print(table)
    _report_problems(record)
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

    sa, sb = cmp.side_stats("a"), cmp.side_stats("b")
    head = Table(title=f"compare A = {escape(a.name)} → B = {escape(b.name)}", title_justify="left")
    head.add_column("")
    for col in ("A", "B", "B − A"):
        head.add_column(col, justify="right")
    head.add_row("agent", escape(agent_label(a)), escape(agent_label(b)), "")
    head.add_row(
        "tasks",
        f"{len(cmp.pairs) + len(cmp.only_in_a)}",
        f"{len(cmp.pairs) + len(cmp.only_in_b)}",
        f"{len(cmp.pairs)} in both",
    )
    pct = f"{cmp.confidence:.0%}"
    ci = f" [{fmt_signed(cmp.ci[0])}, {fmt_signed(cmp.ci[1])}] {pct} CI" if cmp.ci else ""
    head.add_row(
        f"mean reward ({len(cmp.compared)} task(s))",
        fmt_reward(cmp.mean_a),
        fmt_reward(cmp.mean_b),
        f"{fmt_signed(cmp.diff)}{ci}",
    )
    head.add_row(
        "tasks resolved",
        str(sa["tasks_resolved"]),
        str(sb["tasks_resolved"]),
        f"{sb['tasks_resolved'] - sa['tasks_resolved']:+d}",
    )
    pass_diff = (
        sb["pass_at_1"] - sa["pass_at_1"]
        if sa["pass_at_1"] is not None and sb["pass_at_1"] is not None
        else None
    )
    head.add_row(
        "pass@1", fmt_reward(sa["pass_at_1"]), fmt_reward(sb["pass_at_1"]), fmt_signed(pass_diff)
    )
    out.print(head)

    table = Table(title="per task", title_justify="left")
    table.add_column("task", overflow="fold", min_width=16)
    for col in ("A reward", "B reward", "B − A", "A resolved", "B resolved"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("flip")
    for p in cmp.pairs:
        flip = {"b": "[green]B only[/]", "a": "[red]A only[/]"}.get(p.flip or "", "")
        table.add_row(
            escape(p.task_id),
            fmt_reward(p.a.reward),
            fmt_reward(p.b.reward),
            fmt_signed(p.diff),
            f"{p.a.resolved}/{p.a.attempts}",
            f"{p.b.resolved}/{p.b.attempts}",
            flip,
        )
    out.print(table)
    flips = (
        ("resolved by B only", cmp.resolved_only_by_b),
        ("resolved by A only", cmp.resolved_only_by_a),
    )
    notes = (
        ("only in A", cmp.only_in_a),
        ("only in B", cmp.only_in_b),
        ("no reward in A or B (left out of the mean)", cmp.no_reward),
        ("changed between the jobs (content hash differs)", cmp.changed),
    )
    for label, ids in (*flips, *((label, ids) for label, ids in notes if ids)):
        out.print(f"{label} ({len(ids)}): " + (escape(", ".join(ids)) if ids else NONE))
    for job in (a, b):
        _report_problems(job)
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
    from repogym.run.records import EXPORT_FORMATS, RecordError, export, require_pyarrow

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
        rows = export(records, out_file, fmt)
    except OSError as exc:
        raise bad_input(f"--out {out_file}: {exc.strerror or exc}") from None
    broken = [r for r in records if r.problems]
    if json_out:
        _dump(
            {
                "out": str(out_file),
                "format": fmt,
                "rows": rows,
                "jobs": [r.name for r in records],
                "problems": {r.name: r.problems for r in broken},
            }
        )
    else:
        for r in records:
            _report_problems(r)
        out.print(
            f"wrote {rows} trial row(s) from {len(records)} job(s) to {escape(str(out_file))}"
        )
    raise typer.Exit(1 if broken else 0)
