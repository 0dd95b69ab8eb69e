"""``repogym explore`` and ``repogym explore index``: real builds, real snapshots, bad input."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from tests.explorer.web_fixtures import EXAMPLES

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402


@pytest.fixture()
def served(monkeypatch: pytest.MonkeyPatch) -> dict:
    """Capture what ``repogym explore`` would hand to uvicorn instead of blocking on it."""
    import uvicorn

    seen: dict = {}

    def fake_run(asgi, host: str, port: int, **kw) -> None:  # type: ignore[no-untyped-def]
        seen.update(app=asgi, host=host, port=port)

    monkeypatch.setattr(uvicorn, "run", fake_run)
    return seen


def page_when_ready(asgi, path: str) -> str:  # type: ignore[no-untyped-def]
    """The page once background indexing has packed the task pages and the store swapped."""
    assert asgi.state.store.ready.wait(120)
    client = TestClient(asgi)
    deadline = time.monotonic() + 60
    while True:
        text = client.get(path).text
        if "Still indexing" not in text or time.monotonic() > deadline:
            return text
        time.sleep(0.1)


def test_index_builds_and_publishes_a_snapshot(tmp_path: Path) -> None:
    out = tmp_path / "snap"
    res = CliRunner().invoke(app, ["explore", "index", str(EXAMPLES), "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.stdout)
    assert info["envs"] == 1 and info["tasks"] == 2 and info["bytes"] > 0
    assert (out / "CURRENT").is_file() and Path(info["snapshot"]).is_file()
    text = CliRunner().invoke(app, ["explore", "index", str(EXAMPLES), "--out", str(out)])
    assert text.exit_code == 0 and "1 environment(s), 2 task(s)" in text.stdout
    assert "(0 task(s) read, 2 unchanged)" in text.stdout  # the second run reads nothing


def test_index_while_another_run_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    from repogym.explorer import pack as pack_mod

    out = tmp_path / "snap"
    holder = pack_mod.PackWriter(out / "pack.sqlite")  # another index run, mid-way
    real = sqlite3.connect
    monkeypatch.setattr(
        pack_mod.sqlite3, "connect", lambda *a, **k: real(*a, **{**k, "timeout": 0.2})
    )
    try:
        res = CliRunner().invoke(app, ["explore", "index", str(EXAMPLES), "--out", str(out)])
    finally:
        holder.close()
    assert res.exit_code == 2
    assert "another index run is writing it" in res.output
    assert "Traceback" not in res.output and not (out / "CURRENT").exists()


def test_serve_a_snapshot(tmp_path: Path, served: dict) -> None:
    out = tmp_path / "snap"
    assert (
        CliRunner().invoke(app, ["explore", "index", str(EXAMPLES), "--out", str(out)]).exit_code
        == 0
    )
    res = CliRunner().invoke(app, ["explore", "--snapshot", str(out), "--port", "9999"])
    assert res.exit_code == 0, res.output
    assert served["host"] == "127.0.0.1" and served["port"] == 9999
    client = TestClient(served["app"])
    assert client.get("/api/envs/tasks").json()["task_count"] == 2
    assert "hello-file" in client.get("/d/tasks").text


def test_explore_paths_and_the_bundled_default(served: dict) -> None:
    res = CliRunner().invoke(app, ["explore", str(EXAMPLES)])
    assert res.exit_code == 0, res.output
    assert "environment(s) listed" in res.output
    page = page_when_ready(served["app"], "/t/tasks/textstats-word-count")
    assert "What was withheld" in page and "Still indexing" not in page
    served.clear()
    res = CliRunner().invoke(app, ["explore"])  # no source: the examples of this checkout
    assert res.exit_code == 0, res.output
    assert served["app"].state.store.ready.wait(60)
    assert TestClient(served["app"]).get("/api/search").json()["total"] == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["explore", "/no/such/folder"], "no such file or directory"),
        (["explore", "index", str(EXAMPLES)], "needs --out"),
        (["explore", "index", "--out", "x"], "at least one PATH"),
        (["explore", "index", "/no/such/folder", "--out", "x"], "no such file or directory"),
        (["explore", str(EXAMPLES), "--out", "x"], "--out belongs to"),
        (["explore", "--snapshot", "/no/such/snapshot"], "no such folder"),
    ],
)
def test_bad_input_exits_2_with_one_line(argv: list[str], message: str, served: dict) -> None:
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert not served


def test_missing_web_dependencies_say_how_to_install(
    monkeypatch: pytest.MonkeyPatch, served: dict
) -> None:
    import builtins

    real_import = builtins.__import__

    def no_fastapi(name: str, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name == "fastapi" or name.startswith("fastapi."):
            raise ImportError("No module named 'fastapi'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_fastapi)
    res = CliRunner().invoke(app, ["explore", str(EXAMPLES)])
    assert res.exit_code == 2
    assert "pip install 'repogym[explorer]'" in res.output
