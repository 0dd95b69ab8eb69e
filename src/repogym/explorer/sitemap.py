"""Which public pages a snapshot has, cut into sitemap shards read one at a time.

An environment's tasks are one contiguous rid range of the ``tasks`` table (the snapshot writer
keeps them so), so the public tasks are the ranges of the environments that are neither private
nor hidden, and shard *k* of the tasks is the *k*-th block of :data:`SHARD_SIZE` rids of those
ranges laid end to end. A :class:`Plan` is the small part (the public environments and their
ranges, a few numbers per environment); a shard is then a keyset read over the primary key
(``rid BETWEEN lo AND hi``, one query per run of neighbouring public environments), so serving
one never loads the other tasks. Standard library only.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = ["SHARD_SIZE", "EnvRow", "Plan", "env_shard", "plan", "task_shard"]

SHARD_SIZE = 10_000
"""URLs per sitemap shard at most (the protocol allows 50,000; smaller shards are cheaper to
serve and to fetch)."""

Hidden = Callable[[str], bool]
"""Whether an environment id is hidden by the catalog's curators."""


class EnvRow(NamedTuple):
    """An environment of the snapshot as the sitemap needs it."""

    rid: int
    id: str
    private: bool
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class Plan:
    """The shards of one snapshot with one set of hidden environments."""

    snapshot: str
    """The version of the snapshot it was made from."""
    version: str
    """The snapshot version and a digest of what is public: a new one when either changes."""
    built_at: str
    """When the snapshot was built (ISO 8601; "" unknown)."""
    env_ids: tuple[str, ...]
    """The public environments, in snapshot order."""
    runs: tuple[tuple[int, int], ...]
    """Task rid ranges of the public environments, neighbours merged, in rid order."""
    tasks: int
    """Rids in ``runs`` (the public tasks)."""
    size: int
    """URLs per shard at most."""

    @property
    def env_shards(self) -> int:
        """Shards of the home page and the environment pages (at least one)."""
        return max(1, -(-(len(self.env_ids) + 1) // self.size))

    @property
    def task_shards(self) -> int:
        return -(-self.tasks // self.size)

    @property
    def shards(self) -> int:
        """Shards in all: ``1..env_shards`` are environments, the rest tasks."""
        return self.env_shards + self.task_shards


def _env_rows(h: Any, db: sqlite3.Connection) -> tuple[EnvRow, ...]:
    """Every environment row, read once per snapshot (kept in the handle's cache)."""
    rows = h.cache.get("sitemap_envs")
    if rows is None:
        with h.cache_lock:
            rows = h.cache.get("sitemap_envs")
            if rows is None:
                rows = tuple(
                    EnvRow(r[0], r[1], bool(r[2]), r[3], r[4])
                    for r in db.execute(
                        "SELECT rid, id, private, first_task, last_task FROM envs ORDER BY rid"
                    )
                )
                h.cache["sitemap_envs"] = rows
    return rows


def plan(store: Any, hidden: Hidden | None = None, size: int = SHARD_SIZE) -> Plan:
    """The shards of ``store``'s snapshot in use (a :class:`repogym.explorer.store.Store`):
    private environments and those ``hidden`` names are left out, with their tasks."""
    h, db = store.reader.acquire()
    return _plan(h, db, hidden, size)


def _plan(h: Any, db: sqlite3.Connection, hidden: Hidden | None, size: int) -> Plan:
    ids: list[str] = []
    runs: list[list[int]] = []
    tasks = 0
    digest = hashlib.blake2b(digest_size=8)
    for env in _env_rows(h, db):
        if env.private or (hidden is not None and hidden(env.id)):
            continue
        ids.append(env.id)
        digest.update(env.rid.to_bytes(8, "little"))
        if env.last < env.first:
            continue
        tasks += env.last - env.first + 1
        if runs and runs[-1][1] == env.first - 1:
            runs[-1][1] = env.last
        else:
            runs.append([env.first, env.last])
    meta = h.facts.get("meta") or {}
    return Plan(
        snapshot=h.version,
        version=f"{h.version}-{digest.hexdigest()}",
        built_at=str(meta.get("built_at") or ""),
        env_ids=tuple(ids),
        runs=tuple((lo, hi) for lo, hi in runs),
        tasks=tasks,
        size=max(1, int(size)),
    )


def env_shard(p: Plan, n: int) -> list[str] | None:
    """The environment ids of shard ``n`` (1-based; the home page takes the first place of
    shard 1); None when ``n`` is not an environment shard."""
    if not 1 <= n <= p.env_shards:
        return None
    start = (n - 1) * p.size - 1 if n > 1 else 0
    stop = n * p.size - 1
    return list(p.env_ids[start:stop])


def task_shard(
    store: Any, p: Plan, n: int, hidden: Hidden | None = None
) -> list[tuple[str, str]] | None:
    """``(env id, task id)`` of the tasks of shard ``n`` in rid order; None when ``n`` is not a
    task shard of ``p``. Reads only the rows of that shard. Should the snapshot have been
    swapped since ``p`` was made, the shard is that of the new one (planned with ``hidden``)."""
    h, db = store.reader.acquire()
    if h.version != p.snapshot:
        p = _plan(h, db, hidden, p.size)
    k = n - p.env_shards - 1
    if not 0 <= k < p.task_shards:
        return None
    skip, want = k * p.size, p.size
    spans: list[tuple[int, int]] = []
    for lo, hi in p.runs:
        count = hi - lo + 1
        if skip >= count:
            skip -= count
            continue
        first = lo + skip
        last = min(hi, first + want - 1)
        spans.append((first, last))
        want -= last - first + 1
        skip = 0
        if want == 0:
            break
    out: list[tuple[str, str]] = []
    for lo, hi in spans:
        out.extend(
            db.execute(
                "SELECT env_id, id FROM tasks WHERE rid BETWEEN ? AND ? ORDER BY rid", (lo, hi)
            )
        )
    return out
