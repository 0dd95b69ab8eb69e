"""Comparing two jobs task by task: the mean reward difference with a paired bootstrap
interval, and the tasks only one of them resolved (``repogym jobs compare``)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from repogym.run.records import JobRecord, TaskStats, mean_pass_at_k

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile of sorted values (numpy's default method)."""
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def paired_bootstrap(
    diffs: Sequence[float],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = 0.95,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean of paired per-task differences: tasks are
    resampled with replacement ``resamples`` times with a fixed ``seed`` (same input ⇒ same
    interval). None without differences."""
    n = len(diffs)
    if n == 0:
        return None
    values = list(diffs)
    rng = random.Random(seed)
    choices = rng.choices
    means = sorted(math.fsum(choices(values, k=n)) / n for _ in range(resamples))
    alpha = (1.0 - confidence) / 2
    return _quantile(means, alpha), _quantile(means, 1.0 - alpha)


@dataclass
class TaskPair:
    """One task both jobs ran."""

    task_id: str
    a: TaskStats
    b: TaskStats

    @property
    def diff(self) -> float | None:
        if self.a.reward is None or self.b.reward is None:
            return None
        return self.b.reward - self.a.reward

    @property
    def flip(self) -> str | None:
        """``b`` when only B resolved the task, ``a`` when only A did, else None."""
        if self.a.task_resolved == self.b.task_resolved:
            return None
        return "b" if self.b.task_resolved else "a"

    def to_json(self) -> dict[str, Any]:
        def side(s: TaskStats) -> dict[str, Any]:
            return {
                "reward": s.reward,
                "resolved": s.resolved,
                "attempts": s.attempts,
                "task_resolved": s.task_resolved,
                "pass_at_1": s.pass_at_1,
                "errors": len(s.errors),
            }

        return {
            "task_id": self.task_id,
            "a": side(self.a),
            "b": side(self.b),
            "diff": self.diff,
            "flip": self.flip,
        }


@dataclass
class Comparison:
    """Job B against job A over the tasks both ran."""

    a: JobRecord
    b: JobRecord
    pairs: list[TaskPair]
    only_in_a: list[str]
    only_in_b: list[str]
    changed: list[str]
    """Tasks whose content hash differs between the jobs (not the same task any more)."""
    resamples: int
    seed: int
    confidence: float
    ci: tuple[float, float] | None

    @property
    def compared(self) -> list[TaskPair]:
        """The pairs with a reward on both sides (the ones the reward difference is over)."""
        return [p for p in self.pairs if p.diff is not None]

    @property
    def no_reward(self) -> list[str]:
        return [p.task_id for p in self.pairs if p.diff is None]

    def _mean(self, side: str) -> float | None:
        rewards = [getattr(p, side).reward for p in self.compared]
        return math.fsum(rewards) / len(rewards) if rewards else None

    @property
    def mean_a(self) -> float | None:
        return self._mean("a")

    @property
    def mean_b(self) -> float | None:
        return self._mean("b")

    @property
    def diff(self) -> float | None:
        diffs = [p.diff for p in self.compared if p.diff is not None]
        return math.fsum(diffs) / len(diffs) if diffs else None

    @property
    def resolved_only_by_a(self) -> list[str]:
        return [p.task_id for p in self.pairs if p.flip == "a"]

    @property
    def resolved_only_by_b(self) -> list[str]:
        return [p.task_id for p in self.pairs if p.flip == "b"]

    def side_stats(self, side: str) -> dict[str, Any]:
        """Resolved tasks and pass@1 of one side, over the tasks both jobs ran."""
        stats = [getattr(p, side) for p in self.pairs]
        return {
            "tasks_resolved": sum(s.task_resolved for s in stats),
            "pass_at_1": mean_pass_at_k(((s.attempts, s.resolved) for s in stats), 1),
        }

    def to_json(self) -> dict[str, Any]:
        def job(r: JobRecord) -> dict[str, Any]:
            return {
                "name": r.name,
                "path": str(r.path),
                "status": r.status,
                "agent": r.agent,
                "models": r.models,
                "problems": r.problems,
            }

        return {
            "a": {**job(self.a), **self.side_stats("a"), "mean_reward": self.mean_a},
            "b": {**job(self.b), **self.side_stats("b"), "mean_reward": self.mean_b},
            "tasks_in_both": len(self.pairs),
            "tasks_compared": len(self.compared),
            "diff": self.diff,
            "ci": list(self.ci) if self.ci else None,
            "confidence": self.confidence,
            "bootstrap": {"resamples": self.resamples, "seed": self.seed},
            "resolved_only_by_a": self.resolved_only_by_a,
            "resolved_only_by_b": self.resolved_only_by_b,
            "no_reward": self.no_reward,
            "only_in_a": self.only_in_a,
            "only_in_b": self.only_in_b,
            "changed": self.changed,
            "tasks": [p.to_json() for p in self.pairs],
        }


def compare_jobs(
    a: JobRecord,
    b: JobRecord,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = 0.95,
) -> Comparison:
    """Compare job B with job A task by task, with a paired bootstrap interval of the mean
    reward difference B − A over the tasks both ran and both rewarded."""
    ta, tb = a.by_task(), b.by_task()
    common = sorted(ta.keys() & tb.keys())
    pairs = [TaskPair(tid, ta[tid], tb[tid]) for tid in common]
    changed = [
        tid
        for tid in common
        if ta[tid].checksums and tb[tid].checksums and ta[tid].checksums != tb[tid].checksums
    ]
    diffs = [p.diff for p in pairs if p.diff is not None]
    return Comparison(
        a=a,
        b=b,
        pairs=pairs,
        only_in_a=sorted(ta.keys() - tb.keys()),
        only_in_b=sorted(tb.keys() - ta.keys()),
        changed=changed,
        resamples=resamples,
        seed=seed,
        confidence=confidence,
        ci=paired_bootstrap(diffs, resamples=resamples, seed=seed, confidence=confidence),
    )
