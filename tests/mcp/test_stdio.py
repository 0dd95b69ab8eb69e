"""``repogym mcp PATH`` over stdio, driven by the ``mcp`` SDK's own client: the handshake,
the tools and their schemas, every tool's answer, tool errors, notifications, and no answer
of the example task in anything it says."""

from __future__ import annotations

import sys
import tempfile
from typing import Any

import pytest

pytest.importorskip("mcp")
import anyio  # noqa: E402
import mcp.types as types  # noqa: E402
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

from repogym import __version__  # noqa: E402
from repogym.mcp.environment import TOOL_NAMES, tool_specs  # noqa: E402
from tests.explorer.web_fixtures import EXAMPLES, REPO  # noqa: E402
from tests.mcp.fixtures import TASK, assert_no_secret, flatten  # noqa: E402

pytestmark = pytest.mark.slow  # each test starts a server process (about 3 s)


def run_client(args: list[str], talk: Any) -> Any:
    """Start ``repogym mcp ARGS`` and run ``talk(session)``; fail on any unparsable output."""
    problems: list[Exception] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            problems.append(message)

    async def main() -> Any:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "repogym.cli", "mcp", *args], cwd=str(REPO)
        )
        with tempfile.TemporaryFile("w+") as errlog, anyio.fail_after(120):
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write, message_handler=on_message) as session,
            ):
                result = await talk(session)
            errlog.seek(0)
            return result, errlog.read()

    result, stderr = anyio.run(main)
    assert not problems, problems  # nothing but protocol messages on stdout
    return result, stderr


def test_stdio_conversation() -> None:
    async def talk(s: ClientSession) -> dict[str, Any]:
        seen: dict[str, Any] = {"init": await s.initialize()}
        seen["tools"] = (await s.list_tools()).tools
        calls = {
            "describe": ("describe_environment", {}),
            "list": ("list_tasks", {"limit": 1, "offset": 1}),
            "search": ("search_tasks", {"query": "whitespace"}),
            "get": ("get_task", {"task_id": TASK}),
            "file": ("read_task_file", {"task_id": TASK, "path": "environment/Dockerfile"}),
            "random": ("random_task", {"seed": 1}),
            "unknown": ("get_task", {"task_id": "no-such-task"}),
            "negative": ("list_tasks", {"limit": -1}),
            "traversal": ("read_task_file", {"task_id": TASK, "path": "../hello-file/task.toml"}),
            "withheld": ("read_task_file", {"task_id": TASK, "path": "solution/patch.diff"}),
            "hidden": (
                "read_task_file",
                {"task_id": TASK, "path": "tests/files/tests/test_counts.py"},
            ),
            "extra": ("get_task", {"task_id": TASK, "env": "tasks"}),
            "no tool": ("no_such_tool", {}),
        }
        for key, (name, args) in calls.items():
            seen[key] = await s.call_tool(name, args)
        # notifications of every kind a client sends: the session goes on
        await s.send_notification(types.RootsListChangedNotification())
        await s.send_notification(
            types.CancelledNotification(params=types.CancelledNotificationParams(request_id=999))
        )
        await s.send_notification(
            types.ProgressNotification(
                params=types.ProgressNotificationParams(progress_token="t", progress=1.0)
            )
        )
        await s.send_ping()
        seen["after"] = await s.call_tool("get_task", {"task_id": "hello-file"})
        return seen

    seen, stderr = run_client([str(EXAMPLES)], talk)
    init = seen["init"]
    assert init.server_info.name == "repogym" and init.server_info.version == __version__
    assert init.server_info.title == "repogym environment tasks"
    assert init.capabilities.tools is not None and "withheld" in (init.instructions or "")
    tools = {t.name: t for t in seen["tools"]}
    assert tuple(tools) == TOOL_NAMES
    for spec in tool_specs():
        assert tools[spec.name].input_schema == spec.input_schema
        assert tools[spec.name].annotations.read_only_hint is True

    for key in ("describe", "list", "search", "get", "file", "random", "after"):
        assert not seen[key].is_error, (key, flatten(seen[key]))
    assert seen["describe"].structured_content["task_count"] == 2
    assert seen["list"].structured_content["offset"] == 1
    assert len(seen["list"].structured_content["items"]) == 1
    assert [c["id"] for c in seen["search"].structured_content["items"]] == [TASK]
    assert "## Instruction" in seen["get"].content[0].text
    dockerfile = (EXAMPLES / TASK / "environment" / "Dockerfile").read_text()
    assert seen["file"].content[1].text == dockerfile
    assert seen["random"].structured_content["id"] in {"hello-file", TASK}
    assert "Hello from repogym" in seen["after"].content[0].text

    errors = {
        "unknown": "no task 'no-such-task' in environment 'tasks'",
        "negative": "limit must be between 1 and 100, got -1",
        "traversal": "not a file of this task",
        "withheld": "solution/patch.diff is withheld: solution (the answer)",
        "hidden": "is withheld: hidden tests (grader data)",
        "extra": "unknown argument 'env'",
        "no tool": "unknown tool 'no_such_tool'",
    }
    for key, text in errors.items():
        result = seen[key]
        assert result.is_error, key
        assert text in result.content[0].text, (key, result.content[0].text)
        assert "\n" not in result.content[0].text

    for key, result in seen.items():
        if key not in ("init", "tools"):
            assert_no_secret(flatten(result), f"in {key}")
    assert "1 environment(s), 2 task(s)" in stderr


def test_stdio_task_folders_as_environments() -> None:
    """Two task folders: two environments, so the tools take an env argument."""

    async def talk(s: ClientSession) -> dict[str, Any]:
        await s.initialize()
        tools = {t.name: t for t in (await s.list_tools()).tools}
        described = await s.call_tool("describe_environment", {})
        task = await s.call_tool("get_task", {"task_id": TASK})
        listed = await s.call_tool("list_tasks", {"env": "hello-file"})
        return {"tools": tools, "described": described, "task": task, "listed": listed}

    seen, _ = run_client([str(EXAMPLES / "hello-file"), str(EXAMPLES / TASK)], talk)
    assert "env" in seen["tools"]["get_task"].input_schema["properties"]
    envs = {e["id"] for e in seen["described"].structured_content["environments"]}
    assert envs == {"hello-file", TASK}
    assert seen["task"].structured_content["env"] == TASK
    assert [c["id"] for c in seen["listed"].structured_content["items"]] == ["hello-file"]
    for result in seen.values():
        if not isinstance(result, dict):
            assert_no_secret(flatten(result))
