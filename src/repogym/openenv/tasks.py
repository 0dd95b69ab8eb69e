"""The task set a server offers: discovery, lookup by id / index / seed, and how each task's
environment is reproduced (``[metadata.repo2env.reproducibility]``). No ``openenv`` import here."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repogym.run.plan import is_text_only, plan_task
from repogym.sandbox import EnvironmentSpec
from repogym.taskdir import Task
from repogym.taskdir.trust import HostLimits, UntrustedTask, check_dataset, load_limits


class TaskNotServable(ValueError):
    """A task exists but cannot be served here (text-only, or needs another backend)."""


def reproducibility_mode(task: Task) -> str | None:
    """``registry`` | ``inline_dockerfile`` | ``local_only`` from the task's provenance, or None."""
    prov = task.provenance
    return prov.reproducibility_mode if prov is not None else None


def serving_spec(task: Task, backend: str) -> EnvironmentSpec:
    """The sandbox request for serving a task on ``backend``: the task's plan
    (:func:`repogym.run.plan.plan_task`, which honours the reproducibility mode, as every run
    does). Text-only tasks, and tasks the backend cannot run as recorded, are refused with an
    explanation."""
    plan = plan_task(task, backend)
    if plan.refusal and plan.reproducibility == "registry":
        raise TaskNotServable(plan.refusal)
    if plan.text_only and plan.reproducibility != "registry":
        raise TaskNotServable(
            f"{task.id}: text-only task (no environment/Dockerfile and no docker image): "
            "there is nothing to run an agent in, so it cannot be served as an environment"
        )
    if plan.refusal:
        raise TaskNotServable(plan.refusal)
    return plan.environment


@dataclass
class TaskSet:
    """Tasks found under a folder (by where ``task.toml`` is), in a stable order."""

    root: Path
    tasks: list[Task]

    @classmethod
    def load(cls, root: Path | str, limits: HostLimits | None = None) -> TaskSet:
        """Every task under ``root`` through the trust boundary (:class:`UntrustedTask` when
        any is refused; a task that cannot be read raises its TaskError)."""
        root = Path(root)
        if not root.exists():
            raise FileNotFoundError(f"{root}: no such task folder")
        if limits is None:
            limits = load_limits().with_overrides(
                pass_env=[n for n in os.environ.get("REPOGYM_PASS_ENV", "").split(",") if n]
            )
        found = check_dataset(root, limits)
        if found.refused:
            raise UntrustedTask("; ".join(found.refusal_lines()))
        for report in found.unreadable:
            assert report.error is not None
            raise report.error
        tasks = found.tasks
        if not tasks:
            raise FileNotFoundError(f"{root}: no task.toml found (not a task or task set)")
        tasks.sort(key=lambda t: t.id)
        return cls(root, tasks)

    def __len__(self) -> int:
        return len(self.tasks)

    def get(
        self, task_id: str | None = None, index: int | None = None, seed: int | None = None
    ) -> Task:
        """By ``task_id`` (``[task].name`` or directory name), ``index``, or ``seed`` (index =
        seed mod the number of tasks); the first task when none is given."""
        if task_id is not None:
            for task in self.tasks:
                if task_id in (task.name, task.id, task.path.name):
                    return task
            raise KeyError(f"no task {task_id!r} in {self.root} ({len(self.tasks)} tasks)")
        if index is not None:
            if not 0 <= index < len(self.tasks):
                raise IndexError(f"task index {index} out of range 0..{len(self.tasks) - 1}")
            return self.tasks[index]
        if seed is not None:
            return self.tasks[seed % len(self.tasks)]
        return self.tasks[0]

    def describe(self, index: int) -> dict[str, Any]:
        """One task as the Task API shows it."""
        task = self.tasks[index]
        return {
            "index": index,
            "task_id": task.id,
            "name": task.name,
            "description": task.config.task.description if task.config.task else None,
            "reproducibility": reproducibility_mode(task),
            "text_only": is_text_only(task),
        }
