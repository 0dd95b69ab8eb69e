"""Agents a trial can run: ``oracle``, ``nop``, ``command:<shell>`` and ``llm:<provider>/<model>``
(the built-in tool-calling agent, :mod:`repogym.run.llm_agent`).

An agent acts only through the sandbox session it is given, in the agent phase, where ``/tests``
and ``/solution`` do not exist. The oracle is the one exception by design: it is the reference
solution, so it runs with ``/solution`` mounted (and removed again before the verifier).
"""

from __future__ import annotations

import functools
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from repogym.plugins import PluginError, Registry, UnknownPlugin, instance_of
from repogym.sandbox import Session
from repogym.taskdir import Task
from repogym.taskdir.mcp_servers import McpServer


@dataclass
class AgentOutcome:
    exit_code: int | None = None
    timed_out: bool = False
    duration_s: float = 0.0
    output_tail: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    """Why the agent could not go on (e.g. its model endpoint failed); the trial records it as
    its exception and still runs the verifier on what the agent left."""


@dataclass
class AgentContext:
    """What the trial tells the agent about where and how to act."""

    workdir: str
    timeout_s: float
    user: str | None
    network: bool
    instruction: str
    solution_dir: Path | None = None
    """The oracle's ``/solution`` when not the task's ``solution/`` (a step's own)."""
    mcp_servers: list[McpServer] = field(default_factory=list)
    """The task's ``[[environment.mcp_servers]]``: an HTTP server's URL names one of the task's
    services (reachable from the agent's session by that name); a ``stdio`` server is a command
    the agent starts in its session. The built-in agents do not use them yet."""
    logs_dir: Path | None = None
    """The trial's ``agent/`` folder on the host (trajectories go there); None when unrecorded."""
    trial_name: str | None = None
    on_event: Callable[[str, dict[str, Any]], None] | None = None
    """Told of each step an agent takes (the built-in LLM agent: each model call and tool
    call with its output), for live views; None when nobody watches."""


class Agent(Protocol):
    name: str

    def run(self, session: Session, task: Task, ctx: AgentContext) -> AgentOutcome: ...


def _tail(text: str, limit: int = 4000) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


class NopAgent:
    """Does nothing: the verifier must give 0."""

    name = "nop"

    def run(self, session: Session, task: Task, ctx: AgentContext) -> AgentOutcome:
        return AgentOutcome(exit_code=0)


@functools.lru_cache(maxsize=64)
def shell_syntax_error(command: str) -> str | None:
    """bash's complaint about ``command``'s syntax (read, never run: ``bash -n``), or None; None
    too where the host has no bash (the sandbox then reports it)."""
    bash = shutil.which("bash")
    if bash is None:
        return None
    res = subprocess.run(
        [bash, "-n", "-c", command], capture_output=True, text=True, timeout=10, check=False
    )
    if res.returncode == 0:
        return None
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    return lines[-1].split(": ", 1)[-1] if lines else f"bash -n exit {res.returncode}"


class CommandAgent:
    """Runs one shell command in the working directory, as the agent user, with the agent's
    network policy and timeout. ``REPOGYM_INSTRUCTION`` holds the instruction text."""

    def __init__(self, command: str) -> None:
        if not command.strip():
            raise ValueError("command agent needs a command: --agent command:'<shell>'")
        problem = shell_syntax_error(command)
        if problem:
            raise ValueError(f"command agent: the shell cannot parse {command!r}: {problem}")
        self.command = command
        self.name = "command"

    def run(self, session: Session, task: Task, ctx: AgentContext) -> AgentOutcome:
        res = session.exec(
            self.command,
            timeout_s=ctx.timeout_s,
            cwd=ctx.workdir,
            user=ctx.user,
            network=ctx.network,
            env={"REPOGYM_INSTRUCTION": ctx.instruction},
        )
        return AgentOutcome(
            exit_code=res.exit_code,
            timed_out=res.timed_out,
            duration_s=res.duration_s,
            output_tail=_tail(res.stdout + res.stderr),
            metadata={"command": self.command},
        )


class OracleAgent:
    """Applies the reference solution: ``/solution/solve.sh`` with ``[solution].env``."""

    name = "oracle"

    def solution(self, task: Task) -> Path:
        """The host folder uploaded to ``/solution``."""
        return task.solution_dir

    def run(self, session: Session, task: Task, ctx: AgentContext) -> AgentOutcome:
        own = ctx.solution_dir is not None and (ctx.solution_dir / "solve.sh").is_file()
        folder = ctx.solution_dir if own else task.solution_dir
        assert folder is not None
        if not (folder / "solve.sh").is_file():
            raise FileNotFoundError(f"{task.id}: solution/solve.sh is missing: no oracle to run")
        session.upload(folder if own else self.solution(task), "/solution")
        try:
            res = session.exec(
                ["bash", "/solution/solve.sh"],
                timeout_s=ctx.timeout_s,
                cwd=ctx.workdir,
                user=ctx.user,
                network=ctx.network,
                env=dict(task.config.solution.env),
            )
        finally:
            session.kill_all()
            session.remove("/solution")
        return AgentOutcome(
            exit_code=res.exit_code,
            timed_out=res.timed_out,
            duration_s=res.duration_s,
            output_tail=_tail(res.stdout + res.stderr),
        )


class PatchAgent(OracleAgent):
    """Applies another patch the way the oracle applies the gold (the task's ``solve.sh`` with
    ``patch.diff`` replaced): how the verify gate runs mutants of the gold patch."""

    name = "patch"

    def __init__(self, patch: str, label: str = "patch") -> None:
        self.patch = patch
        self.label = label
        self._tmp: Path | None = None

    def solution(self, task: Task) -> Path:
        tmp = Path(tempfile.mkdtemp(prefix="repogym-patch-"))
        folder = tmp / "solution"
        shutil.copytree(task.solution_dir, folder, symlinks=True)
        (folder / "patch.diff").write_bytes(self.patch.encode("utf-8", "surrogateescape"))
        self._tmp = tmp
        return folder

    def run(self, session: Session, task: Task, ctx: AgentContext) -> AgentOutcome:
        try:
            outcome = super().run(session, task, ctx)
        finally:
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None
        outcome.metadata["patch"] = self.label
        return outcome


@dataclass(frozen=True)
class AgentKind:
    """How one agent name makes agents: ``make(argument, options)``, where ``argument`` is what
    follows ``name:`` in the spec (None without a colon) and ``options`` are ``--agent-opt``."""

    make: Callable[[str | None, dict[str, str] | None], Agent]
    argument: bool = False
    """The spec is ``name:<argument>`` (else the bare name)."""
    options: bool = False
    """The agent takes ``--agent-opt`` options."""


def _llm_agent(argument: str | None, options: dict[str, str] | None) -> Agent:
    from repogym.run.llm_agent import LLMAgent

    return LLMAgent(argument or "", options)


AGENTS: Registry[AgentKind] = Registry(
    "agent",
    group="repogym.agents",
    builtins={
        "oracle": AgentKind(lambda _arg, _opts: OracleAgent()),
        "nop": AgentKind(lambda _arg, _opts: NopAgent()),
        "command": AgentKind(lambda arg, _opts: CommandAgent(arg or ""), argument=True),
        "llm": AgentKind(_llm_agent, argument=True, options=True),
    },
    check=instance_of(AgentKind, "a repogym.run.agents.AgentKind"),
)
"""Agent names (the part of ``--agent`` before a colon); plug-ins: entry points of the
``repogym.agents`` group naming an :class:`AgentKind`."""


def make_agent(spec: str, options: dict[str, str] | None = None) -> Agent:
    """``oracle`` | ``nop`` | ``command:<shell>`` | ``llm:<provider>/<model>`` → an agent.
    ``options`` (``--agent-opt``) are taken by the ``llm`` agent only."""
    name, colon, argument = spec.partition(":")
    try:
        kind: AgentKind | None = AGENTS.get(name)
    except UnknownPlugin:
        kind = None
    except PluginError as exc:
        raise ValueError(str(exc)) from None
    if options and (kind is None or not kind.options):
        raise ValueError(f"--agent-opt is for llm:<provider>/<model> agents, not {spec!r}")
    if kind is None or kind.argument != bool(colon):
        raise ValueError(
            f"unknown agent {spec!r}: use oracle, nop, llm:<provider>/<model> or command:'<shell>' "
            f"(e.g. --agent {shlex.quote('command:echo hi > out.txt')})"
        )
    return kind.make(argument if colon else None, options)
