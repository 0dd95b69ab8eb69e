"""The pipeline registry: built-ins, entry-point plug-ins, and ``register()``.

Built-in pipelines are named here as ``(module, attribute)`` pairs and imported on first use.
Plug-ins declare an entry point in the ``repogym.pipelines`` group whose object is a
:class:`~repogym.pipelines.base.Pipeline` (or a class / factory returning one). A plug-in that
fails to import or is not a pipeline is logged and skipped: it never breaks ``generate`` for
the others.
"""

from __future__ import annotations

import importlib
import logging
import threading
from typing import Any

from pydantic import BaseModel, ValidationError

from repogym.pipelines.base import Pipeline
from repogym.spec import describe_error

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "repogym.pipelines"
BUILTINS = (
    ("repogym.pipelines.commit_runtime", "PIPELINE"),
    ("repogym.pipelines.pr_runtime", "PIPELINE"),
    ("repogym.pipelines.pr_diff", "PIPELINE"),
    ("repogym.pipelines.bug_synth", "PIPELINE"),
    ("repogym.pipelines.code_instruct", "PIPELINE"),
    ("repogym.pipelines.cve_patches", "PIPELINE"),
    ("repogym.pipelines.equivalence_tests", "PIPELINE"),
)
_lock = threading.RLock()
_registered: dict[str, Pipeline] = {}
_loaded = False


def as_pipeline(obj: Any) -> Pipeline:
    """``obj`` itself, or what calling it gives (a class or factory), when it is a pipeline."""
    if isinstance(obj, type) or (not isinstance(obj, Pipeline) and callable(obj)):
        obj = obj()
    if not isinstance(obj, Pipeline):
        raise TypeError(f"not a repogym pipeline: {obj!r}")
    return obj


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    found: list[Pipeline] = []
    for module, attr in BUILTINS:
        found.append(as_pipeline(getattr(importlib.import_module(module), attr)))
    try:
        from importlib.metadata import entry_points

        points = list(entry_points(group=ENTRY_POINT_GROUP))
    except Exception as exc:  # pragma: no cover - metadata backend trouble
        log.debug("entry points unavailable: %s", exc)
        points = []
    for ep in points:
        try:
            found.append(as_pipeline(ep.load()))
        except Exception as exc:  # a broken plug-in must not break the other pipelines
            log.warning("pipeline entry point %s failed: %s", ep.name, exc)
    for pipeline in found:
        _registered.setdefault(pipeline.name, pipeline)


def register(pipeline: Any) -> Pipeline:
    """Add (or replace, by name) a pipeline; returns it."""
    pipeline = as_pipeline(pipeline)
    with _lock:
        _load()
        _registered[pipeline.name] = pipeline
    return pipeline


def unregister(name: str) -> None:
    """Remove the pipeline called ``name`` (no error when absent)."""
    with _lock:
        _load()
        _registered.pop(name, None)


def pipelines() -> dict[str, Pipeline]:
    """Every registered pipeline by name (built-ins, entry points, then ``register()``ed)."""
    with _lock:
        _load()
        return dict(_registered)


def get_pipeline(name: str) -> Pipeline:
    """The pipeline called ``name``; KeyError naming the available ones."""
    found = pipelines()
    try:
        return found[name]
    except KeyError:
        known = ", ".join(sorted(found))
        raise KeyError(f"unknown pipeline {name!r} (available: {known})") from None


def options_model(name: str) -> type[BaseModel]:
    """The options model of the pipeline called ``name`` (ValueError naming the available
    ones); a plug-in's options are validated like a built-in's."""
    try:
        return get_pipeline(name).options_model
    except KeyError as exc:
        raise ValueError(str(exc.args[0])) from None


def describe_option_error(exc: ValidationError, pipeline: str) -> str:
    """A pydantic error of the options, with the valid keys listed for an unknown one."""
    unknown = [".".join(map(str, e["loc"])) for e in exc.errors() if e["type"] == "extra_forbidden"]
    try:
        model = options_model(pipeline)
    except ValueError:
        return describe_error(exc)
    if not unknown:
        return describe_error(exc)
    valid = ", ".join(sorted(model.model_fields))
    keys = ", ".join(repr(k) for k in unknown)
    return f"unknown --opt key {keys} for pipeline {pipeline}; valid keys: {valid}"
