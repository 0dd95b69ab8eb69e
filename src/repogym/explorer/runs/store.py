"""Run records of the explorer: one SQLite file (``runs.sqlite``) beside the explorer's state.

A run is keyed by the **content hash** of the task it ran (``key``), so a task that is the same
task in two datasets shares its rollouts; ``env`` and ``task`` say where it was started from.
The visitor who started a run is kept only as a salted hash (``owner``), used to let them follow
their own runs and to count their runs per hour; no record, list or page ever shows it. No key,
endpoint or other secret of a visitor is written here.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["FINAL", "RunRecord", "RunStore"]

FINAL = ("done", "error")
"""Statuses a run does not leave."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
  id TEXT PRIMARY KEY,
  key TEXT NOT NULL,
  env TEXT NOT NULL,
  task TEXT NOT NULL,
  agent TEXT NOT NULL,
  status TEXT NOT NULL,
  reward REAL,
  rewards TEXT,
  details TEXT,
  error TEXT,
  usage TEXT,
  owner TEXT NOT NULL,
  created REAL NOT NULL,
  started REAL,
  finished REAL
);
CREATE INDEX IF NOT EXISTS runs_key ON runs(key, created);
CREATE INDEX IF NOT EXISTS runs_env ON runs(env, created);
CREATE INDEX IF NOT EXISTS runs_owner ON runs(owner, created);
CREATE TABLE IF NOT EXISTS events (
  run TEXT NOT NULL,
  seq INTEGER NOT NULL,
  t REAL NOT NULL,
  kind TEXT NOT NULL,
  data TEXT NOT NULL,
  PRIMARY KEY (run, seq)
);
CREATE TABLE IF NOT EXISTS task_keys (
  env TEXT NOT NULL,
  task TEXT NOT NULL,
  key TEXT NOT NULL,
  PRIMARY KEY (env, task)
);
CREATE INDEX IF NOT EXISTS task_keys_key ON task_keys(key);
"""

_COLUMNS = (
    "id, key, env, task, agent, status, reward, rewards, details, error, usage, owner, "
    "created, started, finished"
)


@dataclass
class RunRecord:
    """One rollout as stored (``owner`` is a salted hash and never leaves the server)."""

    id: str
    key: str
    env: str
    task: str
    agent: str
    status: str
    """queued | running | done | error"""
    owner: str
    created: float
    reward: float | None = None
    rewards: dict[str, float] | None = None
    details: Any = None
    error: str | None = None
    usage: dict[str, Any] | None = None
    started: float | None = None
    finished: float | None = None
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def graded(self) -> bool:
        """Finished with a reward the verifier wrote."""
        return self.status in FINAL and self.reward is not None

    def public(self, *, mine: bool = False) -> dict[str, Any]:
        """The record as pages and the API show it: no owner."""
        duration = None
        if self.started is not None and self.finished is not None:
            duration = round(self.finished - self.started, 3)
        return {
            "id": self.id,
            "key": self.key,
            "env": self.env,
            "task": self.task,
            "agent": self.agent,
            "status": self.status,
            "graded": self.graded,
            "reward": self.reward,
            "rewards": self.rewards,
            "details": self.details,
            "error": self.error,
            "usage": self.usage,
            "created": self.created,
            "started": self.started,
            "finished": self.finished,
            "duration_s": duration,
            "mine": mine,
        }


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str, separators=(",", ":"))


def _record(row: tuple[Any, ...]) -> RunRecord:
    (rid, key, env, task, agent, status, reward, rewards, details, error, usage, owner) = row[:12]
    return RunRecord(
        id=rid,
        key=key,
        env=env,
        task=task,
        agent=agent,
        status=status,
        owner=owner,
        created=row[12],
        reward=reward,
        rewards=_loads(rewards),
        details=_loads(details),
        error=error,
        usage=_loads(usage),
        started=row[13],
        finished=row[14],
    )


class RunStore:
    """The run records in ``<folder>/runs.sqlite`` (created on first use).

    One connection shared by the server's threads under a lock: every statement is small.
    Runs left ``queued``/``running`` by an explorer that stopped are closed as errors on open.
    """

    FILE = "runs.sqlite"

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / self.FILE
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._lock = threading.Lock()
        self._db.execute(
            "UPDATE runs SET status='error', error=?, finished=? "
            "WHERE status IN ('queued','running')",
            ("the explorer stopped before the run finished", time.time()),
        )

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- writes

    def add(self, rec: RunRecord) -> None:
        with self._lock:
            self._db.execute(
                f"INSERT INTO runs ({_COLUMNS}) VALUES ({', '.join('?' * 15)})",
                (
                    rec.id,
                    rec.key,
                    rec.env,
                    rec.task,
                    rec.agent,
                    rec.status,
                    rec.reward,
                    _dumps(rec.rewards),
                    _dumps(rec.details),
                    rec.error,
                    _dumps(rec.usage),
                    rec.owner,
                    rec.created,
                    rec.started,
                    rec.finished,
                ),
            )

    def started(self, run_id: str, when: float) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE runs SET status='running', started=? WHERE id=?", (when, run_id)
            )

    def finish(self, rec: RunRecord, events: Iterable[dict[str, Any]]) -> None:
        """Store the run's outcome and its event timeline in one transaction."""
        rows = [(rec.id, e["seq"], e["t"], e["kind"], _dumps(e.get("data") or {})) for e in events]
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.execute(
                    "UPDATE runs SET status=?, reward=?, rewards=?, details=?, error=?, usage=?, "
                    "started=COALESCE(started, ?), finished=? WHERE id=?",
                    (
                        rec.status,
                        rec.reward,
                        _dumps(rec.rewards),
                        _dumps(rec.details),
                        rec.error,
                        _dumps(rec.usage),
                        rec.started,
                        rec.finished,
                        rec.id,
                    ),
                )
                self._db.executemany(
                    "INSERT OR REPLACE INTO events (run, seq, t, kind, data) VALUES (?,?,?,?,?)",
                    rows,
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def remember_key(self, env: str, task: str, key: str) -> None:
        """That task ``task`` of ``env`` has content hash ``key`` (for per-environment lists)."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO task_keys (env, task, key) VALUES (?,?,?)",
                (env, task, key),
            )

    # -- reads

    def get(self, run_id: str, *, events: bool = False) -> RunRecord | None:
        with self._lock:
            row = self._db.execute(f"SELECT {_COLUMNS} FROM runs WHERE id=?", (run_id,)).fetchone()
            if row is None:
                return None
            rec = _record(row)
            if events:
                rec.events = [
                    {"seq": seq, "t": t, "kind": kind, "data": json.loads(data)}
                    for seq, t, kind, data in self._db.execute(
                        "SELECT seq, t, kind, data FROM events WHERE run=? ORDER BY seq", (run_id,)
                    )
                ]
        return rec

    def for_task(self, key: str, limit: int = 100) -> list[RunRecord]:
        """Runs of the task with content hash ``key``, newest first (from any dataset)."""
        return self._select("WHERE key=?", (key,), limit)

    def for_env(self, env: str, limit: int = 100) -> list[RunRecord]:
        """Runs started from ``env`` or of a task ``env`` holds (same content hash), newest
        first."""
        return self._select(
            "WHERE env=? OR key IN (SELECT key FROM task_keys WHERE env=?)", (env, env), limit
        )

    def for_ids(self, ids: list[str]) -> list[RunRecord]:
        found = {r.id: r for r in self._select(f"WHERE id IN ({','.join('?' * len(ids))})", ids)}
        return [found[i] for i in ids if i in found]

    def graded(
        self, *, env: str | None = None, limit: int = 1000, offset: int = 0
    ) -> list[RunRecord]:
        """Finished runs with a reward (of runs started from ``env``), newest first."""
        where = "WHERE status IN ('done','error') AND reward IS NOT NULL"
        args: list[Any] = []
        if env is not None:
            where += " AND env=?"
            args.append(env)
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM runs {where} ORDER BY finished DESC, id LIMIT ? OFFSET ?",
                (*args, limit, offset),
            ).fetchall()
        return [_record(r) for r in rows]

    def tried(self, env: str) -> set[str]:
        """Ids of ``env``'s tasks that have a graded run: started from ``env``, or of the same
        task (content hash) from anywhere, where that hash is known."""
        with self._lock:
            rows = self._db.execute(
                "SELECT task FROM runs WHERE env=? AND reward IS NOT NULL"
                " AND status IN ('done','error')"
                " UNION SELECT tk.task FROM task_keys tk JOIN runs r ON r.key = tk.key"
                " WHERE tk.env=? AND r.reward IS NOT NULL AND r.status IN ('done','error')",
                (env, env),
            ).fetchall()
        return {r[0] for r in rows}

    def count_since(self, owner: str, since: float) -> int:
        with self._lock:
            (n,) = self._db.execute(
                "SELECT COUNT(*) FROM runs WHERE owner=? AND created>=?", (owner, since)
            ).fetchone()
        return int(n)

    def _select(self, where: str, args: Iterable[Any], limit: int = 1000) -> list[RunRecord]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM runs {where} ORDER BY created DESC LIMIT ?",
                (*args, limit),
            ).fetchall()
        return [_record(r) for r in rows]
