"""A real Docker engine for this folder's tests (see :mod:`tests.engine`): started once per
session, offline, with stand-in base images made from Debian's packages."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.engine import Engine, stand_in, start_engine, why_no_engine

EAGER = ("python:3.11-slim", "debian:bookworm-slim")
"""Stand-ins made when the engine starts; tests that need another call ``stand_in`` first."""


@pytest.fixture(scope="session")
def engine() -> Iterator[Engine]:
    """The engine, with ``DOCKER_HOST`` pointing at it for the session."""
    why = why_no_engine()
    if why is not None:
        pytest.skip(why)
    running = start_engine()
    before = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = running.host
    try:
        for tag in EAGER:
            stand_in(running, tag)
        yield running
    finally:
        if before is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = before
        running.stop()
