"""The quality gate (``repogym verify``): prove each task before anyone trains on it.

Per task: the oracle must score 1.0 (and ``resolved`` where the verifier reports it), the ``nop``
agent must score 0.0, and K more oracle runs must agree with the first. The verdict goes into
``[metadata.repo2env.evaluation]`` (which does not enter the content hash).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import tomli_w

from repogym import __version__
from repogym.harbor import Task, atomic_write, load_task
from repogym.run.agents import NopAgent, OracleAgent
from repogym.run.trial import TrialOutcome, TrialRunner

VERIFIED, FLAKY, BROKEN = "verified", "flaky", "broken"


@dataclass
class Verdict:
    task_id: str
    status: str
    oracle_rewards: list[float | None]
    nop_reward: float | None
    reasons: list[str] = field(default_factory=list)
    oracle_resolved: list[bool | None] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


def judge(task_id: str, oracle: list[TrialOutcome], nop: TrialOutcome) -> Verdict:
    """Decide verified / flaky / broken from the oracle runs and the nop run."""
    rewards = [o.reward for o in oracle]
    resolved = [(o.reading.details or {}).get("resolved") if o.reading else None for o in oracle]
    reasons: list[str] = []
    for i, o in enumerate(oracle):
        if o.reward is None:
            reasons.append(f"oracle run {i + 1}: no reward ({o.error})")
        elif o.reward != 1.0:
            reasons.append(f"oracle run {i + 1}: reward {o.reward:g}, expected 1")
        if resolved[i] is False:
            reasons.append(f"oracle run {i + 1}: verifier reports resolved = false")
    if nop.reward is None:
        reasons.append(f"nop: no reward ({nop.error})")
    elif nop.reward != 0.0:
        reasons.append(f"nop: reward {nop.reward:g}, expected 0 (the verifier pays for nothing)")
    distinct = {r for r in rewards}
    if not reasons:
        status = VERIFIED
    elif len(distinct) > 1 and any(r == 1.0 for r in rewards):
        status = FLAKY
        reasons.insert(0, f"oracle reruns disagree: {rewards}")
    else:
        status = BROKEN
    return Verdict(task_id, status, rewards, nop.reward, reasons, resolved)


def record(task: Task, verdict: Verdict, backend: str, reruns: int) -> None:
    """Write the verdict into ``[metadata.repo2env.evaluation]``; all else stays as read."""
    raw = dict(task.raw)
    metadata = dict(raw.get("metadata") or {})
    block = dict(metadata.get("repo2env") or {})
    block["evaluation"] = {
        "status": verdict.status,
        "oracle_runs": len(verdict.oracle_rewards),
        "oracle_passes": sum(1 for r in verdict.oracle_rewards if r == 1.0),
        "reruns": reruns,
        "nop_reward": verdict.nop_reward if verdict.nop_reward is not None else "none",
        "reasons": verdict.reasons,
        "backend": backend,
        "verified_at": _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat(),
        "verifier": f"repogym {__version__}",
    }
    metadata["repo2env"] = block
    raw["metadata"] = metadata
    atomic_write(task.path / "task.toml", tomli_w.dumps(raw))


def verify_tasks(
    tasks: list[Task],
    runner: TrialRunner,
    *,
    reruns: int = 2,
    jobs: int = 1,
    write: bool = True,
    on_done: Callable[[Verdict], None] | None = None,
) -> list[Verdict]:
    """Run the gate over tasks (each task's trials in sequence, tasks in parallel)."""

    def one(task: Task) -> Verdict:
        oracle = [
            runner.run(task, OracleAgent(), trial_name=f"{task.id}__oracle{i}")
            for i in range(1 + reruns)
        ]
        nop = runner.run(task, NopAgent(), trial_name=f"{task.id}__nop")
        verdict = judge(task.id, oracle, nop)
        if write:
            record(load_task(task.path), verdict, runner.backend.name, reruns)
        if on_done:
            on_done(verdict)
        return verdict

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, tasks))
