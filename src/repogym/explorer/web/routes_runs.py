"""Routes of rollouts: the runs API, live events over SSE, and the run, list and compare pages.

API (every answer ``Cache-Control: no-store``; errors are ``{"error": "one line"}``):

- ``GET /api/runs/session`` → ``{enabled, reason, csrf, limits}``; sets the visitor cookie
  (``rg_visitor``, HttpOnly) and the CSRF cookie. The run panel calls it first.
- ``POST /api/runs`` (JSON :class:`~repogym.explorer.runs.requests.RunRequest`, CSRF defence of
  :mod:`.csrf`) → 202 ``{id, url, events}``; 4xx/503 with the reason (429 with ``Retry-After``).
- ``GET /api/runs?env=E[&task=T]`` → ``{runs: [...]}``: a task's runs (every dataset holding the
  same task) or an environment's, newest first, as the visitor may see them.
- ``GET /api/runs/{id}`` → the run with its events; ``GET /api/runs/{id}/events`` → SSE
  (``event: run`` per event with ``id: seq``, ``Last-Event-ID``/``?after=`` resume, ``event: end``
  when the run has ended).
- ``GET /api/compare?ids=a,b`` → the runs (with events) side by side.

Pages: ``/r/{id}`` (timeline, reward and details; live while running), ``/runs?env=E[&task=T]``,
``/compare?ids=a,b[,c…]``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Sequence
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from repogym.explorer.runs import RunRefused, RunService
from repogym.explorer.runs.requests import parse_request
from repogym.explorer.web import pages_runs
from repogym.explorer.web.context import Context
from repogym.explorer.web.csrf import check_csrf, ensure_csrf_cookie, host_allowed

VISITOR_COOKIE = "rg_visitor"
MAX_COMPARE = 4
KEEPALIVE_S = 15.0
NO_STORE = {"Cache-Control": "no-store", "Vary": "Cookie"}


def _visitor(request: Request) -> str | None:
    value = request.cookies.get(VISITOR_COOKIE)
    return value if isinstance(value, str) and 32 <= len(value) <= 128 else None


def _json(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)
    return Response(
        body, status_code=status, media_type="application/json", headers=NO_STORE | (headers or {})
    )


def _error(status: int, message: str, retry_after: int | None = None) -> Response:
    headers = {"Retry-After": str(retry_after)} if retry_after else None
    return _json({"error": message}, status, headers)


def _ids(value: str) -> list[str]:
    return [i for i in (p.strip() for p in value.split(",")) if i.isalnum() and len(i) <= 32]


def router(
    ctx: Context, service: RunService, *, allowed_hosts: Sequence[str] | None = None
) -> APIRouter:
    """The runs API and pages over ``service``. The session and start routes need a ``Host``
    of ``allowed_hosts`` (None: any): a page of another site whose name was made to resolve
    to this machine (DNS rebinding) is same-origin to the browser and passes the Origin test."""
    router = APIRouter()
    hosts = None if allowed_hosts is None else [h.lower() for h in allowed_hosts]
    router.include_router(_api(service, hosts))
    router.include_router(_pages(ctx, service))
    return router


def _owner(service: RunService, request: Request) -> str:
    return service.owner_of(_visitor(request))


def _with_events(rec: Any, mine: bool) -> dict[str, Any]:
    return rec.public(mine=mine) | {"events": rec.events}


async def _runs_of(service: RunService, env: str, task: str | None, me: str) -> list[Any]:
    """The runs of ``task`` (or of every task of ``env``) ``me`` may see, read off the loop."""
    import anyio.to_thread

    if task:
        return list(await anyio.to_thread.run_sync(service.for_task, env, task, me))
    return list(await anyio.to_thread.run_sync(service.for_env, env, me))


async def _session(service: RunService, request: Request) -> Response:
    """``GET /api/runs/session``: whether runs are on, their limits, the CSRF token (cookies
    set: the double-submit token and the visitor id)."""
    reply = _json({})
    token = ensure_csrf_cookie(reply, request)
    if _visitor(request) is None:
        reply.set_cookie(
            VISITOR_COOKIE,
            secrets.token_urlsafe(32),
            path="/",
            samesite="strict",
            httponly=True,
            secure=request.url.scheme == "https",
            max_age=30 * 86400,
        )
    body = {
        "enabled": service.enabled,
        "reason": service.why_disabled(),
        "csrf": token,
        "limits": service.limits.to_json(),
    }
    reply.body = json.dumps(body).encode()
    reply.headers["content-length"] = str(len(reply.body))
    return reply


async def _start(service: RunService, request: Request) -> Response:
    """``POST /api/runs`` (CSRF checked): start a run → 202 with its id and URLs."""
    refused = check_csrf(request)
    if refused:
        return _error(403, refused)
    try:
        body = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError):
        return _error(400, "the body is not JSON")
    try:
        req = parse_request(body)
    except ValueError as exc:
        return _error(400, str(exc))
    client = request.client.host if request.client else ""
    try:
        import anyio.to_thread

        rec = await anyio.to_thread.run_sync(service.start, req, _owner(service, request), client)
    except RunRefused as exc:
        return _error(exc.status, exc.message, exc.retry_after)
    finally:
        del req
    return _json({"id": rec.id, "url": f"/r/{rec.id}", "events": f"/api/runs/{rec.id}/events"}, 202)


def _api(service: RunService, hosts: list[str] | None) -> APIRouter:
    """The runs API (``/api/runs…``, ``/api/compare``)."""
    router = APIRouter()

    def bad_host(request: Request) -> bool:
        return not host_allowed(request.headers.get("host", ""), hosts)

    @router.get("/api/runs/session")
    async def session(request: Request) -> Response:
        if bad_host(request):
            return _error(421, "Invalid Host header")
        return await _session(service, request)

    @router.post("/api/runs")
    async def start(request: Request) -> Response:
        if bad_host(request):
            return _error(421, "Invalid Host header")
        return await _start(service, request)

    @router.get("/api/runs")
    async def list_runs(request: Request) -> Response:
        env = (request.query_params.get("env") or "").strip()
        task = (request.query_params.get("task") or "").strip()
        if not env:
            return _error(400, "give env (and task) to list runs")
        me = _owner(service, request)
        runs = await _runs_of(service, env, task, me)
        return _json({"runs": [r.public(mine=bool(me) and r.owner == me) for r in runs]})

    @router.get("/api/runs/{run_id}")
    async def get_run(run_id: str, request: Request) -> Response:
        me = _owner(service, request)
        rec = service.get(run_id, me, events=True)
        if rec is None:
            return _error(404, "no such run")
        return _json(_with_events(rec, bool(me) and rec.owner == me))

    @router.get("/api/runs/{run_id}/events")
    async def events(run_id: str, request: Request) -> Response:
        me = _owner(service, request)
        rec = service.get(run_id, me)
        if rec is None:
            return _error(404, "no such run")
        try:
            after = int(
                request.headers.get("last-event-id") or request.query_params.get("after") or 0
            )
        except ValueError:
            after = 0
        after = max(0, after)
        return StreamingResponse(
            _stream(service, run_id, me, after, request),
            media_type="text/event-stream",
            headers=NO_STORE | {"X-Accel-Buffering": "no"},
        )

    @router.get("/api/compare")
    async def compare(request: Request) -> Response:
        ids = _ids(request.query_params.get("ids") or "")[:MAX_COMPARE]
        me = _owner(service, request)
        runs = service.for_ids(ids, me)
        return _json({"runs": [_with_events(r, bool(me) and r.owner == me) for r in runs]})

    return router


def _page(text: str, status: int = 200) -> Response:
    return Response(
        text, status_code=status, media_type="text/html; charset=utf-8", headers=NO_STORE
    )


def _pages(ctx: Context, service: RunService) -> APIRouter:
    """The run, runs and compare pages (``/r/{id}``, ``/runs``, ``/compare``)."""
    router = APIRouter()

    @router.get("/r/{run_id}", include_in_schema=False)
    async def run_page(run_id: str, request: Request) -> Response:
        me = _owner(service, request)
        rec = service.get(run_id, me, events=True)
        if rec is None:
            return ctx.page_error(404, "No such run (or not yours to see).")
        doc = ctx.docs.get(ctx.store.version, rec.env, rec.task)
        title = (doc or {}).get("title") or rec.task
        return _page(pages_runs.run_page(_with_events(rec, rec.owner == me), ctx.assets, title))

    @router.get("/runs", include_in_schema=False)
    async def runs_page(request: Request) -> Response:
        env = (request.query_params.get("env") or "").strip()
        task = (request.query_params.get("task") or "").strip() or None
        if not env or ctx.store.env(env) is None:
            return ctx.page_error(404, "No such environment.")
        me = _owner(service, request)
        runs = await _runs_of(service, env, task, me)
        items = [r.public(mine=bool(me) and r.owner == me) for r in runs]
        return _page(pages_runs.runs_page(items, ctx.assets, env=env, task=task))

    @router.get("/compare", include_in_schema=False)
    async def compare_page(request: Request) -> Response:
        ids = _ids(request.query_params.get("ids") or "")[:MAX_COMPARE]
        me = _owner(service, request)
        runs = [_with_events(r, r.owner == me) for r in service.for_ids(ids, me)]
        if len(runs) < 2:
            return ctx.page_error(404, "Compare needs two or more runs you may see (?ids=a,b).")
        return _page(pages_runs.compare_page(runs, ctx.assets))

    return router


def _sse(event: str, data: Any, seq: int | None = None) -> bytes:
    head = f"id: {seq}\n" if seq is not None else ""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"{head}event: {event}\ndata: {body}\n\n".encode()


async def _stream(
    service: RunService, run_id: str, owner: str, after: int, request: Request
) -> AsyncIterator[bytes]:
    """The run's events after ``after``: live while it runs, then from the store."""
    seq = after
    yield b"retry: 2000\n\n"
    while True:
        live = service.live(run_id)
        if live is None:  # ended (or the explorer restarted): the stored timeline
            rec = service.get(run_id, owner, events=True)
            for ev in (rec.events if rec else [])[seq:]:
                yield _sse("run", ev, ev["seq"])
            yield _sse("end", {"status": rec.status if rec else "unknown"})
            return
        batch, done = live.since(seq)
        for ev in batch:
            seq = ev["seq"]
            yield _sse("run", ev, seq)
        if done and not live.since(seq)[0]:
            yield _sse("end", {"status": live.record.status})
            return
        if not batch:
            if await request.is_disconnected():
                return
            await live.wait(seq, KEEPALIVE_S)
            if not live.since(seq)[0] and not live.done:
                yield b": keepalive\n\n"
