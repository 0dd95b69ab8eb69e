"""Typed run records: real files round-trip byte for byte, old shapes still read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from repogym.run.job import run_job
from repogym.run.models import (
    ErrorEvent,
    JobResult,
    PhaseEvent,
    RecordError,
    RewardEvent,
    TrialResult,
    VerifierResult,
)
from repogym.run.records import read_job, read_trial
from repogym.taskdir import load_task
from tests.conftest import EXAMPLES
from tests.run.test_foreign_harbor import _steps_task

# The keys of a trial's result.json, in the order every earlier version wrote them (plus
# ``task_digest``, Harbor's identity of the task, beside ``task_checksum``).
TRIAL_KEYS = [
    "id",
    "trial_name",
    "task_name",
    "task_id",
    "task_path",
    "task_checksum",
    "task_digest",
    "agent_info",
    "agent_result",
    "verifier_result",
    "verification",
    "exception_info",
    "started_at",
    "finished_at",
    "environment_setup",
    "agent_execution",
    "verifier",
    "sandbox",
]
JOB_KEYS = [
    "agent",
    "sandbox",
    "verification",
    "attempts",
    "started_at",
    "finished_at",
    "summary",
    "trials",
]


@pytest.fixture(scope="module")
def real_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A job of the oracle on two example tasks, written by a real run."""
    out = tmp_path_factory.mktemp("job")
    tasks = [load_task(EXAMPLES / t) for t in ("hello-file", "textstats-word-count")]
    outcomes, _, _ = run_job(tasks, "oracle", out_dir=out)
    for o in outcomes:  # what the run returned is what it wrote
        assert o.path is not None and o.record.to_text() == o.path.read_text()
    return out


@pytest.mark.slow
def test_real_result_and_job_round_trip_byte_for_byte(real_job: Path) -> None:
    results = sorted(real_job.glob("*/result.json"))
    assert len(results) == 2
    for path in results:
        text = path.read_text()
        assert list(json.loads(text)) == TRIAL_KEYS
        record = TrialResult.read(path)
        assert record.to_text() == text
        assert record.verifier_result is not None and record.verifier_result.reward == 1.0
        assert record.agent_info is not None and record.agent_info.name == "oracle"
        assert record.verification is not None and record.verification.mode
        assert record.environment_setup and record.environment_setup.finished_at
        # Through a plain dict (as the explorer, an export or a user's script sees it) too.
        assert TrialResult.from_json(json.loads(text)).to_text() == text
    job_text = (real_job / "job.json").read_text()
    assert list(json.loads(job_text)) == JOB_KEYS
    job = JobResult.read(real_job / "job.json")
    assert job.to_text() == job_text
    assert job.summary is not None and job.summary.trials == 2 and job.summary.pass_at_1 == 1.0
    assert [t.result for t in job.trials or []] == [
        "hello-file__1/result.json",
        "textstats-word-count__1/result.json",
    ]
    record = read_job(real_job)
    assert record.status == "done" and [t.reward for t in record.trials] == [1.0, 1.0]


@pytest.mark.slow
def test_multi_step_result_round_trips(tmp_path: Path) -> None:
    from repogym.run.agents import OracleAgent
    from repogym.run.trial import TrialRunner
    from repogym.sandbox.fake import FakeSandbox

    task = load_task(_steps_task(tmp_path / "task"))  # its verifiers are shell scripts
    outcome = TrialRunner(FakeSandbox(host=True)).run(task, OracleAgent(), out_dir=tmp_path / "t")
    path = tmp_path / "t" / "result.json"
    text = path.read_text()
    record = TrialResult.read(path)
    assert record.to_text() == text
    assert record.step_results and record.step_results[0].step_name
    assert record.verification is not None and record.verification.mode == "steps"
    assert "step_results" in json.loads(text) and outcome.record.to_text() == text


def _old_result() -> dict[str, Any]:
    """A result.json as an early version wrote it: no checksum, no verification, no phase
    timings, an exception without traceback, and a key this version does not know."""
    return {
        "trial_name": "hello__2",
        "task_name": "acme/hello",
        "agent_info": {"name": "nop"},
        "agent_result": {"exit_code": 0, "steps": "many", "patch": "gold"},
        "verifier_result": {"reward": 0.0, "details": ["not", "an", "object"]},
        "exception_info": {"exception_type": "AgentError", "exception_message": "gave up"},
        "started_at": "2026-01-01T10:00:00+00:00",
        "finished_at": "2026-01-01T10:00:02+00:00",
        "legacy_note": {"kept": True},
    }


def test_old_shape_reads_tolerantly_and_keeps_what_it_had(tmp_path: Path) -> None:
    data = _old_result()
    record = TrialResult.from_json(data)
    assert record.task_checksum is None and record.verification is None
    assert record.agent_result is not None and record.agent_result.steps is None  # wrong type
    assert record.verifier_result is not None and record.verifier_result.details is None
    assert record.exception_info is not None
    assert record.exception_info.summary() == "AgentError: gave up"
    # Unknown keys are kept; absent keys stay absent when written back.
    written = record.to_json()
    assert written["legacy_note"] == {"kept": True}
    assert "task_checksum" not in written and "verification" not in written
    assert written["agent_result"]["patch"] == "gold"

    folder = tmp_path / "hello__2"
    folder.mkdir()
    (folder / "result.json").write_text(json.dumps(data))
    trial = read_trial(folder, job="old")
    assert trial.task_id == "hello" and trial.attempt == 2 and trial.agent == "nop"
    assert trial.reward == 0.0 and not trial.resolved and trial.steps is None
    assert trial.error == "AgentError: gave up" and trial.duration_s == 2.0
    assert trial.verification_mode is None and trial.task_checksum is None


def test_rollout_shape_round_trips() -> None:
    """A rollout's result.json: no checksum and no phase timings, a sandbox with a URL."""
    doc = {
        "id": "1",
        "trial_name": "t__1",
        "task_name": "t",
        "task_id": "t",
        "task_path": "http://127.0.0.1:8000",
        "agent_info": {"name": "llm", "version": "0"},
        "agent_result": {
            "exit_code": 0,
            "duration_s": 1.5,
            "output_tail": "",
            "model": "vllm/m",
            "usage": {"input_tokens": 1, "output_tokens": 2, "cost_usd": None, "model_calls": 1},
            "steps": 1,
            "tool_calls": 0,
            "stop_reason": "finished",
            "trajectory": "agent/trajectory.json",
        },
        "verifier_result": dict.fromkeys(
            ("rewards", "reward", "source", "details", "exit_code", "error")
        )
        | {"warnings": []},
        "verification": None,
        "exception_info": None,
        "started_at": "2026-01-01T10:00:00+00:00",
        "finished_at": "2026-01-01T10:00:02+00:00",
        "sandbox": {"backend": "openenv", "url": "http://127.0.0.1:8000"},
        "executor": {"name": "ray", "node": None},
    }
    text = json.dumps(doc, indent=2) + "\n"
    assert TrialResult.from_json(json.loads(text)).to_text() == text


def test_old_job_json_reads() -> None:
    job = JobResult.from_json(
        {
            "agent": "oracle",
            "attempts": "2",  # wrong type: read as unknown
            "summary": {"trials": "x"},  # unreadable summary: None, the job still reads
            "trials": [{"trial_name": "a__1"}, "junk", {"result": "b__1/result.json"}],
        }
    )
    assert job.agent == "oracle" and job.attempts is None and job.summary is None
    assert [t.trial_name for t in job.trials or []] == ["a__1", None]
    assert JobResult.from_json({}).trials is None


def test_unreadable_files_are_one_line_errors(tmp_path: Path) -> None:
    path = tmp_path / "result.json"
    with pytest.raises(RecordError, match="missing"):
        TrialResult.read(path, "t/result.json")
    path.write_text("[1, 2]")
    with pytest.raises(RecordError, match="not a JSON object"):
        TrialResult.read(path, "t/result.json")
    path.write_text("{")
    with pytest.raises(RecordError, match="not valid JSON"):
        JobResult.read(path)


def test_events_carry_the_data_live_views_read() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    def sink(kind: str, data: dict[str, Any]) -> None:
        seen.append((kind, data))

    PhaseEvent(phase="verifier", state="start").send(sink)
    PhaseEvent(phase="agent_execution", state="start", agent="oracle").send(sink)
    ErrorEvent(error_type="AgentError", text="gave up").send(sink)
    RewardEvent(result=VerifierResult(rewards={"reward": 1.0}, reward=1.0)).send(sink)
    PhaseEvent(phase="verifier", state="end").send(None)  # no sink: nothing happens
    assert seen == [
        ("phase", {"phase": "verifier", "state": "start"}),
        ("phase", {"phase": "agent_execution", "state": "start", "agent": "oracle"}),
        ("error", {"kind": "AgentError", "text": "gave up"}),
        ("reward", {"rewards": {"reward": 1.0}, "reward": 1.0}),
    ]
