"""The built-in agent driving a served environment over OpenEnv's WebSocket protocol.

``repogym rollout --openenv URL --agent llm:…`` opens one WebSocket episode per task with
:class:`repogym.openenv_client.EpisodeClient` (the server's origin only, no redirects), runs
:func:`repogym.run.llm_agent.run_loop` over the episode's agent actions
(``exec``/``read``/``write``: :class:`repogym.run.agent_tools.EpisodeWorkspace`), then — as the
trainer, with the orchestrator token the agent never sees — sends ``evaluate`` and records the
reward.
Each rollout is written like a trial of ``repogym run`` (``<task>__<n>/result.json`` and
``agent/trajectory.json``, plus ``job.json``), so ``repogym jobs`` reads both alike.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym import __version__
from repogym.atomic import atomic_write
from repogym.errors import RepogymError
from repogym.run.agent_tools import TOOLS, EpisodeWorkspace
from repogym.run.llm_agent import AGENT_NAME, LLMAgent, LoopResult, run_loop
from repogym.run.trajectory import TrajectoryRecorder

__all__ = ["EpisodeWorkspace", "RolloutError", "list_served_tasks", "rollout"]

DEFAULT_TIME_LIMIT_S = 600.0


class RolloutError(RepogymError):
    """The served environment could not be reached or refused the episode."""


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat()


def list_served_tasks(url: str, *, timeout_s: float = 30) -> list[str]:
    """Task ids of a served environment, from its Task API (``GET /tasks``), through
    :func:`repogym.openenv_client.list_task_ids` (its origin only, no redirects followed)."""
    from repogym.openenv_client import OpenEnvClientError, list_task_ids

    try:
        return list_task_ids(url, timeout_s=timeout_s)
    except OpenEnvClientError as exc:
        raise RolloutError(str(exc)) from None


@dataclass
class Rollout:
    task_id: str
    trial_name: str
    reward: float | None
    error: str | None
    path: Path


@dataclass
class _Played:
    """What one episode gave: the agent loop's result, the first error, the evaluation."""

    result: LoopResult = field(default_factory=lambda: LoopResult(stop_reason="error"))
    error: str | None = None
    evaluation: dict[str, Any] = field(default_factory=dict)
    reward: float | None = None


def _play(
    url: str,
    task_id: str,
    *,
    token: str | None,
    agent: LLMAgent,
    llm: Any,
    recorder: TrajectoryRecorder,
    trajectory: Path,
    on_event: Callable[[str, dict[str, Any]], None] | None,
) -> _Played:
    """The episode through :class:`repogym.openenv_client.EpisodeClient`: reset, the agent loop
    over the episode's actions, ``evaluate`` with ``token``; any failure is the outcome's one-line
    error, and the trajectory is written whatever happens."""
    from repogym.openenv_client import EpisodeClient

    opts = agent.options
    limit = opts.time_limit_s or DEFAULT_TIME_LIMIT_S
    out = _Played()
    reply_timeout_s = max(opts.command_timeout_s, limit) + 120
    try:
        with EpisodeClient(url, reply_timeout_s=reply_timeout_s) as env:
            reset = env.reset(task_id=task_id)
            obs = reset.observation
            if obs.get("error"):
                raise RolloutError(f"{task_id}: reset refused: {obs['error']}")
            ws = EpisodeWorkspace(env, str(obs.get("workdir") or "/"))
            out.result = run_loop(
                llm,
                ws,
                str(obs.get("instruction") or ""),
                opts,
                time_limit_s=limit,
                recorder=recorder,
                network=True,  # the server's sandbox enforces its own policy
                on_event=on_event,
            )
            out.error = out.result.error
            if token:
                graded = env.step({"type": "evaluate", "metadata": {"orchestrator_token": token}})
                out.evaluation = dict(graded.observation)
                out.reward = graded.reward if graded.reward is None else float(graded.reward)
                if out.evaluation.get("error") and out.error is None:
                    out.error = f"evaluate: {out.evaluation['error']}"
    except RolloutError as exc:
        out.error = str(exc)
    except Exception as exc:  # noqa: BLE001 - recorded as the rollout's error, one line
        out.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
    finally:
        recorder.write(trajectory, stop_reason=out.result.stop_reason)
    return out


def rollout(
    url: str,
    agent: LLMAgent,
    task_id: str,
    *,
    token: str | None,
    out_dir: Path,
    trial_name: str,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
) -> Rollout:
    """One episode of ``task_id`` on the server at ``url``: reset, the agent loop, evaluate.
    Writes ``out_dir/result.json`` and ``out_dir/agent/trajectory.json``."""
    opts = agent.options
    limit = opts.time_limit_s or DEFAULT_TIME_LIMIT_S
    started = _now()
    llm = agent._llm(limit)
    recorder = TrajectoryRecorder(
        session_id=trial_name,
        agent_name=AGENT_NAME,
        model_name=f"{llm.provider}/{llm.model}",
        tools=TOOLS,
        extra={"options": opts.public(), "task": task_id, "openenv": url},
    )
    t0 = time.monotonic()
    played = _play(
        url,
        task_id,
        token=token,
        agent=agent,
        llm=llm,
        recorder=recorder,
        trajectory=out_dir / "agent" / "trajectory.json",
        on_event=on_event,
    )
    result, error = played.result, played.error
    evaluation, reward = played.evaluation, played.reward
    if not token and error is None:
        error = "not graded: no orchestrator token (--orchestrator-token)"
    doc = {
        "id": str(uuid.uuid4()),
        "trial_name": trial_name,
        "task_name": task_id,
        "task_id": task_id,
        "task_path": url,
        "agent_info": {"name": "llm", "version": __version__},
        "agent_result": {
            "exit_code": 0 if result.error is None else 1,
            "duration_s": round(time.monotonic() - t0, 3),
            "output_tail": result.summary[-4000:],
            "model": f"{llm.provider}/{llm.model}",
            "usage": result.usage(),
            "steps": result.model_calls,
            "tool_calls": result.tool_calls,
            "stop_reason": result.stop_reason,
            "trajectory": "agent/trajectory.json",
        },
        "verifier_result": {
            "rewards": evaluation.get("rewards"),
            "reward": reward,
            "source": "openenv evaluate" if token else None,
            "details": evaluation.get("reward_details"),
            "exit_code": evaluation.get("exit_code"),
            "error": evaluation.get("error"),
            "warnings": evaluation.get("warnings") or [],
        },
        "verification": evaluation.get("verification"),
        "exception_info": None
        if error is None
        else {
            "exception_type": "RolloutError",
            "exception_message": error,
            "exception_traceback": None,
            "occurred_at": _now(),
        },
        "started_at": started,
        "finished_at": _now(),
        "sandbox": {"backend": "openenv", "url": url},
    }
    path = out_dir / "result.json"
    atomic_write(path, json.dumps(doc, indent=2, default=str) + "\n")
    if reward is not None and not math.isfinite(reward):
        reward = None
    return Rollout(task_id, trial_name, reward, error, path)
