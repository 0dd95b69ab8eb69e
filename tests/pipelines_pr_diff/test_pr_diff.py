"""pr_diff on a real repository with merged PRs: every filter counted in the yield table, the
task layout and its hygiene (no gold outside tests/ and solution/), and grading in the real
sandbox (gold 1.0, nop 0.0, unrelated < 0.2, tampering earns nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.run.agents import CommandAgent, NopAgent, OracleAgent
from repogym.run.trial import TrialRunner
from repogym.sandbox import get_backend
from repogym.shipped import diff_reward
from repogym.spec import GenerationInput
from repogym.taskdir import load_task
from repogym.taskdir.validate import leaked_lines, validate_task
from repogym.workflows import generate
from tests.pipelines_pr_diff.history import OPTS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def generated(pr_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("out")
    args = ["generate", "--repo", str(pr_repo), "--pipeline", "pr_diff", "--out", str(out)]
    for key, value in OPTS.items():
        args += ["--opt", f"{key}={value}"]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads((out / "generate-report.json").read_text())
    return out, report


def _task(out: Path, number: int):
    return load_task(out / "tasks" / f"local__calc-{number}")


def test_yield_table_counts_every_filter(generated) -> None:
    _, report = generated
    assert report["yield"]["kept"] == 2, report
    assert report["yield"]["dropped"] == {
        "draft": 1,
        "too many files": 1,
        "test-only": 1,
        "docs-only": 1,
        "revert": 1,
        "tiny diff": 1,
        "binary-only": 1,
        "too large": 1,
    }
    kept = sorted(o["task_id"] for o in report["outcomes"] if o["kept"])
    assert kept == ["local__calc-1", "local__calc-2"]


def test_layout_provenance_and_validate(generated) -> None:
    out, _ = generated
    for number in (1, 2):
        task = _task(out, number)
        report = validate_task(task.path, deep=True)
        assert report.ok and report.problems == [], report.problems
        for rel in (
            "environment/Dockerfile",
            "tests/test.sh",
            "tests/verifier.py",
            "tests/diff_reward.py",
            "tests/oracle.patch",
            "tests/instruction.md",
            "tests/base_manifest.json",
            "tests/config.json",
            "solution/solve.sh",
            "solution/patch.diff",
        ):
            assert (task.path / rel).is_file(), rel
        block = task.config.metadata["repo2env"]
        assert block["pipeline"] == "pr_diff" and block["reward_kinds"] == ["diff_similarity"]
        assert block["pr_diff"]["pr_number"] == number
        assert block["evaluation"]["status"] == "verified"
        assert block["evaluation"]["nop_reward"] == 0.0
        # Without a network the verifier cannot reach a judge: it asks for no host variable.
        assert task.config.verifier.env == {}
        # No network for the agent, nor for the verifier unless a judge is opted into.
        assert task.config.environment.network_mode == "no-network"
        assert task.config.verifier.network_mode == "no-network"
        dockerfile = (task.path / "environment/Dockerfile").read_text()
        assert dockerfile.startswith("FROM python:3.12-slim\n") and "RUN" not in dockerfile
    sub = _task(out, 2).config.metadata["repo2env"]["pr_diff"]
    assert sub["files"] == ["docs/usage.md", "pkg/calc.py"]  # tests are not part of the gold


def test_gold_lives_only_in_tests_and_solution(generated) -> None:
    out, _ = generated
    for number in (1, 2):
        task = _task(out, number)
        gold = (task.path / "tests/oracle.patch").read_text()
        patch = (task.path / "solution/patch.diff").read_text()
        assert "subtract" in gold or "multiply" in gold
        instruction = (task.path / "instruction.md").read_text()
        assert leaked_lines(instruction, gold) == [] and leaked_lines(instruction, patch) == []
        added = [
            ln[1:].strip() for ln in gold.splitlines() if ln.startswith("+") and ln[1:2] != "+"
        ]
        signature = next(a for a in added if a.startswith("def "))
        assert signature not in instruction
        assert (task.path / "tests/instruction.md").read_text() == instruction
        shipped = (task.path / "tests/diff_reward.py").read_bytes()
        assert shipped == Path(diff_reward.__file__).read_bytes()  # the same scorer
        for path in (task.path / "environment").rglob("*"):
            if path.is_file():
                text = path.read_bytes().decode("utf-8", "replace")
                assert signature not in text, path
                assert gold.strip() not in text and patch.strip() not in text
        # The environment is the base: the PR's function is absent from the snapshot.
        calc = (task.path / "environment/repo/pkg/calc.py").read_text()
        assert signature not in calc


def test_grading_in_the_sandbox(generated) -> None:
    out, _ = generated
    task = _task(out, 1)
    runner = TrialRunner(get_backend("local"))
    gold = runner.run(task, OracleAgent())
    assert gold.reward == 1.0, gold.result
    assert gold.reading.details["judge_status"] == "off"
    assert gold.reading.rewards["similarity"] == 1.0

    nop = runner.run(task, NopAgent())
    assert nop.reward == 0.0 and nop.reading.rewards["format_valid"] == 0.0

    unrelated = runner.run(
        task, CommandAgent("printf 'def unrelated():\\n    return 42\\n' >> pkg/extra.py")
    )
    assert unrelated.reward is not None and unrelated.reward < 0.2, unrelated.reading
    assert unrelated.reading.details["files_changed"] == ["pkg/extra.py"]

    # The right change written another way earns most of the reward, not all of it.
    close = runner.run(
        task,
        CommandAgent("printf '\\n\\ndef multiply(x, y):\\n    return x * y\\n' >> pkg/calc.py"),
    )
    assert 0.5 < close.reward < 1.0, close.reading

    # Edits to test files are not part of the answer.
    tests_only = runner.run(task, CommandAgent("echo '# more' >> tests/test_calc.py"))
    assert tests_only.reward == 0.0


def test_attacks_earn_nothing(generated) -> None:
    out, _ = generated
    task = _task(out, 1)
    runner = TrialRunner(get_backend("local"))
    # A file turned into a symlink to the hidden gold never reaches the verifier: the clean
    # room drops symlinks that leave the working tree, so it earns no more than doing nothing
    # (and less than deleting the file, which the structural components credit).
    link = runner.run(task, CommandAgent("rm pkg/calc.py && ln -s /tests/oracle.patch pkg/calc.py"))
    deleted = runner.run(task, CommandAgent("rm pkg/calc.py"))
    assert link.reward == 0.0
    assert link.result["verification"]["dropped"] == [
        {"path": "pkg/calc.py", "reason": "symlink leaves the working tree (/tests/oracle.patch)"}
    ]
    assert deleted.reward is not None and deleted.reading.rewards["similarity"] < 0.2
    # In place, the symlink is never followed: it scores exactly as deleting the file does.
    in_place = TrialRunner(get_backend("local"), verification="in_place")
    link = in_place.run(
        task, CommandAgent("rm pkg/calc.py && ln -s /tests/oracle.patch pkg/calc.py")
    )
    assert link.reward == deleted.reward
    # Copying the gold can't happen in the agent phase (no /tests); planting a diff in the
    # base copy so the edits look like the gold has no effect in the clean room (the base copy
    # comes fresh from the image) and is detected in place.
    edit = "printf '\\n\\ndef multiply(a, b):\\n    return a * b\\n' >> pkg/calc.py"
    plant = " && echo '# changed' >> /opt/repogym/base/pkg/calc.py"
    honest = runner.run(task, CommandAgent(edit))
    tamper = runner.run(task, CommandAgent(edit + plant))
    assert tamper.reward == honest.reward
    tamper = in_place.run(task, CommandAgent(edit + plant))
    assert tamper.reward == 0.0
    assert "base snapshot modified" in " ".join(tamper.reading.details["notes"])
    assert not Path("/tests/oracle.patch").exists()


# Code the interpreter runs at start-up, before the verifier's first line, left by the agent in
# its own user-site folder: it puts a scorer of its own where the verifier's import would find
# it first (sys.modules), one that pays 1.0 for anything.
START_UP_SCORER = """\
import sys, types
fake = types.ModuleType("diff_reward")
fake.tree_diff = lambda changes: ""
fake.score_diff = lambda predicted, gold, judge=None: {
    "reward": 1.0, "format_valid": False, "capped": False, "weights": {}, "notes": [],
    "components": {"similarity": 1.0},
}
sys.modules["diff_reward"] = fake
"""


def test_start_up_code_cannot_stand_in_for_the_scorer(generated) -> None:
    """Attack: the verifier loads its scorer (``tests/diff_reward.py``) from its own folder. In
    place, an agent that cannot touch ``/tests`` can still leave ``usercustomize.py`` in its user
    site folder (or a ``.pth`` in a site-packages it may write): the interpreter runs it before
    the verifier, and a scorer it put in ``sys.modules`` was the one imported, paying 1.0 for
    doing nothing. The verifier now runs isolated (no start-up code) and loads its siblings by
    their file in its own folder."""
    out, _ = generated
    task = _task(out, 1)
    plant = (
        "d=$(python3 -c 'import site; print(site.getusersitepackages())') && mkdir -p \"$d\""
        " && cat > \"$d/usercustomize.py\" <<'EOF'\n" + START_UP_SCORER + "EOF\n"
    )
    in_place = TrialRunner(get_backend("local"), verification="in_place")
    nop = in_place.run(task, NopAgent())
    attack = in_place.run(task, CommandAgent(plant))
    assert attack.result["agent_result"]["exit_code"] == 0, attack.result
    assert nop.reward == 0.0
    assert attack.reward == nop.reward, attack.reading


def test_run_command_forwards_the_reward(generated, tmp_path) -> None:
    out, _ = generated
    task_dir = out / "tasks" / "local__calc-2"
    res = CliRunner().invoke(
        app, ["run", str(task_dir), "--agent", "oracle", "--out", str(tmp_path / "job"), "--json"]
    )
    assert res.exit_code == 0, res.output
    assert '"reward": 1.0' in res.output


def test_python_api_builds_the_same_tasks(pr_repo, tmp_path) -> None:
    """generate() directly, with a limit: the newest kept PR only."""
    result = generate(
        GenerationInput(
            repo=str(pr_repo), pipeline="pr_diff", out=tmp_path / "o", limit=1, options=OPTS
        )
    )
    assert [o.candidate.task_id for o in result.outcomes if o.kept] == ["local__calc-2"]


def test_validate_and_verify_commands(generated) -> None:
    out, _ = generated
    cli = CliRunner()
    res = cli.invoke(app, ["validate", "--deep", str(out / "tasks"), "--json"])
    assert res.exit_code == 0, res.output
    res = cli.invoke(app, ["verify", str(out / "tasks"), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)["summary"]
    assert summary["tasks"] == summary["verified"] == 2
