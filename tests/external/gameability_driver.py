"""Run in gameability's own virtualenv: gameability's two audits, with a repogym trial as the grader.

``python gameability_driver.py probe SPEC.json``
    ``gameability.probe.probe_env`` (what ``gameability probe`` runs once it has loaded a
    ``verifiers`` environment) on a stand-in environment: each row is a repogym task, a completion
    is the new text of the file the task's fix edits, and the rubric's reward is the reward of a
    repogym trial whose ``command:`` agent writes that file. No ``verifiers`` package is needed for
    this: ``probe_env`` reads only ``get_eval_dataset``, ``rubric.score_rollout``,
    ``rubric.get_reward_weights`` and ``message_type``. Prints gameability's own report, then one
    ``RESULT {json}`` line.

``python gameability_driver.py mutants SPEC.json``
    ``gameability.engine.audit`` (what ``gameability check`` runs for one problem) on the file the
    fix edits: single-site mutants of the fixed file, each certified broken by gameability's
    oracle (it differs from the fixed file on fresh inputs derived from the calls in the task's
    tests). The audit's own visible tests are left empty, so every broken mutant is reported as
    passing them; each is then submitted to a repogym trial, which is the grader under test.
    Prints gameability's census, then one ``RESULT {json}`` line.

SPEC.json: ``{"python": repogym's interpreter, "trials": path of trials.py, "log": JSONL path,
"tasks": [{"id", "dir", "prompt", "source_path", "reference", "entry", "calls"}]}``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from gameability import __version__


def trial(spec: dict, task: dict, text: str, label: str) -> float:
    """The reward of a repogym trial whose agent writes ``text`` to the task's source file."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump({"files": {task["source_path"]: text}}, fh)
    proc = subprocess.run(
        [spec["python"], spec["trials"], "submit", "--task", task["dir"], "--changes", fh.name],
        capture_output=True,
        text=True,
        timeout=900,
    )
    os.unlink(fh.name)
    res = json.loads(proc.stdout)
    with open(spec["log"], "a") as log:
        log.write(
            json.dumps({"task": task["id"], "label": label, "completion": text, **res}) + "\n"
        )
    return float(res["reward"] or 0.0)


class _Rows:
    """The few parts of a ``datasets.Dataset`` that ``probe_env`` reads."""

    def __init__(self, rows: list[dict]) -> None:
        self.rows = rows
        self.column_names = list(rows[0])

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        return [r[key] for r in self.rows] if isinstance(key, str) else self.rows[key]


class _Rubric:
    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.tasks = {t["id"]: t for t in spec["tasks"]}

    def get_reward_weights(self) -> list[float]:
        return [1.0]

    async def score_rollout(self, prompt, completion, answer, state, task, info):  # type: ignore[no-untyped-def]
        reward = trial(self.spec, self.tasks[info["task"]], completion, "probe")
        return {"reward": reward}


class _Env:
    message_type = "completion"

    def __init__(self, spec: dict) -> None:
        self.rubric = _Rubric(spec)
        self.rows = _Rows(
            [
                {
                    "prompt": t["prompt"],
                    "answer": t["reference"],
                    "task": "default",
                    "info": {"task": t["id"]},
                }
                for t in spec["tasks"]
            ]
        )

    def get_eval_dataset(self, n: int = -1) -> _Rows:
        return self.rows


def probe(spec: dict) -> dict:
    from gameability.probe import FORMATS, probe_env, report

    res = probe_env(_Env(spec), n_items=len(spec["tasks"]))
    res["env"] = "repogym:" + ",".join(t["id"] for t in spec["tasks"])
    report(res)
    # The answer formats probe_env tries: the reference in each of them is its control.
    res["formats"] = list(FORMATS)
    return res


def mutants(spec: dict) -> dict:
    from gameability.engine import Problem, audit, report, summarise

    rows = []
    for task in spec["tasks"]:
        problem = Problem(
            pid=task["id"],
            reference=task["reference"],
            tests=[],
            entry=task["entry"],
            harvest=[f"{task['entry']}({args})" for args in task["calls"]],
        )
        row = audit(problem, want_witness=True)
        row["trials"] = [
            {"kind": ex["kind"], "reward": trial(spec, task, ex["src"], "mutant:" + ex["kind"])}
            for ex in row.get("examples", [])
        ]
        rows.append(row)
    summary = summarise(
        rows, "repogym tasks (no visible tests: every broken mutant goes to a trial)"
    )
    report(summary)
    for row in rows:
        paid = [t for t in row["trials"] if t["reward"] > 0]
        kinds = ", ".join(sorted({t["kind"] for t in paid})) or "none"
        print(
            f"  {row['pid']}: {len(row['trials'])} broken mutants submitted to a repogym trial, {len(paid)} paid ({kinds})"
        )
    return {"summary": summary, "rows": rows}


def main() -> int:
    mode, path = sys.argv[1], sys.argv[2]
    with open(path) as fh:
        spec = json.load(fh)
    out = probe(spec) if mode == "probe" else mutants(spec)
    out["gameability"] = __version__
    print("RESULT " + json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
