"""The docker backend runs the example tasks like the local one, on a real engine started by the
tests (``engine``, :mod:`tests.engine`: offline, stand-in base images)."""

from __future__ import annotations

from pathlib import Path

import pytest

from repogym.run.agents import NopAgent, OracleAgent
from repogym.run.trial import TrialRunner
from repogym.sandbox import SandboxError, get_backend
from repogym.taskdir import load_task
from tests.conftest import EXAMPLES
from tests.engine import Engine


@pytest.mark.parametrize("task_id", ["hello-file", "textstats-word-count"])
def test_examples_oracle_1_nop_0(engine: Engine, task_id: str) -> None:
    runner = TrialRunner(get_backend("docker"))
    task = load_task(EXAMPLES / task_id)
    assert runner.run(task, OracleAgent()).reward == 1.0
    assert runner.run(task, NopAgent()).reward == 0.0


def test_unavailable_engine_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/none.sock")
    with pytest.raises(SandboxError, match="no Docker engine reachable"):
        get_backend("docker")
