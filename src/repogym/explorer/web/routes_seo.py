"""Routes for crawlers: ``/robots.txt``, the sitemap index ``/sitemap.xml`` and its shards
``/sitemap-<n>.xml``.

The index names one shard per :data:`repogym.explorer.sitemap.SHARD_SIZE` URLs: first the home
page and the environment pages, then the task pages; each shard is read on its own request
(:mod:`repogym.explorer.sitemap`), so no answer loads every task. Private environments and those
the ``hidden`` callable names are left out with their tasks. Answers carry a weak ETag over the
snapshot version and what is public (a 304 costs the plan only), ``Cache-Control`` like pages,
and are gzipped by the app's middleware. Without a public base URL (none configured, and the
request's ``Host`` is not an allowed name) the sitemap answers 404: its URLs must be absolute.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from fastapi import APIRouter, Request
from fastapi.responses import Response

from repogym.explorer import sitemap
from repogym.explorer.web import http, pages, seo
from repogym.explorer.web.context import Context
from repogym.explorer.web.http import CACHE_PAGE, timing

XML = "application/xml"


def router(
    ctx: Context, *, hidden: Callable[[str], bool] | None = None, size: int = sitemap.SHARD_SIZE
) -> APIRouter:
    router = APIRouter()

    def no_sitemap(why: str) -> Response:
        return Response(
            f"no sitemap: {why}\n",
            status_code=404,
            media_type="text/plain; charset=utf-8",
            headers={"Cache-Control": "no-store"},
        )

    def hidden_now() -> Callable[[str], bool] | None:
        """``hidden`` and the curation settings of a curated store (its ``curation``)."""
        own = getattr(getattr(ctx.store, "curation", None), "hidden", None)
        if own is None or hidden is None or own == hidden:
            return own or hidden
        extra = hidden
        return lambda env_id: extra(env_id) or own(env_id)

    def answer(request: Request, body: Callable[[sitemap.Plan], bytes | None]) -> Response:
        t0 = time.perf_counter()
        base = seo.current_base()
        if not base:
            return no_sitemap("the explorer's public URL is not known (set --public-url)")
        if getattr(ctx.store, "reader", None) is None:
            return no_sitemap("the catalog is not a snapshot")
        plan = sitemap.plan(ctx.store, hidden_now(), size)
        # the base URL is in the answer: it is in the tag too
        etag = http.etag(request.url.path, request.url.query + "\0" + base, plan.version)
        if (hit := ctx.not_modified(request, etag, CACHE_PAGE)) is not None:
            return hit
        data = body(plan)
        if data is None:
            return no_sitemap(f"no shard {request.url.path.lstrip('/')}")
        t1 = time.perf_counter()
        headers = {"ETag": etag, "Cache-Control": CACHE_PAGE, "Server-Timing": timing(t1 - t0, 0)}
        return Response(data, media_type=XML, headers=headers)

    @router.get("/robots.txt", include_in_schema=False)
    async def robots() -> Response:
        return Response(
            seo.robots_txt(seo.current_base()),
            media_type="text/plain; charset=utf-8",
            headers={"Cache-Control": CACHE_PAGE},
        )

    @router.get("/sitemap.xml", include_in_schema=False)
    async def sitemap_index(request: Request) -> Response:
        base = seo.current_base()
        return answer(request, lambda p: seo.sitemap_index_xml(base, p.shards, p.built_at))

    @router.get("/sitemap-{n:int}.xml", include_in_schema=False)
    async def sitemap_shard(n: int, request: Request) -> Response:
        base = seo.current_base()

        def body(p: sitemap.Plan) -> bytes | None:
            envs = sitemap.env_shard(p, n)
            if envs is not None:
                paths = ["/"] if n == 1 else []
                return seo.urlset_xml(base, paths + [pages.env_url(e) for e in envs])
            tasks = sitemap.task_shard(ctx.store, p, n, hidden_now())
            if tasks is None:
                return None
            return seo.urlset_xml(base, (pages.task_url(e, t) for e, t in tasks))

        return answer(request, body)

    return router
