"""Index rows and the pack: what the snapshot stores for every environment and task.

A task becomes one index row (env, id, title, summary, facets, grading, environment, network,
runnable) and one pack entry: its sections and file list, with every text and file body stored
once per distinct content (sha256), so identical files across tasks cost nothing extra and task
pages never re-read the source.

:func:`walk` drives the readers level by level: it lists every environment's tasks first (cheap)
and reports the listing, then reads each task, withholds its answers and reports the doc.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from repogym.explorer import withhold
from repogym.explorer.adapters.base import AdapterError, EnvReader
from repogym.explorer.model import EnvDoc, FileDoc, TaskDoc

__all__ = [
    "FACETS",
    "TASK_FACETS",
    "MemoryReader",
    "Pack",
    "clean_path",
    "env_row",
    "pack_task",
    "prepare",
    "task_row",
    "walk",
]

log = logging.getLogger("repogym.explorer")

# Facets counted on the environment search page (kind is the environment's own).
FACETS = ("kind", "language", "category", "difficulty", "pipeline", "grading", "network")
# Facets of tasks kept as index columns.
TASK_FACETS = ("language", "category", "difficulty", "pipeline", "grading", "network")
INLINE_MAX = 4096  # section texts up to this size stay inline (unless a file holds them)
COMPRESS_MIN = 2048  # blobs from this size are stored zlib-compressed when that saves space
_BAD_PATH = re.compile(r"(^|/)\.\.?(/|$)|^/|\\|\x00|//")


@functools.lru_cache(maxsize=4096)
def clean_path(path: str) -> str | None:
    """``path`` when it is a safe task-relative POSIX path, else None."""
    if not path or _BAD_PATH.search(path) or path.endswith("/") or len(path) > 1024:
        return None
    return path


def _plain(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def prepare(doc: TaskDoc) -> TaskDoc:
    """Withhold answers, drop unsafe file paths and bound card texts (in place)."""
    withhold.apply(doc)
    files: list[FileDoc] = []
    seen: set[str] = set()
    for f in doc.files:
        p = clean_path(f.path)
        if p is None or p in seen:
            if p is None:
                log.warning("task %s: unsafe file path %r dropped", doc.id, f.path)
            continue
        seen.add(p)
        if f.withheld:
            f.data = None
        files.append(f)
    doc.files = files
    doc.facets = {str(k): str(v) for k, v in doc.facets.items() if v is not None and v != ""}
    doc.title = _plain(doc.title or doc.id, 200)
    doc.summary = _plain(doc.summary, 300)
    return doc


def env_row(env: EnvDoc) -> dict[str, Any]:
    """The envs-table fields of an environment."""
    return {
        "id": env.id,
        "kind": env.kind,
        "title": _plain(env.title or env.id, 200),
        "summary": _plain(env.summary, 300),
        "description": env.description,
        "source": env.source,
        "runs_in": env.runs_in,
        "run_options": env.run_options,
        "facets": dict(env.facets),
        "private": bool(env.private),
        "task_count": env.task_count,
    }


def task_row(env_id: str, doc: TaskDoc) -> dict[str, Any]:
    """The tasks-table fields of a (prepared) task."""
    return {
        "env": env_id,
        "id": doc.id,
        "title": doc.title,
        "summary": doc.summary,
        "facets": dict(doc.facets),
        "grading": doc.grading or "unknown",
        "environment": doc.environment,
        "network": doc.network or "unknown",
        "runnable": bool(doc.runnable),
    }


class Pack:
    """Content-addressed blobs: each distinct content (by sha256) is stored once, under a
    small integer id that pack entries refer to."""

    def __init__(self, sink: Callable[[int, bytes, int, bytes], None] | None = None) -> None:
        self.ids: dict[bytes, int] = {}
        self.sink = sink
        self.pending: list[tuple[int, bytes, int, bytes]] = []
        self.bytes_in = 0
        self.bytes_stored = 0

    def add(self, data: bytes) -> int:
        """Store ``data`` (once) and return its blob id."""
        digest = hashlib.sha256(data).digest()
        self.bytes_in += len(data)
        bid = self.ids.get(digest)
        if bid is not None:
            return bid
        bid = len(self.ids) + 1
        self.ids[digest] = bid
        enc, payload = 0, data
        if len(data) >= COMPRESS_MIN:
            z = zlib.compress(data, 1)
            if len(z) < len(data) * 0.9:
                enc, payload = 1, z
        self.bytes_stored += len(payload)
        if self.sink is not None:
            self.sink(bid, digest, enc, payload)
        else:
            self.pending.append((bid, digest, enc, payload))
        return bid


def decode_blob(enc: int, payload: bytes) -> bytes:
    """The bytes of a stored blob."""
    return zlib.decompress(payload) if enc == 1 else bytes(payload)


_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def pack_task(doc: TaskDoc, pack: Pack) -> bytes:
    """The pack entry of a prepared task (compact JSON): sections, files, notes, aliases.

    File bodies are blobs (each distinct content stored once). A section whose text is also a
    file of the task (instruction.md, the Dockerfile, test.sh, task.toml) points at that
    file's blob; other sections stay inline up to ``INLINE_MAX`` bytes, larger ones are blobs.
    Default values (markdown format, no language) are left out.
    """
    files = []
    by_data: dict[bytes, int] = {}
    for f in doc.files:
        entry: dict[str, Any] = {"path": f.path, "size": f.size}
        if f.withheld:
            entry["withheld"] = f.withheld
        elif f.data is not None:
            bid = pack.add(f.data)
            entry["blob"] = bid
            by_data[f.data] = bid
        else:
            entry["withheld"] = "not packed"
        files.append(entry)
    sections = []
    for s in doc.sections:
        d: dict[str, Any] = {"id": s.id, "title": s.title}
        bid = None
        if by_data or len(s.body) > INLINE_MAX:
            raw = s.body.encode("utf-8")
            bid = by_data.get(raw)
            if bid is None and len(raw) > INLINE_MAX:
                bid = pack.add(raw)
        if bid is None:
            d["body"] = s.body
        else:
            d["blob"] = bid
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
    return _ENCODE(out).encode("utf-8")


class MemoryReader:
    """An :class:`EnvReader` over docs already in memory (tests, benchmarks, adapters)."""

    def __init__(self, env: EnvDoc, tasks: Iterable[TaskDoc]) -> None:
        self._env = env
        self._tasks = {t.id: t for t in tasks}

    def env(self) -> EnvDoc:
        return self._env

    def task_ids(self) -> Iterator[str]:
        yield from self._tasks

    def task(self, task_id: str) -> TaskDoc:
        return self._tasks[task_id]


def walk(
    readers: Iterable[tuple[str, EnvReader]],
    *,
    on_listing: Callable[[EnvDoc, list[str]], None],
    on_task: Callable[[EnvDoc, TaskDoc], None],
    on_listed: Callable[[], None] | None = None,
    progress: Callable[[str, dict[str, Any]], None] | None = None,
    include_private: bool = False,
) -> tuple[int, int, list[str]]:
    """List every environment (level by level), then read, withhold and report each task.

    Returns ``(envs, tasks, errors)``; a task that cannot be read is skipped with a logged,
    one-line error (the rest of its environment is indexed).
    """
    listed: list[tuple[EnvDoc, EnvReader, list[str]]] = []
    errors: list[str] = []
    env_ids: set[str] = set()
    for location, reader in readers:
        env = reader.env()
        if env.private and not include_private:
            log.warning("environment %s is private: left out of the snapshot", env.id)
            errors.append(f"{env.id}: private, left out")
            continue
        if env.id in env_ids:  # two folders with the same name: keep both, the later one renamed
            n = 2
            while f"{env.id}-{n}" in env_ids:
                n += 1
            log.warning(
                "%s: environment id %s is taken, indexed as %s-%d", location, env.id, env.id, n
            )
            env.id = f"{env.id}-{n}"
        env_ids.add(env.id)
        ids: list[str] = []
        seen: set[str] = set()
        for tid in reader.task_ids():
            if tid not in seen:
                seen.add(tid)
                ids.append(tid)
        env.task_count = len(ids)
        on_listing(env, ids)
        listed.append((env, reader, ids))
        if progress:
            progress("listed", {"env": env.id, "tasks": len(ids)})
    if on_listed is not None:
        on_listed()
    n_tasks = 0
    for env, reader, ids in listed:
        for tid in ids:
            try:
                doc = reader.task(tid)
            except (AdapterError, KeyError, OSError, ValueError) as exc:
                msg = f"{env.id}/{tid}: {exc}".splitlines()[0]
                errors.append(msg)
                log.warning("task skipped: %s", msg)
                continue
            doc.id = tid
            on_task(env, prepare(doc))
            n_tasks += 1
        if progress:
            progress("indexed", {"env": env.id, "tasks": len(ids)})
    return len(listed), n_tasks, errors
