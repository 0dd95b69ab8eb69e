"""An MCP bridge to an OpenEnv server: ``repogym mcp --openenv URL``.

The bridge is an MCP server (the official ``mcp`` SDK) whose tools drive an OpenEnv server:

- ``reset`` (``task_id`` | ``index`` | ``seed``): start an episode (OpenEnv's ``reset`` message);
- ``step``: send one action; its input schema **is** the server's action schema (``GET /schema``
  → ``action``) and the action goes through as given;
- ``state``: the episode's state;
- ``list_tasks`` / ``get_task`` (``index`` | ``task_id``): the server's Task API (``GET /tasks``,
  ``GET /tasks/{index}``), when it has one;
- ``env_<name>``: the server's own tools: its MCP tools (``tools/list`` over ``POST /mcp``,
  called with ``{"type": "mcp"}`` messages on the episode's socket) or, for a server that lists
  its agent actions at ``GET /tools`` (repogym's), those actions (``env_exec`` sends the step
  ``{"type": "exec", …}``).

Each MCP session has its own episode: one WebSocket to ``{url}/ws``, opened by the first
``reset``/``step`` (or ``env_…`` call) and closed when the MCP session ends or after
``idle_timeout_s`` without a tool call. Over stdio the MCP session is the process; over
Streamable HTTP it is the ``Mcp-Session-Id`` (a request without one gets the Task API only).

Safety: only the server's own origin (scheme, host, port of ``url``) is ever contacted and no
redirect is followed (:mod:`repogym.openenv_client`); at most ``max_sessions`` episodes are
open at once (one more gets the tool error "capacity reached"); each session may make
``max_calls_per_minute`` tool calls; arguments are checked against the tools' schemas first
(:func:`repogym.openenv_client.problem`; the values are the server's to judge); an orchestrator
token is refused wherever it appears and the bridge has none to forward, so ``evaluate`` and
``solve`` reach the server without one, and the server refuses them.
Every failure is a tool result with ``isError`` and one line; nothing raises into the SDK.
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from repogym.mcp import INSTALL_HINT
from repogym.openenv_client import (
    RESET_SCHEMA,
    OpenEnvClientError,
    RemoteEpisode,
    carries_token,
    get_json,
    one_line,
    problem,
    task_path,
)
from repogym.openenv_client.server_info import ENV_PREFIX, EnvTool, ServerInfo

if TYPE_CHECKING:
    import anyio
    import mcp.types as types
    from mcp.server import Server, ServerRequestContext
    from starlette.applications import Starlette
    from starlette.types import ASGIApp, Message, Receive, Send
    from starlette.types import Scope as AsgiScope

__all__ = ["BridgeError", "ServerInfo", "create_bridge", "run_stdio", "streamable_http_app"]

log = logging.getLogger("repogym.mcp.bridge")

BridgeError = OpenEnvClientError
"""The bridge's tool errors are the client's: one line each."""

SERVER_NAME = "repogym-openenv-bridge"
RATE_WINDOW_S = 60.0

_EMPTY: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
GET_TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "index": {"type": "integer", "minimum": 0, "description": "Task index (list_tasks)."},
        "task_id": {"type": "string", "description": "Task id or name."},
    },
    "additionalProperties": False,
}


def _require_mcp() -> None:
    try:
        import mcp.server  # noqa: F401
    except ImportError as exc:
        raise BridgeError(f"{INSTALL_HINT} ({exc})") from None


# -- sessions ----------------------------------------------------------------------------


@dataclass(eq=False)
class _Session:
    """One MCP session: its episode, its rate-limit window, when it was last used."""

    key: str | None
    episode: RemoteEpisode | None = None
    lock: anyio.Lock | None = None
    last_used: float = field(default_factory=time.monotonic)
    calls: deque[float] = field(default_factory=deque)
    busy: int = 0
    note: str | None = None
    """Why the episode was closed, for the next call that needs it."""

    def guard(self) -> anyio.Lock:
        import anyio

        if self.lock is None:
            self.lock = anyio.Lock()
        return self.lock


@dataclass(eq=False)
class _Scope:
    """One lifespan of the MCP server: a connection (stdio, memory: one session) or, ``shared``,
    a Streamable HTTP app (sessions by ``Mcp-Session-Id``)."""

    shared: bool
    sessions: dict[str | None, _Session] = field(default_factory=dict)


def _http_session_id(request: Any) -> str | None:
    headers = getattr(request, "headers", None)
    if headers is None:
        return None
    value = headers.get("mcp-session-id")
    return str(value)[:200] if value else None


# -- the bridge --------------------------------------------------------------------------


class Bridge:
    """The tools, the sessions and their limits (one per MCP server the bridge makes)."""

    def __init__(
        self,
        info: ServerInfo,
        *,
        max_sessions: int,
        max_calls_per_minute: int,
        idle_timeout_s: float,
        shared: bool,
    ) -> None:
        if max_sessions < 1 or max_calls_per_minute < 1 or not idle_timeout_s > 0:
            raise BridgeError(
                "max_sessions and max_calls_per_minute must be at least 1, idle_timeout_s positive"
            )
        self.info = info
        self.max_sessions = max_sessions
        self.max_calls_per_minute = max_calls_per_minute
        self.idle_timeout_s = float(idle_timeout_s)
        self.shared = shared
        self.holders: set[_Session] = set()
        """Sessions with an open (or opening) episode: the ones ``max_sessions`` counts."""
        self.http_scope: _Scope | None = None
        """The Streamable HTTP app's scope while it runs (``shared``)."""
        self.schemas: dict[str, dict[str, Any]] = {
            "reset": RESET_SCHEMA,
            "step": info.action_schema,
            "state": _EMPTY,
        }
        if info.task_api:
            self.schemas |= {"list_tasks": _EMPTY, "get_task": GET_TASK_SCHEMA}
        self.env_tools = {t.name: t for t in info.env_tools if t.name not in self.schemas}
        self.schemas |= {name: t.input_schema for name, t in self.env_tools.items()}

    # -- MCP handlers ----------------------------------------------------------------

    def tools(self) -> list[types.Tool]:
        """The tool list (the same for every session)."""
        import mcp.types as types

        base = self.info.origin.base
        about = {
            "reset": f"Start an episode on the OpenEnv server at {base} (a fresh one each time; "
            "pick the task by task_id, index or seed; see list_tasks). Returns the first "
            "observation.",
            "step": "Send one action to this session's episode (the server's action schema); "
            "returns the observation, reward and done.",
            "state": "The episode's state (episode id, step count, …).",
            "list_tasks": "The tasks the server offers (its Task API).",
            "get_task": "One task with its instruction, by index or task_id.",
        }
        read_only = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
        listed = [
            types.Tool(
                name=name,
                description=about[name],
                input_schema=self.schemas[name],
                annotations=read_only if name in ("state", "list_tasks", "get_task") else None,
            )
            for name in about
            if name in self.schemas
        ]
        listed += [
            types.Tool(name=t.name, description=t.description, input_schema=t.input_schema)
            for t in self.env_tools.values()
        ]
        return listed

    async def on_list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        import mcp.types as types

        return types.ListToolsResult(tools=self.tools())

    async def on_call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """Every outcome is a result: a failure is ``isError`` with one line."""
        try:
            session = self._session(ctx)
            self._admit(session)
            session.busy += 1
            session.last_used = time.monotonic()
            try:
                return await self._call(session, params.name, dict(params.arguments or {}))
            finally:
                session.busy -= 1
                session.last_used = time.monotonic()
        except BridgeError as exc:
            return _error(str(exc))
        except Exception as exc:  # noqa: BLE001 - a tool call never crashes the server
            log.exception("bridge tool %s failed", params.name)
            return _error(f"internal error in the bridge: {type(exc).__name__}: {exc}")

    @asynccontextmanager
    async def lifespan(self, _server: Any) -> AsyncIterator[_Scope]:
        """One scope per MCP connection (stdio, memory) or per HTTP app (``shared``): an idle
        reaper while it lives, every episode of it closed when it ends."""
        import anyio

        scope = _Scope(self.shared)
        if self.shared:
            self.http_scope = scope
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._reap, scope)
            try:
                yield scope
            finally:
                tg.cancel_scope.cancel()
                if self.http_scope is scope:
                    self.http_scope = None
                with anyio.CancelScope(shield=True):
                    for session in list(scope.sessions.values()):
                        await self._close(session, "the MCP session ended")
                    scope.sessions.clear()

    # -- sessions --------------------------------------------------------------------

    def _session(self, ctx: ServerRequestContext[Any]) -> _Session:
        scope = ctx.lifespan_context
        if not isinstance(scope, _Scope):
            raise BridgeError("bridge misconfigured: the server was not made by create_bridge")
        key = _http_session_id(ctx.request) if scope.shared else ""
        session = scope.sessions.get(key)
        if session is None:
            session = scope.sessions[key] = _Session(key)
        return session

    async def end_http_session(self, key: str) -> None:
        """The Streamable HTTP session ``key`` was ended by its client: close its episode."""
        scope = self.http_scope
        session = scope.sessions.pop(key, None) if scope is not None else None
        if session is not None:
            await self._close(session, "the MCP session ended")

    def _admit(self, session: _Session) -> None:
        now = time.monotonic()
        window = session.calls
        while window and now - window[0] >= RATE_WINDOW_S:
            window.popleft()
        if len(window) >= self.max_calls_per_minute:
            wait = RATE_WINDOW_S - (now - window[0])
            raise BridgeError(
                f"rate limit: at most {self.max_calls_per_minute} tool calls a minute per "
                f"session; try again in {max(wait, 1):.0f} s"
            )
        window.append(now)

    async def _reap(self, scope: _Scope) -> None:
        import anyio

        interval = min(max(self.idle_timeout_s / 4, 0.05), 5.0)
        while True:
            await anyio.sleep(interval)
            now = time.monotonic()
            for key, session in list(scope.sessions.items()):
                if session.busy or now - session.last_used < self.idle_timeout_s:
                    continue
                await self._close(
                    session,
                    f"the episode was closed after {self.idle_timeout_s:g} s without a tool "
                    "call: call reset to start a new one",
                )
                if scope.shared and not session.busy:
                    scope.sessions.pop(key, None)

    async def _close(self, session: _Session, note: str) -> None:
        episode = session.episode
        if episode is not None and episode.is_open:
            async with session.guard():
                if session.episode is episode and episode.is_open:
                    await episode.close()
                    session.note = note
        self.holders.discard(session)

    async def _exchange(self, session: _Session, message: dict[str, Any], *, start: bool) -> Any:
        """Send ``message`` on the session's episode, opened first when ``start`` (after an
        episode was closed under the session, only by ``reset``)."""
        if session.key is None:
            raise BridgeError(
                "this request has no MCP session (Mcp-Session-Id): episodes need one; "
                "list_tasks and get_task work without"
            )
        async with session.guard():
            try:
                if session.episode is None or not session.episode.is_open:
                    if not start or (session.note and message.get("type") != "reset"):
                        raise BridgeError(session.note or "no episode: call reset first")
                    await self._open(session)
                assert session.episode is not None
                if message.get("type") == "mcp":
                    return await session.episode.mcp(message["method"], message["params"])
                return await session.episode.request(message)
            finally:
                episode = session.episode
                if episode is None or not episode.is_open:
                    self.holders.discard(session)
                if episode is not None and not episode.is_open and episode.used:
                    session.note = session.note or (
                        "the OpenEnv server ended the episode: call reset to start a new one"
                    )

    async def _open(self, session: _Session) -> None:
        if session not in self.holders and len(self.holders) >= self.max_sessions:
            raise BridgeError(
                f"capacity reached: {self.max_sessions} sessions already have an episode open "
                "through this bridge; try again later"
            )
        self.holders.add(session)
        episode = RemoteEpisode(self.info.origin)
        await episode.open()
        session.episode = episode
        session.note = None

    # -- tools -----------------------------------------------------------------------

    async def _call(
        self, session: _Session, name: str, args: dict[str, Any]
    ) -> types.CallToolResult:
        schema = self.schemas.get(name)
        if schema is None:
            raise BridgeError(f"unknown tool {name!r}; see the tool list")
        issue = problem(args, schema)
        if issue:
            raise BridgeError(f"{name}: {issue}")
        if carries_token(args):
            raise BridgeError(
                "the bridge does not accept an orchestrator token: evaluate and solve are for "
                "the trainer, not for agents"
            )
        if name == "step":
            self._check_kind(args)
        if name in ("reset", "step"):
            message = {"type": name, "data": args}
            return _result(await self._exchange(session, message, start=True))
        if name == "state":
            return _result(await self._exchange(session, {"type": "state"}, start=False))
        if name == "list_tasks":
            return _result(await self._get("/tasks"))
        if name == "get_task":
            return _result(await self._task(args))
        return await self._env_tool(session, self.env_tools[name], args)

    def _check_kind(self, action: dict[str, Any]) -> None:
        """A step whose ``type`` is one of the actions the server lists at ``/tools`` is also
        checked against that action's own fields (``exec`` needs ``command`` …)."""
        tool = self.env_tools.get(ENV_PREFIX + str(action.get("type")))
        if tool is None or tool.via != "action":
            return
        fields = {k: v for k, v in action.items() if k not in ("type", "metadata")}
        issue = problem(fields, tool.input_schema)
        if issue:
            raise BridgeError(f"step ({tool.remote}): {issue}")

    async def _env_tool(
        self, session: _Session, tool: EnvTool, args: dict[str, Any]
    ) -> types.CallToolResult:
        if tool.via == "action":
            action = {"type": tool.remote, **args}
            issue = problem(action, self.info.action_schema)
            if issue:
                raise BridgeError(f"{tool.name}: {issue}")
            return _result(
                await self._exchange(session, {"type": "step", "data": action}, start=True)
            )
        message = {
            "type": "mcp",
            "method": "tools/call",
            "params": {"name": tool.remote, "arguments": args},
        }
        return _mcp_result(await self._exchange(session, message, start=True))

    async def _get(self, path: str) -> Any:
        import anyio

        status, data = await anyio.to_thread.run_sync(partial(get_json, self.info.origin, path))
        if status != 200:
            detail = data.get("detail") if isinstance(data, dict) else None
            tail = f": {one_line(str(detail), 300)}" if detail else ""
            raise BridgeError(f"GET {path}: HTTP {status}{tail}")
        return data

    async def _task(self, args: dict[str, Any]) -> Any:
        index, task_id = args.get("index"), args.get("task_id")
        if (index is None) == (task_id is None):
            raise BridgeError("get_task: give index or task_id (one of them)")
        if index is None:
            listed = await self._get("/tasks")
            tasks = listed.get("tasks") if isinstance(listed, dict) else None
            for entry in tasks if isinstance(tasks, list) else []:
                if isinstance(entry, dict) and task_id in (entry.get("task_id"), entry.get("name")):
                    index = entry.get("index")
                    break
            if not isinstance(index, int) or isinstance(index, bool):
                raise BridgeError(f"get_task: no task {task_id!r} on the server (see list_tasks)")
        return await self._get(task_path(int(index)))


# -- results -----------------------------------------------------------------------------


def _result(data: Any) -> types.CallToolResult:
    import mcp.types as types

    structured = data if isinstance(data, dict) else {"result": data}
    text = json.dumps(structured, ensure_ascii=False, default=str)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured
    )


def _error(message: str) -> types.CallToolResult:
    import mcp.types as types

    return types.CallToolResult(
        content=[types.TextContent(type="text", text=one_line(message))], is_error=True
    )


def _mcp_result(result: Any) -> types.CallToolResult:
    """The server's own MCP tool result, content blocks kept when they are text."""
    import mcp.types as types

    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        return _result(result)
    blocks: list[types.ContentBlock] = []
    for block in result["content"]:
        if isinstance(block, dict) and block.get("type") == "text" and "text" in block:
            blocks.append(types.TextContent(type="text", text=str(block["text"])))
        else:
            blocks.append(types.TextContent(type="text", text=json.dumps(block, default=str)))
    structured = result.get("structuredContent", result.get("structured_content"))
    return types.CallToolResult(
        content=blocks,
        structured_content=structured if isinstance(structured, dict) else None,
        is_error=bool(result.get("isError") or result.get("is_error")),
    )


# -- entry points ------------------------------------------------------------------------


def _build(
    url: str,
    *,
    max_sessions: int,
    max_calls_per_minute: int,
    idle_timeout_s: float,
    shared: bool,
) -> tuple[Server[Any], Bridge]:
    _require_mcp()
    from mcp.server import Server

    from repogym import __version__

    info = ServerInfo.load(url)
    bridge = Bridge(
        info,
        max_sessions=max_sessions,
        max_calls_per_minute=max_calls_per_minute,
        idle_timeout_s=idle_timeout_s,
        shared=shared,
    )
    about = f" ({info.description})" if info.description else ""
    instructions = (
        f"Tools for the OpenEnv environment at {info.origin.base}{about}. reset starts an "
        "episode (one per MCP session), step sends one action of the server's action schema, "
        "state shows the episode"
        + ("; list_tasks and get_task read the task list" if info.task_api else "")
        + (
            f"; env_* are the server's own tools ({len(bridge.env_tools)})"
            if bridge.env_tools
            else ""
        )
        + "."
    )
    server: Server[Any] = Server(
        SERVER_NAME,
        version=__version__,
        instructions=instructions,
        lifespan=bridge.lifespan,
        get_tool_input_schema=bridge.schemas.get,
        on_list_tools=bridge.on_list_tools,
        on_call_tool=bridge.on_call_tool,
    )
    return server, bridge


def create_bridge(
    url: str,
    *,
    max_sessions: int = 8,
    max_calls_per_minute: int = 120,
    idle_timeout_s: float = 600,
) -> Server[Any]:
    """An MCP server (``mcp.server.Server``) bridging the OpenEnv server at ``url``.

    Reads the server's schema and tools once, now (synchronous HTTP; :class:`BridgeError`, a
    :class:`~repogym.errors.RepogymError`, when it cannot, or when ``mcp`` is not installed).
    Serve it with ``server.run(read, write, server.create_initialization_options())`` on any
    transport; each connection is one MCP session with its own episode.
    """
    server, _ = _build(
        url,
        max_sessions=max_sessions,
        max_calls_per_minute=max_calls_per_minute,
        idle_timeout_s=idle_timeout_s,
        shared=False,
    )
    return server


def run_stdio(url: str, **kw: Any) -> None:
    """Serve the bridge to ``url`` over stdin/stdout until the client closes it (keywords as
    :func:`create_bridge`)."""
    server = create_bridge(url, **kw)

    async def serve() -> None:
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    import anyio

    anyio.run(serve)


def streamable_http_app(
    url: str,
    *,
    path: str = "/mcp",
    host: str = "127.0.0.1",
    max_sessions: int = 8,
    max_calls_per_minute: int = 120,
    idle_timeout_s: float = 600,
) -> Starlette:
    """The bridge as a Streamable HTTP ASGI app (a Starlette app serving ``path``).

    Sessions are the SDK's stateful HTTP sessions (``Mcp-Session-Id``); one episode each, closed
    when the client ends its session (``DELETE``) or after ``idle_timeout_s`` without a tool call
    (the SDK ends an idle MCP session after the same time). ``host`` is where the app will
    listen: for a loopback host the SDK turns on its DNS rebinding protection. The app's
    lifespan runs the SDK's session manager: when mounting it inside another app (the
    explorer), enter ``app.router.lifespan_context(app)`` from the outer app's lifespan, since
    Starlette does not run a mounted app's lifespan. It has no authentication of its own.
    """
    server, bridge = _build(
        url,
        max_sessions=max_sessions,
        max_calls_per_minute=max_calls_per_minute,
        idle_timeout_s=idle_timeout_s,
        shared=True,
    )
    app = server.streamable_http_app(
        streamable_http_path=path, session_idle_timeout=idle_timeout_s, host=host
    )
    app.add_middleware(_EndOnDelete, bridge=bridge)
    return app


class _EndOnDelete:
    """ASGI middleware: a client that ends its Streamable HTTP session (``DELETE`` with its
    ``Mcp-Session-Id``, answered 2xx) has its episode closed at once, not after the idle time."""

    def __init__(self, app: ASGIApp, bridge: Bridge) -> None:
        self.app = app
        self.bridge = bridge

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") != "DELETE":
            await self.app(scope, receive, send)
            return
        status = 0

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        await self.app(scope, receive, watch)
        key = dict(scope.get("headers") or []).get(b"mcp-session-id")
        if key and 200 <= status < 300:
            await self.bridge.end_http_session(key.decode("latin-1")[:200])
