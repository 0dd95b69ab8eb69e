"""Repository environments without an LLM: detect the language and toolchain, write a recipe
(Dockerfile + test commands), check it in a sandbox, and cache the outcome.

Typical use::

    from repogym.bootstrap import bootstrap
    result = bootstrap(Path("checkout"), ref=commit_sha)
    result.recipe.dockerfile, result.recipe.test_command_for(["tests/test_x.py::test_a"])
"""

from __future__ import annotations

from repogym.bootstrap._files import ExportError, export_ref, repo_identity, snapshot_repo
from repogym.bootstrap.cache import CacheEntry, RecipeCache, cache_root
from repogym.bootstrap.check import CheckResult, check_recipe, write_build_context
from repogym.bootstrap.detect import (
    LANGUAGES,
    Detection,
    UnsupportedRepo,
    detect,
    guess_language,
    make_recipe,
)
from repogym.bootstrap.model import BOOTSTRAP_VERSION, RUNNERS, Recipe
from repogym.bootstrap.python.versions import PythonInstall, choose_python, installed_pythons
from repogym.bootstrap.service import BootstrapResult, bootstrap, bootstrap_ref

__all__ = [
    "BOOTSTRAP_VERSION",
    "LANGUAGES",
    "RUNNERS",
    "BootstrapResult",
    "CacheEntry",
    "CheckResult",
    "Detection",
    "ExportError",
    "PythonInstall",
    "Recipe",
    "RecipeCache",
    "UnsupportedRepo",
    "bootstrap",
    "bootstrap_ref",
    "cache_root",
    "check_recipe",
    "choose_python",
    "detect",
    "export_ref",
    "guess_language",
    "installed_pythons",
    "make_recipe",
    "repo_identity",
    "snapshot_repo",
    "write_build_context",
]
