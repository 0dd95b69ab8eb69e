"""The bridge's limits that need no live OpenEnv server: one origin, no redirects, checked
arguments, the missing SDK."""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import pytest
from mcp import Client

from repogym.errors import RepogymError
from repogym.mcp import INSTALL_HINT
from repogym.mcp.bridge import create_bridge
from repogym.openenv_client import MAX_ARGUMENT_BYTES, Origin, problem
from repogym.openenv_client import OpenEnvClientError as BridgeError
from tests.mcp_bridge.conftest import Local

ACTION = {
    "type": "object",
    "properties": {"type": {"type": "string"}, "command": {"type": "string"}},
    "required": ["type"],
    "additionalProperties": False,
}
SCHEMA = (200, {}, json.dumps({"action": ACTION}).encode())


def moved(to: str) -> tuple[int, dict[str, str], bytes]:
    return 302, {"location": to}, b""


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("ftp://host/x", "http:// or https://"),
        ("http:///x", "no host"),
        ("http://user:pw@host:1", "credentials"),
        ("http://host:1/?a=b", "no query"),
        ("http://host:99999", "bad port"),
    ],
)
def test_origin_refuses_odd_urls(url: str, expected: str) -> None:
    with pytest.raises(BridgeError, match=expected):
        Origin.parse(url)


def test_origin_builds_and_checks_its_own_urls() -> None:
    origin = Origin.parse("https://Env.Example:8443/prefix/")
    assert origin.http("/schema") == "https://env.example:8443/prefix/schema"
    assert origin.ws("/ws") == "wss://env.example:8443/prefix/ws"
    origin.check(origin.ws("/ws"))
    for other in ("https://env.example:8444/x", "http://env.example:8443/x", "https://evil/x"):
        with pytest.raises(BridgeError, match="refused to contact"):
            origin.check(other)


def test_a_redirect_is_refused_and_never_followed(local: type[Local]) -> None:
    elsewhere = local({})
    for target in (f"{elsewhere.url}/schema", "/schema-moved"):
        start = local({("GET", "/schema"): moved(target)})
        with pytest.raises(BridgeError, match="HTTP 302 redirect .*refused"):
            create_bridge(start.url)
        assert start.hits == [("GET", "/schema")]
    assert elsewhere.hits == []


def test_a_redirect_of_an_optional_route_is_refused_too(local: type[Local]) -> None:
    elsewhere = local({})
    start = local({("GET", "/schema"): SCHEMA, ("GET", "/tools"): moved(f"{elsewhere.url}/t")})
    with pytest.raises(BridgeError, match=r"/tools: HTTP 302 redirect to 127\.0\.0\.1"):
        create_bridge(start.url)
    assert elsewhere.hits == []


def test_a_websocket_redirect_is_refused(local: type[Local]) -> None:
    elsewhere = local({})
    start = local({("GET", "/schema"): SCHEMA, ("GET", "/ws"): moved(f"{elsewhere.url}/ws")})
    bridge = create_bridge(start.url)

    async def main() -> None:
        async with Client(bridge) as client:
            result = await client.call_tool("reset", {})
            assert result.is_error
            text = result.content[0].text  # type: ignore[union-attr]
            assert "/ws: HTTP 302 redirect" in text and "refused" in text

    anyio.run(main)
    assert ("GET", "/ws") in start.hits
    assert elsewhere.hits == []


def test_not_an_openenv_server(local: type[Local]) -> None:
    start = local({("GET", "/schema"): (200, {}, b'{"hello": 1}')})
    with pytest.raises(BridgeError, match="no OpenEnv action schema"):
        create_bridge(start.url)
    with pytest.raises(RepogymError, match="cannot reach"):
        create_bridge(f"http://127.0.0.1:{_closed_port()}")


def test_limits_must_make_sense(local: type[Local]) -> None:
    start = local({("GET", "/schema"): SCHEMA})
    for kw in ({"max_sessions": 0}, {"max_calls_per_minute": 0}, {"idle_timeout_s": 0}):
        with pytest.raises(BridgeError, match="at least 1"):
            create_bridge(start.url, **kw)  # type: ignore[arg-type]


def test_without_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp.server", None)
    with pytest.raises(RepogymError) as caught:
        create_bridge("http://127.0.0.1:1")
    assert INSTALL_HINT in str(caught.value)
    assert "pip install 'repogym[mcp]'" in str(caught.value)


def test_schema_checks() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "$defs": {"Point": {"type": "object", "required": ["x"], "properties": {"x": {}}}},
        "properties": {
            "n": {"type": "integer"},
            "t": {"anyOf": [{"type": "number"}, {"type": "null"}]},
            "p": {"$ref": "#/$defs/Point"},
            "xs": {"type": "array", "items": {"type": "string"}},
            "kind": {"type": "string", "enum": ["a"]},
        },
        "additionalProperties": False,
    }
    assert problem({"n": 1, "t": None, "p": {"x": 0}, "xs": ["a"], "kind": "other"}, schema) is None
    assert problem({"n": 2.0}, schema) is None
    assert problem({"n": True}, schema) == "n: expected integer, got boolean"
    assert problem({"t": "1"}, schema) == "t: expected number or null, got string"
    assert problem({"p": {}}, schema) == "p: missing required 'x'"
    assert problem({"xs": ["a", 1]}, schema) == "xs[1]: expected string, got number"
    assert "unknown field 'z'" in (problem({"z": 1}, schema) or "")
    assert problem([], schema) == "arguments: expected object, got array"
    big = {"xs": ["x" * MAX_ARGUMENT_BYTES]}
    assert "bytes, more than" in (problem(big, schema) or "")


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_cli_unreachable_server_is_one_line_exit_2() -> None:
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-m", "repogym.cli", "mcp", "--openenv", "http://127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
