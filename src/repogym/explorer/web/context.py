"""What the explorer's routers share: the store, static assets, caches and response builders."""

import hashlib
import json
import time
from importlib import resources
from typing import Any, NamedTuple

from repogym.explorer.lru import LRU
from repogym.explorer.web import http, pages

STATIC_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}


class StaticFile(NamedTuple):
    data: bytes
    content_type: str
    digest: str


class Static:
    """The files of ``static/`` under content-hashed names (``app.<sha>.css``)."""

    def __init__(self) -> None:
        self.files: dict[str, StaticFile] = {}
        self.urls: dict[str, str] = {}
        folder = resources.files("repogym.explorer.web") / "static"
        for entry in folder.iterdir():
            name = entry.name
            stem, dot, ext = name.rpartition(".")
            if not dot or "." + ext not in STATIC_TYPES:
                continue
            data = entry.read_bytes()
            digest = hashlib.sha256(data).hexdigest()[:12]
            hashed = f"{stem}.{digest}.{ext}"
            self.files[hashed] = StaticFile(data, STATIC_TYPES["." + ext], digest)
            self.urls[name] = f"/static/{hashed}"

    def assets(self) -> pages.Assets:
        return pages.Assets(
            css=self.urls["app.css"],
            js=self.urls["app.js"],
            icon=self.urls["icon.svg"],
            runs=self.urls.get("runs.js", ""),
        )


_ABSENT = object()


class DocCache:
    """Task documents for one store version, recently used ones kept (task pages, viewer,
    raw files); an unknown task is remembered as None too."""

    def __init__(self, store: Any, size: int = 256) -> None:
        self.store = store
        self.cache = LRU(size)

    def get(self, version: str, env_id: str, task_id: str) -> dict | None:
        key = (version, env_id, task_id)
        doc = self.cache.get(key, _ABSENT)
        if doc is _ABSENT:
            doc = self.store.task(env_id, task_id)
            self.cache.put(key, doc)
        return doc


class TaskRef(NamedTuple):
    env_id: str
    task_id: str


class FileRef(NamedTuple):
    """A file of a task, found in its (already withheld) file list."""

    env_id: str
    task_id: str
    path: str
    entry: dict


class FileData(NamedTuple):
    """A file's bytes, or None with the reason it is withheld."""

    data: bytes | None
    reason: str


def is_pending(doc: dict) -> bool:
    """A task listed but not read yet (a listing snapshot while indexing continues)."""
    return not doc.get("sections") and not doc.get("files")


def split_task(rest: str) -> TaskRef | None:
    env_id, _, task_id = rest.strip("/").rpartition("/")
    if not env_id or not task_id or task_id in (".", ".."):
        return None
    return TaskRef(env_id, task_id)


def unsafe_path(path: str) -> bool:
    parts = path.split("/")
    return (
        not path
        or path.startswith("/")
        or "\\" in path
        or "\x00" in path
        or any(p in ("", ".", "..") for p in parts)
    )


class Context:
    """The store and everything the routers keep per app."""

    def __init__(self, store: Any, *, result_cache: int) -> None:
        self.store = store
        self.static = Static()
        self.assets = self.static.assets()
        self.docs = DocCache(store)
        self.results = LRU(result_cache)
        self.runs: Any = None
        """The :class:`repogym.explorer.runs.RunService` when runs are on."""

    # -- responses (FastAPI is imported by then: an app is being served)

    @staticmethod
    def etag_for(request: Any, version: str) -> str:
        return http.etag(request.url.path, request.url.query, version)

    @staticmethod
    def not_modified(request: Any, etag: str, cache: str) -> Any:
        from fastapi.responses import Response

        if http.matches(request.headers.get("if-none-match"), etag):
            return Response(status_code=304, headers={"ETag": etag, "Cache-Control": cache})
        return None

    @staticmethod
    def json_response(
        obj: Any, etag: str, cache: str, db: float, t0: float, status: int = 200
    ) -> Any:
        from fastapi.responses import Response

        body = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)
        headers = {
            "Cache-Control": cache,
            "Server-Timing": http.timing(db, time.perf_counter() - t0),
        }
        if status == 200:
            headers["ETag"] = etag
        return Response(body, status_code=status, media_type="application/json", headers=headers)

    @staticmethod
    def html_response(
        text: str, etag: str, cache: str, db: float, t0: float, status: int = 200
    ) -> Any:
        from fastapi.responses import Response

        headers = {"Server-Timing": http.timing(db, time.perf_counter() - t0)}
        if status == 200:
            headers.update({"ETag": etag, "Cache-Control": cache})
        else:
            headers["Cache-Control"] = "no-store"
        return Response(
            text, status_code=status, media_type="text/html; charset=utf-8", headers=headers
        )

    @staticmethod
    def api_error(status: int, message: str) -> Any:
        from fastapi.responses import Response

        return Response(
            json.dumps({"error": message}),
            status_code=status,
            media_type="application/json",
            headers={"Cache-Control": "no-store"},
        )

    def page_error(self, status: int, message: str) -> Any:
        from fastapi.responses import Response

        return Response(
            pages.error_page(status, message, self.assets),
            status_code=status,
            media_type="text/html; charset=utf-8",
            headers={"Cache-Control": "no-store"},
        )

    # -- tasks and files

    def locate_file(self, version: str, rest: str) -> FileRef | None:
        """Split ``env/…/task/path`` where the task exists and lists the path."""
        segs = rest.split("/")
        for i in range(1, len(segs) - 1):
            env_id, task_id, path = "/".join(segs[:i]), segs[i], "/".join(segs[i + 1 :])
            if unsafe_path(path) or any(s in ("", ".", "..") for s in segs[: i + 1]):
                continue
            doc = self.docs.get(version, env_id, task_id)
            if doc is None:
                continue
            for f in doc.get("files") or []:
                if f.get("path") == path:
                    return FileRef(env_id, task_id, path, f)
        return None

    def read_file(self, env_id: str, task_id: str, path: str, entry: dict) -> FileData:
        """The data, or None and the reason for a withheld file; KeyError when absent."""
        if entry.get("withheld"):
            return FileData(None, str(entry["withheld"]))
        try:
            return FileData(self.store.file(env_id, task_id, path), "")
        except KeyError:
            raise
        except Exception as exc:  # the store's Withheld carries .reason
            reason = getattr(exc, "reason", None)
            if reason is None:
                raise
            return FileData(None, str(reason))
