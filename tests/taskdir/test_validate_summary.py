"""``validate``'s report as data: :class:`ValidationSummary` and the runnable preflight's
:class:`RunnableSummary` are what ``validate --json`` and ``validate --runnable --json`` print."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from repogym.cli import app
from repogym.run.preflight import runnable_summary
from repogym.taskdir import iter_task_dirs
from repogym.taskdir.trust import load_limits
from repogym.taskdir.validate import validate_task
from repogym.taskdir.validate_summary import summarize_validation
from tests.conftest import EXAMPLES


def _dataset(tmp_path: Path) -> Path:
    """Two copies of one task (a shared id), a valid task and one that does not parse."""
    data = tmp_path / "data"
    for group in ("a", "b"):
        shutil.copytree(EXAMPLES / "hello-file", data / group / "hello-file", symlinks=True)
    shutil.copytree(EXAMPLES / "textstats-word-count", data / "textstats", symlinks=True)
    (data / "broken").mkdir()
    (data / "broken" / "task.toml").write_text("this is [not toml\n")
    return data


def test_validate_json_prints_the_library_summary(tmp_path: Path) -> None:
    data = _dataset(tmp_path)
    res = CliRunner().invoke(app, ["validate", str(data), "--json"])
    assert res.exit_code == 1, res.output
    dirs = list(iter_task_dirs(data))
    summary = summarize_validation(data, [validate_task(d) for d in dirs])
    assert res.stdout == summary.to_text()
    assert json.loads(res.stdout)["summary"] == {
        "tasks": 4,
        "valid": 1,
        "invalid": 3,
        "warnings": 0,
    }
    assert not summary.ok and summary.invalid == 3
    # the shared id is an error of both copies
    assert [c for c in summary.by_check() if c[1] == "unique_id"] == [("error", "unique_id", 2)]


def test_validate_human_output_shows_the_summary_figures(tmp_path: Path) -> None:
    data = _dataset(tmp_path)
    res = CliRunner().invoke(app, ["validate", str(data)], env={"COLUMNS": "200"})
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert sum("two tasks share the id 'hello-file'" in line for line in lines) == 2
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in lines if "│" in line]
    assert ["4", "1", "3", "0"] in rows, res.stdout  # tasks, valid, invalid, warnings
    assert ["error", "unique_id", "2"] in rows  # problems by check


def test_runnable_json_prints_the_library_summary(tmp_path: Path) -> None:
    data = _dataset(tmp_path)
    res = CliRunner().invoke(app, ["validate", str(data), "--runnable", "--json"])
    assert res.exit_code == 1, res.output
    dirs = list(iter_task_dirs(data))
    summary = runnable_summary(data, dirs, "local", load_limits())
    assert res.stdout == summary.to_text()
    rows = {r.task_id: r for r in summary.rows}
    assert rows["textstats"].runnable and not rows["broken"].runnable
    assert json.loads(res.stdout)["summary"] == {"tasks": 4, "runnable": 3, "refused": 1}
