"""The public explorer's store as curated: hidden environments left out, pins first.

:class:`CuratedStore` wraps a :class:`repogym.explorer.store.Store` (same methods) and asks a
:class:`repogym.explorer.curation.CurationReader` on every call, so pages, search, the JSON API
and MCP (everything the explorer serves goes through its store) follow the admins' settings
within a second of a change. Its ``version`` carries the settings' revision, so ETags and the
explorer's answer caches turn over when the settings do. :class:`CuratedRuns` does the same for
the run service's pages and API; :class:`StopWatcher` ends the rollouts admins asked to stop.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Any

from repogym.explorer.curation import CurationReader
from repogym.explorer.query import compact_json, paging

__all__ = ["CuratedRuns", "CuratedStore", "StopWatcher"]

log = logging.getLogger("repogym.explorer")

_ENV_EXTRAS = ("description", "runs_in", "run_options", "private", "task_facets")


class CuratedStore:
    """A store whose answers follow the curation settings (any other attribute is the
    wrapped store's)."""

    def __init__(self, store: Any, curation: CurationReader) -> None:
        self.store = store
        self.curation = curation

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    @property
    def version(self) -> str:
        return f"{self.store.version}~c{self.curation.revision}"

    # -- environments

    def _pins(self, q: str, kind: Any, filters: Any, sort: str) -> list[dict]:
        """The cards of the pinned environments when the listing is the plain one (no words,
        kind or filters; default order), else none."""
        if q.strip() or kind or any(filters.values() if filters else ()) or sort == "name":
            return []
        cards = []
        for env_id in self.curation.pinned():
            env = self.store.env(env_id)
            if env is not None:
                card = {k: v for k, v in env.items() if k not in _ENV_EXTRAS}
                card["pinned"] = True
                cards.append(card)
        return cards

    def search(
        self,
        q: str = "",
        kind: str | None = None,
        filters: dict[str, list[str]] | None = None,
        sort: str = "relevance",
        page: int = 1,
        size: int = 24,
    ) -> dict:
        """The store's search without hidden environments; pinned ones lead the plain
        listing (in their order), the others follow as before."""
        hidden = self.curation.hidden_ids()
        pins = self._pins(q, kind, filters, sort)
        if not pins:
            return self.store.search(q, kind, filters, sort, page, size, exclude=hidden)
        page, size = paging(page, size)
        rest_out = hidden | {c["id"] for c in pins}
        first = self.store.search(q, kind, filters, sort, 1, size, exclude=hidden)
        start = (page - 1) * size
        items = pins[start : start + size]
        need, offset = size - len(items), max(0, start - len(pins))
        if need:
            upage = offset // size + 1
            got = self.store.search(q, kind, filters, sort, upage, size, exclude=rest_out)
            rows = got["items"][offset % size :]
            if len(rows) < need and got["total"] > upage * size:
                more = self.store.search(q, kind, filters, sort, upage + 1, size, exclude=rest_out)
                rows += more["items"]
            items += rows[:need]
        return {
            "items": items,
            "total": first["total"],
            "page": page,
            "size": size,
            "facets": first["facets"],
        }

    def search_json(self, *args: Any, **kw: Any) -> bytes:
        """:meth:`search` as compact JSON."""
        if not self.curation.hidden_ids() and not self.curation.pinned():
            answer: bytes = self.store.search_json(*args, **kw)
            return answer
        return compact_json(self.search(*args, **kw)).encode()

    def env(self, env_id: str) -> dict | None:
        if self.curation.hidden(str(env_id)):
            return None
        env = self.store.env(env_id)
        if env is not None:
            env["pinned"] = env_id in self.curation.pinned()
            env["featured"] = env_id in self.curation.featured()
        return env

    # -- tasks and files

    def search_tasks(
        self,
        q: str = "",
        env: str | None = None,
        filters: dict[str, list[str]] | None = None,
        page: int = 1,
        size: int = 24,
    ) -> dict:
        """The store's task search without the hidden environments' tasks."""
        hidden = self.curation.hidden_ids()
        if env is not None and str(env) in hidden:
            page, size = paging(page, size)
            return {"items": [], "total": 0, "page": page, "size": size, "facets": {}}
        return self.store.search_tasks(q, env, filters, page, size, exclude=hidden)

    def task(self, env_id: str, task_id: str) -> dict | None:
        if self.curation.hidden(str(env_id)):
            return None
        doc: dict | None = self.store.task(env_id, task_id)
        return doc

    def file(self, env_id: str, task_id: str, path: str) -> bytes:
        if self.curation.hidden(str(env_id)):
            raise KeyError(env_id)
        data: bytes = self.store.file(env_id, task_id, path)
        return data


class CuratedRuns:
    """A run service whose answers leave out the runs of hidden environments (run pages, the
    runs API, compare); anything else is the wrapped service's."""

    def __init__(self, service: Any, curation: CurationReader) -> None:
        self.service = service
        self.curation = curation

    def __getattr__(self, name: str) -> Any:
        return getattr(self.service, name)

    def _shown(self, rec: Any) -> bool:
        return rec is not None and not self.curation.hidden(str(rec.env))

    def get(self, run_id: str, owner: str, *, events: bool = False) -> Any:
        rec = self.service.get(run_id, owner, events=events)
        return rec if self._shown(rec) else None

    def for_task(self, env: str, task: str, owner: str) -> list[Any]:
        if self.curation.hidden(str(env)):
            return []
        return [r for r in self.service.for_task(env, task, owner) if self._shown(r)]

    def for_env(self, env: str, owner: str) -> list[Any]:
        if self.curation.hidden(str(env)):
            return []
        return [r for r in self.service.for_env(env, owner) if self._shown(r)]

    def for_ids(self, ids: list[str], owner: str) -> list[Any]:
        return [r for r in self.service.for_ids(ids, owner) if self._shown(r)]


_LIMIT_FIELDS = {
    "max_concurrent": "max_concurrent",
    "per_hour": "per_visitor_per_hour",
    "time_limit_s": "time_limit_s",
    "budget_usd": "budget_usd",
    "max_steps": "max_steps",
}
"""Admin limit names → :class:`repogym.explorer.runs.RunLimits` fields."""


def curated_limits(base: Any, overrides: dict[str, float]) -> Any:
    """``base`` (the operator's :class:`~repogym.explorer.runs.RunLimits`) with the admins'
    limits applied: each may lower the operator's, never raise it (a limit above the command
    line's stays at the command line's)."""
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        name = _LIMIT_FIELDS.get(key)
        if name is None:
            continue
        current = getattr(base, name)
        changes[name] = type(current)(min(current, value)) if value >= 0 else current
    return dataclasses.replace(base, **changes) if changes else base


class StopWatcher:
    """A daemon thread asking ``service`` (a run service with ``stop(run_id, reason)``) to
    stop each rollout an admin asked to stop, and giving it the admins' run limits
    (:func:`curated_limits` over the limits it started with), every ``interval`` seconds."""

    def __init__(self, curation: CurationReader, service: Any, *, interval: float = 1.0) -> None:
        self.curation = curation
        self.service = service
        self.interval = interval
        self.base_limits = getattr(service, "limits", None)
        self.done: set[str] = set()
        self._quit = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="explorer-stops", daemon=True)

    def start(self) -> StopWatcher:
        self.thread.start()
        return self

    def close(self) -> None:
        self._quit.set()

    def check(self) -> list[str]:
        """Apply the limits; stop what was asked and not yet stopped; the run ids stopped now."""
        if self.base_limits is not None:
            limits = curated_limits(self.base_limits, self.curation.limits())
            if limits != self.service.limits:
                self.service.limits = limits
        stopped = []
        for run_id in self.curation.stop_requests():
            if run_id in self.done:
                continue
            try:
                if self.service.stop(run_id, "stopped by an administrator"):
                    stopped.append(run_id)
                    self.done.add(run_id)
            except Exception as exc:  # noqa: BLE001 - the watcher keeps watching
                log.warning("could not stop run %s: %s", run_id, exc)
        return stopped

    def _loop(self) -> None:
        while not self._quit.wait(self.interval):
            self.check()
