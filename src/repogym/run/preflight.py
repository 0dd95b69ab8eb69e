"""Preflight: what ``repogym run`` would refuse for a task on a backend, and why, without
building anything.

The task-level reasons come from :mod:`repogym.taskdir.runnable`; this adds the host's limits,
the Dockerfile's syntax, an ``allowlist`` network mode, and whatever the backend itself says.
A backend may offer ``preflight(spec) -> list[str]`` (the constructs it cannot replay); the
reasons it returns are added as they are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repogym import dockerfile
from repogym.run.plan import plan_task
from repogym.sandbox import EnvironmentSpec, SandboxError
from repogym.taskdir import Task
from repogym.taskdir.runnable import environment_type_refusal, task_refusals
from repogym.taskdir.trust import HostLimits, check_limits, check_task


class UnsupportedTask(SandboxError):
    """A task the runner refuses before building it; the message is the reasons, joined."""


def _environment_refusals(task: Task) -> list[str]:
    env = task.config.environment
    dockerfile_path = task.environment_dir / "Dockerfile"
    if environment_type_refusal(task.config) is not None:
        return []  # the type already says why; "no Dockerfile" would only mislead
    reasons = []
    repro = task.provenance.reproducibility if task.provenance is not None else None
    published = repro is not None and repro.mode == "registry" and bool(repro.image_ref)
    if not dockerfile_path.is_file() and not env.docker_image and not published:
        reasons.append("no environment: add environment/Dockerfile or [environment].docker_image")
    elif dockerfile_path.is_file() and not dockerfile_path.is_symlink():
        try:
            dockerfile.parse(dockerfile_path.read_text(encoding="utf-8", errors="replace"))
        except dockerfile.DockerfileError as exc:
            reasons.append(f"environment/Dockerfile: {exc}")
    phases = [("environment", env.network_mode)]
    phases += [(p, getattr(task.config, p).network_mode) for p in ("agent", "verifier")]
    for phase, mode in phases:
        if mode == "allowlist":
            reasons.append(f"[{phase}] network_mode = 'allowlist' is not supported yet")
            break
    return reasons


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

    @property
    def runnable(self) -> bool:
        return not self.refusals

    def to_json(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "path": self.path,
            "runnable": self.runnable,
            "refusals": self.refusals,
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
        if trust.task is not None and not reasons:
            reasons = preflight(trust.task, backend=backend, limits=limits)
        if why:
            reasons.insert(0, why)
        rows.append(RunnableRow(d.name, str(d), reasons))
    return RunnableSummary(path, sandbox, rows)
