"""Harbor's ``[[environment.mcp_servers]]``: MCP servers a task offers its agent.

Each entry has a ``name``, a ``transport`` (``stdio``, ``sse`` or ``streamable-http``; ``http``
is read as ``streamable-http``; ``sse`` when absent, as in Harbor), and either a ``url`` (the
HTTP transports) or a ``command`` with ``args`` (``stdio``: the agent starts it inside the
agent's sandbox). repogym hands the list to agents in
:attr:`repogym.run.agents.AgentContext.mcp_servers`; an HTTP server must be one of the task's
own services (a compose service, or ``main``/``localhost``), since nothing else is reachable
from a task's sandbox for certain.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

TRANSPORTS = ("stdio", "sse", "streamable-http")
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
"""URL hosts that name the agent's own service (``main``)."""


@dataclass(frozen=True)
class McpServer:
    """One MCP server as agents are told about it."""

    name: str
    transport: str
    url: str | None = None
    command: str | None = None
    args: tuple[str, ...] = field(default_factory=tuple)

    @property
    def host(self) -> str | None:
        """The URL's host (HTTP transports)."""
        return urlsplit(self.url).hostname if self.url else None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["args"] = list(self.args)
        return {k: v for k, v in out.items() if v not in (None, [])}


def parse_mcp_servers(raw: Iterable[dict[str, Any]]) -> tuple[list[McpServer], list[str]]:
    """(servers, problems): entries that are malformed are listed as problems, not kept."""
    servers: list[McpServer] = []
    problems: list[str] = []
    for i, entry in enumerate(raw):
        name = str(entry.get("name") or "")
        label = f"[[environment.mcp_servers]] {name or f'#{i + 1}'!r}"
        transport = str(entry.get("transport") or "sse").lower()
        transport = "streamable-http" if transport in ("http", "streamable_http") else transport
        if not name:
            problems.append(f"{label}: `name` is required")
            continue
        if transport not in TRANSPORTS:
            problems.append(f"{label}: transport {transport!r} is not one of {TRANSPORTS}")
            continue
        url, command = entry.get("url"), entry.get("command")
        if transport == "stdio" and not command:
            problems.append(f"{label}: transport 'stdio' needs `command`")
            continue
        if transport != "stdio" and not url:
            problems.append(f"{label}: transport {transport!r} needs `url`")
            continue
        args = tuple(str(a) for a in entry.get("args") or ())
        servers.append(
            McpServer(name, transport, str(url) if url else None, command and str(command), args)
        )
    return servers, problems


def mcp_refusals(servers: Iterable[McpServer], services: Iterable[str]) -> list[str]:
    """Why an HTTP server cannot be offered: its URL must name one of the task's services."""
    known = set(services) | {"main"}
    reasons = []
    for server in servers:
        if server.transport == "stdio":
            continue
        host = server.host
        if host is None or (host not in known and host not in LOCAL_HOSTS):
            names = ", ".join(sorted(known))
            reasons.append(
                f"[[environment.mcp_servers]] {server.name!r}: url {server.url!r} does not name "
                f"a service of the task ({names}); only the task's own services are reachable"
            )
    return reasons
