"""``repogym explore --workers N``: several server processes over one published snapshot."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from tests.explorer.web_fixtures import EXAMPLES

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explore", str(EXAMPLES), "--workers", "2"], "--workers N needs --snapshot"),
        (["explore", "--workers", "0"], "--workers must be at least 1"),
    ],
)
def test_bad_workers_exit_2(argv: list[str], message: str) -> None:
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 2, res.output
    assert message in res.output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_two_workers_serve_a_snapshot(tmp_path: Path) -> None:
    out = tmp_path / "snap"
    res = CliRunner().invoke(app, ["explore", "index", str(EXAMPLES), "--out", str(out)])
    assert res.exit_code == 0, res.output
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "repogym.cli", "explore", "--snapshot", str(out)]
        + ["--workers", "2", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        body = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/api/search?q=tasks", timeout=5
                ) as r:
                    body = json.loads(r.read())
                    etag = r.headers["etag"]
                break
            except OSError:
                time.sleep(0.2)
        assert body is not None, proc.stderr.read().decode() if proc.poll() is not None else ""
        assert body["total"] == 1 and body["items"][0]["id"] == "tasks"
        # every worker answers the same snapshot: the same ETag on many connections
        for _ in range(10):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/search?q=tasks") as r:
                assert r.headers["etag"] == etag
        # a withheld file stays withheld in every worker
        for _ in range(4):
            req = f"http://127.0.0.1:{port}/api/files/tasks/hello-file/solution/solve.sh"
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(req)
            assert err.value.code == 403
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
