"""Fixtures: the hosted ``widgets`` repository (built once per module) and a clean
environment per test (no real credentials, clones cached under the test's folder)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pipelines_remote.remote_fixtures import Hosted, build_hosted, isolate


@pytest.fixture(scope="module")
def hosted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosted]:
    mp = pytest.MonkeyPatch()
    isolate(mp)
    try:
        yield build_hosted(tmp_path_factory.mktemp("hosted"))
    finally:
        mp.undo()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No credentials from the machine; clones go to ``tmp_path/clones``."""
    isolate(monkeypatch)
    clones = tmp_path / "clones"
    monkeypatch.setenv("REPOGYM_CLONE_CACHE", str(clones))
    return clones
