"""Building and publishing the explorer's SQLite snapshot (the reader is :mod:`.snapshot`).

Build (:class:`SnapshotWriter`): one temp SQLite file on local disk (bulk-load PRAGMAs,
executemany); the task FTS index of a big build is made by a helper process beside it and
copied in. Publish (:func:`publish`): checks (size, sha256, schema version, row counts,
``PRAGMA quick_check``, the pack it was built with is there, an optional guard such as the
shrink guard of :mod:`.refresh`), rename to ``<out>/snapshots/<sha256>.sqlite``, then the
pointers written last by atomic replace: ``<out>/CURRENT.v<N>`` for the schema version, then
``<out>/CURRENT`` unless it names a newer schema; older snapshot files beyond
:data:`KEEP_SNAPSHOTS` are removed, never one a pointer names. The tables are described in
:mod:`.snapshot`.
"""

from __future__ import annotations

import collections
import concurrent.futures
import datetime as _dt
import json
import logging
import marshal
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from repogym.explorer.facets import COLUMN_FACETS, FACETS, TASK_FACETS
from repogym.explorer.index import env_row
from repogym.explorer.model import EnvDoc
from repogym.explorer.snapshot import (
    POINTER,
    SCHEMA_VERSION,
    SNAPSHOTS,
    SnapshotError,
    read_pointer,
    sha256_file,
    source_counts,
    validate,
    versioned_pointer,
)

__all__ = ["HELPER_MIN_TASKS", "KEEP_SNAPSHOTS", "SCHEMA", "Guard", "SnapshotWriter", "publish"]

log = logging.getLogger("repogym.explorer")

KEEP_SNAPSHOTS = 3  # older snapshot files are removed (open readers keep their file handles)
# Called with the output folder and the new snapshot's counts ({"envs", "tasks", "sources"})
# before anything is published; it raises (a SnapshotError) to keep the published snapshot.
Guard = Callable[[Path, dict[str, Any]], None]
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE envs(
  rid INTEGER PRIMARY KEY, id TEXT NOT NULL, kind TEXT NOT NULL, title TEXT NOT NULL,
  summary TEXT NOT NULL, description TEXT NOT NULL, source TEXT NOT NULL, runs_in TEXT NOT NULL,
  run_options TEXT NOT NULL, facets TEXT NOT NULL, private INTEGER NOT NULL,
  task_count INTEGER NOT NULL, tags TEXT NOT NULL, task_facets TEXT NOT NULL,
  first_task INTEGER NOT NULL, last_task INTEGER NOT NULL);
CREATE TABLE tasks(
  rid INTEGER PRIMARY KEY, env INTEGER NOT NULL, env_id TEXT NOT NULL, id TEXT NOT NULL,
  title TEXT NOT NULL, summary TEXT NOT NULL, facets TEXT NOT NULL, grading TEXT NOT NULL,
  environment TEXT NOT NULL, network TEXT NOT NULL, runnable INTEGER NOT NULL,
  language TEXT, category TEXT, difficulty TEXT, pipeline TEXT, doc BLOB);
CREATE VIRTUAL TABLE envs_fts USING fts5(id, title, summary, tags, tokenize='trigram');
CREATE VIRTUAL TABLE tasks_fts USING fts5(title, summary, id, content='',
  tokenize='unicode61 remove_diacritics 2', prefix='2');
"""
_TASKS_FTS = SCHEMA[SCHEMA.index("CREATE VIRTUAL TABLE tasks_fts") :].split(";")[0]
# Bulk loading into a new file: no journal, no syncs (the file is checked and synced before
# it is published).
_BULK_PRAGMAS = (
    "journal_mode=OFF",
    "synchronous=OFF",
    "temp_store=MEMORY",
    "cache_size=-131072",
    "page_size=8192",
)
# The task index is bulk-loaded without incremental merging and with few forced merges;
# queries over the few segments left are as fast as over one, so it is not optimised.
_TASKS_FTS_BULK = (
    "INSERT INTO tasks_fts(tasks_fts, rank) VALUES ('automerge', 0)",
    "INSERT INTO tasks_fts(tasks_fts, rank) VALUES ('crisismerge', 64)",
)
HELPER_MIN_TASKS = 5000  # below this many tasks the task index is built in place (faster)
# Run by a helper process (python -I -S): builds tasks_fts in the file argv[2] from the
# columns (rids, titles, summaries, ids) marshalled in the file argv[1].
_FTS_HELPER = f"""
import marshal, sqlite3, sys
with open(sys.argv[1], "rb") as fh:
    rids, titles, summaries, ids = marshal.load(fh)
db = sqlite3.connect(sys.argv[2], isolation_level=None)
for pragma in {_BULK_PRAGMAS!r}:
    db.execute("PRAGMA " + pragma)
db.execute("BEGIN")
for stmt in ({_TASKS_FTS!r}, *{_TASKS_FTS_BULK!r}):
    db.execute(stmt)
db.executemany("INSERT INTO tasks_fts(rowid, title, summary, id) VALUES (?,?,?,?)",
               zip(rids, titles, summaries, ids))
db.execute("COMMIT")
db.close()
"""
INDEXES = """
CREATE UNIQUE INDEX envs_id ON envs(id);
"""


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


# ---------------------------------------------------------------------------- building


class SnapshotWriter:
    """Collects index rows as they are produced, then writes one snapshot file at :meth:`finish`.

    Adding is the index (rows in their table shape, facet counts per environment, kept up to
    date row by row); :meth:`finish` is the snapshot build: bulk load, FTS, one file.
    ``pack_id`` names the pack whose pages the rows' keys refer to ("" when no row has one).
    """

    def __init__(self, path: Path | str, pack_id: str = "") -> None:
        self.path = Path(path)
        self.pack_id = pack_id
        self._tasks: list[tuple[Any, ...]] = []  # task rows, rid = position + 1
        self._ranges: dict[int, list[int]] = {}  # env rid -> [first, last] task rid
        self._in_order = True  # False once an environment's rows stop being contiguous
        self._envs: dict[int, tuple[EnvDoc, dict[str, Any]]] = {}
        self._env_ids: dict[str, int] = {}
        self._env_tasks: dict[int, list[str]] = {}  # env rid -> listed task ids
        self._facets: dict[int, dict[str, dict[str, int]]] = {}
        self.n_envs = 0
        self.n_tasks = 0

    def add_env(self, env: EnvDoc, task_ids: list[str] | None = None) -> int:
        """Register an environment (its row is written at :meth:`finish`)."""
        rid = len(self._env_ids) + 1
        self._env_ids[env.id] = rid
        r = env_row(env)
        r["run_options"] = _ENCODE(r["run_options"])  # encoded once, here
        self._envs[rid] = (env, r)
        self._facets[rid] = collections.defaultdict(dict)
        self._env_tasks[rid] = list(task_ids or [])
        return rid

    def listing(self) -> Iterable[tuple[EnvDoc, list[str]]]:
        """The environments added so far and their listed task ids."""
        for rid, (env, _row) in self._envs.items():
            yield env, self._env_tasks[rid]

    def add_stub(self, env: EnvDoc, task_id: str) -> None:
        """A listed task not read yet: its id is its title (a listing snapshot)."""
        self.add_row(env, [task_id, task_id, "", {}, "unknown", "", "unknown", False], None)

    def add_row(self, env: EnvDoc, row: list[Any], doc: bytes | None) -> None:
        """Add a task's index row (see :func:`repogym.explorer.index.index_row`) and the key of
        its page in the pack (None: no page)."""
        tid, title, summary, f, grading, environment, network, runnable = row
        env_rid = self._env_ids[env.id]
        counters = self._facets[env_rid]
        extra = ""
        for key, value in f.items():
            if value and key != "tags":
                c = counters[key]
                c[value] = c.get(value, 0) + 1
            if not extra and key not in COLUMN_FACETS:
                extra = _ENCODE({k: v for k, v in f.items() if k not in COLUMN_FACETS})
        c = counters["grading"]
        c[grading] = c.get(grading, 0) + 1
        c = counters["network"]
        c[network] = c.get(network, 0) + 1
        self.n_tasks += 1
        span = self._ranges.get(env_rid)
        if span is None:
            self._ranges[env_rid] = [self.n_tasks, self.n_tasks]
        elif span[1] == self.n_tasks - 1:
            span[1] = self.n_tasks
        else:
            self._in_order = False
        self._tasks.append(
            (
                self.n_tasks,
                env_rid,
                env.id,
                tid,
                title,
                summary,
                extra,
                grading,
                environment,
                network,
                1 if runnable else 0,
                f.get("language"),
                f.get("category"),
                f.get("difficulty"),
                f.get("pipeline"),
                doc,
            )
        )

    def finish(self, extra_meta: dict[str, str] | None = None) -> dict[str, int]:
        """Build the snapshot file; returns counts.

        The task FTS index is built by a helper process into a side file (a process, so the
        two builds share no lock and use both cores; it gets the four indexed columns of the
        rows, marshalled) while this process writes the tables, the environments' FTS index
        and meta; the side file's FTS shadow tables are then copied under the virtual table
        created here with the same definition, which gives the same database as building it
        in place. Small builds (under ``HELPER_MIN_TASKS`` tasks), or a host where the helper
        cannot be started, build the index in place.
        """
        self._order_rows()
        side = self.path.with_name(self.path.name + ".fts")
        feed = self.path.with_name(self.path.name + ".in")
        db: sqlite3.Connection | None = None
        helper: subprocess.Popen[bytes] | None = None
        try:
            if len(self._tasks) >= HELPER_MIN_TASKS:
                helper = self._start_helper(feed, side)
            db = _bulk_connect(self.path)
            db.execute("BEGIN")
            for stmt in SCHEMA.split(";"):
                if stmt.strip():
                    db.execute(stmt)
            db.executemany(
                "INSERT INTO tasks VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", self._tasks
            )
            counts = self._write_envs(db, extra_meta or {})
            for stmt in INDEXES.split(";"):
                if stmt.strip():
                    db.execute(stmt)
            if helper is None:  # in place
                for stmt in _TASKS_FTS_BULK:
                    db.execute(stmt)
                db.execute(
                    "INSERT INTO tasks_fts(rowid, title, summary, id)"
                    " SELECT rid, title, summary, id FROM tasks"
                )
                db.execute("COMMIT")
                self.n_envs = counts["envs"]
                return counts
            db.execute("COMMIT")  # written while the helper still works
            _, err = helper.communicate()
            if helper.returncode != 0:
                last = (err.decode("utf-8", "replace").strip().splitlines() or ["no output"])[-1]
                raise SnapshotError(f"task search index build failed: {last}")
            helper = None
            db.execute("ATTACH DATABASE ? AS side", (str(side),))
            db.execute("BEGIN")
            for (name,) in db.execute(
                "SELECT name FROM side.sqlite_master WHERE type = 'table'"
                " AND name LIKE 'tasks_fts_%'"
            ).fetchall():
                db.execute(f'DELETE FROM main."{name}"')
                db.execute(f'INSERT INTO main."{name}" SELECT * FROM side."{name}"')
            db.execute("COMMIT")
            db.execute("DETACH DATABASE side")
        finally:
            if helper is not None:
                helper.kill()
                helper.wait()
            if db is not None:
                db.close()
            side.unlink(missing_ok=True)
            feed.unlink(missing_ok=True)
        self.n_envs = counts["envs"]
        return counts

    def _start_helper(self, feed: Path, side: Path) -> subprocess.Popen[bytes] | None:
        """Start the FTS helper on the indexed columns (None when it cannot be started)."""
        tasks = self._tasks
        with feed.open("wb") as fh:
            marshal.dump(
                (
                    [t[0] for t in tasks],
                    [t[4] for t in tasks],
                    [t[5] for t in tasks],
                    [t[3] for t in tasks],
                ),
                fh,
            )
        try:
            return subprocess.Popen(
                [sys.executable or "python3", "-I", "-S", "-c", _FTS_HELPER, str(feed), str(side)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        except OSError as exc:
            log.warning("explorer: FTS helper not started (%s); building the index in place", exc)
            return None

    def _order_rows(self) -> None:
        """Make each environment's tasks one contiguous rid range (they are, when rows come
        environment by environment)."""
        if self._in_order:
            return
        self._tasks.sort(key=lambda t: t[1])
        self._tasks = [(i, *t[1:]) for i, t in enumerate(self._tasks, 1)]
        self._ranges = {}
        for rid, t in enumerate(self._tasks, 1):
            self._ranges.setdefault(t[1], [rid, rid])[1] = rid
        self._in_order = True

    def _write_envs(self, db: sqlite3.Connection, extra_meta: dict[str, str]) -> dict[str, int]:
        """Environment rows (with their task facet counts and task rid range), their FTS
        rows, and meta."""
        env_rows = []
        fts_rows = []
        for rid, (env, r) in self._envs.items():
            counters = self._facets[rid]
            facets = dict(r["facets"])
            for key, counter in counters.items():
                if key not in facets and len(counter) == 1 and key in TASK_FACETS:
                    facets[key] = next(iter(counter))
            for key, value in r["facets"].items():
                if key in FACETS and value and value not in counters.get(key, {}):
                    counters[key][str(value)] = 0
            tags = " ".join(
                str(v) for k, v in facets.items() if k in ("tags", "language", "category")
            )
            env_rows.append(
                (
                    rid,
                    r["id"],
                    r["kind"],
                    r["title"],
                    r["summary"],
                    r["description"],
                    r["source"],
                    r["runs_in"],
                    r["run_options"],
                    _ENCODE(facets),
                    int(r["private"]),
                    env.task_count if env.task_count is not None else 0,
                    tags,
                    _ENCODE(counters),
                    *self._ranges.get(rid, (0, -1)),
                )
            )
            fts_rows.append((rid, r["id"], r["title"], r["summary"], tags))
        db.executemany("INSERT INTO envs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", env_rows)
        db.executemany(
            "INSERT INTO envs_fts(rowid, id, title, summary, tags) VALUES (?,?,?,?,?)", fts_rows
        )
        counts = {"envs": len(env_rows), "tasks": self.n_tasks}
        meta = {
            "schema_version": str(SCHEMA_VERSION),
            "built_at": _now(),
            "envs": str(counts["envs"]),
            "tasks": str(counts["tasks"]),
            "pack_id": self.pack_id,
            **extra_meta,
        }
        db.executemany("INSERT INTO meta VALUES (?,?)", sorted(meta.items()))
        return counts


def _bulk_connect(path: Path) -> sqlite3.Connection:
    """A connection set up for bulk loading into a new file."""
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60)
    for pragma in _BULK_PRAGMAS:
        db.execute(f"PRAGMA {pragma}")
    return db


# ---------------------------------------------------------------------------- publishing


def _fsync_file(path: Path) -> None:
    with path.open("rb") as fh:
        os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # readable by servers running as another user, like the snapshots
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def publish(
    built: Path, out_dir: Path | str, counts: dict[str, int], guard: Guard | None = None
) -> dict[str, Any]:
    """Check ``built`` (and ask ``guard``), move it to ``snapshots/<sha256>.sqlite``, then
    write the pointers last."""
    out = Path(out_dir)
    snaps = out / SNAPSHOTS
    snaps.mkdir(parents=True, exist_ok=True)
    size = built.stat().st_size
    # durable, hashed and checked at the same time (fsync, hashing and SQLite's checks all
    # run without the GIL)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        synced = pool.submit(_fsync_file, built)
        hashed = pool.submit(sha256_file, built)
        facts = validate(built)
        synced.result()
        digest = hashed.result()
    for key in ("envs", "tasks"):
        if facts["counts"][key] != counts[key]:
            raise SnapshotError(
                f"{key}: {facts['counts'][key]} rows written, {counts[key]} expected"
            )
    if built.stat().st_size != size:
        raise SnapshotError("snapshot changed while being checked")
    if guard is not None:
        guard(out, {**facts["counts"], "sources": source_counts(built)})
    final = snaps / f"{digest}.sqlite"
    os.replace(built, final)
    _fsync_dir(snaps)
    pointer = {
        "file": f"{SNAPSHOTS}/{final.name}",
        "sha256": digest,
        "size": size,
        "schema_version": SCHEMA_VERSION,
        "counts": {"envs": facts["counts"]["envs"], "tasks": facts["counts"]["tasks"]},
        "built_at": facts["meta"].get("built_at", ""),
        "pack_id": facts["meta"].get("pack_id", ""),
    }
    data = (json.dumps(pointer, indent=2) + "\n").encode()
    _atomic_write(out / versioned_pointer(), data)  # readers of this schema version
    if _newest_schema(out) <= SCHEMA_VERSION:  # a newer schema's indexer keeps CURRENT
        _atomic_write(out / POINTER, data)
    _prune(snaps, keep=final)
    return {"snapshot": str(final), "pointer": str(out / POINTER), **pointer}


def _newest_schema(out: Path) -> int:
    """The schema version ``out/CURRENT`` names (0: none, or unreadable)."""
    try:
        v = read_pointer(out).get("schema_version")
    except SnapshotError:
        return 0
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _named(snaps: Path) -> set[str]:
    """The snapshot files some pointer in the folder names (``CURRENT``, ``CURRENT.v<N>``)."""
    names: set[str] = set()
    for p in snaps.parent.glob(f"{POINTER}*"):
        if p.name == POINTER or p.name.startswith(f"{POINTER}.v"):
            try:
                names.add(Path(read_pointer(snaps.parent, p.name)["file"]).name)
            except SnapshotError:
                continue
    return names


def _prune(snaps: Path, keep: Path) -> None:
    named = _named(snaps)  # the current snapshot of every schema version stays
    files = sorted(
        (p for p in snaps.glob("*.sqlite") if p != keep and p.name not in named),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in files[max(KEEP_SNAPSHOTS - 1 - len(named - {keep.name}), 0) :]:
        old.unlink(missing_ok=True)
    for tmp in snaps.glob(".build-*.sqlite"):
        try:
            if time.time() - tmp.stat().st_mtime > 24 * 3600:
                tmp.unlink()
        except OSError:
            pass
