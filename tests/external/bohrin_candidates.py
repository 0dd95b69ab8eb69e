"""Run in bohrin's own virtualenv: bohrin's battery for one task, and bohrin's score of the results.

``python bohrin_candidates.py battery < TASK.json``
    TASK.json is ``{"id", "prompt", "reference"}`` (``reference``: the text of the source file the
    task's gold patch changes, after the patch). Prints, for each grader shape a repogym task has
    (``program``: the solution file alone; ``workspace``: a repository plus a patch judged by a
    test command; ``container``: the agent acts in a container where a script writes the reward),
    every candidate ``bohrin.battery`` builds, once: its key, operator, category, ground and, as
    bohrin states it, its source text or its workspace template (files, commands, parameters).
    Filling the template's parameters in is left to the caller, as bohrin's ``Workspace`` asks.

``python bohrin_candidates.py score < RESULTS.json``
    RESULTS.json is TASK.json plus ``"accepted": {key: bool}`` (whether the grader paid the
    candidate). Prints bohrin's ``coverage_score`` line for those attempts.
"""

from __future__ import annotations

import json
import sys

from bohrin.api import BATTERY_VERSION, Attempt, Shape, Source, Task, battery, coverage_score
from bohrin.version import __version__

SHAPES = (Shape.PROGRAM, Shape.WORKSPACE, Shape.CONTAINER)


def candidates(spec: dict) -> list:
    out, seen = [], set()
    for shape in SHAPES:
        task = Task(id=spec["id"], prompt=spec["prompt"], reference=spec["reference"], shape=shape)
        for cand in battery(task).candidates:
            if cand.payload.key not in seen:
                seen.add(cand.payload.key)
                out.append((shape, task, cand))
    return out


def main() -> int:
    mode = sys.argv[1]
    spec = json.load(sys.stdin)
    if mode == "score":
        attempts = [
            Attempt(task.id, cand, accepted=spec["accepted"][cand.payload.key])
            for _, task, cand in candidates(spec)
            if cand.payload.key in spec["accepted"]
        ]
        print(coverage_score(attempts))
        return 0
    rows = []
    for shape, _, cand in candidates(spec):
        row = {
            "key": cand.payload.key,
            "shape": shape.value,
            "operator": cand.provenance.operator,
            "detail": cand.provenance.detail,
            "ground": cand.ground.value if cand.ground else None,
        }
        if isinstance(cand.payload, Source):
            row["source"] = cand.payload.text
        else:
            row["files"] = dict(cand.payload.files)
            row["commands"] = list(cand.payload.commands)
            row["parameters"] = list(cand.payload.parameters)
        rows.append(row)
    json.dump(
        {"bohrin": __version__, "battery_version": BATTERY_VERSION, "candidates": rows}, sys.stdout
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
