"""The explorer's Streamable HTTP endpoints ``/mcp/d/<env>`` on a real uvicorn server, driven
by the ``mcp`` SDK's own client, plus raw requests for what a client would never send: foreign
origins and hosts, unknown environments, stray notifications."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")
import anyio  # noqa: E402
import httpx  # noqa: E402
import mcp.types as types  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from repogym.explorer.store import open_store  # noqa: E402
from repogym.explorer.web import create_app  # noqa: E402
from repogym.mcp.environment import TOOL_NAMES, tool_specs  # noqa: E402
from repogym.mcp.web import McpEndpoints, allowed_hosts_for, explorer_mounts  # noqa: E402
from tests.explorer.web_fixtures import (  # noqa: E402
    EXAMPLES,
    MARK,
    planted_dataset,
    serve,
    serve_with_lifespan,
)
from tests.mcp.fixtures import TASK, assert_no_secret, flatten  # noqa: E402

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    planted = planted_dataset(tmp_path_factory.mktemp("mcp-http"))
    s = open_store([str(EXAMPLES), str(planted)])
    yield s
    s.close()


@pytest.fixture(scope="module")
def base(store: Any) -> Iterator[str]:
    with serve_with_lifespan(create_app(store, mounts=explorer_mounts)) as url:
        yield url


def session(url: str, talk: Any) -> Any:
    async def main() -> Any:
        with anyio.fail_after(60):
            async with (
                streamable_http_client(url) as (read, write),
                ClientSession(read, write) as s,
            ):
                return await talk(s)

    return anyio.run(main)


def sse_messages(text: str) -> list[dict]:
    """The JSON-RPC messages of an SSE body (or a JSON one)."""
    if text.lstrip().startswith("{"):
        return [json.loads(text)]
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


def test_http_conversation(base: str) -> None:
    async def talk(s: ClientSession) -> dict[str, Any]:
        seen: dict[str, Any] = {"init": await s.initialize()}
        seen["tools"] = (await s.list_tools()).tools
        for key, name, args in [
            ("describe", "describe_environment", {}),
            ("list", "list_tasks", {"offset": 0, "limit": 5}),
            ("search", "search_tasks", {"query": "word", "limit": 3}),
            ("get", "get_task", {"task_id": TASK}),
            ("file", "read_task_file", {"task_id": TASK, "path": "tests/f2p.json"}),
            ("random", "random_task", {}),
            ("unknown", "get_task", {"task_id": "nope"}),
            ("negative", "search_tasks", {"query": "word", "limit": -5}),
            ("traversal", "read_task_file", {"task_id": TASK, "path": "tests/../../x"}),
            ("withheld", "read_task_file", {"task_id": TASK, "path": "solution/solve.sh"}),
            ("bad type", "get_task", {"task_id": 42}),
        ]:
            seen[key] = await s.call_tool(name, args)
        await s.send_notification(types.RootsListChangedNotification())
        await s.send_notification(
            types.CancelledNotification(params=types.CancelledNotificationParams(request_id=77))
        )
        await s.send_ping()
        seen["after"] = await s.call_tool("list_tasks", {})
        return seen

    seen = session(base + "/mcp/d/tasks", talk)
    init = seen["init"]
    assert init.server_info.name == "repogym"
    assert init.server_info.title == "repogym environment tasks"
    assert tuple(t.name for t in seen["tools"]) == TOOL_NAMES
    schemas = {s.name: s.input_schema for s in tool_specs()}
    assert all(t.input_schema == schemas[t.name] for t in seen["tools"])
    for key in ("describe", "list", "search", "get", "file", "random", "after"):
        assert not seen[key].is_error, (key, flatten(seen[key]))
    assert seen["describe"].structured_content["id"] == "tasks"
    # scoped to its environment: the other one's tasks are not listed
    assert {c["env"] for c in seen["list"].structured_content["items"]} == {"tasks"}
    assert seen["after"].structured_content["total"] == 2
    assert json.loads(seen["file"].content[1].text) == json.loads(
        (EXAMPLES / TASK / "tests" / "f2p.json").read_text()
    )
    for key, text in {
        "unknown": "no task 'nope' in environment 'tasks'",
        "negative": "limit must be between 1 and 100, got -5",
        "traversal": "not a file of this task",
        "withheld": "solution/solve.sh is withheld: solution (the answer)",
        "bad type": "task_id must be a string",
    }.items():
        assert seen[key].is_error and text in seen[key].content[0].text, key
    for key, result in seen.items():
        if key not in ("init", "tools"):
            assert_no_secret(flatten(result), f"in {key}")


def test_each_environment_is_its_own_endpoint(base: str) -> None:
    async def talk(s: ClientSession) -> list[Any]:
        init = await s.initialize()
        listed = await s.call_tool("list_tasks", {"limit": 100})
        pages = [
            await s.call_tool("get_task", {"task_id": c["id"]})
            for c in listed.structured_content["items"]
        ]
        files = [
            await s.call_tool("read_task_file", {"task_id": "leaky-task", "path": p})
            for p in ("solution/patch.diff", "tests/hidden.patch", "tests/rubric.json")
        ]
        return [init, listed, *pages, *files]

    init, listed, *rest = session(base + "/mcp/d/secret-set", talk)
    assert init.server_info.title == "repogym environment secret-set"
    assert {c["id"] for c in listed.structured_content["items"]} == {"leaky-task", "plain-task"}
    assert all(r.is_error for r in rest[-3:])
    for result in [listed, *rest]:
        assert MARK not in flatten(result)


def test_modern_protocol_client(base: str) -> None:
    """The SDK's high-level ``Client`` (the 2026-07-28 protocol, no handshake) works too."""
    from mcp import Client

    async def main() -> list[Any]:
        with anyio.fail_after(60):
            async with Client(base + "/mcp/d/tasks") as client:
                found = await client.call_tool("search_tasks", {"query": "greeting"})
                refused = await client.call_tool(
                    "read_task_file", {"task_id": "hello-file", "path": "solution/solve.sh"}
                )
                return [found, refused]

    found, refused = anyio.run(main)
    assert [c["id"] for c in found.structured_content["items"]] == ["hello-file"]
    assert refused.is_error and "withheld: solution (the answer)" in refused.content[0].text


def test_foreign_origin_and_host_are_refused(base: str) -> None:
    url = base + "/mcp/d/tasks"
    evil = httpx.post(url, headers={**HEADERS, "Origin": "https://evil.example"}, json=INIT)
    assert evil.status_code == 403 and "Origin" in evil.json()["error"]["message"]
    assert "mcp-session-id" not in evil.headers
    null = httpx.post(url, headers={**HEADERS, "Origin": "null"}, json=INIT)
    assert null.status_code == 403
    stream = httpx.get(
        url, headers={"Accept": "text/event-stream", "Origin": "http://evil.example"}
    )
    assert stream.status_code == 403
    port = base.rsplit(":", 1)[1]
    rebound = httpx.post(url, headers={**HEADERS, "Host": f"evil.example:{port}"}, json=INIT)
    assert rebound.status_code == 421
    # the same origin, and a client that sends none, are served
    same = httpx.post(url, headers={**HEADERS, "Origin": base}, json=INIT)
    assert same.status_code == 200 and same.headers.get("mcp-session-id")
    plain = httpx.post(url, headers=HEADERS, json=INIT)
    assert plain.status_code == 200
    assert sse_messages(plain.text)[0]["result"]["serverInfo"]["name"] == "repogym"


def test_unknown_environment_and_bad_requests(base: str) -> None:
    missing = httpx.post(base + "/mcp/d/no-such-env", headers=HEADERS, json=INIT)
    assert missing.status_code == 404 and "no environment" in missing.json()["error"]["message"]
    bare = httpx.post(base + "/mcp/d/", headers=HEADERS, json=INIT)
    assert bare.status_code == 404
    wrong_type = httpx.post(
        base + "/mcp/d/tasks", headers={**HEADERS, "Content-Type": "text/plain"}, content="{}"
    )
    assert wrong_type.status_code in (400, 415)
    junk = httpx.post(base + "/mcp/d/tasks", headers=HEADERS, content=b"{not json")
    assert junk.status_code == 400
    # the explorer itself is still there
    assert httpx.get(base + "/").status_code == 200
    assert httpx.get(base + "/api/tasks/tasks/" + TASK).status_code == 200


def test_stray_notifications_keep_the_session(base: str) -> None:
    url = base + "/mcp/d/tasks"
    with httpx.Client(headers=HEADERS, timeout=30) as client:
        opened = client.post(url, json=INIT)
        sid = opened.headers["mcp-session-id"]
        hdrs = {"mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}
        for note in (
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "method": "notifications/no-such-thing", "params": {"x": 1}},
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}},
        ):
            assert client.post(url, json=note, headers=hdrs).status_code == 202
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "get_task", "arguments": {"task_id": "../../etc"}},
        }
        answer = sse_messages(client.post(url, json=call, headers=hdrs).text)[-1]
        assert answer["result"]["isError"] is True
        listed = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
        tools = sse_messages(client.post(url, json=listed, headers=hdrs).text)[-1]
        assert len(tools["result"]["tools"]) == len(TOOL_NAMES)
        assert client.delete(url, headers=hdrs).status_code in (200, 204)
        gone = client.post(url, json=listed, headers=hdrs)
        assert gone.status_code == 404


def test_without_lifespan_or_with_mcp_off(store: Any) -> None:
    with serve(create_app(store, mounts=explorer_mounts)) as url:  # lifespan off
        res = httpx.post(url + "/mcp/d/tasks", headers=HEADERS, json=INIT)
        assert res.status_code == 503 and "lifespan" in res.json()["error"]["message"]
    with serve(create_app(store, mcp=False, mounts=explorer_mounts)) as url:
        assert httpx.post(url + "/mcp/d/tasks", headers=HEADERS, json=INIT).status_code == 404


def test_least_recently_used_environments_are_closed(store: Any) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    endpoints = McpEndpoints(store, max_envs=1)
    app = Starlette(routes=[Mount("/mcp/d", endpoints)], lifespan=endpoints.lifespan)

    async def title(s: ClientSession) -> str:
        return (await s.initialize()).server_info.title or ""

    with serve_with_lifespan(app) as url:
        for env in ("tasks", "secret-set", "tasks"):
            assert session(f"{url}/mcp/d/{env}", title) == f"repogym environment {env}"
            assert list(endpoints._managers) == [env]


def test_without_the_sdk(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import repogym.mcp.web as web

    def missing() -> None:
        raise ImportError("No module named 'mcp'")

    monkeypatch.setattr(web, "_import_sdk", missing)
    with serve_with_lifespan(create_app(store, mounts=explorer_mounts)) as url:
        res = httpx.post(url + "/mcp/d/tasks", headers=HEADERS, json=INIT)
        assert res.status_code == 501
        assert "pip install 'repogym[mcp]'" in res.json()["error"]["message"]
        assert httpx.get(url + "/").status_code == 200


def test_allowed_hosts() -> None:
    assert allowed_hosts_for("127.0.0.1") == ["127.0.0.1", "localhost", "[::1]"]
    assert allowed_hosts_for("::1") == ["127.0.0.1", "localhost", "[::1]"]
    assert allowed_hosts_for("10.1.2.3") == ["127.0.0.1", "localhost", "[::1]", "10.1.2.3"]
    assert allowed_hosts_for("fe80::1")[-1] == "[fe80::1]"
    assert allowed_hosts_for("0.0.0.0") is None and allowed_hosts_for("::") is None
    local = McpEndpoints(None)
    assert local.refusal({"host": "127.0.0.1:8080"}) is None
    assert local.refusal({"host": "localhost"}) is None
    assert local.refusal({"host": "127.0.0.1.evil.example:80"}) == (421, "Invalid Host header")
    assert local.refusal({"host": "localhost:80x"}) is not None
    assert local.refusal({"host": "127.0.0.1:8080", "origin": "http://localhost:3000"}) is None
    assert local.refusal({"host": "127.0.0.1:8080", "origin": "http://evil.example"})[0] == 403
    anywhere = McpEndpoints(None, allowed_hosts=None)
    assert anywhere.refusal({"host": "explorer.example"}) is None
    same = {"host": "explorer.example", "origin": "https://explorer.example"}
    assert anywhere.refusal(same) is None
    cross = {"host": "explorer.example", "origin": "https://evil.example"}
    assert anywhere.refusal(cross)[0] == 403


def test_import_repogym_does_not_import_the_sdk(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys, repogym, repogym.mcp, repogym.mcp.web, repogym.cli;"
        "assert 'mcp' not in sys.modules, sorted(m for m in sys.modules if m.startswith('mcp'))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
