"""The commands take ``--sandbox docker`` and give what the local backend gives: ``verify`` and
``run`` from the command line, runs from the explorer's task pages (the engine:
:mod:`tests.engine`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import EXAMPLES
from tests.engine import Engine
from tests.explorer_runs.fixtures import TEXTSTATS, Visitor, explorer


def repogym(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "repogym"), *args],
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_verify_and_run_on_docker_match_local(engine: Engine, tmp_path: Path) -> None:
    done = repogym("verify", str(EXAMPLES / TEXTSTATS), "--sandbox", "docker", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    [task] = json.loads(done.stdout)["tasks"]
    assert task["status"] == "verified", task
    assert task["canaries"] == 6  # planted and judged on the engine as on the local backend
    done = repogym(
        "run", str(EXAMPLES / "hello-file"), "-a", "nop", "--sandbox", "docker",
        "--out", str(tmp_path / "jobs"), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    rewards = [t["reward"] for t in json.loads(done.stdout)["trials"]]
    assert rewards == [0.0]


def test_explorer_runs_on_docker(engine: Engine, tmp_path: Path) -> None:
    with explorer(tmp_path / "runs", sandbox="docker") as site:
        visitor = Visitor(site.base)
        oracle = visitor.run(agent="oracle")
        assert (oracle["status"], oracle["reward"]) == ("done", 1.0), oracle
        assert oracle["details"]["resolved"] is True
        nop = visitor.run(agent="nop")
        assert (nop["status"], nop["reward"]) == ("done", 0.0), nop
