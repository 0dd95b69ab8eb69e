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

import math
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repogym import __version__
from repogym.errors import RepogymError
from repogym.llm import LLM
from repogym.run.agent_tools import TOOLS, EpisodeWorkspace
from repogym.run.llm_agent import AGENT_NAME, LLMAgent, LLMAgentOptions, LoopResult, run_loop
from repogym.run.models import (
    JOB_FILE,
    RESULT_FILE,
    AgentInfo,
    AgentResult,
    EventSink,
    ExceptionInfo,
    JobResult,
    JobSummary,
    JobTrial,
    SandboxInfo,
    TrialResult,
    Usage,
    Verification,
    VerifierResult,
    now,
)
from repogym.run.trajectory import TrajectoryRecorder

__all__ = [
    "EpisodeWorkspace",
    "Rollout",
    "RolloutError",
    "list_served_tasks",
    "rollout",
    "run_rollouts",
]

DEFAULT_TIME_LIMIT_S = 600.0


class RolloutError(RepogymError):
    """The served environment could not be reached or refused the episode."""


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
    """One finished episode: its record (``result.json``, at ``path``) and its outcome."""

    task_id: str
    trial_name: str
    reward: float | None
    error: str | None
    path: Path
    record: TrialResult


@dataclass
class _Episode:
    """What an episode has so far."""

    loop: LoopResult = field(default_factory=lambda: LoopResult(stop_reason="error"))
    error: str | None = None
    evaluation: dict[str, Any] = field(default_factory=dict)
    reward: float | None = None


def rollout(
    url: str,
    agent: LLMAgent,
    task_id: str,
    *,
    token: str | None,
    out_dir: Path,
    trial_name: str,
    on_event: EventSink | None = None,
) -> Rollout:
    """One episode of ``task_id`` on the server at ``url``: reset, the agent loop, evaluate.
    Writes ``out_dir/result.json`` and ``out_dir/agent/trajectory.json``."""
    opts = agent.options
    limit = opts.time_limit_s or DEFAULT_TIME_LIMIT_S
    started = now()
    llm = agent._llm(limit)
    recorder = TrajectoryRecorder(
        session_id=trial_name,
        agent_name=AGENT_NAME,
        model_name=f"{llm.provider}/{llm.model}",
        tools=TOOLS,
        extra={"options": opts.public(), "task": task_id, "openenv": url},
    )
    episode = _Episode()
    t0 = time.monotonic()
    try:
        _play(episode, url, llm, opts, task_id, token, limit, recorder, on_event)
    except RolloutError as exc:
        episode.error = str(exc)
    except Exception as exc:  # noqa: BLE001 - recorded as the rollout's error, one line
        first = str(exc).splitlines()[0][:300] if str(exc) else ""
        episode.error = f"{type(exc).__name__}: {first}"
    finally:
        recorder.write(out_dir / "agent" / "trajectory.json", stop_reason=episode.loop.stop_reason)
    if not token and episode.error is None:
        episode.error = "not graded: no orchestrator token (--orchestrator-token)"
    record = _record(
        episode,
        url,
        task_id,
        trial_name,
        model=f"{llm.provider}/{llm.model}",
        graded=bool(token),
        started=started,
        duration_s=round(time.monotonic() - t0, 3),
    )
    path = record.write(out_dir / RESULT_FILE)
    reward = episode.reward
    if reward is not None and not math.isfinite(reward):
        reward = None
    return Rollout(task_id, trial_name, reward, episode.error, path, record)


def _play(
    episode: _Episode,
    url: str,
    llm: LLM,
    opts: LLMAgentOptions,
    task_id: str,
    token: str | None,
    limit: float,
    recorder: TrajectoryRecorder,
    on_event: EventSink | None,
) -> None:
    """Reset, run the agent loop over the episode, then (with ``token``) evaluate."""
    from repogym.openenv_client import EpisodeClient

    with EpisodeClient(url, reply_timeout_s=max(opts.command_timeout_s, limit) + 120) as env:
        reset = env.reset(task_id=task_id)
        obs = reset.observation
        if obs.get("error"):
            raise RolloutError(f"{task_id}: reset refused: {obs['error']}")
        ws = EpisodeWorkspace(env, str(obs.get("workdir") or "/"))
        episode.loop = run_loop(
            llm,
            ws,
            str(obs.get("instruction") or ""),
            opts,
            time_limit_s=limit,
            recorder=recorder,
            network=True,  # the server's sandbox enforces its own policy
            on_event=on_event,
        )
        episode.error = episode.loop.error
        if token:
            graded = env.step({"type": "evaluate", "metadata": {"orchestrator_token": token}})
            episode.evaluation = dict(graded.observation)
            # a refused evaluate (bad token, episode over) carries 0.0 but grades nothing
            reward = graded.reward
            episode.reward = float(reward) if graded.done and reward is not None else None
            if episode.evaluation.get("error") and episode.error is None:
                episode.error = f"evaluate: {episode.evaluation['error']}"


def _record(
    episode: _Episode,
    url: str,
    task_id: str,
    trial_name: str,
    *,
    model: str,
    graded: bool,
    started: str,
    duration_s: float,
) -> TrialResult:
    """The episode's ``result.json``, shaped like a trial's."""
    result, evaluation, error = episode.loop, episode.evaluation, episode.error
    return TrialResult(
        id=str(uuid.uuid4()),
        trial_name=trial_name,
        task_name=task_id,
        task_id=task_id,
        task_path=url,
        agent_info=AgentInfo(name="llm", version=__version__),
        agent_result=AgentResult(
            exit_code=0 if result.error is None else 1,
            duration_s=duration_s,
            output_tail=result.summary[-4000:],
            model=model,
            usage=Usage.model_validate(result.usage()),
            steps=result.model_calls,
            tool_calls=result.tool_calls,
            stop_reason=result.stop_reason,
            trajectory="agent/trajectory.json",
        ),
        verifier_result=VerifierResult(
            rewards=evaluation.get("rewards"),
            reward=episode.reward,
            source="openenv evaluate" if graded else None,
            details=evaluation.get("reward_details"),
            exit_code=evaluation.get("exit_code"),
            error=evaluation.get("error"),
            warnings=evaluation.get("warnings") or [],
        ),
        verification=Verification.model_validate(evaluation.get("verification"))
        if isinstance(evaluation.get("verification"), dict)
        else None,
        exception_info=None if error is None else ExceptionInfo.occurred("RolloutError", error),
        started_at=started,
        finished_at=now(),
        sandbox=SandboxInfo(backend="openenv", url=url),
    )


def _safe(task_id: str) -> str:
    """A folder name for a task id."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in task_id)[:120] or "task"


def run_rollouts(
    url: str,
    agent_spec: str,
    options: dict[str, str],
    task_ids: list[str],
    *,
    attempts: int,
    jobs: int,
    token: str | None,
    out_dir: Path,
    on_done: Callable[[Rollout], None] | None = None,
) -> tuple[list[Rollout], JobResult, Path]:
    """``attempts`` episodes of every task, ``jobs`` at once, each with its own copy of the
    built-in agent (``agent_spec`` = ``llm:<provider>/<model>``); writes each trial and
    ``job.json`` like a ``repogym run`` job. Returns the rollouts (by trial name), the job and
    its path."""
    model = agent_spec.removeprefix("llm:")
    public = LLMAgent(model, options).options.public()
    out_dir.mkdir(parents=True, exist_ok=True)
    started = now()

    def one(task: str, attempt: int) -> Rollout:
        name = f"{_safe(task)}__{attempt}"
        agent = LLMAgent(model, options)
        return rollout(url, agent, task, token=token, out_dir=out_dir / name, trial_name=name)

    done: list[Rollout] = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        work = [(t, a) for t in task_ids for a in range(1, attempts + 1)]
        for fut in as_completed([pool.submit(one, t, a) for t, a in work]):
            done.append(fut.result())
            if on_done:
                on_done(done[-1])
    done.sort(key=lambda r: r.trial_name)
    rewards = [r.reward for r in done if r.reward is not None]
    job = JobResult(
        agent=agent_spec,
        agent_options=public,
        openenv=url,
        attempts=attempts,
        started_at=started,
        finished_at=now(),
        summary=JobSummary(
            trials=len(done),
            mean_reward=math.fsum(rewards) / len(rewards) if rewards else None,
            rewarded=len(rewards),
            errors=sum(1 for r in done if r.error),
        ),
        trials=[JobTrial.listing(r.record, r.reward, r.error, r.path, out_dir) for r in done],
    )
    return done, job, job.write(out_dir / JOB_FILE)
