"""The server: OpenEnv's FastAPI app over :class:`RepoEnvironment`, plus the Task API.

Routes: WebSocket ``/ws`` (one episode and one sandbox per connection), OpenEnv's HTTP
``/reset`` ``/step`` ``/state`` (stateless), ``/health``, ``/schema``, ``/metadata``, and
``/tasks``, ``/tasks/{index}``, ``/list_environments``, ``/{env}/tasks``, ``/repogym/status``.
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path
from typing import Any

from repogym.openenv import require_openenv

require_openenv()

from fastapi import FastAPI, HTTPException  # noqa: E402
from openenv.core.env_server.http_server import create_fastapi_app  # noqa: E402
from openenv.core.env_server.types import ConcurrencyConfig  # noqa: E402

from repogym.openenv import orphans  # noqa: E402
from repogym.openenv.environment import (  # noqa: E402
    Pool,
    RepoAction,
    RepoEnvironment,
    RepoObservation,
    SubmitRepoAction,
    agent_tools,
)
from repogym.openenv.episode import TaskEnvironmentBuilder  # noqa: E402
from repogym.openenv.tasks import TaskSet  # noqa: E402
from repogym.sandbox import Sandbox, SandboxError, get_backend  # noqa: E402
from repogym.taskdir.trust import HostLimits  # noqa: E402

ENV_NAME = "repogym"
log = logging.getLogger("repogym.openenv")


def build_app(
    path: Path | str | None = None,
    *,
    sandbox: str | None = None,
    max_sessions: int = 8,
    idle_timeout_s: float | None = 900.0,
    orchestrator_token: str | None = None,
    limits: HostLimits | None = None,
    agent_submit: bool | None = None,
) -> FastAPI:
    """A FastAPI app serving the tasks under ``path`` as an OpenEnv environment.

    Defaults come from the environment so a deployed package's ``server/app.py`` can be two
    lines: ``REPOGYM_TASKS`` (else ``./tasks``), ``REPOGYM_SANDBOX`` (else ``local``),
    ``REPOGYM_MAX_SESSIONS``, ``REPOGYM_ORCHESTRATOR_TOKEN`` (else a random token, logged once:
    orchestration actions are never open to anyone who can reach the socket), ``REPOGYM_PASS_ENV``
    (comma-separated host variables tasks' verifiers may take; see :mod:`repogym.taskdir.trust`),
    ``REPOGYM_AGENT_SUBMIT=1`` (agents may ``submit``: terminal, once per episode; off by default).
    Tasks refused by the trust boundary raise :class:`~repogym.taskdir.trust.UntrustedTask`.

    The sandbox backend is made now when it can be; when it cannot (no Docker engine, no docker
    SDK) the app still starts and serves the task list, and ``reset`` answers with the reason
    (trying again each time). On the ``docker`` backend, task containers are labelled with this
    server's identity and owner, and those a stopped server of the same identity left behind are
    removed once the backend is made (:mod:`repogym.openenv.orphans`).
    """
    root = Path(path if path is not None else os.environ.get("REPOGYM_TASKS", "tasks"))
    backend_name = sandbox or os.environ.get("REPOGYM_SANDBOX", "local")
    max_sessions = int(os.environ.get("REPOGYM_MAX_SESSIONS", max_sessions))
    token = orchestrator_token or os.environ.get("REPOGYM_ORCHESTRATOR_TOKEN")
    if not token:
        token = secrets.token_urlsafe(24)
        log.warning("orchestrator token (give it to the trainer, not the agent): %s", token)
    if agent_submit is None:
        agent_submit = os.environ.get("REPOGYM_AGENT_SUBMIT", "").lower() in ("1", "true", "yes")
    pool = _pool(TaskSet.load(root, limits), backend_name, token)
    pool.agent_submit = agent_submit

    def factory() -> RepoEnvironment:
        return RepoEnvironment(pool)

    app = create_fastapi_app(
        factory,
        SubmitRepoAction if agent_submit else RepoAction,
        RepoObservation,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=max_sessions, session_timeout=idle_timeout_s
        ),
    )
    app.title = "repogym OpenEnv server"
    app.state.repogym_pool = pool

    async def _close_sandboxes() -> None:
        pool.close_all()

    # Every session's sandbox is closed when the server stops, not only when its socket closes.
    app.router.on_shutdown.append(_close_sandboxes)
    _task_routes(app, pool, backend_name, max_sessions)
    return app


def _pool(tasks: TaskSet, backend_name: str, token: str) -> Pool:
    """The episodes' pool over ``tasks``: the backend is made now when it can be (its
    containers labelled with this server's identity, a stopped twin's leftovers removed)."""
    identity = orphans.serve_identity(
        (t.id, (t.path / "task.toml").read_bytes()) for t in tasks.tasks
    )
    owner = orphans.server_owner()

    def make_backend() -> Sandbox:
        backend = get_backend(backend_name)
        orphans.mark(backend, identity, owner)
        orphans.reap(backend, identity, owner)
        return backend

    builder = TaskEnvironmentBuilder(make_backend, backend_name)
    try:
        builder.backend  # noqa: B018 - made now when it can be
    except SandboxError as exc:
        log.warning("%s; serving the task list only until it is", exc)
    return Pool(tasks, builder, token)


def _task_routes(app: FastAPI, pool: Pool, backend_name: str, max_sessions: int) -> None:
    """The Task API (``/tasks``, ``/{env}/tasks``, ``/list_environments``), the agent's tool
    list (``/tools``) and ``/repogym/status``."""
    tasks, builder = pool.tasks, pool.builder

    def task_list() -> dict[str, Any]:
        return {"tasks": [tasks.describe(i) for i in range(len(tasks))], "count": len(tasks)}

    def task_at(index: int) -> dict[str, Any]:
        if not 0 <= index < len(tasks):
            raise HTTPException(404, f"task index {index} out of range 0..{len(tasks) - 1}")
        info = tasks.describe(index)
        info["instruction"] = tasks.tasks[index].instruction()
        return info

    app.add_api_route("/tasks", task_list, methods=["GET"], tags=["Tasks"])
    app.add_api_route("/tasks/{index}", task_at, methods=["GET"], tags=["Tasks"])

    @app.get("/list_environments", tags=["Tasks"])
    def list_environments() -> dict[str, Any]:
        return {"environments": [{"name": ENV_NAME, "tasks": len(tasks)}]}

    @app.get("/{env}/tasks", tags=["Tasks"])
    def env_tasks(env: str) -> dict[str, Any]:
        if env != ENV_NAME:
            raise HTTPException(404, f"no environment {env!r}; this server has {ENV_NAME!r}")
        return task_list()

    @app.get("/{env}/tasks/{index}", tags=["Tasks"])
    def env_task_at(env: str, index: int) -> dict[str, Any]:
        if env != ENV_NAME:
            raise HTTPException(404, f"no environment {env!r}; this server has {ENV_NAME!r}")
        return task_at(index)

    @app.get("/tools", tags=["Tasks"])
    def tools() -> dict[str, Any]:
        """The agent-facing tool list (no evaluate, no solve; submit when allowed)."""
        return {"tools": agent_tools(pool.agent_submit)}

    @app.get("/repogym/status", tags=["Health"])
    def status() -> dict[str, Any]:
        return {
            "open_sandboxes": pool.open_sandboxes(),
            "max_sessions": max_sessions,
            "tasks": len(tasks),
            "sandbox": backend_name,
            "sandbox_ready": builder.ready,
            "sandbox_error": builder.error,
            "agent_submit": pool.agent_submit,
        }
