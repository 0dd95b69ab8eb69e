"""Run records: reading job folders back, pass@k, the paired bootstrap, `repogym jobs`."""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.run import compare, records
from repogym.run.compare import compare_jobs, paired_bootstrap
from repogym.run.records import (
    is_resolved,
    mean_pass_at_k,
    pass_at_k,
    read_job,
)
from tests.conftest import EXAMPLES

# --- synthetic job folders -----------------------------------------------------------------


def result_doc(
    task_id: str,
    attempt: int,
    reward: float | None,
    *,
    resolved: bool | None = None,
    usage: dict[str, Any] | None = None,
    error: str | None = None,
    checksum: str | None = "sha256:same",
    agent: str = "fake",
) -> dict[str, Any]:
    """A result.json shaped like repogym.run.trial writes it."""
    details = {} if resolved is None else {"resolved": resolved}
    agent_result: dict[str, Any] = {"exit_code": 0, "timed_out": False, "duration_s": 1.5}
    if usage is not None:
        agent_result |= {
            "usage": usage,
            "steps": 7,
            "stop_reason": "finish",
            "model": "openai/gpt-test",
        }
    exc = None
    if error or reward is None:
        exc = {"exception_type": "RewardFileError", "exception_message": error or "no reward"}
    return {
        "trial_name": f"{task_id}__{attempt}",
        "task_name": f"acme/{task_id}",
        "task_id": task_id,
        "task_checksum": checksum,
        "agent_info": {"name": agent, "version": "0"},
        "agent_result": agent_result,
        "verifier_result": {
            "rewards": None if reward is None else {"reward": reward},
            "reward": reward,
            "details": details,
        },
        "verification": {"mode": "clean_room"},
        "exception_info": exc,
        "started_at": "2026-01-01T10:00:00+00:00",
        "finished_at": "2026-01-01T10:00:04.5+00:00",
        "agent_execution": {
            "started_at": "2026-01-01T10:00:01+00:00",
            "finished_at": "2026-01-01T10:00:03+00:00",
        },
    }


def write_job(
    root: Path,
    name: str,
    trials: dict[str, list[Any]],
    *,
    job_json: bool = True,
    agent: str = "fake",
    **kw: Any,
) -> Path:
    """A job folder: ``trials`` maps task id → one entry per attempt, each a reward or a dict
    of :func:`result_doc` keyword arguments (with ``reward``)."""
    job = root / name
    job.mkdir(parents=True)
    listed = []
    attempts = 1
    for task_id, entries in trials.items():
        attempts = max(attempts, len(entries))
        for i, entry in enumerate(entries, start=1):
            args = entry if isinstance(entry, dict) else {"reward": entry}
            doc = result_doc(task_id, i, agent=agent, **{**kw, **args})
            (job / f"{task_id}__{i}").mkdir()
            (job / f"{task_id}__{i}" / "result.json").write_text(json.dumps(doc))
            listed.append(
                {
                    "trial_name": f"{task_id}__{i}",
                    "task_id": task_id,
                    "result": f"{task_id}__{i}/result.json",
                }
            )
    if job_json:
        payload = {
            "agent": agent,
            "attempts": attempts,
            "started_at": f"2026-01-01T10:00:0{len(list(root.iterdir()))}+00:00",
            "finished_at": "2026-01-01T11:00:00+00:00",
            "summary": {},
            "trials": listed,
        }
        (job / "job.json").write_text(json.dumps(payload))
    return job


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


# --- the resolved rule and pass@k ----------------------------------------------------------


def test_resolved_rule() -> None:
    assert is_resolved({"resolved": True}, 0.5)  # the verifier says so
    assert not is_resolved({"resolved": False}, 1.0)  # ... and says no, whatever the reward
    assert not is_resolved({"resolved": None}, 1.0)
    assert is_resolved({}, 1.0) and is_resolved(None, 1.0)  # no `resolved`: reward >= 1.0
    assert not is_resolved({}, 0.99)
    assert not is_resolved(None, None)


@pytest.mark.parametrize(
    ("n", "c", "k", "want"),
    [
        (5, 2, 1, 0.4),
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (5, 2, 3, 0.9),  # 1 - C(3,3)/C(5,3) = 1 - 1/10
        (5, 2, 4, 1.0),  # fewer failures than k: every draw of 4 holds a success
        (5, 0, 3, 0.0),
        (5, 5, 5, 1.0),
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
        (1, 1, 1, 1.0),
    ],
)
def test_pass_at_k_hand_computed(n: int, c: int, k: int, want: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(want)


def test_pass_at_k_needs_k_attempts() -> None:
    assert pass_at_k(2, 1, 3) is None
    assert mean_pass_at_k([(3, 1), (2, 2), (3, 0)], 3) == pytest.approx(0.5)  # (1 + 0) / 2
    assert mean_pass_at_k([(3, 1), (3, 0)], 1) == pytest.approx(1 / 6)
    assert mean_pass_at_k([], 1) is None


def test_job_stats_per_task(tmp_path: Path) -> None:
    job = read_job(write_job(tmp_path, "j", {"a": [1.0, 0.0, 0.0], "b": [0.0, 0.0, 0.0]}))
    tasks = job.by_task()
    assert tasks["a"].pass_at_1 == pytest.approx(1 / 3) and tasks["a"].pass_at_k == 1.0
    assert tasks["a"].reward == pytest.approx(1 / 3) and tasks["a"].resolved == 1
    assert tasks["b"].pass_at_k == 0.0
    stats = job.stats()
    assert stats.k == 3 and stats.tasks == 2 and stats.trials == 6 and stats.resolved == 1
    assert stats.pass_at_1 == pytest.approx(1 / 6) and stats.pass_at_k == pytest.approx(0.5)
    assert stats.mean_reward == pytest.approx(1 / 6)
    assert job.status == "done" and not job.problems


# --- usage -------------------------------------------------------------------------------


def test_usage_is_none_when_unreported_never_zero(tmp_path: Path) -> None:
    usage = {"input_tokens": 1200, "output_tokens": 300, "cost_usd": 0.015, "model_calls": 4}
    job = read_job(
        write_job(
            tmp_path,
            "j",
            {
                "llm": [{"reward": 1.0, "usage": usage}, {"reward": 0.0, "usage": usage}],
                "plain": [1.0],
            },
        )
    )
    tasks = job.by_task()
    assert (tasks["llm"].input_tokens, tasks["llm"].output_tokens) == (2400, 600)
    assert tasks["llm"].cost_usd == pytest.approx(0.03)
    assert tasks["plain"].input_tokens is None and tasks["plain"].cost_usd is None
    trial = job.trials[0]
    assert (trial.steps, trial.stop_reason, trial.model, trial.model_calls) == (
        7,
        "finish",
        "openai/gpt-test",
        4,
    )
    assert trial.duration_s == 4.5 and trial.agent_duration_s == 2.0
    assert job.models == ["openai/gpt-test"]
    stats = job.stats()
    assert stats.input_tokens == 2400 and stats.trials_with_usage == 2
    none = read_job(write_job(tmp_path, "k", {"a": [1.0]}))
    assert none.stats().input_tokens is None and none.stats().cost_usd is None
    # cost unknown (no price) stays unknown even when tokens are known
    unpriced = {**usage, "cost_usd": None}
    job = read_job(write_job(tmp_path, "u", {"a": [{"reward": 1.0, "usage": unpriced}]}))
    assert job.stats().cost_usd is None and job.stats().input_tokens == 1200


# --- the paired bootstrap ----------------------------------------------------------------


def test_bootstrap_is_deterministic_and_covers_the_true_difference() -> None:
    rng = random.Random(7)
    # 300 tasks; A solves each with p=0.3, B with p=0.5: the true difference is 0.2.
    a = [float(rng.random() < 0.3) for _ in range(300)]
    b = [float(rng.random() < 0.5) for _ in range(300)]
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    ci = paired_bootstrap(diffs)
    assert ci is not None
    lo, hi = ci
    assert lo < 0.2 < hi
    assert lo < sum(diffs) / len(diffs) < hi
    assert 0.05 < hi - lo < 0.3  # about 2 × 1.96 × sd/√n
    assert paired_bootstrap(diffs) == ci  # same seed, same interval
    assert paired_bootstrap(diffs, seed=1) != ci
    assert paired_bootstrap([]) is None
    assert paired_bootstrap([0.25] * 10) == (0.25, 0.25)


def test_bootstrap_is_fast() -> None:
    diffs = [random.Random(i).random() - 0.5 for i in range(500)]
    start = time.perf_counter()
    paired_bootstrap(diffs)
    assert time.perf_counter() - start < 5.0  # about 0.4 s on the 2-core CI machine


def test_compare_flips_both_ways_and_only_in_one(tmp_path: Path) -> None:
    a = write_job(
        tmp_path,
        "a",
        {
            "both-solved": [1.0],
            "lost": [1.0],
            "gained": [0.0],
            "none": [0.0],
            "errored": [None],
            "only-a": [1.0],
            "edited": [{"reward": 0.0, "checksum": "sha256:old"}],
        },
    )
    b = write_job(
        tmp_path,
        "b",
        {
            "both-solved": [1.0],
            "lost": [0.0],
            "gained": [1.0],
            "none": [0.0],
            "errored": [1.0],
            "only-b": [0.5],
            "edited": [{"reward": 0.0, "checksum": "sha256:new"}],
        },
    )
    cmp = compare_jobs(read_job(a), read_job(b))
    assert cmp.resolved_only_by_b == ["errored", "gained"]  # an error is not resolved
    assert cmp.resolved_only_by_a == ["lost"]
    assert cmp.only_in_a == ["only-a"] and cmp.only_in_b == ["only-b"]
    assert cmp.no_reward == ["errored"]  # left out of the mean, never counted as 0
    assert cmp.changed == ["edited"]
    assert len(cmp.compared) == 5
    assert cmp.diff == pytest.approx(0.0)  # one gained, one lost among 5 rewarded pairs
    assert cmp.ci is not None and cmp.ci[0] < 0 < cmp.ci[1]
    data = cmp.to_json()
    assert data["tasks_in_both"] == 6 and data["tasks_compared"] == 5
    assert data["bootstrap"] == {"resamples": 10_000, "seed": compare.BOOTSTRAP_SEED}
    assert {t["task_id"]: t["flip"] for t in data["tasks"]}["lost"] == "a"


def test_task_resolved_means_more_than_half_the_attempts(tmp_path: Path) -> None:
    a = read_job(write_job(tmp_path, "a", {"t": [1.0, 0.0], "u": [1.0, 1.0, 0.0]}))
    b = read_job(write_job(tmp_path, "b", {"t": [1.0, 1.0], "u": [0.0, 0.0, 1.0]}))
    cmp = compare_jobs(a, b)
    assert cmp.resolved_only_by_b == ["t"] and cmp.resolved_only_by_a == ["u"]


# --- robustness --------------------------------------------------------------------------


def test_corrupt_files_are_one_line_reasons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    jobs = tmp_path / "jobs"
    write_job(jobs, "good", {"a": [1.0]})
    bad_job = write_job(jobs, "bad-job-json", {"a": [1.0], "b": [0.0]})
    (bad_job / "job.json").write_text("{not json")
    bad_trial = write_job(jobs, "bad-trial", {"a": [1.0], "b": [0.0]})
    (bad_trial / "b__1" / "result.json").write_text("[1, 2")
    missing = write_job(jobs, "missing-trial", {"a": [1.0], "b": [0.0]})
    (missing / "b__1" / "result.json").unlink()
    (jobs / "not-a-job").mkdir()
    (jobs / "notes.txt").write_text("x")

    by_name = {j.name: j for j in records.list_jobs(jobs)}
    assert set(by_name) == {"good", "bad-job-json", "bad-trial", "missing-trial"}
    assert by_name["good"].status == "done"
    job = by_name["bad-job-json"]
    assert job.status == "broken" and len(job.trials) == 2  # still read from its trials
    assert job.problems[0].startswith("job.json: not valid JSON (")
    job = by_name["bad-trial"]
    assert job.status == "broken" and [t.task_id for t in job.trials] == ["a"]
    assert job.problems == [
        "b__1/result.json: not valid JSON (Expecting ',' delimiter at line 1 column 6) "
        "(job.json lists it)"
    ]
    assert by_name["missing-trial"].problems == ["b__1/result.json: missing (job.json lists it)"]
    assert all("\n" not in p for j in by_name.values() for p in j.problems)

    res = invoke("jobs", "list", "--jobs-dir", str(jobs), "--json")
    assert res.exit_code == 0, res.output
    listed = {j["name"]: j for j in json.loads(res.stdout)["jobs"]}
    assert listed["bad-trial"]["status"] == "broken" and listed["good"]["status"] == "done"
    res = invoke("jobs", "list", "--jobs-dir", str(jobs))
    assert res.exit_code == 0 and "broken" in res.output
    assert "bad-trial: broken: b__1/result.json: not valid JSON" in res.output
    res = invoke("jobs", "show", "bad-trial", "--jobs-dir", str(jobs))
    assert res.exit_code == 1 and "b__1/result.json: not valid JSON" in res.output
    assert "Traceback" not in res.output


def test_running_job_is_read_from_its_trials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    jobs = tmp_path / "jobs"
    job = write_job(jobs, "running", {"a": [1.0, 0.0]}, job_json=False)
    (job / "b__1").mkdir()  # a trial under way: folder, no result yet
    (job / "b.build.log").write_text("")
    record = read_job(job)
    assert record.status == "running" and record.in_progress == ["b__1"]
    assert record.agent == "fake" and record.started_at == "2026-01-01T10:00:00+00:00"
    assert record.stats().pass_at_k == 1.0 and record.k == 2
    res = invoke("jobs", "show", str(job))
    assert res.exit_code == 0, res.output
    assert "no job.json yet" in res.output and "1 trial(s) in progress" in res.output
    res = invoke("jobs", "list", "--jobs-dir", str(jobs), "--json")
    assert json.loads(res.stdout)["jobs"][0]["status"] == "running"
    # A job only building its first environment is listed too.
    (jobs / "starting").mkdir()
    (jobs / "starting" / "a.build.log").write_text("")
    names = [j.name for j in records.list_jobs(jobs)]
    assert "starting" in names


def test_trials_job_json_does_not_list_are_ignored(tmp_path: Path) -> None:
    job = write_job(tmp_path, "j", {"a": [1.0]})
    old = job / "a__2"
    old.mkdir()
    (old / "result.json").write_text(json.dumps(result_doc("a", 2, 0.0)))
    record = read_job(job)
    assert [t.trial_name for t in record.trials] == ["a__1"] and record.ignored == ["a__2"]
    assert record.status == "done"


def test_cli_bad_input_exits_2(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    job = write_job(jobs, "j", {"a": [1.0]})
    for args, fragment in (
        (["list", "--jobs-dir", str(tmp_path / "nope")], "no such folder"),
        (["list", "--jobs-dir", str(job)], "is a job folder"),
        (["show", "nope", "--jobs-dir", str(jobs)], "no such job"),
        (["show", str(tmp_path)], "not a job folder"),
        (["compare", "j", "nope", "--jobs-dir", str(jobs)], "no such job"),
        (["export", "j", "--jobs-dir", str(jobs), "--out", str(tmp_path)], "is a folder"),
        (
            [
                "export",
                "j",
                "--jobs-dir",
                str(jobs),
                "--out",
                str(tmp_path / "x"),
                "--format",
                "csv",
            ],
            "use jsonl or parquet",
        ),
    ):
        res = invoke("jobs", *args)
        assert res.exit_code == 2, (args, res.output)
        assert fragment in res.output and "Traceback" not in res.output


# --- export ------------------------------------------------------------------------------


def test_export_jsonl_and_parquet(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    jobs = tmp_path / "jobs"
    usage = {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.5, "model_calls": 2}
    write_job(jobs, "a", {"t": [{"reward": 1.0, "usage": usage}, 0.0], "u": [None]}, agent="llm:x")
    write_job(jobs, "b", {"t": [{"reward": 0.5, "resolved": True}]}, agent="oracle")

    out = tmp_path / "out" / "trials.jsonl"
    res = invoke("jobs", "export", "a", "b", "--jobs-dir", str(jobs), "--out", str(out))
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["job"], r["task_id"], r["attempt"]) for r in rows] == [
        ("a", "t", 1),
        ("a", "t", 2),
        ("a", "u", 1),
        ("b", "t", 1),
    ]
    assert [c for c, _ in records.EXPORT_COLUMNS] == list(rows[0])
    first = rows[0]
    assert first["agent"] == "llm:x" and first["model"] == "openai/gpt-test"
    assert json.loads(first["rewards"]) == {"reward": 1.0}
    assert (first["input_tokens"], first["output_tokens"], first["cost_usd"]) == (10, 5, 0.5)
    assert (first["model_calls"], first["steps"], first["verification_mode"]) == (
        2,
        7,
        "clean_room",
    )
    assert rows[1]["input_tokens"] is None and rows[1]["cost_usd"] is None
    assert rows[2]["reward"] is None and rows[2]["error"] == "RewardFileError: no reward"
    assert rows[3]["resolved"] is True and rows[3]["reward"] == 0.5
    assert not [p for p in out.parent.iterdir() if p.name != "trials.jsonl"]  # no temp left

    pout = tmp_path / "trials.parquet"  # format from the suffix
    res = invoke("jobs", "export", "a", "b", "--jobs-dir", str(jobs), "--out", str(pout), "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["rows"] == 4 and json.loads(res.stdout)["format"] == "parquet"
    table = pq.read_table(pout)
    assert table.num_rows == 4
    assert str(table.schema.field("input_tokens").type) == "int64"
    assert str(table.schema.field("reward").type) == "double"
    assert table.to_pylist() == rows


def test_parquet_without_pyarrow_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = tmp_path / "jobs"
    write_job(jobs, "a", {"t": [1.0]})
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    out = tmp_path / "x.parquet"
    res = invoke(
        "jobs", "export", "a", "--jobs-dir", str(jobs), "--out", str(out), "--format", "parquet"
    )
    assert res.exit_code == 2
    assert "pip install 'repogym[explorer]'" in res.output and "Traceback" not in res.output
    assert not out.exists()


# --- real jobs: repogym run with oracle and nop --------------------------------------------


RUN_SUMMARIES: dict[str, dict[str, Any]] = {}


@pytest.fixture(scope="module")
def real_jobs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    jobs = tmp_path_factory.mktemp("jobs")
    for agent, attempts in (("oracle", "2"), ("nop", "1")):
        res = invoke(
            "run", str(EXAMPLES), "--agent", agent, "--attempts", attempts,
            "--out", str(jobs / agent), "--json",
        )  # fmt: skip
        assert res.exit_code == 0, res.output
        RUN_SUMMARIES[agent] = json.loads(res.stdout)["summary"]
    return jobs


@pytest.mark.slow
def test_run_reports_pass_at_k(real_jobs: Path) -> None:
    summary = json.loads((real_jobs / "oracle" / "job.json").read_text())["summary"]
    assert RUN_SUMMARIES["oracle"] == summary  # `run --json` prints the same summary
    assert {"trials", "mean_reward", "rewarded", "errors", "resolved"} <= summary.keys()
    # hello-file's verifier reports no `resolved`: reward 1.0 counts as resolved
    assert summary["resolved"] == 4 and summary["k"] == 2
    assert summary["pass_at_1"] == 1.0 and summary["pass_at_k"] == 1.0
    nop = json.loads((real_jobs / "nop" / "job.json").read_text())["summary"]
    assert nop["resolved"] == 0 and nop["pass_at_1"] == 0.0 and nop["k"] == 1


@pytest.mark.slow
def test_run_table_shows_pass_at_k(tmp_path: Path) -> None:
    res = invoke(
        "run", str(EXAMPLES / "hello-file"), "--agent", "oracle", "--attempts", "2",
        "--out", str(tmp_path / "job"),
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "pass@1" in res.output and "pass@2" in res.output


@pytest.mark.slow
def test_jobs_commands_on_real_runs(real_jobs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # tables unwrapped
    res = invoke("jobs", "list", "--jobs-dir", str(real_jobs), "--json")
    assert res.exit_code == 0, res.output
    listed = {j["name"]: j for j in json.loads(res.stdout)["jobs"]}
    assert listed["oracle"]["status"] == "done" and listed["oracle"]["trials"] == 4
    assert listed["oracle"]["pass_at_1"] == 1.0 and listed["nop"]["mean_reward"] == 0.0
    assert listed["oracle"]["input_tokens"] is None and listed["oracle"]["cost_usd"] is None

    res = invoke("jobs", "show", "oracle", "--jobs-dir", str(real_jobs), "--json")
    assert res.exit_code == 0, res.output
    tasks = {t["task_id"]: t for t in json.loads(res.stdout)["task_results"]}
    assert set(tasks) == {"hello-file", "textstats-word-count"}
    assert tasks["textstats-word-count"]["resolved"] == 2 and tasks["hello-file"]["k"] == 2
    assert tasks["hello-file"]["duration_s"] > 0 and tasks["hello-file"]["errors"] == []
    res = invoke("jobs", "show", str(real_jobs / "oracle"))
    assert res.exit_code == 0 and "pass@2" in res.output and "textstats-word-count" in res.output

    res = invoke("jobs", "compare", "nop", "oracle", "--jobs-dir", str(real_jobs), "--json")
    assert res.exit_code == 0, res.output
    cmp = json.loads(res.stdout)
    assert cmp["diff"] == 1.0 and cmp["ci"] == [1.0, 1.0]
    assert cmp["resolved_only_by_b"] == ["hello-file", "textstats-word-count"]
    assert cmp["resolved_only_by_a"] == [] and cmp["only_in_a"] == cmp["only_in_b"] == []
    res = invoke("jobs", "compare", "nop", "oracle", "--jobs-dir", str(real_jobs))
    assert res.exit_code == 0, res.output
    assert "resolved by B only (2): hello-file, textstats-word-count" in res.output
    assert "95% CI" in res.output

    out = real_jobs.parent / "real.jsonl"
    res = invoke("jobs", "export", "oracle", "nop", "--jobs-dir", str(real_jobs), "--out", str(out))
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 6 and {r["agent"] for r in rows} == {"oracle", "nop"}
    assert all(r["input_tokens"] is None and r["cost_usd"] is None for r in rows)
    assert all(r["duration_s"] and r["started_at"] for r in rows)
