"""What every pipeline shares: candidates, outcomes, the yield table, and the contract
(:class:`Pipeline`, :class:`Harness`, :class:`HarnessContext`)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel

if TYPE_CHECKING:
    from repogym.pipelines._harness.errors import ErrorLog
    from repogym.pipelines._instructions.text import InstructionRewriter
    from repogym.sandbox import Sandbox
    from repogym.sources import Source


@dataclass
class Candidate:
    """A change that may become a task: the repository at ``base``, the fix at ``head``."""

    key: str
    """Stable identity for resume (e.g. the head sha or ``pr-12``)."""
    task_id: str
    kind: str
    base: str
    head: str
    title: str
    body: str
    reference: str
    patch: str = ""
    source_patch: str = ""
    test_patch: str = ""
    number: int | None = None
    created_at: str = ""
    """When the change was made (ISO 8601: the commit's author date, the pull request's date)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """What a pipeline needs beyond the change itself (e.g. a synthesized edit); not stored."""


@dataclass
class Outcome:
    candidate: Candidate
    kept: bool
    reason: str | None = None
    detail: str | None = None
    task_dir: Path | None = None
    seconds: float = 0.0
    test_seconds: float = 0.0
    f2p: int = 0
    p2p: int = 0


@dataclass
class YieldStats:
    """Counts behind the live view and the final yield table (thread-safe)."""

    seen: int = 0
    kept: int = 0
    running: int = 0
    drops: Counter[str] = field(default_factory=Counter)
    test_seconds: float = 0.0
    started: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, outcome: Outcome) -> None:
        with self.lock:
            self.test_seconds += outcome.test_seconds
            if outcome.kept:
                self.kept += 1
            else:
                self.drops[outcome.reason or "dropped"] += 1

    def drop(self, reason: str) -> None:
        with self.lock:
            self.seen += 1
            self.drops[reason] += 1

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def to_json(self) -> dict[str, Any]:
        return {
            "candidates": self.seen,
            "kept": self.kept,
            "dropped": dict(self.drops.most_common()),
            "seconds": round(self.elapsed, 2),
            "test_seconds": round(self.test_seconds, 2),
        }


PROGRESS_STEPS: dict[str, str] = {
    "started": "preparing {task} (reading the repository at its base)",
    "build_started": "building the environment of {task}",
    "build_finished": "environment of {task} built",
    "tests_after": "running the tests of {task} (after the fix)",
    "tests_before": "running the tests of {task} (before the fix)",
    "verify": "verifying {task} (oracle and no-op runs, mutants)",
    "finished": "{task} finished",
}
"""The steps of one candidate's evaluation a harness reports, in the order the runtime harness
takes them (a candidate dropped early skips the rest; other harnesses report a subset), and
what each says."""


@dataclass(frozen=True)
class Progress:
    """One step of one candidate's evaluation, for a live view (``generate(on_progress=…)``).

    Sent from the worker thread evaluating the candidate, as the step starts (``finished``:
    as the evaluation ends, whatever its outcome).
    """

    task_id: str
    step: str
    """A key of :data:`PROGRESS_STEPS`."""

    @property
    def text(self) -> str:
        """What is happening, e.g. ``running the tests of <task> (before the fix)``."""
        return PROGRESS_STEPS.get(self.step, "{task}: " + self.step).format(task=self.task_id)


# ------------------------------------------------------------------------------ the contract


class GateResult(Protocol):
    """What the verify gate concluded about a staged task (the gate records a verified verdict
    in the task itself)."""

    @property
    def status(self) -> str:
        """``verified``, ``flaky``, ``broken`` or ``gameable``."""
        ...

    @property
    def verified(self) -> bool: ...

    @property
    def reasons(self) -> list[str]: ...

    @property
    def winners(self) -> list[str]:
        """``<description> earned <reward>`` of each generic wrong solution that earned the
        full reward (the task is gameable)."""
        ...

    @property
    def kill_rate(self) -> float | None:
        """Share of the mutants the tests killed (None: none run)."""
        ...

    @property
    def survivors(self) -> list[str]:
        """Descriptions of the mutants the tests did not kill."""
        ...

    @property
    def seconds(self) -> float:
        """Time the gate's trials spent running code in the task."""
        ...


class Gate(Protocol):
    """The verify gate (oracle, nop, reruns; mutants and red-team candidates when asked).
    Pipelines receive one through :class:`HarnessContext`; they never import its package."""

    def __call__(
        self, task_dir: Path, *, reruns: int, mutants: int, adversarial: bool
    ) -> GateResult: ...


GateFactory = Callable[["Sandbox"], Gate]
"""Builds the gate for a sandbox backend (passed to ``generate``; workers build their own)."""


@dataclass
class HarnessContext:
    """Everything a harness needs, given at construction (``generate`` fills it)."""

    source: Source
    backend: Sandbox
    options: Any
    """The pipeline's validated options model (:attr:`Pipeline.options_model`)."""
    pipeline: str
    pipeline_version: str
    repo_label: str
    """``owner/name`` written into the tasks' provenance."""
    out_dir: Path
    gate: Gate
    """The verify gate every staged task passes before it is published (built by the caller
    from :attr:`backend`: :class:`repogym.run.gate.TaskGate` for ``repogym generate``)."""
    source_access: str = "local"
    """Provenance ``source_access``: ``local``, ``public`` or ``private``."""
    rewriter: InstructionRewriter | None = None
    """Optional LLM rewrite of instructions (``generate --llm``)."""
    error_log: ErrorLog | None = None
    """Where tracebacks of candidates that crashed go."""
    on_progress: Callable[[Progress], None] | None = None
    """Told each step of each candidate's evaluation (:class:`Progress`), from the worker
    thread; an exception it raises costs that candidate (``internal error``)."""
    stop: StopSignal = field(default_factory=lambda: StopSignal())
    """Stopped when the run is interrupted: a harness publishes no task after that (the
    dataset's index files are written next, and must list every task under ``tasks/``)."""


class StopSignal:
    """Whether a run still publishes tasks. Publishing happens inside :meth:`unless_stopped`
    and :meth:`stop` takes the same lock, so once :meth:`stop` returns no task is being
    published or will be."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopped = False

    def stop(self) -> None:
        with self._lock:
            self._stopped = True

    @contextlib.contextmanager
    def unless_stopped(self) -> Iterator[bool]:
        """Yields True (publish now, under the lock) unless the run was stopped."""
        with self._lock:
            yield not self._stopped


@runtime_checkable
class Harness(Protocol):
    """Turns one candidate into a published task, or a drop reason (thread-safe)."""

    rewrites: dict[str, dict[str, Any]]
    """task id → what the LLM rewrite of its instruction came to (for the report)."""

    def evaluate(self, cand: Candidate) -> Outcome:
        """Evaluate ``cand``; an unexpected exception may escape (``generate`` records it as
        an ``internal error`` drop and goes on)."""
        ...


@runtime_checkable
class Pipeline(Protocol):
    """A way of mining a repository into tasks. Register one with
    :func:`repogym.pipelines.registry.register` or the ``repogym.pipelines`` entry point group.

    A pipeline is small: it walks the source for :class:`Candidate` s (cheap checks only) and
    names the harness that turns each into a task; ``generate`` does the rest (parallelism,
    resume, de-duplication, the dataset index and the report)."""

    name: str
    """What ``generate -p`` calls it; also the ``[metadata.repo2env]`` pipeline name."""
    version: str
    options_model: type[BaseModel]
    """Its options (``--opt key=value``), a pydantic model with ``extra="forbid"``."""
    sources: frozenset[str]
    """The kinds of source it reads (``local``, ``github``, ``gitlab``); ``generate`` refuses
    others before any work."""
    sources_note: str
    """Why other sources are refused (shown with the refusal), or ``""``."""
    llm_rewrite: bool
    """Whether ``generate --llm`` may rewrite its instructions."""
    dedupe_changes: bool
    """Whether candidates whose gold patch and tests equal a task's already in the dataset are
    dropped as ``duplicate change`` (see :func:`repogym.pipelines._harness.emit.change_hash`)."""

    def candidates(
        self, source: Source, options: Any, slug: str, rev: str
    ) -> Iterator[Candidate | tuple[str, str]]:
        """Candidates newest first; cheap drops come back as ``(key, reason)``."""
        ...

    def harness(self, ctx: HarnessContext) -> Harness:
        """The harness that evaluates this pipeline's candidates."""
        ...
