"""``repogym rollout``: the built-in agent on a served OpenEnv environment."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from repogym.cli.app import app
from repogym.cli.common import MAX_ATTEMPTS, JobsOpt, JsonOpt, bad_input, not_a_file_or_exit
from repogym.ui import err, escape, escape_name, fmt_reward, out


@app.command()
def rollout(
    openenv: Annotated[
        str,
        typer.Option(
            "--openenv", help="URL of an OpenEnv server (e.g. `repogym serve`): http(s)://host:port"
        ),
    ],
    agent: Annotated[
        str, typer.Option("--agent", "-a", help="llm:<provider>/<model> (the built-in agent).")
    ],
    agent_opt: Annotated[
        list[str] | None,
        typer.Option("--agent-opt", help="key=value for the agent (repeatable; docs/agents.md)."),
    ] = None,
    task_id: Annotated[
        list[str] | None,
        typer.Option("--task-id", help="Task to roll out (repeatable; default: every task)."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="At most this many tasks.")
    ] = None,
    attempts: Annotated[
        int, typer.Option("--attempts", "-k", min=1, max=MAX_ATTEMPTS, help="Rollouts per task.")
    ] = 1,
    jobs: JobsOpt = 1,
    token: Annotated[
        str | None,
        typer.Option(
            "--orchestrator-token",
            envvar="REPOGYM_ORCHESTRATOR_TOKEN",
            help="The server's orchestrator token, to grade each episode with evaluate "
            "(without it rollouts are recorded ungraded).",
        ),
    ] = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Job folder, new or empty (default: jobs/…).")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Drive a served environment with the built-in agent through OpenEnv's client.

    One WebSocket episode per task and attempt: reset, the agent's tool calls as exec/read/write
    actions, then evaluate with the orchestrator token. Written like a `repogym run` job (read it
    with `repogym jobs`). Exit 0 when every rollout was graded, 1 otherwise, 2 for bad input.
    """
    from repogym.run.openenv_rollout import RolloutError, list_served_tasks, run_rollouts

    url = openenv.rstrip("/")
    options = _agent_options(openenv, agent, agent_opt)
    try:
        ids = list(task_id) if task_id else list_served_tasks(url)
    except RolloutError as exc:
        raise bad_input(str(exc)) from None
    ids = ids[:limit] if limit else ids
    if not ids:
        raise bad_input(f"{url}: serves no tasks")
    out_dir = _job_dir(out_dir)
    if not json_out:
        err.print(f"rolling out {len(ids)} task(s) × {attempts} with {escape(agent)} on {url}")
        if not token:
            err.print("[yellow]no --orchestrator-token: rollouts are recorded but not graded[/]")

    def done(r: Any) -> None:
        if not json_out:
            mark = f"reward {fmt_reward(r.reward)}"
            if r.error:
                mark += f" [red]({escape(r.error[:160])})[/]"
            err.print(f"  {escape_name(r.trial_name)}: {mark}")

    rollouts, job, job_path = run_rollouts(
        url, agent, options, ids, attempts=attempts, jobs=jobs, token=token, out_dir=out_dir,
        on_done=done,
    )  # fmt: skip
    summary = job.summary
    assert summary is not None
    if json_out:
        sys.stdout.write(json.dumps({"job": str(job_path), **job.to_json()}, indent=2) + "\n")
    else:
        out.print(
            f"{summary.trials} rollout(s), mean reward {fmt_reward(summary.mean_reward)}, "
            f"{summary.errors} error(s); results: {escape(str(job_path))}"
        )
    raise typer.Exit(1 if summary.errors or summary.rewarded < len(rollouts) else 0)


def _agent_options(openenv: str, agent: str, agent_opt: list[str] | None) -> dict[str, str]:
    """The ``--agent-opt`` pairs, once the flags are known good (else exit 2)."""
    from repogym.errors import RepogymError
    from repogym.openenv import OpenEnvMissing, require_openenv
    from repogym.run.llm_agent import LLMAgent
    from repogym.spec import parse_opts

    if not openenv.startswith(("http://", "https://")):
        raise bad_input(f"--openenv {openenv!r}: give an http:// or https:// URL")
    if not agent.startswith("llm:"):
        raise bad_input(f"--agent {agent!r}: rollout drives the built-in llm:<provider>/<model>")
    try:
        require_openenv()
    except OpenEnvMissing as exc:
        raise bad_input(str(exc)) from None
    try:
        options = parse_opts(agent_opt or [], flag="--agent-opt")
        LLMAgent(agent[len("llm:") :], options)
    except (ValueError, RepogymError) as exc:
        raise bad_input(str(exc)) from None
    return options


def _job_dir(out_dir: Path | None) -> Path:
    """``--out`` (new or empty), else a new folder under ``jobs/``."""
    from repogym.run.job import new_job_dir

    if out_dir is None:
        return new_job_dir(Path("jobs"), "rollout")
    not_a_file_or_exit(out_dir, "--out")
    if out_dir.is_dir() and any(out_dir.iterdir()):
        raise bad_input(f"--out {out_dir}: already holds files; give a new folder")
    return out_dir
