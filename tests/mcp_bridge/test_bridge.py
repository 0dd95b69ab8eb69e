"""The bridge against a live ``repogym serve``, driven by the ``mcp`` SDK's own in-process client."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.types import CallToolResult

from repogym.mcp.bridge import create_bridge
from tests.openenv.conftest import FIX, TOKEN, Server

AGENT_TOOLS = {"env_exec", "env_read", "env_write", "env_list"}


def run(fn: Callable[[], Awaitable[None]]) -> None:
    anyio.run(fn)


async def call(client: Client, name: str, args: dict[str, Any] | None = None) -> CallToolResult:
    return await client.call_tool(name, args or {})


def obs(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    data = result.structured_content
    assert isinstance(data, dict)
    assert json.loads(result.content[0].text) == data  # type: ignore[union-attr]
    return data


def error_text(result: CallToolResult) -> str:
    assert result.is_error
    assert len(result.content) == 1
    text = result.content[0].text  # type: ignore[union-attr]
    assert "\n" not in text
    return text


def wait_sandboxes(server: Server, count: int, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while server.status()["open_sandboxes"] != count:
        assert time.monotonic() < deadline, server.status()
        time.sleep(0.1)


def test_tool_list_mirrors_the_server(server: Server) -> None:
    bridge = create_bridge(server.url)
    schema = httpx.get(f"{server.url}/schema", timeout=10).json()["action"]
    listed = {t["name"]: t for t in httpx.get(f"{server.url}/tools", timeout=10).json()["tools"]}

    async def main() -> None:
        async with Client(bridge) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {"reset", "step", "state", "list_tasks", "get_task"} | AGENT_TOOLS
            assert tools["step"].input_schema == schema
            assert set(tools["reset"].input_schema["properties"]) == {"task_id", "index", "seed"}
            assert tools["env_exec"].input_schema == listed["exec"]["parameters"]
            assert (
                tools["list_tasks"].annotations and tools["list_tasks"].annotations.read_only_hint
            )

    run(main)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_full_episode(server: Server, mode: str) -> None:
    bridge = create_bridge(server.url)
    base = server.status()["open_sandboxes"]

    async def main() -> None:
        async with Client(bridge, mode=mode) as client:
            assert "no episode" in error_text(await call(client, "state"))
            first = obs(await call(client, "reset", {"task_id": "textstats-word-count"}))
            assert first["observation"]["task_id"] == "textstats-word-count"
            assert "word_count" in first["observation"]["instruction"]
            assert server.status()["open_sandboxes"] == base + 1

            cat = {"type": "exec", "command": "cat textstats/counts.py"}
            source = obs(await call(client, "step", cat))["observation"]["stdout"]
            assert 'text.split(" ")' in source
            fixed = source.replace('text.split(" ")', FIX)
            write = {"type": "write", "path": "textstats/counts.py", "content": fixed}
            assert "wrote" in obs(await call(client, "step", write))["observation"]["stdout"]
            read = obs(await call(client, "env_read", {"path": "textstats/counts.py"}))
            assert FIX in read["observation"]["content"]

            state = obs(await call(client, "state"))
            assert state["task_id"] == "textstats-word-count"
            assert state["step_count"] == 3
            assert state["phase"] == "agent"

            # evaluate goes through as an action; the server refuses it: no reward, still running
            graded = obs(await call(client, "step", {"type": "evaluate"}))
            assert "orchestration action" in graded["observation"]["error"]
            assert graded["reward"] == 0.0 and graded["done"] is False
            assert obs(await call(client, "state"))["phase"] == "agent"

        wait_sandboxes(server, base)  # the MCP session ended: its episode was closed

    run(main)


def test_orchestrator_token_is_refused(server: Server) -> None:
    bridge = create_bridge(server.url)

    async def main() -> None:
        async with Client(bridge) as client:
            obs(await call(client, "reset", {"task_id": "hello-file"}))
            for action in (
                {"type": "evaluate", "metadata": {"orchestrator_token": TOKEN}},
                {"type": "exec", "command": "true", "metadata": {"Orchestrator_Token": "x"}},
            ):
                assert "orchestrator token" in error_text(await call(client, "step", action))
            # nothing reached the server
            assert obs(await call(client, "state"))["step_count"] == 0

    run(main)


def test_bad_input_is_a_tool_error(server: Server) -> None:
    bridge = create_bridge(server.url)

    async def main() -> None:
        async with Client(bridge) as client:
            obs(await call(client, "reset", {"index": 0}))
            cases = {
                ("step", json.dumps({"type": "exec"})): "missing required 'command'",
                ("step", json.dumps({"type": "exec", "command": 3})): "expected string",
                ("step", json.dumps({"type": "exec", "command": "x", "bogus": 1})): "unknown field",
                ("step", json.dumps({"command": "x"})): "missing required 'type'",
                ("env_read", json.dumps({})): "missing required 'path'",
                ("reset", json.dumps({"index": "one"})): "expected integer",
                ("get_task", json.dumps({})): "index or task_id",
                ("get_task", json.dumps({"index": 99})): "HTTP 404",
                ("get_task", json.dumps({"task_id": "nope"})): "no task 'nope'",
                ("no_such_tool", json.dumps({})): "unknown tool",
            }
            for (name, args), expected in cases.items():
                assert expected in error_text(await call(client, name, json.loads(args))), name
            # a refused action (path outside the working directory) is the server's answer
            outside = obs(await call(client, "step", {"type": "read", "path": "../../etc/passwd"}))
            assert "outside the working directory" in outside["observation"]["error"]
            assert obs(await call(client, "state"))["phase"] == "agent"

    run(main)


def test_task_api(server: Server) -> None:
    bridge = create_bridge(server.url)

    async def main() -> None:
        async with Client(bridge) as client:
            listed = obs(await call(client, "list_tasks"))
            assert listed == httpx.get(f"{server.url}/tasks", timeout=10).json()
            by_index = obs(await call(client, "get_task", {"index": 1}))
            assert by_index["task_id"] == "textstats-word-count" and by_index["instruction"]
            assert (
                obs(await call(client, "get_task", {"task_id": "textstats-word-count"})) == by_index
            )

    run(main)


def test_sessions_cap(server: Server) -> None:
    bridge = create_bridge(server.url, max_sessions=2)
    wait_sandboxes(server, 0)

    async def main() -> None:
        async with AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(Client(bridge)) for _ in range(3)]
            for client in clients[:2]:
                obs(await call(client, "reset", {"index": 0}))
            assert "capacity reached" in error_text(await call(clients[2], "reset", {"index": 0}))
            assert "capacity reached" in error_text(
                await call(clients[2], "env_list", {"path": "."})
            )
            # the Task API does not need an episode
            obs(await call(clients[2], "list_tasks"))
        async with Client(bridge) as client:  # the others' episodes were closed: room again
            obs(await call(client, "reset", {"index": 0}))

    run(main)


def test_server_capacity_is_reported(server: Server) -> None:
    bridge = create_bridge(server.url)  # 8 here, 3 on the server
    wait_sandboxes(server, 0)

    async def main() -> None:
        async with AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(Client(bridge)) for _ in range(4)]
            for client in clients[:3]:
                obs(await call(client, "reset", {"index": 0}))
            text = error_text(await call(clients[3], "reset", {"index": 0}))
            assert "capacity reached on the OpenEnv server" in text
            # the refused session can try again once there is room
            await stack.enter_async_context(Client(bridge))  # (an unused session costs nothing)
        async with Client(bridge) as client:
            obs(await call(client, "reset", {"index": 0}))

    run(main)


def test_rate_limit_per_session(server: Server) -> None:
    bridge = create_bridge(server.url, max_calls_per_minute=3)

    async def main() -> None:
        async with Client(bridge) as first, Client(bridge) as second:
            for _ in range(3):
                obs(await call(first, "list_tasks"))
            assert "rate limit" in error_text(await call(first, "list_tasks"))
            assert "rate limit" in error_text(await call(first, "reset"))
            obs(await call(second, "list_tasks"))

    run(main)


def test_idle_session_is_closed(server: Server) -> None:
    bridge = create_bridge(server.url, idle_timeout_s=0.3)
    base = server.status()["open_sandboxes"]

    async def main() -> None:
        async with Client(bridge) as client:
            obs(await call(client, "reset", {"index": 0}))
            assert server.status()["open_sandboxes"] == base + 1
            await anyio.to_thread.run_sync(wait_sandboxes, server, base)
            text = error_text(await call(client, "step", {"type": "list", "path": "."}))
            assert "without a tool call" in text and "reset" in text
            obs(await call(client, "reset", {"index": 0}))  # a new episode
            assert obs(await call(client, "state"))["phase"] == "agent"

    run(main)
