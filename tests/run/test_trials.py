"""Real trials on the local sandbox: examples, foreign tasks, the strict reward contract (its
reward-file reading on the fake sandbox: no isolation needed there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.run.agents import CommandAgent, NopAgent, OracleAgent
from repogym.run.trial import TrialRunner
from repogym.sandbox import get_backend
from repogym.sandbox.fake import FakeSandbox
from repogym.taskdir import load_task
from tests.conftest import EXAMPLES, write_task

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runner() -> TrialRunner:
    return TrialRunner(get_backend("local"))


@pytest.fixture(scope="module")
def fake_runner() -> TrialRunner:
    """For the runner's own logic (reading reward files): no isolation needed."""
    return TrialRunner(FakeSandbox(host=True))


@pytest.mark.parametrize("task_id", ["hello-file", "textstats-word-count"])
def test_examples_oracle_1_nop_0(runner: TrialRunner, task_id: str, tmp_path: Path) -> None:
    task = load_task(EXAMPLES / task_id)
    oracle = runner.run(task, OracleAgent(), out_dir=tmp_path / "oracle")
    assert oracle.reward == 1.0, oracle.result
    assert oracle.error is None
    nop = runner.run(task, NopAgent(), out_dir=tmp_path / "nop")
    assert nop.reward == 0.0, nop.result
    result = json.loads((tmp_path / "oracle" / "result.json").read_text())
    assert result["task_name"] == task.name
    assert result["verifier_result"]["rewards"] == {"reward": 1.0}
    assert result["agent_info"]["name"] == "oracle"
    for phase in ("environment_setup", "agent_execution", "verifier"):
        assert result[phase]["started_at"] and result[phase]["finished_at"]
    assert result["sandbox"]["base_mapping"]  # how FROM was honoured is recorded
    assert (tmp_path / "oracle" / "verifier-stdout.txt").read_text()


def test_agent_edit_is_graded(runner: TrialRunner) -> None:
    task = load_task(EXAMPLES / "textstats-word-count")
    fix = "sed -i 's/text.split(\" \")/text.split()/' textstats/counts.py"
    partial = runner.run(task, CommandAgent(fix))
    # split() fixes both F2P tests but the `if not text` guard stays: still correct → 1.0
    assert partial.reward == 1.0, partial.verifier_stdout
    assert partial.reading and partial.reading.details and partial.reading.details["resolved"]
    broken = runner.run(
        task, CommandAgent("echo 'def char_count(t): return 0' >> textstats/counts.py")
    )
    # P2P regression (char_count broken) and F2P still failing → 0.
    assert broken.reward == 0.0
    assert broken.reading.details["regressions"]


def test_editing_hidden_tests_does_not_help(runner: TrialRunner) -> None:
    task = load_task(EXAMPLES / "textstats-word-count")
    cheat = "printf 'import unittest\\n' > tests/test_counts.py"
    assert runner.run(task, CommandAgent(cheat)).reward == 0.0


def _verifier_task(root: Path, name: str, test_sh: str) -> Path:
    return write_task(
        root,
        name,
        dockerfile="FROM debian:bookworm\nWORKDIR /work\n",
        test_sh=test_sh,
        files={"solution/solve.sh": "#!/bin/bash\ntrue\n"},
    )


@pytest.mark.parametrize(
    ("test_sh", "fragment"),
    [
        ("#!/bin/bash\necho no reward here\n", "wrote no reward"),
        ("#!/bin/bash\necho nan > /logs/verifier/reward.txt\n", "non-finite"),
        ("#!/bin/bash\n: > /logs/verifier/reward.txt\n", "empty"),
        ('#!/bin/bash\necho \'{"reward": "x"}\' > /logs/verifier/reward.json\n', "finite"),
        ("#!/bin/bash\necho PASSED\nexit 0\n", "wrote no reward"),
    ],
)
def test_bad_verifier_output_is_none_with_error(
    fake_runner: TrialRunner, tmp_path: Path, test_sh: str, fragment: str
) -> None:
    task = load_task(_verifier_task(tmp_path, "v", test_sh))
    outcome = fake_runner.run(task, OracleAgent())
    assert outcome.reward is None
    assert outcome.error and fragment in outcome.error
    assert outcome.result["verifier_result"]["rewards"] is None


def test_reward_json_wins(fake_runner: TrialRunner, tmp_path: Path) -> None:
    sh = (
        "#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n"
        'echo \'{"reward": 0.5, "lint": 1}\' > /logs/verifier/reward.json\n'
    )
    outcome = fake_runner.run(load_task(_verifier_task(tmp_path, "v", sh)), NopAgent())
    assert outcome.reward == 0.5
    assert outcome.result["verifier_result"]["rewards"] == {"reward": 0.5, "lint": 1.0}


TERMINAL_BENCH_TOML = """\
version = "1.0"

[metadata]
author_name = "someone"
difficulty = "easy"
category = "file-operations"

[verifier]
timeout_sec = 120.0

[agent]
timeout_sec = 120.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory = "1G"
storage = "1G"
allow_internet = false
"""

TB_TEST_SH = """\
#!/bin/bash
# terminal-bench style: run pytest-like checks on the final state, write the reward.
cd /app
if python3 /tests/test_outputs.py 2>&1; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

TB_TESTS = """\
import os
import unittest


class TestOutputs(unittest.TestCase):
    def test_sorted_file(self):
        with open("/app/sorted.txt") as fh:
            self.assertEqual(fh.read().split(), ["apple", "banana", "cherry"])


if __name__ == "__main__":
    unittest.main()
"""


@pytest.mark.parametrize("python", ["3.11", "3.12"])
def test_foreign_terminal_bench_task(runner: TrialRunner, tmp_path: Path, python: str) -> None:
    task_dir = write_task(
        tmp_path,
        "sort-words",
        toml=TERMINAL_BENCH_TOML,
        instruction="Sort the words in /app/words.txt into /app/sorted.txt, one per line.\n",
        dockerfile=(
            f"FROM python:{python}-slim\nWORKDIR /app\n"
            "RUN printf 'cherry\\napple\\nbanana\\n' > /app/words.txt\n"
        ),
        test_sh=TB_TEST_SH,
        files={
            "tests/test_outputs.py": TB_TESTS,
            "solution/solve.sh": "#!/bin/bash\nsort /app/words.txt > /app/sorted.txt\n",
        },
    )
    task = load_task(task_dir)
    assert task.warnings  # legacy keys were translated
    oracle = runner.run(task, OracleAgent())
    assert oracle.reward == 1.0, oracle.verifier_stdout
    assert oracle.result["sandbox"]["base_mapping"]
    assert runner.run(task, NopAgent()).reward == 0.0


def test_cli_run_and_verify_examples(tmp_path: Path, examples_copy: Path) -> None:
    cli = CliRunner()
    res = cli.invoke(
        app,
        ["run", str(examples_copy), "--agent", "oracle", "--out", str(tmp_path / "job"), "--json"],
    )
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout)
    assert payload["summary"]["mean_reward"] == 1.0 and payload["summary"]["errors"] == 0
    job = json.loads((tmp_path / "job" / "job.json").read_text())
    assert {t["task_id"] for t in job["trials"]} == {"hello-file", "textstats-word-count"}

    before = {p.name: load_task(p).compute_hash() for p in examples_copy.iterdir()}
    res = cli.invoke(app, ["verify", str(examples_copy), "--reruns", "1", "--json"])
    assert res.exit_code == 0, res.output
    verdicts = json.loads(res.stdout)
    assert verdicts["summary"] == {"tasks": 2, "verified": 2, "flaky": 0, "broken": 0}
    for p in examples_copy.iterdir():
        task = load_task(p)
        evaluation = task.config.metadata["repo2env"]["evaluation"]
        assert evaluation["status"] == "verified" and evaluation["oracle_runs"] == 2
        assert task.compute_hash() == before[p.name]  # recording results never stales the hash
    # The recorded hash of the graded example is still valid.
    res = cli.invoke(app, ["validate", str(examples_copy)])
    assert res.exit_code == 0, res.output


def test_verify_flags_broken_task(tmp_path: Path) -> None:
    # A verifier that pays for nothing: nop gets 1 → broken, exit 1.
    _verifier_task(tmp_path / "ds", "pays", "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    res = CliRunner().invoke(app, ["verify", str(tmp_path / "ds"), "--reruns", "0", "--json"])
    assert res.exit_code == 1
    verdict = json.loads(res.stdout)["tasks"][0]
    assert verdict["status"] == "broken"
    assert any("pays for nothing" in r for r in verdict["reasons"])
