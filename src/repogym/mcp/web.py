"""Streamable HTTP endpoints of the explorer app: ``/mcp/d/<env>``, one MCP server per
environment the explorer serves (the tools of :mod:`repogym.mcp.environment`).

:class:`McpEndpoints` is a plain ASGI app mounted at ``/mcp/d`` by the explorer's
``create_app``; its :meth:`McpEndpoints.run` belongs in the app's lifespan. Each environment gets
the SDK's ``StreamableHTTPSessionManager`` when it is first asked for (at most
:data:`MAX_ENVS` at once, least recently used ones closed first), so an explorer of thousands of
environments costs nothing until an agent connects. The SDK itself is imported then, off the
event loop: ``import repogym.mcp.web`` needs only anyio.

Requests are checked before the SDK sees them, and again by the SDK's own transport security:
the ``Host`` header must name this server (loopback names, or the address it listens on; any
host when it listens on every interface), and a request carrying an ``Origin`` must come from
the same origin (or an allowed host): a cross-site page in a browser cannot use an endpoint.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, MutableMapping, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import anyio

from repogym.explorer.web.http import LOOPBACK_HOSTS

__all__ = [
    "LOOPBACK_HOSTS",
    "MAX_ENVS",
    "PREFIX",
    "McpEndpoints",
    "allowed_hosts_for",
]

log = logging.getLogger("repogym.mcp")

PREFIX = "/mcp/d"
"""Where the endpoints are mounted: ``/mcp/d/<env>``."""
WILDCARD_ADDRESSES = ("", "0.0.0.0", "::", "[::]", "*")
MAX_ENVS = 256
"""Environments with a running session manager at once."""
MAX_SESSIONS = 256
"""Open MCP sessions per environment (more are answered 503 until some end)."""
SESSION_IDLE_SECONDS = 600.0
"""A session with no request for this long is closed (its id then answers 404)."""
MAX_BODY_BYTES = 1024 * 1024
"""Largest request body (the tools' arguments are small)."""


def allowed_hosts_for(bind_host: str) -> list[str] | None:
    """The ``Host`` names the endpoints accept when the explorer listens on ``bind_host``:
    loopback names, plus that address when it is another one; None (any) for a wildcard."""
    host = bind_host.strip()
    if host in WILDCARD_ADDRESSES:
        return None
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    names = list(LOOPBACK_HOSTS)
    if host.lower() not in names:
        names.append(host.lower())
    return names


def _host_ok(host: str, names: Sequence[str]) -> bool:
    """``host`` (a Host header: name, optionally ``:port``) is one of ``names``."""
    host = host.strip().lower()
    for name in names:
        if host == name or (host.startswith(name + ":") and host[len(name) + 1 :].isdigit()):
            return True
    return False


class McpEndpoints:
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
        self.store = store
        self.allowed_hosts = None if allowed_hosts is None else [h.lower() for h in allowed_hosts]
        self.max_envs = max_envs
        self.max_sessions = max_sessions
        self.idle_seconds = idle_seconds
        self._tg: Any = None
        self._lock = anyio.Lock()
        self._managers: OrderedDict[str, tuple[Any, anyio.CancelScope]] = OrderedDict()
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
                self._managers.clear()
                tg.cancel_scope.cancel()

    def lifespan(self, _app: Any) -> Any:
        """For ``FastAPI(lifespan=…)``."""
        return self.run()

    # -- requests

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refused = self.refusal(headers)
        if refused is not None:
            await _reply(send, *refused)
            return
        env_id = _env_of(scope)
        if not env_id:
            await _reply(send, 404, "name an environment: /mcp/d/<env>")
            return
        if self._tg is None:
            await _reply(send, 503, "MCP endpoints not started (the app's lifespan did not run)")
            return
        if not await self._load_sdk():
            await _reply(send, 501, self._sdk_error or "MCP is not available")
            return
        if self.store.env(env_id) is None:
            await _reply(send, 404, f"no environment {env_id[:200]!r}")
            return
        manager = await self._manager(env_id)
        await manager.handle_request(scope, receive, send)

    def refusal(self, headers: dict[str, str]) -> tuple[int, str] | None:
        """(status, reason) for a request from the wrong host or another site; None: fine."""
        host = headers.get("host", "")
        if self.allowed_hosts is not None and not _host_ok(host, self.allowed_hosts):
            return 421, "Invalid Host header"
        origin = headers.get("origin")
        if origin is None:
            return None
        parts = urlsplit(origin.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return 403, "Invalid Origin header: cross-site requests are refused"
        if parts.netloc.lower() == host.strip().lower():
            return None  # the same origin as the request
        if self.allowed_hosts is not None and _host_ok(parts.netloc, self.allowed_hosts):
            return None  # e.g. a local tool on another loopback port
        return 403, "Invalid Origin header: cross-site requests are refused"

    # -- the SDK and the managers

    async def _load_sdk(self) -> bool:
        if not self._sdk_loaded and self._sdk_error is None:
            try:
                await anyio.to_thread.run_sync(_import_sdk)
                self._sdk_loaded = True
            except ImportError:
                from repogym.mcp import INSTALL_HINT

                self._sdk_error = INSTALL_HINT
        return self._sdk_loaded

    def _security(self) -> Any:
        from mcp.server.transport_security import TransportSecuritySettings

        if self.allowed_hosts is None:  # any host: the Origin check above still applies
            return TransportSecuritySettings(enable_dns_rebinding_protection=False)
        hosts = [p for h in self.allowed_hosts for p in (h, f"{h}:*")]
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=hosts,
            allowed_origins=[f"{s}://{h}" for h in hosts for s in ("http", "https")],
        )

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


def _env_of(scope: Mapping[str, Any]) -> str:
    """The environment id: the path below the mount point (``scope['path']`` holds the
    whole path, ``root_path`` the mount point)."""
    path, root = scope.get("path", ""), scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    elif path.startswith(PREFIX + "/"):
        path = path[len(PREFIX) :]
    return path.strip("/")


async def _reply(send: Any, status: int, message: str) -> None:
    """A JSON-RPC error without an id (as the SDK answers refused HTTP requests)."""
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
