"""repogym: turn source repositories into verifiable RL environments for coding agents.

The names below are the supported way to script repogym from Python (docs/api.md); everything
else is internal and may move. They load on first use, so ``import repogym`` stays cheap::

    import repogym

    found = repogym.discover("datasets/mine")
    for task in found.tasks:
        print(task.id, repogym.validate_task(task.path).ok)
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports at the end exist for type checkers only)
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name → "module:attribute" (imported when the name is first used)
_EXPORTS: dict[str, str] = {
    # errors
    "RepogymError": "repogym.errors:RepogymError",
    # tasks and datasets
    "Task": "repogym.taskdir.task:Task",
    "TaskError": "repogym.taskdir.task:TaskError",
    "load_task": "repogym.taskdir.task:load_task",
    "discover": "repogym.taskdir.discover:discover",
    "iter_task_dirs": "repogym.taskdir.discover:iter_task_dirs",
    "validate_task": "repogym.taskdir.validate:validate_task",
    "TaskReport": "repogym.taskdir.validate:TaskReport",
    "ValidationSummary": "repogym.taskdir.validate_summary:ValidationSummary",
    "summarize_validation": "repogym.taskdir.validate_summary:summarize_validation",
    "write_dataset_index": "repogym.taskdir.dataset:write_dataset_index",
    # generate
    "GenerationInput": "repogym.spec:GenerationInput",
    "generate": "repogym.workflows:generate",
    "GenerateResult": "repogym.pipelines.generation:GenerateResult",
    "GenerateError": "repogym.pipelines.generation:GenerateError",
    "GenerateReport": "repogym.pipelines.report:GenerateReport",
    "get_pipeline": "repogym.pipelines.registry:get_pipeline",
    "list_pipelines": "repogym.pipelines.registry:pipelines",
    "register_pipeline": "repogym.pipelines.registry:register",
    # sandboxes
    "get_backend": "repogym.sandbox:get_backend",
    "backend_names": "repogym.sandbox:backend_names",
    "Sandbox": "repogym.sandbox.base:Sandbox",
    "EnvironmentSpec": "repogym.sandbox.base:EnvironmentSpec",
    # run and verify
    "TrialRunner": "repogym.run.trial:TrialRunner",
    "TrialOutcome": "repogym.run.trial:TrialOutcome",
    "make_agent": "repogym.run.agents:make_agent",
    "run_job": "repogym.run.job:run_job",
    "JobSummary": "repogym.run.models:JobSummary",
    "JobListing": "repogym.run.records:JobListing",
    "gate_task": "repogym.run.gate:gate_task",
    "verify_tasks": "repogym.run.gate:verify_tasks",
    "Verdict": "repogym.run.gate:Verdict",
    # serve, publish, explore
    "build_app": "repogym.openenv.app:build_app",
    "open_registry": "repogym.hub.registry:open_registry",
    "build_snapshot": "repogym.explorer.build:build_snapshot",
    # scoring and models
    "score_diff": "repogym.shipped.diff_reward:score_diff",
    "LLM": "repogym.llm:LLM",
}

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'repogym' has no attribute {name!r}")
    module, _, attr = target.partition(":")
    value = getattr(import_module(module), attr)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # what type checkers and editors see; nothing is imported at run time
    from repogym.errors import RepogymError
    from repogym.explorer.build import build_snapshot
    from repogym.hub.registry import open_registry
    from repogym.llm import LLM
    from repogym.openenv.app import build_app
    from repogym.pipelines.generation import GenerateError, GenerateResult
    from repogym.pipelines.registry import get_pipeline
    from repogym.pipelines.registry import pipelines as list_pipelines
    from repogym.pipelines.registry import register as register_pipeline
    from repogym.pipelines.report import GenerateReport
    from repogym.run.agents import make_agent
    from repogym.run.gate import Verdict, gate_task, verify_tasks
    from repogym.run.job import run_job
    from repogym.run.models import JobSummary
    from repogym.run.records import JobListing
    from repogym.run.trial import TrialOutcome, TrialRunner
    from repogym.sandbox import backend_names, get_backend
    from repogym.sandbox.base import EnvironmentSpec, Sandbox
    from repogym.shipped.diff_reward import score_diff
    from repogym.spec import GenerationInput
    from repogym.taskdir.dataset import write_dataset_index
    from repogym.taskdir.discover import discover, iter_task_dirs
    from repogym.taskdir.task import Task, TaskError, load_task
    from repogym.taskdir.validate import TaskReport, validate_task
    from repogym.taskdir.validate_summary import ValidationSummary, summarize_validation
    from repogym.workflows import generate
