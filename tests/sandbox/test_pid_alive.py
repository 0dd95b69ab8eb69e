"""``_host.pid_alive``: the one check of whether the process that left something behind lives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from repogym.sandbox._host import pid_alive
from repogym.sandbox._layers import LayerStore


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: its pid names no process now
    return proc.pid


def test_pid_alive() -> None:
    assert pid_alive(os.getpid())
    assert pid_alive(1)  # init: alive whoever owns it
    assert not pid_alive(_dead_pid())
    assert not pid_alive(0)  # a process group, not a process
    assert not pid_alive(-1)
    assert not pid_alive(2**64)


def test_layer_store_prunes_only_temp_folders_of_dead_builds(tmp_path: Path) -> None:
    store = LayerStore(tmp_path / "layers")
    mine = store.root / f".tmp-abc-{os.getpid()}-00ff"
    gone = store.root / f".tmp-abc-{_dead_pid()}-00ff"
    for d in (mine, gone):
        d.mkdir(parents=True)
    store.prune_tmp()
    assert mine.is_dir()
    assert not gone.exists()
