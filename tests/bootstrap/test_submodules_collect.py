"""Submodules filled in (or a clear reason why not) and collection the project cannot confuse."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from repogym.bootstrap import UnsupportedRepo, bootstrap_ref, detect, export_ref
from repogym.bootstrap.check import _reason_from, _sample_ids, _tail
from repogym.bootstrap.model import COLLECT_MARK, Recipe, count_collected
from repogym.bootstrap.python.versions import PythonInstall
from repogym.bootstrap.submodules import declared, populate

from .conftest import git_commit, write_tree

MakeRepo = Callable[..., Path]
PYPROJECT = '[project]\nname = "sub"\nversion = "1"\n'
TEST = "import json, pathlib\n\ndef test_data():\n    assert pathlib.Path(__file__).parent\n"


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com", HOME=str(repo))
    subprocess.run(
        ["git", "-c", "protocol.file.allow=always", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        env=env,
    )


def _with_submodule(tmp_path: Path, path: str = "tests/data") -> tuple[Path, str]:
    data = write_tree(tmp_path / "data", {"sample.json": "{}\n", "nested/readme.txt": "x\n"})
    git_commit(data)
    repo = write_tree(tmp_path / "repo", {"pyproject.toml": PYPROJECT, "tests/test_d.py": TEST})
    git_commit(repo)
    _git(repo, "submodule", "add", "-q", "../data", path)
    sha = git_commit(repo, "add the data submodule")
    return repo, sha


def test_submodule_is_filled_from_git(tmp_path: Path) -> None:
    repo, sha = _with_submodule(tmp_path)
    snapshot = tmp_path / "snapshot"
    export_ref(repo, sha, snapshot)
    assert not any((snapshot / "tests" / "data").iterdir())  # git archive leaves it empty
    assert [s.path for s in declared(snapshot)] == ["tests/data"]
    assert populate(repo, sha, snapshot) == {}
    assert (snapshot / "tests/data/sample.json").read_text() == "{}\n"
    assert (snapshot / "tests/data/nested/readme.txt").is_file()
    result = bootstrap_ref(repo, sha, check=False, use_cache=False)
    assert "git submodule tests/data: checked out" in result.recipe.notes


def test_unavailable_submodule_is_a_clear_reason(tmp_path: Path) -> None:
    repo, sha = _with_submodule(tmp_path)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)  # not recursive
    shutil.rmtree(tmp_path / "data")  # and the submodule's own repository is gone
    with pytest.raises(UnsupportedRepo) as info:
        bootstrap_ref(clone, sha, check=False, use_cache=False)
    message = str(info.value)
    assert message.startswith("git submodule tests/data from ../data is not available (commit ")
    assert f"{tmp_path / 'data'} does not exist" in message
    assert message.endswith("; its path is test data")


def test_submodule_needed_only_when_ci_or_tests_use_it(
    make_repo: MakeRepo, pythons: list[PythonInstall]
) -> None:
    files = {
        "pyproject.toml": PYPROJECT,
        ".gitmodules": '[submodule "theme"]\n\tpath = docs/theme\n\turl = https://example.invalid/t\n',
        "tests/test_d.py": TEST,
    }
    d = detect(make_repo(files), pythons=pythons)
    assert d.supported
    assert any("git submodule docs/theme" in n and "left empty" in n for n in d.notes)
    workflow = """
        jobs:
          test:
            steps:
              - uses: actions/checkout@v4
                with:
                  submodules: true
              - run: pytest
    """
    d = detect(make_repo({**files, ".github/workflows/t.yml": workflow}), pythons=pythons)
    assert not d.supported
    assert d.reason == (
        "git submodule docs/theme from https://example.invalid/t is not available (not in the"
        " snapshot); the CI checks submodules out (.github/workflows/t.yml:4)"
    )


# ---------------------------------------------------------------------------------- collection

NOISY = "\n".join(
    [f"tests/test_errors.py::test_raises_ImportError_{i} PASSED" for i in range(3)]
    + ["<Module test_x.py>", "  <Function test_handles_error>"]
)


def test_collect_summary_wins_over_the_listing() -> None:
    summary = {"collected": 1231, "errors": [], "exit": 0, "pytest": "8.3.2"}
    output = f"{NOISY}\n{COLLECT_MARK}-ID tests/a.py::t\n{COLLECT_MARK} {json.dumps(summary)}\n"
    assert count_collected("pytest", output) == 1231
    recipe = Recipe("python", "pytest", "img", "FROM img\n", "t", "c", "s")
    assert _sample_ids(recipe, output) == ["tests/a.py::t"]
    # Without a summary (an older recipe), the listing is counted as before.
    assert count_collected("pytest", "a.py::t1\na.py::t2\n") == 2


def test_collect_failure_reason_is_the_first_real_error() -> None:
    errors = [
        {
            "nodeid": "tests/test_b.py",
            "message": "DeprecationWarning: datetime.utcnow() is deprecated",
        },
        {"nodeid": "tests/test_c.py", "message": "ModuleNotFoundError: No module named 'yaml'"},
    ]
    summary = {"collected": 10, "errors": errors, "exit": 2}
    output = f"{NOISY}\n{'x' * 121_000}\n{COLLECT_MARK} {json.dumps(summary)}\n"
    assert _reason_from(output, "x") == (
        "error collecting tests/test_b.py (+1 more): DeprecationWarning: datetime.utcnow() is"
        " deprecated"
    )
    # No summary (pytest never got to collect): a test name is never the reason ...
    usage = (
        f"{NOISY}\nERROR: usage: pytest [options]\npytest: error: unrecognized arguments: --cov\n"
    )
    assert _reason_from(usage, "x") == "pytest: error: unrecognized arguments: --cov"
    assert _reason_from(NOISY, "fallback") == "fallback"
    # ... and a 121 KB line is cut.
    assert len(_reason_from("y" * 121_000, "x")) <= 300
    tail = _tail("\n".join(["z" * 50_000] * 50))
    assert len(tail) <= 8001 and COLLECT_MARK not in _tail(output)
