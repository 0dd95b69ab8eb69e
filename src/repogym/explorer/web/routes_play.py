"""Routes of the OpenEnv playground: the page ``/play/<env>`` and its JSON API
``/api/play/<env>/…``, for the environments of kind ``openenv`` the explorer catalogs.

======================  ===============================================================
``GET schema``          the server's action schema, one form per action kind, the Reset
                        form's fields (:mod:`.pages_play`)
``POST session``        open one WebSocket episode on the server → ``{"session": id}``
``POST reset``          ``{"task_id"?, "seed"?, "index"?}`` → observation, reward, done
``POST step``           ``{"action": {…}}`` → observation, reward, done
``GET state``           the episode's state
``DELETE session``      end the episode
======================  ===============================================================

The session id travels in the ``X-Play-Session`` header; a session belongs to the browser that
opened it (its ``rg_csrf`` cookie) and to one environment. The browser talks only to the
explorer, and the explorer only to the URL it cataloged for the environment (the env doc's
``source``), never to one a request names, through :class:`repogym.openenv_client.RemoteEpisode`
(no redirects followed, the server's own origin only).

Every request must name an allowed ``Host`` (the explorer's ``mcp_hosts``: DNS rebinding), and
every ``POST``/``DELETE`` passes :func:`.csrf.check_csrf` (JSON content type, same origin, the
double-submit token) before anything else happens. Sessions are capped (:data:`MAX_SESSIONS`
open at once, one per browser and environment: opening another ends the previous one) and ended
after :data:`IDLE_SECONDS` without a request. An orchestrator token is refused wherever it
appears in an action or reset (:func:`repogym.openenv_client.carries_token`), and the
explorer has none to forward. Errors are ``{"error": "one line"}`` with a 4xx/5xx status.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import Response

from repogym.explorer.web import pages_play
from repogym.explorer.web.context import Context
from repogym.explorer.web.csrf import (
    check_csrf,
    csrf_cookie_token,
    ensure_csrf_cookie,
    host_allowed,
)
from repogym.openenv_client import (
    RESET_SCHEMA,
    OpenEnvClientError,
    Origin,
    RemoteEpisode,
    carries_token,
    get_json,
    one_line,
    problem,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["IDLE_SECONDS", "MAX_SESSIONS", "PlayError", "PlayHub", "router"]

log = logging.getLogger("repogym.explorer.play")

MAX_SESSIONS = 16
"""Playground episodes open at once (over every environment and browser)."""
IDLE_SECONDS = 300.0
"""An episode without a request for this long is ended."""
SCHEMA_SECONDS = 60.0
"""How long a server's schema answer is reused."""
MAX_BODY_BYTES = 4_000_000 + 64 * 1024
"""Largest request body (an action may carry a file's content)."""
MAX_TASK_IDS = 500
SESSION_HEADER = "x-play-session"


class PlayError(Exception):
    """A refusal or failure answered as ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(one_line(message))
        self.status = status
        self.message = one_line(message)


def openenv_source(store: Any, env_id: str) -> str:
    """The URL the explorer cataloged for ``env_id``; :class:`PlayError` 404 when the id is not
    a cataloged OpenEnv server."""
    env = store.env(env_id)
    if env is None:
        raise PlayError(404, f"no environment {env_id[:200]!r}")
    source = env.get("source")
    if env.get("kind") != "openenv" or not isinstance(source, str) or not source:
        raise PlayError(404, f"environment {env_id[:200]!r} is not a cataloged OpenEnv server")
    return source


def _owner(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# -- the server's schema ------------------------------------------------------------------


def load_schema(url: str) -> dict[str, Any]:
    """What the page needs to draw its forms, read from the server at ``url`` (synchronous):
    ``GET /schema`` (required), ``/tools``, ``/tasks`` and ``/openapi.json`` (optional)."""
    origin = Origin.parse(url)

    def optional(path: str) -> Any:
        try:
            status, data = get_json(origin, path)
        except OpenEnvClientError:
            return None
        return data if status == 200 else None

    status, schemas = get_json(origin, "/schema")
    action = schemas.get("action") if isinstance(schemas, dict) else None
    if status != 200 or not isinstance(action, dict):
        raise OpenEnvClientError(
            f"{origin.http('/schema')}: HTTP {status}, no OpenEnv action schema"
        )
    listed = optional("/tools")
    kinds: dict[str, dict[str, Any]] = {}
    for entry in (listed.get("tools") if isinstance(listed, dict) else None) or []:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            kinds[entry["name"]] = {
                "parameters": entry.get("parameters") or entry.get("inputSchema"),
                "description": entry.get("description"),
            }
    tasks = optional("/tasks")
    task_ids: list[str] = []
    for entry in (tasks.get("tasks") if isinstance(tasks, dict) else None) or []:
        tid = entry.get("task_id") or entry.get("name") if isinstance(entry, dict) else entry
        if isinstance(tid, str | int) and not isinstance(tid, bool) and len(task_ids) < 500:
            task_ids.append(str(tid)[:200])
    openapi = optional("/openapi.json")
    reset_props: dict[str, Any] | None = None
    if isinstance(openapi, dict):
        found = ((openapi.get("components") or {}).get("schemas") or {}).get("ResetRequest")
        props = found.get("properties") if isinstance(found, dict) else None
        reset_props = props if isinstance(props, dict) else {}
    return {
        "action": action,
        "forms": pages_play.action_forms(action, kinds),
        "reset": pages_play.reset_fields(reset_props, task_ids[:MAX_TASK_IDS]),
    }


# -- sessions -----------------------------------------------------------------------------


@dataclass(eq=False)
class PlaySession:
    """One playground episode: a WebSocket on the server, owned by one browser."""

    sid: str
    env_id: str
    owner: str
    """sha256 of the browser's ``rg_csrf`` token."""
    episode: RemoteEpisode
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    last_used: float = field(default_factory=time.monotonic)
    busy: int = 0


class PlayHub:
    """The open playground episodes and the cached schemas, for one app."""

    def __init__(
        self, store: Any, *, max_sessions: int = MAX_SESSIONS, idle_seconds: float = IDLE_SECONDS
    ) -> None:
        self.store = store
        self.max_sessions = max_sessions
        self.idle_seconds = float(idle_seconds)
        self.sessions: dict[str, PlaySession] = {}
        self._schemas: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}

    # -- lifespan

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """End idle episodes while the app serves; end them all when it stops. (Without it,
        an idle episode is ended by the next request that meets it.)"""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._reaper)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
                with anyio.CancelScope(shield=True):
                    for session in list(self.sessions.values()):
                        await self.end(session)

    def lifespan(self, _app: Any) -> Any:
        """For ``FastAPI(lifespan=…)``."""
        return self.run()

    async def _reaper(self) -> None:
        while True:
            await anyio.sleep(min(max(self.idle_seconds / 4, 0.05), 5.0))
            await self.reap()

    async def reap(self) -> None:
        """End every episode idle for ``idle_seconds``."""
        now = time.monotonic()
        for session in list(self.sessions.values()):
            if not session.busy and now - session.last_used >= self.idle_seconds:
                await self.end(session)

    # -- schema

    async def schema(self, env_id: str, url: str) -> dict[str, Any]:
        """The server's forms (read at most every :data:`SCHEMA_SECONDS`)."""
        key = (env_id, url)
        hit = self._schemas.get(key)
        if hit is not None and time.monotonic() - hit[0] < SCHEMA_SECONDS:
            return hit[1]
        try:
            found = await anyio.to_thread.run_sync(partial(load_schema, url))
        except OpenEnvClientError as exc:
            raise PlayError(502, str(exc)) from None
        if len(self._schemas) > 256:
            self._schemas.clear()
        self._schemas[key] = (time.monotonic(), found)
        return found

    # -- episodes

    async def open(self, env_id: str, url: str, token: str) -> PlaySession:
        """A new episode on ``url`` for the browser holding ``token`` (its previous one on this
        environment is ended first)."""
        owner = _owner(token)
        for session in list(self.sessions.values()):
            if session.env_id == env_id and hmac.compare_digest(session.owner, owner):
                await self.end(session)
        await self.reap()
        if len(self.sessions) >= self.max_sessions:
            raise PlayError(
                503,
                f"capacity reached: {self.max_sessions} playground episodes are open; "
                "try again later",
            )
        try:
            episode = RemoteEpisode(Origin.parse(url))
        except OpenEnvClientError as exc:
            raise PlayError(502, str(exc)) from None
        session = PlaySession(secrets.token_urlsafe(24), env_id, owner, episode)
        self.sessions[session.sid] = session  # holds its place while the socket opens
        try:
            await episode.open()
        except OpenEnvClientError as exc:
            self.sessions.pop(session.sid, None)
            raise PlayError(502, str(exc)) from None
        except ImportError as exc:
            self.sessions.pop(session.sid, None)
            raise PlayError(501, f"the playground needs the websockets package ({exc})") from None
        except BaseException:
            self.sessions.pop(session.sid, None)
            with anyio.CancelScope(shield=True):
                await episode.close(polite=False)
            raise
        session.last_used = time.monotonic()
        return session

    async def find(self, sid: str | None, env_id: str, token: str | None) -> PlaySession:
        """The browser's open episode ``sid`` on ``env_id``; 404 otherwise (also once it was
        ended for idling)."""
        session = self.sessions.get(sid or "")
        if (
            session is None
            or token is None
            or session.env_id != env_id
            or not hmac.compare_digest(session.owner, _owner(token))
        ):
            raise PlayError(404, "no such playground episode (it may have ended): reset again")
        if not session.busy and time.monotonic() - session.last_used >= self.idle_seconds:
            await self.end(session)
            raise PlayError(
                404, f"the episode ended after {self.idle_seconds:g} s without a request"
            )
        return session

    async def send(self, session: PlaySession, message: dict[str, Any]) -> dict[str, Any]:
        """One message on the episode and its reply's data. A refusal by the server is 422; a
        lost episode is 502 and ends the session."""
        session.busy += 1
        try:
            async with session.lock:
                if self.sessions.get(session.sid) is not session:
                    raise PlayError(404, "the episode has ended: reset again")
                try:
                    return await session.episode.request(message)
                except OpenEnvClientError as exc:
                    if session.episode.is_open:
                        raise PlayError(422, str(exc)) from None
                    self.sessions.pop(session.sid, None)
                    raise PlayError(502, f"{exc} (the episode has ended)") from None
        finally:
            session.busy -= 1
            session.last_used = time.monotonic()

    async def end(self, session: PlaySession) -> None:
        """Close the episode (idempotent)."""
        self.sessions.pop(session.sid, None)
        await session.episode.close()


# -- request checks -----------------------------------------------------------------------


async def _json_body(request: Request) -> dict[str, Any]:
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
        raise PlayError(413, f"request body larger than {MAX_BODY_BYTES} bytes")
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY_BYTES:
            raise PlayError(413, f"request body larger than {MAX_BODY_BYTES} bytes")
    body = bytes(data)
    if not body.strip():
        return {}
    try:
        found = json.loads(body)
    except ValueError:
        raise PlayError(400, "the request body is not JSON") from None
    if not isinstance(found, dict):
        raise PlayError(400, "the request body must be a JSON object")
    return found


def _check_action(action: Any, schema: dict[str, Any]) -> None:
    """Refuse an action carrying an orchestrator token (403) or not fitting the server's
    action schema (400), before anything is sent."""
    if not isinstance(action, dict):
        raise PlayError(400, 'give the action as {"action": {...}}')
    if carries_token(action):
        raise PlayError(
            403,
            "the playground does not accept an orchestrator token: evaluate and solve are for "
            "the trainer",
        )
    issue = problem(action, schema["action"])
    if issue:
        raise PlayError(400, f"action: {issue}")
    for form in schema["forms"]:  # a kind's own fields (exec needs command, …)
        fixed = form["fixed"]
        if fixed and all(action.get(k) == v for k, v in fixed.items()):
            missing = [
                f["name"] for f in form["fields"] if f["required"] and f["name"] not in action
            ]
            if missing:
                raise PlayError(400, f"action ({form['kind']}): missing required {missing[0]!r}")


def _json(obj: Any, status: int = 200) -> Response:
    body = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)
    return Response(
        body,
        status_code=status,
        media_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


# -- routes -------------------------------------------------------------------------------


async def _answer(
    ctx: Context,
    hosts: list[str] | None,
    request: Request,
    env_id: str,
    act: Callable[[str], Awaitable[Response]],
    *,
    csrf: bool,
) -> Response:
    """``act(the environment's cataloged URL)`` once the request passed the ``Host`` check
    and (``csrf``) the CSRF check; a :class:`PlayError` or any failure as one JSON line."""
    try:
        if not host_allowed(request.headers.get("host", ""), hosts):
            raise PlayError(421, "Invalid Host header")
        if csrf and (reason := check_csrf(request)) is not None:
            raise PlayError(403, reason)
        return await act(openenv_source(ctx.store, env_id.strip("/")))
    except PlayError as exc:
        return ctx.api_error(exc.status, exc.message)
    except Exception as exc:  # noqa: BLE001 - one line for the page, the rest in the log
        log.exception("playground request failed")
        return ctx.api_error(500, f"internal error: {type(exc).__name__}")


def router(ctx: Context, hub: PlayHub, *, allowed_hosts: Sequence[str] | None) -> APIRouter:
    """The playground's page and API over ``hub``; requests must name one of
    ``allowed_hosts`` (None: any) in their ``Host`` header."""
    router = APIRouter()
    hosts = None if allowed_hosts is None else [h.lower() for h in allowed_hosts]
    script = ctx.static.urls["play.js"]

    answer = partial(_answer, ctx, hosts)

    async def session_of(request: Request, env_id: str) -> PlaySession:
        return await hub.find(
            request.headers.get(SESSION_HEADER), env_id.strip("/"), csrf_cookie_token(request)
        )

    @router.get("/play/{env_id:path}", include_in_schema=False)
    async def play_page(env_id: str, request: Request) -> Response:
        env_id = env_id.strip("/")
        env = ctx.store.env(env_id)
        if env is None or env.get("kind") != "openenv" or not env.get("source"):
            return ctx.page_error(404, f"No OpenEnv server {env_id!r} in this explorer.")
        text = pages_play.play_page(env, ctx.assets, script, hub.idle_seconds)
        response = Response(
            text, media_type="text/html; charset=utf-8", headers={"Cache-Control": "no-store"}
        )
        ensure_csrf_cookie(response, request)
        return response

    @router.get("/api/play/{env_id:path}/schema")
    async def schema(env_id: str, request: Request) -> Response:
        async def act(url: str) -> Response:
            return _json({"env": env_id.strip("/"), **await hub.schema(env_id.strip("/"), url)})

        return await answer(request, env_id, act, csrf=False)

    @router.post("/api/play/{env_id:path}/session")
    async def open_session(env_id: str, request: Request) -> Response:
        async def act(url: str) -> Response:
            await _json_body(request)
            token = csrf_cookie_token(request)
            assert token is not None  # check_csrf passed
            session = await hub.open(env_id.strip("/"), url, token)
            return _json({"session": session.sid, "idle_seconds": hub.idle_seconds}, 201)

        return await answer(request, env_id, act, csrf=True)

    @router.post("/api/play/{env_id:path}/reset")
    async def reset(env_id: str, request: Request) -> Response:
        async def act(url: str) -> Response:
            args = {k: v for k, v in (await _json_body(request)).items() if v not in (None, "")}
            if carries_token(args):
                raise PlayError(403, "the playground does not accept an orchestrator token")
            issue = problem(args, RESET_SCHEMA)
            if issue:
                raise PlayError(400, f"reset: {issue}")
            session = await session_of(request, env_id)
            return _json(await hub.send(session, {"type": "reset", "data": args}))

        return await answer(request, env_id, act, csrf=True)

    @router.post("/api/play/{env_id:path}/step")
    async def step(env_id: str, request: Request) -> Response:
        async def act(url: str) -> Response:
            action = (await _json_body(request)).get("action")
            _check_action(action, await hub.schema(env_id.strip("/"), url))
            session = await session_of(request, env_id)
            return _json(await hub.send(session, {"type": "step", "data": action}))

        return await answer(request, env_id, act, csrf=True)

    @router.get("/api/play/{env_id:path}/state")
    async def state(env_id: str, request: Request) -> Response:
        async def act(url: str) -> Response:
            session = await session_of(request, env_id)
            return _json(await hub.send(session, {"type": "state"}))

        return await answer(request, env_id, act, csrf=False)

    @router.delete("/api/play/{env_id:path}/session")
    async def end_session(env_id: str, request: Request) -> Response:
        async def act(url: str) -> Response:
            session = await session_of(request, env_id)
            await hub.end(session)
            return _json({"ended": True})

        return await answer(request, env_id, act, csrf=True)

    return router
