"""One trial: build the task's environment, run an agent, run the verifier, forward the reward.

The result is a :class:`~repogym.run.models.TrialResult` (``result.json``), shaped like Harbor's
(``task_name``, ``trial_name``, ``agent_info``, per-phase timings, ``verifier_result.rewards``,
``exception_info``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
import threading
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym import __version__
from repogym.run.agents import Agent, AgentContext
from repogym.run.cleanroom import clean_room_session
from repogym.run.health import task_healthcheck, wait_healthy
from repogym.run.models import (
    RESULT_FILE,
    AgentInfo,
    AgentOutputEvent,
    AgentResult,
    ErrorEvent,
    EventSink,
    ExceptionInfo,
    PhaseEvent,
    RewardEvent,
    SandboxInfo,
    StepResult,
    TimingInfo,
    TrialResult,
    Verification,
    VerifierOutputEvent,
    VerifierResult,
    now,
)
from repogym.run.plan import plan_task
from repogym.run.preflight import UnsupportedTask, require_runnable
from repogym.run.rewards import RewardReading
from repogym.run.separate import (
    Build,
    separate_session,
    verifier_context,
    verifier_environment_spec,
)
from repogym.run.services import Services, start_services
from repogym.run.verifier import (
    VerifierPhase,
    copy_image_tests,
    image_tests,
    phase_network,
    run_verifier,
)
from repogym.sandbox import BuiltEnvironment, EnvironmentSpec, Sandbox, SandboxError, Session
from repogym.taskdir import Task, atomic_write
from repogym.taskdir.config import Artifact, EnvironmentConfig, verifier_mode
from repogym.taskdir.harbor_digest import harbor_digest
from repogym.taskdir.provenance import read_verification
from repogym.taskdir.verification import Matcher

DEFAULT_WORKDIR = "/"


def environment_spec(task: Task, backend: Sandbox | str) -> EnvironmentSpec:
    """The sandbox request for a task's main session on ``backend``
    (:func:`repogym.run.plan.plan_task`: its reproducibility mode honoured); a task the backend
    cannot run that way raises :class:`~repogym.run.preflight.UnsupportedTask`."""
    plan = plan_task(task, backend if isinstance(backend, str) else backend.name)
    if plan.refusal:
        raise UnsupportedTask(plan.refusal)
    return plan.environment


PHASES = ("environment_setup", "agent_execution", "verifier")


@dataclass
class TrialOutcome:
    """A finished trial: its record (``result.json``) plus the parts callers use most."""

    record: TrialResult
    reading: RewardReading | None
    path: Path | None = None
    verifier_stdout: str = ""
    timings: dict[str, TimingInfo] = field(default_factory=dict)

    @property
    def result(self) -> dict[str, Any]:
        """The record as ``result.json`` holds it (a JSON object)."""
        return self.record.to_json()

    @property
    def reward(self) -> float | None:
        return self.reading.reward if self.reading else None

    @property
    def error(self) -> str | None:
        exc = self.record.exception_info
        return f"{exc.exception_type}: {exc.exception_message}" if exc else None


@dataclass
class _Progress:
    """What a trial has so far: filled phase by phase, made into its record at the end."""

    trial_name: str
    started_at: str = field(default_factory=now)
    timings: dict[str, TimingInfo] = field(
        default_factory=lambda: {k: TimingInfo.pending() for k in PHASES}
    )
    exception: ExceptionInfo | None = None
    reading: RewardReading | None = None
    agent_result: AgentResult = field(default_factory=AgentResult)
    verifier_stdout: str = ""
    verifier_exit: int | None = None
    built: BuiltEnvironment | None = None
    session: Session | None = None
    services: Services | None = None
    verification: Verification | None = None
    step_results: list[StepResult] | None = None

    def reward_error(self) -> None:
        """Record the reading's error (after an earlier one: appended to it)."""
        error = self.reading.error if self.reading else None
        if not error:
            return
        if self.exception is None:
            self.exception = ExceptionInfo.occurred("RewardFileError", error)
        else:  # e.g. the agent timed out and then the verifier wrote no reward
            self.exception.exception_message = f"{self.exception.exception_message}; then: {error}"

    def close(self) -> None:
        """End the phases left open; close the session and the services."""
        for t in self.timings.values():
            if t.started_at and not t.finished_at:
                t.stop()
        if self.session is not None:
            try:
                self.session.close()
            except Exception as exc:  # noqa: BLE001
                if self.exception is None:
                    self.exception = ExceptionInfo.occurred("SandboxCloseError", str(exc))
        if self.services is not None:
            self.services.close()

    def record(self, task: Task, agent: Agent, backend: str) -> TrialResult:
        """The trial's ``result.json``."""
        reading, built = self.reading, self.built
        prov = task.provenance
        record = TrialResult(
            id=str(uuid.uuid4()),
            trial_name=self.trial_name,
            task_name=task.name,
            task_id=task.id,
            task_path=str(task.path),
            task_checksum=prov.content_hash if prov is not None else None,
            task_digest=harbor_digest(task.path),
            agent_info=AgentInfo(name=agent.name, version=__version__),
            agent_result=self.agent_result,
            verifier_result=VerifierResult(
                rewards=reading.rewards if reading else None,
                reward=reading.reward if reading else None,
                source=reading.source if reading else None,
                details=reading.details if reading else None,
                exit_code=self.verifier_exit,
                error=reading.error if reading else None,
                warnings=reading.warnings if reading else [],
            ),
            verification=self.verification,
            exception_info=self.exception,
            started_at=self.started_at,
            finished_at=now(),
            environment_setup=self.timings["environment_setup"],
            agent_execution=self.timings["agent_execution"],
            verifier=self.timings["verifier"],
            sandbox=SandboxInfo(
                backend=backend,
                base_mapping=built.base_mapping if built else {},
                **(self.services.to_json() if self.services is not None else {}),
            ),
        )
        if self.step_results is not None:  # only a multi-step trial has the key
            record.step_results = self.step_results
        return record


INTERRUPTED = "Interrupted"
"""``exception_type`` of a trial the run was stopped in (SIGINT/SIGTERM)."""
INTERRUPTED_TEXT = "the run was interrupted before this trial finished (rerun it with --resume)"


class TrialRunner:
    """Runs trials on one sandbox backend, building each environment once."""

    def __init__(self, backend: Sandbox, *, verification: str | None = None) -> None:
        self.backend = backend
        self.verification = verification
        """Override every task's verification mode (``in_place`` shows what a runner that
        verifies in the agent's container, like Harbor, would pay)."""
        self._built: dict[str, BuiltEnvironment] = {}
        self.stopping = threading.Event()
        """Set by :meth:`interrupt`: trials not yet started end at once, running ones end as
        soon as their sandbox is gone; all are recorded ``Interrupted`` (``--resume`` reruns
        them)."""
        self._live: dict[int, _Progress] = {}
        self._live_lock = threading.Lock()

    def interrupt(self) -> None:
        """Stop every trial of this runner within seconds: close the sandboxes of the running
        ones (their agents and verifiers die with them) and start no other."""
        self.stopping.set()
        with self._live_lock:
            live = list(self._live.values())
        for trial in live:
            with contextlib.suppress(Exception):
                trial.close()

    def stop_trial(self, trial_name: str) -> bool:
        """End the running trial named ``trial_name`` as :meth:`interrupt` would, leaving the
        others running; False when no such trial runs."""
        with self._live_lock:
            found = [t for t in self._live.values() if t.trial_name == trial_name]
        for trial in found:
            with contextlib.suppress(Exception):
                trial.close()
        return bool(found)

    def build(self, task: Task, log: Path | None = None) -> BuiltEnvironment:
        """The task's agent environment, built once; a task the runner cannot run is refused
        here (:class:`~repogym.run.preflight.UnsupportedTask`), before any build work."""
        key = str(task.path.resolve())
        built = self._built.get(key)
        if built is None:
            require_runnable(task, backend=self.backend)
            built = self.backend.build(environment_spec(task, self.backend), log=log)
            self._built[key] = built
        return built

    def build_spec(self, spec: EnvironmentSpec) -> BuiltEnvironment:
        """Any other environment (a separate verifier's), built once per context folder."""
        key = f"spec:{spec.context_dir}:{spec.docker_image}"
        built = self._built.get(key)
        if built is None:
            built = self.backend.build(spec)
            self._built[key] = built
        return built

    def run(
        self,
        task: Task,
        agent: Agent,
        *,
        out_dir: Path | None = None,
        trial_name: str | None = None,
        verifier_timeout: float | None = None,
        agent_timeout_s: float | None = None,
        on_event: EventSink | None = None,
    ) -> TrialOutcome:
        """One trial of ``agent`` on ``task``. ``agent_timeout_s`` caps the task's agent
        timeout; ``on_event(kind, data)`` is told of each phase as it starts and ends
        (``phase``), of the agent's own steps (through :class:`AgentContext`), the agent's
        output, the verifier's output and the reward (``agent_output``, ``verifier_output``,
        ``reward``) and of a failure (``error``), for live views (:mod:`repogym.run.models`)."""
        trial = _Progress(trial_name or f"{task.id}__{uuid.uuid4().hex[:8]}")
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
        with self._live_lock:
            self._live[id(trial)] = trial
        try:
            self._stop_if_interrupted()
            spec, workdir = self._set_up(trial, task, out_dir, on_event)
            if task.is_multi_step:
                self._run_steps(trial, task, agent, workdir, verifier_timeout)
            else:
                self._run_agent(trial, task, agent, workdir, out_dir, agent_timeout_s, on_event)
                self._stop_if_interrupted()
                self._verify(trial, task, spec, workdir, verifier_timeout, on_event)
            self._stop_if_interrupted()
        except Exception as exc:  # noqa: BLE001 - every failure becomes the trial's exception_info
            if self.stopping.is_set():  # whatever broke, it broke because the run was stopped
                trial.exception = ExceptionInfo.occurred(INTERRUPTED, INTERRUPTED_TEXT)
            else:
                trial.exception = ExceptionInfo.occurred(
                    type(exc).__name__, str(exc), traceback.format_exc()
                )
        finally:
            with self._live_lock:
                self._live.pop(id(trial), None)
            trial.close()
        record = trial.record(task, agent, self.backend.name)
        if record.exception_info is not None:
            exc_info = record.exception_info
            ErrorEvent(
                error_type=exc_info.exception_type or "", text=exc_info.exception_message or ""
            ).send(on_event)
        assert record.verifier_result is not None
        RewardEvent(result=record.verifier_result).send(on_event)
        path = None
        if out_dir is not None:
            path = record.write(out_dir / RESULT_FILE)
            atomic_write(out_dir / "verifier-stdout.txt", trial.verifier_stdout)
        return TrialOutcome(record, trial.reading, path, trial.verifier_stdout, trial.timings)

    def _stop_if_interrupted(self) -> None:
        if self.stopping.is_set():
            raise InterruptedError(INTERRUPTED_TEXT)

    def _set_up(
        self, trial: _Progress, task: Task, out_dir: Path | None, on_event: EventSink | None
    ) -> tuple[EnvironmentSpec, str]:
        """Build the environment, start the session and the task's services; the working
        directory."""
        spec = environment_spec(task, self.backend)
        trial.timings["environment_setup"].start()
        PhaseEvent(phase="environment_setup", state="start").send(on_event)
        built = trial.built = self.build(task, log=out_dir / "build.log" if out_dir else None)
        # The main session, with the task's compose sidecars (if any) on a shared network.
        trial.session, trial.services = start_services(
            self.backend, task, built, spec, out_dir=out_dir
        )
        if task.config.environment.healthcheck is not None:  # ready before the agent starts
            check = task_healthcheck(
                task.config.environment.healthcheck, "[environment.healthcheck]"
            )
            wait_healthy(trial.session, check, label="the environment", user=built.user)
        trial.timings["environment_setup"].stop()
        PhaseEvent(phase="environment_setup", state="end").send(on_event)
        return spec, spec.workdir or built.workdir or DEFAULT_WORKDIR

    def _run_steps(
        self,
        trial: _Progress,
        task: Task,
        agent: Agent,
        workdir: str,
        verifier_timeout: float | None,
    ) -> None:
        """A multi-step task: every step's agent and verifier in the one session."""
        from repogym.run.steps import run_steps

        assert trial.session is not None
        for phase in ("agent_execution", "verifier"):
            trial.timings[phase].start()
        steps = run_steps(self, task, agent, trial.session, workdir, verifier_timeout)
        for phase in ("agent_execution", "verifier"):
            trial.timings[phase].stop()
        trial.reading = steps.reading
        trial.step_results = steps.results
        trial.verifier_stdout, trial.verifier_exit = steps.stdout, steps.exit_code
        trial.agent_result = AgentResult(steps=len(steps.results))
        trial.verification = Verification(mode="steps", strategy=steps.strategy)
        trial.reward_error()

    def _run_agent(
        self,
        trial: _Progress,
        task: Task,
        agent: Agent,
        workdir: str,
        out_dir: Path | None,
        agent_timeout_s: float | None,
        on_event: EventSink | None,
    ) -> None:
        """The agent phase; its facts go to the trial's ``agent_result``."""
        assert trial.session is not None and trial.services is not None
        timeout = task.config.agent.timeout_sec
        if agent_timeout_s is not None:
            timeout = min(timeout, agent_timeout_s)
        trial.timings["agent_execution"].start()
        PhaseEvent(phase="agent_execution", state="start", agent=agent.name).send(on_event)
        ctx = AgentContext(
            workdir=workdir,
            timeout_s=timeout,
            user=task.config.agent.user,
            network=phase_network(task, "agent"),
            instruction=task.instruction(),
            mcp_servers=trial.services.mcp_servers,
            logs_dir=out_dir / "agent" if out_dir is not None else None,
            trial_name=trial.trial_name,
            on_event=on_event,
        )
        outcome = agent.run(trial.session, task, ctx)
        trial.timings["agent_execution"].stop()
        AgentOutputEvent(
            exit_code=outcome.exit_code, timed_out=outcome.timed_out, text=outcome.output_tail
        ).send(on_event)
        PhaseEvent(phase="agent_execution", state="end").send(on_event)
        trial.agent_result = AgentResult.model_validate(
            {
                "exit_code": outcome.exit_code,
                "timed_out": outcome.timed_out,
                "duration_s": round(outcome.duration_s, 3),
                "output_tail": outcome.output_tail,
                **outcome.metadata,
            }
        )
        if outcome.timed_out:
            trial.exception = ExceptionInfo.occurred(
                "AgentTimeoutError", f"agent did not finish within {timeout:g} s"
            )
        elif outcome.error:
            trial.exception = ExceptionInfo.occurred("AgentError", outcome.error)

    def _verify(
        self,
        trial: _Progress,
        task: Task,
        spec: EnvironmentSpec,
        workdir: str,
        verifier_timeout: float | None,
        on_event: EventSink | None,
    ) -> None:
        """The verifier phase after the agent's: the reward and how it was read."""
        session, services, built = trial.session, trial.services, trial.built
        assert session is not None and services is not None and built is not None
        trial.timings["verifier"].start()
        PhaseEvent(phase="verifier", state="start").send(on_event)
        # Nothing the agent left running may touch the verifier's files.
        session.kill_all()
        checked = verify_after_agent(
            services.sandbox,
            built,
            spec,
            session,
            task,
            workdir,
            mode=self.verification,
            verifier_timeout=verifier_timeout,
            build=self.build_spec,
        )
        trial.session = checked.session
        trial.verification = checked.verification
        trial.verifier_stdout, trial.verifier_exit = checked.stdout, checked.exit_code
        trial.reading = checked.reading
        trial.timings["verifier"].stop()
        VerifierOutputEvent(exit_code=checked.exit_code, text=checked.stdout).send(on_event)
        PhaseEvent(phase="verifier", state="end").send(on_event)
        trial.reward_error()


@dataclass
class Checked:
    """The verifier's outcome after an agent phase, and the session it ran in."""

    session: Session
    """The session to close: the agent's own (``in_place``) or the clean room."""
    stdout: str
    exit_code: int | None
    reading: RewardReading
    verification: Verification


def verifier_spec(task: Task, spec: EnvironmentSpec) -> EnvironmentSpec:
    """The environment request for a clean room: no network unless the verifier phase has it."""
    return dataclasses.replace(
        spec, network_mode="public" if phase_network(task, "verifier") else "no-network"
    )


def verify_after_agent(
    backend: Sandbox,
    built: BuiltEnvironment,
    spec: EnvironmentSpec,
    session: Session,
    task: Task,
    workdir: str,
    *,
    mode: str | None = None,
    verifier_timeout: float | None = None,
    build: Build | None = None,
) -> Checked:
    """Run the task's verifier the way its ``[metadata.repo2env.verification]`` asks (or as
    ``mode`` overrides).

    A separate verifier (``[verifier] environment_mode = "separate"``) runs in its own
    environment, built with ``build``, holding only the task's artifacts; the agent's session
    is closed. ``in_place``: in the agent's session. ``clean_room``: the agent's change to
    ``workdir`` (minus protected paths) is carried onto a fresh session of ``built`` and the
    verifier runs there; the agent's session is closed. The caller has killed the agent's processes.
    """
    if verifier_mode(task.config.verifier) == "separate":
        return verify_separately(
            backend,
            build or backend.build,
            session,
            task,
            task.config.verifier.environment,
            verifier_context(task),
            task.config.artifacts,
            VerifierPhase.for_task(task),
            verifier_timeout=verifier_timeout,
        )
    try:
        verification = read_verification(task.provenance)
    except ValueError as exc:
        raise SandboxError(f"{task.id}: {exc}") from None
    phase = VerifierPhase.for_task(task)
    with tempfile.TemporaryDirectory(prefix="repogym-image-tests-") as tmp:
        if (mode or verification.mode) != "clean_room":
            phase.image_tests = image_tests(
                backend, built, verifier_spec(task, spec), session, Path(tmp) / "tests"
            )
            stdout, code, reading = run_verifier(
                session, task, workdir, timeout_s=verifier_timeout, phase=phase
            )
            return Checked(session, stdout, code, reading, Verification(mode="in_place"))
        fresh, carry = clean_room_session(
            backend,
            built,
            verifier_spec(task, spec),
            session,
            workdir,
            Matcher(verification.protected),
        )
        session.close()
        try:
            # The clean room is as built below /tests (the change carried is the working tree's).
            phase.image_tests = copy_image_tests(fresh, Path(tmp) / "tests")
            stdout, code, reading = run_verifier(
                fresh, task, workdir, timeout_s=verifier_timeout, phase=phase
            )
        except BaseException:
            fresh.close()
            raise
    return Checked(fresh, stdout, code, reading, Verification.model_validate(carry.to_json()))


def verify_separately(
    backend: Sandbox,
    build: Build,
    agent: Session,
    task: Task,
    env: EnvironmentConfig | None,
    context: Path,
    artifacts: list[Artifact],
    phase: VerifierPhase,
    *,
    verifier_timeout: float | None = None,
    close_agent: bool = True,
) -> Checked:
    """Run the verifier in a separate environment built from ``context`` that holds only the
    agent's artifacts. Its own image has ``/tests``: nothing is mounted there."""
    vspec = verifier_environment_spec(task, env, context)
    fresh, report, workdir = separate_session(backend, build, vspec, agent, artifacts)
    if close_agent:
        agent.close()
    phase = dataclasses.replace(phase, tests=None, network=vspec.network_mode == "public")
    try:
        stdout, code, reading = run_verifier(
            fresh, task, workdir, timeout_s=verifier_timeout, phase=phase
        )
    except BaseException:
        fresh.close()
        raise
    return Checked(fresh, stdout, code, reading, Verification.model_validate(report.to_json()))
