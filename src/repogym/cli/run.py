"""``repogym run`` (an agent on tasks) and ``repogym verify`` (the quality gate)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from repogym.cli.app import app
from repogym.cli.common import (
    MAX_ATTEMPTS,
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
    output_folder_or_exit,
    remote_executor_or_exit,
    sandbox_or_exit,
    trusted_or_exit,
    use_ca_bundle,
    writable_tasks_or_exit,
)
from repogym.ui import err, escape, fail
from repogym.ui.run import print_job, print_trial, print_verdict_line, print_verdicts

VERIFICATION_MODES = ("task", "clean_room", "in_place")


AgentOpt = Annotated[
    str,
    typer.Option(
        "--agent",
        "-a",
        help="oracle | nop | llm:<provider>/<model> | command:'<shell command>'",
    ),
]
AgentOptOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--agent-opt",
        help="key=value for the llm agent (repeatable): endpoint, max_steps, max_tokens, "
        "max_cost_usd, time_limit_s, temperature, … (docs/agents.md). Keys come from "
        "OPENAI_API_KEY / ANTHROPIC_API_KEY.",
    ),
]
AttemptsOpt = Annotated[
    int, typer.Option("--attempts", "-k", min=1, max=MAX_ATTEMPTS, help="Trials per task.")
]
OutOpt = Annotated[
    Path | None,
    typer.Option("--out", help="Job folder, new or empty (default: jobs/<time>-<agent>)."),
]
OverwriteOpt = Annotated[
    bool,
    typer.Option(
        "--overwrite",
        help="Let --out name a folder that already holds a job: trials of the same name "
        "and job.json are replaced.",
    ),
]
ResumeOpt = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="Continue the job in --out (killed or interrupted): trials it finished are "
        "kept, the others run; job.json covers them all.",
    ),
]
VerificationOpt = Annotated[
    str,
    typer.Option(
        "--verification",
        help="task (as each task declares, default) | clean_room | in_place (what a runner "
        "that verifies in the agent's container would pay)",
    ),
]


@app.command()
def run(
    path: Annotated[Path, typer.Argument(help="A task folder or a dataset folder.")],
    agent: AgentOpt = "oracle",
    agent_opt: AgentOptOpt = None,
    sandbox: SandboxOpt = "local",
    ca_bundle: CaBundleOpt = None,
    jobs: JobsOpt = 1,
    attempts: AttemptsOpt = 1,
    out_dir: OutOpt = None,
    overwrite: OverwriteOpt = False,
    resume: ResumeOpt = False,
    verification: VerificationOpt = "task",
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
    from repogym.run.job import JobInterrupted, new_job_dir, run_job, run_payload
    from repogym.run.remote import worker_env
    from repogym.sandbox import SandboxError

    agent_options = run_flags_or_exit(agent, agent_opt, verification, out_dir, overwrite or resume)
    if resume and (out_dir is None or not out_dir.is_dir()):
        raise bad_input("--resume needs --out naming the job folder to continue")
    host_env = host_limits_or_exit(limit, pass_env).host_env()
    ex = remote_executor_or_exit(
        executor, address=ray_address, env=worker_env(agent, agent_options, host_env)
    )
    sandbox_or_exit(sandbox, here=ex is None)
    tasks = trusted_or_exit(path, limit, pass_env, quiet=json_out, strict=True)
    if out_dir is None:
        out_dir = new_job_dir(Path("jobs"), agent.split(":")[0])
    output_folder_or_exit(out_dir, "--out")

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
            resume=resume,
        )
    except SandboxError as exc:
        raise bad_input(str(exc)) from None
    except JobInterrupted as stop:
        fail(
            f"interrupted: {len(stop.outcomes)} trial(s) recorded in {out_dir}/job.json; "
            f"continue with: repogym run {path} --out {out_dir} --resume"
        )
        raise typer.Exit(130) from None
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
                f"--out {out_dir}: already holds a job; give a new folder, --resume to continue "
                "it, or --overwrite to replace its trials"
            )
    return agent_options


@app.command()
def verify(
    path: Annotated[Path, typer.Argument(help="A task folder or a dataset folder.")],
    reruns: Annotated[
        int,
        typer.Option(
            "--reruns", "-k", min=0, max=MAX_ATTEMPTS, help="Extra oracle runs that must agree."
        ),
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
            max=MAX_ATTEMPTS,
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
    from repogym.run.verdicts import verdict_facts, verify_payload
    from repogym.sandbox import SandboxError, get_backend

    host_env = host_limits_or_exit(limit, pass_env).host_env()
    ex = remote_executor_or_exit(
        executor, address=ray_address, env=worker_env(None, None, host_env)
    )
    sandbox_or_exit(sandbox, here=ex is None)
    tasks = trusted_or_exit(path, limit, pass_env, quiet=json_out)
    if write:
        writable_tasks_or_exit(tasks, "the verdict (use --no-write to verify without recording)")
    runner = None
    if ex is None:  # on a cluster, each worker makes its own
        try:
            runner = TrialRunner(get_backend(sandbox))
        except SandboxError as exc:
            raise bad_input(str(exc)) from None

    def done(verdict: Any) -> None:
        if not json_out:
            print_verdict_line(verdict.task_id, verdict.status, verified=verdict.status == VERIFIED)

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
        print_verdicts(verdict_facts(tasks, verdicts), path)
    raise typer.Exit(1 if bad else 0)
