"""The explorer's SQLite snapshot: build, atomic publish, and a reader that swaps safely.

The snapshot is the index only: tables ``envs`` (with each environment's task facet counts and
the rid range of its tasks, which are stored together), ``tasks`` (each row names its page in
the pack by key), ``meta`` and FTS5 tables ``envs_fts`` (trigram) and ``tasks_fts``
(unicode61, a prefix index for two characters: longer prefixes are selective enough to be read
from the main index). Task pages and file bodies live in the pack beside it
(:mod:`repogym.explorer.pack`), which is why a snapshot is small and quick to build from rows.

Build: one temp SQLite file on local disk (bulk-load PRAGMAs, executemany); the task FTS
index of a big build is made by a helper process beside it and copied in.
Publish: checks (size, sha256, schema version, row counts, ``PRAGMA quick_check``, the pack it
was built with is there), rename to ``<out>/snapshots/<sha256>.sqlite``, then the pointer
``<out>/CURRENT`` written last by atomic replace. Read: :class:`SnapshotReader` opens
``mode=ro&immutable=1`` URIs, polls the pointer, validates a new snapshot before swapping, and
keeps the current one when the new one is missing, corrupt, truncated or mismatched (logged on
``repogym.explorer``).
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import datetime as _dt
import hashlib
import json
import logging
import marshal
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from repogym.explorer.facets import COLUMN_FACETS, FACETS, TASK_FACETS
from repogym.explorer.index import env_row
from repogym.explorer.model import EnvDoc
from repogym.explorer.pack import PACK_FILE, PackError, connect_pack, pack_id

__all__ = [
    "POINTER",
    "SCHEMA_VERSION",
    "SnapshotError",
    "SnapshotReader",
    "SnapshotWriter",
    "publish",
    "pack_path",
    "read_pointer",
    "validate",
]

log = logging.getLogger("repogym.explorer")

SCHEMA_VERSION = 3
POINTER = "CURRENT"
SNAPSHOTS = "snapshots"
KEEP_SNAPSHOTS = 3  # older snapshot files are removed (open readers keep their file handles)
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


class SnapshotError(Exception):
    """A snapshot is missing, corrupt, truncated or does not match its pointer."""


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


def pack_path(snapshot: Path) -> Path:
    """Where the pack of a snapshot file is: ``<out>/pack.sqlite`` beside ``<out>/snapshots``."""
    return snapshot.parent.parent / PACK_FILE


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
    facts["pack"] = None
    want = meta.get("pack_id", "")
    if want:
        pack = pack_path(path)
        try:
            have = pack_id(pack)
        except PackError as exc:
            raise SnapshotError(f"{path.name}: its pack {exc}") from None
        if have != want or (expected is not None and expected.get("pack_id", want) != want):
            raise SnapshotError(f"{path.name}: built with another pack than {pack.name}")
        facts["pack"] = pack
    for key in ("envs", "tasks"):
        if str(facts["counts"][key]) != meta.get(key):
            raise SnapshotError(
                f"{path.name}: {key} rows {facts['counts'][key]} != meta {meta.get(key)}"
            )
        if expected is not None and (expected.get("counts") or {}).get(key) != facts["counts"][key]:
            raise SnapshotError(f"{path.name}: {key} rows do not match the pointer")
    return facts


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


def publish(built: Path, out_dir: Path | str, counts: dict[str, int]) -> dict[str, Any]:
    """Check ``built``, move it to ``snapshots/<sha256>.sqlite``, then write the pointer last."""
    out = Path(out_dir)
    snaps = out / SNAPSHOTS
    snaps.mkdir(parents=True, exist_ok=True)
    size = built.stat().st_size
    # durable, hashed and checked at the same time (fsync, hashing and SQLite's checks all
    # run without the GIL)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        synced = pool.submit(_fsync_file, built)
        hashed = pool.submit(_sha256, built)
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

    @property
    def pack(self) -> Path | None:
        """The pack this snapshot's rows refer to (None: no pages)."""
        return self.facts.get("pack")

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

    def pack(self, h: Handle) -> sqlite3.Connection:
        """This thread's read-only connection to the pack of snapshot ``h``.

        Raises :class:`PackError` when the snapshot has no pack or it cannot be opened.
        """
        if h.pack is None:
            raise PackError("this snapshot has no task pages")
        local = self._local
        key = (h.pack, h.facts["meta"].get("pack_id"))  # a pack rebuilt in place is another
        if getattr(local, "pack_path", None) != key:
            _close_quietly(getattr(local, "pack_db", None))
            local.pack_db = None
            local.pack_db = connect_pack(h.pack)
            local.pack_path = key
        return local.pack_db

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
        _close_quietly(getattr(self._local, "pack_db", None))
        self._local.db = None
        self._local.handle = None
        self._local.pack_db = None
        self._local.pack_path = None
