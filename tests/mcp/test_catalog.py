"""The MCP tools' logic over a real explorer store (no transport): arguments, paging, filters,
errors, and answers withheld exactly as on the explorer's pages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from repogym.explorer.store import Store, open_store
from repogym.mcp.environment import (
    TOOL_NAMES,
    EnvironmentCatalog,
    ToolInputError,
    ToolOutput,
    check_arguments,
    tool_specs,
)
from tests.conftest import write_task
from tests.explorer.web_fixtures import EXAMPLES, MARK, planted_dataset
from tests.mcp.fixtures import TASK, assert_no_secret


def text_of(out: ToolOutput) -> str:
    return "\n".join([out.text, *out.more, json.dumps(out.structured or {}, ensure_ascii=False)])


@pytest.fixture(scope="module")
def extra(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``extra-set``: a second ``hello-file`` (an id the examples have too) and a task with a
    binary file, a long file and control characters."""
    root = tmp_path_factory.mktemp("mcp-extra") / "extra-set"
    write_task(root, "hello-file")
    write_task(
        root,
        "odd-files",
        instruction="Odd \x1b[31mred\x1b[0m text.\r\nSecond line.\n",
        files={
            "environment/data.bin": b"\x00\x01\x02binary",
            "environment/long.txt": "".join(f"line {i}\n" for i in range(1, 6001)),
            "environment/ctrl.txt": "a\x1b]0;title\x07b\r\nc\n",
            "environment/empty.txt": "",
        },
    )
    return root


@pytest.fixture(scope="module")
def store(extra: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    planted = planted_dataset(tmp_path_factory.mktemp("mcp-planted"))
    s = open_store([str(EXAMPLES), str(planted), str(extra)])
    yield s
    s.close()


@pytest.fixture(scope="module")
def one(store: Store) -> EnvironmentCatalog:
    return EnvironmentCatalog(store, "tasks")


@pytest.fixture(scope="module")
def every(store: Store) -> EnvironmentCatalog:
    return EnvironmentCatalog(store)


def refused(cat: EnvironmentCatalog, tool: str, args: Any) -> str:
    with pytest.raises(ToolInputError) as exc:
        cat.call(tool, args)
    message = str(exc.value)
    assert "\n" not in message
    return message


# ---------------------------------------------------------------------------- schemas


def test_tools_and_schemas() -> None:
    for multi in (False, True):
        specs = tool_specs(multi=multi)
        assert tuple(s.name for s in specs) == TOOL_NAMES
        for s in specs:
            schema = s.input_schema
            assert schema["type"] == "object" and schema["additionalProperties"] is False
            assert ("env" in schema["properties"]) is multi
            assert s.description and s.title
            json.dumps(schema)  # plain JSON
    by_name = {s.name: s.input_schema for s in tool_specs()}
    assert by_name["search_tasks"]["required"] == ["query"]
    assert by_name["get_task"]["required"] == ["task_id"]
    assert by_name["read_task_file"]["required"] == ["task_id", "path"]
    assert by_name["list_tasks"]["properties"]["limit"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 100,
        "description": "Tasks to return (1-100).",
        "default": 20,
    }
    assert by_name["list_tasks"]["properties"]["runnable"]["type"] == "boolean"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([1, 2], "arguments must be an object"),
        ({"bogus": 1}, "unknown argument 'bogus'"),
        ({"limit": -1}, "limit must be between 1 and 100, got -1"),
        ({"limit": 0}, "limit must be between 1 and 100"),
        ({"limit": 101}, "limit must be between 1 and 100"),
        ({"limit": "5"}, "limit must be a whole number"),
        ({"limit": True}, "limit must be a whole number"),
        ({"limit": 2.5}, "limit must be a whole number"),
        ({"offset": -3}, "offset must be between 0 and 1000000"),
        ({"language": 3}, "language must be a string"),
        ({"language": ""}, "language must not be empty"),
        ({"language": "x" * 201}, "language is longer than 200 characters"),
        ({"runnable": "yes"}, "runnable must be true or false"),
    ],
)
def test_bad_arguments(args: Any, message: str) -> None:
    schema = {s.name: s.input_schema for s in tool_specs()}["list_tasks"]
    with pytest.raises(ToolInputError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        check_arguments(schema, args)


def test_defaults_and_null_arguments() -> None:
    schema = {s.name: s.input_schema for s in tool_specs()}["list_tasks"]
    assert check_arguments(schema, None) == {"offset": 0, "limit": 20}
    assert check_arguments(schema, {"limit": 5.0, "language": None}) == {"offset": 0, "limit": 5}
    read = {s.name: s.input_schema for s in tool_specs()}["read_task_file"]
    with pytest.raises(ToolInputError, match="^path is required$"):
        check_arguments(read, {"task_id": "x"})
    with pytest.raises(ToolInputError, match="NUL"):
        check_arguments(read, {"task_id": "x", "path": "a\x00b"})


# ---------------------------------------------------------------------------- the tools


def test_describe_environment(one: EnvironmentCatalog) -> None:
    assert one.env == "tasks" and "env" not in one.specs["get_task"].input_schema["properties"]
    out = one.call("describe_environment", {})
    info = out.structured or {}
    assert info["id"] == "tasks" and info["task_count"] == 2 and info["kind"] == "harbor"
    assert info["source"] and info["runs_in"]
    assert set(info["grading"]) == {"tests", "reward-script"}
    assert info["facets"]["difficulty"] == {"easy": 2}
    assert "## How tasks are graded" in out.text and "fail-to-pass" in out.text
    assert "difficulty: easy (2)" in out.text


def test_list_tasks_pages_by_offset(one: EnvironmentCatalog) -> None:
    whole = one.call("list_tasks", {})
    ids = [c["id"] for c in (whole.structured or {})["items"]]
    assert sorted(ids) == ["hello-file", TASK] and (whole.structured or {})["total"] == 2
    second = one.call("list_tasks", {"offset": 1, "limit": 1}).structured or {}
    assert [c["id"] for c in second["items"]] == ids[1:] and second["next_offset"] is None
    first = one.call("list_tasks", {"offset": 0, "limit": 1})
    assert (first.structured or {})["next_offset"] == 1 and "More: offset=1." in first.text
    past = one.call("list_tasks", {"offset": 5})
    assert (past.structured or {})["items"] == [] and "none at offset 5" in past.text


def test_offset_windows_span_two_store_pages(every: EnvironmentCatalog) -> None:
    ids = [c["id"] for c in (every.call("list_tasks", {"limit": 100}).structured or {})["items"]]
    assert len(ids) == 6
    for offset in range(6):
        for limit in (1, 2, 4):
            got = every.call("list_tasks", {"offset": offset, "limit": limit}).structured or {}
            assert [c["id"] for c in got["items"]] == ids[offset : offset + limit]


def test_list_filters(one: EnvironmentCatalog) -> None:
    tests = one.call("list_tasks", {"grading": "tests"}).structured or {}
    assert [c["id"] for c in tests["items"]] == [TASK]
    none = one.call("list_tasks", {"category": "no-such-category"})
    assert (none.structured or {})["total"] == 0 and "no task" in none.text
    runnable = one.call("list_tasks", {"runnable": True}).structured or {}
    assert runnable["total"] == 2


def test_search_tasks(one: EnvironmentCatalog, every: EnvironmentCatalog) -> None:
    hit = one.call("search_tasks", {"query": "whitespace"})
    assert [c["id"] for c in (hit.structured or {})["items"]] == [TASK]
    assert "Tasks matching 'whitespace' in tasks" in hit.text
    # operators are words: no FTS syntax error, no crash
    for q in ['"', "NEAR(a b)", "title:*", "a OR", ")("]:
        one.call("search_tasks", {"query": q})
    assert refused(one, "search_tasks", {"query": "   "}) == "query must hold a word"
    assert refused(one, "search_tasks", {}) == "query is required"
    assert "longer than 500" in refused(one, "search_tasks", {"query": "x" * 501})
    words = every.call("search_tasks", {"query": "words"}).structured or {}
    assert {c["env"] for c in words["items"]} == {"secret-set", "tasks"}
    inside = every.call("search_tasks", {"query": "words", "env": "secret-set"}).structured or {}
    assert [c["id"] for c in inside["items"]] == ["plain-task"]


def test_get_task_shows_the_page(one: EnvironmentCatalog) -> None:
    out = one.call("get_task", {"task_id": TASK})
    for heading in ("## Instruction", "## Environment", "## How it is graded", "## task.toml"):
        assert heading in out.text
    assert "## What was withheld" in out.text and "solution (the answer)" in out.text
    assert "- solution/patch.diff (withheld: solution (the answer))" in out.text
    assert "hidden tests (grader data)" in out.text
    meta = out.structured or {}
    assert meta["id"] == TASK and meta["env"] == "tasks"
    assert {f["path"]: f["withheld"] for f in meta["files"]}["solution/solve.sh"]
    assert_no_secret(text_of(out), "in get_task")


def test_unknown_task_and_environment(one: EnvironmentCatalog, every: EnvironmentCatalog) -> None:
    assert refused(one, "get_task", {"task_id": "nope"}).startswith(
        "no task 'nope' in environment 'tasks'"
    )
    assert refused(every, "get_task", {"task_id": "nope"}).startswith("no task 'nope' in any")
    assert refused(every, "list_tasks", {"env": "nope"}).startswith("no environment 'nope'")
    assert refused(one, "no_such_tool", {}).startswith("unknown tool 'no_such_tool'")


def test_several_environments(every: EnvironmentCatalog) -> None:
    assert every.env is None and "env" in every.specs["get_task"].input_schema["properties"]
    out = every.call("describe_environment", {})
    envs = {e["id"] for e in (out.structured or {})["environments"]}
    assert envs == {"tasks", "secret-set", "extra-set"}
    one = every.call("describe_environment", {"env": "extra-set"}).structured or {}
    assert one["task_count"] == 2
    # an id two environments hold needs env
    message = refused(every, "get_task", {"task_id": "hello-file"})
    assert "several environments" in message and "give env" in message
    got = every.call("get_task", {"task_id": "hello-file", "env": "extra-set"})
    assert (got.structured or {})["env"] == "extra-set"
    assert (every.call("get_task", {"task_id": TASK}).structured or {})["env"] == "tasks"


def test_read_task_file(one: EnvironmentCatalog) -> None:
    out = one.call("read_task_file", {"task_id": TASK, "path": "tests/test.sh"})
    assert out.more == ((EXAMPLES / TASK / "tests" / "test.sh").read_text(),)
    data = (EXAMPLES / TASK / "tests" / "test.sh").read_bytes()
    lines = len(data.decode().splitlines())
    assert out.text.startswith(f"tests/test.sh ({len(data)} bytes): lines 1-{lines} of {lines}")
    meta = out.structured or {}
    assert meta["total_lines"] == lines and "next_start_line" not in meta


@pytest.mark.parametrize(
    "path",
    [
        "../hello-file/task.toml",
        "tests/../solution/patch.diff",
        "/etc/passwd",
        "./task.toml",
        "tests//test.sh",
        "tests\\test.sh",
        "environment/%2e%2e/solution/patch.diff",
        "nope.txt",
    ],
)
def test_read_task_file_refuses_paths(one: EnvironmentCatalog, path: str) -> None:
    assert refused(one, "read_task_file", {"task_id": TASK, "path": path}).startswith(
        "not a file of this task"
    )


@pytest.mark.parametrize(
    "path", ["solution/patch.diff", "solution/solve.sh", "tests/files/tests/test_counts.py"]
)
def test_read_task_file_refuses_withheld(one: EnvironmentCatalog, path: str) -> None:
    message = refused(one, "read_task_file", {"task_id": TASK, "path": path})
    assert message.startswith(f"{path} is withheld: ")


def test_read_task_file_lines_binary_and_controls(every: EnvironmentCatalog) -> None:
    env = {"env": "extra-set", "task_id": "odd-files"}
    long = every.call("read_task_file", {**env, "path": "environment/long.txt"})
    assert long.more[0].splitlines() == [f"line {i}" for i in range(1, 1001)]
    assert (long.structured or {})["next_start_line"] == 1001 and "start_line=1001" in long.text
    tail = every.call(
        "read_task_file",
        {**env, "path": "environment/long.txt", "start_line": 5999, "max_lines": 5000},
    )
    assert tail.more[0] == "line 5999\nline 6000\n"
    assert "past the end" in refused(
        every, "read_task_file", {**env, "path": "environment/long.txt", "start_line": 6001}
    )
    binary = every.call("read_task_file", {**env, "path": "environment/data.bin"})
    assert "binary file of 9 bytes" in binary.text and not binary.more
    ctrl = every.call("read_task_file", {**env, "path": "environment/ctrl.txt"})
    assert ctrl.more == ("a\\x1b]0;title\\x07b\nc\n",)
    empty = every.call("read_task_file", {**env, "path": "environment/empty.txt"})
    assert "empty" in empty.text and empty.more == ("",)
    page = every.call("get_task", env).text
    assert "\x1b" not in page and "\\x1b[31mred" in page


def test_random_task(one: EnvironmentCatalog, every: EnvironmentCatalog) -> None:
    picks = {(one.call("random_task", {"seed": s}).structured or {})["id"] for s in range(12)}
    assert picks == {"hello-file", TASK}
    same = [(one.call("random_task", {"seed": 7}).structured or {})["id"] for _ in range(3)]
    assert len(set(same)) == 1
    graded = one.call("random_task", {"grading": "tests"})
    assert (graded.structured or {})["id"] == TASK and "## Instruction" in graded.text
    assert refused(one, "random_task", {"language": "cobol"}) == "no task matches these filters"
    got = every.call("random_task", {"env": "secret-set", "seed": 1}).structured or {}
    assert got["env"] == "secret-set"


def test_no_answer_in_any_output(every: EnvironmentCatalog, store: Store) -> None:
    """Every tool over every task and every listed file: no planted answer, no example answer."""
    outputs = [every.call("describe_environment", {})]
    for env in ("tasks", "secret-set", "extra-set"):
        outputs.append(every.call("describe_environment", {"env": env}))
        outputs.append(every.call("list_tasks", {"env": env, "limit": 100}))
        for q in ("answer", "gold", "expected", "solution", "word"):
            outputs.append(every.call("search_tasks", {"env": env, "query": q}))
        marked = every.call("search_tasks", {"env": env, "query": MARK}).structured or {}
        assert marked["total"] == 0  # the planted answers are not even searchable
        for card in (every.call("list_tasks", {"env": env}).structured or {})["items"]:
            args = {"env": env, "task_id": card["id"]}
            page = every.call("get_task", args)
            outputs.append(page)
            for f in (page.structured or {})["files"]:
                try:
                    outputs.append(every.call("read_task_file", {**args, "path": f["path"]}))
                except ToolInputError as exc:
                    assert f["withheld"] or "not a file" in str(exc), str(exc)
    for seed in range(10):
        outputs.append(every.call("random_task", {"seed": seed}))
    for out in outputs:
        text = text_of(out)
        assert MARK not in text
        assert_no_secret(text)


def test_pending_task_is_a_tool_error() -> None:
    class Pending:
        def env(self, env_id: str) -> dict | None:
            return {"id": env_id} if env_id == "e" else None

        def task(self, env_id: str, task_id: str) -> dict | None:
            return {"env": env_id, "id": task_id, "sections": [], "files": []}

    cat = EnvironmentCatalog(Pending(), "e")
    assert "still being indexed" in refused(cat, "get_task", {"task_id": "t"})
