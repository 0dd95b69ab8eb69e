"""Run records: what ``repogym run`` left in a job folder, read back and compared.

A job folder holds one folder per trial (``<task_id>__<attempt>/result.json``) and, once the
job has finished, ``job.json``. The trial folders are the record; ``job.json`` adds the job's
settings (agent, attempts, times) and says which trials belong to it. So a job that is still
running (no ``job.json`` yet) can be read from the trials finished so far, and a corrupt file
costs one line of explanation, never the whole listing.

Definitions used everywhere (and in ``docs/jobs.md``):

- a trial is **resolved** when its verifier's ``details.resolved`` is ``true``; when the details
  have no ``resolved``, when its reward is at least 1.0;
- **pass@k** of a task with ``n`` attempts of which ``c`` resolved is the unbiased estimator
  ``1 - C(n-c, k) / C(n, k)`` (Chen et al., 2021); a job's pass@k is its mean over the tasks that
  have at least ``k`` attempts;
- a task's **reward** in a job is the mean over its attempts that produced one (a trial without
  a reward is an error, never a 0);
- usage (tokens, cost, model calls) is whatever the agent reported in ``agent_result.usage``;
  a trial whose agent reports none has ``None`` there, never an invented 0.
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym.atomic import atomic_write
from repogym.run.models import JOB_FILE as JOB_FILE
from repogym.run.models import RESULT_FILE as RESULT_FILE
from repogym.run.models import (
    AgentResult,
    JobResult,
    TimingInfo,
    TrialResult,
    Usage,
    Verification,
    VerifierResult,
)
from repogym.run.models import RecordError as RecordError

TRIAL_DIR = re.compile(r"^(?P<task>.+)__(?P<attempt>\d+)$")

DONE, RUNNING, BROKEN = "done", "running", "broken"


# --- single trials -----------------------------------------------------------------------


def is_resolved(details: Any, reward: float | None) -> bool:
    """The resolved rule: ``details["resolved"] is True``; without that key, reward ≥ 1.0."""
    if isinstance(details, dict) and "resolved" in details:
        return details["resolved"] is True
    return reward is not None and reward >= 1.0


def trial_resolved(result: TrialResult) -> bool:
    """:func:`is_resolved` of a trial's ``result.json``."""
    verifier = result.verifier_result
    if verifier is None:
        return False
    return is_resolved(verifier.details, _num(verifier.reward))


@dataclass(frozen=True)
class Trial:
    """One trial of a job, as read from its ``result.json``."""

    job: str
    trial_name: str
    task_id: str
    attempt: int | None
    agent: str | None
    model: str | None
    reward: float | None
    rewards: dict[str, float] | None
    resolved: bool
    error: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    model_calls: int | None
    steps: int | None
    stop_reason: str | None
    verification_mode: str | None
    started_at: str | None
    finished_at: str | None
    duration_s: float | None
    agent_duration_s: float | None
    task_checksum: str | None

    def row(self, agent: str | None = None) -> dict[str, Any]:
        """The export row (see :data:`EXPORT_COLUMNS`); ``agent`` is the job's agent spec."""
        return {
            "job": self.job,
            "agent": agent or self.agent,
            "model": self.model,
            "task_id": self.task_id,
            "trial_name": self.trial_name,
            "attempt": self.attempt,
            "reward": self.reward,
            "rewards": json.dumps(self.rewards, sort_keys=True) if self.rewards else None,
            "resolved": self.resolved,
            "error": self.error,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "model_calls": self.model_calls,
            "steps": self.steps,
            "stop_reason": self.stop_reason,
            "duration_s": self.duration_s,
            "agent_duration_s": self.agent_duration_s,
            "verification_mode": self.verification_mode,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }


def _num(value: Any) -> float | None:
    """A finite number (bools are not numbers here), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _str(value: str | None) -> str | None:
    return value or None


def _seconds(start: Any, end: Any) -> float | None:
    """Seconds between two ISO timestamps; None when either is missing or unreadable."""
    try:
        a = _dt.datetime.fromisoformat(start)
        b = _dt.datetime.fromisoformat(end)
        return round((b - a).total_seconds(), 3)
    except (TypeError, ValueError):
        return None


def trial_from_result(result: TrialResult, *, job: str, folder: str) -> Trial:
    """A :class:`Trial` from a trial's ``result.json``; ``folder`` is the trial folder's name
    (``<task_id>__<attempt>``), used where the document lacks a field."""
    match = TRIAL_DIR.match(folder)
    task_id = _str(result.task_id) or (match["task"] if match else folder)
    attempt = int(match["attempt"]) if match else None
    agent_info = result.agent_info
    agent_result = result.agent_result or AgentResult()
    usage = agent_result.usage or Usage()
    verifier = result.verifier_result or VerifierResult()
    verification = result.verification or Verification()
    reward = _num(verifier.reward)
    rewards = (
        {k: v for k, v in verifier.rewards.items() if _num(v) is not None}
        if verifier.rewards is not None
        else None
    )
    multi_step = verification.mode == "steps"  # there agent_result.steps counts task steps
    agent_phase = result.agent_execution or TimingInfo()
    agent_seconds = _seconds(agent_phase.started_at, agent_phase.finished_at)
    if agent_seconds is None:
        agent_seconds = _num(agent_result.duration_s)
    return Trial(
        job=job,
        trial_name=_str(result.trial_name) or folder,
        task_id=task_id,
        attempt=attempt,
        agent=_str(agent_info.name) if agent_info else None,
        model=_str(agent_result.model),
        reward=reward,
        rewards=rewards,
        resolved=is_resolved(verifier.details, reward),
        error=result.exception_info.summary() if result.exception_info else None,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cost_usd=_num(usage.cost_usd),
        model_calls=usage.model_calls,
        steps=None if multi_step else agent_result.steps,
        stop_reason=_str(agent_result.stop_reason),
        verification_mode=_str(verification.mode),
        started_at=_str(result.started_at),
        finished_at=_str(result.finished_at),
        duration_s=_seconds(result.started_at, result.finished_at),
        agent_duration_s=agent_seconds,
        task_checksum=_str(result.task_checksum),
    )


def read_trial(trial_dir: Path, *, job: str) -> Trial:
    """The trial recorded in ``trial_dir/result.json``; :class:`RecordError` when it is
    missing or corrupt."""
    label = f"{trial_dir.name}/{RESULT_FILE}"
    result = TrialResult.read(trial_dir / RESULT_FILE, label)
    return trial_from_result(result, job=job, folder=trial_dir.name)


# --- pass@k ------------------------------------------------------------------------------


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """The unbiased pass@k of one task: ``n`` attempts, ``c`` of them resolved; None when
    ``n < k`` (not enough attempts to estimate it)."""
    if k < 1 or n < k or not 0 <= c <= n:
        return None
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> float | None:
    """Mean pass@k over tasks given as ``(attempts, resolved)``; tasks with fewer than ``k``
    attempts are left out; None when no task has ``k``."""
    values = [v for n, c in counts if (v := pass_at_k(n, c, k)) is not None]
    return math.fsum(values) / len(values) if values else None


# --- jobs --------------------------------------------------------------------------------


def _sum(values: Iterable[int | float | None]) -> Any:
    """Sum of the known values; None when none is known (never an invented 0)."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


@dataclass
class TaskStats:
    """One task's trials in one job, aggregated."""

    task_id: str
    attempts: int
    rewarded: int
    reward: float | None
    resolved: int
    pass_at_1: float | None
    pass_at_k: float | None
    k: int
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    duration_s: float | None
    errors: list[str]
    trials: list[str]
    checksums: list[str]

    @property
    def task_resolved(self) -> bool:
        """Resolved as a task: by more than half of its attempts (with one attempt: by it)."""
        return self.resolved * 2 > self.attempts

    def to_json(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "checksums"}
        data["task_resolved"] = self.task_resolved
        return data


def task_stats(task_id: str, trials: Sequence[Trial]) -> TaskStats:
    """Aggregate one task's trials (``k`` = its number of attempts)."""
    rewards = [t.reward for t in trials if t.reward is not None]
    durations = [t.duration_s for t in trials if t.duration_s is not None]
    n = len(trials)
    c = sum(t.resolved for t in trials)
    return TaskStats(
        task_id=task_id,
        attempts=n,
        rewarded=len(rewards),
        reward=math.fsum(rewards) / len(rewards) if rewards else None,
        resolved=c,
        pass_at_1=pass_at_k(n, c, 1),
        pass_at_k=pass_at_k(n, c, n),
        k=n,
        input_tokens=_sum(t.input_tokens for t in trials),
        output_tokens=_sum(t.output_tokens for t in trials),
        cost_usd=_sum(t.cost_usd for t in trials),
        duration_s=round(math.fsum(durations) / len(durations), 3) if durations else None,
        errors=[t.error.splitlines()[0] for t in trials if t.error],
        trials=[t.trial_name for t in trials],
        checksums=sorted({t.task_checksum for t in trials if t.task_checksum}),
    )


@dataclass
class JobStats:
    """A job's totals (the columns of ``repogym jobs list``)."""

    tasks: int
    trials: int
    rewarded: int
    mean_reward: float | None
    resolved: int
    pass_at_1: float | None
    pass_at_k: float | None
    k: int
    errors: int
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    trials_with_usage: int

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


@dataclass
class JobRecord:
    """A job folder, read: its trials, its ``job.json`` facts and what could not be read."""

    name: str
    path: Path
    status: str
    """``done`` (job.json and every trial read), ``running`` (no job.json yet: still running,
    or stopped before the end) or ``broken`` (some file missing or corrupt: see problems)."""
    agent: str | None
    started_at: str | None
    finished_at: str | None
    attempts: int | None
    """The ``--attempts`` of the run, from job.json (None while running)."""
    trials: list[Trial] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    in_progress: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    """Trial folders job.json does not list (left by an earlier run in the same folder)."""

    @property
    def models(self) -> list[str]:
        return sorted({t.model for t in self.trials if t.model})

    def by_task(self) -> dict[str, TaskStats]:
        """Per-task aggregates, by task id (sorted)."""
        groups: dict[str, list[Trial]] = {}
        for t in self.trials:
            groups.setdefault(t.task_id, []).append(t)
        return {tid: task_stats(tid, groups[tid]) for tid in sorted(groups)}

    @property
    def k(self) -> int:
        """The k of the job's pass@k: its ``--attempts``, else the most attempts of a task."""
        if self.attempts:
            return self.attempts
        per_task = Counter(t.task_id for t in self.trials)
        return max(per_task.values(), default=1)

    def stats(self) -> JobStats:
        tasks = self.by_task().values()
        rewards = [t.reward for t in self.trials if t.reward is not None]
        counts = [(s.attempts, s.resolved) for s in tasks]
        return JobStats(
            tasks=len(tasks),
            trials=len(self.trials),
            rewarded=len(rewards),
            mean_reward=math.fsum(rewards) / len(rewards) if rewards else None,
            resolved=sum(t.resolved for t in self.trials),
            pass_at_1=mean_pass_at_k(counts, 1),
            pass_at_k=mean_pass_at_k(counts, self.k),
            k=self.k,
            errors=sum(1 for t in self.trials if t.error),
            input_tokens=_sum(t.input_tokens for t in self.trials),
            output_tokens=_sum(t.output_tokens for t in self.trials),
            cost_usd=_sum(t.cost_usd for t in self.trials),
            trials_with_usage=sum(
                1 for t in self.trials if t.input_tokens is not None or t.output_tokens is not None
            ),
        )

    def to_json(self, *, tasks: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "path": str(self.path),
            "status": self.status,
            "agent": self.agent,
            "models": self.models,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "attempts": self.attempts,
            **self.stats().to_json(),
            "problems": self.problems,
            "in_progress": self.in_progress,
            "ignored": self.ignored,
        }
        if tasks:
            data["task_results"] = [s.to_json() for s in self.by_task().values()]
        return data


def is_job_dir(path: Path) -> bool:
    """Whether ``path`` looks like a job folder: job.json, a trial folder or a build log."""
    if not path.is_dir():
        return False
    if (path / JOB_FILE).exists():
        return True
    try:
        entries = list(path.iterdir())
    except OSError:
        return False
    return any(
        (e.is_dir() and (TRIAL_DIR.match(e.name) or (e.joinpath(RESULT_FILE)).is_file()))
        or (e.name.endswith(".build.log") and e.is_file())
        for e in entries
    )


def _listed_trials(job: JobResult) -> list[str] | None:
    """Trial folder names job.json lists, or None when it has no usable list."""
    if job.trials is None:
        return None
    names: list[str] = []
    for entry in job.trials:
        parts = Path(entry.result).parts if entry.result is not None else ()
        name = parts[0] if len(parts) == 2 and parts[1] == RESULT_FILE else entry.trial_name
        if isinstance(name, str) and name and "/" not in name and name not in (".", ".."):
            names.append(name)
    return names


def read_job(path: Path) -> JobRecord:
    """Read a job folder. Problems with its files are recorded (status ``broken``), never
    raised; :class:`RecordError` only when ``path`` is not a job folder at all."""
    if not path.is_dir():
        raise RecordError(f"{path}: no such job folder")
    if not is_job_dir(path):
        raise RecordError(f"{path}: not a job folder (no {JOB_FILE} and no trial folders)")
    name = path.name
    problems: list[str] = []
    job: JobResult | None = None
    if (path / JOB_FILE).exists():
        try:
            job = JobResult.read(path / JOB_FILE)
        except RecordError as exc:
            problems.append(str(exc))
    subdirs = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
    with_result = {p.name for p in subdirs if (p / RESULT_FILE).exists()}
    trial_like = {p.name for p in subdirs if TRIAL_DIR.match(p.name)} | with_result
    listed = _listed_trials(job) if job is not None else None
    in_progress: list[str] = []
    ignored: list[str] = []
    if job is not None and listed is None:
        problems.append(f"{JOB_FILE}: no trials list")
    if listed is not None:
        names = sorted(set(listed))
        ignored = sorted(with_result - set(listed))
    else:
        names = sorted(with_result)
        in_progress = sorted(trial_like - with_result) if job is None else []
    trials: list[Trial] = []
    for trial_name in names:
        try:
            trials.append(read_trial(path / trial_name, job=name))
        except RecordError as exc:
            problems.append(str(exc) + (" (job.json lists it)" if listed is not None else ""))
    trials.sort(key=lambda t: (t.task_id, t.attempt or 0, t.trial_name))
    agent = _str(job.agent) if job else None
    if agent is None:
        names_seen = Counter(t.agent for t in trials if t.agent)
        agent = names_seen.most_common(1)[0][0] if names_seen else None
    started = _str(job.started_at) if job else None
    if started is None:
        starts = [t.started_at for t in trials if t.started_at]
        started = min(starts) if starts else None
    if problems:
        status = BROKEN
    elif job is None:
        status = RUNNING
    else:
        status = DONE
    attempts = job.attempts if job else None
    return JobRecord(
        name=name,
        path=path,
        status=status,
        agent=agent,
        started_at=started,
        finished_at=_str(job.finished_at) if job else None,
        attempts=attempts if attempts and attempts > 0 else None,
        trials=trials,
        problems=problems,
        in_progress=in_progress,
        ignored=ignored,
    )


def list_jobs(jobs_dir: Path) -> list[JobRecord]:
    """Every job folder directly under ``jobs_dir``, oldest first (by start time, then name).
    Folders that are not jobs are skipped; a job that cannot be read is listed as broken."""
    records: list[JobRecord] = []
    for child in sorted(jobs_dir.iterdir()):
        if child.name.startswith(".") or not is_job_dir(child):
            continue
        try:
            records.append(read_job(child))
        except (RecordError, OSError) as exc:  # e.g. removed or made unreadable meanwhile
            records.append(
                JobRecord(child.name, child, BROKEN, None, None, None, None, problems=[str(exc)])
            )
    return sorted(records, key=lambda r: (r.started_at or "", r.name))


@dataclass(frozen=True)
class JobListing:
    """The jobs of a folder (:func:`list_jobs`): what ``repogym jobs list`` shows."""

    jobs_dir: Path
    jobs: list[JobRecord]

    @classmethod
    def read(cls, jobs_dir: Path) -> JobListing:
        return cls(jobs_dir, list_jobs(jobs_dir))

    def to_json(self) -> dict[str, Any]:
        """What ``jobs list --json`` prints."""
        return {"jobs_dir": str(self.jobs_dir), "jobs": [j.to_json() for j in self.jobs]}


def resolve_job(ref: str | Path, jobs_dir: Path) -> Path:
    """The folder a JOB argument names: a path to a folder, else a job name under
    ``jobs_dir``; :class:`RecordError` when neither exists."""
    path = Path(ref)
    if path.is_dir():
        return path
    candidate = jobs_dir / str(ref)
    if "/" not in str(ref) and candidate.is_dir():
        return candidate
    raise RecordError(f"{ref}: no such job (neither a folder nor a job under {jobs_dir})")


# --- export ------------------------------------------------------------------------------

EXPORT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("job", "string"),
    ("agent", "string"),
    ("model", "string"),
    ("task_id", "string"),
    ("trial_name", "string"),
    ("attempt", "int64"),
    ("reward", "float64"),
    ("rewards", "string"),
    ("resolved", "bool"),
    ("error", "string"),
    ("input_tokens", "int64"),
    ("output_tokens", "int64"),
    ("cost_usd", "float64"),
    ("model_calls", "int64"),
    ("steps", "int64"),
    ("stop_reason", "string"),
    ("duration_s", "float64"),
    ("agent_duration_s", "float64"),
    ("verification_mode", "string"),
    ("started_at", "string"),
    ("finished_at", "string"),
)
"""One export row per trial: column name and type (``rewards`` is a JSON object as text;
times are ISO 8601 text as in result.json)."""

EXPORT_FORMATS = ("jsonl", "parquet")


def export_rows(jobs: Iterable[JobRecord]) -> list[dict[str, Any]]:
    """One row per trial of every job, in job then task then attempt order."""
    return [t.row(j.agent) for j in jobs for t in j.trials]


def require_pyarrow() -> None:
    """:class:`RecordError` saying how to install pyarrow when it is missing."""
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise RecordError(
            "parquet export needs pyarrow: pip install 'repogym[explorer]' (or pip install "
            "pyarrow), or use --format jsonl"
        ) from None


def jsonl_bytes(rows: Sequence[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def parquet_bytes(rows: Sequence[dict[str, Any]]) -> bytes:
    """The rows as a parquet file with the typed schema of :data:`EXPORT_COLUMNS`."""
    require_pyarrow()
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {
        "string": pa.string(),
        "int64": pa.int64(),
        "float64": pa.float64(),
        "bool": pa.bool_(),
    }
    schema = pa.schema([(name, types[kind]) for name, kind in EXPORT_COLUMNS])
    table = pa.Table.from_pylist(list(rows), schema=schema)
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def export(jobs: Sequence[JobRecord], out: Path, fmt: str) -> int:
    """Write every trial of ``jobs`` to ``out`` (atomically) as ``jsonl`` or ``parquet``;
    returns the number of rows."""
    if fmt not in EXPORT_FORMATS:
        raise RecordError(f"--format {fmt!r}: use jsonl or parquet")
    rows = export_rows(jobs)
    atomic_write(out, parquet_bytes(rows) if fmt == "parquet" else jsonl_bytes(rows))
    return len(rows)


@dataclass(frozen=True)
class JobExport:
    """What an export wrote (:func:`export_jobs`): where, in which format, how many rows, from
    which jobs, and the problems of the jobs that could not be read whole."""

    out: Path
    format: str
    rows: int
    jobs: list[JobRecord]

    @property
    def broken(self) -> list[JobRecord]:
        return [r for r in self.jobs if r.problems]

    def to_json(self) -> dict[str, Any]:
        """What ``jobs export --json`` prints."""
        return {
            "out": str(self.out),
            "format": self.format,
            "rows": self.rows,
            "jobs": [r.name for r in self.jobs],
            "problems": {r.name: r.problems for r in self.broken},
        }


def export_jobs(jobs: Sequence[JobRecord], out: Path, fmt: str) -> JobExport:
    """:func:`export`, and what it wrote."""
    return JobExport(out, fmt, export(jobs, out, fmt), list(jobs))
