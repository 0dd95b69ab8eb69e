"""Multi-step trials (Harbor's ``[[steps]]``): one agent session, the steps in order.

Per step: ``steps/<name>/workdir/`` is copied into the working directory and its ``setup.sh``
run; the agent gets ``steps/<name>/instruction.md`` (the oracle ``steps/<name>/solution/``, else
``solution/``); then the step's verifier runs, shared (in the agent's session, ``/tests`` = the
task's ``tests/`` with the step's ``tests/`` laid over it) or separate (its own environment with
the artifacts). A step that fails without rewards, or misses its ``min_reward``, ends the trial.
The trial's rewards roll up as ``multi_step_reward_strategy`` says (see
:func:`repogym.run.rewards.step_rewards`).
"""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repogym.run.agents import Agent, AgentContext
from repogym.run.health import task_healthcheck, wait_healthy
from repogym.run.models import AgentResult, StepResult, VerifierResult
from repogym.run.rewards import RewardReading, primary_reward, step_rewards
from repogym.run.services import task_mcp_servers
from repogym.run.verifier import VerifierPhase, phase_network, run_verifier, stack_folders
from repogym.sandbox import Session
from repogym.taskdir import Task
from repogym.taskdir.config import StepConfig, verifier_mode
from repogym.taskdir.trust import expand_env

if TYPE_CHECKING:
    from repogym.run.trial import TrialRunner


@dataclass
class StepsOutcome:
    results: list[StepResult]
    reading: RewardReading
    strategy: str
    stdout: str = ""
    exit_code: int | None = None
    notes: list[str] = field(default_factory=list)


def _phase(task: Task, step: StepConfig) -> VerifierPhase:
    base = task.config.verifier
    env = {**base.env, **step.verifier.env}
    return VerifierPhase(
        timeout_s=step.verifier.timeout_sec or base.timeout_sec,
        user=step.verifier.user or base.user,
        env=expand_env(env, task.host_env)[0],
        network=phase_network(task, "verifier"),
        tests=None,
    )


def _merged_tests(task: Task, step: StepConfig, into: Path) -> Path:
    """The task's ``tests/`` with the step's ``tests/`` over it (same names: the step's win)."""
    return stack_folders((task.tests_dir, task.step_dir(step.name) / "tests"), into)


def _min_reward_miss(rewards: dict[str, float] | None, threshold: Any) -> str | None:
    gates = {"reward": threshold} if isinstance(threshold, int | float) else dict(threshold)
    for key, least in gates.items():
        got = (rewards or {}).get(key, float("-inf"))
        if got < least:
            return f"{key} = {got:g} is below min_reward {least:g}"
    return None


def _prepare(session: Session, task: Task, step: StepConfig, workdir: str, user: Any) -> None:
    """Copy ``steps/<name>/workdir/`` into the working directory, run its ``setup.sh``, then
    the step's healthcheck."""
    folder = task.step_dir(step.name) / "workdir"
    if folder.is_dir():
        _setup(session, task, step, folder, workdir, user)
    if step.healthcheck is not None:  # after setup.sh, before the step's agent (Harbor's order)
        check = task_healthcheck(step.healthcheck, f"[steps.healthcheck] of step {step.name!r}")
        wait_healthy(session, check, label=f"step {step.name!r}", user=user)


def _setup(
    session: Session, task: Task, step: StepConfig, folder: Path, workdir: str, user: Any
) -> None:
    for item in sorted(folder.iterdir()):
        session.upload(item, f"{workdir.rstrip('/')}/{item.name}")
    if (folder / "setup.sh").is_file():
        res = session.exec(
            f"bash {shlex.quote(workdir.rstrip('/') + '/setup.sh')}",
            cwd=workdir,
            user=user,
            timeout_s=600,
            network=phase_network(task, "agent"),
        )
        if res.exit_code != 0:
            raise RuntimeError(
                f"step {step.name!r}: setup.sh exited with {res.exit_code}: "
                f"{res.stderr.strip()[-200:]}"
            )


def run_step(
    runner: TrialRunner,
    task: Task,
    agent: Agent,
    session: Session,
    step: StepConfig,
    workdir: str,
    verifier_timeout: float | None,
) -> tuple[StepResult, RewardReading | None, str]:
    """One step: (its result row, its reading or None when it failed first, verifier output)."""
    from repogym.run.trial import verify_separately

    row = StepResult(step_name=step.name)
    user = step.agent.user or task.config.agent.user
    try:
        _prepare(session, task, step, workdir, user)
        ctx = AgentContext(
            workdir=workdir,
            timeout_s=step.agent.timeout_sec or task.config.agent.timeout_sec,
            user=user,
            network=phase_network(task, "agent"),
            instruction=task.step_instruction(step.name),
            solution_dir=task.step_dir(step.name) / "solution",
            mcp_servers=task_mcp_servers(task),
        )
        outcome = agent.run(session, task, ctx)
        row.agent_result = AgentResult(
            exit_code=outcome.exit_code,
            timed_out=outcome.timed_out,
            duration_s=round(outcome.duration_s, 3),
            output_tail=outcome.output_tail,
        )
    except Exception as exc:  # noqa: BLE001 - a failed step ends the trial, reported on its row
        row.error = f"{type(exc).__name__}: {exc}"
        return row, None, ""
    session.kill_all()
    phase = _phase(task, step)
    if verifier_mode(step.verifier, task.config.verifier) == "separate":
        from repogym.run.separate import verifier_context

        checked = verify_separately(
            runner.backend,
            runner.build_spec,
            session,
            task,
            step.verifier.environment or task.config.verifier.environment,
            verifier_context(task, step.name),
            [*task.config.artifacts, *step.artifacts],
            phase,
            verifier_timeout=verifier_timeout,
            close_agent=False,
        )
        checked.session.close()
        stdout, code, reading = checked.stdout, checked.exit_code, checked.reading
        row.verification = checked.verification
    else:
        tmp = Path(tempfile.mkdtemp(prefix="repogym-step-tests-"))
        try:
            tests = _merged_tests(task, step, tmp / "tests")
            stdout, code, reading = run_verifier(
                session,
                task,
                workdir,
                timeout_s=verifier_timeout,
                phase=dataclasses.replace(phase, tests=tests),
            )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        # Nothing of this step's verifier reaches the next step's agent: its processes are
        # gone and its output is taken away (Harbor moves it out of the container too).
        session.kill_all()
        session.exec(
            "rm -rf /logs/verifier && mkdir -p /logs/verifier",
            timeout_s=60,
            user="root",
            network=False,
        )
    row.verifier_result = VerifierResult(
        rewards=reading.rewards, reward=reading.reward, exit_code=code, error=reading.error
    )
    return row, reading, stdout


def run_steps(
    runner: TrialRunner,
    task: Task,
    agent: Agent,
    session: Session,
    workdir: str,
    verifier_timeout: float | None,
) -> StepsOutcome:
    """Run every step in order in ``session``; stop early as Harbor does."""
    steps = task.config.steps or []
    strategy = task.config.multi_step_reward_strategy or "mean"
    rows: list[StepResult] = []
    per_step: list[dict[str, float] | None] = []
    outputs: list[str] = []
    code: int | None = None
    for step in steps:
        row, reading, stdout = run_step(
            runner, task, agent, session, step, workdir, verifier_timeout
        )
        rows.append(row)
        outputs.append(f"=== step {step.name} ===\n{stdout}")
        per_step.append(reading.rewards if reading else None)
        code = row.verifier_result.exit_code if row.verifier_result else None
        if reading is None:
            row.stopped = "the step failed before its verifier ran"
            break
        if step.min_reward is not None:
            miss = _min_reward_miss(reading.rewards, step.min_reward)
            if miss:
                row.stopped = miss
                break
    rewards, how = step_rewards(per_step, strategy)
    if rewards is None:
        errors = [r.error or (r.verifier_result.error if r.verifier_result else None) for r in rows]
        why = "; ".join(f"{r.step_name}: {e}" for r, e in zip(rows, errors, strict=True) if e)
        error = f"no step rewards to roll up ({how})" + (f": {why}" if why else "")
        reading = RewardReading(None, None, "steps", error)
    else:
        primary, problem = primary_reward(rewards, f"the {strategy} of the steps' rewards")
        reading = RewardReading(rewards, primary, "steps", problem)
    reading.warnings.append(how)
    return StepsOutcome(rows, reading, strategy, "\n".join(outputs), code)
