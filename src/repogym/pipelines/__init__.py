"""Pipelines: mine a repository into Harbor task folders.

Each pipeline (``commit_runtime``, ``pr_runtime``, ``pr_diff``, plug-ins) is a
:class:`~repogym.pipelines.base.Pipeline` in :mod:`repogym.pipelines.registry`;
:func:`generate` (:mod:`repogym.pipelines.generation`) runs one over a repository.
"""

from repogym.pipelines.base import Harness, HarnessContext, Pipeline, Progress
from repogym.pipelines.generation import (
    STATE_DIR,
    GenerateError,
    GenerateResult,
    generate,
    resolve_repo,
    slug_for,
)
from repogym.pipelines.registry import get_pipeline, pipelines, register, unregister

__all__ = [
    "STATE_DIR",
    "GenerateError",
    "GenerateResult",
    "Harness",
    "HarnessContext",
    "Pipeline",
    "Progress",
    "generate",
    "get_pipeline",
    "pipelines",
    "register",
    "resolve_repo",
    "slug_for",
    "unregister",
]
