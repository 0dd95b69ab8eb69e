"""Typed run records: what a run writes and what it tells a live view.

- :class:`TrialResult` is a trial's ``result.json`` (``repogym run``, ``repogym rollout``, a
  trial that came back from an executor). It is shaped like Harbor's ``TrialResult``
  (``task_name``, ``trial_name``, ``agent_info``, ``agent_result``, ``verifier_result``,
  ``exception_info``, per-phase :class:`TimingInfo`), plus repogym's own keys
  (``task_id``, ``task_path``, ``verification``, ``step_results``, ``sandbox``, ``executor``).
- :class:`JobResult` is a job's ``job.json``: its settings, :class:`JobSummary` and one
  :class:`JobTrial` line per trial.
- :class:`Verification` is how a trial's verifier ran (``result.json``'s ``verification``).
- :class:`TrialEvent` and its kinds are what a trial tells ``on_event(kind, data)`` as it runs.

Writing: every record is built with the keys it has and written by :meth:`TrialResult.write`
/ :meth:`JobResult.write`, in the order of the model's fields whatever the order they were
given in; a key never given is not written (``task_checksum`` is absent from a
rollout's result, ``null`` in a trial's whose task has no hash), so the files keep the keys
and their order the readers of earlier versions know.

Reading is tolerant as the readers always were: a missing key, or a value of the wrong type,
reads as ``None`` (entries of the wrong type in a list or a reward table are left out), so an
old file, or one a newer version wrote, still reads; unknown keys are kept. It is strict
about what makes a file unreadable: not JSON, or not a JSON object (:class:`RecordError`,
one line).
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from repogym.atomic import atomic_write

__all__ = [
    "AgentInfo",
    "AgentOutputEvent",
    "AgentResult",
    "ErrorEvent",
    "EventSink",
    "ExceptionInfo",
    "ExecutorInfo",
    "JobResult",
    "JobSummary",
    "JobTrial",
    "ModelEvent",
    "PhaseEvent",
    "RecordError",
    "RewardEvent",
    "SandboxInfo",
    "StepResult",
    "TimingInfo",
    "ToolEvent",
    "TrialEvent",
    "TrialResult",
    "Usage",
    "Verification",
    "VerifierOutputEvent",
    "VerifierResult",
    "now",
    "read_json",
]

RESULT_FILE = "result.json"
JOB_FILE = "job.json"


def now() -> str:
    """The time now as records hold it: ISO 8601, UTC."""
    return _dt.datetime.now(_dt.UTC).isoformat()


class RecordError(Exception):
    """A job folder or file that cannot be read; the message is one line."""


# --- tolerant field types ----------------------------------------------------------------


def _text(value: Any) -> Any:
    return value if isinstance(value, str) else None


def _integer(value: Any) -> Any:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> Any:
    """An int or a float as it is (bools are not numbers here), else None."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _flag(value: Any) -> Any:
    return value if isinstance(value, bool) else None


def _object(value: Any) -> Any:
    return value if isinstance(value, dict | BaseModel) else None


def _objects(value: Any) -> Any:
    """A list of JSON objects (other entries left out), else None."""
    if not isinstance(value, list):
        return None
    return [v for v in value if isinstance(v, dict | BaseModel)]


def _texts(value: Any) -> Any:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else None


def _numbers(value: Any) -> Any:
    """A name → number object (other entries left out), else None."""
    if not isinstance(value, dict):
        return None
    return {str(k): v for k, v in value.items() if _number(v) is not None}


Text = Annotated[str | None, BeforeValidator(_text)]
Int = Annotated[int | None, BeforeValidator(_integer)]
Number = Annotated[int | float | None, BeforeValidator(_number)]
Flag = Annotated[bool | None, BeforeValidator(_flag)]
Object = Annotated[dict[str, Any] | None, BeforeValidator(_object)]
Objects = Annotated[list[dict[str, Any]] | None, BeforeValidator(_objects)]
Texts = Annotated[list[str] | None, BeforeValidator(_texts)]
Numbers = Annotated[dict[str, int | float] | None, BeforeValidator(_numbers)]


class Record(BaseModel):
    """A part of a record: unknown keys kept, keys never given never written."""

    model_config = ConfigDict(extra="allow")

    def to_json(self) -> dict[str, Any]:
        """The JSON object as written: the keys given, in the order of the fields."""
        return self.model_dump(mode="python", exclude_unset=True)


def read_json(path: Path, label: str) -> Any:
    """Parsed JSON of ``path``; :class:`RecordError` with a one-line reason otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecordError(f"{label}: missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise RecordError(f"{label}: unreadable ({reason})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(
            f"{label}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None


def _document(data: Any, label: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise RecordError(f"{label}: not a JSON object")
    return data


def _text_of(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, default=str) + "\n"


# --- result.json -------------------------------------------------------------------------


class TimingInfo(Record):
    """When a phase started and finished (ISO 8601 text, UTC)."""

    started_at: Text = None
    finished_at: Text = None

    @classmethod
    def pending(cls) -> TimingInfo:
        """A phase not started yet (both keys written, as null, until it is)."""
        return cls(started_at=None, finished_at=None)

    def start(self) -> None:
        self.started_at = now()

    def stop(self) -> None:
        self.finished_at = now()


class ExceptionInfo(Record):
    """Why a trial has no reward (or what went wrong on the way)."""

    exception_type: Text = None
    exception_message: Text = None
    exception_traceback: Text = None
    occurred_at: Text = None

    @classmethod
    def occurred(cls, kind: str, message: str, traceback: str | None = None) -> ExceptionInfo:
        """An exception that occurred now."""
        return cls(
            exception_type=kind,
            exception_message=message,
            exception_traceback=traceback,
            occurred_at=now(),
        )

    def summary(self) -> str:
        """``Type: message`` (``Error`` when the type is missing; the type alone without a
        message)."""
        kind = self.exception_type or "Error"
        return f"{kind}: {self.exception_message}" if self.exception_message else kind


class AgentInfo(Record):
    name: Text = None
    version: Text = None


class Usage(Record):
    """Model usage an agent reported (the built-in agent does; others report none)."""

    input_tokens: Int = None
    output_tokens: Int = None
    cost_usd: Number = None
    model_calls: Int = None


class AgentResult(Record):
    """What the agent phase returned: the process's facts, then the agent's own metadata
    (the built-in agent's model, usage and stop reason; a command agent's command; …).
    In a multi-step trial, ``steps`` counts the task's steps."""

    exit_code: Int = None
    timed_out: Flag = None
    duration_s: Number = None
    output_tail: Text = None
    model: Text = None
    usage: Annotated[Usage | None, BeforeValidator(_object)] = None
    steps: Int = None
    tool_calls: Int = None
    stop_reason: Text = None
    trajectory: Text = None


class VerifierResult(Record):
    """The reward as the verifier wrote it (``rewards`` from reward.json, else reward.txt)."""

    rewards: Numbers = None
    reward: Number = None
    source: Text = None
    details: Object = None
    exit_code: Int = None
    error: Text = None
    warnings: Texts = None


class Verification(Record):
    """How the verifier ran: ``in_place``, ``clean_room`` (with what was carried over),
    ``separate`` (with the artifacts copied) or ``steps`` (with the roll-up strategy)."""

    mode: Text = None
    strategy: Text = None
    applied_count: Int = None
    deleted_count: Int = None
    dropped_count: Int = None
    applied: Texts = None
    deleted: Texts = None
    dropped: Objects = None
    seconds: Numbers = None
    artifacts: Texts = None
    missing: Texts = None


class StepResult(Record):
    """One step of a multi-step trial."""

    step_name: Text = None
    agent_result: Annotated[AgentResult | None, BeforeValidator(_object)] = None
    error: Text = None
    verification: Annotated[Verification | None, BeforeValidator(_object)] = None
    verifier_result: Annotated[VerifierResult | None, BeforeValidator(_object)] = None
    stopped: Text = None


class SandboxInfo(Record):
    """Where the trial ran: the backend, the base-image mapping, the task's services."""

    backend: Text = None
    url: Text = None
    base_mapping: Object = None
    services: Object = None
    network: Text = None
    events: Texts = None
    mcp_servers: Objects = None


class ExecutorInfo(Record):
    """The executor and node a trial ran on (``repogym run --executor``)."""

    name: Text = None
    node: Text = None


class TrialResult(Record):
    """A trial's ``result.json``."""

    id: Text = None
    trial_name: Text = None
    task_name: Text = None
    task_id: Text = None
    task_path: Text = None
    task_checksum: Text = None
    # Harbor's identity of the task that ran (``TrialLock.task.digest``): sha256 of its files
    task_digest: Text = None
    agent_info: Annotated[AgentInfo | None, BeforeValidator(_object)] = None
    agent_result: Annotated[AgentResult | None, BeforeValidator(_object)] = None
    verifier_result: Annotated[VerifierResult | None, BeforeValidator(_object)] = None
    verification: Annotated[Verification | None, BeforeValidator(_object)] = None
    step_results: Annotated[list[StepResult] | None, BeforeValidator(_objects)] = None
    exception_info: Annotated[ExceptionInfo | None, BeforeValidator(_object)] = None
    started_at: Text = None
    finished_at: Text = None
    environment_setup: Annotated[TimingInfo | None, BeforeValidator(_object)] = None
    agent_execution: Annotated[TimingInfo | None, BeforeValidator(_object)] = None
    verifier: Annotated[TimingInfo | None, BeforeValidator(_object)] = None
    sandbox: Annotated[SandboxInfo | None, BeforeValidator(_object)] = None
    executor: Annotated[ExecutorInfo | None, BeforeValidator(_object)] = None

    @classmethod
    def from_json(cls, data: Any, label: str = RESULT_FILE) -> TrialResult:
        """The record of a parsed ``result.json``; :class:`RecordError` when it is not a JSON
        object (every field is tolerant)."""
        return cls.model_validate(_document(data, label))

    @classmethod
    def read(cls, path: Path, label: str | None = None) -> TrialResult:
        """Read ``path``; :class:`RecordError` when it is missing, not JSON or not an object."""
        label = label or str(path)
        return cls.from_json(read_json(path, label), label)

    def to_text(self) -> str:
        """The file's text: indented JSON, one trailing newline."""
        return _text_of(self.to_json())

    def write(self, path: Path) -> Path:
        """Write the record to ``path`` atomically."""
        atomic_write(path, self.to_text())
        return path

    @property
    def details(self) -> dict[str, Any] | None:
        """The verifier's ``reward-details.json`` (None without one)."""
        return self.verifier_result.details if self.verifier_result else None


# --- job.json ----------------------------------------------------------------------------


class JobSummary(Record):
    """A job's totals as ``job.json`` records them (a rollout job's: the first four)."""

    trials: int = 0
    mean_reward: float | None = None
    rewarded: int = 0
    errors: int = 0
    resolved: int = 0
    """Trials resolved (``details.resolved``; without it, reward ≥ 1.0)."""
    pass_at_1: float | None = None
    pass_at_k: float | None = None
    """Unbiased pass@k over tasks, k = ``k`` (the job's attempts per task)."""
    k: int = 1
    tampered: int = 0
    """Trials the verifier found tampering in (a canary that passed, a forged record, ...):
    each paid 0, with the reasons in its ``verifier_result.details.tamper``."""


def _summary(value: Any) -> Any:
    """A summary that does not validate reads as None (no reader needs it)."""
    if isinstance(value, JobSummary):
        return value
    if not isinstance(value, dict):
        return None
    try:
        return JobSummary.model_validate(value)
    except ValidationError:
        return None


class JobTrial(Record):
    """One trial as ``job.json`` lists it; ``result`` is its result.json relative to the job."""

    trial_name: Text = None
    task_id: Text = None
    reward: Number = None
    error: Text = None
    result: Text = None

    @classmethod
    def listing(
        cls,
        record: TrialResult,
        reward: float | None,
        error: str | None,
        path: Path | None,
        job_dir: Path,
    ) -> JobTrial:
        """The line of a trial whose result.json is at ``path`` (None: not written)."""
        return cls(
            trial_name=record.trial_name,
            task_id=record.task_id,
            reward=reward,
            error=error,
            result=str(path.relative_to(job_dir)) if path else None,
        )


class JobResult(Record):
    """A job's ``job.json``: written once the job has finished."""

    agent: Text = None
    agent_options: Object = None
    sandbox: Text = None
    openenv: Text = None
    executor: Text = None
    verification: Text = None
    attempts: Int = None
    started_at: Text = None
    finished_at: Text = None
    summary: Annotated[JobSummary | None, BeforeValidator(_summary)] = None
    trials: Annotated[list[JobTrial] | None, BeforeValidator(_objects)] = None

    @classmethod
    def from_json(cls, data: Any, label: str = JOB_FILE) -> JobResult:
        return cls.model_validate(_document(data, label))

    @classmethod
    def read(cls, path: Path, label: str = JOB_FILE) -> JobResult:
        return cls.from_json(read_json(path, label), label)

    def to_text(self) -> str:
        return _text_of(self.to_json())

    def write(self, path: Path) -> Path:
        atomic_write(path, self.to_text())
        return path


# --- events ------------------------------------------------------------------------------

EventSink = Callable[[str, dict[str, Any]], None]
"""``on_event(kind, data)``: told of each event of a trial as it happens."""


class TrialEvent(BaseModel):
    """One event of a running trial; ``kind`` names it, the fields are its data."""

    model_config = ConfigDict(extra="forbid")

    kind: ClassVar[str]

    def data(self) -> dict[str, Any]:
        return self.model_dump(mode="python", exclude_unset=True)

    def send(self, sink: EventSink | None) -> None:
        """Tell ``sink`` (if any)."""
        if sink is not None:
            sink(self.kind, self.data())


class PhaseEvent(TrialEvent):
    """A phase (``environment_setup``, ``agent_execution``, ``verifier``) starts or ends."""

    kind: ClassVar[str] = "phase"
    phase: str
    state: str
    agent: str | None = None


class AgentOutputEvent(TrialEvent):
    kind: ClassVar[str] = "agent_output"
    exit_code: int | None
    timed_out: bool
    text: str


class VerifierOutputEvent(TrialEvent):
    kind: ClassVar[str] = "verifier_output"
    exit_code: int | None
    text: str


class ErrorEvent(TrialEvent):
    """A trial failed (``error_type`` is sent as the data's ``kind``)."""

    kind: ClassVar[str] = "error"
    error_type: str
    text: str

    def data(self) -> dict[str, Any]:
        return {"kind": self.error_type, "text": self.text}


class RewardEvent(TrialEvent):
    """The trial's reward: its :class:`VerifierResult` as result.json holds it."""

    kind: ClassVar[str] = "reward"
    result: VerifierResult

    def data(self) -> dict[str, Any]:
        return self.result.to_json()


class ModelEvent(TrialEvent):
    """The built-in agent's model replied (its text and the tools it called)."""

    kind: ClassVar[str] = "model"
    text: str
    tool_calls: list[str]


class ToolEvent(TrialEvent):
    """The built-in agent's tool call and what it returned."""

    kind: ClassVar[str] = "tool"
    name: str
    arguments: dict[str, Any] | None
    is_error: bool
    output: str
