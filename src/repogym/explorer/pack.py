"""The pack: what task pages show, stored once per content, beside the snapshots.

``<out>/pack.sqlite`` holds every task page (sections, file list, withheld notes, aliases) and
every file body, content-addressed: a body is stored once per sha256 however many tasks hold it,
and a page is stored under the sha256 of its own encoding. Entries are only ever added, so a
snapshot that names a page by its key can rely on it for as long as the snapshot is kept; pages
no kept snapshot names are collected after a publish (:meth:`PackWriter.collect`).

The pack also remembers, per task *fingerprint* (a cheap identity of the task's source, e.g. the
sizes and modification times of its files, plus the withholding rules in force), the index row
and page key that task produced. An index run over unchanged sources then skips reading and
withholding those tasks: only new or changed tasks cost anything.

The snapshot (:mod:`repogym.explorer.snapshot`) holds only the index (rows and FTS) and names
pages by key; readers open the pack read-only beside it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import uuid
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from repogym.explorer.model import TaskDoc

__all__ = [
    "PACK_FILE",
    "PACK_FORMAT",
    "PackError",
    "PackWriter",
    "connect_pack",
    "decode_blob",
    "encode_doc",
    "pack_id",
    "read_blob",
    "read_doc",
]

log = logging.getLogger("repogym.explorer")

PACK_FILE = "pack.sqlite"
PACK_FORMAT = "2"
INLINE_MAX = 4096  # section texts up to this size stay inline (unless a file holds them)
COMPRESS_MIN = 2048  # blobs from this size are stored zlib-compressed when that saves space
_COMMIT_EVERY = 2000  # pages per commit: a killed index run keeps what it packed

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS blobs(sha BLOB PRIMARY KEY, enc INTEGER NOT NULL, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS docs(key BLOB PRIMARY KEY, doc BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS seen(fp BLOB PRIMARY KEY, doc BLOB NOT NULL, row BLOB NOT NULL);
"""


class PackError(Exception):
    """The pack is missing, unreadable or not the one a snapshot was built with."""


_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def decode_blob(enc: int, payload: bytes) -> bytes:
    """The bytes of a stored blob."""
    return zlib.decompress(payload) if enc == 1 else bytes(payload)


def encode_doc(doc: TaskDoc, add_blob: Any) -> bytes:
    """The page of a prepared task as compact JSON; ``add_blob(bytes) -> sha hex`` stores bodies.

    File bodies are blobs. A section whose text is also a file of the task (instruction.md, the
    Dockerfile, test.sh, task.toml) points at that file's blob; other sections stay inline up to
    ``INLINE_MAX`` bytes, larger ones are blobs. Default values (markdown format, no language)
    are left out.
    """
    files = []
    by_data: dict[bytes, str] = {}
    for f in doc.files:
        entry: dict[str, Any] = {"path": f.path, "size": f.size}
        if f.withheld:
            entry["withheld"] = f.withheld
        elif f.data is not None:
            ref = add_blob(f.data)
            entry["blob"] = ref
            by_data[f.data] = ref
        else:
            entry["withheld"] = "not packed"
        files.append(entry)
    sections = []
    for s in doc.sections:
        d: dict[str, Any] = {"id": s.id, "title": s.title}
        ref = None
        if by_data or len(s.body) > INLINE_MAX:
            raw = s.body.encode("utf-8")
            ref = by_data.get(raw)
            if ref is None and len(raw) > INLINE_MAX:
                ref = add_blob(raw)
        if ref is None:
            d["body"] = s.body
        else:
            d["blob"] = ref
        if s.format != "markdown":
            d["format"] = s.format
        if s.language:
            d["language"] = s.language
        sections.append(d)
    out: dict[str, Any] = {"sections": sections, "files": files}
    if doc.withheld:
        out["withheld"] = doc.withheld
    if doc.aliases:
        out["aliases"] = doc.aliases
    if doc.network_modes:
        out["network_modes"] = doc.network_modes
    if doc.verifier_env:
        out["verifier_env"] = doc.verifier_env
    return _ENCODE(out).encode("utf-8")


def _blob_refs(doc: bytes) -> Iterable[bytes]:
    data = json.loads(doc)
    for item in (*data.get("files", ()), *data.get("sections", ())):
        ref = item.get("blob")
        if isinstance(ref, str):
            yield bytes.fromhex(ref)


class PackWriter:
    """Adds pages and bodies to a pack (creating it when missing); one writer at a time.

    Work is committed every ``_COMMIT_EVERY`` pages and at :meth:`close`, so an interrupted
    index run keeps what it packed and the next run skips it.
    """

    def __init__(self, path: Path | str, *, private: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = self._open()
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise PackError(f"{self.path}: another index run is writing it") from None
            raise PackError(f"{self.path}: {exc}") from None
        except (sqlite3.DatabaseError, PackError) as exc:
            # A damaged or foreign file: set it aside and start a new pack. Snapshots built
            # with the old one no longer match (readers keep serving what they have).
            aside = self.path.with_name(f"{self.path.name}.bad-{uuid.uuid4().hex[:8]}")
            log.warning("explorer pack %s unusable (%s): moved to %s", self.path, exc, aside)
            os.replace(self.path, aside)
            self.db = self._open()
        self.id = self._meta("pack_id")
        # A pack that ever held a private dataset's pages is never reused by a public index
        # run: its folder could be published with them inside.
        held = self.db.execute("SELECT value FROM meta WHERE key = 'private'").fetchone()
        if held is not None and not private:
            self.db.close()
            raise PackError(
                f"{self.path} holds pages of private datasets: index public ones into another "
                "folder (or delete it)"
            )
        if private and held is None:
            self.db.execute("INSERT INTO meta VALUES ('private', '1')")
        self._blobs: dict[bytes, tuple[bytes, int, bytes]] = {}  # new, not yet written
        self._docs: dict[bytes, bytes] = {}
        self._seen: list[tuple[bytes, bytes, bytes]] = []
        self._known: set[bytes] | None = None  # sha of every stored blob, loaded on first need
        self.blobs_new = 0

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        try:
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA cache_size=-65536")
            db.executescript(_SCHEMA)  # idempotent
            db.execute("BEGIN IMMEDIATE")  # one writer: a second index run waits, then fails
            fmt = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            if fmt is None:
                db.executemany(
                    "INSERT INTO meta VALUES (?, ?)",
                    [("format", PACK_FORMAT), ("pack_id", uuid.uuid4().hex)],
                )
            elif fmt[0] != PACK_FORMAT:
                raise PackError(f"pack format {fmt[0]}, this version writes {PACK_FORMAT}")
        except (sqlite3.DatabaseError, PackError):
            db.close()
            raise
        return db

    def _meta(self, key: str) -> str:
        return self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()[0]

    # ------------------------------------------------------------------ adding

    def add_blob(self, data: bytes) -> str:
        """Store ``data`` once; its sha256 (hex), by which pages refer to it."""
        sha = hashlib.sha256(data).digest()
        if sha in self._blobs:
            return sha.hex()
        if self._known is None:
            self._known = {r[0] for r in self.db.execute("SELECT sha FROM blobs")}
        if sha in self._known:
            return sha.hex()
        enc, payload = 0, data
        if len(data) >= COMPRESS_MIN:
            z = zlib.compress(data, 1)
            if len(z) < len(data) * 0.9:
                enc, payload = 1, z
        self._blobs[sha] = (sha, enc, payload)
        self.blobs_new += 1
        return sha.hex()

    def add_doc(self, doc: TaskDoc) -> bytes:
        """Store a prepared task's page; its key (sha256 of the page)."""
        page = encode_doc(doc, self.add_blob)
        key = hashlib.sha256(page).digest()
        self._docs[key] = page
        if len(self._docs) >= _COMMIT_EVERY:
            self.commit()
        return key

    def lookup(self, fp: bytes) -> tuple[bytes, list[Any]] | None:
        """(page key, index row) a task with fingerprint ``fp`` produced before, if any."""
        row = self.db.execute("SELECT doc, row FROM seen WHERE fp = ?", (fp,)).fetchone()
        if row is None:
            return None
        return bytes(row[0]), json.loads(row[1])

    def remember(self, fp: bytes, key: bytes, row: list[Any]) -> None:
        """Record what the task with fingerprint ``fp`` produced (used by :meth:`lookup`)."""
        self._seen.append((fp, key, _ENCODE(row).encode("utf-8")))

    def commit(self) -> None:
        """Write what was added and commit (the writer stays open)."""
        db = self.db
        if self._blobs:
            db.executemany("INSERT OR IGNORE INTO blobs VALUES (?,?,?)", self._blobs.values())
            if self._known is not None:
                self._known.update(self._blobs)
            self._blobs.clear()
        if self._docs:
            db.executemany("INSERT OR IGNORE INTO docs VALUES (?,?)", self._docs.items())
            self._docs.clear()
        if self._seen:
            db.executemany("INSERT OR REPLACE INTO seen VALUES (?,?,?)", self._seen)
            self._seen.clear()
        db.execute("COMMIT")
        db.execute("BEGIN IMMEDIATE")

    def collect(self, keep: Callable[[], set[bytes]], in_use: int) -> dict[str, int]:
        """Remove pages not in ``keep()`` (and bodies and fingerprints only they used).

        ``in_use`` is how many pages the new snapshot names. Collection runs only when at
        least half of the stored pages are unused by it, so its cost (``keep()`` and reading
        every kept page) is paid rarely; it is skipped (logged) when ``keep()`` fails.
        Returns what was removed.
        """
        self.commit()
        db = self.db
        total = db.execute("SELECT count(*) FROM docs").fetchone()[0]
        if total == 0 or (total - in_use) * 2 < total:
            return {"pages": 0, "blobs": 0}
        try:
            keep_keys = keep()
        except (PackError, sqlite3.Error, OSError) as exc:
            log.warning("explorer pack collection skipped: %s", exc)
            return {"pages": 0, "blobs": 0}
        if (total - len(keep_keys)) * 2 < total:
            return {"pages": 0, "blobs": 0}
        db.execute("CREATE TEMP TABLE IF NOT EXISTS keep_docs(key BLOB PRIMARY KEY)")
        db.execute("DELETE FROM keep_docs")
        db.executemany("INSERT OR IGNORE INTO keep_docs VALUES (?)", ((k,) for k in keep_keys))
        gone = db.execute("DELETE FROM docs WHERE key NOT IN (SELECT key FROM keep_docs)").rowcount
        db.execute("DELETE FROM seen WHERE doc NOT IN (SELECT key FROM keep_docs)")
        used: set[bytes] = set()
        for (page,) in db.execute("SELECT doc FROM docs"):
            used.update(_blob_refs(page))
        db.execute("CREATE TEMP TABLE IF NOT EXISTS keep_blobs(sha BLOB PRIMARY KEY)")
        db.execute("DELETE FROM keep_blobs")
        db.executemany("INSERT INTO keep_blobs VALUES (?)", ((s,) for s in used))
        blobs = db.execute(
            "DELETE FROM blobs WHERE sha NOT IN (SELECT sha FROM keep_blobs)"
        ).rowcount
        db.execute("DELETE FROM keep_docs")
        db.execute("DELETE FROM keep_blobs")
        self._known = None
        self.commit()
        log.info("explorer pack: %d unused pages and %d bodies removed", gone, blobs)
        return {"pages": gone, "blobs": blobs}

    def close(self) -> None:
        """Commit and close."""
        self.commit()
        self.db.execute("COMMIT")
        self.db.close()

    def abort(self) -> None:
        """Commit what is complete (pages are independent) and close."""
        with contextlib.suppress(sqlite3.Error):
            self.close()


# ---------------------------------------------------------------------------- reading


def connect_pack(path: Path | str) -> sqlite3.Connection:
    """A read-only connection to a pack (usable from the thread it is handed to)."""
    p = Path(path)
    if not p.is_file():
        raise PackError(f"{p.name}: missing")
    uri = f"file:{quote(str(p.resolve()))}?mode=ro"
    try:
        db = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=30)
        db.execute("PRAGMA query_only=1")
    except sqlite3.Error as exc:
        raise PackError(f"cannot open {p.name}: {exc}") from None
    return db


def pack_id(path: Path | str) -> str:
    """The id a pack was created with (snapshots record the id of the pack they use)."""
    db = connect_pack(path)
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'pack_id'").fetchone()
        fmt = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
    except sqlite3.Error as exc:
        raise PackError(f"{Path(path).name}: {exc}") from None
    finally:
        db.close()
    if row is None or fmt is None or fmt[0] != PACK_FORMAT:
        raise PackError(f"{Path(path).name}: not a pack of format {PACK_FORMAT}")
    return str(row[0])


def read_doc(db: sqlite3.Connection, key: bytes) -> dict[str, Any] | None:
    """The page stored under ``key``, or None."""
    row = db.execute("SELECT doc FROM docs WHERE key = ?", (key,)).fetchone()
    return None if row is None else json.loads(row[0])


def read_blob(db: sqlite3.Connection, ref: str) -> bytes:
    """The bytes of the body a page refers to (``KeyError`` when absent)."""
    try:
        sha = bytes.fromhex(ref)
    except (TypeError, ValueError):
        raise KeyError(ref) from None
    row = db.execute("SELECT enc, data FROM blobs WHERE sha = ?", (sha,)).fetchone()
    if row is None:
        raise KeyError(ref)
    return decode_blob(row[0], row[1])
