"""Shared fixtures: small task directories built on the fly."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings

# Wall-clock deadlines make property tests flaky on a loaded 2-core CI machine.
settings.register_profile("repogym", deadline=None)
settings.load_profile("repogym")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "tasks"

BASIC_TOML = """\
schema_version = "1.4"

[task]
name = "acme/{name}"
description = "A test task."

[metadata]
difficulty = "easy"

[environment]
network_mode = "no-network"
"""


def write_task(
    root: Path,
    name: str = "task-a",
    *,
    toml: str | None = None,
    instruction: str | bytes = "Do the thing.\n",
    dockerfile: str | None = "FROM python:3.11-slim\nWORKDIR /app\n",
    test_sh: str | None = "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
    files: dict[str, str | bytes] | None = None,
) -> Path:
    """Write a minimal valid Harbor task folder and return its path."""
    task = root / name
    task.mkdir(parents=True)
    (task / "task.toml").write_text(toml if toml is not None else BASIC_TOML.format(name=name))
    if instruction is not None:
        data = instruction.encode() if isinstance(instruction, str) else instruction
        (task / "instruction.md").write_bytes(data)
    if dockerfile is not None:
        (task / "environment").mkdir()
        (task / "environment" / "Dockerfile").write_text(dockerfile)
    if test_sh is not None:
        (task / "tests").mkdir()
        (task / "tests" / "test.sh").write_text(test_sh)
    for rel, content in (files or {}).items():
        p = task / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
    return task


@pytest.fixture
def make_task(tmp_path: Path) -> Callable[..., Path]:
    def _make(name: str = "task-a", root: Path | None = None, **kwargs: object) -> Path:
        return write_task(root or tmp_path / "ds", name, **kwargs)

    return _make


@pytest.fixture
def examples_copy(tmp_path: Path) -> Path:
    """A private copy of the example dataset (tests may modify it)."""
    dest = tmp_path / "examples"
    shutil.copytree(EXAMPLES, dest, symlinks=True)
    return dest


def snapshot(path: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under ``path`` with its mtime and bytes: to prove nothing was written."""
    out = {}
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            p = Path(dirpath) / name
            out[str(p.relative_to(path))] = (p.stat().st_mtime_ns, p.read_bytes())
    return out


@pytest.fixture(scope="session")
def engine():  # type: ignore[no-untyped-def]
    """A real Docker engine, offline, with stand-in base images (see tests/engine.py)."""
    from tests.engine import engine_fixture

    yield from engine_fixture()


@pytest.fixture(scope="session")
def ray_cluster():  # type: ignore[no-untyped-def]
    """A local Ray cluster: a head with no CPUs and two 1-CPU worker nodes (tests/ray_support.py)."""
    from tests.ray_support import cluster_fixture

    yield from cluster_fixture()
