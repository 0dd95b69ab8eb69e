"""The explorer's FastAPI application: pages, JSON API, raw files and static assets.

``create_app(store)`` takes any object with the ``Store`` methods (``version``, ``search``,
``search_tasks``, ``env``, ``task``, ``file``) and never touches the data sources itself.

The routes live in routers (:mod:`.routes_static`, :mod:`.routes_api`, :mod:`.routes_pages`)
over one :class:`.context.Context`; ``GET /api/search`` is answered in front of them by
:class:`.search.SearchFastPath`. HTTP semantics are :mod:`.http`'s, for both: every page and API
answer carries a weak ETag ``W/"<store.version>-<hash of path and query>"`` (so a 304 costs no
query), ``Cache-Control``, ``Server-Timing: db;dur=…, render;dur=…`` and security headers; HTML
and JSON are gzipped. Raw files are served as ``text/plain`` or ``application/octet-stream``
under a CSP that forbids scripts, only when the path is in the task's (already withheld) file
list. The caller may mount more ASGI apps (``mounts``: the CLI mounts the MCP endpoints of
:mod:`repogym.mcp.web`, ``/mcp/d/<env>`` and the bridges ``/mcp/o/<env>``), started by the app's
lifespan; this package imports none of them. The OpenEnv playground ``/play/<env>``
relays a browser's episode to a cataloged OpenEnv server (:mod:`.routes_play`).
"""

import gc
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from repogym.explorer.web.http import GZIP_MIN, LOOPBACK_HOSTS, SecurityHeaders
from repogym.explorer.web.search import BadRequest, SearchFastPath, parse_search

__all__ = [
    "BadRequest",
    "MountFactory",
    "create_app",
    "parse_search",
    "settle_heap",
    "snapshot_app",
]

MountFactory = Callable[[Any, Sequence[str] | None], Sequence[tuple[str, Any]]]
"""What ``create_app(mounts=…)`` takes: given the store and the allowed ``Host`` names (None:
any), the ASGI apps to mount as ``(prefix, app)``; an app with a ``run()`` async context manager
is run by the explorer app's lifespan (for example :func:`repogym.mcp.web.explorer_mounts`)."""


def create_app(
    store: Any,
    *,
    result_cache: int = 2048,
    fast_search: bool = True,
    mcp: bool = True,
    mcp_hosts: Sequence[str] | None = LOOPBACK_HOSTS,
    runs: Any = None,
    play: bool = True,
    mounts: MountFactory | None = None,
    public_url: str | None = None,
    hidden: Callable[[str], bool] | None = None,
    curation: Any = None,
) -> Any:
    """Build the explorer web app over ``store`` (a ``repogym.explorer.store.Store``).

    ``result_cache`` search answers are kept per snapshot version (a snapshot is immutable,
    so a cached answer is exact); 0 turns the cache off. ``fast_search`` answers
    ``GET /api/search`` in a plain-ASGI handler in front of the routes (same answers, a
    fraction of the per-request overhead); off, the routed handler answers. Handlers call
    the store inline: its queries take about a millisecond, less than a hop through a thread
    pool. ``runs`` (a :class:`repogym.explorer.runs.RunService`) adds rollouts: the run panel
    on task pages, the runs API with live events and the run, list and compare pages
    (:mod:`.routes_runs`). ``mounts`` (:data:`MountFactory`; ``mcp=False`` leaves them out) adds
    the caller's ASGI apps, built for the ``Host`` names ``mcp_hosts`` (None: any): the MCP
    endpoints and bridges of :func:`repogym.mcp.web.explorer_mounts`. ``play`` adds the OpenEnv
    playground ``/play/<env>`` and its API ``/api/play/<env>/…`` (:mod:`.routes_play`; same
    ``Host`` names). ``public_url`` (default ``$REPOGYM_PUBLIC_URL``) is the base of the absolute
    URLs of canonical links, previews and the sitemap (:mod:`.seo`; unset: the request's
    ``Host`` when it is one of ``mcp_hosts``); ``hidden`` names environments the sitemap leaves
    out besides those the store's own curation hides (:mod:`.routes_seo`). ``curation`` (a
    :class:`repogym.explorer.curation.CurationReader`) applies the admins' settings per
    request: the store is wrapped in a :class:`repogym.explorer.curated.CuratedStore` (hidden
    environments gone everywhere, pins first; ``hidden`` defaults to its hidden ones) and
    :class:`.curation_web.CurationMiddleware` adds the banner and turns runs off.
    """
    from fastapi import FastAPI
    from starlette.middleware.gzip import GZipMiddleware

    from repogym.explorer.web import (
        routes_api,
        routes_pages,
        routes_play,
        routes_seo,
        routes_static,
    )
    from repogym.explorer.web.context import Context
    from repogym.explorer.web.seo import PublicBase, configured_public_url

    if curation is not None:
        from repogym.explorer.curated import CuratedRuns, CuratedStore

        store = CuratedStore(store, curation)
        hidden = hidden or curation.hidden
        runs = CuratedRuns(runs, curation) if runs is not None else None
    ctx = Context(store, result_cache=result_cache)
    ctx.runs = runs
    mounted = list(mounts(store, mcp_hosts)) if mcp and mounts is not None else []
    play_hub = routes_play.PlayHub(store) if play else None
    app = FastAPI(
        title="repogym explorer",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=_lifespan([*(sub for _, sub in mounted), play_hub]),
    )
    app.state.store = store
    app.include_router(routes_static.router(ctx))
    app.include_router(routes_api.router(ctx))
    app.include_router(routes_pages.router(ctx))
    app.include_router(routes_seo.router(ctx, hidden=hidden))
    if runs is not None:
        _include_runs(app, ctx, runs, mcp_hosts, hidden=hidden, curation=curation)
    if play_hub is not None:
        app.include_router(routes_play.router(ctx, play_hub, allowed_hosts=mcp_hosts))
    for prefix, sub in mounted:
        app.mount(prefix, sub)
    if curation is not None:
        from repogym.explorer.web.curation_web import CurationMiddleware, curation_api

        app.include_router(curation_api(curation, ctx))
        app.add_middleware(CurationMiddleware, curation=curation)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(PublicBase, public_url=configured_public_url(public_url), hosts=mcp_hosts)
    app.add_middleware(GZipMiddleware, minimum_size=GZIP_MIN)
    if fast_search:
        # in front of the whole FastAPI app, its own middleware stack included
        return SearchFastPath(app, store=store, results=ctx.results)
    return app


def _include_runs(
    app: Any,
    ctx: Any,
    runs: Any,
    hosts: Sequence[str] | None,
    *,
    hidden: Callable[[str], bool] | None,
    curation: Any,
) -> None:
    """The runs API and pages, and the community view over the same run records."""
    from repogym.explorer.community import Community
    from repogym.explorer.web import routes_community, routes_runs

    app.include_router(routes_runs.router(ctx, runs, allowed_hosts=hosts))
    community = Community(
        ctx.store,
        runs.records,
        hidden=hidden,
        removed=curation.rollout_hidden if curation is not None else None,
    )
    public = runs.limits.visibility == "public"
    app.include_router(routes_community.router(ctx, community, public=public))


def _lifespan(parts: Sequence[Any]) -> Any:
    """One ``FastAPI(lifespan=…)`` entering the ``run()`` of every part that has one (the
    mounted apps, the playground), in order; None when there is none."""
    running = [p for p in parts if p is not None and callable(getattr(p, "run", None))]
    if not running:
        return None

    @asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for part in running:
                await stack.enter_async_context(part.run())
            yield

    return lifespan


def settle_heap() -> None:
    """Before serving: collect garbage, then move every object alive now (the snapshot's search
    caches, the app) out of the cyclic collector's sight, so its full passes stop walking
    them: fewer and shorter pauses under load. Objects are still freed by reference counting."""
    gc.collect()
    gc.freeze()


def snapshot_app() -> Any:
    """The app over the snapshot folder in ``$REPOGYM_EXPLORE_SNAPSHOT`` (a factory for
    ``uvicorn --factory``: each worker process of ``repogym explore --workers N`` opens the
    snapshot read-only and polls its pointer itself), with the mounts named in
    ``$REPOGYM_EXPLORE_MOUNTS`` (:mod:`.serve`)."""
    import os

    from repogym.explorer.store import open_store
    from repogym.explorer.web.http import allowed_hosts_for
    from repogym.explorer.web.serve import HOST_ENV, MOUNTS_ENV, SNAPSHOT_ENV, load_mounts

    folder = os.environ.get(SNAPSHOT_ENV)
    if not folder:
        raise RuntimeError(f"{SNAPSHOT_ENV} is not set")
    host = os.environ.get(HOST_ENV, "127.0.0.1")
    app = create_app(
        open_store(snapshot=folder),
        mcp_hosts=allowed_hosts_for(host),
        mounts=load_mounts(os.environ.get(MOUNTS_ENV)),
    )
    settle_heap()
    return app
