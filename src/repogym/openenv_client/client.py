"""The client side of an OpenEnv server: its one origin, its HTTP routes, its WebSocket episodes.

Every request goes to the origin (scheme, host, port) of the URL the caller was given: URLs are
built here from that origin and checked again before each request, redirects are never followed
(an HTTP 3xx is refused, with the other host named; the WebSocket client's own redirect handling
is switched off), answers are size-capped, and nothing a reply says is turned into a URL to
contact. Every failure is an :class:`OpenEnvClientError` with one line. Used by the MCP bridge,
the explorer's playground and ``repogym rollout``.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

from repogym.errors import RepogymError

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

    from repogym.http import BoundedResponse

__all__ = [
    "TOKEN_KEY",
    "OpenEnvClientError",
    "Origin",
    "RedirectRefused",
    "RemoteEpisode",
    "TimedOut",
    "Unreachable",
    "carries_token",
    "fetch",
    "get_json",
    "list_task_ids",
    "one_line",
    "post_json",
    "task_path",
]

TOKEN_KEY = "orchestrator_token"
"""The key an orchestrator token travels under; no client here ever sends one for an agent."""
HTTP_TIMEOUT_S = 30.0
MAX_HTTP_BYTES = 8_000_000
MAX_WS_MESSAGE_BYTES = 32_000_000
WS_OPEN_TIMEOUT_S = 30.0
REPLY_TIMEOUT_S = 1800.0
"""A ``reset`` may build a task's environment first; the server bounds each action itself."""


class OpenEnvClientError(RepogymError):
    """A one-line reason a request to an OpenEnv server was refused or failed."""


class Unreachable(OpenEnvClientError):
    """The server could not be reached at ``url`` (``reason``: one line)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url}: cannot reach the OpenEnv server: {reason}")
        self.url = url
        self.reason = reason


class TimedOut(OpenEnvClientError):
    """No complete answer from ``url`` within ``deadline_s`` seconds."""

    def __init__(self, url: str, deadline_s: float, message: str) -> None:
        super().__init__(message)
        self.url = url
        self.deadline_s = deadline_s


class RedirectRefused(OpenEnvClientError):
    """The server answered ``url`` with a redirect (never followed)."""

    def __init__(self, message: str, url: str, status: int, location: str | None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status
        self.location = location


def one_line(text: str, limit: int = 500) -> str:
    """``text`` on one line, at most ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass(frozen=True)
class Origin:
    """The server's base URL: ``http(s)://host[:port][/prefix]``, and the only place contacted."""

    scheme: str
    netloc: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> Origin:
        """Check ``url`` (http or https, a host, no credentials, no query) and normalise it."""
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https"):
            raise OpenEnvClientError(
                f"{url!r}: the OpenEnv server URL must start with http:// or https://"
            )
        if not parts.hostname:
            raise OpenEnvClientError(f"{url!r}: no host in the OpenEnv server URL")
        if parts.username is not None or parts.password is not None:
            raise OpenEnvClientError("credentials in the OpenEnv server URL are not accepted")
        if parts.query or parts.fragment:
            raise OpenEnvClientError(f"{url!r}: the OpenEnv server URL takes no query or fragment")
        try:
            parts.port  # noqa: B018 - raises ValueError on a bad port
        except ValueError:
            raise OpenEnvClientError(f"{url!r}: bad port in the OpenEnv server URL") from None
        return cls(parts.scheme, parts.netloc.lower(), parts.path.rstrip("/"))

    @property
    def base(self) -> str:
        return urlunsplit((self.scheme, self.netloc, self.prefix, "", ""))

    def http(self, path: str) -> str:
        """The URL of ``path`` (``/schema``, ``/tasks/3`` …) on this server."""
        return urlunsplit((self.scheme, self.netloc, self.prefix + path, "", ""))

    def ws(self, path: str) -> str:
        """The WebSocket URL of ``path`` on this server (``ws``/``wss`` for ``http``/``https``)."""
        scheme = "wss" if self.scheme == "https" else "ws"
        return urlunsplit((scheme, self.netloc, self.prefix + path, "", ""))

    def check(self, url: str) -> None:
        """Refuse ``url`` unless it is on this origin (the WebSocket schemes count as theirs)."""
        parts = urlsplit(url)
        scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
        if (scheme, parts.netloc.lower()) != (self.scheme, self.netloc):
            raise OpenEnvClientError(
                f"refused to contact {parts.hostname or url!r}: not the OpenEnv server"
            )


def _redirect_error(origin: Origin, url: str, status: int, location: str | None) -> RedirectRefused:
    target = urlsplit(urljoin(url, location or ""))
    where = "" if not location else f" to {target.hostname or location}"
    if location and (target.netloc.lower() != origin.netloc or target.scheme != origin.scheme):
        where += " (another host)"
    return RedirectRefused(
        f"{url}: HTTP {status} redirect{where} refused (redirects are not followed)",
        url,
        status,
        location,
    )


def _decode(url: str, body: bytes) -> Any:
    if len(body) > MAX_HTTP_BYTES:
        raise OpenEnvClientError(f"{url}: answer larger than {MAX_HTTP_BYTES} bytes")
    try:
        return json.loads(body)
    except ValueError:
        raise OpenEnvClientError(f"{url}: answer is not JSON") from None


def fetch(
    origin: Origin,
    path: str,
    *,
    timeout_s: float = HTTP_TIMEOUT_S,
    deadline_s: float | None = None,
    max_bytes: int = MAX_HTTP_BYTES,
    headers: dict[str, str] | None = None,
) -> BoundedResponse:
    """``GET path`` on the server: each socket read within ``timeout_s``, the whole answer
    within ``deadline_s`` (default twice that), at most ``max_bytes`` of body (one more is read
    so the caller can tell it was larger).

    Raises :class:`Unreachable`, :class:`TimedOut` or :class:`RedirectRefused` (each an
    :class:`OpenEnvClientError` with one line).
    """
    from repogym.http import DeadlineExceeded, get_bounded, reason

    url = origin.http(path)
    origin.check(url)
    deadline = timeout_s * 2 if deadline_s is None else deadline_s
    try:
        resp = get_bounded(
            url, timeout=timeout_s, deadline=deadline, max_bytes=max_bytes, headers=headers
        )
    except DeadlineExceeded as exc:
        raise TimedOut(url, deadline, one_line(str(exc))) from None
    except Exception as exc:  # noqa: BLE001 - one line for the caller
        raise Unreachable(url, reason(exc)) from None
    if 300 <= resp.status < 400:
        raise _redirect_error(origin, url, resp.status, resp.headers.get("location"))
    return resp


def get_json(origin: Origin, path: str, *, timeout_s: float = HTTP_TIMEOUT_S) -> tuple[int, Any]:
    """``GET path``: the status and the decoded JSON body (None when not JSON and not 200).

    Raises :class:`OpenEnvClientError` on a redirect, a connection failure or a 200 that is not
    JSON.
    """
    resp = fetch(origin, path, timeout_s=timeout_s)
    url = origin.http(path)
    if resp.status != 200:
        try:
            return resp.status, json.loads(resp.body)
        except ValueError:
            return resp.status, None
    return resp.status, _decode(url, resp.body)


def post_json(origin: Origin, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """``POST path`` with a JSON body: the status and the decoded JSON answer (or None)."""
    from repogym.http import client, reason

    url = origin.http(path)
    origin.check(url)
    try:
        with client(timeout=HTTP_TIMEOUT_S) as http, http.stream("POST", url, json=body) as resp:
            status = resp.status_code
            location = resp.headers.get("location")
            data = bytearray()
            for chunk in resp.iter_raw():
                data += chunk
                if len(data) > MAX_HTTP_BYTES:
                    break
    except Exception as exc:  # noqa: BLE001 - one line for the tool result
        raise Unreachable(url, reason(exc)) from None
    if 300 <= status < 400:
        raise _redirect_error(origin, url, status, location)
    try:
        return status, _decode(url, bytes(data))
    except OpenEnvClientError:
        if status == 200:
            raise
        return status, None


def list_task_ids(url: str, *, timeout_s: float = HTTP_TIMEOUT_S) -> list[str]:
    """Task ids of the server at ``url``, from its Task API (``GET /tasks``)."""
    origin = Origin.parse(url)
    status, data = get_json(origin, "/tasks", timeout_s=timeout_s)
    where = origin.http("/tasks")
    if status != 200:
        raise OpenEnvClientError(f"{where}: HTTP {status}")
    try:
        return [str(t["task_id"]) for t in data["tasks"]]
    except (KeyError, TypeError):
        raise OpenEnvClientError(f"{where}: not a task list") from None


def carries_token(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` (an action, reset arguments) names an orchestrator token at any depth:
    such a request is refused before anything is sent (the token is the trainer's, never an
    agent's or a browser's)."""
    if depth > 32:
        return False
    if isinstance(value, dict):
        return any(
            TOKEN_KEY in str(k).lower() or carries_token(v, depth + 1) for k, v in value.items()
        )
    if isinstance(value, list):
        return any(carries_token(v, depth + 1) for v in value)
    return False


def task_path(index: int) -> str:
    """``/tasks/{index}`` (the index is an integer the bridge checked, never server text)."""
    return "/tasks/" + quote(str(int(index)), safe="")


def _no_redirect_connect() -> Any:
    """websockets' ``connect`` with its redirect following switched off."""
    from websockets.asyncio.client import connect

    class NoRedirect(connect):
        def process_redirect(self, exc: Exception) -> Exception | str:
            return exc

    return NoRedirect


class RemoteEpisode:
    """One WebSocket session on the server's ``/ws``: OpenEnv's messages ``reset``, ``step``,
    ``state``, ``mcp`` and ``close``, one request and one reply at a time (callers serialise)."""

    def __init__(self, origin: Origin, *, reply_timeout_s: float = REPLY_TIMEOUT_S) -> None:
        self.origin = origin
        self.reply_timeout_s = reply_timeout_s
        """How long one reply may take (a reset may build the task's environment first)."""
        self._ws: ClientConnection | None = None
        self._rpc_id = 0
        self.used = False
        """Whether the server has answered on this socket (it then had a session for it)."""

    @property
    def is_open(self) -> bool:
        return self._ws is not None

    async def open(self) -> None:
        """Connect to ``/ws`` (no redirects followed)."""
        from websockets.exceptions import InvalidStatus

        from repogym.http import USER_AGENT, reason

        url = self.origin.ws("/ws")
        self.origin.check(url)
        connect = _no_redirect_connect()
        try:
            self._ws = await connect(
                url,
                open_timeout=WS_OPEN_TIMEOUT_S,
                max_size=MAX_WS_MESSAGE_BYTES,
                user_agent_header=USER_AGENT,
                ping_interval=20,
                ping_timeout=60,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            if 300 <= status < 400:
                raise _redirect_error(
                    self.origin, url, status, exc.response.headers.get("Location")
                ) from None
            raise OpenEnvClientError(f"{url}: WebSocket refused with HTTP {status}") from None
        except Exception as exc:  # noqa: BLE001 - one line for the tool result
            raise OpenEnvClientError(f"{url}: cannot open the episode: {reason(exc)}") from None

    async def request(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send one message and return its reply's ``data``; an ``error`` reply (or a lost
        socket, which also closes this episode) raises :class:`OpenEnvClientError`."""
        import anyio
        from websockets.exceptions import ConnectionClosed

        if self._ws is None:
            raise OpenEnvClientError("no episode: call reset first")
        done = False
        try:
            with anyio.fail_after(self.reply_timeout_s):
                # a server that refused the session said why before closing: read that
                with contextlib.suppress(ConnectionClosed):
                    await self._ws.send(json.dumps(message))
                raw = await self._ws.recv()
            done = True
        except TimeoutError:
            raise OpenEnvClientError(
                f"no reply from the OpenEnv server within {self.reply_timeout_s:g} s; "
                "episode closed"
            ) from None
        except Exception as exc:  # noqa: BLE001 - the socket is gone
            raise OpenEnvClientError(
                f"the OpenEnv server closed the episode ({one_line(str(exc))})"
            ) from None
        finally:
            if not done:  # a reply may still arrive: this socket is out of step for good
                with anyio.CancelScope(shield=True):
                    await self.close(polite=False)
        try:
            reply = json.loads(raw)
        except ValueError:
            raise OpenEnvClientError("the OpenEnv server sent a reply that is not JSON") from None
        if not isinstance(reply, dict):
            raise OpenEnvClientError("the OpenEnv server sent a reply that is not an object")
        data = reply.get("data")
        if reply.get("type") == "error":
            info = data if isinstance(data, dict) else {}
            code = str(info.get("code") or "ERROR")
            text = one_line(str(info.get("message") or "no message"))
            if code == "CAPACITY_REACHED":
                with anyio.CancelScope(shield=True):
                    await self.close(polite=False)
                raise OpenEnvClientError(f"capacity reached on the OpenEnv server: {text}")
            self.used = True
            if code in ("SESSION_ERROR", "FACTORY_ERROR"):  # the server drops the socket
                with anyio.CancelScope(shield=True):
                    await self.close(polite=False)
                raise OpenEnvClientError(
                    f"OpenEnv server error {code}: {text} (episode ended: reset)"
                )
            raise OpenEnvClientError(f"OpenEnv server error {code}: {text}")
        if not isinstance(data, dict):
            raise OpenEnvClientError("the OpenEnv server sent a reply without data")
        self.used = True
        return data

    async def mcp(self, method: str, params: dict[str, Any]) -> Any:
        """One JSON-RPC call to the server's own MCP tools over this socket: the ``result``."""
        self._rpc_id += 1
        data = await self.request(
            {
                "type": "mcp",
                "data": {"jsonrpc": "2.0", "id": self._rpc_id, "method": method, "params": params},
            }
        )
        error = data.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else error
            raise OpenEnvClientError(f"the server's MCP tool failed: {one_line(str(message))}")
        return data.get("result")

    async def close(self, *, polite: bool = True) -> None:
        """Say ``close`` (when ``polite``) and drop the socket; idempotent, never raises."""
        import anyio

        ws, self._ws = self._ws, None
        if ws is None:
            return
        with anyio.move_on_after(5):
            try:
                if polite:
                    await ws.send(json.dumps({"type": "close"}))
                await ws.close()
            except Exception:  # noqa: BLE001, S110 - the socket may already be gone
                pass
