"""A trial's compose services: the main session and its sidecars on one shared network.

Harbor starts a task's ``environment/docker-compose.yaml`` with ``docker compose up --wait``;
here :func:`start_services` does the same on the local sandbox:

* every sidecar is built like the main environment (its ``build:`` context replayed, or its
  ``image:`` pulled / mapped) and started as a sibling session;
* all sessions of the trial — main, sidecars, a clean-room verifier — join **one network
  namespace** (public when ``[environment].network_mode`` is, else loopback only, so a
  no-network task's services reach each other and nothing else). ``/etc/hosts`` of each maps
  every service name to 127.0.0.1; two services on one port would collide, which
  :mod:`repogym.taskdir.compose` refuses where ports are declared;
* services start in ``depends_on`` order; ``condition: service_healthy`` waits for the
  dependency's healthcheck (compose's, else its image's ``HEALTHCHECK``), and before the agent
  starts every service with a healthcheck must be healthy. One that never is fails the trial
  with a one-line :class:`ServiceError`;
* a sidecar's process is its ``entrypoint`` + ``command`` (or its image's), with its
  ``environment``, ``working_dir`` and ``user``; its output goes to ``services/<name>.log``;
* :meth:`Services.close` closes every sidecar (all its processes) and the namespace.

A task without a compose file gets an empty :class:`Services`: the main session as before.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym.run.health import HealthcheckError, wait_healthy
from repogym.sandbox import (
    BuiltEnvironment,
    EnvironmentSpec,
    ExecResult,
    Sandbox,
    SandboxError,
    Session,
)
from repogym.sandbox.base import NetworkMode
from repogym.taskdir import Task
from repogym.taskdir.compose import (
    MAIN,
    Compose,
    ComposeError,
    Dependency,
    Healthcheck,
    Service,
    dockerfile_healthcheck,
)
from repogym.taskdir.mcp_servers import McpServer, parse_mcp_servers

SERVICE_ADDRESS = "127.0.0.1"
"""Where every service name resolves: all services share one network namespace."""
PROCESS_TIMEOUT_S = 7 * 24 * 3600.0
"""A sidecar's process runs until the trial closes it (this only bounds a forgotten one)."""
COMPLETION_TIMEOUT_S = 600.0
"""How long ``condition: service_completed_successfully`` waits for the dependency."""

Build = Callable[[EnvironmentSpec, Path | None], BuiltEnvironment]


class ServiceError(SandboxError):
    """A service could not be started or never became ready; the message is one line."""


def _oneline(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else "…" + flat[-limit:]


def task_mcp_servers(task: Task) -> list[McpServer]:
    """The task's well-formed ``[[environment.mcp_servers]]`` (preflight refuses the rest)."""
    return parse_mcp_servers(task.config.environment.mcp_servers)[0]


@dataclass
class _Running:
    """One started sidecar."""

    service: Service
    built: BuiltEnvironment
    session: Session
    argv: list[str]
    healthcheck: Healthcheck | None
    thread: threading.Thread | None = None
    result: ExecResult | None = None
    healthy: bool | None = None
    started_s: float = 0.0
    ready_s: float | None = None

    @property
    def exited(self) -> bool:
        return self.thread is not None and not self.thread.is_alive()

    def tail(self) -> str:
        res = self.result
        return _oneline((res.stderr or res.stdout) if res else "") or "no output"


class _SharedBackend:
    """The trial's backend with every session it starts joined to the services' network.

    A session whose network mode differs from the namespace's (e.g. a no-network verifier
    of a public task) starts on its own and does not see the services.
    """

    def __init__(self, services: Services, backend: Any) -> None:
        self._services = services
        self._backend = backend
        self.name = backend.name

    def start(self, built: BuiltEnvironment, spec: EnvironmentSpec) -> Session:
        return self._services.start_session(built, spec)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)


def sidecar_spec(task: Task, svc: Service, network_mode: NetworkMode) -> EnvironmentSpec:
    """The build/start request of a sidecar: its build context (or image), environment and
    working directory; the task's resources unless it declares its own."""
    env = task.config.environment
    return EnvironmentSpec(
        context_dir=svc.build.context if svc.build else None,
        dockerfile=svc.build.dockerfile if svc.build else "Dockerfile",
        docker_image=None if svc.build else svc.image,
        workdir=svc.working_dir,
        env=dict(svc.environment),
        cpus=svc.cpus or env.cpus,
        memory_mb=svc.memory_mb or env.memory_mb,
        storage_mb=env.storage_mb,
        network_mode=network_mode,
        build_timeout_sec=env.build_timeout_sec,
        target=svc.build.target if svc.build else None,
    )


def sidecar_refusals(backend: Any, task: Task) -> list[str]:
    """What ``backend`` cannot do for the task's sidecars (preflight): share a network, or
    build a sidecar's environment (through the backend's own ``preflight``)."""
    try:
        compose = task.compose()
    except ComposeError:
        return []  # the task-level refusals already name it
    if compose is None or not compose.sidecars:
        return []
    if not hasattr(backend, "shared_network"):
        return [
            f"compose sidecars need the local backend (the {backend.name} backend cannot share "
            "a network between sessions)"
        ]
    hook = getattr(backend, "preflight", None)
    if hook is None:
        return []
    reasons: list[str] = []
    for svc in compose.sidecars:
        spec = sidecar_spec(task, svc, task.config.environment.network_mode)
        reasons += [f"service {svc.name!r}: {r}" for r in hook(spec)]
    return reasons


@dataclass
class Services:
    """The services of one trial (empty without a compose file)."""

    backend: Sandbox
    task: Task
    compose: Compose | None = None
    log_dir: Path | None = None
    network: Any = None
    running: dict[str, _Running] = field(default_factory=dict)
    main_key: str | None = None
    events: list[str] = field(default_factory=list)

    @property
    def mcp_servers(self) -> list[McpServer]:
        return task_mcp_servers(self.task)

    @property
    def sandbox(self) -> Any:
        """The backend trial phases start sessions with (joined to the shared network)."""
        return self.backend if self.compose is None else _SharedBackend(self, self.backend)

    # ------------------------------------------------------------------------ sessions

    def start_session(
        self, built: BuiltEnvironment, spec: EnvironmentSpec, service: Service | None = None
    ) -> Session:
        """A session of ``built`` for ``service`` (None: a session of the main environment,
        which gets ``main``'s compose ``environment``) in the shared network when its mode
        matches, its ``/etc/hosts`` naming every service."""
        if self.compose is None or self.network is None:
            return self.backend.start(built, spec)
        if service is None and built.key == self.main_key:
            service = self.compose.main
            spec = dataclasses.replace(spec, env={**spec.env, **service.environment})
        if (spec.network_mode == "public") != self.network.public:
            return self.backend.start(built, spec)
        session = self.backend.start(built, spec, shared=self.network)  # type: ignore[call-arg]
        try:
            self._write_hosts(session, service)
        except BaseException:
            session.close()
            raise
        return session

    def _write_hosts(self, session: Session, service: Service | None) -> None:
        assert self.compose is not None
        names = " ".join(self.compose.services)
        lines = [f"{SERVICE_ADDRESS}\t{names}"]
        for host, addr in (service.extra_hosts if service else {}).items():
            lines.append(f"{addr.strip()}\t{host.strip()}")
        try:
            current = session.read("/etc/hosts").decode("utf-8", errors="replace")
        except FileNotFoundError:
            current = f"{SERVICE_ADDRESS}\tlocalhost\n"
        if current and not current.endswith("\n"):
            current += "\n"
        session.write("/etc/hosts", current + "\n".join(lines) + "\n", mode=0o644)

    # ------------------------------------------------------------------------ start-up

    def up(self, built: BuiltEnvironment, spec: EnvironmentSpec, build: Build) -> Session:
        """Build and start the sidecars and the main session in ``depends_on`` order; wait
        until every service with a healthcheck is healthy. Returns the main session (the
        caller closes it; :meth:`close` closes the rest, also after a failure here)."""
        if self.compose is None:
            return self.backend.start(built, spec)
        if not hasattr(self.backend, "shared_network"):
            raise ServiceError(
                f"compose sidecars need the local backend (the {self.backend.name} backend "
                "cannot share a network between sessions)"
            )
        self.main_key = built.key
        mode = spec.network_mode
        specs = {s.name: sidecar_spec(self.task, s, mode) for s in self.compose.sidecars}
        builds = {}
        for name, sidecar in specs.items():
            try:
                builds[name] = build(sidecar, self._log(f"{name}.build.log"))
            except SandboxError as exc:
                raise ServiceError(f"service {name!r}: {exc}") from None
        self.network = self.backend.shared_network(public=spec.network_mode == "public")
        main: Session | None = None
        try:
            for name in self.compose.order():
                svc = self.compose.services[name]
                for dep in svc.depends_on:
                    self._await(dep, name)
                if name == MAIN:
                    main = self.start_session(built, spec)
                    self._note("main started")
                    if svc.healthcheck is not None:
                        check = svc.healthcheck
                        self.running[MAIN] = _Running(
                            svc, built, main, [], check, started_s=time.monotonic()
                        )
                else:
                    self._start_sidecar(svc, builds[name], specs[name])
            for name in self.running:
                self._wait_healthy(name)
            self._check_exits()
        except BaseException:
            if main is not None:
                main.close()
            raise
        assert main is not None
        return main

    def _log(self, name: str) -> Path | None:
        if self.log_dir is None:
            return None
        self.log_dir.mkdir(parents=True, exist_ok=True)
        return self.log_dir / name

    def _note(self, text: str) -> None:
        self.events.append(text)

    def _start_sidecar(self, svc: Service, built: BuiltEnvironment, spec: EnvironmentSpec) -> None:
        details = built.details
        entry: Any = svc.entrypoint if svc.entrypoint is not None else details.get("entrypoint")
        if svc.command is not None:
            cmd: Any = svc.command
        else:
            cmd = details.get("cmd") if svc.entrypoint is None else None
        argv = [str(a) for a in [*(entry or []), *(cmd or [])]]
        if not argv:
            raise ServiceError(
                f"service {svc.name!r} has nothing to run: set its command (its image has no "
                "CMD or ENTRYPOINT the local sandbox knows of)"
            )
        check = svc.healthcheck
        if check is None and not svc.healthcheck_disabled:
            check = dockerfile_healthcheck(details.get("healthcheck"))  # type: ignore[arg-type]
        session = self.start_session(built, spec, svc)
        run = _Running(svc, built, session, argv, check, started_s=time.monotonic())
        self.running[svc.name] = run

        def serve() -> None:
            try:
                run.result = session.exec(argv, timeout_s=PROCESS_TIMEOUT_S, user=svc.user)
            except Exception as exc:  # noqa: BLE001 - the session closed, or could not exec
                run.result = ExecResult(None, "", f"{type(exc).__name__}: {exc}", 0.0)

        run.thread = threading.Thread(target=serve, name=f"service-{svc.name}", daemon=True)
        run.thread.start()
        self._note(f"{svc.name} started: {' '.join(argv)}")

    def _await(self, dep: Dependency, waiter: str) -> None:
        if dep.condition == "service_healthy":
            self._wait_healthy(dep.service)
        elif dep.condition == "service_completed_successfully":
            run = self.running.get(dep.service)
            if run is None or run.thread is None:
                return
            run.thread.join(COMPLETION_TIMEOUT_S)
            code = run.result.exit_code if run.result else None
            if run.thread.is_alive() or code != 0:
                how = "did not finish" if run.thread.is_alive() else f"exited with {code}"
                raise ServiceError(
                    f"service {waiter!r} waits for {dep.service!r} to complete successfully, "
                    f"but it {how}: {run.tail()}"
                )

    def _wait_healthy(self, name: str) -> None:
        """Run the service's healthcheck until it passes (see :mod:`.health`)."""
        run = self.running.get(name)
        if run is None or run.healthy is not None or run.healthcheck is None:
            return

        def gone() -> str | None:
            if run.exited and run.result is not None and run.result.exit_code != 0:
                return f"exited with {run.result.exit_code} ({run.tail()})"
            return None

        try:
            run.ready_s = wait_healthy(
                run.session,
                run.healthcheck,
                label=f"service {name!r}",
                started=run.started_s,
                user=run.service.user,
                gone=gone,
            )
        except HealthcheckError as exc:
            run.healthy = False
            raise ServiceError(str(exc)) from None
        run.healthy = True
        self._note(f"{name} healthy after {run.ready_s:.1f}s")

    def _check_exits(self) -> None:
        for name, run in self.running.items():
            code = run.result.exit_code if run.exited and run.result else 0
            if code != 0:
                raise ServiceError(f"service {name!r} exited with {code}: {run.tail()}")

    # ------------------------------------------------------------------------ teardown

    def close(self) -> None:
        """Close every sidecar session (killing all its processes) and the shared network."""
        for name, run in reversed(list(self.running.items())):
            with contextlib.suppress(Exception):
                run.session.close()
            if run.thread is not None:
                run.thread.join(15)
            log = self._log(f"{name}.log")
            if log is not None and run.result is not None:
                log.write_text(run.result.stdout + run.result.stderr, encoding="utf-8")
        if self.network is not None:
            self.network.close()

    def to_json(self) -> dict[str, Any]:
        """What the trial result records about its services (empty without compose)."""
        if self.compose is None:
            return {}
        services: dict[str, Any] = {}
        for name, svc in self.compose.services.items():
            run = self.running.get(name)
            row: dict[str, Any] = {"address": SERVICE_ADDRESS}
            if svc.published:
                row["not_published"] = svc.published
            if run is not None:
                row.update(
                    command=run.argv,
                    healthy=run.healthy,
                    ready_s=round(run.ready_s, 3) if run.ready_s is not None else None,
                    exit_code=run.result.exit_code if run.result else None,
                )
            services[name] = row
        net = self.network
        mode = None if net is None else ("public" if net.public else "private")
        return {
            "services": services,
            "network": mode,
            "events": self.events,
            "mcp_servers": [s.to_json() for s in self.mcp_servers],
        }


def start_services(
    backend: Sandbox,
    task: Task,
    built: BuiltEnvironment,
    spec: EnvironmentSpec,
    *,
    out_dir: Path | None = None,
) -> tuple[Session, Services]:
    """The trial's main session and its :class:`Services`; the caller closes the session, then
    the services. When start-up fails, whatever was started is closed before raising."""
    try:
        compose = task.compose()
    except ComposeError as exc:
        raise ServiceError(f"environment/{exc}") from None
    services = Services(
        backend, task, compose, out_dir / "services" if out_dir is not None else None
    )

    def build(s: EnvironmentSpec, log: Path | None) -> BuiltEnvironment:
        return backend.build(s, log=log)

    try:
        return services.up(built, spec, build), services
    except BaseException:
        services.close()
        raise
