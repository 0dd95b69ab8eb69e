"""``repogym run`` (an agent on tasks) and ``repogym verify`` (the quality gate)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from repogym.cli.app import app
from repogym.cli.common import (
    CaBundleOpt,
    ExecutorOpt,
    JobsOpt,
    JsonOpt,
    LimitOpt,
    PassEnvOpt,
    RayAddressOpt,
    SandboxOpt,
    bad_input,
    host_limits_or_exit,
    not_a_file_or_exit,
    remote_executor_or_exit,
    sandbox_or_exit,
    trusted_or_exit,
    use_ca_bundle,
)
from repogym.ui import err, escape, fmt_reward, out

VERIFICATION_MODES = ("task", "clean_room", "in_place")


@app.command()
def run(
    path: Annotated[Path, typer.Argument(help="A task folder or a dataset folder.")],
    agent: Annotated[
        str,
        typer.Option(
            "--agent",
            "-a",
            help="oracle | nop | llm:<provider>/<model> | command:'<shell command>'",
        ),
    ] = "oracle",
    agent_opt: Annotated[
        list[str] | None,
        typer.Option(
            "--agent-opt",
            help="key=value for the llm agent (repeatable): endpoint, max_steps, max_tokens, "
            "max_cost_usd, time_limit_s, temperature, … (docs/agents.md). Keys come from "
            "OPENAI_API_KEY / ANTHROPIC_API_KEY.",
        ),
    ] = None,
    sandbox: SandboxOpt = "local",
    ca_bundle: CaBundleOpt = None,
    jobs: JobsOpt = 1,
    attempts: Annotated[int, typer.Option("--attempts", "-k", min=1, help="Trials per task.")] = 1,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out", help="Job folder, new or empty (default: jobs/<time>-<agent>)."),
    ] = None,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Let --out name a folder that already holds a job: trials of the same name "
            "and job.json are replaced.",
        ),
    ] = False,
    verification: Annotated[
        str,
        typer.Option(
            "--verification",
            help="task (as each task declares, default) | clean_room | in_place (what a runner "
            "that verifies in the agent's container would pay)",
        ),
    ] = "task",
    limit: LimitOpt = None,
    pass_env: PassEnvOpt = None,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Run an agent on tasks in sandboxes; the task's verifier decides each reward.

    Exit 0 when every trial produced a reward, 1 when any trial errored (reward None), 2 for
    bad input.
    """
    use_ca_bundle(ca_bundle)
    from repogym.run.job import new_job_dir, run_job
    from repogym.run.remote import worker_env
    from repogym.sandbox import SandboxError

    agent_options = run_flags_or_exit(agent, agent_opt, verification, out_dir, overwrite)
    host_env = host_limits_or_exit(limit, pass_env).host_env()
    ex = remote_executor_or_exit(
        executor, address=ray_address, env=worker_env(agent, agent_options, host_env)
    )
    sandbox_or_exit(sandbox, here=ex is None)
    tasks = trusted_or_exit(path, limit, pass_env, quiet=json_out)
    if out_dir is None:
        out_dir = new_job_dir(Path("jobs"), agent.split(":")[0])

    def done(outcome: Any) -> None:
        if not json_out:
            print_trial(outcome)

    if not json_out:
        where = f"{sandbox} via {ex.name}" if ex is not None else sandbox
        err.print(
            f"running {len(tasks)} task(s) × {attempts} with agent {escape(agent)} on {where}"
        )
    try:
        outcomes, summary, job_path = run_job(
            tasks,
            agent,
            agent_options=agent_options,
            sandbox=sandbox,
            jobs=jobs,
            attempts=attempts,
            out_dir=out_dir,
            verification=None if verification == "task" else verification,
            on_done=done,
            executor=ex,
        )
    except SandboxError as exc:
        raise bad_input(str(exc)) from None
    if json_out:
        sys.stdout.write(json.dumps(run_payload(outcomes, summary, job_path), indent=2) + "\n")
    else:
        print_job(outcomes, summary, job_path, out_dir)
    raise typer.Exit(1 if summary.errors else 0)


def run_flags_or_exit(
    agent: str,
    agent_opt: list[str] | None,
    verification: str,
    out_dir: Path | None,
    overwrite: bool,
) -> dict[str, str]:
    """The ``--agent-opt`` pairs once ``run``'s flags are known good (else exit 2)."""
    from repogym.errors import RepogymError
    from repogym.run.agents import make_agent
    from repogym.spec import parse_opts

    try:
        agent_options = parse_opts(agent_opt or [], flag="--agent-opt")
        make_agent(agent, agent_options)
    except (ValueError, RepogymError) as exc:
        raise bad_input(str(exc)) from None
    if verification not in VERIFICATION_MODES:
        raise bad_input(f"--verification {verification!r}: use task, clean_room or in_place")
    if out_dir is not None:
        not_a_file_or_exit(out_dir, "--out")
        if out_dir.is_dir() and any(out_dir.iterdir()) and not overwrite:
            raise bad_input(
                f"--out {out_dir}: already holds a job; give a new folder, or --overwrite to "
                "replace its trials"
            )
    return agent_options


def print_trial(outcome: Any) -> None:
    """One line per finished trial (and the first line of its error)."""
    mark = "[red]error[/]" if outcome.error else f"reward {fmt_reward(outcome.reward)}"
    v = outcome.record.verification
    if v is not None and v.mode == "clean_room":
        mark += (
            f" [dim](clean room: {v.applied_count or 0} applied, "
            f"{v.deleted_count or 0} deleted, {v.dropped_count or 0} dropped)[/]"
        )
    err.print(f"  {escape(outcome.record.trial_name or '')}: {mark}")
    if outcome.error:
        err.print(f"    [dim]{escape(outcome.error.splitlines()[0][:200])}[/]")


def run_payload(outcomes: list[Any], summary: Any, job_path: Path) -> dict[str, Any]:
    """What ``run --json`` prints."""
    return {
        "job": str(job_path),
        "summary": summary.to_json(),
        "trials": [
            {
                "trial_name": o.record.trial_name,
                "task_id": o.record.task_id,
                "reward": o.reward,
                "rewards": o.reading.rewards if o.reading else None,
                "error": o.error,
                "result": str(o.path) if o.path else None,
            }
            for o in outcomes
        ],
    }


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
    out.print(f"results: {escape(str(job_path))}")


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


@app.command()
def verify(
    path: Annotated[Path, typer.Argument(help="A task folder or a dataset folder.")],
    reruns: Annotated[
        int, typer.Option("--reruns", "-k", min=0, help="Extra oracle runs that must agree.")
    ] = 2,
    sandbox: SandboxOpt = "local",
    ca_bundle: CaBundleOpt = None,
    jobs: JobsOpt = 1,
    write: Annotated[
        bool,
        typer.Option("--write/--no-write", help="Record the verdict in each task.toml."),
    ] = True,
    mutants: Annotated[
        int,
        typer.Option(
            "--mutants",
            min=0,
            help="Also run K wrong solutions derived from the gold patch; record the share the "
            "tests kill (mutant_kill_rate).",
        ),
    ] = 0,
    adversarial: Annotated[
        bool,
        typer.Option(
            "--adversarial",
            help="Also run generic wrong solutions built from the code the gold patch touches "
            "(hollow bodies, constants, the input unchanged, an object equal to everything); "
            "record adversarial_floor and gameability_gap; a task any of them earns the full "
            "reward on is gameable.",
        ),
    ] = False,
    limit: LimitOpt = None,
    pass_env: PassEnvOpt = None,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """The quality gate: oracle must score 1, nop 0, and oracle reruns must agree.

    Records status verified | flaky | broken | gameable in [metadata.repo2env.evaluation] (with
    --mutants, also mutant_kill_rate; with --adversarial, adversarial_floor and
    gameability_gap); exit 1 if any task is not verified.
    """
    use_ca_bundle(ca_bundle)
    from repogym.run.gate import VERIFIED, verify_tasks
    from repogym.run.remote import worker_env
    from repogym.run.trial import TrialRunner
    from repogym.sandbox import SandboxError, get_backend

    host_env = host_limits_or_exit(limit, pass_env).host_env()
    ex = remote_executor_or_exit(
        executor, address=ray_address, env=worker_env(None, None, host_env)
    )
    sandbox_or_exit(sandbox, here=ex is None)
    tasks = trusted_or_exit(path, limit, pass_env, quiet=json_out)
    runner = None
    if ex is None:  # on a cluster, each worker makes its own
        try:
            runner = TrialRunner(get_backend(sandbox))
        except SandboxError as exc:
            raise bad_input(str(exc)) from None

    def done(verdict: Any) -> None:
        if not json_out:
            colour = "green" if verdict.status == VERIFIED else "red"
            err.print(f"  {escape(verdict.task_id)}: [{colour}]{verdict.status}[/]")

    if not json_out:
        extra = f", {mutants} mutant(s)" if mutants else ""
        extra += ", red-team candidates" if adversarial else ""
        where = f"{sandbox} via {ex.name}" if ex is not None else sandbox
        err.print(
            f"verifying {len(tasks)} task(s): oracle × {1 + reruns}, nop × 1{extra}, on {where}"
        )
    verdicts = verify_tasks(
        tasks,
        runner,
        reruns=reruns,
        jobs=jobs,
        write=write,
        mutants=mutants,
        adversarial=adversarial,
        on_done=done,
        executor=ex,
        sandbox=sandbox,
    )
    bad = [v for v in verdicts if v.status != VERIFIED]
    if json_out:
        sys.stdout.write(json.dumps(verify_payload(verdicts), indent=2) + "\n")
    else:
        print_verdicts(tasks, verdicts, path)
    raise typer.Exit(1 if bad else 0)


def verify_payload(verdicts: list[Any]) -> dict[str, Any]:
    """What ``verify --json`` prints."""
    from repogym.run.gate import ERROR, VERIFIED

    bad = [v for v in verdicts if v.status != VERIFIED]
    errors = sum(v.status == ERROR for v in verdicts)  # their gate could not run
    gameable = sum(v.status == "gameable" for v in verdicts)
    return {
        "summary": {
            "tasks": len(verdicts),
            "verified": len(verdicts) - len(bad),
            "flaky": sum(v.status == "flaky" for v in verdicts),
            "broken": sum(v.status == "broken" for v in verdicts),
            **({"gameable": gameable} if gameable else {}),
            **({"error": errors} if errors else {}),
        },
        "tasks": [v.to_json() for v in verdicts],
    }


def print_verdicts(tasks: list[Any], verdicts: list[Any], path: Path) -> None:
    """The verify table: one row per task."""
    from repogym.run.gate import VERIFIED

    table = Table(title=f"verify {escape(str(path))}", title_justify="left")
    cols = ("task", "status", "mode", "oracle", "nop", "kill rate", "adv. floor", "canaries")
    for col in (*cols, "why"):
        table.add_column(col, overflow="fold")
    by_id = {t.id: t for t in tasks}
    for v in verdicts:
        colour = "green" if v.status == VERIFIED else "red"
        mode, kill, floor, canaries = verification_facts(by_id.get(v.task_id), v)
        table.add_row(
            escape(v.task_id),
            f"[{colour}]{v.status}[/]",
            mode,
            " ".join(fmt_reward(r) for r in v.oracle_rewards),
            fmt_reward(v.nop_reward),
            kill,
            floor,
            canaries,
            escape("; ".join(v.reasons)[:300]),
        )
    out.print(table)


def verification_facts(task: Any, verdict: Any) -> tuple[str, str, str, str]:
    """(verification mode, kill rate, adversarial floor, canaries) of a task for the verify
    table: each figure measured now, else the one recorded in its evaluation block, else —."""
    from repogym.harbor import load_task
    from repogym.harbor.provenance import read_verification

    if task is None:
        return "—", "—", "—", "—"
    mode: str
    try:
        mode = read_verification(task.repo2env).mode
    except ValueError:
        mode = "invalid"
    try:
        block = (load_task(task.path).repo2env or {}).get("evaluation") or {}
    except Exception:  # noqa: BLE001 - a table cell, never a crash
        block = {}
    if verdict.mutants is not None:
        rate = verdict.mutants.kill_rate
        runs = len(verdict.mutants.results)
    else:
        rate = block.get("mutant_kill_rate")
        rate = rate if isinstance(rate, int | float) else None
        runs = block.get("mutants", 0)
    kill = "—" if rate is None else f"{rate:.2f} ({runs})"
    canaries = verdict.canaries if verdict.canaries is not None else block.get("canaries")
    if not isinstance(canaries, int):
        cell = "—"
    else:  # a task with none is not protected against tests made to pass: say so in yellow
        cell = f"[green]{canaries}[/]" if canaries else "[yellow]0[/]"
    floor = adversarial_cell(verdict.adversarial, block)
    return mode.replace("_", " "), kill, floor, cell


def adversarial_cell(report: Any, block: dict[str, Any]) -> str:
    """``floor (candidates)`` of the red-team run measured now, else the recorded one, else —;
    red when the floor is above nop."""
    if report is not None:
        floor, runs, gap = report.floor, len(report.results), report.gap
    else:
        floor, runs = block.get("adversarial_floor"), block.get("adversarial_candidates", 0)
        gap = block.get("gameability_gap")
        if not isinstance(floor, int | float):
            return "—"
    if not runs:
        return "— (none built)"
    colour = "red" if isinstance(gap, int | float) and gap > 0 else "green"
    return f"[{colour}]{floor:g}[/] ({runs})"
