"""The OpenEnv RFC 008 auto-validation declarations of an exported package (no ``openenv``
import here).

``openenv.yaml`` gets a ``validation:`` block (reward contract, resource budget, capabilities,
type tags, network posture and the runtime ``execution`` binding), and ``validation/runtime.json``
the runtime plan: one reset on the first task and a few agent actions, each of which must come
back with a finite reward in the declared range. Everything here is derived from the tasks'
``task.toml``; nothing is measured at export time.
"""

from __future__ import annotations

import json
from typing import Any

from repogym.openenv.episode import AGENT_ACTIONS
from repogym.taskdir import Task

PLAN_PATH = "validation/runtime.json"
REWARD_RANGE = (0.0, 1.0)
FLOOR_MARGIN = 0.5
"""Declared gap between the best reward and the adversarial floor (RFC 008 ``floor_margin``)."""
PLAN_EPISODE_ID = "openenv-validation"


def _first(tasks: list[Task]) -> Task:
    return sorted(tasks, key=lambda t: t.id)[0]


def resources(tasks: list[Task]) -> dict[str, Any]:
    """The budget of the most demanding task: an episode is the agent phase plus the verifier."""
    envs = [t.config.environment for t in tasks]
    timeout = max(t.config.agent.timeout_sec + t.config.verifier.timeout_sec for t in tasks)
    return {
        "cpu": float(max(e.cpus for e in envs)),
        "memory_mb": max(e.memory_mb for e in envs),
        "disk_mb": max(e.storage_mb for e in envs),
        "episode_timeout_s": float(timeout),
    }


def validation_block(tasks: list[Task], task_rel: dict[str, str]) -> dict[str, Any]:
    """The ``validation:`` mapping of ``openenv.yaml``. ``task_rel``: task id → its folder in
    the package (``tasks/…``). The oracle named is the first task's (the one the runtime plan
    resets to)."""
    first = _first(tasks)
    capabilities: dict[str, Any] = {
        "verifier": {"kind": "reward_channel"},
        "task_api": True,
        "declared_tools": list(AGENT_ACTIONS),
        "declared_task_count": {"all": len(tasks)},
    }
    solve = first.path / "solution" / "solve.sh"
    if solve.is_file():
        capabilities["oracle"] = {
            "form": "script",
            "location": f"{task_rel[first.id]}/solution/solve.sh",
        }
    return {
        "reward": {
            "range": list(REWARD_RANGE),
            "oracle_tolerance": 0.0,
            "floor_margin": FLOOR_MARGIN,
        },
        "resources": resources(tasks),
        "network": {"mode": "public"},
        "capabilities": capabilities,
        "types": {"tags": ["swe", "coding", "repogym"]},
        "execution": {
            "kind": "openenv_ws",
            "probe_path": PLAN_PATH,
            "dockerfile": "Dockerfile",
            "context": ".",
            "agent_boundary": "api",
            "requires_credentials": False,
        },
    }


def runtime_plan(tasks: list[Task]) -> dict[str, Any]:
    """``validation/runtime.json``: reset to the first task, then agent actions that change
    nothing (a listing, a read-only command). Every step must answer with reward 0.0."""
    return {
        "plan_schema_version": "1",
        "reset": {
            "episode_id": PLAN_EPISODE_ID,
            "seed": 0,
            "options": {"task_id": _first(tasks).id},
        },
        "actions": [
            {"type": "list", "path": "."},
            {"type": "exec", "command": "pwd", "timeout_s": 30},
        ],
    }


def plan_json(tasks: list[Task]) -> str:
    return json.dumps(runtime_plan(tasks), indent=2) + "\n"


def yaml_lines(value: Any, indent: int = 0) -> list[str]:
    """``value`` (dicts, lists, scalars) as block YAML; scalars are written as JSON, which
    YAML reads back unchanged."""
    pad = "  " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                lines.append(f"{pad}{key}:")
                lines.extend(yaml_lines(item, indent + 1))
            else:
                lines.append(f"{pad}{key}: {json.dumps(item)}")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict | list) and item:
                sub = yaml_lines(item, indent + 1)
                lines.append(f"{pad}- {sub[0].lstrip()}")
                lines.extend(sub[1:])
            else:
                lines.append(f"{pad}- {json.dumps(item)}")
    else:
        lines.append(f"{pad}{json.dumps(value)}")
    return lines
