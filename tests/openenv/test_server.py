"""The served environment over HTTP/WebSocket, driven by OpenEnv's own client."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient
from websockets.sync.client import connect as ws_connect

from tests.conftest import EXAMPLES
from tests.openenv.conftest import FIX, Server, evaluate_action, start_server, stop_server

pytestmark = pytest.mark.slow


def _episode(url: str, fix: bool) -> tuple[object, dict]:
    with GenericEnvClient(base_url=url, message_timeout_s=300).sync() as env:
        reset = env.reset(task_id="textstats-word-count")
        assert reset.observation["workdir"] == "/workspace"
        assert "word_count" in reset.observation["instruction"]
        if fix:
            source = env.step({"type": "read", "path": "textstats/counts.py"})
            text = source.observation["content"]
            assert 'text.split(" ")' in text
            written = env.step(
                {
                    "type": "write",
                    "path": "textstats/counts.py",
                    "content": text.replace('text.split(" ")', FIX),
                }
            )
            assert written.observation["error"] is None
        result = env.step(evaluate_action())
        state = env.state()
    return result, state


def test_agent_edit_scores_one_and_nop_zero(server: Server) -> None:
    result, state = _episode(server.url, fix=True)
    assert result.reward == 1.0 and result.done
    details = result.observation["reward_details"]
    assert details["resolved"] is True and details["f2p_passed"] == 2 and details["p2p_rate"] == 1.0
    assert state["phase"] == "done" and state["task_id"] == "textstats-word-count"
    assert state["step_count"] == 3

    nop, _ = _episode(server.url, fix=False)
    assert nop.reward == 0.0 and nop.done
    assert nop.observation["reward_details"]["resolved"] is False
    assert server.status()["open_sandboxes"] == 0


def test_agent_cannot_evaluate_over_the_wire(server: Server) -> None:
    with GenericEnvClient(base_url=server.url).sync() as env:
        env.reset(index=0)
        for kind in ("evaluate", "solve"):
            res = env.step({"type": kind})
            assert res.reward == 0.0 and not res.done
            assert "orchestration" in res.observation["error"]


def test_routes_and_capacity(server: Server) -> None:
    schema = httpx.get(f"{server.url}/schema").json()
    assert schema["action"]["properties"]["type"]["enum"] == ["exec", "read", "write", "list"]
    assert httpx.get(f"{server.url}/metadata").json()["name"] == "repogym"
    tasks = httpx.get(f"{server.url}/tasks").json()
    assert tasks["count"] == 2 and tasks["tasks"][1]["task_id"] == "textstats-word-count"
    one = httpx.get(f"{server.url}/tasks/1").json()
    assert "word_count" in one["instruction"]
    assert httpx.get(f"{server.url}/tasks/7").status_code == 404
    assert httpx.get(f"{server.url}/repogym/tasks").json()["count"] == 2
    assert {t["name"] for t in httpx.get(f"{server.url}/tools").json()["tools"]} == {
        "exec", "read", "write", "list"
    }  # fmt: skip

    clients = [GenericEnvClient(base_url=server.url).sync() for _ in range(3)]
    try:
        for c in clients:
            c.connect()
            c.reset(index=0)
        assert server.status()["open_sandboxes"] == 3
        # The server answers a connection over capacity with an error, then closes it.
        ws_url = server.url.replace("http://", "ws://") + "/ws"
        with ws_connect(ws_url) as ws:
            reply = json.loads(ws.recv(timeout=30))
        assert reply["type"] == "error" and reply["data"]["code"] == "CAPACITY_REACHED"
    finally:
        for c in clients:
            c.close()
    import time

    deadline = time.monotonic() + 10
    while server.status()["open_sandboxes"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.status()["open_sandboxes"] == 0


def test_openenv_validate(server: Server) -> None:
    cli = shutil.which("openenv", path=str(Path(sys.executable).parent))
    if cli is None:
        pytest.skip("openenv-core has no `openenv` CLI here")
    res = subprocess.run(
        [cli, "validate", "--url", server.url], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_exported_package_serves_the_same_tasks(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    subprocess.run(
        [sys.executable, "-m", "repogym.cli", "export", "--format", "openenv", str(EXAMPLES),
         "--out", str(out)],
        check=True,
    )  # fmt: skip
    cmd = [sys.executable, "-m", "uvicorn", "server.app:app", "--host", "127.0.0.1",
           "--port", "{port}"]  # fmt: skip
    srv = start_server(
        cmd,
        out,
        tmp_path / "pkg.log",
        env={"REPOGYM_ORCHESTRATOR_TOKEN": "test-orchestrator-token"},
    )
    try:
        listed = httpx.get(f"{srv.url}/tasks").json()
        assert [t["task_id"] for t in listed["tasks"]] == ["hello-file", "textstats-word-count"]
        result, _ = _episode(srv.url, fix=True)
        assert result.reward == 1.0
    finally:
        stop_server(srv)


def test_idle_sessions_are_reaped(tmp_path: Path) -> None:
    import time

    # The reaper's bookkeeping needs no isolation: the fake sandbox (nothing runs).
    cmd = [sys.executable, "-m", "repogym.cli", "serve", str(EXAMPLES), "--port", "{port}",
           "--idle-timeout", "1", "--sandbox", "fake"]  # fmt: skip
    srv = start_server(cmd, Path.cwd(), tmp_path / "idle.log")
    try:
        client = GenericEnvClient(base_url=srv.url).sync()
        client.connect()
        client.reset(index=0)
        assert srv.status()["open_sandboxes"] == 1
        deadline = time.monotonic() + 20
        while srv.status()["open_sandboxes"] and time.monotonic() < deadline:
            time.sleep(0.5)
        assert srv.status()["open_sandboxes"] == 0
        client.close()
    finally:
        stop_server(srv)


def test_shutdown_closes_every_sandbox() -> None:
    from fastapi.testclient import TestClient

    from repogym.openenv import build_app
    from repogym.openenv.environment import RepoEnvironment

    app = build_app(EXAMPLES, orchestrator_token="t", sandbox="fake")  # bookkeeping only
    pool = app.state.repogym_pool
    with TestClient(app) as client:
        assert client.get("/health").status_code == 200
        envs = [RepoEnvironment(pool) for _ in range(2)]
        for env in envs:
            env.reset(index=0)
        assert pool.open_sandboxes() == 2
    assert pool.open_sandboxes() == 0
