"""A trial records the task's content hash as its provenance model reads it (``task_checksum``),
whether the trial ran here or its unit was lost on a worker; a task without one records None."""

from __future__ import annotations

from pathlib import Path

from repogym.executors import Done
from repogym.run.agents import NopAgent
from repogym.run.remote_job import failed_result
from repogym.run.trial import TrialRunner
from repogym.sandbox.fake import FakeSandbox
from repogym.taskdir import load_task, set_content_hash
from tests.conftest import write_task

TEST_SH = "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n"


def _task(root: Path, name: str, *, hashed: bool) -> Path:
    path = write_task(
        root, name, dockerfile="FROM debian:bookworm\nWORKDIR /work\n", test_sh=TEST_SH
    )
    if hashed:
        set_content_hash(path)
    return path


def test_trial_and_lost_unit_record_the_recorded_hash(tmp_path: Path) -> None:
    runner = TrialRunner(FakeSandbox(host=True))
    hashed = load_task(_task(tmp_path, "hashed", hashed=True))
    digest = hashed.provenance.content_hash if hashed.provenance else None
    assert digest is not None and digest.startswith("sha256:")
    outcome = runner.run(hashed, NopAgent(), out_dir=tmp_path / "trial")
    assert outcome.result["task_checksum"] == digest
    lost = failed_result(hashed, "hashed__1", "nop", "fake", Done("k", error="worker lost"))
    assert lost.task_checksum == digest

    foreign = load_task(_task(tmp_path, "foreign", hashed=False))
    assert foreign.provenance is None
    outcome = runner.run(foreign, NopAgent(), out_dir=tmp_path / "trial2")
    assert outcome.result["task_checksum"] is None
    lost = failed_result(foreign, "foreign__1", "nop", "fake", Done("k", error="worker lost"))
    assert lost.task_checksum is None
