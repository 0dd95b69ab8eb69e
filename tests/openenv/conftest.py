"""Fixtures for the OpenEnv tests: a served task set on a free port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

pytest.importorskip(
    "openenv.core", reason="needs the openenv extra: pip install 'repogym[openenv]'"
)

TOKEN = "test-orchestrator-token"
FIX = "text.split()"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def status(self) -> dict:
        return httpx.get(f"{self.url}/repogym/status", timeout=10).json()


def start_server(cmd: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None) -> Server:
    """Start a server process and wait until ``/health`` answers."""
    port = free_port()
    cmd = [part.replace("{port}", str(port)) for part in cmd]
    handle = log.open("wb")
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdout=handle, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return Server(url, proc, log)
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"server did not start: {log.read_text()[-2000:]}")


def stop_server(server: Server) -> None:
    server.proc.terminate()
    try:
        server.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()


def serve_examples(tmp_path_factory: pytest.TempPathFactory, *args: str) -> Iterator[Server]:
    """``repogym serve examples/tasks --orchestrator-token TOKEN [args…]`` on a free port, for
    the time of a fixture (``yield from`` it)."""
    from tests.conftest import EXAMPLES

    log = tmp_path_factory.mktemp("serve") / "server.log"
    cmd = [
        sys.executable, "-m", "repogym.cli", "serve", str(EXAMPLES), "--port", "{port}",
        "--orchestrator-token", TOKEN, *args,
    ]  # fmt: skip
    srv = start_server(cmd, Path.cwd(), log)
    try:
        yield srv
    finally:
        stop_server(srv)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from serve_examples(tmp_path_factory, "--max-sessions", "3")


def evaluate_action() -> dict:
    return {"type": "evaluate", "metadata": {"orchestrator_token": TOKEN}}
