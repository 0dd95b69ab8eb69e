"""Tables and notes of ``repogym jobs``: the jobs of a folder, one job per task, two jobs
compared, and what an export wrote.

The run layer reads the records (:class:`repogym.run.records.JobRecord`,
:class:`repogym.run.compare.Comparison`); this module only prints them. It reads them through
the read-only protocols below, which name exactly the fields printed, so ``ui`` (a foundation
layer) never imports ``run``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from rich import box
from rich.table import Table

from repogym.ui import err, escape, escape_name, fmt_reward, out, warn

NONE = "—"


class JobStatsView(Protocol):
    """A job's totals (:class:`repogym.run.records.JobStats`)."""

    @property
    def tasks(self) -> int: ...
    @property
    def trials(self) -> int: ...
    @property
    def mean_reward(self) -> float | None: ...
    @property
    def resolved(self) -> int: ...
    @property
    def pass_at_1(self) -> float | None: ...
    @property
    def pass_at_k(self) -> float | None: ...
    @property
    def k(self) -> int: ...
    @property
    def errors(self) -> int: ...
    @property
    def input_tokens(self) -> int | None: ...
    @property
    def output_tokens(self) -> int | None: ...
    @property
    def cost_usd(self) -> float | None: ...


class TaskStatsView(Protocol):
    """One task of a job (:class:`repogym.run.records.TaskStats`)."""

    @property
    def task_id(self) -> str: ...
    @property
    def attempts(self) -> int: ...
    @property
    def reward(self) -> float | None: ...
    @property
    def resolved(self) -> int: ...
    @property
    def pass_at_1(self) -> float | None: ...
    @property
    def pass_at_k(self) -> float | None: ...
    @property
    def k(self) -> int: ...
    @property
    def input_tokens(self) -> int | None: ...
    @property
    def output_tokens(self) -> int | None: ...
    @property
    def cost_usd(self) -> float | None: ...
    @property
    def duration_s(self) -> float | None: ...
    @property
    def errors(self) -> Sequence[str]: ...


class JobView(Protocol):
    """One job folder as read (:class:`repogym.run.records.JobRecord`)."""

    @property
    def name(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def agent(self) -> str | None: ...
    @property
    def models(self) -> Sequence[str]: ...
    @property
    def started_at(self) -> str | None: ...
    @property
    def trials(self) -> Sequence[object]: ...
    @property
    def problems(self) -> Sequence[str]: ...
    @property
    def in_progress(self) -> Sequence[str]: ...
    @property
    def ignored(self) -> Sequence[str]: ...
    def stats(self) -> JobStatsView: ...


class TaskPairView(Protocol):
    """One task both jobs ran (:class:`repogym.run.compare.TaskPair`)."""

    @property
    def task_id(self) -> str: ...
    @property
    def a(self) -> TaskStatsView: ...
    @property
    def b(self) -> TaskStatsView: ...
    @property
    def diff(self) -> float | None: ...
    @property
    def flip(self) -> str | None: ...


class ComparisonView(Protocol):
    """Job B against job A (:class:`repogym.run.compare.Comparison`)."""

    @property
    def pairs(self) -> Sequence[TaskPairView]: ...
    @property
    def only_in_a(self) -> Sequence[str]: ...
    @property
    def only_in_b(self) -> Sequence[str]: ...
    @property
    def changed(self) -> Sequence[str]: ...
    @property
    def confidence(self) -> float: ...
    @property
    def ci(self) -> tuple[float, float] | None: ...
    @property
    def compared(self) -> Sequence[TaskPairView]: ...
    @property
    def no_reward(self) -> Sequence[str]: ...
    @property
    def mean_a(self) -> float | None: ...
    @property
    def mean_b(self) -> float | None: ...
    @property
    def diff(self) -> float | None: ...
    @property
    def resolved_only_by_a(self) -> Sequence[str]: ...
    @property
    def resolved_only_by_b(self) -> Sequence[str]: ...
    def side_stats(self, side: str) -> dict[str, Any]: ...


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


def agent_label(job: JobView) -> str:
    """The agent, with the model(s) its trials report when the agent spec does not name them."""
    agent = job.agent or NONE
    extra = [m for m in job.models if m not in agent]
    return f"{agent} ({', '.join(extra)})" if extra else agent


def _more(n: int) -> str:
    return f" (and {n} more)" if n > 0 else ""


# --- output --------------------------------------------------------------------------------


def report_problems(job: JobView) -> None:
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


def render_jobs(jobs_dir: Path, jobs: Sequence[JobView]) -> None:
    """``repogym jobs list``: one row per job, then a warning per broken job."""
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


def render_job(record: JobView, tasks: Mapping[str, TaskStatsView]) -> None:
    """``repogym jobs show``: one row per task and a total row, then the job's problems."""
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
            escape_name(t.task_id),
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
    report_problems(record)


def _compare_head(a: JobView, b: JobView, cmp: ComparisonView) -> Table:
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
    return head


def render_comparison(a: JobView, b: JobView, cmp: ComparisonView) -> None:
    """``repogym jobs compare``: the head-to-head table, the per-task table, the flipped and
    one-sided tasks, then both jobs' problems."""
    out.print(_compare_head(a, b, cmp))
    table = Table(title="per task", title_justify="left")
    table.add_column("task", overflow="fold", min_width=16)
    for col in ("A reward", "B reward", "B − A", "A resolved", "B resolved"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("flip")
    for p in cmp.pairs:
        flip = {"b": "[green]B only[/]", "a": "[red]A only[/]"}.get(p.flip or "", "")
        table.add_row(
            escape_name(p.task_id),
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
        report_problems(job)


def render_export(records: Sequence[JobView], rows: int, out_file: Path) -> None:
    """``repogym jobs export``: each job's problems, then what was written where."""
    for r in records:
        report_problems(r)
    out.print(f"wrote {rows} trial row(s) from {len(records)} job(s) to {escape(str(out_file))}")
