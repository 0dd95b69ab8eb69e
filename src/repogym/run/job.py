"""A job: trials of one agent over many tasks (× attempts), in parallel, with a summary."""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repogym.harbor import Task, atomic_write
from repogym.run.agents import make_agent
from repogym.run.trial import TrialOutcome, TrialRunner
from repogym.sandbox import get_backend


@dataclass
class JobSummary:
    trials: int
    mean_reward: float | None
    rewarded: int
    errors: int
    resolved: int

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


def summarize(outcomes: list[TrialOutcome]) -> JobSummary:
    rewards = [o.reward for o in outcomes if o.reward is not None]
    resolved = sum(
        1
        for o in outcomes
        if o.reading and o.reading.details and o.reading.details.get("resolved") is True
    )
    return JobSummary(
        trials=len(outcomes),
        mean_reward=(math.fsum(rewards) / len(rewards)) if rewards else None,
        rewarded=len(rewards),
        errors=sum(1 for o in outcomes if o.error is not None),
        resolved=resolved,
    )


def new_job_dir(parent: Path, label: str) -> Path:
    """A job folder that no other run shares: ``<parent>/<time>-<label>[-N]``, created here
    (exclusively, so two runs started in the same second never write into one folder)."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    label = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)[:40] or "job"
    parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10000):
        path = parent / (f"{stamp}-{label}" if n == 1 else f"{stamp}-{label}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"{parent}: no free job folder name for {stamp}-{label}")


def run_job(
    tasks: list[Task],
    agent_spec: str,
    *,
    sandbox: str = "local",
    jobs: int = 1,
    attempts: int = 1,
    out_dir: Path,
    verification: str | None = None,
    on_done: Callable[[TrialOutcome], None] | None = None,
) -> tuple[list[TrialOutcome], JobSummary, Path]:
    """Run ``attempts`` trials of the agent on every task; write each trial and ``job.json``.

    ``verification`` overrides every task's verification mode (``clean_room``/``in_place``)."""
    make_agent(agent_spec)  # fail fast on a bad spec, before any build
    runner = TrialRunner(get_backend(sandbox), verification=verification)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = _dt.datetime.now(_dt.UTC).isoformat()
    build_locks: dict[str, threading.Lock] = {t.id: threading.Lock() for t in tasks}

    def one(task: Task, attempt: int) -> TrialOutcome:
        # One build per task, even with parallel attempts. A failed build is reported by the
        # trial itself, which tries again.
        with build_locks[task.id], contextlib.suppress(Exception):
            runner.build(task, log=out_dir / f"{task.id}.build.log")
        name = f"{task.id}__{attempt}"
        return runner.run(task, make_agent(agent_spec), out_dir=out_dir / name, trial_name=name)

    work = [(t, a) for t in tasks for a in range(1, attempts + 1)]
    outcomes: list[TrialOutcome] = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(one, t, a) for t, a in work]
        for fut in as_completed(futures):
            outcome = fut.result()
            outcomes.append(outcome)
            if on_done:
                on_done(outcome)
    outcomes.sort(key=lambda o: o.result["trial_name"])
    summary = summarize(outcomes)
    job = {
        "agent": agent_spec,
        "sandbox": sandbox,
        "verification": verification or "as declared by each task",
        "attempts": attempts,
        "started_at": started,
        "finished_at": _dt.datetime.now(_dt.UTC).isoformat(),
        "summary": summary.to_json(),
        "trials": [
            {
                "trial_name": o.result["trial_name"],
                "task_id": o.result["task_id"],
                "reward": o.reward,
                "error": o.error,
                "result": str(o.path.relative_to(out_dir)) if o.path else None,
            }
            for o in outcomes
        ],
    }
    job_path = out_dir / "job.json"
    atomic_write(job_path, json.dumps(job, indent=2) + "\n")
    return outcomes, summary, job_path
