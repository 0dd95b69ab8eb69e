"""Indexing: read the sources, withhold their answers, fill the pack, publish a snapshot.

:func:`build_snapshot` is what ``repogym explore index`` and an in-process explorer run; the
two stages it reports are described in docs/explore.md ("Snapshots").
"""

from __future__ import annotations

import contextlib
import gc
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from repogym.atomic import staging_file
from repogym.explorer.adapters.base import AdapterError, EnvReader, open_location
from repogym.explorer.index import index_row, walk
from repogym.explorer.model import EnvDoc, TaskDoc
from repogym.explorer.pack import PACK_FILE, PackError, PackWriter
from repogym.explorer.snapshot import SNAPSHOTS, connect_ro
from repogym.explorer.snapshot_write import Guard, SnapshotWriter, publish

__all__ = ["build_snapshot", "sources"]

log = logging.getLogger("repogym.explorer")


def sources(
    paths: Iterable[Any] = (), *, hub: bool = False, openenv: Iterable[str] = ()
) -> Iterator[tuple[str, EnvReader]]:
    """(location, reader) for every source: paths (or ready readers), OpenEnv URLs, the Hub.

    A path or URL no adapter can open raises :class:`AdapterError`; the Hub is skipped (with a
    warning) when it cannot be reached.
    """
    for p in paths:
        if hasattr(p, "task_ids") and hasattr(p, "env"):
            yield (getattr(p, "location", "") or p.env().id, p)
            continue
        location = str(p)
        yield location, open_location(location)[1]
    for url in openenv:
        yield url, open_location(str(url))[1]
    if hub:
        try:
            from repogym.explorer.adapters import hub as hub_mod
        except ImportError as exc:
            log.warning("Hugging Face Hub datasets skipped: %s", exc)
            return
        finder = getattr(hub_mod, "hub_readers", None) or getattr(hub_mod, "readers", None)
        if finder is None:
            log.warning("Hugging Face Hub datasets skipped: the hub adapter lists none")
            return
        try:
            yield from finder()
        except AdapterError as exc:
            log.warning("Hugging Face Hub datasets skipped: %s", exc)


def build_snapshot(
    paths: Iterable[Any],
    out_dir: str | Path,
    *,
    hub: bool = False,
    openenv: Iterable[str] = (),
    progress: Callable[[str, dict[str, Any]], None] | None = None,
    include_private: bool = False,
    early: bool = False,
    guard: Guard | None = None,
) -> dict:
    """Index the sources and publish a new snapshot atomically under ``out_dir``.

    Two stages. *Ingest* reads each task, withholds its answers and adds its page to the pack
    (``out_dir/pack.sqlite``); a task whose fingerprint the pack has seen is not read again.
    *Snapshot* writes the index rows and FTS into a new SQLite file, checks and publishes it.
    With ``early``, a listing snapshot (environments and task ids, no task pages yet) is
    published as soon as every task list is known, then the full one. ``guard`` is asked before
    each publication and raises to keep the published snapshot (see :mod:`.refresh`).

    Returns ``{"snapshot", "envs", "tasks", "bytes", "sha256", "seconds", "ingest_seconds",
    "snapshot_seconds", "pages_new", "pages_reused", "blobs_new", "pack_bytes", "errors", ...}``.
    """
    t0 = time.perf_counter()
    out = Path(out_dir)
    snaps = out / SNAPSHOTS
    snaps.mkdir(parents=True, exist_ok=True)
    pack = PackWriter(out / PACK_FILE, private=include_private)
    writer = SnapshotWriter(_temp_file(snaps), pack.id)  # collects the index as it is made
    in_use: set[bytes] = set()
    tally = {"read": 0, "reused": 0}

    def on_listing(env: EnvDoc, ids: list[str]) -> None:
        writer.add_env(env, ids)

    def cached(env: EnvDoc, task_id: str, fp: bytes) -> bool:
        hit = pack.lookup(fp)
        if hit is None:
            return False
        key, row = hit
        row[0] = task_id
        writer.add_row(env, row, key)
        in_use.add(key)
        tally["reused"] += 1
        return True

    def on_task(env: EnvDoc, doc: TaskDoc, fp: bytes | None) -> None:
        key = pack.add_doc(doc)
        row = index_row(doc)
        writer.add_row(env, row, key)
        in_use.add(key)
        tally["read"] += 1
        if fp is not None:
            pack.remember(fp, key, row)

    try:
        _n_envs, _n_tasks, errors = walk(
            sources(paths, hub=hub, openenv=openenv),
            on_listing=on_listing,
            on_task=on_task,
            on_listed=partial(_publish_listing, writer, out, progress, guard) if early else None,
            progress=progress,
            include_private=include_private,
            cached=cached,
        )
        pack.commit()  # every page the snapshot names is stored before it is published
        t1 = time.perf_counter()
        with _no_gc():  # bulk work allocating no cycles: no collector passes over the heap
            info = _publish(writer, out, guard=guard)
        t2 = time.perf_counter()
        collected = pack.collect(
            lambda: in_use | _keys_in(snaps, Path(info["snapshot"])), len(in_use)
        )
        stats = {
            "pages_new": tally["read"],  # tasks read and packed in this run
            "pages_reused": tally["reused"],  # tasks whose fingerprint the pack knew
            "blobs_new": pack.blobs_new,
            "pages_collected": collected["pages"],
        }
    finally:
        pack.abort()  # commits what is complete: an interrupted run is resumed by the next one
        writer.path.unlink(missing_ok=True)
    return {
        "snapshot": info["snapshot"],
        "pointer": info["pointer"],
        "pack": str(out / PACK_FILE),
        "envs": info["counts"]["envs"],
        "tasks": info["counts"]["tasks"],
        "bytes": info["size"],
        "pack_bytes": (out / PACK_FILE).stat().st_size,
        "sha256": info["sha256"],
        "seconds": round(t2 - t0, 4),
        "ingest_seconds": round(t1 - t0, 4),
        "snapshot_seconds": round(t2 - t1, 4),
        **stats,
        "errors": errors,
    }


def _publish_listing(
    writer: SnapshotWriter,
    out: Path,
    progress: Callable[[str, dict[str, Any]], None] | None,
    guard: Guard | None = None,
) -> None:
    """Publish a listing snapshot (environments and task ids, no task pages yet) from what
    ``writer`` has collected so far."""
    listing = SnapshotWriter(_temp_file(out / SNAPSHOTS))
    for env, ids in writer.listing():
        listing.add_env(env, ids)
        for tid in ids:
            listing.add_stub(env, tid)
    counts = _publish(listing, out, {"listing": "1"}, guard)
    if progress:
        progress("published-listing", counts)


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _temp_file(folder: Path) -> Path:
    """Where a snapshot is built (swept by the next build when a killed one left it)."""
    return staging_file(folder, "snapshot", "build", ".sqlite")


def _publish(
    writer: SnapshotWriter,
    out: Path,
    extra_meta: dict[str, str] | None = None,
    guard: Guard | None = None,
) -> dict[str, Any]:
    """Write, check and publish a snapshot file (removed again when anything fails)."""
    try:
        counts = writer.finish(extra_meta)
        return publish(writer.path, out, counts, guard)
    except BaseException:
        writer.path.unlink(missing_ok=True)
        raise


def _keys_in(snaps: Path, current: Path) -> set[bytes]:
    """The page keys named by the snapshots kept in ``snaps`` other than ``current``."""
    keys: set[bytes] = set()
    for p in snaps.glob("*.sqlite"):
        if p == current or p.name.startswith("."):
            continue
        try:
            db = connect_ro(p)
            try:
                keys.update(
                    bytes(k) for (k,) in db.execute("SELECT doc FROM tasks WHERE doc IS NOT NULL")
                )
            finally:
                db.close()
        except sqlite3.Error as exc:
            log.warning("explorer pack collection skipped %s: %s", p.name, exc)
            raise PackError(f"{p.name} unreadable: pages kept") from None
    return keys
