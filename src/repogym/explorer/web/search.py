"""Search parameters and the fast path of ``GET /api/search``.

:func:`parse_search` turns query parameters into store arguments (the limits and facets are
:mod:`repogym.explorer.facets`'); :class:`SearchFastPath` answers the busiest request in plain
ASGI in front of the FastAPI app, with the same headers (:mod:`.http`) the routes give.
"""

import json
import time
from typing import Any

from repogym.explorer.facets import FACETS, MAX_PAGE, MAX_Q, MAX_SIZE
from repogym.explorer.lru import LRU
from repogym.explorer.web import http, pages
from repogym.explorer.web.http import CACHE_SEARCH, GZIP_MIN, SECURITY_HEADERS, CachedAnswer


class BadRequest(ValueError):
    """A query parameter that cannot be used (answered with 400 and the reason)."""


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


class SearchFastPath:
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
        self.raw = LRU(results.size)  # (version, raw query string) -> CachedAnswer
        self.search_json = getattr(store, "search_json", None)  # the store's own serialiser
        self.query_params = QueryParams
        self.security = SECURITY_HEADERS
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
        etag = http.etag("/api/search", qs, version)
        inm = accept = None
        for k, v in scope["headers"]:
            if k == b"if-none-match":
                if inm is None:
                    inm = v.decode("latin-1")
            elif k == b"accept-encoding" and accept is None:
                accept = v
        etag_b = etag.encode()
        if http.matches(inm, etag):
            await send(
                {
                    "type": "http.response.start",
                    "status": 304,
                    "headers": [(b"etag", etag_b), (b"cache-control", self.cache)] + self.security,
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
                hit = CachedAnswer(body, time.perf_counter() - t0)
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
        if len(body) >= GZIP_MIN:
            if accept is not None and b"gzip" in accept:
                body = hit.gzipped()
                headers.append((b"content-encoding", b"gzip"))
            headers.append((b"vary", b"Accept-Encoding"))
        timing = http.timing(db, render)
        headers += [
            (b"content-length", str(len(body)).encode()),
            (b"etag", etag_b),
            (b"cache-control", self.cache),
            (b"server-timing", timing.encode()),
            *self.security,
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
