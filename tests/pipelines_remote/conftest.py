"""Fixtures: the hosted ``widgets`` repository (built once per module) and a clean
environment per test (no real credentials, clones cached under the test's folder)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pipelines_remote.remote_fixtures import Hosted, build_hosted
from tests.sources.conftest import BASE_EPOCH

CREDENTIALS = (
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITLAB_TOKEN",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "REPOGYM_LLM_API_KEY",
    "HF_TOKEN",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
)


def _isolate(mp: pytest.MonkeyPatch) -> None:
    mp.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for who in ("AUTHOR", "COMMITTER"):
        mp.setenv(f"GIT_{who}_NAME", "Ada Tester")
        mp.setenv(f"GIT_{who}_EMAIL", "ada@example.com")
        mp.setenv(f"GIT_{who}_DATE", f"{BASE_EPOCH} +0000")
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", *CREDENTIALS):
        mp.delenv(var, raising=False)


@pytest.fixture(scope="module")
def hosted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosted]:
    mp = pytest.MonkeyPatch()
    _isolate(mp)
    try:
        yield build_hosted(tmp_path_factory.mktemp("hosted"))
    finally:
        mp.undo()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No credentials from the machine; clones go to ``tmp_path/clones``."""
    _isolate(monkeypatch)
    clones = tmp_path / "clones"
    monkeypatch.setenv("REPOGYM_CLONE_CACHE", str(clones))
    return clones
