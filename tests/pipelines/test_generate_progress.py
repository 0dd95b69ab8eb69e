"""``generate(on_progress=…)``: each candidate's steps arrive in order, from a real run."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from repogym.example_repo import build_example_repo
from repogym.pipelines import Progress
from repogym.pipelines.base import PROGRESS_STEPS
from repogym.spec import GenerationInput
from repogym.workflows import generate

pytestmark = pytest.mark.slow

KEPT = ["started", "build_started", "build_finished", "tests_after", "tests_before", "verify"]


def test_progress_events_arrive_in_order(tmp_path: Path) -> None:
    repo = build_example_repo(tmp_path / "statkit")
    events: list[Progress] = []
    threads: set[str] = set()

    def on_progress(event: Progress) -> None:
        events.append(event)
        threads.add(threading.current_thread().name)

    result = generate(
        GenerationInput(repo=str(repo), pipeline="commit_runtime", out=tmp_path / "out", limit=1),
        on_progress=on_progress,
    )
    assert result.stats.kept == 1
    assert all(e.step in PROGRESS_STEPS for e in events)
    by_task: dict[str, list[str]] = {}
    for e in events:
        by_task.setdefault(e.task_id, []).append(e.step)
    assert set(by_task) == {o.candidate.task_id for o in result.outcomes}
    kept = next(o.candidate.task_id for o in result.outcomes if o.kept)
    assert by_task[kept] == [*KEPT, "finished"]
    for task_id, steps in by_task.items():  # dropped ones stop early, in the same order
        assert steps[0] == "started" and steps[-1] == "finished", (task_id, steps)
        assert steps[:-1] == KEPT[: len(steps) - 1], (task_id, steps)
    assert threading.main_thread().name not in threads  # told from the worker threads
    text = Progress(kept, "tests_before").text
    assert text == f"running the tests of {kept} (before the fix)"
