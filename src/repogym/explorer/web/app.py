"""The explorer's FastAPI application: pages, JSON API, raw files and static assets.

``create_app(store)`` takes any object with the ``Store`` methods (``version``, ``search``,
``search_tasks``, ``env``, ``task``, ``file``) and never touches the data sources itself.

HTTP semantics: every page and API answer carries a weak ETag
``W/"<store.version>-<hash of path and query>"`` (so a 304 costs no query), ``Cache-Control``,
``Server-Timing: db;dur=…, render;dur=…`` and security headers; HTML and JSON are gzipped.
Raw files are served as ``text/plain`` or ``application/octet-stream`` under a CSP that
forbids scripts, only when the path is in the task's (already withheld) file list.
"""

import gc
import hashlib
import json
import time
import zlib
from importlib import resources
from typing import Any
from urllib.parse import quote

from repogym.explorer.lru import LRU
from repogym.explorer.web import pages

FACETS = ("kind", "language", "category", "difficulty", "pipeline", "grading", "network")
MAX_Q = 500
MAX_PAGE = 10_000
MAX_SIZE = 100

PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)
RAW_CSP = "default-src 'none'; sandbox; frame-ancestors 'none'"
CACHE_SEARCH = "public, max-age=30"
CACHE_PAGE = "public, max-age=60"
HOME_TASKS = 8
"""Tasks listed under the environments when the home page has search words."""
CACHE_DOC = "public, max-age=300"
CACHE_STATIC = "public, max-age=31536000, immutable"
_COMMON_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]
_STATIC_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}


class BadRequest(ValueError):
    """A query parameter that cannot be used (answered with 400 and the reason)."""


class _Static:
    """The files of ``static/`` under content-hashed names (``app.<sha>.css``)."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[bytes, str, str]] = {}
        self.urls: dict[str, str] = {}
        folder = resources.files("repogym.explorer.web") / "static"
        for entry in folder.iterdir():
            name = entry.name
            stem, dot, ext = name.rpartition(".")
            if not dot or "." + ext not in _STATIC_TYPES:
                continue
            data = entry.read_bytes()
            digest = hashlib.sha256(data).hexdigest()[:12]
            hashed = f"{stem}.{digest}.{ext}"
            self.files[hashed] = (data, _STATIC_TYPES["." + ext], digest)
            self.urls[name] = f"/static/{hashed}"

    def assets(self) -> pages.Assets:
        return pages.Assets(
            css=self.urls["app.css"], js=self.urls["app.js"], icon=self.urls["icon.svg"]
        )


_ABSENT = object()


class _DocCache:
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


class SecurityHeaders:
    """ASGI middleware adding nosniff/referrer/frame headers and the page CSP when none is set."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                names = {k.lower() for k, _ in headers}
                headers += [(k, v) for k, v in _COMMON_HEADERS if k not in names]
                if b"content-security-policy" not in names:
                    headers.append((b"content-security-policy", PAGE_CSP.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


_GZIP_MIN = 512  # bodies from this size are gzipped (the same threshold as GZipMiddleware)


def _etag(path: str, query: str, version: str) -> str:
    """The weak ETag of an answer: snapshot version plus a hash of path and query."""
    key = path + "?" + query
    digest = hashlib.blake2b(key.encode("utf-8", "replace"), digest_size=8).hexdigest()
    return f'W/"{version}-{digest}"'


def _gzip(body: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return c.compress(body) + c.flush()


class _SearchAnswer:
    """One ``/api/search`` answer, serialised once (and gzipped on first need)."""

    __slots__ = ("body", "db", "gz")

    def __init__(self, body: bytes, db: float) -> None:
        self.body, self.db = body, db
        self.gz: bytes | None = None

    def gzipped(self) -> bytes:
        if self.gz is None:
            self.gz = _gzip(self.body)
        return self.gz


class _SearchFastPath:
    """Plain-ASGI handler of ``GET /api/search`` in front of the FastAPI app.

    It answers exactly what the routed handler, the gzip and the security-header middleware
    would (ETag/304 without a query, Cache-Control, Server-Timing, gzip over 512 bytes with
    ``Vary: Accept-Encoding``, security headers), without routing, request objects or any
    middleware: it wraps the whole FastAPI app (attribute reads go through to that app).
    Answers are cached per (snapshot version, query string) and per normalised query,
    serialised and gzipped once. Anything unusual (a bad parameter, a ``root_path``, a ``#``
    in the query) goes to the app, which answers as before.
    """

    def __init__(self, app: Any, *, store: Any, results: LRU) -> None:
        from starlette.datastructures import QueryParams

        self.app = app
        self.store = store
        self.results = results
        self.raw = LRU(results.size)  # (version, raw query string) -> _SearchAnswer
        self.search_json = getattr(store, "search_json", None)  # the store's own serialiser
        self.query_params = QueryParams
        self.security = [*_COMMON_HEADERS, (b"content-security-policy", PAGE_CSP.encode())]
        self.cache = CACHE_SEARCH.encode()

    def __getattr__(self, name: str) -> Any:  # app.state, app.routes, ... of the FastAPI app
        return getattr(self.app, name)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] != "/api/search"
            or scope["method"] != "GET"
            or scope.get("root_path")
        ):
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        raw_qs = scope.get("query_string", b"")
        qs = raw_qs.decode("latin-1")
        if "#" in qs:
            await self.app(scope, receive, send)
            return
        version = self.store.version
        etag = _etag("/api/search", qs, version)
        inm = accept = None
        for k, v in scope["headers"]:
            if k == b"if-none-match":
                if inm is None:
                    inm = v.decode("latin-1")
            elif k == b"accept-encoding" and accept is None:
                accept = v
        etag_b = etag.encode()
        if inm:
            tags = {t.strip().removeprefix("W/") for t in inm.split(",")}
            if "*" in tags or etag.removeprefix("W/") in tags:
                await send(
                    {
                        "type": "http.response.start",
                        "status": 304,
                        "headers": [(b"etag", etag_b), (b"cache-control", self.cache)]
                        + self.security,
                    }
                )
                await send({"type": "http.response.body", "body": b""})
                return
        rkey = (version, raw_qs)
        hit = self.raw.get(rkey)
        render = 0.0
        if hit is None:
            try:
                args = parse_search(self.query_params(qs))
            except BadRequest:
                await self.app(scope, receive, send)
                return
            key = (version, "envs", json.dumps(args, sort_keys=True)) if self.results.size else None
            hit = self.results.get(key) if key is not None else None
            if hit is None:
                if self.search_json is not None:
                    body = self.search_json(**args)
                else:
                    result = self.store.search(**args)
                    body = json.dumps(
                        result, ensure_ascii=False, separators=(",", ":"), default=str
                    ).encode()
                hit = _SearchAnswer(body, time.perf_counter() - t0)
                if key is not None:
                    self.results.put(key, hit)
                db = hit.db
            else:
                db, render = 0.0, time.perf_counter() - t0
            self.raw.put(rkey, hit)
        else:
            db, render = 0.0, time.perf_counter() - t0
        body = hit.body
        headers = [(b"content-type", b"application/json")]
        if len(body) >= _GZIP_MIN:
            if accept is not None and b"gzip" in accept:
                body = hit.gzipped()
                headers.append((b"content-encoding", b"gzip"))
            headers.append((b"vary", b"Accept-Encoding"))
        timing = f"db;dur={db * 1000:.2f}, render;dur={render * 1000:.2f}"
        headers += [
            (b"content-length", str(len(body)).encode()),
            (b"etag", etag_b),
            (b"cache-control", self.cache),
            (b"server-timing", timing.encode()),
            *self.security,
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def parse_search(query: Any, *, default_size: int = 24) -> dict[str, Any]:
    """Turn query parameters (q, kind, f=facet:value…, sort, page, size) into store arguments.

    Raises :class:`BadRequest` with a one-line reason for unusable values.
    """
    q = (query.get("q") or "").strip()
    if len(q) > MAX_Q:
        raise BadRequest(f"q is longer than {MAX_Q} characters")
    filters: dict[str, list[str]] = {}
    for item in query.getlist("f"):
        name, sep, value = item.partition(":")
        if not sep or not value:
            raise BadRequest(f"f must be facet:value, got {item[:60]!r}")
        if name not in FACETS:
            raise BadRequest(f"unknown facet {name[:40]!r} (facets: {', '.join(FACETS)})")
        if value not in filters.setdefault(name, []):
            filters[name].append(value[:200])
    sort = query.get("sort") or "relevance"
    if sort not in pages.SORTS:
        raise BadRequest(f"sort must be one of {', '.join(pages.SORTS)}")

    def integer(name: str, default: int, hi: int) -> int:
        raw = query.get(name)
        if raw in (None, ""):
            return default
        try:
            value = int(raw)
        except ValueError:
            raise BadRequest(f"{name} must be a whole number") from None
        if not 1 <= value <= hi:
            raise BadRequest(f"{name} must be between 1 and {hi}")
        return value

    return {
        "q": q,
        "kind": (query.get("kind") or "").strip() or None,
        "filters": filters,
        "sort": sort,
        "page": integer("page", 1, MAX_PAGE),
        "size": integer("size", default_size, MAX_SIZE),
    }


def is_pending(doc: dict) -> bool:
    """A task listed but not read yet (a listing snapshot while indexing continues)."""
    return not doc.get("sections") and not doc.get("files")


def _split_task(rest: str) -> tuple[str, str] | None:
    env_id, _, task_id = rest.strip("/").rpartition("/")
    if not env_id or not task_id or task_id in (".", ".."):
        return None
    return env_id, task_id


def _unsafe_path(path: str) -> bool:
    parts = path.split("/")
    return (
        not path
        or path.startswith("/")
        or "\\" in path
        or "\x00" in path
        or any(p in ("", ".", "..") for p in parts)
    )


def create_app(store: Any, *, result_cache: int = 2048, fast_search: bool = True) -> Any:
    """Build the explorer web app over ``store`` (a ``repogym.explorer.store.Store``).

    ``result_cache`` search answers are kept per snapshot version (a snapshot is immutable,
    so a cached answer is exact); 0 turns the cache off. ``fast_search`` answers
    ``GET /api/search`` in a plain-ASGI handler in front of the routes (same answers, a
    fraction of the per-request overhead); off, the routed handler answers. Handlers call
    the store inline: its queries take about a millisecond, less than a hop through a thread
    pool.
    """
    from fastapi import FastAPI, Request
    from fastapi.responses import Response
    from starlette.middleware.gzip import GZipMiddleware

    static = _Static()
    assets = static.assets()
    docs = _DocCache(store)
    results = LRU(result_cache)
    app = FastAPI(title="repogym explorer", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.store = store

    def etag_for(request: Request, version: str) -> str:
        return _etag(request.url.path, request.url.query, version)

    def not_modified(request: Request, etag: str, cache: str) -> Response | None:
        wanted = request.headers.get("if-none-match")
        if not wanted:
            return None
        tags = {t.strip().removeprefix("W/") for t in wanted.split(",")}
        if "*" in tags or etag.removeprefix("W/") in tags:
            return Response(status_code=304, headers={"ETag": etag, "Cache-Control": cache})
        return None

    def timing(db: float, render: float) -> str:
        return f"db;dur={db * 1000:.2f}, render;dur={render * 1000:.2f}"

    def json_response(
        obj: Any, etag: str, cache: str, db: float, t0: float, status: int = 200
    ) -> Response:
        body = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)
        headers = {"Cache-Control": cache, "Server-Timing": timing(db, time.perf_counter() - t0)}
        if status == 200:
            headers["ETag"] = etag
        return Response(body, status_code=status, media_type="application/json", headers=headers)

    def html_response(
        text: str, etag: str, cache: str, db: float, t0: float, status: int = 200
    ) -> Response:
        headers = {"Server-Timing": timing(db, time.perf_counter() - t0)}
        if status == 200:
            headers.update({"ETag": etag, "Cache-Control": cache})
        else:
            headers["Cache-Control"] = "no-store"
        return Response(
            text, status_code=status, media_type="text/html; charset=utf-8", headers=headers
        )

    def api_error(status: int, message: str) -> Response:
        return Response(
            json.dumps({"error": message}),
            status_code=status,
            media_type="application/json",
            headers={"Cache-Control": "no-store"},
        )

    def page_error(status: int, message: str) -> Response:
        return Response(
            pages.error_page(status, message, assets),
            status_code=status,
            media_type="text/html; charset=utf-8",
            headers={"Cache-Control": "no-store"},
        )

    # ---- static ---------------------------------------------------------------------------
    @app.get("/static/{name}", include_in_schema=False)
    async def static_file(name: str, request: Request) -> Response:
        hit = static.files.get(name)
        if hit is None:
            return Response("not found", status_code=404, media_type="text/plain")
        data, ctype, digest = hit
        etag = f'"{digest}"'
        headers = {"ETag": etag, "Cache-Control": CACHE_STATIC}
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers=headers)
        return Response(data, media_type=ctype, headers=headers)

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        data, ctype, _ = static.files[assets.icon.rsplit("/", 1)[1]]
        return Response(data, media_type=ctype, headers={"Cache-Control": CACHE_PAGE})

    # ---- JSON API -------------------------------------------------------------------------
    def cached_json(key: tuple, make: Any, etag: str, cache: str, t0: float) -> Response:
        hit = results.get(key)
        if hit is None:
            body = json.dumps(make(), ensure_ascii=False, separators=(",", ":"), default=str)
            db = time.perf_counter() - t0
            hit = _SearchAnswer(body.encode(), db)
            results.put(key, hit)
            render = 0.0
        else:
            db, render = 0.0, time.perf_counter() - t0
        headers = {"ETag": etag, "Cache-Control": cache, "Server-Timing": timing(db, render)}
        return Response(hit.body, media_type="application/json", headers=headers)

    def search_answer(request: Request, name: str, make: Any) -> Response:
        """A cached search answer (``make(args, env)`` runs on a miss) with ETag/304."""
        t0 = time.perf_counter()
        version = store.version
        etag = etag_for(request, version)
        if (hit := not_modified(request, etag, CACHE_SEARCH)) is not None:
            return hit
        try:
            args = parse_search(request.query_params)
        except BadRequest as exc:
            return api_error(400, str(exc))
        if name == "envs":
            env, key = None, (version, name, json.dumps(args, sort_keys=True))
        else:
            env = (request.query_params.get("env") or "").strip() or None
            key = (version, name, env, json.dumps(args, sort_keys=True))
        return cached_json(key, lambda: make(args, env), etag, CACHE_SEARCH, t0)

    def _tasks(args: dict[str, Any], env: str | None) -> dict:
        filters = dict(args["filters"])
        if args["kind"]:
            filters["kind"] = [args["kind"]]
        return store.search_tasks(
            q=args["q"], env=env, filters=filters or None, page=args["page"], size=args["size"]
        )

    @app.get("/api/search")
    async def api_search(request: Request) -> Response:
        return search_answer(request, "envs", lambda args, _env: store.search(**args))

    @app.get("/api/search/tasks")
    async def api_search_tasks(request: Request) -> Response:
        return search_answer(request, "tasks", _tasks)

    @app.get("/api/envs/{env_id:path}")
    async def api_env(env_id: str, request: Request) -> Response:
        t0 = time.perf_counter()
        etag = etag_for(request, store.version)
        if (hit := not_modified(request, etag, CACHE_DOC)) is not None:
            return hit
        env = store.env(env_id.strip("/"))
        db = time.perf_counter() - t0
        if env is None:
            return api_error(404, f"no environment {env_id!r}")
        return json_response(env, etag, CACHE_DOC, db, t0 + db)

    @app.get("/api/tasks/{rest:path}")
    async def api_task(rest: str, request: Request) -> Response:
        t0 = time.perf_counter()
        version = store.version
        etag = etag_for(request, version)
        if (hit := not_modified(request, etag, CACHE_DOC)) is not None:
            return hit
        ids = _split_task(rest)
        doc = docs.get(version, *ids) if ids else None
        db = time.perf_counter() - t0
        if doc is None:
            return api_error(404, "no such task (use /api/tasks/{env}/{task})")
        if is_pending(doc):  # listed, not packed yet: do not let caches keep it
            return json_response(doc | {"pending": True}, etag, "no-store", db, t0 + db)
        return json_response(doc, etag, CACHE_DOC, db, t0 + db)

    def locate_file(version: str, rest: str) -> tuple[str, str, str, dict] | None:
        """Split ``env/…/task/path`` where the task exists and lists the path."""
        segs = rest.split("/")
        for i in range(1, len(segs) - 1):
            env_id, task_id, path = "/".join(segs[:i]), segs[i], "/".join(segs[i + 1 :])
            if _unsafe_path(path) or any(s in ("", ".", "..") for s in segs[: i + 1]):
                continue
            doc = docs.get(version, env_id, task_id)
            if doc is None:
                continue
            for f in doc.get("files") or []:
                if f.get("path") == path:
                    return env_id, task_id, path, f
        return None

    def read_file(env_id: str, task_id: str, path: str, entry: dict) -> tuple[bytes | None, str]:
        """(data, "") or (None, reason) for a withheld file; KeyError when absent."""
        if entry.get("withheld"):
            return None, str(entry["withheld"])
        try:
            return store.file(env_id, task_id, path), ""
        except KeyError:
            raise
        except Exception as exc:  # the store's Withheld carries .reason
            reason = getattr(exc, "reason", None)
            if reason is None:
                raise
            return None, str(reason)

    @app.get("/api/files/{rest:path}")
    async def api_file(rest: str, request: Request) -> Response:
        t0 = time.perf_counter()
        version = store.version
        raw_headers = {
            "Content-Security-Policy": RAW_CSP,
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-store",
        }
        raw_path = request.scope.get("raw_path") or b""
        if b"\\" in raw_path or "\\" in rest or "\x00" in rest:
            return Response("not found\n", 404, headers=raw_headers, media_type="text/plain")
        found = locate_file(version, rest)
        if found is None:
            return Response(
                "not found: not a file of this task\n",
                404,
                headers=raw_headers,
                media_type="text/plain",
            )
        env_id, task_id, path, entry = found
        etag = etag_for(request, version)
        if (hit := not_modified(request, etag, CACHE_DOC)) is not None:
            hit.headers.update(raw_headers | {"Cache-Control": CACHE_DOC})
            return hit
        try:
            data, reason = read_file(env_id, task_id, path, entry)
        except KeyError:
            return Response("not found\n", 404, headers=raw_headers, media_type="text/plain")
        if data is None:
            return Response(
                f"withheld: {reason}\n", 403, headers=raw_headers, media_type="text/plain"
            )
        ctype = "application/octet-stream"
        if b"\x00" not in data[:8192]:
            try:
                data.decode("utf-8")
                ctype = "text/plain; charset=utf-8"
            except UnicodeDecodeError:
                pass
        name = quote(path.rsplit("/", 1)[-1], safe="")  # RFC 5987: no header injection
        headers = raw_headers | {
            "ETag": etag,
            "Cache-Control": CACHE_DOC,
            "Content-Disposition": (
                "inline" if ctype.startswith("text/") else f"attachment; filename*=UTF-8''{name}"
            ),
            "Server-Timing": timing(time.perf_counter() - t0, 0.0),
        }
        return Response(data, media_type=ctype, headers=headers)

    # ---- pages ----------------------------------------------------------------------------
    @app.get("/", include_in_schema=False)
    async def home(request: Request) -> Response:
        t0 = time.perf_counter()
        version = store.version
        etag = etag_for(request, version)
        if (hit := not_modified(request, etag, CACHE_PAGE)) is not None:
            return hit
        try:
            args = parse_search(request.query_params)
        except BadRequest as exc:
            return page_error(400, str(exc))
        key = (version, "envs-dict", json.dumps(args, sort_keys=True))
        result = results.get(key)
        if result is None:
            result = store.search(**args)
            results.put(key, result)
        tasks = None
        if args["q"].strip():  # words may name tasks rather than environments
            tkey = (version, "home-tasks", args["q"])
            tasks = results.get(tkey)
            if tasks is None:
                tasks = store.search_tasks(q=args["q"], page=1, size=HOME_TASKS)
                results.put(tkey, tasks)
        t1 = time.perf_counter()
        state = pages.SearchState(
            q=args["q"],
            kind=args["kind"] or "",
            filters=args["filters"],
            sort=args["sort"],
            page=args["page"],
        )
        page = pages.home(result, state, assets, tasks=tasks)
        return html_response(page, etag, CACHE_PAGE, t1 - t0, t1)

    @app.get("/d/{env_id:path}", include_in_schema=False)
    async def env_page(env_id: str, request: Request) -> Response:
        t0 = time.perf_counter()
        etag = etag_for(request, store.version)
        if (hit := not_modified(request, etag, CACHE_PAGE)) is not None:
            return hit
        env_id = env_id.strip("/")
        env = store.env(env_id)
        if env is None:
            return page_error(404, f"No environment {env_id!r}.")
        try:
            args = parse_search(request.query_params)
        except BadRequest as exc:
            return page_error(400, str(exc))
        tasks = store.search_tasks(q=args["q"], env=env_id, page=args["page"], size=args["size"])
        t1 = time.perf_counter()
        text = pages.env_page(env, tasks, args["q"], args["page"], assets)
        return html_response(text, etag, CACHE_PAGE, t1 - t0, t1)

    @app.get("/t/{rest:path}", include_in_schema=False)
    async def task_page(rest: str, request: Request) -> Response:
        t0 = time.perf_counter()
        version = store.version
        etag = etag_for(request, version)
        if (hit := not_modified(request, etag, CACHE_PAGE)) is not None:
            return hit
        ids = _split_task(rest)
        doc = docs.get(version, *ids) if ids else None
        if doc is None or ids is None:
            return page_error(404, "No such task.")
        file = request.query_params.get("file")
        file_html, status = "", 200
        if file is not None:
            entry = next((f for f in doc.get("files") or [] if f.get("path") == file), None)
            if entry is None or _unsafe_path(file):
                return page_error(404, "Not a file of this task.")
            try:
                data, reason = read_file(ids[0], ids[1], file, entry)
            except KeyError:
                return page_error(404, "Not a file of this task.")
            if data is None:
                status = 403
            file_html = pages.viewer(ids[0], ids[1], file, data, reason if data is None else None)
        t1 = time.perf_counter()
        pending = is_pending(doc)
        text = pages.task_page(doc, assets, file=file, file_html=file_html, pending=pending)
        cache = "no-store" if pending else CACHE_PAGE
        return html_response(text, etag, cache, t1 - t0, t1, status=status)

    app.add_middleware(SecurityHeaders)
    app.add_middleware(GZipMiddleware, minimum_size=_GZIP_MIN)
    if fast_search:
        # in front of the whole FastAPI app, its own middleware stack included
        return _SearchFastPath(app, store=store, results=results)
    return app


def settle_heap() -> None:
    """Before serving: collect garbage, then move every object alive now (the snapshot's search
    caches, the app) out of the cyclic collector's sight, so its full passes stop walking
    them: fewer and shorter pauses under load. Objects are still freed by reference counting."""
    gc.collect()
    gc.freeze()


def snapshot_app() -> Any:
    """The app over the snapshot folder in ``$REPOGYM_EXPLORE_SNAPSHOT`` (a factory for
    ``uvicorn --factory``: each worker process of ``repogym explore --workers N`` opens the
    snapshot read-only and polls its pointer itself)."""
    import os

    from repogym.explorer.store import open_store

    folder = os.environ.get("REPOGYM_EXPLORE_SNAPSHOT")
    if not folder:
        raise RuntimeError("REPOGYM_EXPLORE_SNAPSHOT is not set")
    app = create_app(open_store(snapshot=folder))
    settle_heap()
    return app
