"""SIGKILL and SIGTERM midway through ``explore index`` and ``verify``: what they leave is
either the old state or the new one, never half of either, and the next run sweeps the rest."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repogym.explorer.snapshot import SnapshotReader
from repogym.taskdir import load_task
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
CLI = [sys.executable, "-m", "repogym.cli"]


def killed_after(argv: list[str], seconds: float, sig: int) -> int:
    proc = subprocess.Popen(
        [*CLI, *argv], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    time.sleep(seconds)
    if proc.poll() is None:
        proc.send_signal(sig)
    return proc.wait(timeout=300)


@pytest.mark.parametrize("seconds", [0.6, 1.2, 2.0])
def test_explore_index_killed_leaves_a_servable_folder(tmp_path: Path, seconds: float) -> None:
    out = tmp_path / "snap"
    killed_after(["explore", "index", str(EXAMPLES), "--out", str(out)], seconds, signal.SIGKILL)
    if (out / "CURRENT").exists():
        SnapshotReader(out)  # a pointer, when there is one, names a whole snapshot
    res = subprocess.run(
        [*CLI, "explore", "index", str(EXAMPLES), "--out", str(out)],
        env=ENV,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    leftovers = [p.name for p in (out / "snapshots").iterdir() if ".repogym-" in p.name]
    assert leftovers == []
    assert SnapshotReader(out).handle.facts["counts"]["tasks"] == 2


def test_verify_interrupted_leaves_every_task_toml_whole(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(EXAMPLES, data)
    before = {p: (p / "task.toml").read_bytes() for p in data.iterdir() if p.is_dir()}
    code = killed_after(["verify", str(data), "--reruns", "0"], 4.0, signal.SIGTERM)
    assert code in (0, 1, 143)
    for task_dir, old in before.items():
        load_task(task_dir)  # parses: the old file or the new one, never half
        assert not [p for p in task_dir.iterdir() if p.name.startswith(".task.toml.")]
        if code == 143:
            new = (task_dir / "task.toml").read_bytes()
            assert new == old or b"[metadata.repo2env.evaluation]" in new


@pytest.mark.parametrize("seconds", [0.5, 0.9, 1.4])
def test_push_and_pull_killed_leave_old_or_new_and_the_next_run_sweeps(
    tmp_path: Path, seconds: float
) -> None:
    reg = f"file://{tmp_path / 'reg'}"
    killed_after(["push", str(EXAMPLES), "acme/ds", "--registry", reg], seconds, signal.SIGKILL)
    revisions = tmp_path / "reg" / "acme" / "ds" / "revisions"
    published = (
        [p for p in revisions.iterdir() if not p.name.startswith(".")] if revisions.is_dir() else []
    )
    for rev in published:  # a revision folder, when there is one, is whole
        assert {p.name for p in (rev / "tasks").iterdir()} == {"hello-file", "textstats-word-count"}
    res = subprocess.run(
        [*CLI, "push", str(EXAMPLES), "acme/ds", "--registry", reg],
        env=ENV,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    assert [p.name for p in revisions.iterdir() if p.name.startswith(".")] == []

    dest = tmp_path / "got"
    killed_after(["pull", "acme/ds", str(dest), "--registry", reg], seconds, signal.SIGKILL)
    if dest.exists():  # renamed into place whole, or not at all
        assert {p.name for p in (dest / "tasks").iterdir()} == {
            "hello-file",
            "textstats-word-count",
        }
        shutil.rmtree(dest)
    res = subprocess.run(
        [*CLI, "pull", "acme/ds", str(dest), "--registry", reg],
        env=ENV,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["got", "reg"]
