"""What repogym's runners cannot run yet, decided from a task's files alone (no backend).

Each reason is one line. ``repogym run`` refuses a task with any reason before building it,
``repogym validate --runnable`` lists them, and the explorer's "runs here" flag is false for
such a task. :func:`unsupported_features` holds the features left out on purpose (parts of a
compose file, MCP servers outside the task, healthchecks in task.toml): relax it there when a
runner learns one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from repogym.taskdir.compose import (
    Compose,
    ComposeError,
    compose_refusals,
    task_compose,
    task_healthcheck,
)
from repogym.taskdir.config import StepVerifierConfig, TaskConfig, VerifierConfig, verifier_mode
from repogym.taskdir.mcp_servers import mcp_refusals, parse_mcp_servers

DOCKER_TYPES = frozenset({"docker"})
"""Harbor environment types repogym runs (a Dockerfile or an image); absent means docker."""


def _is_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def environment_type_refusal(config: TaskConfig) -> str | None:
    """The reason a task asking for a non-Docker environment type cannot run, if it does."""
    kind = config.environment.type
    if kind is None or kind.lower() in DOCKER_TYPES:
        return None
    return (
        f"[environment] type = {kind!r} is not supported: repogym runs Docker-format "
        "environments (a Dockerfile or docker_image) on its own sandboxes"
    )


def unsupported_features(
    config: TaskConfig, path: Path, read_compose: Callable[[], Compose | None] | None = None
) -> list[str]:
    """Harbor features repogym does not run (yet): refused rather than silently ignored.

    Compose sidecars run (:mod:`repogym.taskdir.compose` lists what of a compose file cannot),
    and so do MCP servers that are the task's own services (:mod:`repogym.taskdir.mcp_servers`).
    """
    reasons = []
    services: list[str] = []
    try:
        compose = read_compose() if read_compose is not None else task_compose(config, path)
    except ComposeError as exc:
        reasons.append(f"environment/{exc}")
    else:
        if compose is not None:
            services = list(compose.services)
            name = compose.path.name
            reasons += [f"environment/{name}: {r}" for r in compose_refusals(compose)]
    servers, problems = parse_mcp_servers(config.environment.mcp_servers)
    reasons += problems
    reasons += mcp_refusals(servers, services)
    checks = [("[environment.healthcheck]", config.environment.healthcheck)]
    checks += [
        (f"[steps.healthcheck] of step {s.name!r}", s.healthcheck) for s in config.steps or []
    ]
    for where, raw in checks:
        if raw is not None:
            try:
                task_healthcheck(raw, where)
            except ValueError as exc:
                reasons.append(str(exc))
    return reasons


def separate_verifier_refusals(config: TaskConfig, path: Path) -> list[str]:
    """A separate verifier needs an image to run in: ``tests/Dockerfile`` (Harbor builds the
    verifier's environment from ``tests/``) or ``[verifier.environment].docker_image``."""
    reasons = []
    phases: list[tuple[str, VerifierConfig | StepVerifierConfig, Path]] = [
        ("[verifier]", config.verifier, path / "tests")
    ]
    if config.steps:
        phases = [
            (f"step {s.name!r}", s.verifier, path / "steps" / s.name / "tests")
            for s in config.steps
        ]
    for label, verifier, own_tests in phases:
        if verifier_mode(verifier, config.verifier if config.steps else None) != "separate":
            continue
        env = verifier.environment or config.verifier.environment
        if env is not None and env.docker_image:
            continue
        if _is_file(own_tests / "Dockerfile") or _is_file(path / "tests" / "Dockerfile"):
            continue
        reasons.append(
            f"{label}: environment_mode = 'separate' needs tests/Dockerfile (the verifier's "
            "image, holding /tests/test.sh) or [verifier.environment].docker_image"
        )
    return reasons


def missing_verifier_refusals(config: TaskConfig, path: Path) -> list[str]:
    """A verifier needs ``tests/test.sh`` (a step's own ``tests/`` or the task's); a separate
    verifier's image holds its own ``/tests/test.sh``."""
    phases: list[tuple[str, VerifierConfig | StepVerifierConfig, list[Path]]] = [
        ("the task", config.verifier, [path / "tests"])
    ]
    if config.steps:
        phases = [
            (f"step {s.name!r}", s.verifier, [path / "steps" / s.name / "tests", path / "tests"])
            for s in config.steps
        ]
    reasons = []
    for label, verifier, folders in phases:
        if verifier_mode(verifier, config.verifier if config.steps else None) == "separate":
            continue
        if not any(_is_file(f / "test.sh") for f in folders):
            reasons.append(f"{label} has no tests/test.sh: its verifier has nothing to run")
    return reasons


def task_refusals(
    config: TaskConfig, path: Path, read_compose: Callable[[], Compose | None] | None = None
) -> list[str]:
    """Every reason, known without a backend, that repogym cannot run this task;
    ``read_compose`` gives the task's compose services already read
    (:meth:`repogym.taskdir.Task.compose`), else the file is read here."""
    reasons = []
    kind = environment_type_refusal(config)
    if kind:
        reasons.append(kind)
    reasons += unsupported_features(config, path, read_compose)
    reasons += separate_verifier_refusals(config, path)
    reasons += missing_verifier_refusals(config, path)
    return reasons
