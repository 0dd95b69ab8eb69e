"""Atomic writers give files and folders the modes the umask says (not mkstemp's 0600)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from repogym.atomic import atomic_write, make_temp_dir
from repogym.taskdir import load_task, set_content_hash, update_task_toml
from repogym.taskdir.dataset import write_dataset_index


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("umask_022")
def test_atomic_files_and_folders_follow_the_umask(
    tmp_path: Path, make_task: Callable[..., Path]
) -> None:
    atomic_write(tmp_path / "a.json", "{}\n")
    assert _mode(tmp_path / "a.json") == 0o644
    folder = make_temp_dir(tmp_path, prefix=".rev.")
    assert _mode(folder) == 0o755
    task_dir = make_task()
    set_content_hash(task_dir)
    assert _mode(task_dir / "task.toml") == 0o644
    update_task_toml(task_dir, lambda c: c.metadata.setdefault("x", {}), rehash=False)
    assert _mode(task_dir / "task.toml") == 0o644
    write_dataset_index(task_dir.parent, [load_task(task_dir)], name="d")
    assert _mode(task_dir.parent / "registry.json") == 0o644
    assert _mode(task_dir.parent / "manifest.json") == 0o644


def test_a_stricter_umask_is_kept(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        atomic_write(tmp_path / "b", b"x")
        folder = make_temp_dir(tmp_path)
    finally:
        os.umask(old)
    assert _mode(tmp_path / "b") == 0o600 and _mode(folder) == 0o700
