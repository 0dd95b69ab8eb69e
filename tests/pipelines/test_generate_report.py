"""``generate``'s report as data: the library's :class:`GenerateReport` is what ``generate
--json`` prints and what ``generate-report.json`` holds, byte for byte; the CLI only prints it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.pipelines.base import Candidate, Outcome
from repogym.pipelines.report import GenerateReport, LlmUsage, OutcomeRow
from repogym.ui import out
from repogym.ui.generate import print_llm_usage
from tests.sources.conftest import GitRepo

REPORT_KEYS = [
    "repo",
    "repo_id",
    "source",
    "source_access",
    "pipeline",
    "options",
    "status",
    "yield",
    "overhead_ratio",
    "outcomes",
]
OUTCOME_KEYS = [
    "key",
    "task_id",
    "kept",
    "reason",
    "detail",
    "seconds",
    "test_seconds",
    "f2p",
    "p2p",
]
USAGE = {
    "llm": "openai/m",
    "endpoint": None,
    "calls": 3,
    "input_tokens": 120,
    "output_tokens": 30,
    "cost_usd": 0.0123,
    "unpriced_calls": 0,
    "accepted": 2,
    "rejected": 1,
    "failed": 0,
}


def test_generate_json_prints_the_library_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import repogym.workflows

    repo = GitRepo(tmp_path / "r")
    repo.write("m.py", "def f():\n    return 1\n")
    repo.write("tests/test_m.py", "from m import f\n\n\ndef test_f():\n    assert f() == 1\n")
    repo.commit("Add f")
    repo.write("m.py", "def f():\n    return 2\n")
    repo.write("tests/test_m.py", "from m import f\n\n\ndef test_f():\n    assert f() == 2\n")
    repo.commit("Fix f returning the wrong value")

    results: list[Any] = []
    real = repogym.workflows.generate

    def keep(inp: Any, **kw: Any) -> Any:
        results.append(real(inp, **kw))
        return results[-1]

    monkeypatch.setattr(repogym.workflows, "generate", keep)
    dest = tmp_path / "out"
    args = ["generate", "--repo", str(repo.path), "--out", str(dest), "--sandbox", "fake"]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 1, res.output  # no task kept (the fake sandbox runs nothing)
    (result,) = results
    assert res.stdout == result.summary.to_text() == (dest / "generate-report.json").read_text()
    printed = json.loads(res.stdout)
    assert list(printed) == REPORT_KEYS
    assert printed["yield"]["candidates"] == 2 and printed["status"] == "complete"
    assert [list(o) for o in printed["outcomes"]] == [OUTCOME_KEYS]
    assert printed["outcomes"][0]["task_id"] == result.summary.outcomes[0].task_id


def test_every_optional_key_comes_last_in_its_order() -> None:
    cand = Candidate("k1", "acme__w-1", "commit", "a", "b", "t", "", "ref")
    outcome = Outcome(cand, kept=True, seconds=1.234, test_seconds=0.5, f2p=2, p2p=3)
    report = GenerateReport(
        repo="/r",
        repo_id="acme/w",
        source={"kind": "local"},
        source_access="local",
        pipeline="commit_runtime",
        options={},
        status="interrupted",
        yield_counts={"candidates": 1, "kept": 1},
        overhead_ratio=None,
        outcomes=[OutcomeRow.of(outcome, {"status": "accepted"})],
        error="KeyboardInterrupt",
        in_flight=["k2"],
        errors_log="/o/.repogym/commit_runtime-errors.log",
        llm=LlmUsage.from_json(USAGE),
    )
    data = report.to_json()
    assert list(data) == [*REPORT_KEYS, "error", "in_flight", "errors_log", "llm"]
    assert data["outcomes"] == [
        {
            "key": "k1",
            "task_id": "acme__w-1",
            "kept": True,
            "reason": None,
            "detail": None,
            "seconds": 1.23,
            "test_seconds": 0.5,
            "f2p": 2,
            "p2p": 3,
            "instruction_rewrite": {"status": "accepted"},
        }
    ]
    assert data["llm"] == USAGE and list(data["llm"]) == list(USAGE)
    assert report.kept == 1
    assert json.loads(report.to_text()) == data


def test_usage_keys_are_checked() -> None:
    with pytest.raises(TypeError):
        LlmUsage.from_json({**USAGE, "new_key": 1})


def test_llm_usage_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(out, "_width", 240)
    with out.capture() as captured:
        print_llm_usage(LlmUsage.from_json(USAGE))
        print_llm_usage(LlmUsage.from_json({**USAGE, "cost_usd": None}))
    assert captured.get().splitlines() == [
        "LLM openai/m: 3 call(s), 120 input + 30 output tokens, cost $0.0123; rewrites "
        "accepted 2, rejected 1, failed 0",
        "LLM openai/m: 3 call(s), 120 input + 30 output tokens, cost unknown; rewrites "
        "accepted 2, rejected 1, failed 0",
    ]
