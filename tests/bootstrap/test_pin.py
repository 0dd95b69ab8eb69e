"""Pinning a built Python environment: freeze output → constraints → the Dockerfile's installs."""

from __future__ import annotations

from pathlib import Path

from repogym.bootstrap.pin import (
    CONSTRAINTS_NAME,
    CONSTRAINTS_PATH,
    LockStore,
    constraints_from_freeze,
    pinned_dockerfile,
)

FREEZE = """\
iniconfig==2.0.0
# Editable install with no version control (statkit==0.1.0)
-e /workspace
packaging==24.1
pluggy==1.5.0
local-thing @ file:///tmp/local_thing
Pytest==8.3.2
"""
DOCKERFILE = """\
FROM python:3.12-slim
WORKDIR /workspace
ENV PIP_NO_CACHE_DIR=1
COPY repo/requirements.txt ./
RUN python -m pip install -r requirements.txt 'pytest>=7'
COPY repo/ /workspace/
RUN python -m pip install --no-build-isolation -e .
"""


def test_constraints_keep_only_pinned_names() -> None:
    assert constraints_from_freeze(FREEZE) == (
        "iniconfig==2.0.0\npackaging==24.1\npluggy==1.5.0\nPytest==8.3.2\n"
    )
    assert constraints_from_freeze("-e /workspace\n") == ""


def test_pinned_dockerfile_constrains_every_install() -> None:
    pinned = pinned_dockerfile(DOCKERFILE)
    lines = pinned.splitlines()
    copy = lines.index(f"COPY {CONSTRAINTS_NAME} {CONSTRAINTS_PATH}")
    first_install = next(i for i, ln in enumerate(lines) if "pip install" in ln)
    assert copy < first_install and copy > lines.index("COPY repo/requirements.txt ./")
    installs = [ln for ln in lines if "pip install" in ln]
    assert len(installs) == 2 and all(f"-c {CONSTRAINTS_PATH}" in ln for ln in installs)
    # Everything above the first install is unchanged: those layers stay shared.
    assert lines[: copy - 1] == DOCKERFILE.splitlines()[: copy - 1]
    assert pinned_dockerfile("FROM node:20-slim\nRUN npm ci\n") == "FROM node:20-slim\nRUN npm ci\n"


def test_lock_store_round_trip(tmp_path: Path) -> None:
    store = LockStore(tmp_path / "locks")
    assert store.get("abc") is None
    store.put("abc", "a==1\n")
    assert store.get("abc") == "a==1\n"
    assert not list((tmp_path / "locks").glob(".*"))


def test_the_installer_step_is_not_constrained_by_the_projects_own_uv() -> None:
    """A project whose dev dependencies install another uv (freeze: ``uv==0.7.8``) must still
    rebuild: the step that installs repogym's own uv pins itself and takes no ``-c``."""
    from repogym.bootstrap.installer import INSTALLER_STEP

    step = "RUN " + " ".join(INSTALLER_STEP)
    dockerfile = DOCKERFILE.replace(
        "ENV PIP_NO_CACHE_DIR=1\n", f"ENV PIP_NO_CACHE_DIR=1\n{step}\n"
    ).replace("python -m pip install -r", "uv pip install --system -r")
    lines = pinned_dockerfile(dockerfile).splitlines()
    assert step in lines
    installs = [ln for ln in lines if "install" in ln and ln != step]
    assert installs and all(f"-c {CONSTRAINTS_PATH}" in ln for ln in installs)
    assert lines.index(f"COPY {CONSTRAINTS_NAME} {CONSTRAINTS_PATH}") > lines.index(step)
