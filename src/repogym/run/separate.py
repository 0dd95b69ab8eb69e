"""Separate verifier environments (Harbor's ``[verifier] environment_mode = "separate"``).

The verifier gets an environment of its own, built from ``tests/`` (``tests/Dockerfile``, which
puts ``/tests/test.sh`` into the image: tests are not mounted) with the resources and network of
``[verifier.environment]``, or of ``[environment]`` when that table is absent. Only the
declared ``artifacts`` (and ``/logs/artifacts``) are copied into it from the agent's session,
through the hand-off clean-room verification uses (:func:`repogym.run.cleanroom.handoff_session`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from repogym.run.artifacts import ArtifactReport, carry_artifacts
from repogym.run.cleanroom import handoff_session
from repogym.sandbox import BuiltEnvironment, EnvironmentSpec, Sandbox, Session
from repogym.taskdir import Task
from repogym.taskdir.config import Artifact, EnvironmentConfig

Build = Callable[[EnvironmentSpec], BuiltEnvironment]


def verifier_context(task: Task, step: str | None = None) -> Path:
    """The folder the verifier's image is built from: the step's ``tests/`` when it has a
    Dockerfile, else the task's ``tests/``."""
    if step is not None:
        own = task.step_dir(step) / "tests"
        if (own / "Dockerfile").is_file():
            return own
    return task.tests_dir


def verifier_environment_spec(
    task: Task, env: EnvironmentConfig | None, context: Path
) -> EnvironmentSpec:
    """The build/start request of a separate verifier environment."""
    own = env is not None
    env = env or task.config.environment
    return EnvironmentSpec(
        context_dir=context,
        docker_image=env.docker_image if own else None,
        workdir=env.workdir,
        env=dict(env.env),
        cpus=env.cpus,
        memory_mb=env.memory_mb,
        storage_mb=env.storage_mb,
        network_mode=env.network_mode,
        allowed_hosts=tuple(env.allowed_hosts),
        build_timeout_sec=env.build_timeout_sec,
    )


def separate_session(
    backend: Sandbox,
    build: Build,
    spec: EnvironmentSpec,
    agent: Session,
    artifacts: Iterable[Artifact],
) -> tuple[Session, ArtifactReport, str]:
    """A started verifier environment holding the agent's artifacts: (session, what was
    copied, working directory). Kill the agent's processes first; the caller closes both."""
    built = build(spec)
    fresh, report = handoff_session(
        backend,
        built,
        spec,
        lambda session, staging: carry_artifacts(agent, session, artifacts, staging),
    )
    return fresh, report, spec.workdir or built.workdir or "/"
