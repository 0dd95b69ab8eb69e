"""The compile check of a compiled-language recipe: the command that builds the code and its
tests without running any test, so that a caller (``bug_synth``) learns from the language's own
compiler whether an edit compiles before it reads what the tests say."""

from __future__ import annotations

import shlex

from repogym.bootstrap.model import Recipe
from repogym.bootstrap.native.cmake import BUILD_DIR, BUILD_JOBS
from repogym.bootstrap.native.java import LENIENT, NO_TESTS

_GO_TEST = " test -json "


def compile_command(recipe: Recipe) -> str | None:
    """The compile check of ``recipe`` (a shell command; exit 0 when everything compiles), or
    None for runners with no compile step (Python, JavaScript).

    * ``go``: the test command compiling every package's test binary and running none
      (``-run '^$' -exec /bin/true``: not even a ``TestMain`` runs);
    * ``cargo``: the test command with ``--no-run``;
    * ``maven``: the test command with a test filter no test matches (Maven compiles main and
      test code, Surefire runs nothing);
    * ``ctest``: ``cmake --build`` of the build directory.
    """
    if recipe.runner == "go" and _GO_TEST in recipe.test_command:
        return recipe.test_command.replace(_GO_TEST, " test -run '^$' -exec /bin/true ", 1)
    if recipe.runner == "cargo":
        return f"{recipe.test_command} --no-run"
    if recipe.runner == "maven":
        return " ".join([recipe.test_command, shlex.quote(NO_TESTS), *LENIENT])
    if recipe.runner == "ctest":
        return f"cmake --build {BUILD_DIR} -j{BUILD_JOBS}"
    return None
