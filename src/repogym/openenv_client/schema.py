"""Cheap checks of tool arguments against a JSON Schema, before anything is sent to the server.

Checked: JSON types (``type``, also as a list), ``anyOf``/``oneOf`` (one branch must pass),
``allOf``, ``properties``, ``required``, ``additionalProperties`` (``false`` or a schema),
``items``, and local ``$ref`` (``#/$defs/…``, ``#/definitions/…``). Values (``enum``, ranges,
lengths, formats) are left to the server, which decides what it accepts and answers with its own
refusal. The first problem is returned as one line naming where it is.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_ARGUMENT_BYTES", "RESET_SCHEMA", "problem"]

MAX_ARGUMENT_BYTES = 4_000_000
MAX_DEPTH = 32

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}


def _is(value: Any, kind: str) -> bool:
    if kind in ("number", "integer") and isinstance(value, bool):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    allowed = _TYPES.get(kind)
    return True if allowed is None else isinstance(value, allowed)


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any] | None:
    for prefix in ("#/$defs/", "#/definitions/"):
        if ref.startswith(prefix):
            found = root.get(prefix[2:-1], {}).get(ref[len(prefix) :])
            return found if isinstance(found, dict) else None
    return None


def _where(path: str) -> str:
    return path or "arguments"


def _check(value: Any, schema: Any, root: dict[str, Any], path: str, depth: int) -> str | None:
    if depth > MAX_DEPTH:
        return f"{_where(path)}: nested too deeply"
    if not isinstance(schema, dict):
        return None  # true / unknown: anything goes
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _resolve(ref, root)
        if target is not None:
            problem = _check(value, target, root, path, depth + 1)
            if problem:
                return problem
    kind = schema.get("type")
    if isinstance(kind, str) and not _is(value, kind):
        return f"{_where(path)}: expected {kind}, got {_json_type(value)}"
    if (
        isinstance(kind, list)
        and kind
        and not any(_is(value, k) for k in kind if isinstance(k, str))
    ):
        return f"{_where(path)}: expected {' or '.join(map(str, kind))}, got {_json_type(value)}"
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            problems = [_check(value, b, root, path, depth + 1) for b in branches]
            if all(problems):
                kinds = [b.get("type") if isinstance(b, dict) else None for b in branches]
                if all(isinstance(k, str) for k in kinds) and not any(
                    _is(value, str(k)) for k in kinds
                ):
                    wanted = " or ".join(map(str, kinds))
                    return f"{_where(path)}: expected {wanted}, got {_json_type(value)}"
                return next(p for p in problems if p)
    for branch in schema.get("allOf") or []:
        problem = _check(value, branch, root, path, depth + 1)
        if problem:
            return problem
    if isinstance(value, dict):
        return _check_object(value, schema, root, path, depth)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            problem = _check(item, schema["items"], root, f"{path}[{i}]", depth + 1)
            if problem:
                return problem
    return None


def _check_object(
    value: dict[str, Any], schema: dict[str, Any], root: dict[str, Any], path: str, depth: int
) -> str | None:
    found = schema.get("properties")
    props: dict[str, Any] = found if isinstance(found, dict) else {}
    for name in schema.get("required") or []:
        if name not in value:
            return f"{_where(path)}: missing required {name!r}"
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        where = f"{path}.{name}" if path else name
        if name in props:
            problem = _check(item, props[name], root, where, depth + 1)
        elif extra is False:
            allowed = ", ".join(sorted(props)) or "none"
            return f"{_where(path)}: unknown field {name!r} (allowed: {allowed})"
        else:
            problem = _check(item, extra, root, where, depth + 1)
        if problem:
            return problem
    return None


def _json_type(value: Any) -> str:
    for name, kinds in _TYPES.items():
        if name != "integer" and _is(value, name) and isinstance(value, kinds):
            return name
    return type(value).__name__


def problem(arguments: Any, schema: dict[str, Any]) -> str | None:
    """The first reason ``arguments`` do not fit ``schema``, or None."""
    try:
        size = len(json.dumps(arguments, ensure_ascii=False).encode())
    except (TypeError, ValueError):
        return "arguments are not JSON"
    if size > MAX_ARGUMENT_BYTES:
        return f"arguments are {size} bytes, more than {MAX_ARGUMENT_BYTES}"
    return _check(arguments, schema, schema, "", 0)


RESET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task_id": {"type": "string", "description": "Task id or name (see list_tasks)."},
        "index": {"type": "integer", "minimum": 0, "description": "Task index (list_tasks)."},
        "seed": {"type": "integer", "description": "Picks a task (seed mod the task count)."},
    },
    "additionalProperties": False,
}
"""The arguments of an OpenEnv ``reset`` a client may send."""
