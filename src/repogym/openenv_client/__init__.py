"""A client for OpenEnv servers, shared by everything in repogym that talks to one.

- :mod:`.client`: the server's one origin (:class:`Origin`), its routes (:func:`fetch`,
  :func:`get_json`, :func:`post_json`, :func:`list_task_ids`) and WebSocket episodes
  (:class:`RemoteEpisode`): no redirects followed, no other host contacted, answers size-capped,
  one-line errors (:class:`OpenEnvClientError`: :class:`Unreachable`, :class:`TimedOut`,
  :class:`RedirectRefused` …); the orchestrator-token rule (:func:`carries_token`);
- :mod:`.sync`: the same episode for callers without an event loop (:class:`EpisodeClient`);
- :mod:`.server_info`: what a server offers, read once (:class:`ServerInfo`);
- :mod:`.schema`: cheap JSON Schema checks of arguments before they are sent (:func:`problem`)
  and the arguments of ``reset`` (:data:`RESET_SCHEMA`).

Users: the MCP bridge (:mod:`repogym.mcp.bridge`), the explorer's playground
(:mod:`repogym.explorer.web.routes_play`) and OpenEnv adapter
(:mod:`repogym.explorer.adapters.openenv`), and ``repogym rollout``
(:mod:`repogym.run.openenv_rollout`). ``websockets`` and ``anyio`` are imported by the functions
that need them.
"""

from __future__ import annotations

from repogym.openenv_client.client import (
    TOKEN_KEY,
    OpenEnvClientError,
    Origin,
    RedirectRefused,
    RemoteEpisode,
    TimedOut,
    Unreachable,
    carries_token,
    fetch,
    get_json,
    list_task_ids,
    one_line,
    post_json,
    task_path,
)
from repogym.openenv_client.schema import MAX_ARGUMENT_BYTES, RESET_SCHEMA, problem
from repogym.openenv_client.server_info import ENV_PREFIX, EnvTool, ServerInfo
from repogym.openenv_client.sync import EpisodeClient, StepResult

__all__ = [
    "ENV_PREFIX",
    "MAX_ARGUMENT_BYTES",
    "RESET_SCHEMA",
    "TOKEN_KEY",
    "EnvTool",
    "EpisodeClient",
    "OpenEnvClientError",
    "Origin",
    "RedirectRefused",
    "RemoteEpisode",
    "ServerInfo",
    "StepResult",
    "TimedOut",
    "Unreachable",
    "carries_token",
    "fetch",
    "get_json",
    "list_task_ids",
    "one_line",
    "post_json",
    "problem",
    "task_path",
]
