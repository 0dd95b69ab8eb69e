"""generate on real repositories in the real sandbox: exact F2P/P2P sets, drop reasons,
flaky tests excluded, the verify gate, resume, and the emitted layout other tools read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.pipelines import GenerateError
from repogym.run.agents import CommandAgent, NopAgent, OracleAgent
from repogym.run.trial import TrialRunner
from repogym.sandbox import get_backend
from repogym.spec import GenerationInput
from repogym.taskdir import load_task
from repogym.taskdir.validate import validate_task
from repogym.workflows import generate
from tests.pipelines.shapes import AREA_V1, PYPROJECT
from tests.sources.conftest import GitRepo

pytestmark = pytest.mark.slow

TESTS_V1 = """\
from shapes.area import rectangle, square


def test_square():
    assert square(3) == 9


def test_square_zero():
    assert square(0) == 0
"""

# Alternates pass/fail from one run to the next within a sandbox session: a flaky test.
FLAKY = """\
import os
import tempfile

_STATE = os.path.join(tempfile.gettempdir(), "shapes-flip")


def test_flip():
    n = int(open(_STATE).read()) if os.path.exists(_STATE) else 0
    open(_STATE, "w").write(str(n + 1))
    assert n % 2 == 0
"""


@pytest.fixture(scope="module")
def shapes_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A Python + pytest history with one commit of every kind a miner must tell apart."""
    mp = pytest.MonkeyPatch()
    import os

    from tests.sources.conftest import BASE_EPOCH

    mp.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for who in ("AUTHOR", "COMMITTER"):
        mp.setenv(f"GIT_{who}_NAME", "Ada Tester")
        mp.setenv(f"GIT_{who}_EMAIL", "ada@example.com")
        mp.setenv(f"GIT_{who}_DATE", f"{BASE_EPOCH} +0000")
    repo = GitRepo(tmp_path_factory.mktemp("repos") / "shapes")
    shas: dict[str, str] = {}
    repo.write("pyproject.toml", PYPROJECT)
    repo.write("src/shapes/__init__.py", "")
    repo.write("src/shapes/area.py", AREA_V1)
    repo.write("tests/test_area.py", TESTS_V1)
    shas["init"] = repo.commit("Initial shapes package")

    repo.write("src/shapes/area.py", AREA_V1.replace("width + height", "width * height"))
    repo.write(
        "tests/test_area.py",
        TESTS_V1 + "\n\ndef test_rectangle():\n    assert rectangle(2, 5) == 10\n",
    )
    shas["fix"] = repo.commit(
        "Fix rectangle area computing the perimeter half\n\n"
        "rectangle(2, 5) returned 7: the area of a rectangle is width times height."
    )

    repo.write("README.md", "# shapes\n\nArea helpers.\n")
    shas["docs"] = repo.commit("Write a README for the package")

    repo.write(
        "tests/test_area.py",
        TESTS_V1
        + "\n\ndef test_rectangle():\n    assert rectangle(2, 5) == 10\n"
        + "\n\ndef test_rectangle_square():\n    assert rectangle(3, 3) == square(3)\n",
    )
    shas["tests_only"] = repo.commit("Cover a square rectangle in the tests")

    area = AREA_V1.replace("width + height", "width * height")
    repo.write("src/shapes/area.py", "# Area helpers.\n" + area)
    repo.write(
        "tests/test_area.py",
        (repo.path / "tests/test_area.py").read_text()
        + "\n\ndef test_square_one():\n    assert square(1) == 1\n",
    )
    shas["fixes_nothing"] = repo.commit("Tidy up the area module and check square(1)")

    area2 = (
        "# Area helpers.\n"
        + area
        + "\n\ndef triangle(base, height):\n    return base * height / 2\n"
    )
    repo.write("src/shapes/area.py", area2)
    repo.write("tests/test_flaky.py", FLAKY)
    tests_now = (repo.path / "tests/test_area.py").read_text()
    repo.write(
        "tests/test_area.py",
        tests_now.replace("import rectangle, square", "import rectangle, square, triangle")
        + "\n\ndef test_triangle():\n    assert triangle(4, 3) == 6\n",
    )
    shas["feature_flaky"] = repo.commit(
        "Add triangle area helper\n\nProvide triangle(base, height) returning half of base times height."
    )
    yield repo.path, shas
    mp.undo()


def run_generate(repo: Path, out: Path, **kw) -> dict:
    inp = GenerationInput(
        repo=str(repo), pipeline=kw.pop("pipeline", "commit_runtime"), out=out, **kw
    )
    result = generate(inp)
    return json.loads(result.report.read_text())


@pytest.fixture(scope="module")
def generated(shapes_repo, tmp_path_factory) -> tuple[Path, dict, dict[str, str]]:
    repo, shas = shapes_repo
    out = tmp_path_factory.mktemp("out")
    report = run_generate(repo, out, jobs=2)
    return out, report, shas


def test_yield_and_drop_reasons(generated) -> None:
    out, report, shas = generated
    by_key = {o["key"]: o for o in report["outcomes"]}
    assert report["yield"]["kept"] == 2
    dropped = report["yield"]["dropped"]
    assert dropped["root commit"] == 1
    assert dropped["no test change"] == 1
    assert dropped["tests only"] == 1
    assert by_key[shas["fixes_nothing"]]["reason"] == "no fail-to-pass test"
    assert by_key[shas["fix"]]["kept"] and by_key[shas["feature_flaky"]]["kept"]


def test_exact_f2p_p2p_sets(generated) -> None:
    out, _, shas = generated
    fix = load_task(out / "tasks" / f"local__shapes-{shas['fix'][:12]}")
    sub = fix.config.metadata["repo2env"]["commit_runtime"]
    assert sub["fail_to_pass"] == ["tests/test_area.py::test_rectangle"]
    assert sub["pass_to_pass"] == [
        "tests/test_area.py::test_square",
        "tests/test_area.py::test_square_zero",
    ]
    assert json.loads((fix.path / "tests/f2p.json").read_text()) == sub["fail_to_pass"]
    assert fix.config.metadata["repo2env"]["evaluation"]["status"] == "verified"


def test_flaky_test_excluded(generated) -> None:
    out, _, shas = generated
    task = load_task(out / "tasks" / f"local__shapes-{shas['feature_flaky'][:12]}")
    sub = task.config.metadata["repo2env"]["commit_runtime"]
    # The new import breaks the whole module before the fix, so every test in it fails to
    # collect there and passes after: all are fail-to-pass (as in SWE-bench).
    assert sub["fail_to_pass"] == [
        f"tests/test_area.py::{name}"
        for name in (
            "test_rectangle",
            "test_rectangle_square",
            "test_square",
            "test_square_one",
            "test_square_zero",
            "test_triangle",
        )
    ]
    assert sub["pass_to_pass"] == []
    assert sub["flaky_excluded"] == ["tests/test_flaky.py::test_flip"]


def test_emitted_layout_and_hygiene(generated) -> None:
    out, _, shas = generated
    task_dir = out / "tasks" / f"local__shapes-{shas['fix'][:12]}"
    assert validate_task(task_dir, deep=True).problems == []
    for rel in (
        "tests/test.sh",
        "tests/verifier.py",
        "tests/parsers.py",
        "tests/f2p.json",
        "tests/p2p.json",
        "solution/patch.diff",
        "solution/solve.sh",
        "environment/Dockerfile",
    ):
        assert (task_dir / rel).is_file(), rel
    # The environment is the base snapshot: no history, no hidden test change, no fix.
    repo_snapshot = task_dir / "environment" / "repo"
    assert not (repo_snapshot / ".git").exists()
    assert "test_rectangle" not in (repo_snapshot / "tests/test_area.py").read_text()
    assert "width + height" in (repo_snapshot / "src/shapes/area.py").read_text()
    instruction = (task_dir / "instruction.md").read_text()
    assert "rectangle" in instruction and shas["fix"][:7] not in instruction
    assert "width * height" not in instruction
    assert (out / "registry.json").is_file() and (out / "manifest.json").is_file()


def test_agent_fix_scores_and_nop_does_not(generated) -> None:
    out, _, shas = generated
    task = load_task(out / "tasks" / f"local__shapes-{shas['fix'][:12]}")
    runner = TrialRunner(get_backend("local"))
    assert runner.run(task, OracleAgent()).reward == 1.0
    assert runner.run(task, NopAgent()).reward == 0.0
    fix = runner.run(
        task, CommandAgent("sed -i 's/width + height/width * height/' src/shapes/area.py")
    )
    assert fix.reward == 1.0 and fix.reading.details["resolved"] is True
    cheat = runner.run(task, CommandAgent("rm -rf tests && mkdir tests"))
    assert cheat.reward == 0.0


def test_resume_skips_examined_candidates(generated, shapes_repo) -> None:
    out, _, _ = generated
    repo, _ = shapes_repo
    report = run_generate(repo, out, resume=True)
    assert report["outcomes"] == []  # nothing left to examine
    assert report["yield"]["kept"] == 0


def test_pr_runtime_from_merges_and_squashes(make_repo, tmp_path) -> None:
    repo: GitRepo = make_repo("prs")
    repo.write("pyproject.toml", PYPROJECT)
    repo.write("src/shapes/__init__.py", "")
    repo.write("src/shapes/area.py", AREA_V1)
    repo.write("tests/test_area.py", TESTS_V1)
    repo.commit("Initial shapes package")
    repo.checkout("-b", "fix-rect")
    repo.write("src/shapes/area.py", AREA_V1.replace("width + height", "width * height"))
    repo.write(
        "tests/test_area.py",
        TESTS_V1 + "\n\ndef test_rectangle():\n    assert rectangle(2, 5) == 10\n",
    )
    repo.commit("compute the area")
    repo.checkout("main")
    repo.merge(
        "fix-rect",
        "Merge pull request #5 from ada/fix-rect",
        "Rectangle area multiplies width by height",
    )
    area = (
        AREA_V1.replace("width + height", "width * height")
        + "\n\ndef circle(r):\n    return 3.14159 * r * r\n"
    )
    repo.write("src/shapes/area.py", area)
    repo.write(
        "tests/test_circle.py",
        "def test_circle():\n    from shapes.area import circle\n\n    assert round(circle(1), 2) == 3.14\n",
    )
    repo.commit("Add a circle area helper for round shapes (#6)")
    report = run_generate(repo.path, tmp_path / "out", pipeline="pr_runtime")
    kept = sorted(o["task_id"] for o in report["outcomes"] if o["kept"])
    assert kept == ["local__prs-5", "local__prs-6"]
    task = load_task(tmp_path / "out" / "tasks" / "local__prs-6")
    assert task.config.metadata["repo2env"]["pr_runtime"]["fail_to_pass"] == [
        "tests/test_circle.py::test_circle"
    ]
    assert "circle" in task.instruction().lower()


def test_an_out_holding_tasks_needs_resume(tmp_path) -> None:
    """The API refuses what the CLI refuses: --out already holding tasks without resume."""
    import shutil

    from tests.conftest import EXAMPLES

    out = tmp_path / "out"
    shutil.copytree(EXAMPLES / "hello-file", out / "tasks" / "hello-file", symlinks=True)
    inp = GenerationInput(repo=str(tmp_path / "nope"), pipeline="commit_runtime", out=out)
    with pytest.raises(GenerateError, match=r"already holds 1 task\(s\).*--resume"):
        generate(inp)
    assert sorted(p.name for p in out.iterdir()) == ["tasks"]


def test_bad_input(tmp_path) -> None:
    with pytest.raises(GenerateError, match="no such local repository"):
        generate(
            GenerationInput(
                repo=str(tmp_path / "nope"), pipeline="commit_runtime", out=tmp_path / "o"
            )
        )
    (tmp_path / "plain").mkdir()
    with pytest.raises(GenerateError, match="not a git repository|git"):
        generate(
            GenerationInput(
                repo=str(tmp_path / "plain"), pipeline="commit_runtime", out=tmp_path / "o"
            )
        )
    cli = CliRunner()
    res = cli.invoke(app, ["generate", "--repo", str(tmp_path), "--pipeline", "nope"])
    assert res.exit_code == 2 and "unknown pipeline" in res.output
    res = cli.invoke(app, ["generate", "--repo", str(tmp_path), "--opt", "max_p2p=lots"])
    assert res.exit_code == 2 and "max_p2p" in res.output
    res = cli.invoke(app, ["generate", "--repo", str(tmp_path), "--opt", "no_such_option=1"])
    assert res.exit_code == 2 and "no_such_option" in res.output
