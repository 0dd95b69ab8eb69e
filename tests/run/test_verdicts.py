"""The verify report: facts computed by run/verdicts.py from the verdict and the task's recorded
evaluation, shown by ui/run.py (a measured figure wins over a recorded one)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from repogym.run.gate import Verdict
from repogym.run.verdicts import Adversarial, verdict_facts, verify_payload
from repogym.taskdir import Task, TaskConfig, load_task
from repogym.taskdir.task import update_task_toml
from repogym.ui import out
from repogym.ui.run import print_verdicts

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tasks" / "textstats-word-count"


def _task(tmp_path: Path, evaluation: dict[str, object]) -> Task:
    shutil.copytree(EXAMPLE, tmp_path / "t")

    def edit(config: TaskConfig) -> None:
        config.metadata.setdefault("repo2env", {})["evaluation"] = evaluation

    update_task_toml(tmp_path / "t", edit, rehash=False)
    return load_task(tmp_path / "t")


def test_recorded_figures_fill_the_table_and_a_gap_is_red(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = _task(
        tmp_path,
        {
            "mutant_kill_rate": 0.75,
            "mutants": 4,
            "adversarial_floor": 0.5,
            "adversarial_candidates": 3,
            "gameability_gap": 0.5,
            "canaries": 0,
        },
    )
    verdict = Verdict(task.id, "gameable", [1.0], 0.0, reasons=["an object equal to everything"])
    (row,) = verdict_facts([task], [verdict])
    assert (row.mode, row.kill_rate, row.mutant_runs, row.canaries) == ("clean_room", 0.75, 4, 0)
    assert row.adversarial == Adversarial(0.5, 3, 0.5)
    monkeypatch.setattr(out, "_width", 240)  # one line per row, as on a wide terminal
    with out.capture() as captured:
        print_verdicts([row], tmp_path)
    text = captured.get()
    assert "clean room" in text and "0.75 (4)" in text and "0.5 (3)" in text
    assert "gameable" in text and "an object equal" in text


def test_unknown_task_and_nothing_recorded_show_dashes(tmp_path: Path) -> None:
    task = _task(tmp_path, {})
    verdicts = [Verdict("gone", "broken", [0.0], 0.0), Verdict(task.id, "verified", [1.0], 0.0)]
    gone, known = verdict_facts([task], verdicts)
    assert gone.mode is None and gone.adversarial is None and gone.canaries is None
    assert known.kill_rate is None and known.adversarial is None
    payload = verify_payload(verdicts)
    assert payload["summary"] == {"tasks": 2, "verified": 1, "flaky": 0, "broken": 1}
    assert [t["task_id"] for t in payload["tasks"]] == ["gone", task.id]


def test_recording_a_verdict_keeps_the_figures_it_did_not_measure(tmp_path: Path) -> None:
    from repogym.run.gate import record

    task = _task(
        tmp_path,
        {"status": "broken", "mutant_kill_rate": 0.5, "mutants": 2, "adversarial_floor": 0.0},
    )
    before = task.provenance.content_hash if task.provenance else None
    record(task, Verdict(task.id, "verified", [1.0], 0.0), "local", 1)
    prov = load_task(task.path).provenance
    assert prov is not None and prov.content_hash == before
    evaluation = prov.evaluation
    assert evaluation["status"] == "verified" and evaluation["oracle_runs"] == 1
    assert (evaluation["mutant_kill_rate"], evaluation["mutants"]) == (0.5, 2)
    assert evaluation["adversarial_floor"] == 0.0
