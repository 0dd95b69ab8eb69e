"""Recipes built for real: the lock's pins, the commit's date and the CI's extras hold, and a
noisy ``addopts`` does not confuse the collected count.

Network use is PyPI only (uv, pytest, PyYAML and their dependencies). Each module builds in a
private layer cache. The versions asserted are fixed by PyPI's upload history: pytest 7.2.0
was the newest release on 2023-01-01 (7.2.1 came on 2023-01-13).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from repogym.bootstrap import bootstrap_ref, check_recipe, detect, make_recipe
from repogym.bootstrap.commit import CommitInfo

from .conftest import local_backend_with_private_cache, write_tree

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def local_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Skip without the local backend; give the module a private sandbox cache."""
    yield from local_backend_with_private_cache(tmp_path_factory, "asof-sandbox-cache")


PYPROJECT = """
    [build-system]
    requires = ["setuptools>=61"]
    build-backend = "setuptools.build_meta"

    [project]
    name = "asof"
    version = "0.1.0"
    requires-python = ">=3.8"

    [project.optional-dependencies]
    test = ["pytest"]
    yaml = ["pyyaml"]

    [tool.pytest.ini_options]
    addopts = "-v"
    testpaths = ["tests"]
"""
UV_LOCK = """
    version = 1
    requires-python = ">=3.8"

    [[package]]
    name = "asof"
    version = "0.1.0"
    source = { editable = "." }

    [[package]]
    name = "pytest"
    version = "7.4.4"
    source = { registry = "https://pypi.org/simple" }
"""
WORKFLOW = """
    on: push
    jobs:
      test:
        runs-on: ubuntu-latest
        steps:
          - uses: actions/checkout@v4
          - run: pip install -e .[test,yaml]
          - run: pytest
"""


def _tests(version: str, count: int) -> str:
    return (
        "import pytest\nimport yaml\n\n"
        f"assert pytest.__version__ == {version!r}, pytest.__version__\n\n"
        f"@pytest.mark.parametrize('n', range({count}))\n"
        "def test_error_handling(n):\n    assert yaml.safe_load('a: 1') == {'a': 1}\n"
    )


def test_lock_pins_ci_extras_and_noisy_addopts(tmp_path: Path) -> None:
    repo = write_tree(
        tmp_path / "repo",
        {
            "pyproject.toml": PYPROJECT,
            "uv.lock": UV_LOCK,
            ".github/workflows/ci.yml": WORKFLOW,
            "src/asof/__init__.py": "",
            "tests/test_asof.py": _tests("7.4.4", 7),
        },
    )
    detection = detect(repo, commit=CommitInfo("2024-06-01T00:00:00Z"))
    recipe = make_recipe(repo, detection)
    assert "pytest==7.4.4" in recipe.dockerfile
    assert "'asof[test,yaml] @ file:///workspace'" in recipe.dockerfile
    result = check_recipe(repo, recipe)
    # The lock's pytest (not the newest), the CI's yaml extra, and all 7 tests counted
    # although addopts = "-v" turns pytest's -q listing into a tree.
    assert result.ok, (result.failed_step, result.reason, result.log_tail)
    assert result.tests_collected == 7
    assert result.sample_ids[0] == "tests/test_asof.py::test_error_handling[0]"


def test_resolution_is_capped_at_the_commit_date(tmp_path: Path) -> None:
    files = {
        "pyproject.toml": PYPROJECT.replace('\n    yaml = ["pyyaml"]', ""),
        "src/asof/__init__.py": "",
        "tests/test_asof.py": _tests("7.2.0", 2)
        .replace("import yaml\n", "")
        .replace("yaml.safe_load('a: 1') == {'a': 1}", "n >= 0"),
    }
    repo = write_tree(tmp_path / "repo", files)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_COMMITTER_DATE": "2023-01-01T00:00:00Z",
    }
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "at new year 2023"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env)
    result = bootstrap_ref(repo, "HEAD", use_cache=False)
    assert result.recipe.commit_date == "2023-01-01T00:00:00Z"
    check = result.check
    assert check is not None and check.ok, (check.failed_step, check.reason, check.log_tail)
    assert check.tests_collected == 2
