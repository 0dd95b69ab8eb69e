"""``repogym explore`` with runs: the real command, its run options and their errors."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.explorer.web_fixtures import EXAMPLES, free_port
from tests.explorer_runs.fixtures import TEXTSTATS, Visitor

pytest.importorskip("uvicorn")


def _explore(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "repogym.cli", "explore", *args],
        capture_output=True,
        text=True,
        timeout=120,
        **kw,  # type: ignore[call-overload]
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--runs-visibility", "everyone"], "--runs-visibility must be public or owner"),
        (["--run-tasks", "/nonexistent/tasks"], "--run-tasks /nonexistent/tasks: no such folder"),
    ],
)
def test_bad_run_options_get_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    port = str(free_port())
    r = _explore(str(EXAMPLES), "--port", port, "--runs-dir", str(tmp_path), *args)
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_runs_from_the_real_command(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "repogym.cli", "explore", str(EXAMPLES), "--port", str(port)]
    cmd += ["--runs-dir", str(tmp_path / "state")]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                doc = httpx.get(f"{base}/api/tasks/tasks/{TEXTSTATS}", timeout=2)
                if doc.status_code == 200 and not doc.json().get("pending"):
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        v = Visitor(base)
        assert v.session["limits"]["agents"] == ["oracle", "nop", "llm"]
        assert v.run(agent="oracle")["reward"] == 1.0
        assert (tmp_path / "state" / "runs.sqlite").is_file()
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "runs from task pages: records in" in err
