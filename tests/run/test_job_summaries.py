"""``repogym jobs --json`` prints the library's objects: :class:`JobListing` (list),
:meth:`JobRecord.to_json` (show), :class:`Comparison` (compare), :class:`JobExport` (export)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from repogym.cli import app
from repogym.run.compare import compare_jobs
from repogym.run.records import JobListing, export_jobs, read_job
from tests.run.test_records import write_job


def _printed(payload: Any) -> str:
    return json.dumps(payload, indent=2) + "\n"


def _jobs(tmp_path: Path) -> Path:
    jobs = tmp_path / "jobs"
    write_job(jobs, "a", {"t": [1.0, 0.0], "u": [None]}, agent="oracle")
    write_job(jobs, "b", {"t": [0.0], "u": [1.0]}, agent="nop")
    broken = write_job(jobs, "c", {"t": [1.0]})
    (broken / "t__1" / "result.json").write_text("{not json")
    return jobs


def test_list_and_show_and_compare_print_the_library_objects(tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    cli = CliRunner()
    res = cli.invoke(app, ["jobs", "list", "--jobs-dir", str(jobs), "--json"])
    assert res.exit_code == 0, res.output
    listing = JobListing.read(jobs)
    assert res.stdout == _printed(listing.to_json())
    assert [j["name"] for j in json.loads(res.stdout)["jobs"]] == ["a", "b", "c"]
    assert json.loads(res.stdout)["jobs_dir"] == str(jobs)

    res = cli.invoke(app, ["jobs", "show", "a", "--jobs-dir", str(jobs), "--json"])
    assert res.exit_code == 0, res.output
    assert res.stdout == _printed(read_job(jobs / "a").to_json(tasks=True))

    res = cli.invoke(app, ["jobs", "compare", "a", "b", "--jobs-dir", str(jobs), "--json"])
    assert res.exit_code == 0, res.output
    a, b = read_job(jobs / "a"), read_job(jobs / "b")
    assert res.stdout == _printed(compare_jobs(a, b).to_json())


def test_export_prints_the_library_export(tmp_path: Path) -> None:
    jobs = _jobs(tmp_path)
    out = tmp_path / "trials.jsonl"
    args = ["jobs", "export", "a", "c", "--jobs-dir", str(jobs), "--out", str(out), "--json"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 1, res.output  # job c is broken: its readable trials are written
    written = out.read_bytes()
    again = export_jobs([read_job(jobs / "a"), read_job(jobs / "c")], out, "jsonl")
    assert out.read_bytes() == written
    assert res.stdout == _printed(again.to_json())
    printed = json.loads(res.stdout)
    assert list(printed) == ["out", "format", "rows", "jobs", "problems"]
    assert (printed["rows"], printed["jobs"]) == (3, ["a", "c"])
    assert list(printed["problems"]) == ["c"] and [r.name for r in again.broken] == ["c"]
