"""The quality gate on an executor (``repogym verify --executor ray``).

Each task is one unit: :func:`gate_unit` runs on a worker, from the task's archive, the same
gate as locally (:func:`repogym.run.gate.gate_task`: oracle × N, nop, mutants) and returns the
verdict and the backend's name as data. The driver alone writes: each verdict into its
task's ``task.toml`` (:func:`repogym.run.gate.record`). A unit that never finishes (its worker
died past the executor's retries) is a verdict of status ``error`` with the reason, reported
and never written into the task: it says nothing about the task.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from repogym.executors import Executor, Work
from repogym.run.gate import ERROR, Verdict, gate_task, record
from repogym.run.remote import ShippedTask, runner_for, ship_tasks, worker_task
from repogym.taskdir import Task, load_task


def gate_unit(
    task: ShippedTask, sandbox: str, reruns: int, mutants: int, adversarial: bool = False
) -> tuple[Verdict, str]:
    """The gate on one task, on a worker: (verdict, sandbox backend name)."""
    loaded = worker_task(task)
    runner = runner_for(sandbox)
    verdict = gate_task(loaded, runner, reruns=reruns, mutants=mutants, adversarial=adversarial)
    return verdict, runner.backend.name


def gate_work(
    executor: Executor,
    tasks: Sequence[Task],
    *,
    sandbox: str,
    reruns: int,
    mutants: int,
    adversarial: bool = False,
) -> list[Work]:
    """One unit per task (keyed by its position), asking its ``[environment]`` resources."""
    return [
        Work(
            str(i),
            gate_unit,
            (shipped, sandbox, reruns, mutants, adversarial),
            cpus=task.config.environment.cpus,
            memory_mb=task.config.environment.memory_mb,
        )
        for i, (task, shipped) in enumerate(zip(tasks, ship_tasks(executor, tasks), strict=True))
    ]


def verify_on(
    executor: Executor,
    tasks: Sequence[Task],
    *,
    sandbox: str,
    reruns: int,
    write: bool,
    mutants: int,
    adversarial: bool = False,
    on_done: Callable[[Verdict], None] | None = None,
) -> list[Verdict]:
    """The gate over ``tasks`` on ``executor``; verdicts in the order of ``tasks``."""
    work = gate_work(
        executor, tasks, sandbox=sandbox, reruns=reruns, mutants=mutants, adversarial=adversarial
    )
    verdicts: dict[int, Verdict] = {}
    for done in executor.map(work):
        i = int(done.key)
        task = tasks[i]
        if done.ok:
            verdict, backend = done.value
            if write:
                record(
                    load_task(task.path),
                    verdict,
                    backend,
                    reruns,
                    mutants=verdict.mutants,
                    adversarial=verdict.adversarial,
                )
        else:
            verdict = Verdict(task.id, ERROR, [], None, [done.error or "the unit returned nothing"])
        verdicts[i] = verdict
        if on_done:
            on_done(verdict)
    return [verdicts[i] for i in range(len(tasks))]
