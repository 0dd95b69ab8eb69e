"""A Harbor environment over repogym's sandboxes: Harbor's agents on this machine, no Docker.

    harbor run -p TASKS -a oracle -e repogym.integrations.harbor:RepogymEnvironment \\
        [--ek backend=local|docker] [--ek agent_network=task|public]

Harbor builds nothing here: :meth:`RepogymEnvironment.start` reads the task folder Harbor's
``environment_dir`` belongs to with :func:`repogym.taskdir.load_task`, refuses what repogym
cannot run (:func:`repogym.run.preflight.require_runnable`, one line), builds the environment
on the chosen backend and starts one session. Harbor's ``exec``/``upload``/``download`` calls
go to that session.

The verifier phase starts when Harbor uploads ``/tests`` (its verifier does that, and nothing
else does). Then every process the agent left is killed and ``/logs/verifier`` is emptied.
For a task that declares clean-room verification
(``[metadata.repo2env.verification] mode = "clean_room"``) the agent's change to the working
tree is first carried onto a fresh copy-on-write session of the built environment
(:func:`repogym.run.cleanroom.clean_room_session`), the agent's session is closed, and every
later call goes to the fresh one, exactly as ``repogym run`` verifies. Multi-step tasks and
tasks without the block are verified in the agent's session (Harbor's own behaviour).

Network: every command gets the network Harbor's current policy for the phase allows and the
task allows (``[environment]``/``[agent]``/``[verifier] network_mode``); allowlists cannot be
enforced and are refused. ``agent_network=public`` gives everything before the verifier phase
(agent setup and run) full network, for agents that install themselves or call a model API
from inside the sandbox. See docs/harbor.md.

Harbor (``pip install harbor``, Python 3.12+) is imported by this module only.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import shutil
import tempfile
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from harbor.environments.base import (  # type: ignore[import-not-found]
    BaseEnvironment,
    ExecResult,
    SandboxBuildFailedError,
)
from harbor.environments.capabilities import (  # type: ignore[import-not-found]
    EnvironmentCapabilities,
    EnvironmentResourceCapabilities,
)
from harbor.models.task.config import NetworkMode  # type: ignore[import-not-found]
from pydantic import BaseModel, Field

try:  # Harbor >= 0.26: --ek options are validated against the class's options model
    from harbor.environments.options import (  # type: ignore[import-not-found]
        EnvironmentOptions,
    )

    HARBOR_OPTIONS = True
except ImportError:  # Harbor 0.24, 0.25: --ek options arrive as keyword arguments
    EnvironmentOptions = BaseModel
    HARBOR_OPTIONS = False

from repogym.errors import RepogymError
from repogym.integrations._harbor_support import (
    EXEC_MARKER,
    POOL,
    find_task_dir,
    kill_marked,
    merge_into,
    under,
    upload_dir,
)
from repogym.run.cleanroom import clean_room_session
from repogym.run.preflight import UnsupportedTask, require_runnable
from repogym.run.services import Services, start_services
from repogym.run.trial import environment_spec, verifier_spec
from repogym.run.verifier import VERIFIER_LOGS, phase_network
from repogym.sandbox import (
    BuildError,
    BuiltEnvironment,
    EnvironmentSpec,
    Sandbox,
    SandboxError,
    Session,
)
from repogym.taskdir import Task, TaskError, load_task
from repogym.taskdir.provenance import read_verification
from repogym.taskdir.verification import Matcher

TESTS_DIR = "/tests"
NO_TIMEOUT_S = 7 * 24 * 3600.0
"""Harbor passes no timeout for commands its own phase timeout bounds (the agent's run)."""
EXEC_THREADS = 16
VERIFICATION_REPORT = "repogym-verification.json"
"""Written into the trial folder when the verifier phase starts: mode, and for a clean room
what of the agent's change was carried over and what was dropped (and why)."""
BUILD_LOG = "repogym-build-{role}.log"
"""The build log in the trial folder (``main``: the agent's environment; ``verifier``: a
separate verifier's)."""
_ALLOWLIST_HINT = (
    "repogym's sandboxes cannot filter hosts: a task needs network_mode 'public' or "
    "'no-network'; for an agent that calls a model API from inside the sandbox (Harbor "
    "allowlists its host) pass --ek agent_network=public"
)


class RepogymEnvironmentError(RepogymError, RuntimeError):
    """repogym cannot run this task or command; the message is one line."""


class RepogymOptions(EnvironmentOptions):
    """``--ek`` options of :class:`RepogymEnvironment`."""

    backend: Literal["local", "docker"] = Field(
        default="local",
        description="repogym sandbox backend: local (bubblewrap, no Docker daemon) or docker.",
    )
    agent_network: Literal["task", "public"] = Field(
        default="task",
        description=(
            "task: every phase gets the task's network policy. public: agent setup and run "
            "get full network (agents that install themselves or call a model API); the "
            "verifier phase still gets the task's policy."
        ),
    )


class RepogymEnvironment(BaseEnvironment):
    """Harbor's ``BaseEnvironment`` on a repogym sandbox backend (default ``local``)."""

    options_model = RepogymOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._task_dir: Path | None = None
        self._task: Task | None = None
        self._role: Literal["main", "verifier"] = "main"
        self._backend: Sandbox | None = None
        self._spec: EnvironmentSpec | None = None
        self._built: BuiltEnvironment | None = None
        self._session: Session | None = None
        self._services: Services | None = None
        self._clean_room: Matcher | None = None
        self._phase: Literal["agent", "verifier"] = "agent"
        self._allowed = {"agent": False, "verifier": False}
        self._pool: ThreadPoolExecutor | None = None
        self._switch = asyncio.Lock()
        self._closed = False
        if not HARBOR_OPTIONS:  # Harbor < 0.26 passes --ek options on as keyword arguments
            ours = {k: kwargs.pop(k) for k in list(kwargs) if k in RepogymOptions.model_fields}
            self.options = RepogymOptions(**ours)
        super().__init__(*args, **kwargs)

    # ------------------------------------------------------------------ Harbor's contract

    @staticmethod
    def type() -> str:
        return "repogym"

    @property
    def _opts(self) -> RepogymOptions:
        opts = getattr(self, "options", None)
        return opts if isinstance(opts, RepogymOptions) else RepogymOptions()

    @property
    def _public_agent(self) -> bool:
        return self._opts.agent_network == "public"

    @property
    def capabilities(self) -> Any:
        # Allowlists are only accepted where agent_network=public widens them to public.
        wide = self._public_agent
        return EnvironmentCapabilities(
            disable_internet=True,
            dynamic_network_policy=True,
            network_allowlist=wide,
            network_allowlist_hostnames=wide,
            network_allowlist_wildcard_hostnames=wide,
            network_allowlist_ipv4_addresses=wide,
            network_allowlist_ipv6_addresses=wide,
            network_allowlist_ipv4_cidrs=wide,
            network_allowlist_ipv6_cidrs=wide,
        )

    @classmethod
    def resource_capabilities(cls) -> Any:
        return EnvironmentResourceCapabilities(
            cpu_limit=True, memory_limit=True, fractional_cpus=True
        )

    def _validate_definition(self) -> None:
        found = find_task_dir(Path(self.environment_dir))
        if found is None:
            raise FileNotFoundError(
                f"no task.toml above {self.environment_dir}: the repogym environment runs "
                "Harbor task folders"
            )
        self._task_dir = found
        # Harbor names a separate verifier's environment "<trial>__verifier__<key>".
        if "__verifier__" in self.session_id:
            self._role = "verifier"

    def validate_network_policy_support(self, network_policy: Any = None) -> None:
        try:
            super().validate_network_policy_support(network_policy)
        except ValueError as exc:
            raise ValueError(f"{exc} ({_ALLOWLIST_HINT})") from None

    async def _apply_network_policy(self, network_policy: Any) -> None:
        """Commands read the policy when they start; processes already running keep the
        network they started with, so narrowing it kills them (a daemon started during agent
        setup must not keep the network into a no-network agent run)."""
        was = self._command_network()
        self._network_policy = network_policy
        if was and not self._command_network() and self._session is not None:
            self.logger.warning("repogym: network narrowed; killing the sandbox's processes")
            await self._call(self._session.kill_all)

    async def start(self, force_build: bool) -> None:
        """Build the task's environment and start a session (``force_build`` is not needed:
        the backend's build cache is keyed by content)."""
        self._pool = ThreadPoolExecutor(EXEC_THREADS, thread_name_prefix="repogym-harbor")
        await self._call(self._start)
        await self.ensure_dirs(self._mount_targets(writable_only=True))
        await self._upload_environment_dir_after_start()

    async def stop(self, delete: bool) -> None:
        """Close the session (its root is discarded) and the task's services."""
        if self._closed:
            return
        self._closed = True
        await self._call(self._close)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        session = self._current()
        resolved = self._resolve_user(user)
        marker = uuid.uuid4().hex
        merged = {**(self._merge_env(env) or {}), EXEC_MARKER: marker}
        network = self._command_network()
        try:
            res = await self._call(
                session.exec,
                command,
                timeout_s=float(timeout_sec) if timeout_sec else NO_TIMEOUT_S,
                env=merged,
                cwd=cwd,
                user=None if resolved is None else str(resolved),
                network=network,
            )
        except asyncio.CancelledError:
            # Harbor gave up on this command (its phase timed out): stop its processes.
            threading.Thread(target=kill_marked, args=(session, marker), daemon=True).start()
            raise
        if res.timed_out:
            raise RuntimeError(f"Command timed out after {timeout_sec} seconds")
        callback = self._output_callback()
        if callback is not None:
            if res.stdout:
                await callback(res.stdout, "stdout")
            if res.stderr:
                await callback(res.stderr, "stderr")
        code = res.exit_code if res.exit_code is not None else 137
        return ExecResult(stdout=res.stdout, stderr=res.stderr, return_code=code)

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        await self._before_upload(str(target_path))
        await self._call(self._current().upload, Path(source_path), str(target_path))

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        await self._before_upload(str(target_dir))
        await self._call(upload_dir, self._current(), Path(source_dir), str(target_dir))

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        await self._call(self._current().download, str(source_path), Path(target_path))

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        await self._call(self._download_dir, str(source_dir), Path(target_dir))

    # ------------------------------------------------------------------ start and stop

    def _start(self) -> None:
        task = self._load()
        if self._user_mounts():
            raise RepogymEnvironmentError(
                f"{task.id}: --mounts is not supported by the repogym environment"
            )
        try:
            backend = POOL.backend(self._opts.backend)
        except (SandboxError, ImportError) as exc:
            raise RepogymEnvironmentError(
                f"repogym sandbox {self._opts.backend!r} is not available here: {_line(exc)}"
            ) from None
        self._backend = backend
        spec = self._main_spec(task, backend) if self._role == "main" else self._verifier_spec()
        self._spec = spec
        log = Path(self.trial_paths.trial_dir) / BUILD_LOG.format(role=self._role)
        try:
            self._built = POOL.build(backend, spec, log)
        except BuildError as exc:
            raise SandboxBuildFailedError(f"{task.id}: {_line(exc)}") from None
        except SandboxError as exc:
            raise RepogymEnvironmentError(f"{task.id}: {_line(exc)}") from None
        try:
            if self._role == "main":
                self._session, self._services = start_services(
                    backend, task, self._built, spec, out_dir=Path(self.trial_paths.trial_dir)
                )
            else:
                self._session = backend.start(self._built, spec)
        except SandboxError as exc:
            raise RepogymEnvironmentError(f"{task.id}: {_line(exc)}") from None

    def _user_mounts(self) -> list[Any]:
        """The mounts the user asked for (``--mounts``). Harbor 0.24 has no ``_host_mounts``:
        its ``_mounts`` also holds the trial's own log folders, which it downloads from an
        environment that cannot mount them, as it does from this one."""
        if hasattr(self, "_host_mounts"):
            return list(self._host_mounts)
        mounts = getattr(self, "_mounts", None) or []
        return [m for m in mounts if not under(str(m.get("target", "")), "/logs")]

    def _load(self) -> Task:
        assert self._task_dir is not None  # set by _validate_definition
        try:
            task = load_task(self._task_dir)
        except (TaskError, RepogymError) as exc:
            raise RepogymEnvironmentError(f"{self._task_dir.name}: {_line(exc)}") from None
        self._task = task
        return task

    def _main_spec(self, task: Task, backend: Sandbox) -> EnvironmentSpec:
        """The agent's environment: repogym's request for the task with Harbor's resource
        overrides and resolved environment variables."""
        try:
            require_runnable(task, backend=backend)
            verification = read_verification(task.provenance)
        except (UnsupportedTask, ValueError) as exc:
            raise RepogymEnvironmentError(f"repogym cannot run {task.id}: {_line(exc)}") from None
        if self._public_agent and task.is_multi_step:
            raise RepogymEnvironmentError(
                f"repogym cannot run {task.id}: agent_network=public is not supported for "
                "multi-step tasks (their later agent phases cannot be told from verifiers)"
            )
        if verification.mode == "clean_room" and not task.is_multi_step:
            self._clean_room = Matcher(verification.protected)
        self._allowed = {p: phase_network(task, p) for p in ("agent", "verifier")}
        if task.is_multi_step:  # one session for every step: Harbor's policy switches decide
            either = self._allowed["agent"] or self._allowed["verifier"]
            self._allowed = {"agent": either, "verifier": either}
        spec = environment_spec(task, backend)
        cfg = self.task_env_config
        return dataclasses.replace(
            spec,
            env=self._startup_env(),
            cpus=self._effective_cpus,
            memory_mb=self._effective_memory_mb,
            storage_mb=cfg.storage_mb,
            network_mode="public" if self._public_agent else spec.network_mode,
        )

    def _verifier_spec(self) -> EnvironmentSpec:
        """A separate verifier's environment, from the folder and config Harbor gives."""
        cfg = self.task_env_config
        folder = Path(self.environment_dir)
        own = (folder / "Dockerfile").is_file()
        public = self.network_policy.network_mode == NetworkMode.PUBLIC
        self._allowed = {"agent": public, "verifier": public}
        return EnvironmentSpec(
            context_dir=folder if own else None,
            docker_image=None if own else cfg.docker_image,
            workdir=cfg.workdir,
            env=self._startup_env(),
            cpus=self._effective_cpus,
            memory_mb=self._effective_memory_mb,
            storage_mb=cfg.storage_mb,
            network_mode="public" if public else "no-network",
            build_timeout_sec=cfg.build_timeout_sec,
        )

    def _close(self) -> None:
        if self._session is not None:
            with contextlib.suppress(Exception):
                self._session.close()
        if self._services is not None:
            with contextlib.suppress(Exception):
                self._services.close()

    # ------------------------------------------------------------------ the verifier phase

    async def _before_upload(self, target: str) -> None:
        if self._role == "main" and under(target, TESTS_DIR):
            async with self._switch:
                await self._call(self._enter_verifier)

    def _enter_verifier(self) -> None:
        """Harbor's verifier is starting (it uploads /tests): kill the agent's processes,
        move to a clean room when the task asks for one, empty /logs/verifier. Once per
        verifier run (a multi-step task runs one per step, all in the agent's session)."""
        task, session = self._task, self._current()
        assert task is not None
        if self._phase == "verifier" and not task.is_multi_step:
            return
        session.kill_all()
        report: dict[str, Any] = {"mode": "in_place"}
        if self._clean_room is not None:
            assert self._backend is not None and self._built is not None and self._spec
            sandbox = self._services.sandbox if self._services is not None else self._backend
            workdir = self._spec.workdir or self._built.workdir or "/"
            try:
                fresh, carry = clean_room_session(
                    sandbox,
                    self._built,
                    verifier_spec(task, self._spec),
                    session,
                    workdir,
                    self._clean_room,
                )
            except SandboxError as exc:
                raise RepogymEnvironmentError(
                    f"{task.id}: clean room failed: {_line(exc)}"
                ) from None
            session.close()
            self._session = session = fresh
            report = carry.to_json()
        if not task.is_multi_step:  # a multi-step task's next step is an agent phase again
            self._phase = "verifier"
        dirs = " ".join(sorted({*self._mount_targets(writable_only=True), VERIFIER_LOGS}))
        res = session.exec(
            f"rm -rf {VERIFIER_LOGS} && mkdir -p {dirs} && chmod 777 {dirs}",
            user="root",
            timeout_s=60,
            network=False,
        )
        if res.exit_code != 0:
            raise RepogymEnvironmentError(
                f"{task.id}: cannot empty {VERIFIER_LOGS}: {res.stderr.strip()[:200]}"
            )
        path = Path(self.trial_paths.trial_dir) / VERIFICATION_REPORT
        with contextlib.suppress(OSError):
            path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")

    # ------------------------------------------------------------------ helpers

    def _current(self) -> Session:
        if self._session is None:
            raise RepogymEnvironmentError("the repogym environment is not started")
        return self._session

    def _command_network(self) -> bool:
        """Whether a command started now gets the network."""
        if self._role == "main" and self._phase == "agent" and self._public_agent:
            return True
        mode = self.network_policy.network_mode
        if mode == NetworkMode.ALLOWLIST:
            raise RepogymEnvironmentError(f"network_mode 'allowlist': {_ALLOWLIST_HINT}")
        return mode == NetworkMode.PUBLIC and self._allowed[self._phase]

    def _download_dir(self, source: str, target: Path) -> None:
        staging = Path(tempfile.mkdtemp(prefix="repogym-harbor-"))
        try:
            self._current().download(source, staging / "d")
            dropped = merge_into(staging / "d", target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        if dropped:
            self.logger.warning(
                f"repogym: left out {len(dropped)} symlink(s) leaving {source}: {dropped[:5]}"
            )

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run a blocking sandbox call on this environment's threads."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
