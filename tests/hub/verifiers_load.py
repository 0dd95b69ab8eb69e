"""Load Harbor task folders with the ``verifiers`` library's own Harbor loader (run with the
Python of a venv holding ``verifiers[harbor]``; no LLM, sandbox or Docker is needed).

``HarborTaskset.load()`` reads datasets from the Harbor hub only, so this runs the steps it runs
for each task folder (``parse_task`` then ``HarborTask``) on every ``task.toml`` under the folder
given, printing ``ACCEPTED <task> image=<image>`` or ``REJECTED <task>: <reason>``; the exit
status is 1 when a task was rejected."""

from __future__ import annotations

import sys
from pathlib import Path

from verifiers.v1.tasksets.harbor import HarborConfig, HarborTask
from verifiers.v1.tasksets.harbor.taskset import parse_task


def main() -> int:
    root = Path(sys.argv[1]).resolve()
    config = HarborConfig()
    rejected = 0
    for idx, toml in enumerate(sorted(root.rglob("task.toml"))):
        task_dir = toml.parent
        try:
            task = HarborTask(parse_task(task_dir, idx, config), config.task)
        except Exception as exc:  # noqa: BLE001 - what the loader said, printed
            rejected += 1
            print(f"REJECTED {task_dir.name}: {exc}")
            continue
        print(f"ACCEPTED {task_dir.name} image={task.data.image}")
    return 1 if rejected else 0


if __name__ == "__main__":
    sys.exit(main())
