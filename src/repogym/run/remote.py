"""What trials need on a worker that does not share the driver's disk (``--executor ray``).

Shipped **as data** in a unit's arguments (:class:`ShippedTask`, :class:`AgentSpec`): the task
folder (a tar archive put once per task in the executor's store, unpacked on the worker into a
cache keyed by the task's content hash), the agent's spec and options without any secret, and
the *names* of the ``--pass-env`` variables.

Shipped **as environment** (:func:`worker_env`, given to the executor, which makes it the Ray
tasks' ``runtime_env``): every secret — the llm agent's ``api_key`` (:data:`AGENT_KEY_VAR`), an
endpoint carrying credentials (:data:`AGENT_ENDPOINT_VAR`), the SDKs' own key and base-URL
variables, and the values of the ``--pass-env`` variables. The worker reads them from
``os.environ`` (:func:`worker_agent`, :func:`worker_task`); none is ever an argument.

A worker process keeps one :class:`~repogym.run.trial.TrialRunner` per sandbox backend
(:func:`runner_for`), so a task's environment is built once per process and the backend's own
cache serves the other processes of the node.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repogym._secrets import redact_url
from repogym.executors import Executor, fetch
from repogym.executors.shipping import pack_folder, unpacked
from repogym.run.agents import Agent, make_agent
from repogym.run.trial import TrialRunner
from repogym.taskdir import Task, load_task

AGENT_KEY_VAR = "REPOGYM_AGENT_API_KEY"
AGENT_ENDPOINT_VAR = "REPOGYM_AGENT_ENDPOINT"
SDK_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")


@dataclass(frozen=True)
class ShippedTask:
    """A task as a unit receives it: a handle to its archive, never a driver path."""

    archive: Any
    """What :meth:`Executor.put` returned for the packed folder (a Ray object reference)."""
    key: str
    """The task's content hash (hex): the worker's cache key."""
    name: str
    """The folder name (the task id)."""
    env_names: tuple[str, ...] = ()
    """``--pass-env`` variables set on the driver; their values come through the environment."""


@dataclass(frozen=True)
class AgentSpec:
    """The agent as a unit receives it: ``--agent`` and ``--agent-opt`` minus secrets."""

    spec: str
    options: dict[str, str] | None = None
    system_prompt: str | None = None
    """The text of ``system_prompt_file`` (a driver path the worker cannot read)."""


def ship_tasks(executor: Executor, tasks: Sequence[Task]) -> list[ShippedTask]:
    """Pack each task once and hand the archive to the executor's store."""
    out = []
    for task in tasks:
        key = task.compute_hash().removeprefix("sha256:")[:32]
        archive = executor.put(pack_folder(task.path))
        out.append(ShippedTask(archive, key, task.id, tuple(sorted(task.host_env))))
    return out


def worker_task(shipped: ShippedTask) -> Task:
    """The task on this worker: its cached copy (unpacked now if missing), with the passed host
    variables read from this process's environment."""
    path = unpacked(lambda: fetch(shipped.archive), shipped.key, shipped.name)
    task = load_task(path)
    task.host_env = {n: os.environ[n] for n in shipped.env_names if n in os.environ}
    return task


_runners: dict[tuple[str, str | None], TrialRunner] = {}
_runners_lock = threading.Lock()


def runner_for(sandbox: str, verification: str | None = None) -> TrialRunner:
    """This process's runner for a backend (builds reused by every unit it runs)."""
    from repogym.sandbox import get_backend

    with _runners_lock:
        runner = _runners.get((sandbox, verification))
        if runner is None:
            runner = TrialRunner(get_backend(sandbox), verification=verification)
            _runners[(sandbox, verification)] = runner
        return runner


def _secret_endpoint(endpoint: str | None) -> bool:
    return bool(endpoint) and redact_url(endpoint or "") != endpoint


def agent_for_workers(spec: str, options: dict[str, str] | None) -> AgentSpec:
    """``--agent``/``--agent-opt`` as units carry them: no ``api_key``, no endpoint with
    credentials (both go through :func:`worker_env`), the system prompt file's text."""
    opts = dict(options or {})
    opts.pop("api_key", None)
    if _secret_endpoint(opts.get("endpoint")):
        opts.pop("endpoint")
    prompt_file = opts.pop("system_prompt_file", None)
    prompt = Path(prompt_file).read_text(encoding="utf-8") if prompt_file else None
    return AgentSpec(spec, opts or None, prompt)


def worker_env(
    agent: str | None, options: dict[str, str] | None, host_env: dict[str, str]
) -> dict[str, str]:
    """The secrets units need, as environment variables for the executor: the ``--pass-env``
    values, and for an ``llm:`` agent its key, a credentialed endpoint and the SDK variables
    set here."""
    env = dict(host_env)
    if agent and agent.startswith("llm:"):
        env.update({k: os.environ[k] for k in SDK_VARS if os.environ.get(k)})
        opts = options or {}
        if opts.get("api_key"):
            env[AGENT_KEY_VAR] = opts["api_key"]
        if _secret_endpoint(opts.get("endpoint")):
            env[AGENT_ENDPOINT_VAR] = opts["endpoint"]
    return env


def worker_agent(agent: AgentSpec, scratch: Path) -> Agent:
    """The agent on a worker: its options plus the secrets from this process's environment;
    the system prompt written under ``scratch``."""
    if not agent.spec.startswith("llm:"):
        return make_agent(agent.spec, agent.options)
    opts = dict(agent.options or {})
    if os.environ.get(AGENT_KEY_VAR):
        opts["api_key"] = os.environ[AGENT_KEY_VAR]
    if os.environ.get(AGENT_ENDPOINT_VAR):
        opts["endpoint"] = os.environ[AGENT_ENDPOINT_VAR]
    if agent.system_prompt is not None:
        prompt = scratch / "system-prompt.txt"
        prompt.write_text(agent.system_prompt, encoding="utf-8")
        opts["system_prompt_file"] = str(prompt)
    return make_agent(agent.spec, opts)
