"""One episode on one task: a sandbox session, the agent's actions, and the orchestration
actions (evaluate, solve). Plain Python, no ``openenv`` import; the OpenEnv environment wraps it.

Agent actions (``exec``, ``read``, ``write``, ``list``) act inside the task's working directory.
``evaluate`` runs the task's verifier exactly as ``repogym run`` does (processes killed, a fresh
``/logs/verifier``, ``/tests`` mounted, rewards read strictly and forwarded, never synthesized);
``solve`` runs the oracle. ``submit`` (opt-in, agent-facing) grades like ``evaluate`` but
answers with the reward only. Grading happens once per episode: the phase leaves ``agent``
atomically. Whether a caller may send an action is decided by the environment, not here.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import posixpath
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from repogym.openenv.tasks import serving_spec
from repogym.run.agent_tools import SessionWorkspace
from repogym.run.agents import AgentContext, OracleAgent
from repogym.run.trial import DEFAULT_WORKDIR, phase_network, verify_after_agent
from repogym.sandbox import BuiltEnvironment, Sandbox, SandboxError, Session
from repogym.taskdir import Task

AGENT_ACTIONS = ("exec", "read", "write", "list")
ORCHESTRATION_ACTIONS = ("evaluate", "solve")
SUBMIT_ACTION = "submit"
"""The opt-in agent action that ends the episode with the verifier's reward (once)."""
MAX_OUTPUT = 64_000
MAX_READ = 1_000_000
DEFAULT_EXEC_TIMEOUT_S = 120.0
GRADING_WAIT_S = 60.0
"""How long grading waits for agent actions still running (their processes are killed)."""


class ActionRefused(ValueError):
    """The action is not allowed (path outside the working directory, wrong phase, …)."""


def _clip(text: str, limit: int = MAX_OUTPUT) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n… [{len(text) - limit} chars cut]"


def _inside(path: str, root: str) -> bool:
    return root == "/" or path == root or path.startswith(root.rstrip("/") + "/")


def lexical_agent_path(path: str, workdir: str) -> str:
    """Join ``path`` to ``workdir`` and normalise it; refuse anything that leaves ``workdir``.

    Relative paths are taken against the working directory; absolute paths must already lie
    inside it; ``..`` that climbs out is refused.
    """
    if not isinstance(path, str) or not path or "\x00" in path:
        raise ActionRefused("path must be a non-empty string")
    joined = path if path.startswith("/") else posixpath.join(workdir, path)
    norm = posixpath.normpath(joined)
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")
    if not _inside(norm, workdir):
        raise ActionRefused(f"path {path!r} is outside the working directory {workdir}")
    return norm


class TaskEnvironmentBuilder:
    """Builds each task's environment once per server, even under concurrent resets.

    The backend is made on first use when a factory is given (a server on the ``docker``
    backend starts, and serves its task list, without an engine; ``reset`` then says why no
    episode can start, and a later one tries again)."""

    def __init__(self, backend: Sandbox | Callable[[], Sandbox], name: str | None = None) -> None:
        if isinstance(backend, Sandbox):
            self._backend: Sandbox | None = backend
            self._make: Callable[[], Sandbox] | None = None
            self.name = backend.name
        else:
            self._backend, self._make = None, backend
            self.name = name or "?"
        self.error: str | None = None
        """Why the backend could not be made the last time it was tried (None: it was)."""
        self._built: dict[str, BuiltEnvironment] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._backend_lock = threading.Lock()

    @property
    def backend(self) -> Sandbox:
        """The backend, made now if it was not yet (:class:`SandboxError` when it cannot be)."""
        with self._backend_lock:
            if self._backend is None:
                assert self._make is not None
                try:
                    self._backend = self._make()
                except SandboxError as exc:
                    self.error = str(exc)
                    raise SandboxError(
                        f"the {self.name!r} sandbox backend is not available here: {exc}"
                    ) from None
                self.error = None
            return self._backend

    @property
    def ready(self) -> bool:
        """Whether the backend has been made."""
        return self._backend is not None

    def build(self, task: Task) -> BuiltEnvironment:
        key = str(task.path.resolve())
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            built = self._built.get(key)
            if built is None:
                backend = self.backend
                built = backend.build(serving_spec(task, backend.name))
                self._built[key] = built
            return built


@dataclass
class Episode:
    """A running episode: the task, its session, and what happened so far."""

    task: Task
    session: Session
    workdir: str
    builder: TaskEnvironmentBuilder
    episode_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    step_count: int = 0
    phase: str = "agent"
    """``agent`` (taking actions) → ``grading`` → ``done`` (evaluated) → ``closed``."""
    last_reward: float | None = None
    _phase_lock: threading.Condition = field(
        default_factory=threading.Condition, init=False, repr=False
    )
    _busy: int = field(default=0, init=False, repr=False)
    """Agent actions in flight (grading waits for them to end)."""

    @classmethod
    def start(
        cls, task: Task, builder: TaskEnvironmentBuilder, episode_id: str | None = None
    ) -> Episode:
        """Build (cached) and start a fresh session for ``task``."""
        spec = serving_spec(task, builder.name)
        built = builder.build(task)
        session = builder.backend.start(built, spec)
        workdir = spec.workdir or built.workdir or DEFAULT_WORKDIR
        return cls(task, session, workdir, builder, episode_id=episode_id or uuid.uuid4().hex)

    # -- agent actions -------------------------------------------------------------------

    @functools.cached_property
    def agent_context(self) -> AgentContext:
        """The task's agent phase: its user, network, time limit and instruction."""
        return AgentContext(
            workdir=self.workdir,
            timeout_s=self.task.config.agent.timeout_sec,
            user=self.task.config.agent.user,
            network=phase_network(self.task, "agent"),
            instruction=self.task.instruction(),
        )

    @property
    def workspace(self) -> SessionWorkspace:
        """What the agent actions act on: the current session, as the task's agent user, in the
        working directory, every file lookup confined below it."""
        return SessionWorkspace(self.session, self.agent_context, beneath=self.workdir)

    @property
    def agent_user(self) -> str:
        """Whose rights the file actions have: the task's agent user (root when unset)."""
        return self.workspace.user

    def _file_action(self, path: str, action: Callable[[str], Any]) -> Any:
        """Run ``action`` on the agent path ``path``: refused lexically when it names a place
        outside the working directory, and by the sandbox (the lookup confined below the
        working directory, as the agent user) when a symlink leads out of it."""
        norm = lexical_agent_path(path, self.workdir)
        try:
            return action(norm)
        except OSError as exc:
            if exc.errno in (errno.EXDEV, errno.ELOOP):
                raise ActionRefused(
                    f"path {path!r} leads outside the working directory (symlink)"
                ) from None
            if isinstance(exc, FileNotFoundError | PermissionError | IsADirectoryError):
                raise
            if isinstance(exc, NotADirectoryError):
                raise ActionRefused(f"{path}: a part of it is not a folder") from None
            raise ActionRefused(f"{path}: {str(exc).splitlines()[0][:200]}") from None
        except SandboxError as exc:
            raise ActionRefused(f"{path}: {str(exc).splitlines()[0][:200]}") from None

    def _agent_phase(self) -> None:
        if self.phase != "agent":
            raise ActionRefused(f"episode is {self.phase}: reset to start a new one")

    @contextlib.contextmanager
    def _agent_action(self) -> Iterator[None]:
        """An agent action: refused outside the agent phase, and counted while it runs."""
        with self._phase_lock:
            self._agent_phase()
            self._busy += 1
        try:
            yield
        finally:
            with self._phase_lock:
                self._busy -= 1
                self._phase_lock.notify_all()

    def exec(self, command: str, timeout_s: float | None = None) -> dict[str, Any]:
        with self._agent_action():
            return self._exec_now(command, timeout_s)

    def _exec_now(self, command: str, timeout_s: float | None = None) -> dict[str, Any]:
        limit = self.task.config.agent.timeout_sec
        timeout = min(timeout_s or DEFAULT_EXEC_TIMEOUT_S, limit)
        res = self.workspace.run(command, timeout)
        return {
            "stdout": _clip(res.stdout),
            "stderr": _clip(res.stderr),
            "exit_code": res.exit_code,
            "timed_out": res.timed_out,
        }

    def read(self, path: str) -> dict[str, Any]:
        with self._agent_action():
            return self._read_now(path)

    def _read_now(self, path: str) -> dict[str, Any]:
        data = self._file_action(path, self.workspace.read_bytes)
        if len(data) > MAX_READ:
            raise ActionRefused(f"{path}: {len(data)} bytes, more than {MAX_READ} (use exec)")
        try:
            return {"content": data.decode("utf-8")}
        except UnicodeDecodeError:
            raise ActionRefused(f"{path}: not UTF-8 text (use exec to inspect it)") from None

    def write(self, path: str, content: str) -> dict[str, Any]:
        with self._agent_action():
            return self._write_now(path, content)

    def _write_now(self, path: str, content: str) -> dict[str, Any]:
        norm = lexical_agent_path(path, self.workdir)
        self._file_action(path, lambda p: self.workspace.write_bytes(p, content))
        return {"stdout": f"wrote {len(content.encode())} bytes to {norm}"}

    def list(self, path: str) -> dict[str, Any]:
        with self._agent_action():
            return self._list_now(path)

    def _list_now(self, path: str) -> dict[str, Any]:
        found = self._file_action(path, self.workspace.listdir)
        entries = [{"name": e.name, "type": e.kind, "size": e.size} for e in found]
        return {"entries": entries}

    # -- orchestration actions -----------------------------------------------------------

    def _begin_grading(self) -> None:
        """Leave the agent phase for good, atomically: of two concurrent grading requests
        only one gets past here, and no agent action starts once it has."""
        with self._phase_lock:
            self._agent_phase()
            self.phase = "grading"
        # A command started just before is killed; its action is waited for, then whatever it
        # may have started in the meantime is killed too.
        self.session.kill_all()
        with self._phase_lock:
            self._phase_lock.wait_for(lambda: self._busy == 0, timeout=GRADING_WAIT_S)

    def evaluate(self) -> dict[str, Any]:
        """Run the verifier as a trial does; the reward is what the verifier wrote, or None."""
        self._begin_grading()
        try:
            return self._verify()
        finally:
            self.phase = "done" if self.phase == "grading" else self.phase

    def submit(self) -> dict[str, Any]:
        """The agent's own, single grading: :meth:`evaluate` without the verifier's output
        (the reward and its error only; no test names, no log)."""
        result = self.evaluate()
        keep = ("reward", "rewards", "reward_source", "warnings", "error", "verification")
        return {k: result[k] for k in keep if k in result}

    def _verify(self) -> dict[str, Any]:
        # Nothing the agent left running may touch the verifier's files.
        self.session.kill_all()
        checked = verify_after_agent(
            self.builder.backend,
            self.builder.build(self.task),
            serving_spec(self.task, self.builder.name),
            self.session,
            self.task,
            self.workdir,
        )
        self.session = checked.session
        reading = checked.reading
        output, exit_code = checked.stdout, checked.exit_code
        self.last_reward = reading.reward
        return {
            "verification": checked.verification.to_json(),
            "reward": reading.reward,
            "rewards": reading.rewards,
            "reward_details": reading.details,
            "reward_source": reading.source,
            "error": reading.error,
            "warnings": reading.warnings,
            "stdout": _clip(output),
            "exit_code": exit_code,
        }

    def solve(self) -> dict[str, Any]:
        """Run the reference solution (``/solution`` is mounted only while it runs)."""
        self._agent_phase()
        outcome = OracleAgent().run(self.session, self.task, self.agent_context)
        return {
            "stdout": outcome.output_tail,
            "exit_code": outcome.exit_code,
            "timed_out": outcome.timed_out,
        }

    def close(self) -> None:
        if self.phase != "closed":
            self.phase = "closed"
            self.session.close()
