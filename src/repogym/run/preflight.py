"""Preflight: what ``repogym run`` would refuse for a task on a backend, and why, without
building anything.

The task-level reasons come from :mod:`repogym.taskdir.runnable`; this adds the host's limits,
the Dockerfile's syntax, an ``allowlist`` network mode, and whatever the backend itself says.
A backend may offer ``preflight(spec) -> list[str]`` (the constructs it cannot replay); the
reasons it returns are added as they are.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym import dockerfile
from repogym.run.plan import main_build, main_dockerfile, plan_task
from repogym.sandbox import EnvironmentSpec, SandboxError
from repogym.sandbox.context_check import copied_folders, missing_sources
from repogym.taskdir import Task
from repogym.taskdir.compose import ComposeError, ignored_compose_files
from repogym.taskdir.runnable import environment_type_refusal, task_refusals
from repogym.taskdir.trust import HostLimits, check_limits, check_task


class UnsupportedTask(SandboxError):
    """A task the runner refuses before building it; the message is the reasons, joined."""


def _environment_refusals(task: Task) -> list[str]:
    env = task.config.environment
    dockerfile_path = main_dockerfile(task)
    shown = Path(os.path.relpath(dockerfile_path, task.path)).as_posix()
    if environment_type_refusal(task.config) is not None:
        return []  # the type already says why; "no Dockerfile" would only mislead
    reasons = []
    repro = task.provenance.reproducibility if task.provenance is not None else None
    published = repro is not None and repro.mode == "registry" and bool(repro.image_ref)
    if not dockerfile_path.is_file() and not env.docker_image and not published:
        reasons.append("no environment: add environment/Dockerfile or [environment].docker_image")
    elif dockerfile_path.is_file() and not dockerfile_path.is_symlink():
        text = dockerfile_path.read_text(encoding="utf-8", errors="replace")
        try:
            dockerfile.parse(text)
        except dockerfile.DockerfileError as exc:
            reasons.append(f"{shown}: {exc}")
        else:
            build = main_build(task)
            context = build.context if build is not None else dockerfile_path.parent
            if not published and not _main_refused(task):  # else nothing is built
                reasons += [f"{shown} {m.message()}" for m in missing_sources(context, text)]
    phases = [("environment", env.network_mode)]
    phases += [(p, getattr(task.config, p).network_mode) for p in ("agent", "verifier")]
    for phase, mode in phases:
        if mode == "allowlist":
            reasons.append(f"[{phase}] network_mode = 'allowlist' is not supported yet")
            break
    return reasons


def _main_refused(task: Task) -> bool:
    try:
        compose = task.compose()
    except ComposeError:
        return True
    return compose is not None and bool(compose.main.problems)


def _backend_refusals(backend: Any, task: Task) -> list[str]:
    if task.config.environment.type not in (None, "docker"):
        return []
    from repogym.run.services import sidecar_refusals

    plan = plan_task(task, str(backend.name))
    if plan.refusal:  # the reproducibility mode asks for what this backend cannot do
        return [plan.refusal]
    reasons = sidecar_refusals(backend, task)
    hook = getattr(backend, "preflight", None)
    if hook is None:
        return reasons
    spec: EnvironmentSpec = plan.environment
    return [str(r) for r in hook(spec)] + reasons


def preflight(task: Task, *, backend: Any = None, limits: HostLimits | None = None) -> list[str]:
    """Every reason ``run`` would refuse ``task`` (one line each); [] when it would run it."""
    reasons = task_refusals(task.config, task.path, task.compose)
    reasons += _environment_refusals(task)
    if limits is not None:
        reasons += check_limits(task, limits)
    if backend is not None:
        reasons += _backend_refusals(backend, task)
    return reasons


def preflight_warnings(task: Task) -> list[str]:
    """What would run but not fully (one line each): no oracle, a compose file Harbor does
    not read."""
    out = []
    steps = task.config.steps or []
    folders = [task.step_dir(s.name) / "solution" for s in steps] or [task.solution_dir]
    for folder in folders:
        if not _is_file(folder / "solve.sh") and not _is_file(task.solution_dir / "solve.sh"):
            where = Path(os.path.relpath(folder / "solve.sh", task.path)).as_posix()
            out.append(f"{where} is missing: the oracle cannot run (no oracle = 1 check)")
    out += [
        f"environment/{name} is not read: Harbor reads only environment/docker-compose.yaml"
        for name in ignored_compose_files(task.environment_dir)
    ]
    return out + _answer_in_image(task)


def _answer_in_image(task: Task) -> list[str]:
    """The build of ``main`` copying the hidden tests or the solution into the agent's image
    (possible when its build context is the task folder, or holds it)."""
    build = main_build(task)
    dockerfile_path = main_dockerfile(task)
    if build is None or not _is_file(dockerfile_path):
        return []
    text = dockerfile_path.read_text(encoding="utf-8", errors="replace")
    shown = Path(os.path.relpath(dockerfile_path, task.path)).as_posix()
    hidden = [task.tests_dir, task.solution_dir]
    return [
        f"{shown} line {line}: copies {folder.name}/ into the agent's image "
        "(the agent can read it; exclude it in .dockerignore)"
        for line, folder in copied_folders(build.context, text, hidden)
    ]


def _is_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def require_runnable(task: Task, *, backend: Any = None) -> None:
    """Raise :class:`UnsupportedTask` naming every reason the task cannot run."""
    reasons = preflight(task, backend=backend)
    if reasons:
        raise UnsupportedTask("; ".join(reasons))


def load_backend(name: str) -> tuple[Any, str | None]:
    """(backend, None), or (None, why the named backend cannot run here)."""
    from repogym.sandbox import get_backend

    try:
        return get_backend(name), None
    except (SandboxError, ImportError) as exc:
        return None, f"sandbox {name!r} is not available here: {exc}"


@dataclass(frozen=True)
class RunnableRow:
    """One task of ``validate --runnable``: would ``run`` take it, and if not, why."""

    task_id: str
    path: str
    refusals: list[str]
    warnings: list[str] = field(default_factory=list)
    """What would run but not fully (:func:`preflight_warnings`)."""

    @property
    def runnable(self) -> bool:
        return not self.refusals

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "path": self.path,
            "runnable": self.runnable,
            "refusals": self.refusals,
            "warnings": self.warnings,
        }


@dataclass(frozen=True)
class RunnableSummary:
    """What ``run`` would refuse on a backend over every task under ``path``, and why."""

    path: Path
    sandbox: str
    rows: list[RunnableRow]

    @property
    def refused(self) -> list[RunnableRow]:
        return [r for r in self.rows if not r.runnable]

    @property
    def runnable(self) -> int:
        return len(self.rows) - len(self.refused)

    def to_json(self) -> dict[str, Any]:
        """What ``validate --runnable --json`` prints."""
        summary = {"tasks": len(self.rows), "runnable": self.runnable, "refused": len(self.refused)}
        return {
            "path": str(self.path),
            "sandbox": self.sandbox,
            "summary": summary,
            "tasks": [r.to_json() for r in self.rows],
        }

    def to_text(self) -> str:
        return json.dumps(self.to_json(), indent=2) + "\n"


def runnable_summary(
    path: Path, task_dirs: list[Path], sandbox: str, limits: HostLimits
) -> RunnableSummary:
    """The preflight of ``sandbox`` (and the trust checks under ``limits``) over every task
    folder, nothing built; a backend that cannot run here is every task's first refusal."""
    backend, why = load_backend(sandbox)
    rows: list[RunnableRow] = []
    for d in task_dirs:
        trust = check_task(d, limits)
        reasons = list(trust.problems)
        if trust.error is not None:
            reasons.append(f"{trust.error.file}: {trust.error}")
        warnings: list[str] = []
        if trust.task is not None and not reasons:
            reasons = preflight(trust.task, backend=backend, limits=limits)
            # how task.toml was read (legacy keys), then what the backend will do differently
            warnings = [f"task.toml: {w}" for w in trust.task.warnings]
            warnings += preflight_warnings(trust.task)
        if why:
            reasons.insert(0, why)
        rows.append(RunnableRow(d.name, str(d), reasons, warnings))
    return RunnableSummary(path, sandbox, rows)
