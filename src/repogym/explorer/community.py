"""The community view of rollouts: public runs across environments, leaderboards and the tasks
nobody has tried.

Only **finished, graded** runs count, and only runs started from an environment that is in the
catalog, public (not a private dataset) and not hidden by the curators; a run the curators took
off the community view is left out too. A run shown here carries what the runs pages show of it
(:meth:`repogym.explorer.runs.store.RunRecord.public`, no owner), minus its usage and details:
no visitor, endpoint or key is ever in it.

**Leaderboards.** Rows are (group, agent): the group is the environment, or a domain/category
facet. Each graded run is one trial; it passes when its reward is at least 1. The pass rate is
passes/runs, with a 95 % Wilson score interval (sound for small counts and for 0 or 100 %), and
the number of distinct tasks the agent tried in the group.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from repogym.explorer.runs.store import RunRecord, RunStore

__all__ = ["GROUPINGS", "PASS_REWARD", "BoardRow", "Community", "wilson_interval"]

PASS_REWARD = 1.0
"""A run passes when its reward reaches this."""
GROUPINGS = ("env", "domain", "category")
"""What a leaderboard groups by: the environment, or a facet of the environment or its task."""
_SCAN = 5000
"""Graded runs read per leaderboard (newest first)."""


def wilson_interval(passes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a pass rate (95 % for the default ``z``); (0, 1) for n=0."""
    if n <= 0:
        return 0.0, 1.0
    p = passes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class BoardRow:
    """One agent in one group of a leaderboard."""

    group: str
    agent: str
    runs: int
    passes: int
    tasks: int
    pass_rate: float
    ci_low: float
    ci_high: float

    def to_json(self) -> dict[str, Any]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


class Community:
    """Community answers over the catalog ``store`` and the run records ``runs``.

    ``hidden(env_id)`` says whether the curators hid an environment; ``removed(run_id)``
    whether they took a run off the community view (both default to nothing)."""

    def __init__(
        self,
        store: Any,
        runs: RunStore,
        *,
        hidden: Callable[[str], bool] | None = None,
        removed: Callable[[str], bool] | None = None,
    ) -> None:
        self.store, self.runs = store, runs
        self.hidden = hidden or (lambda _env: False)
        self.removed = removed or (lambda _run: False)

    # ------------------------------------------------------------------ what may be shown

    def public_env(self, env_id: str) -> dict[str, Any] | None:
        """The environment's card when its runs may be shown publicly, else None."""
        if self.hidden(env_id):
            return None
        env = self.store.env(env_id)
        if env is None or env.get("private"):
            return None
        return dict(env)

    def _shown(self, records: Iterable[RunRecord]) -> list[RunRecord]:
        envs: dict[str, bool] = {}
        out = []
        for rec in records:
            if rec.env not in envs:
                envs[rec.env] = self.public_env(rec.env) is not None
            if envs[rec.env] and rec.graded and not self.removed(rec.id):
                out.append(rec)
        return out

    @staticmethod
    def card(rec: RunRecord) -> dict[str, Any]:
        """A run as the community view shows it."""
        shown = rec.public()
        for key in ("usage", "details", "error", "rewards", "mine", "key"):
            shown.pop(key, None)
        shown["passed"] = rec.reward is not None and rec.reward >= PASS_REWARD
        return shown

    # ------------------------------------------------------------------ answers

    def rollouts(
        self, *, env: str | None = None, limit: int = 50, offset: int = 0
    ) -> list[dict[str, Any]]:
        """Public graded runs, newest first (``env``: only those started from it)."""
        limit, offset = max(1, min(limit, 500)), max(0, offset)
        out: list[dict[str, Any]] = []
        skipped, cursor = 0, 0
        while len(out) < limit:
            batch = self.runs.graded(env=env, limit=500, offset=cursor)
            if not batch:
                break
            cursor += len(batch)
            for rec in self._shown(batch):
                if skipped < offset:
                    skipped += 1
                    continue
                out.append(self.card(rec))
                if len(out) == limit:
                    break
        return out

    def leaderboard(self, *, by: str = "env", env: str | None = None) -> list[dict[str, Any]]:
        """Rows per (group, agent), best pass rate first within a group."""
        if by not in GROUPINGS:
            raise ValueError(f"by={by!r}: use one of {', '.join(GROUPINGS)}")
        facets: dict[tuple[str, str], dict[str, Any]] = {}
        tally: dict[tuple[str, str], list[Any]] = {}
        for rec in self._shown(self.runs.graded(env=env, limit=_SCAN)):
            group = self._group(rec, by, facets)
            if group is None:
                continue
            row = tally.setdefault((group, rec.agent), [0, 0, set()])
            row[0] += 1
            row[1] += int(rec.reward is not None and rec.reward >= PASS_REWARD)
            row[2].add((rec.env, rec.task))
        rows = []
        for (group, agent), (n, passes, tasks) in tally.items():
            low, high = wilson_interval(passes, n)
            rows.append(BoardRow(group, agent, n, passes, len(tasks), passes / n, low, high))
        rows.sort(key=lambda r: (r.group, -r.pass_rate, -r.runs, r.agent))
        return [r.to_json() for r in rows]

    def _group(
        self, rec: RunRecord, by: str, cache: dict[tuple[str, str], dict[str, Any]]
    ) -> str | None:
        if by == "env":
            return rec.env
        env = self.public_env(rec.env) or {}
        value = (env.get("facets") or {}).get(by)
        if not value:
            key = (rec.env, rec.task)
            if key not in cache:
                task = self.store.task(rec.env, rec.task) or {}
                cache[key] = dict(task.get("facets") or {})
            value = cache[key].get(by)
        return str(value) if value else f"(no {by})"

    def untried(self, env_id: str, *, limit: int = 50, offset: int = 0) -> dict[str, Any] | None:
        """Tasks of ``env_id`` with no graded run yet (None: not a public environment)."""
        if self.public_env(env_id) is None:
            return None
        tried = self.runs.tried(env_id)
        limit, offset = max(1, min(limit, 200)), max(0, offset)
        items: list[dict[str, Any]] = []
        total, untried, page = 0, 0, 1
        while True:  # every task is read once, a page of 200 at a time
            got = self.store.search_tasks(env=env_id, page=page, size=200)
            total = got["total"]
            for card in got["items"]:
                if card["id"] in tried:
                    continue
                if offset <= untried < offset + limit:
                    items.append({"id": card["id"], "title": card["title"]})
                untried += 1
            if page * 200 >= total or not got["items"]:
                break
            page += 1
        return {"env": env_id, "tasks": total, "untried": untried, "items": items}
