"""pr_diff fixtures: a real git history (isolated git, fixed identity) shared by the modules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pipelines_pr_diff.history import build_repo
from tests.sources.conftest import GitRepo, isolated_git, make_repo, pin_git_env

__all__ = ["GitRepo", "isolated_git", "make_repo"]

JUDGE_VARS = ("REPOGYM_JUDGE_URL", "REPOGYM_JUDGE_MODEL", "REPOGYM_JUDGE_API_KEY")


@pytest.fixture(scope="session")
def pr_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    mp = pytest.MonkeyPatch()
    pin_git_env(mp, drop=JUDGE_VARS)
    repo = GitRepo(tmp_path_factory.mktemp("repos") / "calc")
    build_repo(repo)
    yield repo.path
    mp.undo()
