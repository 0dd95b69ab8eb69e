"""SIGTERM while a generated task is being verified: the run ends with index files that list
exactly the tasks under ``tasks/`` (the task in flight is not published after them)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repogym.example_repo import build_example_repo
from repogym.taskdir import iter_task_dirs

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def test_sigterm_during_verify_keeps_the_index_consistent(tmp_path: Path) -> None:
    repo = build_example_repo(tmp_path / "statkit")
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "repogym.cli", "generate", "--repo", str(repo), "--out", str(out)],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 600
    tasks = out / "tasks"
    try:
        # A staged task is being verified (its hidden staging folder exists).
        while not (tasks.is_dir() and any(p.name.endswith(".staging") for p in tasks.iterdir())):
            assert proc.poll() is None, "generate ended before a task was staged"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    published = {p.name for p in iter_task_dirs(tasks)}
    registry = json.loads((out / "registry.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    assert {t["name"] for t in registry[0]["tasks"]} == published
    assert {row["id"] for row in manifest["tasks"]} == published
    assert not [p for p in tasks.iterdir() if p.name.endswith(".staging")]
    report = json.loads((out / "generate-report.json").read_text())
    assert report["status"] == "interrupted"
