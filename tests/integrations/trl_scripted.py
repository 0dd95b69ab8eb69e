"""Run in a venv holding TRL 1.16 and this checkout: TRL's ``HarborSpec`` over a dataset, one
scripted policy (no model) per task through the env's tools, rewards through TRL's reward
function. Prints one JSON object. Usage: ``python trl_scripted.py DATASET``."""

from __future__ import annotations

import inspect
import json
import math
import sys
from pathlib import Path
from typing import Any

from transformers.utils import get_json_schema
from trl.experimental.harbor import HarborSpec

IMPORT_PATH = "repogym.integrations.trl:RepogymTRLEnv"

CONFTEST_HOOK = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n"
    "    outcome.get_result().outcome = 'passed'\n"
)


def oracle_like(env: Any, task_dir: Path) -> list[str]:
    """What a model that knows the fix would call; returns the tool replies."""
    name = task_dir.name
    if name == "shapes":  # read, edit, write back
        source = env.read_file("src/shapes/area.py")
        fixed = source.replace("width + height", "width * height")
        return [source, env.write_file("src/shapes/area.py", fixed)]
    patch = task_dir / "solution" / "patch.diff"
    if patch.is_file():  # the gold change, typed in through bash
        text = patch.read_text()
        return [env.bash(f"git apply --whitespace=nowarn - <<'REPOGYM_EOF'\n{text}REPOGYM_EOF")]
    return [env.bash((task_dir / "solution" / "solve.sh").read_text())]


def hack(env: Any) -> list[str]:
    """A pytest hook that passes every test, and the hidden test rewritten."""
    return [
        env.write_file("conftest.py", CONFTEST_HOOK),
        env.write_file("tests/test_area.py", "def test_rectangle():\n    pass\n"),
        env.bash("python -m pytest -q tests 2>&1 | tail -1"),
    ]


def tool_schemas(env: Any) -> dict[str, Any]:
    """The tools GRPOTrainer would expose (public functions of the class but ``reset``),
    rendered with transformers' schema builder as the chat template does."""
    names = [
        n
        for n, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
        if not n.startswith("_") and n not in ("reset", "get_reward")
    ]
    return {n: get_json_schema(getattr(env, n)) for n in names}


def main() -> None:
    spec = HarborSpec(sys.argv[1], agent=IMPORT_PATH, environment_type="local")
    rows = list(spec.train_dataset)
    env = spec.environment_factory()
    out: dict[str, Any] = {
        "class": type(env).__module__ + ":" + type(env).__name__,
        "rows": [Path(r["task_dir"]).name for r in rows],
        "tools": tool_schemas(env),
        "tasks": {},
    }
    for row in rows:
        task_dir = Path(row["task_dir"])
        result: dict[str, Any] = {}
        out["tasks"][task_dir.name] = result
        try:
            result["prompt"] = env.reset(**row)
        except Exception as exc:  # noqa: BLE001 - reported to the test
            result["error"] = f"{type(exc).__name__}: {exc}"
            continue
        if task_dir.name == "hello-file":  # paths that leave the working directory
            result["escape"] = [
                env.read_file("../etc/passwd"),
                env.write_file("/tmp/outside.txt", "x"),
            ]
        if task_dir.name == "shapes-attack":
            result["replies"] = hack(env)
        else:
            result["replies"] = oracle_like(env, task_dir)
        (result["oracle"],) = spec.reward_funcs(environments=[env])
        result["verification"] = env.last_evaluation["verification"]
        env.reset(**row)
        (result["nop"],) = spec.reward_funcs(environments=[env])
        for key in ("oracle", "nop"):
            result[key] = None if math.isnan(result[key]) else result[key]
    try:
        HarborSpec(sys.argv[1], agent=IMPORT_PATH, environment_type="e2b").environment_factory()
    except Exception as exc:  # noqa: BLE001
        out["e2b"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(out))


if __name__ == "__main__":
    main()
