"""Pipelines: mine a repository into Harbor task folders.

Each pipeline (``commit_runtime``, ``pr_runtime``, ``pr_diff``, plug-ins) is a
:class:`~repogym.pipelines.base.Pipeline` in :mod:`repogym.pipelines.registry`;
:func:`generate` (:mod:`repogym.pipelines.generation`) runs one over a repository.
"""

from repogym.pipelines._ray.driver import worker_env_for
from repogym.pipelines.base import Harness, HarnessContext, Pipeline, Progress
from repogym.pipelines.generation import (
    STATE_DIR,
    GenerateError,
    GenerateResult,
    generate,
    generation_input,
    resolve_repo,
    slug_for,
)
from repogym.pipelines.registry import (
    describe_option_error,
    get_pipeline,
    options_model,
    pipelines,
    register,
    unregister,
)

__all__ = [
    "STATE_DIR",
    "GenerateError",
    "GenerateResult",
    "Harness",
    "HarnessContext",
    "Pipeline",
    "Progress",
    "describe_option_error",
    "generate",
    "generation_input",
    "get_pipeline",
    "options_model",
    "pipelines",
    "register",
    "resolve_repo",
    "slug_for",
    "unregister",
    "worker_env_for",
]
