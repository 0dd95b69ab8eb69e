"""The OpenEnv environment over an :class:`~repogym.openenv.episode.Episode` (imports ``openenv``).

Separation of agent and orchestration actions: the published action schema lists only the agent
actions (``exec``, ``read``, ``write``, ``list``, and ``submit`` where the server allows it).
``evaluate`` and ``solve`` are accepted only with the server's orchestrator token in
``action.metadata["orchestrator_token"]``; the token is given to the trainer, never to the
model, so an agent's tool calls cannot grade or solve. A server started with agent submit
(``repogym serve --agent-submit``) also accepts ``submit`` from the agent: terminal, once per
episode, the reward only.

Rewards: every observation before the end carries ``reward = 0.0``; the terminal one carries the
verifier's reward (``None`` with ``error`` when the verifier wrote none: never synthesized).
"""

from __future__ import annotations

import hmac
import threading
import weakref
from typing import Any

from pydantic import Field, field_validator, model_validator

from repogym.openenv import require_openenv

require_openenv()

from openenv.core.env_server.interfaces import Environment  # noqa: E402
from openenv.core.env_server.types import (  # noqa: E402
    Action,
    EnvironmentMetadata,
    Observation,
    State,
)

from repogym import __version__  # noqa: E402
from repogym.openenv.episode import (  # noqa: E402
    AGENT_ACTIONS,
    ORCHESTRATION_ACTIONS,
    SUBMIT_ACTION,
    ActionRefused,
    Episode,
    TaskEnvironmentBuilder,
)
from repogym.openenv.tasks import TaskSet  # noqa: E402

TOKEN_KEY = "orchestrator_token"


class RepoAction(Action):
    """``{"type": "exec"|"read"|"write"|"list"|"submit", …}``; evaluate/solve are trainer-only."""

    type: str = Field(description="Action kind.", json_schema_extra={"enum": list(AGENT_ACTIONS)})
    command: str | None = Field(default=None, description="exec: shell command (bash).")
    timeout_s: float | None = Field(default=None, gt=0, description="exec: timeout in seconds.")
    path: str | None = Field(
        default=None, description="read/write/list: path inside the working directory."
    )
    content: str | None = Field(default=None, description="write: the new file content.")

    @field_validator("type")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in (*AGENT_ACTIONS, SUBMIT_ACTION, *ORCHESTRATION_ACTIONS):
            raise ValueError(f"unknown action type {value!r}; use one of {list(AGENT_ACTIONS)}")
        return value

    @model_validator(mode="after")
    def _fields(self) -> RepoAction:
        need = {"exec": ("command",), "read": ("path",), "write": ("path", "content")}
        need["list"] = ("path",)
        for name in need.get(self.type, ()):
            if getattr(self, name) is None:
                raise ValueError(f"{self.type} action needs {name!r}")
        return self


class SubmitRepoAction(RepoAction):
    """The action schema of a server with agent submit: the agent actions and ``submit``."""

    type: str = Field(
        description="Action kind; submit ends the episode with the verifier's reward (once).",
        json_schema_extra={"enum": [*AGENT_ACTIONS, SUBMIT_ACTION]},
    )


class RepoObservation(Observation):
    """What an action returns. ``reward`` is 0.0 until the end; the terminal ``evaluate`` (or
    ``submit``) sets it from the verifier's own files only. ``reward_details`` is
    ``reward-details.json`` as written (it is also in ``metadata``, which OpenEnv's wire format
    leaves out)."""

    action: str | None = None
    task_id: str | None = None
    workdir: str | None = None
    instruction: str | None = None
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    content: str | None = None
    entries: list[dict[str, Any]] | None = None
    rewards: dict[str, float] | None = None
    reward_details: dict[str, Any] | None = None
    verification: dict[str, Any] | None = None
    """``evaluate``: how the verifier ran (``clean_room`` with the applied and dropped paths of
    the agent's change, or ``in_place``)."""
    error: str | None = None


class RepoState(State):
    """Episode id, task id, step count, phase (``idle``/``agent``/``grading``/``done``/
    ``closed``)."""

    task_id: str | None = None
    phase: str = "idle"


class Pool:
    """Shared by every environment of a server: tasks, builder, token, live episodes."""

    def __init__(
        self,
        tasks: TaskSet,
        builder: TaskEnvironmentBuilder,
        orchestrator_token: str | None,
        agent_submit: bool = False,
    ) -> None:
        self.tasks = tasks
        self.builder = builder
        self.orchestrator_token = orchestrator_token
        self.agent_submit = agent_submit
        """Whether agents may send ``submit`` (terminal, once per episode)."""
        self._envs: weakref.WeakSet[RepoEnvironment] = weakref.WeakSet()
        self._lock = threading.Lock()

    def add(self, env: RepoEnvironment) -> None:
        with self._lock:
            self._envs.add(env)

    def open_sandboxes(self) -> int:
        """Sessions whose sandbox is still open."""
        with self._lock:
            envs = list(self._envs)
        return sum(1 for e in envs if e.episode is not None)

    def close_all(self) -> None:
        """Close every environment's sandbox (server shutdown)."""
        with self._lock:
            envs = list(self._envs)
        for env in envs:
            env.close()


class RepoEnvironment(Environment[RepoAction, RepoObservation, RepoState]):
    """One OpenEnv session: one sandbox at a time, over a task of the served set."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, pool: Pool) -> None:
        super().__init__()
        self.pool = pool
        self.episode: Episode | None = None
        self._lock = threading.Lock()
        pool.add(self)

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        index: int | None = None,
        **kwargs: Any,
    ) -> RepoObservation:
        """Start a fresh sandbox for a task (by ``task_id``, ``index`` or ``seed``)."""
        task = self.pool.tasks.get(task_id=task_id, index=index, seed=seed)
        self.close()
        episode = Episode.start(task, self.pool.builder, episode_id=episode_id)
        with self._lock:
            self.episode = episode
        return RepoObservation(
            action="reset",
            task_id=task.id,
            workdir=episode.workdir,
            instruction=task.instruction(),
            reward=0.0,
            metadata={"task_name": task.name, "episode_id": episode.episode_id},
        )

    def step(
        self, action: RepoAction, timeout_s: float | None = None, **kwargs: Any
    ) -> RepoObservation:
        """Apply one action; refused actions come back as an observation with ``error``."""
        episode = self.episode
        if episode is None:
            return RepoObservation(
                action=action.type, reward=0.0, error="no episode: call reset first"
            )
        episode.step_count += 1
        obs = RepoObservation(action=action.type, task_id=episode.task.id, reward=0.0)
        try:
            if action.type in ORCHESTRATION_ACTIONS:
                self._check_token(action)
            elif action.type == SUBMIT_ACTION and not self.pool.agent_submit:
                raise ActionRefused(
                    "submit is off on this server (the trainer grades with evaluate); "
                    "agents have exec, read, write, list"
                )
            result = self._dispatch(episode, action, timeout_s)
        except (ActionRefused, PermissionError, FileNotFoundError, IsADirectoryError) as exc:
            obs.error = str(exc) or type(exc).__name__
            obs.done = episode.phase == "done"
            if obs.done:  # the grade already given, repeated; the verifier is not run again
                obs.reward = episode.last_reward
            return obs
        if action.type == SUBMIT_ACTION:
            obs.reward = result.pop("reward")
            obs.done = True
            obs.metadata = {
                "reward_source": result.pop("reward_source", None),
                "warnings": result.pop("warnings", []),
            }
        elif action.type == "evaluate":
            obs.reward = result.pop("reward")
            obs.done = True
            obs.metadata = {
                "reward_details": result.get("reward_details"),
                "rewards": result.get("rewards"),
                "reward_source": result.pop("reward_source", None),
                "warnings": result.pop("warnings", []),
                "verification": result.get("verification"),
            }
        for key, value in result.items():
            setattr(obs, key, value)
        return obs

    def _check_token(self, action: RepoAction) -> None:
        expected = self.pool.orchestrator_token
        if expected is None:
            return
        given = action.metadata.get(TOKEN_KEY)
        if not isinstance(given, str) or not hmac.compare_digest(given, expected):
            raise ActionRefused(
                f"{action.type!r} is an orchestration action: only the trainer may send it "
                f"(with metadata.{TOKEN_KEY}); agents have exec, read, write, list"
            )

    @staticmethod
    def _dispatch(episode: Episode, action: RepoAction, timeout_s: float | None) -> dict[str, Any]:
        match action.type:
            case "exec":
                return episode.exec(action.command or "", action.timeout_s or timeout_s)
            case "read":
                return episode.read(action.path or "")
            case "write":
                return episode.write(action.path or "", action.content or "")
            case "list":
                return episode.list(action.path or "")
            case "evaluate":
                return episode.evaluate()
            case "submit":
                return episode.submit()
            case "solve":
                return episode.solve()
        raise ActionRefused(f"unknown action {action.type!r}")

    @property
    def state(self) -> RepoState:
        episode = self.episode
        if episode is None:
            return RepoState(phase="idle")
        return RepoState(
            episode_id=episode.episode_id,
            step_count=episode.step_count,
            task_id=episode.task.id,
            phase=episode.phase,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        tasks = self.pool.tasks
        actions = ", ".join(agent_action_names(self.pool.agent_submit))
        return EnvironmentMetadata(
            name="repogym",
            description=(
                f"repogym coding tasks from {tasks.root.name or tasks.root} ({len(tasks)} tasks); "
                f"agent actions: {actions}"
            ),
            version=__version__,
        )

    def close(self) -> None:
        """Close this session's sandbox (idempotent)."""
        with self._lock:
            episode, self.episode = self.episode, None
        if episode is not None:
            episode.close()


def agent_action_names(agent_submit: bool = False) -> list[str]:
    """The actions an agent may send (``submit`` only where the server allows it)."""
    return [*AGENT_ACTIONS, *([SUBMIT_ACTION] if agent_submit else [])]


def agent_tools(agent_submit: bool = False) -> list[dict[str, Any]]:
    """The tool list to show a model: agent actions only (no evaluate, no solve); ``submit``
    when the server allows it."""
    submit = {
        "name": SUBMIT_ACTION,
        "description": "Submit the work: runs the hidden tests once and ends the episode.",
        "parameters": {"type": "object", "properties": {}},
    }
    return _file_tools() + ([submit] if agent_submit else [])


def _file_tools() -> list[dict[str, Any]]:
    path = {"type": "string", "description": "Path, relative to the working directory."}
    return [
        {
            "name": "exec",
            "description": "Run a bash command in the working directory.",
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string"},
                    "timeout_s": {"type": "number"},
                },
                "required": ["command"],
            },
        },
        {
            "name": "read",
            "description": "Read a UTF-8 text file.",
            "parameters": {"type": "object", "properties": {"path": path}, "required": ["path"]},
        },
        {
            "name": "write",
            "description": "Write a text file (replaces it).",
            "parameters": {
                "type": "object",
                "properties": {"path": path, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
        {
            "name": "list",
            "description": "List a folder's entries.",
            "parameters": {"type": "object", "properties": {"path": path}, "required": ["path"]},
        },
    ]
