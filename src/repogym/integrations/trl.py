"""repogym tasks as TRL environments: ``GRPOTrainer(environment_factory=...)`` on repogym's sandbox.

TRL 1.16's ``trl.experimental.harbor`` reads a Harbor task tree (``HarborSpec``) and drives one
``HarborEnv`` per rollout: ``reset(task_dir)`` returns the prompt, the env's public methods are
the model's tools, ``reward`` is read once after the rollout. Its envs start Harbor's own
backends (Docker, cloud sandboxes). :class:`RepogymTRLEnv` is a ``HarborEnv`` that runs each task
on a repogym sandbox backend instead (``local``: bubblewrap, no Docker daemon; or ``docker``)
and verifies exactly as ``repogym run`` does: agent processes killed, the task's verification
mode honoured (a clean room carries only the agent's change to non-test files onto a fresh
copy of the environment), rewards read strictly from the verifier's files::

    spec = HarborSpec("out/tasks", agent="repogym.integrations.trl:RepogymTRLEnv",
                      environment_type="local")

The prompt is the task's ``instruction.md`` plus a short note on the tools; nothing of
``tests/`` or ``solution/`` reaches the model. A verifier that writes no reward gives ``nan``
(TRL's "no reward" value, which its trainer warns about), never a made-up number.

``trl`` is imported by this module only; ``harbor`` is not needed.
"""

from __future__ import annotations

import math
import posixpath
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trl.experimental.harbor import HarborEnv  # type: ignore[import-not-found]

from repogym.errors import RepogymError
from repogym.run.agent_tools import SessionWorkspace, ToolError
from repogym.run.agents import AgentContext
from repogym.run.preflight import UnsupportedTask, require_runnable
from repogym.run.trial import DEFAULT_WORKDIR, environment_spec, phase_network, verify_after_agent
from repogym.sandbox import BuiltEnvironment, EnvironmentSpec, Sandbox, SandboxError, get_backend
from repogym.taskdir import Task, TaskError, load_task

BACKENDS = ("local", "docker")
MAX_TOOL_OUTPUT = 8000
"""Characters of a tool's reply the model sees (TRL's bash harness uses the same bound)."""
TOOL_TIMEOUT_S = 180.0

TOOLS_NOTE = """

You work in `{workdir}`. Tools:
- `bash(command)`: run a shell command there (a fresh shell each call) and see its output.
- `read_file(path)`: read a text file (paths relative to `{workdir}`).
- `write_file(path, content)`: create or overwrite a text file with `content`.
Make the change the task asks for by editing the files. When you stop calling tools your
work is checked by the task's hidden tests; only your changes to the working tree count."""


class RepogymTRLError(RepogymError, RuntimeError):
    """repogym cannot run this task for TRL; the message is one line."""


class Backends:
    """Sandbox backends by name, made once per process, and each task's environment built
    once per backend (every env of a trainer shares them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._backends: dict[str, Sandbox] = {}
        self._built: dict[tuple[str, str], BuiltEnvironment] = {}
        self._task_locks: dict[tuple[str, str], threading.Lock] = {}

    def backend(self, name: str) -> Sandbox:
        if name not in BACKENDS:
            raise RepogymTRLError(
                f"repogym runs tasks on its own sandbox backends {BACKENDS}, not {name!r}: "
                'pass environment_type="local" (or "docker") to HarborSpec'
            )
        with self._lock:
            if name not in self._backends:
                self._backends[name] = get_backend(name)
            return self._backends[name]

    def build(self, backend: Sandbox, task: Task, spec: EnvironmentSpec) -> BuiltEnvironment:
        key = (backend.name, str(task.path.resolve()))
        with self._lock:
            lock = self._task_locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._built:
                self._built[key] = backend.build(spec)
            return self._built[key]


BACKEND_POOL = Backends()


@dataclass
class Rollout:
    """One task's sandbox session for one rollout, and what verifying it needs."""

    task: Task
    backend: Sandbox
    built: BuiltEnvironment
    spec: EnvironmentSpec
    workspace: SessionWorkspace

    @classmethod
    def start(cls, task_dir: str, backend: Sandbox) -> Rollout:
        task = load_task(Path(task_dir))
        require_runnable(task, backend=backend)
        spec = environment_spec(task, backend)
        built = BACKEND_POOL.build(backend, task, spec)
        session = backend.start(built, spec)
        ctx = AgentContext(
            workdir=spec.workdir or built.workdir or DEFAULT_WORKDIR,
            timeout_s=task.config.agent.timeout_sec,
            user=task.config.agent.user,
            network=phase_network(task, "agent"),
            instruction=task.instruction(),
        )
        workspace = SessionWorkspace(session, ctx, beneath=ctx.workdir)
        return cls(task, backend, built, spec, workspace)

    @property
    def workdir(self) -> str:
        return self.workspace.workdir

    def path(self, path: str) -> str:
        """``path`` against the working directory; a path that leaves it is refused."""
        full = self.workspace.path(path)
        root = self.workdir.rstrip("/") + "/"
        if full != self.workdir and not full.startswith(root) and self.workdir != "/":
            raise ToolError(f"{path}: outside the working directory {self.workdir}")
        return posixpath.relpath(full, self.workdir)

    def evaluate(self) -> dict[str, Any]:
        """Run the task's verifier as ``repogym run`` does; the reward is the verifier's, or
        None when it wrote none."""
        session = self.workspace.session
        session.kill_all()  # nothing the agent left running may touch the verifier's files
        checked = verify_after_agent(
            self.backend, self.built, self.spec, session, self.task, self.workdir
        )
        self.workspace.session = checked.session
        reading = checked.reading
        return {
            "reward": reading.reward,
            "rewards": reading.rewards,
            "reward_details": reading.details,
            "error": reading.error,
            "verification": checked.verification.to_json(),
        }

    def close(self) -> None:
        self.workspace.session.close()


def _one_line(text: str) -> str:
    return " ".join(text.split())[:1000]


def _clip(text: str) -> str:
    if len(text) <= MAX_TOOL_OUTPUT:
        return text
    return text[:MAX_TOOL_OUTPUT] + "\n... [truncated]"


class RepogymTRLEnv(HarborEnv):
    """A TRL ``HarborEnv`` on a repogym sandbox, with a coding harness (bash, read, write).

    ``environment_type`` is the repogym backend (``local`` or ``docker``); ``HarborSpec``
    passes its own ``environment_type`` here. Public methods other than ``reset`` are the
    model's tools (TRL lists them on the class), so helpers stay private.
    """

    _env: Rollout | None
    PROMPT_SUFFIX = ""
    """Set per task by ``reset`` (HarborEnv appends it to the instruction): the tools note."""

    def __init__(self, environment_type: str = "local") -> None:
        self._backend = BACKEND_POOL.backend(environment_type)
        super().__init__(environment_type=environment_type)
        self.last_evaluation: dict[str, Any] | None = None
        """The verifier's full result of the last rollout (rewards, details, error)."""

    # -- TRL lifecycle: HarborEnv's reset/reward run these on the env's own loop thread --

    async def _start(self, task_dir: str) -> str:
        await self._stop()
        self.last_evaluation = None
        try:
            rollout = Rollout.start(task_dir, self._backend)
        except (TaskError, UnsupportedTask, SandboxError, OSError, ValueError) as exc:
            name = Path(task_dir).name
            raise RepogymTRLError(f"repogym cannot run {name}: {_one_line(str(exc))}") from None
        self._env, self._task = rollout, rollout.task
        self.PROMPT_SUFFIX = TOOLS_NOTE.format(workdir=rollout.workdir)
        return rollout.task.instruction()

    async def _verify(self) -> float:
        result = self._rollout().evaluate()
        self.last_evaluation = result
        reward = result["reward"]
        return math.nan if reward is None else float(reward)

    async def _stop(self) -> None:
        rollout, self._env = self._env, None
        if rollout is not None:
            rollout.close()

    def __del__(self) -> None:
        try:
            rollout, self._env = getattr(self, "_env", None), None
            if rollout is not None:
                rollout.close()
        except Exception:  # noqa: BLE001 - best-effort teardown
            pass
        loop = getattr(self, "_loop", None)
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)

    # -- tools ------------------------------------------------------------------------

    def _rollout(self) -> Rollout:
        if self._env is None:
            raise RepogymTRLError("no task started: call reset(task_dir=...) first")
        return self._env

    def _exec(self, command: str, timeout: int = int(TOOL_TIMEOUT_S)) -> str:
        rollout = self._rollout()
        limit = min(float(timeout), rollout.task.config.agent.timeout_sec)
        res = rollout.workspace.bash(command, limit)
        out = res.output
        if res.timed_out:
            out += f"\n[timed out after {limit:g} s]"
        elif res.exit_code != 0:
            out += f"\n[exit code {res.exit_code}]"
        return _clip(out) or "(no output)"

    def bash(self, command: str) -> str:
        """
        Run a shell command in the repository's working directory and return its output.

        Args:
            command: The shell command to run (a fresh shell each call).

        Returns:
            The command's stdout and stderr, and its exit code when it is not zero.
        """
        return self._exec(command)

    def read_file(self, path: str) -> str:
        """
        Read a text file of the repository.

        Args:
            path: The file's path, relative to the working directory.

        Returns:
            The file's content, or why it cannot be read.
        """
        rollout = self._rollout()
        try:
            return _clip(rollout.workspace.read_text(rollout.path(path)))
        except ToolError as exc:
            return f"cannot read {path}: {exc}"

    def write_file(self, path: str, content: str) -> str:
        """
        Create or overwrite a text file of the repository.

        Args:
            path: The file's path, relative to the working directory.
            content: The file's complete new content.

        Returns:
            What was written, or why it could not be.
        """
        rollout = self._rollout()
        try:
            rel = rollout.path(path)
            rollout.workspace.write_text(rel, content)
        except ToolError as exc:
            return f"cannot write {path}: {exc}"
        return f"wrote {len(content.encode())} bytes to {posixpath.join(rollout.workdir, rel)}"


__all__ = ["BACKENDS", "TOOLS_NOTE", "RepogymTRLEnv", "RepogymTRLError", "Rollout"]
