"""A generate run killed mid-way leaves no half task, and --resume finishes the job."""

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
from repogym.taskdir.validate import validate_task

pytestmark = pytest.mark.slow


def test_kill_then_resume(tmp_path: Path) -> None:
    repo = build_example_repo(tmp_path / "statkit")
    out = tmp_path / "out"
    cmd = [
        str(Path(sys.executable).parent / "repogym"),
        "generate",
        "--repo",
        str(repo),
        "--out",
        str(out),
        "--json",
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    state = out / ".repogym" / "commit_runtime-state.json"
    deadline = time.monotonic() + 300
    # Kill it once it has examined a few candidates but before it is done.
    while time.monotonic() < deadline and proc.poll() is None:
        if state.is_file() and len(json.loads(state.read_text() or "{}")) >= 3:
            break
        time.sleep(0.2)
    assert proc.poll() is None, "generate finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # Whatever is in tasks/ is complete and valid; unfinished work is only in hidden staging dirs.
    for task_dir in iter_task_dirs(out / "tasks"):
        assert validate_task(task_dir, deep=True).ok, task_dir
    before = {p.name for p in iter_task_dirs(out / "tasks")}
    res = subprocess.run([*cmd, "--resume"], capture_output=True, text=True)
    assert res.returncode in (0, 1), res.stderr
    after = {p.name for p in iter_task_dirs(out / "tasks")}
    assert before <= after and len(after) == 3
    assert not [
        p
        for p in (out / "tasks").iterdir()
        if p.name.endswith(".staging") and not p.name.startswith(".")
    ]
