"""Routes of the HTML pages: home (environment search), ``/d/<env>`` and ``/t/<env>/<task>``."""

import json
import time

from fastapi import APIRouter, Request
from fastapi.responses import Response

from repogym.explorer.web import pages
from repogym.explorer.web.context import Context, is_pending, split_task, unsafe_path
from repogym.explorer.web.http import CACHE_PAGE
from repogym.explorer.web.search import BadRequest, parse_search

HOME_TASKS = 8
"""Tasks listed under the environments when the home page has search words."""


def _curated(ctx: Context, plain: bool) -> str:
    """The curators' featured environments and collections for the plain home page ("" when
    the explorer has no curation or the listing is searched or filtered)."""
    curation = getattr(ctx.store, "curation", None)
    if curation is None or not plain:
        return ""
    featured = [c for c in (ctx.store.env(i) for i in curation.featured()) if c is not None]
    collections = {name: len(ids) for name, ids in curation.collections().items() if ids}
    return pages.curated_strip(featured, collections)


def router(ctx: Context) -> APIRouter:
    router = APIRouter()

    @router.get("/", include_in_schema=False)
    async def home(request: Request) -> Response:
        t0 = time.perf_counter()
        version = ctx.store.version
        etag = ctx.etag_for(request, version)
        if (hit := ctx.not_modified(request, etag, CACHE_PAGE)) is not None:
            return hit
        try:
            args = parse_search(request.query_params)
        except BadRequest as exc:
            return ctx.page_error(400, str(exc))
        key = (version, "envs-dict", json.dumps(args, sort_keys=True))
        result = ctx.results.get(key)
        if result is None:
            result = ctx.store.search(**args)
            ctx.results.put(key, result)
        tasks = None
        if args["q"].strip():  # words may name tasks rather than environments
            tkey = (version, "home-tasks", args["q"])
            tasks = ctx.results.get(tkey)
            if tasks is None:
                tasks = ctx.store.search_tasks(q=args["q"], page=1, size=HOME_TASKS)
                ctx.results.put(tkey, tasks)
        t1 = time.perf_counter()
        state = pages.SearchState(
            q=args["q"],
            kind=args["kind"] or "",
            filters=args["filters"],
            sort=args["sort"],
            page=args["page"],
        )
        plain = not (args["q"].strip() or args["kind"] or args["filters"]) and args["page"] == 1
        page = pages.home(result, state, ctx.assets, tasks=tasks, curated=_curated(ctx, plain))
        return ctx.html_response(page, etag, CACHE_PAGE, t1 - t0, t1)

    @router.get("/d/{env_id:path}", include_in_schema=False)
    async def env_page(env_id: str, request: Request) -> Response:
        t0 = time.perf_counter()
        etag = ctx.etag_for(request, ctx.store.version)
        if (hit := ctx.not_modified(request, etag, CACHE_PAGE)) is not None:
            return hit
        env_id = env_id.strip("/")
        env = ctx.store.env(env_id)
        if env is None:
            return ctx.page_error(404, f"No environment {env_id!r}.")
        try:
            args = parse_search(request.query_params)
        except BadRequest as exc:
            return ctx.page_error(400, str(exc))
        tasks = ctx.store.search_tasks(
            q=args["q"], env=env_id, page=args["page"], size=args["size"]
        )
        t1 = time.perf_counter()
        text = pages.env_page(env, tasks, args["q"], args["page"], ctx.assets)
        return ctx.html_response(text, etag, CACHE_PAGE, t1 - t0, t1)

    @router.get("/t/{rest:path}", include_in_schema=False)
    async def task_page(rest: str, request: Request) -> Response:
        t0 = time.perf_counter()
        version = ctx.store.version
        etag = ctx.etag_for(request, version)
        if (hit := ctx.not_modified(request, etag, CACHE_PAGE)) is not None:
            return hit
        ids = split_task(rest)
        doc = ctx.docs.get(version, *ids) if ids else None
        if doc is None or ids is None:
            return ctx.page_error(404, "No such task.")
        file = request.query_params.get("file")
        file_html, status = "", 200
        if file is not None:
            entry = next((f for f in doc.get("files") or [] if f.get("path") == file), None)
            if entry is None or unsafe_path(file):
                return ctx.page_error(404, "Not a file of this task.")
            try:
                data, reason = ctx.read_file(ids[0], ids[1], file, entry)
            except KeyError:
                return ctx.page_error(404, "Not a file of this task.")
            if data is None:
                status = 403
            file_html = pages.viewer(ids[0], ids[1], file, data, reason if data is None else None)
        t1 = time.perf_counter()
        pending = is_pending(doc)
        panel = ""
        if ctx.runs is not None and ctx.runs.enabled and not pending:
            from repogym.explorer.web.pages_runs import runs_panel

            panel = runs_panel(ids[0], ids[1], bool(doc.get("runnable")))
        text = pages.task_page(
            doc, ctx.assets, file=file, file_html=file_html, pending=pending, panel=panel
        )
        cache = "no-store" if pending else CACHE_PAGE
        return ctx.html_response(text, etag, cache, t1 - t0, t1, status=status)

    return router
