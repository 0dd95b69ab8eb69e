"""The compile check of a compiled-language recipe: the command that builds the code and its
tests without running any test, so that a caller (``bug_synth``) learns from the language's own
compiler whether an edit compiles before it reads what the tests say; and, where the toolchain
has it built in (Go), the suite run with line coverage."""

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


COVER_PROFILE = "/tmp/repogym-cover.out"
"""Where :func:`coverage_command` writes Go's cover profile."""


def coverage_command(recipe: Recipe) -> str | None:
    """The suite run once with line coverage of every package of the module (Go: ``go test
    -coverpkg=./... -coverprofile``, written to :data:`COVER_PROFILE`), or None where the
    toolchain has no such mode built in."""
    if recipe.runner == "go" and _GO_TEST in recipe.test_command:
        flags = f" test -coverpkg=./... -coverprofile={COVER_PROFILE} "
        return recipe.test_command.replace(_GO_TEST, flags, 1)
    return None


def covered_lines(profile: str, module: str) -> dict[str, set[int]]:
    """Repository-relative path → the lines a Go cover profile (``go test -coverprofile``)
    says ran, for the files of ``module`` (the root ``go.mod``'s module path)."""
    out: dict[str, set[int]] = {}
    prefix = module.rstrip("/") + "/"
    for line in profile.splitlines():
        # example.com/m/pkg/file.go:12.34,15.2 3 1
        name, _, rest = line.rpartition(":")
        fields = rest.split()
        if not name.startswith(prefix) or len(fields) != 3 or fields[2] == "0":
            continue
        span = fields[0].split(",")
        try:
            first, last = int(span[0].split(".")[0]), int(span[1].split(".")[0])
        except (IndexError, ValueError):
            continue
        out.setdefault(name[len(prefix) :], set()).update(range(first, last + 1))
    return out
