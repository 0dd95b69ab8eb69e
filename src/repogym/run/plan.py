"""A task resolved once for one sandbox backend: the sandbox request of its main session, its
compose services and its reproducibility mode.

Trials (:mod:`repogym.run.trial`), the verify gate, ``serve`` (:mod:`repogym.openenv.tasks`),
the Harbor environment plugin (:mod:`repogym.integrations.harbor`) and the explorer's runs (through
the trial runner) all ask :func:`plan_task`, so a task runs the same way wherever it runs.

The reproducibility mode (``[metadata.repo2env.reproducibility] mode``) is honoured everywhere:

* ``registry``: the published image is run as is, not rebuilt, on every backend:
  ``[environment].docker_image`` when it is pinned by digest, else the recorded ``image_ref``
  (:attr:`EnvironmentSpec.image_first`). A backend that cannot have it builds
  ``environment/Dockerfile`` instead and says why; no image recorded is a
  :attr:`TaskPlan.refusal`;
* ``inline_dockerfile`` / ``local_only``: ``environment/Dockerfile`` is built; a task without one
  is refused;
* no mode (a foreign task): the ``[environment]`` table decides, as Harbor does.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from repogym.sandbox import EnvironmentSpec
from repogym.taskdir import Task
from repogym.taskdir.compose import Build, Compose, ComposeError

__all__ = ["TaskPlan", "is_text_only", "main_build", "main_dockerfile", "plan_task"]


@dataclass(frozen=True)
class TaskPlan:
    """How a task runs on one backend (see the module's docstring)."""

    task: Task
    backend: str
    """The sandbox backend's name (``local``, ``docker`` …)."""
    environment: EnvironmentSpec
    """The request for the agent's (main) environment."""
    reproducibility: str | None
    """``registry`` | ``inline_dockerfile`` | ``local_only`` as recorded, or None."""
    refusal: str | None = None
    """Why the task cannot run on this backend as its provenance asks, or None."""

    @property
    def compose(self) -> Compose | None:
        """The task's compose services, parsed once (:meth:`repogym.taskdir.Task.compose`)."""
        return self.task.compose()

    @property
    def offline(self) -> bool:
        """Whether the compose file takes ``main`` off the network for every phase."""
        return self.task.runs_offline

    @property
    def text_only(self) -> bool:
        """No environment to run in (:func:`is_text_only`)."""
        return is_text_only(self.task)


def is_text_only(task: Task) -> bool:
    """No environment to run in: neither a Dockerfile (``environment/Dockerfile`` or the one
    the compose file's ``main`` is built from) nor a docker image."""
    return not main_dockerfile(task).is_file() and not task.config.environment.docker_image


def main_dockerfile(task: Task) -> Path:
    """The Dockerfile the agent's environment is built from (it may not exist)."""
    build = main_build(task)
    return build.context / build.dockerfile if build else task.environment_dir / "Dockerfile"


def main_build(task: Task) -> Build | None:
    """The ``build`` of the compose file's ``main`` service (a context and Dockerfile inside
    the task), or None: then ``environment/`` with its ``Dockerfile`` is built."""
    try:
        compose = task.compose()
    except ComposeError:
        return None  # the task's refusals name it
    if compose is None or compose.main.problems:
        return None  # refused: the reasons say why
    return compose.main.build


def declared_environment(task: Task) -> EnvironmentSpec:
    """The sandbox request from the task's ``[environment]`` table (and ``main``'s build)."""
    env = task.config.environment
    context = task.environment_dir if task.environment_dir.is_dir() else None
    build = main_build(task)
    return EnvironmentSpec(
        context_dir=build.context if build else context,
        dockerfile=build.dockerfile if build else "Dockerfile",
        target=build.target if build else None,
        docker_image=env.docker_image,
        workdir=env.workdir,
        env=dict(env.env),
        cpus=env.cpus,
        memory_mb=env.memory_mb,
        storage_mb=env.storage_mb,
        network_mode="no-network" if task.runs_offline else env.network_mode,
        allowed_hosts=tuple(env.allowed_hosts),
        build_timeout_sec=env.build_timeout_sec,
    )


def plan_task(task: Task, backend: str) -> TaskPlan:
    """The :class:`TaskPlan` of ``task`` on the backend named ``backend``."""
    prov = task.provenance
    mode = prov.reproducibility_mode if prov is not None else None
    spec = declared_environment(task)
    plan = TaskPlan(task=task, backend=backend, environment=spec, reproducibility=mode)
    if mode == "registry":
        # The published image, pinned by digest where the task pins it; the Dockerfile (when
        # there is one) stays as the way back if the image cannot be had.
        declared = spec.docker_image or ""
        pinned = declared if "@sha256:" in declared else None
        image = pinned or (prov.reproducibility.image_ref if prov else None) or spec.docker_image
        if not image:
            why = "reproducibility mode 'registry' but no image_ref is recorded"
            return dataclasses.replace(plan, refusal=f"{task.id}: {why}")
        spec = dataclasses.replace(spec, docker_image=str(image), image_first=True)
        return dataclasses.replace(plan, environment=spec)
    built_here = mode in ("inline_dockerfile", "local_only")
    if built_here and not plan.text_only and not main_dockerfile(task).is_file():
        why = f"mode {mode!r} needs environment/Dockerfile"
        return dataclasses.replace(plan, refusal=f"{task.id}: {why}")
    return plan
