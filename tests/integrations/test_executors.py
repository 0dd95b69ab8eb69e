"""The executors: local threads and a local multi-node Ray cluster give the same answers; a
worker killed mid-unit is retried elsewhere; a function's own error is not retried."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from repogym.executors import LocalExecutor, RayExecutor, Work, get_executor


def square(x: int) -> int:
    return x * x


def slow_square(x: int) -> int:
    """Long enough that one 1-CPU node cannot take every unit before the other starts."""
    import time

    time.sleep(0.3)
    return x * x


def boom(x: int) -> int:
    raise ValueError(f"bad input {x}\nsecond line")


def die_once(marker: str) -> str:
    """Kill this worker process the first time (a worker lost mid-unit), succeed after."""
    path = Path(marker)
    if not path.exists():
        path.write_text("died once")
        os._exit(1)
    return "survived"


def test_local_executor_runs_everything() -> None:
    done = list(LocalExecutor(3).map([Work(str(i), square, (i,)) for i in range(10)]))
    assert sorted(d.value for d in done) == [i * i for i in range(10)]
    [bad] = list(LocalExecutor().map([Work("b", boom, (7,))]))
    assert bad.error == "ValueError: bad input 7" and "Traceback" in bad.detail


def test_ray_executor_matches_local_and_retries_lost_workers(ray_cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    ex = RayExecutor(ray_cluster.address)
    work = [Work(str(i), slow_square, (i,)) for i in range(8)]
    done = {d.key: d for d in ex.map(work)}
    assert {k: d.value for k, d in done.items()} == {str(i): i * i for i in range(8)}
    assert len({d.node for d in done.values()}) == 2  # both worker nodes took work
    [bad] = list(ex.map([Work("b", boom, (7,))]))
    assert bad.error == "ValueError: bad input 7" and bad.attempts == 1
    [lost] = list(ex.map([Work("k", die_once, (str(tmp_path / "marker"),))]))
    assert lost.ok and lost.value == "survived"


def test_unknown_executor() -> None:
    with pytest.raises(ValueError, match="unknown executor 'spark'"):
        get_executor("spark")
