"""What an OpenEnv server offers, read once from its HTTP routes: its action schema, its own
tools (MCP tools or listed agent actions), whether it has a Task API, its description.

Read through :mod:`.client` (the server's origin only, no redirects); the MCP bridge lists these
as its tools (``env_<name>`` for the server's own).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from repogym.openenv_client.client import (
    OpenEnvClientError,
    Origin,
    get_json,
    one_line,
    post_json,
)

__all__ = ["ENV_PREFIX", "EnvTool", "ServerInfo"]

ENV_PREFIX = "env_"
"""The prefix of a server's own tool names as the bridge lists them."""
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,120}$")


@dataclass(frozen=True)
class EnvTool:
    """One of the server's own tools, as the bridge lists it."""

    name: str
    """The bridge's name for it: ``env_<remote>``."""
    remote: str
    description: str
    input_schema: dict[str, Any]
    via: str
    """``mcp`` (the server's MCP ``tools/call``) or ``action`` (a step ``{"type": remote}``)."""


@dataclass(frozen=True)
class ServerInfo:
    """What the OpenEnv server at one origin offers: read once, when the bridge is made."""

    origin: Origin
    action_schema: dict[str, Any]
    env_tools: tuple[EnvTool, ...]
    task_api: bool
    description: str

    @classmethod
    def load(cls, url: str) -> ServerInfo:
        """``GET /schema`` (required), ``POST /mcp`` ``tools/list``, ``GET /tools``, ``/tasks``
        and ``/metadata`` (optional). Raises :class:`OpenEnvClientError` when the server cannot be
        read, is not an OpenEnv server, or answers with a redirect."""
        origin = Origin.parse(url)
        status, schemas = get_json(origin, "/schema")
        action = schemas.get("action") if isinstance(schemas, dict) else None
        if status != 200 or not isinstance(action, dict) or action.get("type") != "object":
            raise OpenEnvClientError(
                f"{origin.http('/schema')}: HTTP {status}, no OpenEnv action schema "
                "(is this an OpenEnv server?)"
            )
        tools: dict[str, EnvTool] = {}
        status, rpc = post_json(
            origin, "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        )
        result = rpc.get("result") if status == 200 and isinstance(rpc, dict) else None
        listed_mcp = result.get("tools") if isinstance(result, dict) else None
        for entry in listed_mcp if isinstance(listed_mcp, list) else []:
            _add_tool(tools, entry, "mcp", ("inputSchema", "input_schema"))
        status, listed = get_json(origin, "/tools")
        kinds = _action_kinds(action)
        if status == 200 and isinstance(listed, dict) and kinds is not None:
            for entry in listed.get("tools") or []:
                if isinstance(entry, dict) and (not kinds or entry.get("name") in kinds):
                    _add_tool(tools, entry, "action", ("parameters", "inputSchema"))
        status, tasks = get_json(origin, "/tasks")
        task_api = (
            status == 200 and isinstance(tasks, dict) and isinstance(tasks.get("tasks"), list)
        )
        status, meta = get_json(origin, "/metadata")
        description = ""
        if status == 200 and isinstance(meta, dict):
            description = one_line(str(meta.get("description") or meta.get("name") or ""), 300)
        return cls(origin, action, tuple(tools.values()), task_api, description)


def _action_kinds(action: dict[str, Any]) -> set[str] | None:
    """The action ``type`` values the schema names (empty: any); None without a ``type`` field."""
    props = action.get("properties")
    kind = props.get("type") if isinstance(props, dict) else None
    if not isinstance(kind, dict):
        return None
    enum = kind.get("enum")
    if isinstance(enum, list):
        return {str(v) for v in enum}
    return {str(kind["const"])} if "const" in kind else set()


def _add_tool(tools: dict[str, EnvTool], entry: Any, via: str, keys: tuple[str, ...]) -> None:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        return
    remote = entry["name"]
    name = ENV_PREFIX + remote
    if not _TOOL_NAME.match(remote) or name in tools:
        return
    schema = next((entry[k] for k in keys if isinstance(entry.get(k), dict)), None)
    if not schema or schema.get("type") != "object":
        schema = {"type": "object"}
    if via == "action" and "type" in (schema.get("properties") or {}):
        return  # the action's kind is the tool's name: a "type" argument would contradict it
    what = "action" if via == "action" else "MCP tool"
    text = one_line(str(entry.get("description") or ""), 400)
    description = f"{text} (the server's {what} {remote!r}; works in this session's episode)"
    tools[name] = EnvTool(name, remote, description.strip(), schema, via)
