"""One candidate that crashes is one drop, not the end of the run.

The attack: make the evaluation of one candidate raise (as ``ValueError: unknown runner 'node'``
did on a JavaScript repository) and check that every other candidate is still evaluated and
kept, that the report lists the crash as that candidate's drop reason, that the traceback is in
the run's error log, and that none of the crashed candidate's temporary or staging folders
survive. Also: the report is written when the whole run ends by an exception or Ctrl-C.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from repogym.example_repo import build_example_repo
from repogym.pipelines import GenerateError
from repogym.pipelines.base import Candidate, Outcome
from repogym.sources import SourceError
from repogym.spec import GenerationInput
from repogym.taskdir import iter_task_dirs
from repogym.taskdir.validate import validate_task
from repogym.workflows import generate

CRASH = "unknown runner 'node'"


def _report(out: Path) -> dict[str, Any]:
    return json.loads((out / "generate-report.json").read_text())


def _leftovers(out: Path) -> list[str]:
    """Staging folders (``.<id>.staging``) or half tasks left in ``<out>/tasks``."""
    return sorted(p.name for p in (out / "tasks").iterdir() if p.name.startswith("."))


@pytest.fixture
def example(tmp_path: Path) -> Path:
    return build_example_repo(tmp_path / "statkit")


# ------------------------------------------------------------------- fast: no sandbox involved


def _fake_evaluate(crash_on: set[str], seen: list[str]) -> Any:
    """An ``evaluate`` that drops every candidate at once, and raises for ``crash_on``."""

    def evaluate(self: Any, cand: Candidate) -> Outcome:
        seen.append(cand.key)
        if cand.key in crash_on or (not crash_on and len(seen) == 1):
            raise ValueError(CRASH + "\n  second line of the message")
        return Outcome(cand, kept=False, reason="fake drop")

    return evaluate


def test_harness_exception_is_one_drop(
    example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``evaluate`` itself raising (any harness) is caught by generate around the future."""
    from repogym.pipelines._harness.runtime import RuntimeHarness

    seen: list[str] = []
    monkeypatch.setattr(RuntimeHarness, "evaluate", _fake_evaluate(set(), seen))
    out = tmp_path / "out"
    result = generate(
        GenerationInput(repo=str(example), pipeline="commit_runtime", out=out, jobs=2)
    )
    report = _report(out)
    assert len(seen) >= 3, "the run stopped at the crash"
    crashed = [o for o in report["outcomes"] if o["reason"] == "internal error"]
    assert len(crashed) == 1 and crashed[0]["key"] == seen[0]
    assert crashed[0]["detail"] == f"ValueError: {CRASH}"  # one line
    assert report["yield"]["dropped"]["internal error"] == 1
    assert report["yield"]["dropped"]["fake drop"] == len(seen) - 1
    assert report["status"] == "complete"
    log = out / ".repogym" / "commit_runtime-errors.log"
    assert report["errors_log"] == str(log)
    text = log.read_text()
    assert "Traceback" in text and CRASH in text and seen[0] in text
    assert result.stats.drops["internal error"] == 1
    # --resume retries a crashed candidate (the crash may be fixed since) but no other.
    again: list[str] = []
    monkeypatch.setattr(RuntimeHarness, "evaluate", _fake_evaluate({"none"}, again))
    generate(GenerationInput(repo=str(example), pipeline="commit_runtime", out=out, resume=True))
    assert again == [seen[0]]
    assert _report(out)["yield"]["dropped"] == {"fake drop": 1}


def test_interrupt_still_writes_the_report(
    example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in the middle: the report has what finished, and says it was interrupted."""
    from repogym.pipelines._harness.runtime import RuntimeHarness

    seen: list[str] = []
    monkeypatch.setattr(RuntimeHarness, "evaluate", _fake_evaluate({"none"}, seen))
    done: list[str] = []

    def on_outcome(outcome: Outcome, stats: Any) -> None:
        done.append(outcome.candidate.key)
        if len(done) == 2:
            raise KeyboardInterrupt

    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        generate(
            GenerationInput(repo=str(example), pipeline="commit_runtime", out=out),
            on_outcome=on_outcome,
        )
    report = _report(out)
    assert report["status"] == "interrupted" and report["error"] == "KeyboardInterrupt"
    assert [o["key"] for o in report["outcomes"]] == done
    assert (out / "registry.json").is_file()
    state = json.loads((out / ".repogym" / "commit_runtime-state.json").read_text())
    assert set(done) <= set(state)


@pytest.mark.parametrize(
    ("exc", "raised", "status", "error"),
    [
        (
            RuntimeError("candidate stream broke"),
            RuntimeError,
            "error",
            "RuntimeError: candidate stream broke",
        ),
        (
            SourceError("rate limit exceeded"),
            GenerateError,
            "stopped",
            "GenerateError: rate limit exceeded (tasks emitted so far are complete; "
            "rerun with --resume)",
        ),
    ],
)
def test_pipeline_exception_still_writes_the_report(
    example: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    exc: Exception,
    raised: type[Exception],
    status: str,
    error: str,
) -> None:
    """A bug outside any one candidate (here: the candidate stream) or a source error ends
    the run, with a report."""
    from repogym.pipelines import commit_runtime
    from repogym.pipelines._harness.runtime import RuntimeHarness

    seen: list[str] = []
    monkeypatch.setattr(RuntimeHarness, "evaluate", _fake_evaluate({"none"}, seen))
    real = commit_runtime.candidates

    def broken(*args: Any, **kwargs: Any) -> Iterator[Any]:
        items = real(*args, **kwargs)
        yield next(items)
        yield next(items)
        raise exc

    monkeypatch.setattr(commit_runtime, "candidates", broken)
    out = tmp_path / "out"
    with pytest.raises(raised):
        generate(GenerationInput(repo=str(example), pipeline="commit_runtime", out=out))
    report = _report(out)
    assert (report["status"], report["error"]) == (status, error)
    # The candidates before the failure: recorded, still in flight, or (not started yet)
    # cancelled; never more.
    assert 1 <= len(report["outcomes"]) + len(report.get("in_flight", [])) <= 2
    log = out / ".repogym" / "commit_runtime-errors.log"
    if status == "error":  # a bug: its traceback is kept; a source error is no bug
        assert "candidate stream broke" in log.read_text()
    else:
        assert not log.exists()


# ------------------------------------------------------------- slow: the real harness, sandbox


@pytest.mark.slow
def test_crash_inside_the_harness_keeps_the_others(
    example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after the task was staged: other candidates kept, nothing of the crash left."""
    from repogym.pipelines._harness import runtime as _runtime

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    real = _runtime.write_task
    crashed: list[str] = []

    def write_task(staging: Path, inp: Any) -> None:
        real(staging, inp)
        if not crashed:
            crashed.append(inp.candidate.task_id)
            assert staging.is_dir()
            raise ValueError(CRASH)

    monkeypatch.setattr(_runtime, "write_task", write_task)
    out = tmp_path / "out"
    cheap = {
        "mutants": "0",
        "reruns": "0",
        "verify_reruns": "0",
        "adversarial": "false",
    }  # the crash
    result = generate(
        GenerationInput(repo=str(example), pipeline="commit_runtime", out=out, options=cheap)
    )
    report = _report(out)
    [bad] = [o for o in report["outcomes"] if o["task_id"] == crashed[0]]
    assert (bad["kept"], bad["reason"], bad["detail"]) == (
        False,
        "internal error",
        f"ValueError: {CRASH}",
    )
    kept = {p.name for p in iter_task_dirs(out / "tasks")}
    assert len(kept) == 2 and crashed[0] not in kept and result.stats.kept == 2
    for task_dir in iter_task_dirs(out / "tasks"):
        assert validate_task(task_dir, deep=True).ok, task_dir
    assert _leftovers(out) == []
    assert not [p for p in scratch.iterdir() if p.name.startswith(f"repogym-{crashed[0]}-")]
    log = (out / ".repogym" / "commit_runtime-errors.log").read_text()
    assert crashed[0] in log and "write_task" in log and "Traceback" in log


@pytest.mark.slow
def test_crash_in_pr_diff_keeps_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same for the text-only pipeline (its own task writer)."""
    from repogym.pipelines._harness import diff_task
    from tests.pipelines_pr_diff.history import OPTS, build_repo
    from tests.sources.conftest import GitRepo

    repo = GitRepo(tmp_path / "calc")
    build_repo(repo)
    real = diff_task.write_task
    crashed: list[str] = []

    def write_task(dest: Path, cand: Candidate, **kwargs: Any) -> None:
        real(dest, cand, **kwargs)
        if not crashed:
            crashed.append(cand.task_id)
            raise KeyError("runner")

    monkeypatch.setattr(diff_task, "write_task", write_task)
    out = tmp_path / "out"
    generate(GenerationInput(repo=str(repo.path), pipeline="pr_diff", out=out, options=OPTS))
    report = _report(out)
    [bad] = [o for o in report["outcomes"] if o["task_id"] == crashed[0]]
    assert bad["reason"] == "internal error" and bad["detail"] == "KeyError: 'runner'"
    assert report["yield"]["kept"] == 1
    assert _leftovers(out) == []
