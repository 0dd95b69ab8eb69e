"""A job: trials of one agent over many tasks (× attempts), in parallel, with a summary."""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repogym.run.agents import make_agent
from repogym.run.models import (
    JOB_FILE,
    RESULT_FILE,
    JobResult,
    JobSummary,
    JobTrial,
    RecordError,
    TrialResult,
    now,
)
from repogym.run.records import mean_pass_at_k, trial_resolved
from repogym.run.rewards import RewardReading
from repogym.run.trial import INTERRUPTED, TrialOutcome, TrialRunner
from repogym.sandbox import get_backend
from repogym.taskdir import Task

if TYPE_CHECKING:
    from repogym.executors import Executor


def summarize(outcomes: list[TrialOutcome], attempts: int = 1) -> JobSummary:
    """Totals of a job's trials; pass@1 and pass@``attempts`` per task, averaged."""
    rewards = [o.reward for o in outcomes if o.reward is not None]
    per_task: dict[str, list[bool]] = {}
    for o in outcomes:
        per_task.setdefault(str(o.record.task_id), []).append(trial_resolved(o.record))
    counts = [(len(v), sum(v)) for v in per_task.values()]
    return JobSummary(
        trials=len(outcomes),
        mean_reward=(math.fsum(rewards) / len(rewards)) if rewards else None,
        rewarded=len(rewards),
        errors=sum(1 for o in outcomes if o.error is not None),
        resolved=sum(sum(v) for v in per_task.values()),
        pass_at_1=mean_pass_at_k(counts, 1),
        pass_at_k=mean_pass_at_k(counts, attempts),
        k=attempts,
        tampered=sum(1 for o in outcomes if (o.record.details or {}).get("tampered")),
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
    agent_options: dict[str, str] | None = None,
    sandbox: str = "local",
    jobs: int = 1,
    attempts: int = 1,
    out_dir: Path,
    verification: str | None = None,
    on_done: Callable[[TrialOutcome], None] | None = None,
    executor: Executor | None = None,
    resume: bool = False,
) -> tuple[list[TrialOutcome], JobSummary, Path]:
    """Run ``attempts`` trials of the agent on every task; write each trial and ``job.json``.

    ``resume``: trials ``out_dir`` already holds a finished record of (for the same task
    version) are kept and not run again; the others (killed, interrupted, lost) start over.

    ``verification`` overrides every task's verification mode (``clean_room``/``in_place``).
    ``executor``: run the trials as units there (:mod:`repogym.run.remote_job`; ``jobs`` is
    then the executor's to decide); None runs them here, ``jobs`` threads at once."""
    probe = make_agent(agent_spec, agent_options)  # fail fast on a bad spec, before any build
    public = getattr(getattr(probe, "options", None), "public", None)
    runner = (
        TrialRunner(get_backend(sandbox), verification=verification) if executor is None else None
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    started = now()
    kept = finished_trials(out_dir, tasks, attempts) if resume else {}
    for outcome in kept.values():
        if on_done:
            on_done(outcome)
    todo = [(t, a) for t in tasks for a in range(1, attempts + 1) if f"{t.id}__{a}" not in kept]
    for task, attempt in todo:  # what a killed trial left, so it starts clean
        shutil.rmtree(out_dir / f"{task.id}__{attempt}", ignore_errors=True)
    interrupted = False
    if runner is not None:
        try:
            outcomes = _run_here(runner, todo, agent_spec, agent_options, jobs, out_dir, on_done)
        except JobInterrupted as stop:
            outcomes, interrupted = stop.outcomes, True
    elif todo:
        assert executor is not None
        from repogym.run.remote_job import run_trials

        outcomes = run_trials(
            executor,
            tasks,
            agent_spec,
            agent_options,
            agent_name=probe.name,
            sandbox=sandbox,
            attempts=attempts,
            out_dir=out_dir,
            verification=verification,
            on_done=on_done,
            skip=set(kept),
        )
    else:
        outcomes = []
    outcomes = [*kept.values(), *outcomes]
    outcomes.sort(key=lambda o: o.record.trial_name or "")
    summary = summarize(outcomes, attempts)
    job = JobResult(
        agent=agent_spec,
        sandbox=sandbox,
        verification=verification or "as declared by each task",
        attempts=attempts,
        started_at=started,
        finished_at=now(),
        summary=summary,
        trials=[JobTrial.listing(o.record, o.reward, o.error, o.path, out_dir) for o in outcomes],
    )
    if public:  # the keys a job may lack are written where the field order puts them
        job.agent_options = public()
    if executor is not None:
        job.executor = executor.name
    job_path = job.write(out_dir / JOB_FILE)
    if interrupted:
        raise JobInterrupted(outcomes)
    return outcomes, summary, job_path


RERUN_ON_RESUME = frozenset({INTERRUPTED, "KeyboardInterrupt", "WorkerLost"})
"""Exception types of a trial record that ``--resume`` runs again (the trial did not finish)."""


def finished_trials(out_dir: Path, tasks: list[Task], attempts: int) -> dict[str, TrialOutcome]:
    """The trials of ``out_dir`` that a resumed job keeps, by trial name: those whose
    ``result.json`` reads, names the same task and content hash, and did not end interrupted."""
    kept: dict[str, TrialOutcome] = {}
    for task in tasks:
        for attempt in range(1, attempts + 1):
            name = f"{task.id}__{attempt}"
            path = out_dir / name / RESULT_FILE
            try:
                record = TrialResult.read(path)
            except RecordError:
                continue
            declared = (task.repo2env or {}).get("content_hash")
            if record.task_id != task.id or record.task_checksum != declared:
                continue
            exc = record.exception_info
            if exc is not None and exc.exception_type in RERUN_ON_RESUME:
                continue
            kept[name] = TrialOutcome(record, reading_of(record), path)
    return kept


def reading_of(record: TrialResult) -> RewardReading | None:
    """The reward reading a trial record holds (None when the verifier never ran)."""
    vr = record.verifier_result
    if vr is None:
        return None
    return RewardReading(
        vr.rewards, vr.reward, vr.source, vr.error, vr.details, list(vr.warnings or [])
    )


def _run_here(
    runner: TrialRunner,
    work: list[tuple[Task, int]],
    agent_spec: str,
    agent_options: dict[str, str] | None,
    jobs: int,
    out_dir: Path,
    on_done: Callable[[TrialOutcome], None] | None,
) -> list[TrialOutcome]:
    """The trials (task, attempt) on this machine: ``jobs`` threads, one build per task."""
    build_locks: dict[str, threading.Lock] = {t.id: threading.Lock() for t, _ in work}

    def one(task: Task, attempt: int) -> TrialOutcome:
        # One build per task, even with parallel attempts. A failed build is reported by the
        # trial itself, which tries again.
        with build_locks[task.id], contextlib.suppress(Exception):
            runner.build(task, log=out_dir / f"{task.id}.build.log")
        name = f"{task.id}__{attempt}"
        agent = make_agent(agent_spec, agent_options)
        return runner.run(task, agent, out_dir=out_dir / name, trial_name=name)

    outcomes: list[TrialOutcome] = []
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    futures = [pool.submit(one, t, a) for t, a in work]
    try:
        for fut in as_completed(futures):
            outcome = fut.result()
            outcomes.append(outcome)
            if on_done:
                on_done(outcome)
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM: no trial starts, running ones lose their sandboxes now; every
        # trial that wrote a record (interrupted ones too) goes into job.json.
        runner.interrupt()
        pool.shutdown(wait=True, cancel_futures=True)
        done = [f.result() for f in futures if f.done() and not f.cancelled()]
        raise JobInterrupted(done) from None
    pool.shutdown(wait=True)
    return outcomes


class JobInterrupted(KeyboardInterrupt):
    """A job stopped by SIGINT/SIGTERM; :attr:`outcomes` are the trials that have records."""

    def __init__(self, outcomes: list[TrialOutcome]) -> None:
        super().__init__("interrupted")
        self.outcomes = outcomes


def run_payload(
    outcomes: list[TrialOutcome], summary: JobSummary, job_path: Path
) -> dict[str, Any]:
    """What ``run --json`` prints: where the job is, its summary, one line per trial."""
    return {
        "job": str(job_path),
        "summary": summary.to_json(),
        "trials": [
            {
                "trial_name": o.record.trial_name,
                "task_id": o.record.task_id,
                "reward": o.reward,
                "rewards": o.reading.rewards if o.reading else None,
                "error": o.error,
                "result": str(o.path) if o.path else None,
            }
            for o in outcomes
        ],
    }
