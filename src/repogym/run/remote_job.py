"""A job's trials on an executor (``repogym run --executor ray``).

Each trial (task × attempt) is one unit: :func:`run_trial_unit` runs on a worker, from the
task's archive, and returns the trial's outcome and the files of its folder as data
(:class:`ShippedTrial`). The driver alone writes: each trial folder and its ``result.json``
(``task_path`` naming the driver's task folder, ``executor`` naming the node), the task's build
log once, and — in :func:`repogym.run.job.run_job` — ``job.json``: the same layout as a local
job. A unit that never finishes (its worker died past the executor's retries, or the unit
itself failed outside the trial) is still a trial: a result with ``exception_info``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from repogym import __version__
from repogym.atomic import atomic_write
from repogym.executors import Done, Executor, Work
from repogym.executors.shipping import folder_files, write_files
from repogym.run.models import (
    RESULT_FILE,
    AgentInfo,
    AgentResult,
    ExceptionInfo,
    ExecutorInfo,
    SandboxInfo,
    TrialResult,
    VerifierResult,
    now,
)
from repogym.run.remote import (
    AgentSpec,
    ShippedTask,
    agent_for_workers,
    runner_for,
    ship_tasks,
    worker_agent,
    worker_task,
)
from repogym.run.rewards import RewardReading
from repogym.run.trial import TrialOutcome
from repogym.taskdir import Task
from repogym.taskdir.harbor_digest import harbor_digest


@dataclass
class ShippedTrial:
    """What a trial unit returns: the outcome (no path: the driver decides where it lives),
    the files of the trial folder, and the task's build log when this unit built it."""

    outcome: TrialOutcome
    files: dict[str, bytes]
    build_log: bytes | None = None


def run_trial_unit(
    task: ShippedTask,
    trial_name: str,
    agent: AgentSpec,
    sandbox: str,
    verification: str | None,
) -> ShippedTrial:
    """One trial on a worker (module-level: a Ray task runs it by reference)."""
    loaded = worker_task(task)
    runner = runner_for(sandbox, verification)
    scratch = Path(tempfile.mkdtemp(prefix="repogym-trial-"))
    try:
        log = scratch / "build.log"
        with contextlib.suppress(Exception):  # as locally: a failed build is the trial's to report
            runner.build(loaded, log=log)
        trial_dir = scratch / trial_name
        outcome = runner.run(
            loaded, worker_agent(agent, scratch), out_dir=trial_dir, trial_name=trial_name
        )
        return ShippedTrial(
            dataclasses.replace(outcome, path=None),
            folder_files(trial_dir),
            log.read_bytes() if log.is_file() else None,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def trial_work(
    executor: Executor,
    tasks: Sequence[Task],
    agent_spec: str,
    agent_options: dict[str, str] | None,
    *,
    sandbox: str,
    attempts: int,
    verification: str | None,
) -> list[Work]:
    """The units of a job: one per trial, asking the task's ``[environment]`` cpus and memory."""
    agent = agent_for_workers(agent_spec, agent_options)
    units = []
    for task, shipped in zip(tasks, ship_tasks(executor, tasks), strict=True):
        env = task.config.environment
        for attempt in range(1, attempts + 1):
            name = f"{task.id}__{attempt}"
            args = (shipped, name, agent, sandbox, verification)
            units.append(Work(name, run_trial_unit, args, cpus=env.cpus, memory_mb=env.memory_mb))
    return units


def failed_result(task: Task, trial_name: str, agent: str, sandbox: str, done: Done) -> TrialResult:
    """The result of a trial whose unit did not come back with one."""
    lost = (done.error or "").startswith("worker lost")
    prov = task.provenance
    return TrialResult(
        id=str(uuid.uuid4()),
        trial_name=trial_name,
        task_name=task.name,
        task_id=task.id,
        task_path=str(task.path),
        task_checksum=prov.content_hash if prov is not None else None,
        task_digest=harbor_digest(task.path),
        agent_info=AgentInfo(name=agent, version=__version__),
        agent_result=AgentResult(),
        verifier_result=VerifierResult(
            rewards=None,
            reward=None,
            source=None,
            details=None,
            exit_code=None,
            error=None,
            warnings=[],
        ),
        verification=None,
        exception_info=ExceptionInfo.occurred(
            "WorkerLost" if lost else "WorkerError",
            done.error or "the unit returned nothing",
            done.detail or None,
        ),
        started_at=None,
        finished_at=now(),
        sandbox=SandboxInfo(backend=sandbox, base_mapping={}),
    )


def record_trial(
    out_dir: Path, task: Task, done: Done, *, agent: str, sandbox: str, executor: str
) -> TrialOutcome:
    """Write a finished unit's trial folder under ``out_dir``; its outcome as a local trial's."""
    trial_dir = out_dir / done.key
    reading: RewardReading | None = None
    stdout, timings = "", {}
    if done.ok:
        shipped: ShippedTrial = done.value
        # the worker's copy of the task is no path a reader can use
        result = shipped.outcome.record.model_copy(update={"task_path": str(task.path)})
        write_files(trial_dir, {k: v for k, v in shipped.files.items() if k != RESULT_FILE})
        build_log = out_dir / f"{task.id}.build.log"
        if shipped.build_log is not None and not build_log.exists():
            atomic_write(build_log, shipped.build_log)
        reading = shipped.outcome.reading
        stdout, timings = shipped.outcome.verifier_stdout, shipped.outcome.timings
    else:
        result = failed_result(task, done.key, agent, sandbox, done)
    result.executor = ExecutorInfo(name=executor, node=done.node or None)
    path = result.write(trial_dir / RESULT_FILE)
    return TrialOutcome(result, reading, path, stdout, timings)


def run_trials(
    executor: Executor,
    tasks: Sequence[Task],
    agent_spec: str,
    agent_options: dict[str, str] | None,
    *,
    agent_name: str,
    sandbox: str,
    attempts: int,
    out_dir: Path,
    verification: str | None,
    on_done: Callable[[TrialOutcome], None] | None = None,
    skip: set[str] | frozenset[str] = frozenset(),
) -> list[TrialOutcome]:
    """Every trial of a job on ``executor`` but those named in ``skip`` (kept by a resumed
    job), written under ``out_dir`` as each comes back."""
    by_name = {f"{t.id}__{a}": t for t in tasks for a in range(1, attempts + 1)}
    units = trial_work(
        executor,
        tasks,
        agent_spec,
        agent_options,
        sandbox=sandbox,
        attempts=attempts,
        verification=verification,
    )
    units = [u for u in units if u.key not in skip]
    outcomes = []
    for done in executor.map(units):
        outcome = record_trial(
            out_dir,
            by_name[done.key],
            done,
            agent=agent_name,
            sandbox=sandbox,
            executor=executor.name,
        )
        outcomes.append(outcome)
        if on_done:
            on_done(outcome)
    return outcomes
