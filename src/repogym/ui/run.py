"""How ``repogym run`` and ``repogym verify`` show their results (the data comes from
:mod:`repogym.run`; nothing here computes a figure)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from repogym.ui import err, escape, escape_name, fmt_reward, out


def print_trial(outcome: Any) -> None:
    """One line per finished trial (and the first line of its error)."""
    mark = "[red]error[/]" if outcome.error else f"reward {fmt_reward(outcome.reward)}"
    v = outcome.record.verification
    if v is not None and v.mode == "clean_room":
        mark += (
            f" [dim](clean room: {v.applied_count or 0} applied, "
            f"{v.deleted_count or 0} deleted, {v.dropped_count or 0} dropped)[/]"
        )
    err.print(f"  {escape_name(outcome.record.trial_name or '')}: {mark}")
    if outcome.error:
        err.print(f"    [dim]{escape(outcome.error.splitlines()[0][:200])}[/]")


def print_job(outcomes: list[Any], summary: Any, job_path: Path, out_dir: Path) -> None:
    """The job's table, its tampering and model usage, and where its results are."""
    table = Table(title=f"job {escape(str(out_dir))}", title_justify="left")
    passes = ["pass@1"] + ([f"pass@{summary.k}"] if summary.k > 1 else [])
    for col in ("trials", "mean reward", "rewarded", "errors", "resolved", *passes):
        table.add_column(col, justify="right")
    table.add_row(
        str(summary.trials),
        fmt_reward(summary.mean_reward),
        str(summary.rewarded),
        str(summary.errors),
        str(summary.resolved),
        fmt_reward(summary.pass_at_1),
        *([fmt_reward(summary.pass_at_k)] if summary.k > 1 else []),
    )
    out.print(table)
    if summary.tampered:
        out.print(
            f"[red]{summary.tampered} trial(s) tampered with the judge[/] (reward 0; the "
            "reasons are in each result.json's verifier_result.details.tamper)"
        )
    usage = model_usage(outcomes)
    if usage:
        out.print(usage)
    out.print(f"results: {escape_name(str(job_path))}")


def model_usage(outcomes: list[Any]) -> str | None:
    """One line of model usage over the trials whose agent reported any (the llm agent)."""
    results = [o.record.agent_result for o in outcomes if o.record.agent_result is not None]
    usages = [r.usage for r in results if r.usage is not None]
    if not usages:
        return None
    calls = sum(u.model_calls or 0 for u in usages)
    tin = sum(u.input_tokens or 0 for u in usages)
    tout = sum(u.output_tokens or 0 for u in usages)
    costs = [u.cost_usd for u in usages]
    cost = (
        f"${sum(c for c in costs if c is not None):.4f}"
        if all(c is not None for c in costs)
        else "cost unknown (no price for the model)"
    )
    reasons: dict[str, int] = {}
    for r in results:
        if r.stop_reason:
            reasons[r.stop_reason] = reasons.get(r.stop_reason, 0) + 1
    stops = ", ".join(f"{k} {v}" for k, v in sorted(reasons.items()))
    return f"model: {calls} call(s), {tin:,} tokens in / {tout:,} out, {cost}; stopped: {stops}"


def print_verdict_line(task_id: str, status: str, *, verified: bool) -> None:
    """One line per task as the gate finishes it."""
    colour = "green" if verified else "red"
    err.print(f"  {escape_name(task_id)}: [{colour}]{status}[/]")


def print_verdicts(rows: list[Any], path: Path) -> None:
    """The verify table: one row per task (``rows``: :class:`repogym.run.verdicts.VerdictFacts`)."""
    table = Table(title=f"verify {escape(str(path))}", title_justify="left")
    cols = ("task", "status", "mode", "oracle", "nop", "kill rate", "adv. floor", "canaries")
    for col in (*cols, "why"):
        table.add_column(col, overflow="fold")
    for row in rows:
        v = row.verdict
        colour = "green" if row.verified else "red"
        table.add_row(
            escape_name(v.task_id),
            f"[{colour}]{v.status}[/]",
            *_fact_cells(row),
            escape("; ".join(v.reasons)[:300]),
        )
    out.print(table)


def _fact_cells(row: Any) -> tuple[str, str, str, str, str, str]:
    """(mode, oracle, nop, kill rate, adversarial floor, canaries) cells of one row."""
    v = row.verdict
    oracle = " ".join(fmt_reward(r) for r in v.oracle_rewards)
    if row.mode is None:  # no task to read
        return "—", oracle, fmt_reward(v.nop_reward), "—", "—", "—"
    kill = "—" if row.kill_rate is None else f"{row.kill_rate:.2f} ({row.mutant_runs})"
    if row.canaries is None:
        canaries = "—"
    else:  # a task with none is not protected against tests made to pass: say so in yellow
        canaries = f"[green]{row.canaries}[/]" if row.canaries else "[yellow]0[/]"
    mode = row.mode.replace("_", " ")
    return (
        mode,
        oracle,
        fmt_reward(v.nop_reward),
        kill,
        _adversarial_cell(row.adversarial),
        canaries,
    )


def _adversarial_cell(adv: Any) -> str:
    """``floor (candidates)``, or —; red when the floor is above nop."""
    if adv is None:
        return "—"
    if not adv.runs:
        return "— (none built)"
    colour = "red" if isinstance(adv.gap, int | float) and adv.gap > 0 else "green"
    return f"[{colour}]{adv.floor:g}[/] ({adv.runs})"
