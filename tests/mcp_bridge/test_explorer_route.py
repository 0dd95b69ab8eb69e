"""The explorer's bridge route ``/mcp/o/<env>``: an explorer cataloging a live ``repogym serve``
(and a Harbor folder) under a real uvicorn, driven by the ``mcp`` SDK's Streamable HTTP client,
plus raw requests a client would never send (unknown and non-OpenEnv environments, foreign
origins and hosts)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from repogym.explorer.store import open_store
from repogym.explorer.web import create_app
from repogym.mcp.web import BridgeEndpoints, explorer_mounts
from tests.conftest import EXAMPLES
from tests.explorer.web_fixtures import serve_with_lifespan
from tests.mcp.test_http import HEADERS, INIT
from tests.mcp_bridge.test_bridge import obs, wait_sandboxes
from tests.openenv.conftest import TOKEN, Server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def store(server: Server) -> Iterator[Any]:
    s = open_store([str(EXAMPLES)], openenv=[server.url])
    yield s
    s.close()


@pytest.fixture(scope="module")
def explorer(store: Any, server: Server) -> Iterator[tuple[str, str]]:
    """(the explorer's base URL, the OpenEnv server's environment id)."""
    with serve_with_lifespan(create_app(store, mounts=explorer_mounts)) as base:
        yield base, server.url.removeprefix("http://")


def talk(url: str, fn: Any) -> Any:
    async def main() -> Any:
        with anyio.fail_after(120):
            async with (
                streamable_http_client(url) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await fn(session)

    return anyio.run(main)


def test_sdk_client_drives_an_episode(explorer: tuple[str, str], server: Server) -> None:
    base, env_id = explorer
    assert httpx.get(f"{base}/api/envs/{env_id}").json()["kind"] == "openenv"
    before = server.status()["open_sandboxes"]
    schema = httpx.get(f"{server.url}/schema", timeout=10).json()["action"]

    async def episode(s: ClientSession) -> dict[str, Any]:
        seen: dict[str, Any] = {"tools": {t.name: t for t in (await s.list_tools()).tools}}
        seen["reset"] = obs(await s.call_tool("reset", {"task_id": "hello-file"}))
        write = {"type": "exec", "command": "printf bridged > note.txt && cat note.txt"}
        seen["step"] = obs(await s.call_tool("step", write))
        seen["read"] = obs(await s.call_tool("env_read", {"path": "note.txt"}))
        seen["state"] = obs(await s.call_tool("state", {}))
        seen["open"] = server.status()["open_sandboxes"]
        token = {"type": "exec", "command": "true", "metadata": {"orchestrator_token": TOKEN}}
        seen["token"] = await s.call_tool("step", token)
        return seen

    seen = talk(f"{base}/mcp/o/{env_id}", episode)
    assert {"reset", "step", "state", "list_tasks", "get_task", "env_exec"} <= set(seen["tools"])
    assert seen["tools"]["step"].input_schema == schema
    assert seen["reset"]["observation"]["task_id"] == "hello-file"
    assert seen["step"]["observation"]["stdout"] == "bridged"
    assert seen["read"]["observation"]["content"] == "bridged"
    assert seen["state"]["task_id"] == "hello-file" and seen["state"]["step_count"] == 2
    assert seen["open"] == before + 1
    assert seen["token"].is_error and "orchestrator token" in seen["token"].content[0].text
    wait_sandboxes(server, before)  # the client ended its MCP session: the episode is closed


def test_unknown_and_non_openenv_environments(explorer: tuple[str, str]) -> None:
    base, env_id = explorer
    for path, expected in (
        ("/mcp/o/no-such-env", "no environment 'no-such-env'"),
        ("/mcp/o/tasks", "not a cataloged OpenEnv server"),  # the Harbor folder
        ("/mcp/o/http://127.0.0.1:9/", "no environment"),  # a URL is just an unknown id
        ("/mcp/o/", "name an OpenEnv environment"),
    ):
        res = httpx.post(base + path, headers=HEADERS, json=INIT)
        assert res.status_code == 404, path
        message = res.json()["error"]["message"]
        assert expected in message and "\n" not in message, (path, message)
    # the Harbor folder keeps its own endpoint; the OpenEnv one answers here
    assert httpx.post(f"{base}/mcp/d/tasks", headers=HEADERS, json=INIT).status_code == 200
    ok = httpx.post(f"{base}/mcp/o/{env_id}", headers=HEADERS, json=INIT)
    assert ok.status_code == 200 and ok.headers.get("mcp-session-id")


def test_cross_site_and_foreign_host_are_refused(explorer: tuple[str, str]) -> None:
    base, env_id = explorer
    url = f"{base}/mcp/o/{env_id}"
    evil = httpx.post(url, headers={**HEADERS, "Origin": "https://evil.example"}, json=INIT)
    assert evil.status_code == 403 and "cross-site" in evil.json()["error"]["message"]
    assert "mcp-session-id" not in evil.headers
    port = base.rsplit(":", 1)[1]
    rebound = httpx.post(url, headers={**HEADERS, "Host": f"evil.example:{port}"}, json=INIT)
    assert rebound.status_code == 421
    same = httpx.post(url, headers={**HEADERS, "Origin": base}, json=INIT)
    assert same.status_code == 200


def test_the_bridge_caps_apply(store: Any, server: Server) -> None:
    """One episode at most through this bridge: a second MCP session is told so; once the
    first ends there is room again."""
    from starlette.applications import Starlette
    from starlette.routing import Mount

    env_id = server.url.removeprefix("http://")
    endpoints = BridgeEndpoints(store, max_sessions=1, max_calls_per_minute=3)
    app = Starlette(routes=[Mount("/mcp/o", endpoints)], lifespan=endpoints.lifespan)
    wait_sandboxes(server, 0)

    async def main(url: str) -> list[Any]:
        async with AsyncExitStack() as stack:
            sessions = []
            for _ in range(2):
                read, write, *_ = await stack.enter_async_context(streamable_http_client(url))
                s = await stack.enter_async_context(ClientSession(read, write))
                await s.initialize()
                sessions.append(s)
            first = await sessions[0].call_tool("reset", {"index": 0})
            second = await sessions[1].call_tool("reset", {"index": 0})
            calls = [await sessions[0].call_tool("state", {}) for _ in range(3)]
            return [first, second, *calls]

    with serve_with_lifespan(app) as base:
        url = f"{base}/mcp/o/{env_id}"
        first, second, *calls = anyio.run(main, url)
        assert not first.is_error
        assert second.is_error and "capacity reached" in second.content[0].text
        assert not calls[0].is_error and not calls[1].is_error
        assert calls[2].is_error and "rate limit" in calls[2].content[0].text
        wait_sandboxes(server, 0)
        again = talk(url, lambda s: s.call_tool("reset", {"index": 0}))
        assert not again.is_error
    wait_sandboxes(server, 0)
