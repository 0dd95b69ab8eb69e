"""The explorer's SQLite snapshot: build, atomic publish, and a reader that swaps safely.

Build: one temp SQLite file on local disk (bulk-load PRAGMAs, one transaction, executemany),
tables ``envs``, ``env_facets``, ``tasks``, ``pack``, ``blobs``, ``meta`` and FTS5 tables
``envs_fts`` (trigram) and ``tasks_fts`` (unicode61, a prefix index for two characters:
longer prefixes are selective enough to be read from the main index). Publish: checks (size,
sha256, schema version, row counts, ``PRAGMA quick_check``), rename to
``<out>/snapshots/<sha256>.sqlite``, then the pointer ``<out>/CURRENT`` written last by atomic
replace. Read: :class:`SnapshotReader` opens ``mode=ro&immutable=1`` URIs, polls the pointer,
validates a new snapshot before swapping, and keeps the current one when the new one is
missing, corrupt, truncated or mismatched (logged on ``repogym.explorer``).
"""

from __future__ import annotations

import collections
import contextlib
import datetime as _dt
import hashlib
import json
import logging
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from repogym.explorer.index import (
    _ENCODE,
    FACETS,
    TASK_FACETS,
    Pack,
    env_row,
    pack_task,
    walk,
)
from repogym.explorer.model import EnvDoc, TaskDoc

__all__ = [
    "POINTER",
    "SCHEMA_VERSION",
    "SnapshotError",
    "SnapshotReader",
    "SnapshotWriter",
    "build_db",
    "publish",
    "read_pointer",
    "validate",
]

log = logging.getLogger("repogym.explorer")

SCHEMA_VERSION = 1
POINTER = "CURRENT"
SNAPSHOTS = "snapshots"
KEEP_SNAPSHOTS = 3  # older snapshot files are removed (open readers keep their file handles)
_BATCH = 5000
_COLUMN_FACETS = ("language", "category", "difficulty", "pipeline")  # indexed task columns

SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE envs(
  rid INTEGER PRIMARY KEY, id TEXT NOT NULL, kind TEXT NOT NULL, title TEXT NOT NULL,
  summary TEXT NOT NULL, description TEXT NOT NULL, source TEXT NOT NULL, runs_in TEXT NOT NULL,
  run_options TEXT NOT NULL, facets TEXT NOT NULL, private INTEGER NOT NULL,
  task_count INTEGER NOT NULL, tags TEXT NOT NULL);
CREATE TABLE env_facets(env INTEGER NOT NULL, facet TEXT NOT NULL, value TEXT NOT NULL,
  n INTEGER NOT NULL);
CREATE TABLE tasks(
  rid INTEGER PRIMARY KEY, env INTEGER NOT NULL, env_id TEXT NOT NULL, id TEXT NOT NULL,
  title TEXT NOT NULL, summary TEXT NOT NULL, facets TEXT NOT NULL, grading TEXT NOT NULL,
  environment TEXT NOT NULL, network TEXT NOT NULL, runnable INTEGER NOT NULL,
  language TEXT, category TEXT, difficulty TEXT, pipeline TEXT);
CREATE TABLE pack(task INTEGER PRIMARY KEY, doc BLOB NOT NULL);
CREATE TABLE blobs(id INTEGER PRIMARY KEY, sha256 BLOB NOT NULL, enc INTEGER NOT NULL,
  data BLOB NOT NULL);
CREATE VIRTUAL TABLE envs_fts USING fts5(id, title, summary, tags, tokenize='trigram');
CREATE VIRTUAL TABLE tasks_fts USING fts5(title, summary, id, content='',
  tokenize='unicode61 remove_diacritics 2', prefix='2');
"""
INDEXES = """
CREATE UNIQUE INDEX envs_id ON envs(id);
CREATE UNIQUE INDEX tasks_env_id ON tasks(env, id);
CREATE INDEX env_facets_env ON env_facets(env);
"""


class SnapshotError(Exception):
    """A snapshot is missing, corrupt, truncated or does not match its pointer."""


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


# ---------------------------------------------------------------------------- building


class SnapshotWriter:
    """Writes one snapshot database file (bulk load, one transaction)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.db = sqlite3.connect(self.path, isolation_level=None)
        for pragma in (
            "journal_mode=OFF",
            "synchronous=OFF",
            "locking_mode=EXCLUSIVE",
            "temp_store=MEMORY",
            "cache_size=-131072",
            "page_size=8192",
        ):
            self.db.execute(f"PRAGMA {pragma}")
        self.db.execute("BEGIN")
        for stmt in SCHEMA.split(";"):
            if stmt.strip():
                self.db.execute(stmt)
        # Bulk load: no incremental merging while loading and few forced merges. Queries over
        # the few segments left are as fast as over one, so the task index is not optimised.
        self.db.execute("INSERT INTO tasks_fts(tasks_fts, rank) VALUES ('automerge', 0)")
        self.db.execute("INSERT INTO tasks_fts(tasks_fts, rank) VALUES ('crisismerge', 64)")
        self.pack = Pack(sink=self._blob)
        self._blobs: list[tuple[int, bytes, int, bytes]] = []
        self._tasks: list[tuple[Any, ...]] = []
        self._packs: list[tuple[int, bytes]] = []
        self._env_ids: dict[str, int] = {}
        self._env_tasks: dict[int, dict[str, str]] = {}  # env rid -> task id -> "" (listing)
        self._env_docs: dict[int, EnvDoc] = {}
        self._facets: dict[int, dict[str, dict[str, int]]] = {}
        self._task_rid = 0
        self.n_envs = 0
        self.n_tasks = 0

    def _blob(self, bid: int, sha: bytes, enc: int, payload: bytes) -> None:
        self._blobs.append((bid, sha, enc, payload))
        if len(self._blobs) >= _BATCH:
            self._flush_blobs()

    def _flush_blobs(self) -> None:
        if self._blobs:
            self.db.executemany("INSERT INTO blobs VALUES (?,?,?,?)", self._blobs)
            self._blobs.clear()

    def add_env(self, env: EnvDoc, task_ids: list[str] | None = None) -> int:
        """Register an environment (its row is written at :meth:`finish`)."""
        rid = len(self._env_ids) + 1
        self._env_ids[env.id] = rid
        self._env_docs[rid] = env
        self._facets[rid] = collections.defaultdict(dict)
        self._env_tasks[rid] = dict.fromkeys(task_ids or [], "")
        return rid

    def add_stub(self, env: EnvDoc, task_id: str) -> None:
        """A listed task not read yet: its id is its title (a listing snapshot)."""
        doc = TaskDoc(task_id, task_id, "", {}, "unknown", "", "unknown", False, [], [])
        self.add_task(env, doc, packed=False)

    def add_task(self, env: EnvDoc, doc: TaskDoc, *, packed: bool = True) -> None:
        """Add a prepared (withheld) task: index row, FTS text, pack entry."""
        env_rid = self._env_ids[env.id]
        self._task_rid += 1
        rid = self._task_rid
        f = doc.facets
        extra = {k: v for k, v in f.items() if k not in _COLUMN_FACETS}
        grading = doc.grading or "unknown"
        network = doc.network or "unknown"
        self._tasks.append(
            (
                rid,
                env_rid,
                env.id,
                doc.id,
                doc.title,
                doc.summary,
                _ENCODE(extra) if extra else "",
                grading,
                doc.environment,
                network,
                1 if doc.runnable else 0,
                f.get("language"),
                f.get("category"),
                f.get("difficulty"),
                f.get("pipeline"),
            )
        )
        counters = self._facets[env_rid]
        for key, value in f.items():
            if key != "tags" and value:
                c = counters[key]
                c[value] = c.get(value, 0) + 1
        c = counters["grading"]
        c[grading] = c.get(grading, 0) + 1
        c = counters["network"]
        c[network] = c.get(network, 0) + 1
        if packed:
            self._packs.append((rid, pack_task(doc, self.pack)))
        if len(self._tasks) >= _BATCH:
            self._flush_tasks()
        self.n_tasks += 1

    def _flush_tasks(self) -> None:
        if self._tasks:
            self.db.executemany(
                "INSERT INTO tasks VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", self._tasks
            )
            self._tasks.clear()
        if self._packs:
            self.db.executemany("INSERT INTO pack VALUES (?,?)", self._packs)
            self._packs.clear()

    def finish(self, extra_meta: dict[str, str] | None = None) -> dict[str, int]:
        """Write env rows, facets, FTS and meta; commit, optimise and close. Returns counts."""
        self._flush_tasks()
        self._flush_blobs()
        db = self.db
        env_rows = []
        facet_rows = []
        fts_rows = []
        for rid, env in self._env_docs.items():
            r = env_row(env)
            counters = self._facets[rid]
            facets = dict(r["facets"])
            for key, counter in counters.items():
                if key not in facets and len(counter) == 1 and key in TASK_FACETS:
                    facets[key] = next(iter(counter))
            for key, value in r["facets"].items():
                if key in FACETS and value and value not in counters.get(key, {}):
                    counters[key][str(value)] = 0
            for key, counter in counters.items():
                for value, n in counter.items():
                    facet_rows.append((rid, key, value, n))
            tags = " ".join(
                str(v) for k, v in facets.items() if k in ("tags", "language", "category")
            )
            n_tasks = env.task_count if env.task_count is not None else 0
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
                    json.dumps(r["run_options"], ensure_ascii=False),
                    json.dumps(facets, ensure_ascii=False),
                    int(r["private"]),
                    n_tasks,
                    tags,
                )
            )
            fts_rows.append((rid, r["id"], r["title"], r["summary"], tags))
        db.executemany("INSERT INTO envs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", env_rows)
        db.executemany("INSERT INTO env_facets VALUES (?,?,?,?)", facet_rows)
        db.executemany(
            "INSERT INTO envs_fts(rowid, id, title, summary, tags) VALUES (?,?,?,?,?)", fts_rows
        )
        db.execute(
            "INSERT INTO tasks_fts(rowid, title, summary, id)"
            " SELECT rid, title, summary, id FROM tasks"
        )
        for stmt in INDEXES.split(";"):
            if stmt.strip():
                db.execute(stmt)
        n_blobs = db.execute("SELECT count(*) FROM blobs").fetchone()[0]
        counts = {"envs": len(env_rows), "tasks": self.n_tasks, "blobs": n_blobs}
        meta = {
            "schema_version": str(SCHEMA_VERSION),
            "built_at": _now(),
            "envs": str(counts["envs"]),
            "tasks": str(counts["tasks"]),
            "blobs": str(counts["blobs"]),
            "pack_bytes_in": str(self.pack.bytes_in),
            "pack_bytes_stored": str(self.pack.bytes_stored),
            **(extra_meta or {}),
        }
        db.executemany("INSERT INTO meta VALUES (?,?)", sorted(meta.items()))
        db.execute("INSERT INTO envs_fts(envs_fts) VALUES ('optimize')")
        db.execute("COMMIT")
        db.close()
        self.n_envs = counts["envs"]
        return counts

    def abort(self) -> None:
        """Close without committing."""
        with contextlib.suppress(sqlite3.Error):
            self.db.close()


def build_db(
    readers: Iterable[tuple[str, Any]],
    path: Path | str,
    *,
    progress: Callable[[str, dict[str, Any]], None] | None = None,
    include_private: bool = False,
    on_listed: Callable[[SnapshotWriter], None] | None = None,
) -> dict[str, Any]:
    """Index every reader into a new database file at ``path``; returns counts and errors."""
    writer = SnapshotWriter(path)
    try:
        n_envs, n_tasks, errors = walk(
            readers,
            on_listing=lambda env, ids: writer.add_env(env, ids),
            on_task=writer.add_task,
            on_listed=(lambda: on_listed(writer)) if on_listed else None,
            progress=progress,
            include_private=include_private,
        )
        counts = writer.finish()
    except BaseException:
        writer.abort()
        raise
    return {**counts, "errors": errors}


# ---------------------------------------------------------------------------- checks


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def ro_uri(path: Path | str) -> str:
    """The read-only, immutable SQLite URI of a snapshot file."""
    return f"file:{quote(str(Path(path).resolve()))}?mode=ro&immutable=1"


def connect_ro(path: Path | str) -> sqlite3.Connection:
    """A read-only, immutable connection (usable from any thread it is handed to)."""
    db = sqlite3.connect(ro_uri(path), uri=True, check_same_thread=False)
    db.execute("PRAGMA query_only=1")
    return db


def _db_facts(path: Path) -> dict[str, Any]:
    """Schema version, meta and real row counts of a snapshot file, after ``quick_check``."""
    try:
        db = connect_ro(path)
    except sqlite3.Error as exc:
        raise SnapshotError(f"cannot open {path.name}: {exc}") from None
    try:
        check = db.execute("PRAGMA quick_check").fetchall()
        if check != [("ok",)]:
            raise SnapshotError(f"{path.name}: quick_check failed: {check[0][0]}")
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        counts = {
            "envs": db.execute("SELECT count(*) FROM envs").fetchone()[0],
            "tasks": db.execute("SELECT count(*) FROM tasks").fetchone()[0],
        }
    except sqlite3.Error as exc:
        raise SnapshotError(f"{path.name}: {exc}") from None
    finally:
        db.close()
    return {"meta": meta, "counts": counts}


def validate(path: Path, expected: dict[str, Any] | None = None) -> dict[str, Any]:
    """Check a snapshot file (against its pointer entry when given); raise SnapshotError."""
    if not path.is_file():
        raise SnapshotError(f"{path.name}: missing")
    size = path.stat().st_size
    if expected is not None:
        if size != expected.get("size"):
            raise SnapshotError(f"{path.name}: size {size}, pointer says {expected.get('size')}")
        digest = _sha256(path)
        if digest != expected.get("sha256"):
            raise SnapshotError(f"{path.name}: sha256 does not match the pointer")
        if expected.get("schema_version") != SCHEMA_VERSION:
            raise SnapshotError(
                f"{path.name}: schema version {expected.get('schema_version')!r} in the pointer, "
                f"this reader reads {SCHEMA_VERSION}"
            )
    facts = _db_facts(path)
    meta = facts["meta"]
    if meta.get("schema_version") != str(SCHEMA_VERSION):
        raise SnapshotError(
            f"{path.name}: schema version {meta.get('schema_version')!r}, "
            f"this reader reads {SCHEMA_VERSION}"
        )
    for key in ("envs", "tasks"):
        if str(facts["counts"][key]) != meta.get(key):
            raise SnapshotError(
                f"{path.name}: {key} rows {facts['counts'][key]} != meta {meta.get(key)}"
            )
        if expected is not None and (expected.get("counts") or {}).get(key) != facts["counts"][key]:
            raise SnapshotError(f"{path.name}: {key} rows do not match the pointer")
    return facts


# ---------------------------------------------------------------------------- publishing


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
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def publish(built: Path, out_dir: Path | str, counts: dict[str, int]) -> dict[str, Any]:
    """Check ``built``, move it to ``snapshots/<sha256>.sqlite``, then write the pointer last."""
    out = Path(out_dir)
    snaps = out / SNAPSHOTS
    snaps.mkdir(parents=True, exist_ok=True)
    with built.open("rb") as fh:
        os.fsync(fh.fileno())
    size = built.stat().st_size
    digest = _sha256(built)
    facts = validate(built)
    for key in ("envs", "tasks"):
        if facts["counts"][key] != counts[key]:
            raise SnapshotError(
                f"{key}: {facts['counts'][key]} rows written, {counts[key]} expected"
            )
    if built.stat().st_size != size:
        raise SnapshotError("snapshot changed while being checked")
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
    }
    _atomic_write(out / POINTER, (json.dumps(pointer, indent=2) + "\n").encode())
    _prune(snaps, keep=final)
    return {"snapshot": str(final), "pointer": str(out / POINTER), **pointer}


def _prune(snaps: Path, keep: Path) -> None:
    files = sorted(
        (p for p in snaps.glob("*.sqlite") if p != keep),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in files[KEEP_SNAPSHOTS - 1 :]:
        old.unlink(missing_ok=True)
    for tmp in snaps.glob(".build-*.sqlite"):
        try:
            if time.time() - tmp.stat().st_mtime > 24 * 3600:
                tmp.unlink()
        except OSError:
            pass


def read_pointer(out_dir: Path | str) -> dict[str, Any]:
    """The pointer file's content; SnapshotError when missing or malformed."""
    p = Path(out_dir) / POINTER
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SnapshotError(f"no snapshot pointer at {p}") from None
    except (OSError, ValueError) as exc:
        raise SnapshotError(f"unreadable snapshot pointer {p}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("file"), str):
        raise SnapshotError(f"malformed snapshot pointer {p}")
    rel = data["file"]
    if rel.startswith("/") or ".." in rel.split("/"):
        raise SnapshotError(f"snapshot pointer {p} points outside its folder")
    return data


# ---------------------------------------------------------------------------- reading


@dataclass(eq=False)
class Handle:
    """One validated snapshot file in use."""

    path: Path
    version: str
    facts: dict[str, Any]

    def __post_init__(self) -> None:
        self.cache: dict[str, Any] = {}  # per-snapshot caches kept by the store
        self.cache_lock = threading.Lock()


def empty_handle() -> Handle:
    """An empty database with the snapshot schema (no snapshot published yet)."""
    tmp = Path(tempfile.mkdtemp(prefix="repogym-explore-empty-")) / "empty.sqlite"
    SnapshotWriter(tmp).finish()
    return Handle(tmp, "empty", _db_facts(tmp))


def _close_quietly(db: sqlite3.Connection | None) -> None:
    if db is not None:
        with contextlib.suppress(sqlite3.Error):
            db.close()


class SnapshotReader:
    """Serves the snapshot named by ``<out_dir>/CURRENT`` and swaps to newer ones safely.

    The pointer is polled on access at most every ``poll_seconds``; a new snapshot is validated
    (exists, size, sha256, schema version, row counts, quick_check) before it is swapped in.
    A query in flight keeps the connection it started with: connections belong to one thread
    and one snapshot, and a thread moves to the new snapshot at its next access.
    """

    def __init__(
        self, out_dir: Path | str, poll_seconds: float = 2.0, *, background: bool | None = None
    ) -> None:
        self.out_dir = Path(out_dir)
        self.poll_seconds = poll_seconds
        # By default a new snapshot is validated off the request path; with poll_seconds=0
        # (check on every access) it is validated in the request that notices it.
        self.background = poll_seconds > 0 if background is None else background
        self._lock = threading.Lock()
        self._checked = 0.0
        self._seen: tuple[int, int, str] | None = None  # (mtime_ns, size, content) of CURRENT
        self._handle: Handle | None = None
        self._local = threading.local()
        self._worker: threading.Thread | None = None
        self.swaps = 0
        self.on_new: Callable[[Handle], None] | None = None
        self.rejected: list[str] = []
        self._check(force=True)
        if self._handle is None:
            log.warning("no valid explorer snapshot in %s yet: serving an empty one", self.out_dir)
            self._handle = empty_handle()

    @property
    def handle(self) -> Handle:
        """The snapshot in use (after a poll, when one is due)."""
        if time.monotonic() - self._checked >= self.poll_seconds:
            self._check()
        assert self._handle is not None
        return self._handle

    def acquire(self) -> tuple[Handle, sqlite3.Connection]:
        """The snapshot in use and this thread's connection to it.

        Use the pair for a whole request. A thread's connection to an older snapshot is
        closed by that same thread when it next acquires, so no query in flight ever loses it.
        """
        h = self.handle
        local = self._local
        if getattr(local, "handle", None) is not h:
            _close_quietly(getattr(local, "db", None))
            local.db = None
            local.db = connect_ro(h.path)
            local.handle = h
        return h, local.db

    def settle(self, timeout: float | None = 60.0) -> None:
        """Wait until a snapshot being validated in the background is swapped in or rejected."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)

    def _check(self, force: bool = False) -> None:
        """Stat the pointer (cheap); when it changed, validate the new snapshot.

        Validation (sha256, quick_check, cache warm-up) runs on a background thread, so the
        request that noticed the change is not slowed down; the first check is synchronous.
        """
        if not self._lock.acquire(blocking=force):
            return  # another thread is checking; keep serving the current snapshot
        try:
            self._checked = time.monotonic()
            if self._worker is not None and self._worker.is_alive():
                return
            p = self.out_dir / POINTER
            try:
                st = p.stat()
                content = p.read_text(encoding="utf-8")
            except OSError:
                if self._handle is None and self._seen is None:
                    self._seen = (0, 0, "")
                    log.warning("explorer snapshot pointer %s is missing", p)
                return
            key = (st.st_mtime_ns, st.st_size, content)
            if key == self._seen:
                return
            self._seen = key
            if force or not self.background:
                self._load()
            else:
                self._worker = threading.Thread(
                    target=self._load, name="explorer-snapshot-check", daemon=True
                )
                self._worker.start()
        finally:
            self._lock.release()

    def _load(self) -> None:
        try:
            pointer = read_pointer(self.out_dir)
            if self._handle is not None and pointer.get("sha256") == self._handle.version:
                return
            path = self.out_dir / pointer["file"]
            facts = validate(path, pointer)
        except SnapshotError as exc:
            self.rejected.append(str(exc))
            log.warning("explorer snapshot rejected, keeping the current one: %s", exc)
            return
        new = Handle(path, str(pointer["sha256"]), facts)
        if self.on_new is not None:
            try:
                self.on_new(new)  # warm caches before the first request sees it
            except Exception as exc:
                log.warning("explorer snapshot warm-up failed: %s", exc)
        old, self._handle = self._handle, new
        if old is not None:
            self.swaps += 1
            log.info("explorer snapshot swapped to %s", new.version[:12])

    def close(self) -> None:
        """Close this thread's connection (others close with their threads)."""
        _close_quietly(getattr(self._local, "db", None))
        self._local.db = None
        self._local.handle = None
