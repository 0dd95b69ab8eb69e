"""cve_patches fixtures: the Jinja-like history (isolated git, fixed identity) and the
synthetic advisory folder about it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pipelines_cve.history import build_repo, synthetic_records, write_folder
from tests.sources.conftest import GitRepo, isolated_git, make_repo, pin_git_env

__all__ = ["GitRepo", "isolated_git", "make_repo"]


@pytest.fixture(scope="session")
def jinja_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    mp = pytest.MonkeyPatch()
    pin_git_env(mp, drop=("REPOGYM_OSV_URL",))
    repo = GitRepo(tmp_path_factory.mktemp("repos") / "jinja")
    shas = build_repo(repo)
    yield repo.path, shas
    mp.undo()


@pytest.fixture(scope="session")
def osv_folder(
    jinja_repo: tuple[Path, dict[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    _, shas = jinja_repo
    return write_folder(tmp_path_factory.mktemp("osv"), synthetic_records(shas))
