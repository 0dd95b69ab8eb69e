"""The bridge as users run it: ``run_stdio`` in its own process (the SDK's stdio client), the
Streamable HTTP app under uvicorn, and an OpenEnv server with MCP tools of its own."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client

from repogym.mcp.bridge import create_bridge
from tests.mcp_bridge.test_bridge import call, error_text, obs, wait_sandboxes
from tests.openenv.conftest import FIX, Server, free_port

pytestmark = pytest.mark.slow


def stdio_params(url: str) -> StdioServerParameters:
    code = f"from repogym.mcp.bridge import run_stdio; run_stdio({url!r})"
    return StdioServerParameters(command=sys.executable, args=["-c", code], cwd=str(Path.cwd()))


def test_stdio_episode(server: Server) -> None:
    base = server.status()["open_sandboxes"]
    schema = httpx.get(f"{server.url}/schema", timeout=10).json()["action"]

    async def main() -> None:
        async with (
            stdio_client(stdio_params(server.url)) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            assert init.server_info.name == "repogym-openenv-bridge"
            assert server.url in (init.instructions or "")
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert {"reset", "step", "state", "list_tasks", "get_task", "env_exec"} <= set(tools)
            assert tools["step"].input_schema == schema

            def result(res: Any) -> dict[str, Any]:
                assert not res.is_error, res.content
                return dict(res.structured_content)

            reset = await session.call_tool("reset", {"task_id": "textstats-word-count"})
            assert result(reset)["observation"]["workdir"]
            cat = {"type": "exec", "command": "cat textstats/counts.py"}
            source = result(await session.call_tool("step", cat))["observation"]["stdout"]
            fixed = source.replace('text.split(" ")', FIX)
            write = {"type": "write", "path": "textstats/counts.py", "content": fixed}
            assert result(await session.call_tool("step", write))["observation"]["error"] is None
            check = {"type": "exec", "command": "grep -c 'text.split()' textstats/counts.py"}
            assert result(await session.call_tool("step", check))["observation"]["stdout"] == "1\n"
            assert result(await session.call_tool("state", {}))["step_count"] == 3
            refused = result(await session.call_tool("step", {"type": "evaluate"}))
            assert refused["reward"] == 0.0 and "orchestration" in refused["observation"]["error"]
            bad = await session.call_tool("step", {"type": "exec"})
            assert bad.is_error and "command" in bad.content[0].text  # type: ignore[union-attr]
            assert server.status()["open_sandboxes"] == base + 1

        wait_sandboxes(server, base)  # the process ended with the session: episode closed

    anyio.run(main)


def test_stdio_with_the_default_client(server: Server) -> None:
    """``Client`` probes the 2026 protocol first (no handshake): still one episode per process."""

    async def main() -> None:
        async with Client(stdio_params(server.url)) as client:
            first = obs(await call(client, "reset", {"index": 0}))["observation"]
            assert first["task_id"] == "hello-file"
            listed = obs(await call(client, "step", {"type": "list", "path": "."}))
            assert isinstance(listed["observation"]["entries"], list)
            assert obs(await call(client, "state"))["step_count"] == 1

    anyio.run(main)


def _wait_port(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-2000:]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"no server on port {port}: {log.read_text()[-2000:]}")


def _serve(code: str, tmp: Path, cwd: Path | None = None) -> Iterator[str]:
    port = free_port()
    log = tmp / f"serve-{port}.log"
    with log.open("wb") as handle:
        proc = subprocess.Popen(
            [sys.executable, "-c", code.replace("{port}", str(port))],
            cwd=cwd or Path.cwd(),
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_port(port, proc, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def http_bridge(server: Server, tmp_path: Path) -> Iterator[str]:
    code = (
        "import uvicorn\n"
        "from repogym.mcp.bridge import streamable_http_app\n"
        f"app = streamable_http_app({server.url!r})\n"
        "uvicorn.run(app, host='127.0.0.1', port={port}, log_level='warning')\n"
    )
    yield from _serve(code, tmp_path)


def test_streamable_http_sessions(server: Server, http_bridge: str) -> None:
    base = server.status()["open_sandboxes"]

    async def main() -> None:
        url = f"{http_bridge}/mcp"
        async with Client(url, mode="legacy") as one, Client(url, mode="legacy") as two:
            a = obs(await call(one, "reset", {"index": 0}))["observation"]
            b = obs(await call(two, "reset", {"index": 1}))["observation"]
            assert (a["task_id"], b["task_id"]) == ("hello-file", "textstats-word-count")
            state_one, state_two = obs(await call(one, "state")), obs(await call(two, "state"))
            assert state_one["episode_id"] != state_two["episode_id"]
            assert server.status()["open_sandboxes"] == base + 2
        # the clients ended their sessions (DELETE): both episodes are closed now, not later
        wait_sandboxes(server, base, timeout=10)
        # without a session (the 2026 protocol is sessionless) there is no episode to keep
        async with Client(url) as sessionless:
            assert "no MCP session" in error_text(await call(sessionless, "reset"))
            assert obs(await call(sessionless, "list_tasks"))["count"] == 2

    anyio.run(main)


MCP_ENV_APP = '''
    """A tiny OpenEnv environment with one MCP tool of its own, ``add``."""
    from fastmcp import FastMCP
    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.mcp_environment import MCPEnvironment
    from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
    from openenv.core.env_server.types import Observation, State


    class AddEnv(MCPEnvironment):
        def __init__(self):
            mcp = FastMCP("adder")

            @mcp.tool
            def add(a: int, b: int) -> int:
                """Add two integers."""
                return a + b

            super().__init__(mcp)
            self._state = State(episode_id="e", step_count=0)

        def reset(self, seed=None, episode_id=None, **kwargs):
            return Observation(done=False)

        def _step_impl(self, action, timeout_s=None, **kwargs):
            return Observation(done=False)

        @property
        def state(self):
            return self._state


    app = create_fastapi_app(AddEnv, CallToolAction, CallToolObservation)
'''


@pytest.fixture
def mcp_env(tmp_path: Path) -> Iterator[str]:
    pytest.importorskip("fastmcp")
    (tmp_path / "mcp_env_app.py").write_text(textwrap.dedent(MCP_ENV_APP))
    code = (
        "import uvicorn\n"
        "uvicorn.run('mcp_env_app:app', host='127.0.0.1', port={port}, log_level='warning')\n"
    )
    yield from _serve(code, tmp_path, cwd=tmp_path)


def test_the_servers_own_mcp_tools(mcp_env: str) -> None:
    bridge = create_bridge(mcp_env)

    async def main() -> None:
        async with Client(bridge) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert "env_add" in tools and "list_tasks" not in tools
            assert tools["env_add"].input_schema["required"] == ["a", "b"]
            added = await call(client, "env_add", {"a": 2, "b": 3})
            assert not added.is_error
            assert added.content[0].text == "5"  # type: ignore[union-attr]
            assert added.structured_content == {"result": 5}
            assert "missing required 'b'" in error_text(await call(client, "env_add", {"a": 2}))
            via_step = {"type": "call_tool", "tool_name": "add", "arguments": {"a": 1, "b": 1}}
            stepped = obs(await call(client, "step", via_step))
            assert stepped["observation"]["result"]["data"] == 2

    anyio.run(main)
