"""pr_diff fixtures: a real git history (isolated git, fixed identity) shared by the modules."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pipelines_pr_diff.history import build_repo
from tests.sources.conftest import BASE_EPOCH, GitRepo, isolated_git, make_repo

__all__ = ["GitRepo", "isolated_git", "make_repo"]

JUDGE_VARS = ("REPOGYM_JUDGE_URL", "REPOGYM_JUDGE_MODEL", "REPOGYM_JUDGE_API_KEY")


@pytest.fixture(scope="session")
def pr_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    mp = pytest.MonkeyPatch()
    mp.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for who in ("AUTHOR", "COMMITTER"):
        mp.setenv(f"GIT_{who}_NAME", "Ada Tester")
        mp.setenv(f"GIT_{who}_EMAIL", "ada@example.com")
        mp.setenv(f"GIT_{who}_DATE", f"{BASE_EPOCH} +0000")
    for name in JUDGE_VARS:
        mp.delenv(name, raising=False)
    repo = GitRepo(tmp_path_factory.mktemp("repos") / "calc")
    build_repo(repo)
    yield repo.path
    mp.undo()
