"""``repogym mcp``: its bad inputs end with one line and exit 2; ``--openenv`` hands over to
the OpenEnv bridge."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

import repogym.mcp
from repogym.cli import COMMAND_MODULES, app
from tests.explorer.web_fixtures import EXAMPLES


def invoke(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.output


def one_line_error(code: int, output: str, text: str) -> None:
    assert code == 2, output
    assert "Traceback" not in output and text in output, output
    assert len(output.strip().splitlines()) == 1, output


def test_registered() -> None:
    assert "mcp" in COMMAND_MODULES
    code, output = invoke("--help")
    assert code == 0 and "mcp" in output
    code, output = invoke("mcp", "--help")
    assert code == 0 and "--openenv" in output and "stdio" in output


def test_missing_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(repogym.mcp, "sdk_available", lambda: False)
    one_line_error(*invoke("mcp", str(EXAMPLES)), "pip install 'repogym[mcp]'")


def test_bad_paths(tmp_path: Path) -> None:
    one_line_error(*invoke("mcp", str(tmp_path / "nope")), "no such file or directory")
    (tmp_path / "empty").mkdir()
    code, output = invoke("mcp", str(tmp_path / "empty"))
    assert code == 2 and "Traceback" not in output, output


def test_openenv_hands_over_to_the_bridge(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    fake = types.ModuleType("repogym.mcp.bridge")
    fake.run_stdio = seen.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "repogym.mcp.bridge", fake)
    code, output = invoke("mcp", "--openenv", "http://127.0.0.1:9")
    assert code == 0, output
    assert seen == ["http://127.0.0.1:9"]
    one_line_error(*invoke("mcp", str(EXAMPLES), "--openenv", "http://x"), "not both")


def test_openenv_without_the_bridge(monkeypatch: pytest.MonkeyPatch) -> None:
    import repogym.cli.mcp as cli_mcp

    monkeypatch.setattr(cli_mcp, "BRIDGE_MODULE", "repogym.mcp.no_such_bridge")
    one_line_error(*invoke("mcp", "--openenv", "http://127.0.0.1:9"), "not available")


def test_explore_serves_mcp_with_the_hosts_it_listens_on(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    import uvicorn
    from starlette.routing import Mount

    from repogym.mcp.web import McpEndpoints

    seen: dict = {}
    monkeypatch.setattr(uvicorn, "run", lambda asgi, **kw: seen.update(app=asgi, **kw))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = CliRunner().invoke(
        app, ["explore", str(EXAMPLES), "--port", str(port), "--host", "0.0.0.0"]
    )
    assert res.exit_code == 0, res.output
    assert f"MCP (Streamable HTTP) at http://0.0.0.0:{port}/mcp/d/<env>" in res.output
    mounts = [r for r in seen["app"].routes if isinstance(r, Mount) and r.path == "/mcp/d"]
    assert len(mounts) == 1 and isinstance(mounts[0].app, McpEndpoints)
    assert mounts[0].app.allowed_hosts is None  # every interface: any Host, Origin still checked
    store = seen["app"].state.store
    assert store.ready.wait(120)  # background indexing done before its folder goes
    store.close()
