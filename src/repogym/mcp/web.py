"""Streamable HTTP endpoints of the explorer app: ``/mcp/d/<env>``, one MCP server per
environment the explorer serves (the tools of :mod:`repogym.mcp.environment`), and
``/mcp/o/<env>``, the MCP bridge (:mod:`repogym.mcp.bridge`) to each live OpenEnv server the
explorer catalogs.

:class:`McpEndpoints` is a plain ASGI app mounted at ``/mcp/d`` by the explorer's
``create_app``, :class:`BridgeEndpoints` its sibling at ``/mcp/o``; their ``run`` belongs in the
app's lifespan. Each environment gets the SDK's ``StreamableHTTPSessionManager`` when it is first
asked for (at most :data:`MAX_ENVS` at once, least recently used ones closed first), so an
explorer of thousands of environments costs nothing until an agent connects. The SDK itself is
imported then, off the event loop: ``import repogym.mcp.web`` needs only anyio.

A bridge talks only to the URL the explorer cataloged for that environment id (the env doc's
``source``, for an environment of kind ``openenv``), never to one a request names; it is built
(the server's schema and tools read, off the event loop) on first use, with the bridge's own
caps: sessions, calls a minute, idle end.

Requests are checked before the SDK sees them, and again by the SDK's own transport security:
the ``Host`` header must name this server (loopback names, or the address it listens on; any
host when it listens on every interface), and a request carrying an ``Origin`` must come from
the same origin (or an allowed host): a cross-site page in a browser cannot use an endpoint.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, MutableMapping, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import anyio

from repogym.explorer.web.http import LOOPBACK_HOSTS, allowed_hosts_for, send_json

__all__ = [
    "BRIDGE_PREFIX",
    "LOOPBACK_HOSTS",
    "MAX_ENVS",
    "PREFIX",
    "BridgeEndpoints",
    "McpEndpoints",
    "allowed_hosts_for",
    "explorer_mounts",
    "refusal",
]

log = logging.getLogger("repogym.mcp")

PREFIX = "/mcp/d"
"""Where the endpoints are mounted: ``/mcp/d/<env>``."""
MAX_ENVS = 256
"""Environments with a running session manager at once."""
MAX_SESSIONS = 256
"""Open MCP sessions per environment (more are answered 503 until some end)."""
SESSION_IDLE_SECONDS = 600.0
"""A session with no request for this long is closed (its id then answers 404)."""
MAX_BODY_BYTES = 1024 * 1024
"""Largest request body (the tools' arguments are small)."""
BRIDGE_PREFIX = "/mcp/o"
"""Where the bridges are mounted: ``/mcp/o/<env>``."""
MAX_BRIDGES = 64
"""OpenEnv bridges running at once (least recently used ones closed first)."""
BRIDGE_MAX_SESSIONS = 8
"""Episodes open at once through one bridge (the bridge's own cap)."""
BRIDGE_CALLS_PER_MINUTE = 120
"""Tool calls a minute per MCP session of a bridge."""
BRIDGE_BODY_BYTES = 4_000_000 + 64 * 1024
"""Largest request body of a bridge (an action may carry a file's content)."""


def _host_ok(host: str, names: Sequence[str]) -> bool:
    """``host`` (a Host header: name, optionally ``:port``) is one of ``names``."""
    host = host.strip().lower()
    for name in names:
        if host == name or (host.startswith(name + ":") and host[len(name) + 1 :].isdigit()):
            return True
    return False


def refusal(
    headers: Mapping[str, str], allowed_hosts: Sequence[str] | None
) -> tuple[int, str] | None:
    """(status, reason) for a request from the wrong host or another site; None: fine.

    ``headers`` has lower-case names; ``allowed_hosts`` None accepts any ``Host``."""
    host = headers.get("host", "")
    if allowed_hosts is not None and not _host_ok(host, allowed_hosts):
        return 421, "Invalid Host header"
    origin = headers.get("origin")
    if origin is None:
        return None
    parts = urlsplit(origin.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return 403, "Invalid Origin header: cross-site requests are refused"
    if parts.netloc.lower() == host.strip().lower():
        return None  # the same origin as the request
    if allowed_hosts is not None and _host_ok(parts.netloc, allowed_hosts):
        return None  # e.g. a local tool on another loopback port
    return 403, "Invalid Origin header: cross-site requests are refused"


def _security(allowed_hosts: Sequence[str] | None) -> Any:
    """The SDK's own transport security for ``allowed_hosts`` (the same rule as
    :func:`refusal`, checked again inside the SDK)."""
    from mcp.server.transport_security import TransportSecuritySettings

    if allowed_hosts is None:  # any host: the Origin check of refusal() still applies
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts = [p for h in allowed_hosts for p in (h, f"{h}:*")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"{s}://{h}" for h in hosts for s in ("http", "https")],
    )


class _Hosted:
    """What both endpoint apps share: the lifespan task group their session managers run in,
    the lazily imported SDK, the request checks."""

    def __init__(self, allowed_hosts: Sequence[str] | None) -> None:
        self.allowed_hosts = None if allowed_hosts is None else [h.lower() for h in allowed_hosts]
        self._tg: Any = None
        self._sdk_error: str | None = None
        self._sdk_loaded = False

    # -- lifespan

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Keep the session managers' tasks while the app serves; close them all at the end."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield
            finally:
                self._tg = None
                self._forget()
                tg.cancel_scope.cancel()

    def lifespan(self, _app: Any) -> Any:
        """For ``FastAPI(lifespan=…)``."""
        return self.run()

    def _forget(self) -> None:
        """Drop the running managers (their tasks are being cancelled)."""

    def refusal(self, headers: dict[str, str]) -> tuple[int, str] | None:
        """(status, reason) for a request from the wrong host or another site; None: fine."""
        return refusal(headers, self.allowed_hosts)

    async def _precheck(
        self, scope: MutableMapping[str, Any], send: Any, prefix: str, what: str
    ) -> str | None:
        """The environment id of an acceptable request, or None once a refusal was sent."""
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            return None
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refused = self.refusal(headers)
        if refused is not None:
            await _reply(send, *refused)
            return None
        env_id = _env_of(scope, prefix)
        if not env_id:
            await _reply(send, 404, f"name {what}: {prefix}/<env>")
            return None
        if self._tg is None:
            await _reply(send, 503, "MCP endpoints not started (the app's lifespan did not run)")
            return None
        if not await self._load_sdk():
            await _reply(send, 501, self._sdk_error or "MCP is not available")
            return None
        return env_id

    async def _load_sdk(self) -> bool:
        if not self._sdk_loaded and self._sdk_error is None:
            try:
                await anyio.to_thread.run_sync(_import_sdk)
                self._sdk_loaded = True
            except ImportError:
                from repogym.mcp import INSTALL_HINT

                self._sdk_error = INSTALL_HINT
        return self._sdk_loaded


class McpEndpoints(_Hosted):
    """ASGI app answering ``<mount>/<env>`` with that environment's MCP server."""

    def __init__(
        self,
        store: Any,
        *,
        allowed_hosts: Sequence[str] | None = LOOPBACK_HOSTS,
        max_envs: int = MAX_ENVS,
        max_sessions: int = MAX_SESSIONS,
        idle_seconds: float = SESSION_IDLE_SECONDS,
    ) -> None:
        super().__init__(allowed_hosts)
        self.store = store
        self.max_envs = max_envs
        self.max_sessions = max_sessions
        self.idle_seconds = idle_seconds
        self._lock = anyio.Lock()
        self._managers: OrderedDict[str, tuple[Any, anyio.CancelScope]] = OrderedDict()

    def _forget(self) -> None:
        self._managers.clear()

    # -- requests

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        env_id = await self._precheck(scope, send, PREFIX, "an environment")
        if env_id is None:
            return
        if self.store.env(env_id) is None:
            await _reply(send, 404, f"no environment {env_id[:200]!r}")
            return
        manager = await self._manager(env_id)
        await manager.handle_request(scope, receive, send)

    # -- the managers

    def _security(self) -> Any:
        return _security(self.allowed_hosts)

    async def _manager(self, env_id: str) -> Any:
        """The running session manager of ``env_id`` (started on first use)."""
        entry = self._managers.get(env_id)
        if entry is not None:
            self._managers.move_to_end(env_id)
            return entry[0]
        async with self._lock:
            entry = self._managers.get(env_id)
            if entry is not None:
                return entry[0]
            from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

            from repogym.mcp.environment import EnvironmentCatalog, build_server

            manager = StreamableHTTPSessionManager(
                app=build_server(EnvironmentCatalog(self.store, env_id)),
                security_settings=self._security(),
                session_idle_timeout=self.idle_seconds,
                max_sessions=self.max_sessions,
                max_request_body_size=MAX_BODY_BYTES,
            )
            cancel = await self._tg.start(_host, manager)
            self._managers[env_id] = (manager, cancel)
            while len(self._managers) > self.max_envs:
                _old, (_manager, old_cancel) = self._managers.popitem(last=False)
                old_cancel.cancel()
            return manager


class BridgeEndpoints(_Hosted):
    """ASGI app answering ``<mount>/<env>`` with the MCP bridge to the OpenEnv server the
    explorer cataloged as ``env`` (kind ``openenv``; its env doc's ``source`` is the server's
    URL). One bridge per environment, built on first use: the server's schema and tools are
    read then, and again when the cataloged URL changes."""

    def __init__(
        self,
        store: Any,
        *,
        allowed_hosts: Sequence[str] | None = LOOPBACK_HOSTS,
        max_bridges: int = MAX_BRIDGES,
        max_sessions: int = BRIDGE_MAX_SESSIONS,
        max_calls_per_minute: int = BRIDGE_CALLS_PER_MINUTE,
        idle_seconds: float = SESSION_IDLE_SECONDS,
    ) -> None:
        super().__init__(allowed_hosts)
        self.store = store
        self.max_bridges = max_bridges
        self.max_sessions = max_sessions
        self.max_calls_per_minute = max_calls_per_minute
        self.idle_seconds = idle_seconds
        self._locks: dict[tuple[str, str], anyio.Lock] = {}
        self._bridges: OrderedDict[tuple[str, str], tuple[Any, anyio.CancelScope]] = OrderedDict()

    def _forget(self) -> None:
        self._bridges.clear()
        self._locks.clear()

    def target(self, env_id: str) -> tuple[str | None, str]:
        """The cataloged server URL of ``env_id``, or None and why there is none."""
        env = self.store.env(env_id)
        shown = repr(env_id[:200])
        if env is None:
            return None, f"no environment {shown}"
        source = env.get("source")
        if env.get("kind") != "openenv" or not isinstance(source, str) or not source:
            return None, (
                f"environment {shown} is not a cataloged OpenEnv server "
                f"(kind {str(env.get('kind'))[:40]!r}); its MCP endpoint is {PREFIX}/<env>"
            )
        return source, ""

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        env_id = await self._precheck(scope, send, BRIDGE_PREFIX, "an OpenEnv environment")
        if env_id is None:
            return
        url, why = self.target(env_id)
        if url is None:
            await _reply(send, 404, why)
            return
        from repogym.openenv_client import OpenEnvClientError as BridgeError
        from repogym.openenv_client import one_line

        try:
            handler = await self._bridge(env_id, url)
        except BridgeError as exc:
            await _reply(send, 502, one_line(str(exc)))
            return
        await handler(scope, receive, send)

    async def _bridge(self, env_id: str, url: str) -> Any:
        """The request handler of the running bridge to ``url`` (built on first use)."""
        key = (env_id, url)
        entry = self._bridges.get(key)
        if entry is not None:
            self._bridges.move_to_end(key)
            return entry[0]
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:  # one build per server; other environments are not held up
            entry = self._bridges.get(key)
            if entry is not None:
                return entry[0]
            manager, handler = await anyio.to_thread.run_sync(self._build, url)
            if self._tg is None:
                from repogym.openenv_client import OpenEnvClientError as BridgeError

                raise BridgeError("the explorer is shutting down")
            cancel = await self._tg.start(_host, manager)
            for old in [k for k in self._bridges if k[0] == env_id]:  # the URL changed
                self._bridges.pop(old)[1].cancel()
            self._bridges[key] = (handler, cancel)
            while len(self._bridges) > self.max_bridges:
                _old, (_handler, old_cancel) = self._bridges.popitem(last=False)
                old_cancel.cancel()
        self._locks.pop(key, None)
        return handler

    def _build(self, url: str) -> tuple[Any, Any]:
        """A session manager serving the bridge to ``url``, and the handler for its requests
        (synchronous: reads the server's schema and tools)."""
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        from repogym.mcp.bridge import _build, _EndOnDelete

        server, bridge = _build(
            url,
            max_sessions=self.max_sessions,
            max_calls_per_minute=self.max_calls_per_minute,
            idle_timeout_s=self.idle_seconds,
            shared=True,
        )
        manager = StreamableHTTPSessionManager(
            app=server,
            security_settings=_security(self.allowed_hosts),
            session_idle_timeout=self.idle_seconds,
            max_sessions=MAX_SESSIONS,  # MCP sessions; the bridge caps their episodes
            max_request_body_size=BRIDGE_BODY_BYTES,
        )
        return manager, _EndOnDelete(manager.handle_request, bridge)


async def _host(manager: Any, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
    """Run one session manager until its cancel scope (handed to the starter) is cancelled."""
    with anyio.CancelScope() as cancel:
        try:
            async with manager.run():
                task_status.started(cancel)
                await anyio.sleep_forever()
        except Exception as exc:  # never take the app's lifespan down with one environment
            log.warning("MCP session manager stopped: %s", exc)


def _import_sdk() -> None:
    import mcp.server.lowlevel  # noqa: F401
    import mcp.server.streamable_http_manager  # noqa: F401
    import mcp.server.transport_security  # noqa: F401
    import mcp.types  # noqa: F401


def _env_of(scope: Mapping[str, Any], prefix: str = PREFIX) -> str:
    """The environment id: the path below the mount point (``scope['path']`` holds the
    whole path, ``root_path`` the mount point)."""
    path, root = scope.get("path", ""), scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    elif path.startswith(prefix + "/"):
        path = path[len(prefix) :]
    return path.strip("/")


async def _reply(send: Any, status: int, message: str) -> None:
    """A JSON-RPC error without an id (as the SDK answers refused HTTP requests)."""
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    await send_json(send, status, error)


def explorer_mounts(store: Any, allowed_hosts: Sequence[str] | None) -> list[tuple[str, Any]]:
    """The explorer's MCP mounts over ``store``: the environments' endpoints (:data:`PREFIX`)
    and the bridges to its OpenEnv servers (:data:`BRIDGE_PREFIX`), for
    ``repogym.explorer.web.create_app(store, mounts=explorer_mounts)``."""
    return [
        (PREFIX, McpEndpoints(store, allowed_hosts=allowed_hosts)),
        (BRIDGE_PREFIX, BridgeEndpoints(store, allowed_hosts=allowed_hosts)),
    ]
