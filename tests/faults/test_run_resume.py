"""A killed ``run`` resumes: ``repogym run --resume --out JOB`` keeps the trials that finished
(same record, not run again), runs the ones that did not, and writes ``job.json`` over all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from repogym.cli import app
from tests.conftest import EXAMPLES
from tests.faults.test_one_line import one_line

ROOT = Path(__file__).resolve().parents[2]
cli = CliRunner()
# Quick in /app (hello-file), 60 s in /workspace (textstats): kill lands in the second trial.
SLOW_SECOND = 'command:[ "$PWD" = /workspace ] && sleep 60; true'


def test_resume_keeps_finished_trials_and_runs_the_rest(tmp_path: Path) -> None:
    job = tmp_path / "job"
    res = cli.invoke(app, ["run", str(EXAMPLES), "--agent", "nop", "--out", str(job)])
    assert res.exit_code == 0, res.output
    kept = json.loads((job / "hello-file__1" / "result.json").read_text())
    # What a kill leaves: no job.json, a trial folder without its result.
    (job / "job.json").unlink()
    (job / "textstats-word-count__1" / "result.json").unlink()
    res = cli.invoke(app, ["run", str(EXAMPLES), "--agent", "nop", "--out", str(job)])
    one_line(res, 2, "already holds a job", "--resume")
    res = cli.invoke(
        app, ["run", str(EXAMPLES), "--agent", "nop", "--out", str(job), "--resume", "--json"]
    )
    assert res.exit_code == 0, res.output
    again = json.loads((job / "hello-file__1" / "result.json").read_text())
    assert again["id"] == kept["id"]  # kept, not rerun
    rerun = json.loads((job / "textstats-word-count__1" / "result.json").read_text())
    assert rerun["verifier_result"]["reward"] == 0.0
    listed = json.loads((job / "job.json").read_text())
    assert sorted(t["trial_name"] for t in listed["trials"]) == [
        "hello-file__1",
        "textstats-word-count__1",
    ]


def test_a_task_changed_since_is_run_again(tmp_path: Path) -> None:
    import shutil

    from repogym.taskdir.task import update_task_toml

    data = tmp_path / "data"
    shutil.copytree(EXAMPLES, data)
    job = tmp_path / "job"
    assert cli.invoke(app, ["run", str(data), "--agent", "nop", "--out", str(job)]).exit_code == 0
    first = json.loads((job / "hello-file__1" / "result.json").read_text())["id"]
    (data / "hello-file" / "instruction.md").write_text("Write something else.\n")
    update_task_toml(data / "hello-file", rehash=True)
    res = cli.invoke(app, ["run", str(data), "--agent", "nop", "--out", str(job), "--resume"])
    assert res.exit_code == 0, res.output
    assert json.loads((job / "hello-file__1" / "result.json").read_text())["id"] != first


def test_resume_needs_a_job_folder(tmp_path: Path) -> None:
    res = cli.invoke(app, ["run", str(EXAMPLES), "--resume"])
    assert res.exit_code == 2 and "--resume needs --out" in res.output


def test_sigkill_midway_then_resume(tmp_path: Path) -> None:
    job = tmp_path / "job"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    argv = [sys.executable, "-m", "repogym.cli", "run", str(EXAMPLES), "--out", str(job)]
    proc = subprocess.Popen(
        [*argv, "--agent", SLOW_SECOND],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while not (job / "hello-file__1" / "result.json").exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        time.sleep(1)  # the second trial is under way
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (job / "job.json").exists()
    kept = json.loads((job / "hello-file__1" / "result.json").read_text())["id"]
    res = subprocess.run(
        [*argv, "--agent", "nop", "--resume", "--json"], env=env, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    assert json.loads((job / "hello-file__1" / "result.json").read_text())["id"] == kept
    listed = json.loads((job / "job.json").read_text())
    assert len(listed["trials"]) == 2


def test_sigterm_stops_the_running_trial_and_records_it(tmp_path: Path) -> None:
    """The second trial's agent sleeps 60 s: SIGTERM ends it long before that, the job is
    recorded (the trial as Interrupted), and --resume runs just that trial again."""
    job = tmp_path / "job"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    argv = [sys.executable, "-m", "repogym.cli", "run", str(EXAMPLES), "--out", str(job)]
    proc = subprocess.Popen(
        [*argv, "--agent", SLOW_SECOND],
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not (job / "hello-file__1" / "result.json").exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        time.sleep(3)  # the second trial's agent is sleeping
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=55)  # well before the agent's 60 s would end
        stopped_after = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 143, err
    assert stopped_after < 55
    assert "--resume" in err and "Traceback" not in err
    listed = json.loads((job / "job.json").read_text())
    by_name = {t["trial_name"]: t for t in listed["trials"]}
    assert set(by_name) == {"hello-file__1", "textstats-word-count__1"}
    stopped = json.loads((job / "textstats-word-count__1" / "result.json").read_text())
    assert stopped["exception_info"]["exception_type"] == "Interrupted"
    kept = json.loads((job / "hello-file__1" / "result.json").read_text())["id"]
    res = subprocess.run(
        [*argv, "--agent", "nop", "--resume"], env=env, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    assert json.loads((job / "hello-file__1" / "result.json").read_text())["id"] == kept
    again = json.loads((job / "textstats-word-count__1" / "result.json").read_text())
    assert again["exception_info"] is None


def test_nothing_an_agent_writes_is_kept_as_a_finished_trial(tmp_path: Path) -> None:
    """Attack: an agent leaves a forged finished record wherever it can write, then the job
    is killed before the trial's own record. Resume must run the trial again, not keep it."""
    forged = json.dumps(
        {"task_id": "hello-file", "trial_name": "hello-file__1", "verifier_result": {"reward": 1.0}}
    )
    plant = (
        f"command:for d in /logs/agent /logs/verifier /logs /app /tmp; do mkdir -p $d; "
        f"printf '%s' '{forged}' > $d/result.json; done; true"
    )
    job = tmp_path / "job"
    argv = ["run", str(EXAMPLES / "hello-file"), "--out", str(job)]
    assert cli.invoke(app, [*argv, "--agent", plant]).exit_code == 0
    (job / "job.json").unlink()
    (job / "hello-file__1" / "result.json").unlink()  # killed before its record
    res = cli.invoke(app, [*argv, "--agent", "nop", "--resume", "--json"])
    assert res.exit_code == 0, res.output
    record = json.loads((job / "hello-file__1" / "result.json").read_text())
    assert record["verifier_result"]["reward"] == 0.0  # rerun with nop, not the forged 1.0
    assert record["agent_info"]["name"] == "nop"
