"""The built-in agent's tools and the workspaces they act on.

Five tools, described to the model by :data:`TOOLS` (OpenAI's function-calling schema):
``bash``, ``read_file``, ``write_file``, ``str_replace`` and ``finish``. They act on a
:class:`Workspace`: a trial's sandbox session (:class:`SessionWorkspace`, as the task's agent
user, with the agent phase's network policy; an OpenEnv server's episodes act through it too)
or a remote OpenEnv episode (:class:`EpisodeWorkspace`, for :mod:`repogym.run.openenv_rollout`).
Nothing a tool does reaches past what the agent's own shell could do: files are written as the
agent user, and ``/tests`` and ``/solution`` do not exist in the agent phase.
"""

from __future__ import annotations

import errno
import posixpath
from dataclasses import dataclass
from typing import Any, Protocol

from repogym.run.agents import AgentContext
from repogym.sandbox import DirEntry, ExecResult, Session

__all__ = [
    "TOOLS",
    "CommandOutput",
    "EpisodeWorkspace",
    "SessionWorkspace",
    "ToolError",
    "ToolResult",
    "Workspace",
    "run_tool",
    "truncate",
]

MAX_FILE_BYTES = 2_000_000


def _first_line(exc: BaseException) -> str:
    lines = str(exc).splitlines()
    return (lines[0] if lines else type(exc).__name__)[:200]


class ToolError(Exception):
    """A tool call that cannot be done; the message goes back to the model."""


@dataclass(frozen=True)
class CommandOutput:
    output: str
    exit_code: int | None
    timed_out: bool = False


class Workspace(Protocol):
    """Where the tools act: a working directory with a shell and files."""

    workdir: str

    def bash(self, command: str, timeout_s: float) -> CommandOutput: ...

    def read_text(self, path: str) -> str: ...

    def write_text(self, path: str, content: str) -> None: ...


@dataclass(frozen=True)
class ToolResult:
    content: str
    is_error: bool = False
    finished: bool = False


TOOLS: list[dict[str, Any]] = [
    {
        "name": "bash",
        "description": (
            "Run a shell command with bash in the working directory and return its exit code, "
            "stdout and stderr. Each call starts a fresh non-interactive shell (no state such as "
            "`cd` or variables carries over; chain commands with && instead). Long output is "
            "truncated in the middle."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command to run."},
                "timeout": {
                    "type": "number",
                    "description": "Seconds before the command is killed (default 120).",
                },
            },
            "required": ["command"],
        },
    },
    {
        "name": "read_file",
        "description": (
            "Read a text file. Lines are returned numbered like `cat -n` (the numbers are not "
            "part of the file). Give start_line/end_line (1-based, inclusive) for a part."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Relative to the working directory."},
                "start_line": {"type": "integer"},
                "end_line": {"type": "integer"},
            },
            "required": ["path"],
        },
    },
    {
        "name": "write_file",
        "description": "Create or overwrite a text file with the given content.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Relative to the working directory."},
                "content": {"type": "string"},
            },
            "required": ["path", "content"],
        },
    },
    {
        "name": "str_replace",
        "description": (
            "Edit a file by replacing old_str, which must occur exactly once in the file "
            "(include surrounding lines to make it unique), with new_str."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Relative to the working directory."},
                "old_str": {"type": "string"},
                "new_str": {"type": "string"},
            },
            "required": ["path", "old_str", "new_str"],
        },
    },
    {
        "name": "finish",
        "description": "Call when the task is done. Ends the episode; your changes are graded.",
        "parameters": {
            "type": "object",
            "properties": {
                "summary": {"type": "string", "description": "What you changed, in brief."}
            },
        },
    },
]
TOOL_NAMES = tuple(t["name"] for t in TOOLS)


def truncate(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its head and tail with a note."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    omitted = len(text) - head - tail
    return (
        text[:head]
        + f"\n[… {omitted} characters omitted: the output was {len(text)} characters …]\n"
        + text[-tail:]
    )


def _str(args: dict[str, Any], name: str, *, required: bool = True) -> str:
    value = args.get(name)
    if value is None:
        if required:
            raise ToolError(f"missing argument {name!r}")
        return ""
    if not isinstance(value, str):
        raise ToolError(f"argument {name!r} must be a string")
    return value


def _line(args: dict[str, Any], name: str) -> int | None:
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise ToolError(f"argument {name!r} must be an integer")
    return int(value)


def run_tool(
    name: str,
    args: dict[str, Any],
    ws: Workspace,
    *,
    default_timeout_s: float,
    max_timeout_s: float,
    max_chars: int,
) -> ToolResult:
    """Do one tool call; every failure becomes an error result the model can read."""
    try:
        if name == "bash":
            command = _str(args, "command")
            timeout = args.get("timeout", default_timeout_s)
            if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
                raise ToolError("argument 'timeout' must be a positive number of seconds")
            timeout = min(float(timeout), max_timeout_s)
            res = ws.bash(command, timeout)
            if res.timed_out:
                head = f"command timed out after {timeout:g} s and was killed"
            else:
                head = f"exit code: {res.exit_code}"
            return ToolResult(
                truncate(f"{head}\n{res.output}", max_chars), is_error=res.exit_code != 0
            )
        if name == "read_file":
            path = _str(args, "path")
            start, end = _line(args, "start_line"), _line(args, "end_line")
            lines = ws.read_text(path).splitlines()
            first = max(1, start or 1)
            last = min(len(lines), end or len(lines))
            if lines and first > len(lines):
                raise ToolError(f"{path} has {len(lines)} lines; start_line {first} is past it")
            body = "\n".join(f"{n:6d}\t{lines[n - 1]}" for n in range(first, last + 1))
            return ToolResult(truncate(body or "(empty file)", max_chars))
        if name == "write_file":
            path, content = _str(args, "path"), _str(args, "content")
            ws.write_text(path, content)
            return ToolResult(f"wrote {len(content.encode())} bytes to {path}")
        if name == "str_replace":
            path = _str(args, "path")
            old, new = _str(args, "old_str"), _str(args, "new_str")
            if not old:
                raise ToolError("old_str must not be empty")
            text = ws.read_text(path)
            count = text.count(old)
            if count == 0:
                raise ToolError(f"old_str was not found in {path}; read the file and copy it")
            if count > 1:
                raise ToolError(
                    f"old_str occurs {count} times in {path}; include more lines to make it unique"
                )
            updated = text.replace(old, new, 1)
            ws.write_text(path, updated)
            at = text.index(old)
            first = text.count("\n", 0, at) + 1
            shown = updated.splitlines()[max(0, first - 3) : first + new.count("\n") + 3]
            snippet = "\n".join(
                f"{n:6d}\t{line}" for n, line in enumerate(shown, start=max(1, first - 2))
            )
            return ToolResult(truncate(f"edited {path}:\n{snippet}", max_chars))
        if name == "finish":
            summary = args.get("summary")
            return ToolResult(str(summary or "finished"), finished=True)
        raise ToolError(f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}")
    except ToolError as exc:
        return ToolResult(f"error: {exc}", is_error=True)


class SessionWorkspace:
    """The tools on a trial's sandbox session: commands run as the task's agent user, in the
    working directory, with the agent phase's network policy; files are read and written with
    that user's rights (a non-root agent gains nothing over its own shell).

    The one place where an agent's shell and file actions meet a sandbox session: the built-in
    agent's tools use :meth:`bash`, :meth:`read_text` and :meth:`write_text`; an OpenEnv
    episode (:class:`repogym.openenv.episode.Episode`) uses the raw :meth:`run`,
    :meth:`read_bytes`, :meth:`write_bytes` and :meth:`listdir`, with every file lookup confined
    below ``beneath`` (its working directory) by the sandbox."""

    def __init__(self, session: Session, ctx: AgentContext, *, beneath: str | None = None) -> None:
        self.session = session
        self.ctx = ctx
        self.workdir = ctx.workdir
        self.beneath = beneath

    @property
    def user(self) -> str:
        """Whose rights the file actions have: the agent user (root when the task names none)."""
        return self.ctx.user or "root"

    def path(self, path: str) -> str:
        if not path.strip():
            raise ToolError("path is empty")
        return posixpath.normpath(posixpath.join(self.workdir, path))

    # -- raw actions (sandbox errors pass through) --------------------------------------

    def run(self, command: str, timeout_s: float) -> ExecResult:
        """``command`` in the working directory, as the agent user, with the agent's network."""
        return self.session.exec(
            command,
            timeout_s=timeout_s,
            cwd=self.workdir,
            user=self.ctx.user,
            network=self.ctx.network,
        )

    def read_bytes(self, full: str) -> bytes:
        """The file at the absolute path ``full``, read with the agent user's rights."""
        return self.session.read(full, user=self.user, beneath=self.beneath)

    def write_bytes(self, full: str, content: bytes | str) -> None:
        """Write ``content`` to the absolute path ``full`` with the agent user's rights."""
        self.session.write(full, content, user=self.user, beneath=self.beneath)

    def listdir(self, full: str) -> list[DirEntry]:
        """The entries of the folder at the absolute path ``full``, as the agent user."""
        return self.session.listdir(full, user=self.user, beneath=self.beneath)

    # -- the built-in agent's tools ----------------------------------------------------

    def bash(self, command: str, timeout_s: float) -> CommandOutput:
        res = self.run(command, timeout_s)
        output = res.stdout
        if res.stderr:
            output += ("\n" if output and not output.endswith("\n") else "") + res.stderr
        return CommandOutput(output, res.exit_code, res.timed_out)

    def read_text(self, path: str) -> str:
        full = self.path(path)
        try:
            # With the agent user's rights, looked up inside the sandbox only: the kernel
            # decides, at the moment of the read (no check beforehand that a link could race).
            data = self.read_bytes(full)
        except (PermissionError, IsADirectoryError):
            raise ToolError(f"{path}: not a readable file") from None
        except (OSError, RuntimeError, ValueError) as exc:
            if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EISDIR):
                raise ToolError(f"{path}: not a readable file") from None
            raise ToolError(f"{path}: cannot read: {_first_line(exc)}") from None
        if len(data) > MAX_FILE_BYTES:
            raise ToolError(f"{path}: {len(data)} bytes; use bash (head, sed -n) to read parts")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{path}: not UTF-8 text; use bash to inspect it") from None

    def write_text(self, path: str, content: str) -> None:
        full = self.path(path)
        try:
            # As the agent user's shell ``>`` would: parents created, permissions checked by
            # the kernel, the lookup confined to the sandbox.
            self.write_bytes(full, content)
        except (OSError, RuntimeError, ValueError) as exc:
            raise ToolError(f"{path}: cannot write: {_first_line(exc)}") from None


class EpisodeWorkspace:
    """The tools as OpenEnv actions on one remote episode (``repogym rollout``): ``exec``,
    ``read`` and ``write`` steps on an OpenEnv client whose ``step`` returns an observation.
    Paths stay inside the episode's working directory: the server refuses the rest (through
    its own :class:`SessionWorkspace`), and the refusal goes back to the model."""

    def __init__(self, env: Any, workdir: str) -> None:
        self.env = env
        self.workdir = workdir

    def _step(self, action: dict[str, Any]) -> dict[str, Any]:
        result = self.env.step(action)
        obs: dict[str, Any] = result.observation
        return obs

    def bash(self, command: str, timeout_s: float) -> CommandOutput:
        obs = self._step({"type": "exec", "command": command, "timeout_s": timeout_s})
        if obs.get("error"):
            return CommandOutput(f"error: {obs['error']}", 1)
        output = obs.get("stdout") or ""
        if obs.get("stderr"):
            output += ("\n" if output and not output.endswith("\n") else "") + obs["stderr"]
        return CommandOutput(output, obs.get("exit_code"), bool(obs.get("timed_out")))

    def read_text(self, path: str) -> str:
        obs = self._step({"type": "read", "path": path})
        if obs.get("error"):
            raise ToolError(str(obs["error"]))
        return str(obs.get("content") or "")

    def write_text(self, path: str, content: str) -> None:
        obs = self._step({"type": "write", "path": path, "content": content})
        if obs.get("error"):
            raise ToolError(str(obs["error"]))
