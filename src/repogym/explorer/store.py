"""The query API over a snapshot and its pack: what the web layer calls; nothing reads the source.

Search words are data: each word becomes a quoted FTS5 phrase (``"`` doubled), a ``*`` prefix
marker is appended by us to the last word only, so operators (``AND``, ``NEAR``, ``*``, ``^``,
column filters, stray quotes and parentheses) cannot change the query. Facet counts are computed
over what the other filters leave.
"""

from __future__ import annotations

import collections
import json
import logging
import shutil
import sqlite3
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from repogym.explorer.facets import COLUMN_FACETS, FACETS, TASK_FACETS, TASK_FILTER_COLUMNS
from repogym.explorer.lru import LRU
from repogym.explorer.pack import PackError, read_blob, read_doc
from repogym.explorer.query import (
    EnvCache,
    compact_json,
    env_hits,
    env_match,
    norm_filters,
    paging,
    positions,
    query_words,
    tasks_match,
)
from repogym.explorer.snapshot import (
    POINTER,
    Handle,
    SnapshotReader,
    connect_ro,
)

__all__ = ["Store", "Withheld", "open_store"]

log = logging.getLogger("repogym.explorer")

ENV_FTS_CACHE = 1024  # environment hits (bitmasks) kept per snapshot, by FTS query
TASK_ID_MAPS = 256  # environments whose task id -> rid map is kept per snapshot
SELECTION_CACHE = 4096  # environment selections (matches, facet counts) kept per snapshot
RANK_LIMIT = 5000  # task hits beyond this are listed in index order instead of by bm25


class Withheld(Exception):
    """A file exists but is not shown; ``reason`` says why (e.g. "solution (the answer)")."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Store:
    """Read-only queries over the snapshot a :class:`SnapshotReader` serves."""

    def __init__(self, reader: SnapshotReader, *, cleanup: Path | None = None) -> None:
        self.reader = reader
        self.ready = threading.Event()  # set when an in-process build is complete
        self.build_errors: list[BaseException] = []
        reader.on_new = self._warm
        if cleanup is not None:
            self._finalizer = weakref.finalize(self, shutil.rmtree, str(cleanup), True)
        self._load(*reader.acquire())

    def _warm(self, h: Handle) -> None:
        """Load a new snapshot's search caches before it is swapped in."""
        db = connect_ro(h.path)
        try:
            self._load(h, db)
        finally:
            db.close()

    def _load(self, h: Handle, db: sqlite3.Connection) -> None:
        """The caches every search needs: environments and the tasks' facet combinations."""
        self._envs(h, db)
        self._cached(h, "task_combos", lambda: _load_combos(db))

    @property
    def version(self) -> str:
        """Id of the snapshot in use (its sha256); changes on swap."""
        return self.reader.handle.version

    def close(self) -> None:
        """Close this thread's connection and remove an in-process snapshot."""
        self.reader.close()
        fin = getattr(self, "_finalizer", None)
        if fin is not None:
            fin()

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _cached(h: Handle, key: str, make: Callable[[], Any]) -> Any:
        value = h.cache.get(key)
        if value is None:
            with h.cache_lock:
                value = h.cache.get(key)
                if value is None:
                    value = make()
                    h.cache[key] = value
        return value

    def _envs(self, h: Handle, db: sqlite3.Connection) -> EnvCache:
        return self._cached(h, "envs", lambda: EnvCache(db))

    # ------------------------------------------------------------------ environments

    def search(
        self,
        q: str = "",
        kind: str | None = None,
        filters: dict[str, list[str]] | None = None,
        sort: str = "relevance",
        page: int = 1,
        size: int = 24,
        exclude: frozenset[str] = frozenset(),
    ) -> dict:
        """A page of environment cards, the total, and each facet's counts (the environments
        ``exclude`` names left out, as if absent)."""
        c, picked, total, page, size, facets, _ = self._search(
            q, kind, filters, sort, page, size, exclude
        )
        items = [dict(c.cards[r]) for r in picked]
        return {"items": items, "total": total, "page": page, "size": size, "facets": facets}

    def search_json(
        self,
        q: str = "",
        kind: str | None = None,
        filters: dict[str, list[str]] | None = None,
        sort: str = "relevance",
        page: int = 1,
        size: int = 24,
        exclude: frozenset[str] = frozenset(),
    ) -> bytes:
        """:meth:`search` as compact JSON (UTF-8), the same bytes as serialising its answer;
        each card is serialised once per snapshot."""
        c, picked, total, page, size, _, facets = self._search(
            q, kind, filters, sort, page, size, exclude
        )
        cards = c.cards_json
        parts = []
        for r in picked:
            js = cards.get(r)
            if js is None:
                js = cards[r] = compact_json(c.cards[r])
            parts.append(js)
        tail = f'"total":{total},"page":{page},"size":{size},"facets":{facets}}}'
        return ('{"items":[' + ",".join(parts) + "]," + tail).encode()

    def _search(
        self,
        q: str,
        kind: str | None,
        filters: dict[str, list[str]] | None,
        sort: str,
        page: int,
        size: int,
        exclude: frozenset[str] = frozenset(),
    ) -> tuple[EnvCache, list[int], int, int, int, dict[str, dict[str, int]], str]:
        page, size = paging(page, size)
        h, db = self.reader.acquire()
        c = self._envs(h, db)
        flt = {k: v for k, v in norm_filters(filters).items() if k in FACETS}
        if kind:
            flt["kind"] = {str(kind)}
        fts, short = env_match(q)
        gone = tuple(sorted(e for e in exclude if e in c.by_id))
        flat = tuple(sorted((k, tuple(sorted(v))) for k, v in flt.items()))
        key: tuple[Any, ...] = (fts, tuple(short), flat)
        if gone:  # the plain key stays as it was: the other caches' entries keep working
            key += (gone,)
        # what a query selects (matches, their count, facet counts) does not depend on its
        # sort or page: kept per snapshot, so paging and re-sorting cost only the page
        selections = self._cached(h, "env_selections", lambda: LRU(SELECTION_CACHE))
        sel = selections.get(key)
        if sel is None:
            sel = self._select(h, db, c, q, fts, short, flt, gone)
            selections.put(key, sel)
        strong, match, total, facets, facets_json = sel
        start, stop = (page - 1) * size, page * size
        picked: list[int] = []
        if start >= total:
            pass
        elif sort == "name":
            if total * 16 < len(c.order_name):  # few matches: sort them by name
                found = [c.order_tasks[p] for p in positions(match, c.nbytes)]
                picked = sorted(found, key=c.pos_name.__getitem__)[start:stop]
            else:  # many: walk the name order, keeping the matches
                mb = match.to_bytes(c.nbytes, "little")
                pos, seen = c.pos_tasks, 0
                for r in c.order_name:
                    p = pos[r]
                    if mb[p >> 3] >> (p & 7) & 1:
                        if seen >= start:
                            picked.append(r)
                            if len(picked) == size:
                                break
                        seen += 1
        elif sort == "tasks" or strong is None:  # the bits' own order
            picked = [c.order_tasks[p] for p in positions(match, c.nbytes, start, size)]
        else:  # relevance: the strong hits first, then the others, each in the bits' order
            first = match & strong
            n_first = first.bit_count()
            places = positions(first, c.nbytes, start, size) if start < n_first else []
            if len(places) < size:
                places += positions(
                    match ^ first, c.nbytes, max(0, start - n_first), size - len(places)
                )
            picked = [c.order_tasks[p] for p in places]
        return c, picked, total, page, size, facets, facets_json

    def _select(
        self,
        h: Handle,
        db: sqlite3.Connection,
        c: EnvCache,
        q: str,
        fts: str | None,
        short: list[str],
        flt: dict[str, set[str]],
        gone: tuple[str, ...] = (),
    ) -> tuple[int | None, int, int, dict[str, dict[str, int]], str]:
        """(bits of the strong hits or None without words, match bits, total, facet counts,
        facet counts as JSON); the environments ``gone`` names are left out."""
        strong: int | None = None
        base = c.all_bits
        if fts is not None:
            # the hits of a word list, kept per snapshot: filters, sorts and pages of the same
            # words reuse them (a snapshot never changes, so they stay exact)
            hits = self._cached(h, "env_fts", lambda: LRU(ENV_FTS_CACHE))
            hit = hits.get(fts)
            if hit is None:
                try:
                    hit = env_hits(db, c, fts)
                    hits.put(fts, hit)
                except sqlite3.OperationalError as exc:  # never expected: words are quoted
                    log.warning("environment search failed for %r: %s", q[:80], exc)
                    hit = (0, 0)
            strong, base = hit
        for env_id in gone:
            base &= ~(1 << c.pos_tasks[c.by_id[env_id]])
        for w in short:
            base &= c.short_bits.get(w, 0)
        chosen: dict[str, int] = {}
        for f, vals in flt.items():
            bits = 0
            for v in vals:
                bits |= c.facet_bits[f].get(v, 0)
            chosen[f] = bits
        facets: dict[str, dict[str, int]] = {}
        for g in FACETS:
            allowed = base
            for f, bits in chosen.items():
                if f != g:
                    allowed &= bits
            counts = {}
            for value, bits in c.facet_bits[g].items():
                n = (bits & allowed).bit_count()
                if n:
                    counts[value] = n
            for value in flt.get(g, ()):
                counts.setdefault(value, 0)  # a selected value stays visible
            facets[g] = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        match = base
        for bits in chosen.values():
            match &= bits
        return strong, match, match.bit_count(), facets, compact_json(facets)

    def env(self, env_id: str) -> dict | None:
        """An environment's card, description, how it runs, and its tasks' facet counts."""
        h, db = self.reader.acquire()
        c = self._envs(h, db)
        rid = c.by_id.get(str(env_id))
        if rid is None:
            return None
        row = db.execute(
            "SELECT description, runs_in, run_options, private, task_facets FROM envs"
            " WHERE rid = ?",
            (rid,),
        ).fetchone()
        task_facets: dict[str, dict[str, int]] = {}
        for facet, values in sorted(json.loads(row[4]).items()):
            counted = sorted(((v, n) for v, n in values.items() if n), key=lambda t: (-t[1], t[0]))
            if counted:
                task_facets[facet] = dict(counted)
        card = dict(c.cards[rid])
        card.update(
            description=row[0],
            runs_in=row[1],
            run_options=json.loads(row[2]),
            private=bool(row[3]),
            task_facets=task_facets,
        )
        return card

    # ------------------------------------------------------------------ tasks

    def search_tasks(
        self,
        q: str = "",
        env: str | None = None,
        filters: dict[str, list[str]] | None = None,
        page: int = 1,
        size: int = 24,
        exclude: frozenset[str] = frozenset(),
    ) -> dict:
        """A page of task cards (optionally within one environment), total and facet counts;
        the tasks of the environments ``exclude`` names are left out."""
        page, size = paging(page, size)
        h, db = self.reader.acquire()
        c = self._envs(h, db)
        empty = {"items": [], "total": 0, "page": page, "size": size, "facets": {}}
        where: list[str] = []
        args: list[Any] = []
        if env is not None:
            rid = c.by_id.get(str(env))
            if rid is None:
                return empty
            where.append("t.rid BETWEEN ? AND ?")
            args.extend(c.task_range[rid])
        for gone in sorted(exclude):
            if (grid := c.by_id.get(str(gone))) is not None:
                where.append("t.rid NOT BETWEEN ? AND ?")
                args.extend(c.task_range[grid])
        match = tasks_match(q)
        if q and match is None and query_words(q):
            match = None  # only punctuation: treated as no words
        flt = norm_filters(filters)
        base_where, base_args = list(where), list(args)
        for key, vals in flt.items():
            cond, cargs = self._task_filter(c, key, vals)
            where.append(cond)
            args.extend(cargs)
        frm = "tasks t"
        order = "t.rid"
        if match is not None:
            frm = "tasks_fts f JOIN tasks t ON t.rid = f.rowid"
            where.insert(0, "tasks_fts MATCH ?")
            args.insert(0, match)
            base_where.insert(0, "tasks_fts MATCH ?")
            base_args.insert(0, match)
            order = "f.rank"
        wsql = (" WHERE " + " AND ".join(where)) if where else ""
        try:
            total = db.execute(f"SELECT count(*) FROM {frm}{wsql}", args).fetchone()[0]
            if match is not None and total > RANK_LIMIT:
                order = "f.rowid"  # too broad to rank usefully: bm25 over every hit is slow
            rows = db.execute(
                "SELECT t.env_id, t.id, t.title, t.summary, t.facets, t.grading, t.environment,"
                " t.network, t.runnable, t.language, t.category, t.difficulty, t.pipeline"
                f" FROM {frm}{wsql} ORDER BY {order} LIMIT ? OFFSET ?",
                [*args, size, (page - 1) * size],
            ).fetchall()
            facets = self._task_facets(h, db, frm, base_where, base_args, flt)
        except sqlite3.OperationalError as exc:  # never expected: words are quoted
            log.warning("task search failed for %r: %s", (q or "")[:80], exc)
            return empty
        items = [
            {
                "env": r[0],
                "id": r[1],
                "title": r[2],
                "summary": r[3],
                "facets": _task_facet_dict(r[4], r[9:13]),
                "grading": r[5],
                "environment": r[6],
                "network": r[7],
                "runnable": bool(r[8]),
            }
            for r in rows
        ]
        return {"items": items, "total": total, "page": page, "size": size, "facets": facets}

    @staticmethod
    def _task_filter(c: EnvCache, key: str, vals: set[str]) -> tuple[str, list[Any]]:
        marks = ",".join("?" * len(vals))
        if key in TASK_FACETS:
            return f"t.{key} IN ({marks})", sorted(vals)
        if key == "runnable":
            want = {1 if v.lower() in ("1", "true", "yes") else 0 for v in vals}
            return f"t.runnable IN ({','.join('?' * len(want))})", sorted(want)
        if key == "kind":
            rids = sorted(set().union(*(c.facet_sets["kind"].get(v, set()) for v in vals)))
            return f"t.env IN ({','.join('?' * len(rids)) or 'NULL'})", rids
        return f"json_extract(t.facets, ?) IN ({marks})", [f'$."{key}"', *sorted(vals)]

    def _task_facets(
        self,
        h: Handle,
        db: sqlite3.Connection,
        frm: str,
        where: list[str],
        args: list[Any],
        flt: dict[str, set[str]],
    ) -> dict[str, dict[str, int]]:
        """Counts per facet value, each facet counted over what the other filters leave."""
        cols = TASK_FILTER_COLUMNS
        combo_of, combos, all_counts = self._cached(h, "task_combos", lambda: _load_combos(db))
        if where:
            wsql = " WHERE " + " AND ".join(where)
            hits = db.execute(f"SELECT t.rid FROM {frm}{wsql}", args)
            counter = collections.Counter([combo_of[r] for (r,) in hits])
        else:
            counter = all_counts
        want = {k: v for k, v in flt.items() if k in cols}
        norm = [(combos[c], n) for c, n in counter.items()]
        out: dict[str, dict[str, int]] = {}
        for gi, g in enumerate(cols):
            counts: dict[str, int] = {}
            for values, n in norm:
                if (
                    all(
                        values[i] in want[k] or (k == "runnable" and _truthy_in(values[i], want[k]))
                        for i, k in enumerate(cols)
                        if k != g and k in want
                    )
                    and values[gi]
                ):
                    counts[values[gi]] = counts.get(values[gi], 0) + n
            if counts:
                out[g] = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        return out

    def task(self, env_id: str, task_id: str) -> dict | None:
        """A task's card, sections, file list, withheld notes, aliases, each phase's network
        mode and the host variables its verifier asks for (from the pack)."""
        h, db = self.reader.acquire()
        c = self._envs(h, db)
        rid = c.by_id.get(str(env_id))
        if rid is None:
            return None
        row = db.execute(
            "SELECT t.env_id, t.id, t.title, t.summary, t.facets, t.grading, t.environment,"
            " t.network, t.runnable, t.doc, t.language, t.category, t.difficulty, t.pipeline"
            " FROM tasks t WHERE t.rid = ?",
            (self._task_rid(h, db, c, rid, task_id),),
        ).fetchone()
        if row is None:
            return None
        doc = self._page(h, row[9])
        pack = self.reader.pack(h) if doc.get("sections") else None
        sections = []
        for s in doc.get("sections", []):
            body = s.get("body")
            if body is None and s.get("blob") and pack is not None:
                body = read_blob(pack, s["blob"]).decode("utf-8", "replace")
            sections.append(
                {
                    "id": s.get("id", ""),
                    "title": s.get("title", ""),
                    "body": body or "",
                    "format": s.get("format", "markdown"),
                    "language": s.get("language", ""),
                }
            )
        return {
            "env": row[0],
            "id": row[1],
            "title": row[2],
            "summary": row[3],
            "facets": _task_facet_dict(row[4], row[10:14]),
            "grading": row[5],
            "environment": row[6],
            "network": row[7],
            "runnable": bool(row[8]),
            "sections": sections,
            "files": [
                {"path": f["path"], "size": f["size"], "withheld": f.get("withheld")}
                for f in doc.get("files", [])
            ],
            "withheld": list(doc.get("withheld", [])),
            "aliases": list(doc.get("aliases", [])),
            "network_modes": dict(doc.get("network_modes", {})),
            "verifier_env": list(doc.get("verifier_env", [])),
        }

    def _task_rid(
        self, h: Handle, db: sqlite3.Connection, c: EnvCache, env_rid: int, task_id: Any
    ) -> int:
        """The rid of task ``task_id`` of an environment (0 when there is none): each
        environment's tasks are a rid range; its id -> rid map is read once per snapshot
        (recently used environments are kept)."""
        maps = self._cached(h, "task_rids", lambda: LRU(TASK_ID_MAPS))
        ids = maps.get(env_rid)
        if ids is None:
            lo, hi = c.task_range[env_rid]
            ids = dict(db.execute("SELECT id, rid FROM tasks WHERE rid BETWEEN ? AND ?", (lo, hi)))
            maps.put(env_rid, ids)
        return ids.get(str(task_id), 0)

    def _page(self, h: Handle, key: bytes | None) -> dict[str, Any]:
        """The pack page of a task row ({} for a task listed but not read yet)."""
        if key is None:
            return {}
        try:
            page = read_doc(self.reader.pack(h), key)
        except (PackError, sqlite3.Error) as exc:
            log.warning("explorer pack unreadable: %s", exc)
            page = None
        if page is None:
            log.warning("a task page is missing from the explorer pack (rebuild the index)")
            return {}
        return page

    def file(self, env_id: str, task_id: str, path: str) -> bytes:
        """The bytes of one file of a task, only when ``path`` is exactly in its file list.

        Raises ``KeyError`` (no such task or file) or :class:`Withheld` (the reason).
        """
        if not isinstance(path, str) or not path:
            raise KeyError(path)
        h, db = self.reader.acquire()
        c = self._envs(h, db)
        rid = c.by_id.get(str(env_id))
        if rid is None:
            raise KeyError(env_id)
        row = db.execute(
            "SELECT doc FROM tasks WHERE rid = ?", (self._task_rid(h, db, c, rid, task_id),)
        ).fetchone()
        if row is None:
            raise KeyError(task_id)
        for f in self._page(h, row[0]).get("files", []):
            if f["path"] == path:
                if f.get("withheld") or not f.get("blob"):
                    raise Withheld(f.get("withheld") or "not packed")
                return read_blob(self.reader.pack(h), f["blob"])
        raise KeyError(path)


def _load_combos(
    db: sqlite3.Connection,
) -> tuple[list[int], list[tuple[str, ...]], collections.Counter[int]]:
    """Every task's facet combination, interned: (combo id by task rid, combos, counts)."""
    cols = TASK_FILTER_COLUMNS
    ids: dict[tuple[Any, ...], int] = {}
    combos: list[tuple[str, ...]] = []
    combo_of: list[int] = [-1]  # -1: no task with this rid
    for row in db.execute(f"SELECT rid, {', '.join(cols)} FROM tasks ORDER BY rid"):
        key = row[1:]
        cid = ids.get(key)
        if cid is None:
            cid = ids[key] = len(combos)
            combos.append(
                tuple(
                    ("true" if v else "false") if k == "runnable" else ("" if v is None else str(v))
                    for k, v in zip(cols, key, strict=True)
                )
            )
        while len(combo_of) < row[0]:
            combo_of.append(-1)
        combo_of.append(cid)
    counts = collections.Counter(combo_of)
    counts.pop(-1, None)
    return combo_of, combos, counts


def _task_facet_dict(extra: str, columns: tuple[Any, ...]) -> dict[str, str]:
    """A task's facets: the indexed columns plus the JSON of any other keys."""
    facets = {k: v for k, v in zip(COLUMN_FACETS, columns, strict=True) if v is not None}
    if extra:
        facets.update(json.loads(extra))
    return facets


def _truthy_in(value: str, wanted: set[str]) -> bool:
    truth = {"1": "true", "yes": "true", "0": "false", "no": "false"}
    return value in {truth.get(w.lower(), w.lower()) for w in wanted}


def open_store(
    paths: Iterable[Any] = (),
    *,
    snapshot: str | Path | None = None,
    hub: bool = False,
    openenv: Iterable[str] = (),
    poll_seconds: float = 2.0,
    background: bool = False,
) -> Store:
    """A :class:`Store` over a published snapshot folder, or over one built in-process.

    With ``snapshot`` (a folder holding the pointer file) the store reads it read-only, polls
    the pointer and swaps to new snapshots. Otherwise the same database is built from the
    sources into a temporary folder, removed when the store is closed or collected. With
    ``background``, the store is returned as soon as every task list is known (a listing
    snapshot: environments and task cards by id) and swaps to the full snapshot when the task
    pages are packed; ``Store.ready`` is set then (``Store.build_error`` holds a failure).
    """
    if snapshot is not None:
        return Store(SnapshotReader(snapshot, poll_seconds=poll_seconds))
    from repogym.explorer.build import build_snapshot  # the indexer, only for in-process builds

    tmp = Path(tempfile.mkdtemp(prefix="repogym-explore-"))
    if not background:
        try:
            build_snapshot(paths, tmp, hub=hub, openenv=openenv)
            reader = SnapshotReader(tmp, poll_seconds=3600.0)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        store = Store(reader, cleanup=tmp)
        store.ready.set()
        return store

    listed = threading.Event()
    done = threading.Event()
    failure: list[BaseException] = []

    def progress(event: str, _data: dict[str, Any]) -> None:
        if event == "published-listing":
            listed.set()

    def run() -> None:
        try:
            build_snapshot(paths, tmp, hub=hub, openenv=openenv, progress=progress, early=True)
        except BaseException as exc:  # reported to the caller or kept on the store
            failure.append(exc)
            if listed.is_set():  # the caller has returned: nobody else reports it
                log.warning("explorer index build failed: %s", str(exc).splitlines()[0])
        finally:
            done.set()
            listed.set()

    threading.Thread(target=run, name="explorer-index", daemon=True).start()
    listed.wait()
    if failure and not (tmp / POINTER).exists():
        shutil.rmtree(tmp, ignore_errors=True)
        raise failure[0]
    store = Store(SnapshotReader(tmp, poll_seconds=min(poll_seconds, 1.0)), cleanup=tmp)
    store.ready = done
    store.build_errors = failure
    return store
