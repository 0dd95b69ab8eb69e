"""Index rows and the pack: what the snapshot stores for every environment and task.

A task becomes one index row (id, title, summary, facets, grading, environment, network,
runnable) kept in the snapshot, and one page in the pack (:mod:`repogym.explorer.pack`): its
sections and file list, every body stored once per distinct content, so task pages never re-read
the source.

:func:`walk` drives the readers level by level: it lists every environment's tasks first (cheap)
and reports the listing, then reads each task, withholds its answers and reports the doc. A
task whose fingerprint (see :func:`fingerprint`) was seen before is reported from the cache
instead of being read again.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from repogym.explorer import withhold
from repogym.explorer.adapters.base import AdapterError, EnvReader
from repogym.explorer.model import EnvDoc, FileDoc, TaskDoc

__all__ = [
    "MemoryReader",
    "clean_path",
    "env_row",
    "fingerprint",
    "index_row",
    "prepare",
    "walk",
]

log = logging.getLogger("repogym.explorer")

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


def index_row(doc: TaskDoc) -> list[Any]:
    """The index row of a prepared task, as the snapshot writer and the pack cache keep it:
    ``[id, title, summary, facets, grading, environment, network, runnable]``."""
    return [
        doc.id,
        doc.title,
        doc.summary,
        doc.facets,
        doc.grading or "unknown",
        doc.environment,
        doc.network or "unknown",
        bool(doc.runnable),
    ]


@functools.cache
def _code_version() -> bytes:
    """A digest of the code that turns sources into rows and pages (adapters, withholding,
    the pack's encoding, the Harbor task model they read with): cached rows and pages are
    reused only while it is unchanged, so a new withholding rule can never be skipped by the
    cache."""
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    files = [*here.glob("*.py"), *(here / "adapters").glob("*.py")]
    files += (here.parent / "taskdir").glob("*.py")
    for p in sorted(files):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.digest()


def fingerprint(reader: Any, env: EnvDoc, task_id: str) -> bytes | None:
    """The cache key of a task: its reader's cheap ``fingerprint(task_id)`` (when the reader has
    one) with the environment, the reader's type and the indexing code's version; None when the
    task cannot be fingerprinted (it is then always read)."""
    fp = getattr(reader, "fingerprint", None)
    if fp is None:
        return None
    try:
        own = fp(task_id)
    except (OSError, ValueError, KeyError):
        return None
    if not own:
        return None
    h = hashlib.sha256(_code_version())
    for part in (type(reader).__qualname__, env.id, task_id, own):
        h.update(str(part).encode("utf-8", "surrogateescape") + b"\0")
    return h.digest()


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


def _terminal_safe(text: str) -> str:
    """An error line as it may reach a terminal: control characters made visible."""
    from repogym.ui import safe_text

    return safe_text(text)


def walk(
    readers: Iterable[tuple[str, EnvReader]],
    *,
    on_listing: Callable[[EnvDoc, list[str]], None],
    on_task: Callable[[EnvDoc, TaskDoc, bytes | None], None],
    on_listed: Callable[[], None] | None = None,
    progress: Callable[[str, dict[str, Any]], None] | None = None,
    include_private: bool = False,
    cached: Callable[[EnvDoc, str, bytes], bool] | None = None,
) -> tuple[int, int, list[str]]:
    """List every environment (level by level), then read, withhold and report each task.

    With ``cached``, each task with a fingerprint is first offered to ``cached(env, id, fp)``;
    when it returns True the task was served from the cache and is not read. Otherwise
    ``on_task(env, doc, fp)`` gets the prepared doc and its fingerprint (or None).

    Returns ``(envs, tasks, errors)``; a task that cannot be read is skipped with a logged,
    one-line error (the rest of its environment is indexed). Error lines are terminal-safe:
    control characters from the data are shown as ``\\x1b``-style text.
    """
    listed: list[tuple[EnvDoc, EnvReader, list[str]]] = []
    errors: list[str] = []
    env_ids: set[str] = set()
    for location, reader in readers:
        env = reader.env()
        if env.private and not include_private:
            log.warning("environment %s is private: left out of the snapshot", env.id)
            errors.append(_terminal_safe(f"{env.id}: private, left out"))
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
        for reason in getattr(reader, "skipped", None) or []:  # e.g. malformed rows
            errors.append(_terminal_safe(f"{env.id}: skipped {reason}".splitlines()[0]))
        on_listing(env, ids)
        listed.append((env, reader, ids))
        if progress:
            progress("listed", {"env": env.id, "tasks": len(ids)})
    if on_listed is not None:
        on_listed()
    n_tasks = 0
    for env, reader, ids in listed:
        for tid in ids:
            fp = fingerprint(reader, env, tid) if cached is not None else None
            if fp is not None and cached is not None and cached(env, tid, fp):
                n_tasks += 1
                continue
            try:
                doc = reader.task(tid)
            except (AdapterError, KeyError, OSError, ValueError) as exc:
                msg = _terminal_safe(f"{env.id}/{tid}: {exc}".splitlines()[0])
                errors.append(msg)
                log.warning("task skipped: %s", msg)
                continue
            doc.id = tid
            on_task(env, prepare(doc), fp)
            n_tasks += 1
        if progress:
            progress("indexed", {"env": env.id, "tasks": len(ids)})
    return len(listed), n_tasks, errors
