"""The environment tools' names, input schemas and argument checks (no SDK, no store).

:func:`tool_specs` gives each tool's JSON Schema (the subset :func:`check_arguments` checks:
objects of strings, integers and booleans with lengths, ranges, defaults, required keys and no
others); :class:`ToolInputError` carries the one line a refused call answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from repogym.explorer.facets import MAX_Q, TASK_FILTER_COLUMNS

__all__ = [
    "MAX_FILE_LINES",
    "MAX_LIMIT",
    "MAX_OFFSET",
    "TOOL_NAMES",
    "ToolInputError",
    "ToolOutput",
    "ToolSpec",
    "check_arguments",
    "tool_specs",
]

TOOL_NAMES = (
    "describe_environment",
    "list_tasks",
    "search_tasks",
    "get_task",
    "read_task_file",
    "random_task",
)
MAX_LIMIT = 100
"""Most tasks one list_tasks / search_tasks answer holds."""
MAX_OFFSET = 1_000_000
MAX_FILE_LINES = 5000
"""Most lines one read_task_file answer holds."""

FILTER_HELP = {
    "language": "programming language",
    "category": "category",
    "difficulty": "difficulty",
    "pipeline": "pipeline that made the task",
    "grading": "grading kind (tests, diff, reward-script, exact-match, llm-judge, unknown)",
    "network": "network access (no-network, public, unknown)",
}


class ToolInputError(ValueError):
    """A tool call that cannot be answered; the message is the one line the caller sees."""


@dataclass(frozen=True)
class ToolOutput:
    """A tool's answer: text for the model, optional structured content, more text blocks."""

    text: str
    structured: dict[str, Any] | None = None
    more: tuple[str, ...] = ()


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, description and input schema (JSON Schema, draft 2020-12 subset)."""

    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    idempotent: bool = True


# ---------------------------------------------------------------------------- schemas


def _obj(props: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


def _int(lo: int, hi: int, default: int | None, text: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "integer", "minimum": lo, "maximum": hi, "description": text}
    if default is not None:
        spec["default"] = default
    return spec


def _filters() -> dict[str, Any]:
    props: dict[str, Any] = {}
    for name in TASK_FILTER_COLUMNS:
        if name == "runnable":
            props[name] = {
                "type": "boolean",
                "description": "Only tasks that can (true) or cannot (false) run in repogym's "
                "local sandbox.",
            }
        else:
            props[name] = {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "description": f"Only tasks of this {FILTER_HELP.get(name, name)} "
                "(describe_environment lists the values).",
            }
    return props


_ENV_ARG: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": 300,
    "description": "Environment id (describe_environment without env lists them). "
    "Default: every environment.",
}
_TASK_ID: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": 300,
    "description": "Task id, as list_tasks / search_tasks give it.",
}
_WITHHELD = (
    " Answers are withheld: solutions, gold patches, hidden tests, expected outputs and "
    "answer-like metadata are never shown."
)
_DESCRIBE = (
    "Describe the environment: name, source, task count, how tasks are graded, what they "
    "run in, and the values of the task filters (language, category, difficulty, grading, "
    "…) with their counts."
)


def tool_specs(*, multi: bool = False) -> list[ToolSpec]:
    """The tools and their input schemas; with ``multi`` (a catalog of several environments)
    each takes an ``env`` argument."""
    env_arg: dict[str, Any] = {"env": dict(_ENV_ARG)} if multi else {}
    task_id = dict(_TASK_ID)
    offset = _int(0, MAX_OFFSET, 0, "Tasks to skip (for paging).")
    withheld = _WITHHELD
    describe = _DESCRIBE + (" Without env: every environment this server offers." if multi else "")
    return [
        ToolSpec("describe_environment", "Describe the environment", describe, _obj(dict(env_arg))),
        ToolSpec(
            "list_tasks",
            "List tasks",
            "List tasks (id, title, summary, grading, what they run in), a page at a time; "
            "optional filters narrow the list.",
            _obj(
                {
                    **env_arg,
                    "offset": offset,
                    "limit": _int(1, MAX_LIMIT, 20, "Tasks to return (1-100)."),
                    **_filters(),
                }
            ),
        ),
        ToolSpec(
            "search_tasks",
            "Search tasks",
            "Full-text search over the tasks' titles, instructions and facets (the explorer's "
            "search: words are matched as words, the last one as a prefix).",
            _obj(
                {
                    **env_arg,
                    "query": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_Q,
                        "description": "Words to look for.",
                    },
                    "limit": _int(1, MAX_LIMIT, 10, "Tasks to return (1-100)."),
                    "offset": offset,
                    **_filters(),
                },
                ("query",),
            ),
        ),
        ToolSpec(
            "get_task",
            "Read a task",
            "One task in full, as its explorer page shows it: the instruction, what it runs in, "
            "how it is graded, its grader script and task.toml, what was withheld, and its "
            "files." + withheld,
            _obj({**env_arg, "task_id": task_id}, ("task_id",)),
        ),
        ToolSpec(
            "read_task_file",
            "Read a file of a task",
            "The text of one file of a task (a path get_task lists and does not mark withheld), "
            "a range of lines at a time." + withheld,
            _obj(
                {
                    **env_arg,
                    "task_id": task_id,
                    "path": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 1000,
                        "description": "Path inside the task folder, e.g. environment/Dockerfile.",
                    },
                    "start_line": _int(1, 10_000_000, 1, "First line to return (from 1)."),
                    "max_lines": _int(1, MAX_FILE_LINES, 1000, "Lines to return (1-5000)."),
                },
                ("task_id", "path"),
            ),
        ),
        ToolSpec(
            "random_task",
            "A random task",
            "One task picked at random (optionally among those the filters leave), shown as "
            "get_task shows it. The same seed picks the same task." + withheld,
            _obj(
                {
                    **env_arg,
                    "seed": _int(0, 2**63 - 1, None, "Seed for a repeatable pick."),
                    **_filters(),
                }
            ),
            idempotent=False,
        ),
    ]


def check_arguments(schema: Mapping[str, Any], arguments: Any) -> dict[str, Any]:
    """Arguments checked against a tool's input schema (the subset :func:`tool_specs` uses),
    with defaults filled in; ``null`` counts as absent. Raises :class:`ToolInputError`."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise ToolInputError("arguments must be an object")
    props: Mapping[str, Any] = schema.get("properties", {})
    for key in arguments:
        if key not in props:
            known = ", ".join(props) or "none"
            raise ToolInputError(f"unknown argument {str(key)[:60]!r} (arguments: {known})")
    out: dict[str, Any] = {}
    for key in schema.get("required", ()):
        if arguments.get(key) is None:
            raise ToolInputError(f"{key} is required")
    for key, spec in props.items():
        value = arguments.get(key)
        if value is None:
            if "default" in spec:
                out[key] = spec["default"]
            continue
        out[key] = _check_value(key, spec, value)
    return out


def _check_value(key: str, spec: Mapping[str, Any], value: Any) -> Any:
    kind = spec.get("type")
    if kind == "string":
        if not isinstance(value, str):
            raise ToolInputError(f"{key} must be a string")
        if len(value) < spec.get("minLength", 0):
            raise ToolInputError(f"{key} must not be empty")
        if len(value) > spec.get("maxLength", 10**9):
            raise ToolInputError(f"{key} is longer than {spec['maxLength']} characters")
        if "\x00" in value:
            raise ToolInputError(f"{key} must not contain NUL characters")
        return value
    if kind == "integer":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ToolInputError(f"{key} must be a whole number")
        lo, hi = spec.get("minimum"), spec.get("maximum")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise ToolInputError(f"{key} must be between {lo} and {hi}, got {value}")
        return value
    if kind == "boolean":
        if not isinstance(value, bool):
            raise ToolInputError(f"{key} must be true or false")
        return value
    return value  # pragma: no cover - every schema above has one of the types
