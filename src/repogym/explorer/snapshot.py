"""The explorer's SQLite snapshot: what it holds, its checks, and a reader that swaps safely.

The snapshot is the index only: tables ``envs`` (with each environment's task facet counts and
the rid range of its tasks, which are stored together), ``tasks`` (each row names its page in
the pack by key), ``meta`` and FTS5 tables ``envs_fts`` (trigram) and ``tasks_fts``
(unicode61, a prefix index for two characters: longer prefixes are selective enough to be read
from the main index). Task pages and file bodies live in the pack beside it
(:mod:`repogym.explorer.pack`), which is why a snapshot is small and quick to build from rows.

Building and publishing are in :mod:`.snapshot_write` (the pointer ``<out>/CURRENT`` names
``<out>/snapshots/<sha256>.sqlite`` and is written last). Each schema version also has its own
pointer, ``<out>/CURRENT.v<N>``: after a schema bump, ``CURRENT`` names the newest schema and a
reader of an older one follows its own versioned pointer, so it keeps a complete snapshot it can
read. Read: :class:`SnapshotReader` opens ``mode=ro&immutable=1`` URIs, polls the pointer,
validates a new snapshot before swapping, and keeps the current one when the new one is missing,
corrupt, truncated or mismatched (logged on ``repogym.explorer``).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from repogym.explorer.pack import PACK_FILE, PackError, connect_pack, pack_id

__all__ = [
    "POINTER",
    "SCHEMA_VERSION",
    "SNAPSHOTS",
    "Handle",
    "SnapshotError",
    "SnapshotReader",
    "connect_ro",
    "empty_handle",
    "pack_path",
    "read_pointer",
    "ro_uri",
    "sha256_file",
    "source_counts",
    "validate",
    "versioned_pointer",
]

log = logging.getLogger("repogym.explorer")

SCHEMA_VERSION = 3
POINTER = "CURRENT"
SNAPSHOTS = "snapshots"


class SnapshotError(Exception):
    """A snapshot is missing, corrupt, truncated or does not match its pointer."""


def versioned_pointer(version: int | None = None) -> str:
    """The name of the pointer to the newest snapshot of one schema version (default: the
    version this code reads and writes)."""
    return f"{POINTER}.v{SCHEMA_VERSION if version is None else version}"


def _foreign_schema(text: str) -> bool:
    """True when ``text`` is a pointer naming a schema version other than this reader's."""
    try:
        data = json.loads(text)
    except ValueError:
        return False
    v = data.get("schema_version") if isinstance(data, dict) else None
    return isinstance(v, int) and not isinstance(v, bool) and v != SCHEMA_VERSION


# ---------------------------------------------------------------------------- checks


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
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


def source_counts(path: Path | str) -> dict[str, dict[str, int]]:
    """Environments and tasks per source (an environment's ``source``, else its id) of a
    snapshot file; SnapshotError when it cannot be read."""
    queries = (  # each environment's tasks are one rid range; older files: count the rows
        "SELECT CASE WHEN source != '' THEN source ELSE id END, count(*),"
        " total(max(last_task - first_task + 1, 0)) FROM envs GROUP BY 1",
        "SELECT CASE WHEN e.source != '' THEN e.source ELSE e.id END, count(DISTINCT e.rid),"
        " count(t.rid) FROM envs e LEFT JOIN tasks t ON t.env = e.rid GROUP BY 1",
    )
    try:
        db = connect_ro(path)
    except sqlite3.Error as exc:
        raise SnapshotError(f"cannot open {Path(path).name}: {exc}") from None
    error: sqlite3.Error | None = None
    try:
        for sql in queries:
            try:
                rows = db.execute(sql).fetchall()
            except sqlite3.Error as exc:
                error = exc
                continue
            return {str(s): {"envs": int(e), "tasks": int(t)} for s, e, t in rows}
        raise SnapshotError(f"{Path(path).name}: {error}")
    finally:
        db.close()


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
        digest = sha256_file(path)
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


def read_pointer(out_dir: Path | str, name: str = POINTER) -> dict[str, Any]:
    """The pointer file's content (``name``: ``CURRENT`` or a :func:`versioned_pointer`);
    SnapshotError when missing or malformed."""
    p = Path(out_dir) / name
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
    from repogym.explorer.snapshot_write import SnapshotWriter  # the writer imports this module

    folder = Path(tempfile.mkdtemp(prefix="repogym-explore-empty-"))
    atexit.register(shutil.rmtree, folder, True)  # nothing left behind when the server stops
    tmp = folder / "empty.sqlite"
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
        self._seen: tuple[str, int, int, str] | None = None  # (name, mtime_ns, size, content)
        self._foreign = ""  # the last CURRENT seen naming another schema version
        self._last, self._last_foreign = "", False  # CURRENT's content, and whether foreign
        self._handle: Handle | None = None
        self._local = threading.local()
        self._worker: threading.Thread | None = None
        self.swaps = 0
        self.on_new: Callable[[Handle], None] | None = None
        self.rejected: list[str] = []
        self._check(force=True)
        if self._handle is None and self.rejected:
            # A pointer names a snapshot that does not check out: a damaged folder, not one
            # still waiting for its first publication; serving it empty would hide that.
            raise SnapshotError(f"{self.out_dir}: {self.rejected[-1]}")
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

        ``CURRENT`` is followed unless it names another schema version: then this version's
        own pointer (``CURRENT.v<N>``) is, when there is one. Validation (sha256, quick_check,
        cache warm-up) runs on a background thread, so the request that noticed the change is
        not slowed down; the first check is synchronous.
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
                    self._seen = ("", 0, 0, "")
                    log.warning("explorer snapshot pointer %s is missing", p)
                return
            name = POINTER
            if content != self._last:  # parsed once per change (a few hundred bytes)
                self._last, self._last_foreign = content, _foreign_schema(content)
            if self._last_foreign:  # a newer (or older) schema: follow this one's own
                newest, own = content, self.out_dir / versioned_pointer()
                # none of this version: the newest is checked (and rejected)
                with contextlib.suppress(OSError):
                    st, content, name = own.stat(), own.read_text(encoding="utf-8"), own.name
                if name != POINTER and newest != self._foreign:
                    self._foreign = newest
                    why = f"{POINTER} names another schema version than {SCHEMA_VERSION}"
                    self.rejected.append(why)
                    log.warning("explorer snapshot rejected: %s; following %s", why, name)
            key = (name, st.st_mtime_ns, st.st_size, content)
            if key == self._seen:
                return
            self._seen = key
            if force or not self.background:
                self._load(name)
            else:
                self._worker = threading.Thread(
                    target=self._load, args=(name,), name="explorer-snapshot-check", daemon=True
                )
                self._worker.start()
        finally:
            self._lock.release()

    def _load(self, name: str = POINTER) -> None:
        try:
            pointer = read_pointer(self.out_dir, name)
            if self._handle is not None and pointer.get("sha256") == self._handle.version:
                return
            path = self.out_dir / pointer["file"]
            facts = validate(path, pointer)
        except SnapshotError as exc:
            self.rejected.append(str(exc))
            if self._handle is not None:  # at start-up the caller reports it (and stops)
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
