"""One trial: build the task's environment, run an agent, run the verifier, forward the reward.

The result is a JSON document shaped like Harbor's TrialResult (``task_name``, ``trial_name``,
``agent_info``, per-phase timings, ``verifier_result.rewards``, ``exception_info``).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym import __version__
from repogym.harbor import Task, atomic_write
from repogym.harbor.config import Artifact, EnvironmentConfig, verifier_mode
from repogym.harbor.provenance import read_verification
from repogym.harbor.verification import Matcher
from repogym.run.agents import Agent, AgentContext
from repogym.run.cleanroom import clean_room_session
from repogym.run.health import task_healthcheck, wait_healthy
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
    phase_network,
    run_verifier,
)
from repogym.sandbox import BuiltEnvironment, EnvironmentSpec, Sandbox, SandboxError, Session

DEFAULT_WORKDIR = "/"


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat()


def environment_spec(task: Task, backend: Sandbox | str) -> EnvironmentSpec:
    """The sandbox request for a task's main session on ``backend``
    (:func:`repogym.run.plan.plan_task`: its reproducibility mode honoured); a task the backend
    cannot run that way raises :class:`~repogym.run.preflight.UnsupportedTask`."""
    plan = plan_task(task, backend if isinstance(backend, str) else backend.name)
    if plan.refusal:
        raise UnsupportedTask(plan.refusal)
    return plan.environment


_phase_network = phase_network


@dataclass
class Timing:
    started_at: str | None = None
    finished_at: str | None = None

    def start(self) -> None:
        self.started_at = _now()

    def stop(self) -> None:
        self.finished_at = _now()


@dataclass
class TrialOutcome:
    """A finished trial: the result document plus the parts callers use most."""

    result: dict[str, Any]
    reading: RewardReading | None
    path: Path | None = None
    verifier_stdout: str = ""
    timings: dict[str, Timing] = field(default_factory=dict)

    @property
    def reward(self) -> float | None:
        return self.reading.reward if self.reading else None

    @property
    def error(self) -> str | None:
        exc = self.result.get("exception_info")
        return f"{exc['exception_type']}: {exc['exception_message']}" if exc else None


class TrialRunner:
    """Runs trials on one sandbox backend, building each environment once."""

    def __init__(self, backend: Sandbox, *, verification: str | None = None) -> None:
        self.backend = backend
        self.verification = verification
        """Override every task's verification mode (``in_place`` shows what a runner that
        verifies in the agent's container, like Harbor, would pay)."""
        self._built: dict[str, BuiltEnvironment] = {}

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
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> TrialOutcome:
        """One trial of ``agent`` on ``task``. ``agent_timeout_s`` caps the task's agent
        timeout; ``on_event(kind, data)`` is told of each phase as it starts and ends
        (``phase``), of the agent's own steps (through :class:`AgentContext`), the agent's
        output, the verifier's output and the reward (``agent_output``, ``verifier_output``,
        ``reward``) and of a failure (``error``), for live views."""
        emit = on_event or (lambda kind, data: None)
        agent_timeout = task.config.agent.timeout_sec
        if agent_timeout_s is not None:
            agent_timeout = min(agent_timeout, agent_timeout_s)
        trial_name = trial_name or f"{task.id}__{uuid.uuid4().hex[:8]}"
        timings = {k: Timing() for k in ("environment_setup", "agent_execution", "verifier")}
        started = _now()
        exception: dict[str, Any] | None = None
        reading: RewardReading | None = None
        agent_result: dict[str, Any] = {}
        verifier_stdout = ""
        verifier_exit: int | None = None
        built: BuiltEnvironment | None = None
        session = None
        services: Services | None = None
        verification: dict[str, Any] | None = None
        step_results: list[dict[str, Any]] | None = None
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
        try:
            spec = environment_spec(task, self.backend)
            timings["environment_setup"].start()
            emit("phase", {"phase": "environment_setup", "state": "start"})
            built = self.build(task, log=out_dir / "build.log" if out_dir else None)
            # The main session, with the task's compose sidecars (if any) on a shared network.
            session, services = start_services(self.backend, task, built, spec, out_dir=out_dir)
            if task.config.environment.healthcheck is not None:  # ready before the agent starts
                check = task_healthcheck(
                    task.config.environment.healthcheck, "[environment.healthcheck]"
                )
                wait_healthy(session, check, label="the environment", user=built.user)
            timings["environment_setup"].stop()
            emit("phase", {"phase": "environment_setup", "state": "end"})
            workdir = spec.workdir or built.workdir or DEFAULT_WORKDIR
            if task.is_multi_step:
                from repogym.run.steps import run_steps

                timings["agent_execution"].start()
                timings["verifier"].start()
                steps = run_steps(self, task, agent, session, workdir, verifier_timeout)
                timings["agent_execution"].stop()
                timings["verifier"].stop()
                reading, step_results = steps.reading, steps.results
                verifier_stdout, verifier_exit = steps.stdout, steps.exit_code
                agent_result = {"steps": len(step_results)}
                verification = {"mode": "steps", "strategy": steps.strategy}
                if reading.error:
                    exception = _exception("RewardFileError", reading.error)
                raise _Done

            timings["agent_execution"].start()
            emit("phase", {"phase": "agent_execution", "state": "start", "agent": agent.name})
            ctx = AgentContext(
                workdir=workdir,
                timeout_s=agent_timeout,
                user=task.config.agent.user,
                network=_phase_network(task, "agent"),
                instruction=task.instruction(),
                mcp_servers=services.mcp_servers,
                logs_dir=out_dir / "agent" if out_dir is not None else None,
                trial_name=trial_name,
                on_event=on_event,
            )
            outcome = agent.run(session, task, ctx)
            timings["agent_execution"].stop()
            emit(
                "agent_output",
                {
                    "exit_code": outcome.exit_code,
                    "timed_out": outcome.timed_out,
                    "text": outcome.output_tail,
                },
            )
            emit("phase", {"phase": "agent_execution", "state": "end"})
            agent_result = {
                "exit_code": outcome.exit_code,
                "timed_out": outcome.timed_out,
                "duration_s": round(outcome.duration_s, 3),
                "output_tail": outcome.output_tail,
                **outcome.metadata,
            }
            if outcome.timed_out:
                exception = _exception(
                    "AgentTimeoutError",
                    f"agent did not finish within {agent_timeout:g} s",
                )
            elif outcome.error:
                exception = _exception("AgentError", outcome.error)

            timings["verifier"].start()
            emit("phase", {"phase": "verifier", "state": "start"})
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
            session = checked.session
            verification = checked.verification
            verifier_stdout, verifier_exit = checked.stdout, checked.exit_code
            reading = checked.reading
            timings["verifier"].stop()
            emit("verifier_output", {"exit_code": verifier_exit, "text": verifier_stdout})
            emit("phase", {"phase": "verifier", "state": "end"})
            if reading.error:
                if exception is None:
                    exception = _exception("RewardFileError", reading.error)
                else:  # e.g. the agent timed out and then the verifier wrote no reward
                    exception["exception_message"] += f"; then: {reading.error}"
        except _Done:
            pass
        except Exception as exc:  # noqa: BLE001 - every failure becomes the trial's exception_info
            exception = _exception(type(exc).__name__, str(exc), traceback.format_exc())
        finally:
            for t in timings.values():
                if t.started_at and not t.finished_at:
                    t.stop()
            if session is not None:
                try:
                    session.close()
                except Exception as exc:  # noqa: BLE001
                    if exception is None:
                        exception = _exception("SandboxCloseError", str(exc))
            if services is not None:
                services.close()
        result: dict[str, Any] = {
            "id": str(uuid.uuid4()),
            "trial_name": trial_name,
            "task_name": task.name,
            "task_id": task.id,
            "task_path": str(task.path),
            "task_checksum": (task.repo2env or {}).get("content_hash"),
            "agent_info": {"name": agent.name, "version": __version__},
            "agent_result": agent_result,
            "verifier_result": {
                "rewards": reading.rewards if reading else None,
                "reward": reading.reward if reading else None,
                "source": reading.source if reading else None,
                "details": reading.details if reading else None,
                "exit_code": verifier_exit,
                "error": reading.error if reading else None,
                "warnings": reading.warnings if reading else [],
            },
            "verification": verification,
            **({"step_results": step_results} if step_results is not None else {}),
            "exception_info": exception,
            "started_at": started,
            "finished_at": _now(),
            **{
                k: {"started_at": t.started_at, "finished_at": t.finished_at}
                for k, t in timings.items()
            },
            "sandbox": {
                "backend": self.backend.name,
                "base_mapping": built.base_mapping if built else {},
                **(services.to_json() if services is not None else {}),
            },
        }
        if exception is not None:
            emit(
                "error",
                {"kind": exception["exception_type"], "text": exception["exception_message"]},
            )
        emit("reward", dict(result["verifier_result"]))
        path = None
        if out_dir is not None:
            path = out_dir / "result.json"
            atomic_write(path, json.dumps(result, indent=2, default=str) + "\n")
            atomic_write(out_dir / "verifier-stdout.txt", verifier_stdout)
        return TrialOutcome(result, reading, path, verifier_stdout, timings)


class _Done(Exception):
    """Internal: a multi-step trial finished its steps (skips the single-step path)."""


@dataclass
class Checked:
    """The verifier's outcome after an agent phase, and the session it ran in."""

    session: Session
    """The session to close: the agent's own (``in_place``) or the clean room."""
    stdout: str
    exit_code: int | None
    reading: RewardReading
    verification: dict[str, Any]


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
        verification = read_verification(task.repo2env)
    except ValueError as exc:
        raise SandboxError(f"{task.id}: {exc}") from None
    if (mode or verification.mode) != "clean_room":
        stdout, code, reading = run_verifier(session, task, workdir, timeout_s=verifier_timeout)
        return Checked(session, stdout, code, reading, {"mode": "in_place"})
    fresh, carry = clean_room_session(
        backend, built, verifier_spec(task, spec), session, workdir, Matcher(verification.protected)
    )
    session.close()
    try:
        stdout, code, reading = run_verifier(fresh, task, workdir, timeout_s=verifier_timeout)
    except BaseException:
        fresh.close()
        raise
    return Checked(fresh, stdout, code, reading, carry.to_json())


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
    return Checked(fresh, stdout, code, reading, report.to_json())


def _exception(kind: str, message: str, tb: str | None = None) -> dict[str, Any]:
    return {
        "exception_type": kind,
        "exception_message": message,
        "exception_traceback": tb,
        "occurred_at": _now(),
    }
