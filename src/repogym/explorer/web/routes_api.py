"""Routes of the JSON API (``/api/search``, ``/api/search/tasks``, ``/api/envs/…``,
``/api/tasks/…``) and raw files (``/api/files/…``, under a CSP that forbids scripts, only for paths
in the task's already withheld file list)."""

import json
import time
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response

from repogym.explorer.web import http
from repogym.explorer.web.context import Context, is_pending, split_task
from repogym.explorer.web.http import CACHE_DOC, CACHE_SEARCH, RAW_CSP, CachedAnswer
from repogym.explorer.web.search import BadRequest, parse_search


def router(ctx: Context) -> APIRouter:
    router = APIRouter()

    def cached_json(key: tuple, make: Any, etag: str, cache: str, t0: float) -> Response:
        hit = ctx.results.get(key)
        if hit is None:
            body = json.dumps(make(), ensure_ascii=False, separators=(",", ":"), default=str)
            db = time.perf_counter() - t0
            hit = CachedAnswer(body.encode(), db)
            ctx.results.put(key, hit)
            render = 0.0
        else:
            db, render = 0.0, time.perf_counter() - t0
        headers = {"ETag": etag, "Cache-Control": cache, "Server-Timing": http.timing(db, render)}
        return Response(hit.body, media_type="application/json", headers=headers)

    def search_answer(request: Request, name: str, make: Any) -> Response:
        """A cached search answer (``make(args, env)`` runs on a miss) with ETag/304."""
        t0 = time.perf_counter()
        version = ctx.store.version
        etag = ctx.etag_for(request, version)
        if (hit := ctx.not_modified(request, etag, CACHE_SEARCH)) is not None:
            return hit
        try:
            args = parse_search(request.query_params)
        except BadRequest as exc:
            return ctx.api_error(400, str(exc))
        key: tuple[object, ...]
        if name == "envs":
            env, key = None, (version, name, json.dumps(args, sort_keys=True))
        else:
            env = (request.query_params.get("env") or "").strip() or None
            key = (version, name, env, json.dumps(args, sort_keys=True))
        return cached_json(key, lambda: make(args, env), etag, CACHE_SEARCH, t0)

    def tasks_search(args: dict[str, Any], env: str | None) -> dict:
        filters = dict(args["filters"])
        if args["kind"]:
            filters["kind"] = [args["kind"]]
        return ctx.store.search_tasks(
            q=args["q"], env=env, filters=filters or None, page=args["page"], size=args["size"]
        )

    @router.get("/api/search")
    async def api_search(request: Request) -> Response:
        return search_answer(request, "envs", lambda args, _env: ctx.store.search(**args))

    @router.get("/api/search/tasks")
    async def api_search_tasks(request: Request) -> Response:
        return search_answer(request, "tasks", tasks_search)

    @router.get("/api/envs/{env_id:path}")
    async def api_env(env_id: str, request: Request) -> Response:
        t0 = time.perf_counter()
        etag = ctx.etag_for(request, ctx.store.version)
        if (hit := ctx.not_modified(request, etag, CACHE_DOC)) is not None:
            return hit
        env = ctx.store.env(env_id.strip("/"))
        db = time.perf_counter() - t0
        if env is None:
            return ctx.api_error(404, f"no environment {env_id!r}")
        return ctx.json_response(env, etag, CACHE_DOC, db, t0 + db)

    @router.get("/api/tasks/{rest:path}")
    async def api_task(rest: str, request: Request) -> Response:
        t0 = time.perf_counter()
        version = ctx.store.version
        etag = ctx.etag_for(request, version)
        if (hit := ctx.not_modified(request, etag, CACHE_DOC)) is not None:
            return hit
        ids = split_task(rest)
        doc = ctx.docs.get(version, *ids) if ids else None
        db = time.perf_counter() - t0
        if doc is None:
            return ctx.api_error(404, "no such task (use /api/tasks/{env}/{task})")
        if is_pending(doc):  # listed, not packed yet: do not let caches keep it
            return ctx.json_response(doc | {"pending": True}, etag, "no-store", db, t0 + db)
        return ctx.json_response(doc, etag, CACHE_DOC, db, t0 + db)

    @router.get("/api/files/{rest:path}")
    async def api_file(rest: str, request: Request) -> Response:
        return raw_file(ctx, rest, request)

    return router


def raw_file(ctx: Context, rest: str, request: Request) -> Response:
    """``/api/files/{env}/{task}/{path}``: the file as text or bytes under :data:`RAW_CSP`, only
    when the path is in the task's (already withheld) file list; 403 for a withheld file."""
    t0 = time.perf_counter()
    version = ctx.store.version
    raw_headers = {
        "Content-Security-Policy": RAW_CSP,
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "no-store",
    }
    raw_path = request.scope.get("raw_path") or b""
    if b"\\" in raw_path or "\\" in rest or "\x00" in rest:
        return Response("not found\n", 404, headers=raw_headers, media_type="text/plain")
    found = ctx.locate_file(version, rest)
    if found is None:
        return Response(
            "not found: not a file of this task\n",
            404,
            headers=raw_headers,
            media_type="text/plain",
        )
    env_id, task_id, path, entry = found
    etag = ctx.etag_for(request, version)
    if (hit := ctx.not_modified(request, etag, CACHE_DOC)) is not None:
        hit.headers.update(raw_headers | {"Cache-Control": CACHE_DOC})
        return hit
    try:
        data, reason = ctx.read_file(env_id, task_id, path, entry)
    except KeyError:
        return Response("not found\n", 404, headers=raw_headers, media_type="text/plain")
    if data is None:
        return Response(f"withheld: {reason}\n", 403, headers=raw_headers, media_type="text/plain")
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
        "Server-Timing": http.timing(time.perf_counter() - t0, 0.0),
    }
    return Response(data, media_type=ctype, headers=headers)
