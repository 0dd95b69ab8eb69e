"""generate's reward-integrity steps on a real repository built in code: whole-suite P2P, the
mutant gate, de-duplication, pinned dependencies, skip counts, the declared clean room."""

from __future__ import annotations

import json
import tomllib

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.spec import GenerationInput
from repogym.workflows import generate
from tests.sources.conftest import GitRepo

pytestmark = pytest.mark.slow

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "geo"
version = "0.1.0"

[project.optional-dependencies]
test = ["pytest>=7"]

[tool.setuptools]
packages = ["geo"]
"""
SHAPES = """\
import math


def circle_area(r):
    return math.pi * r * r


def square_area(side):
    return side * side


def describe(shape, size):
    return f"{shape} of size {size}"
"""
FIXED = SHAPES.replace(
    "def circle_area(r):\n    return math.pi * r * r",
    'def circle_area(r):\n    if r < 0:\n        raise ValueError("negative radius")\n'
    "    return math.pi * r * r",
)
WEAK = FIXED.replace(
    'def describe(shape, size):\n    return f"{shape} of size {size}"',
    "def describe(shape, size):\n    label = shape.strip().lower()\n    if size > 100:\n"
    '        label = "large " + label\n    return f"{label} of size {size}"',
).replace(
    "def square_area(side):\n    return side * side",
    'def square_area(side):\n    if side < 0:\n        raise ValueError("negative side")\n'
    "    return side * side",
)
TEST_SHAPES = """\
import math

import pytest

from geo.shapes import circle_area, square_area


def test_circle():
    assert circle_area(1) == math.pi


def test_square():
    assert square_area(3) == 9
"""
TEST_FIX = (
    TEST_SHAPES
    + """

def test_negative_radius():
    with pytest.raises(ValueError):
        circle_area(-1)
"""
)
TEST_WEAK = (
    TEST_FIX
    + """

def test_negative_side():
    with pytest.raises(ValueError):
        square_area(-2)
"""
)
TEST_UNITS = """\
import pytest


def test_units():
    assert "m" + "2" == "m2"


@pytest.mark.skip(reason="needs the plotting extra")
def test_plot():
    pass
"""


def build(repo: GitRepo) -> dict[str, str]:
    repo.write("pyproject.toml", PYPROJECT)
    repo.write("geo/__init__.py", "")
    repo.write("geo/shapes.py", SHAPES)
    repo.write("tests/test_shapes.py", TEST_SHAPES)
    repo.write("tests/test_units.py", TEST_UNITS)
    repo.commit("Shapes")
    repo.write("geo/shapes.py", FIXED)
    repo.write("tests/test_shapes.py", TEST_FIX)
    shas = {
        "fix": repo.commit(
            "Reject a negative radius in circle_area\n\nIt returned a positive area.\n"
        )
    }
    repo.write("geo/shapes.py", SHAPES)
    repo.write("tests/test_shapes.py", TEST_SHAPES)
    repo.commit("Undo the radius check for now\n\nIt will come back with more tests.\n")
    repo.write("geo/shapes.py", FIXED)
    repo.write("tests/test_shapes.py", TEST_FIX)
    shas["again"] = repo.commit(
        "Reject a negative radius in circle_area again (#7)\n\n"
        "The same fix, landed a second time (squash-merged as pull request 7).\n"
    )
    repo.write("geo/shapes.py", WEAK)
    repo.write("tests/test_shapes.py", TEST_WEAK)
    shas["weak"] = repo.commit(
        "Reject a negative side in square_area\n\nAlso label large shapes in describe().\n"
    )
    return shas


def toml(task_dir) -> dict:  # type: ignore[no-untyped-def]
    return tomllib.loads((task_dir / "task.toml").read_text())


def test_gate_dedup_scope_pins_and_skips(make_repo, tmp_path) -> None:
    repo = make_repo("geo")
    shas = build(repo)
    out = tmp_path / "out"
    result = generate(
        GenerationInput(
            repo=str(repo.path),
            pipeline="commit_runtime",
            out=out,
            options={
                "reruns": 0,
                "verify_reruns": 0,
                "adversarial": False,
                "mutants": 4,
                "min_kill_rate": 0.9,
            },
        )
    )
    by_key = {o.candidate.key: o for o in result.outcomes}
    drops = dict(result.stats.drops)
    # The change with untested lines: its mutants survive, the task is dropped and says why.
    weak = by_key[shas["weak"]]
    assert not weak.kept and weak.reason == "tests too weak (mutants survive)", weak
    assert "kill rate" in (weak.detail or "")
    # The same fix landed twice is one task (the newest); the older is a duplicate.
    assert by_key[shas["again"]].kept
    assert shas["fix"] not in by_key and drops.get("duplicate change") == 1
    state = json.loads((out / ".repogym" / "commit_runtime-state.json").read_text())
    assert state[shas["fix"]] == {"status": "dropped", "reason": "duplicate change"}

    task_dir = by_key[shas["again"]].task_dir
    data = toml(task_dir)
    prov = data["metadata"]["repo2env"]
    sub = prov["commit_runtime"]
    # Whole suite within the budget: the other module's tests are pass-to-pass too.
    assert sub["p2p_scope"] == "suite"
    assert "tests/test_units.py::test_units" in sub["pass_to_pass"]
    assert sub["fail_to_pass"] == ["tests/test_shapes.py::test_negative_radius"]
    # when the fix was made (SWE-bench's created_at): the commit's author date
    assert sub["created_at"] == repo.git("log", "-1", "--format=%aI", shas["again"]).strip()
    assert sub["reward_mode"] == "resolved"
    assert sub["skipped_tests"] == 1 and sub["skip_reasons"] == {"needs the plotting extra": 1}
    assert prov["verification"]["mode"] == "clean_room"
    assert "**/conftest.py" in prov["verification"]["protected"]
    ev = prov["evaluation"]
    assert ev["status"] == "verified" and ev["mutant_kill_rate"] == 1.0 and ev["mutants"] >= 1
    assert data["metadata"]["category"] == "bugfix"
    # Dependencies pinned: a constraints file in environment/ and every pip install uses it
    # (but the step installing repogym's own uv installer, which pins itself).
    constraints = (task_dir / "environment" / "repogym-constraints.txt").read_text()
    assert any(line.lower().startswith("pytest==") for line in constraints.splitlines())
    dockerfile = (task_dir / "environment" / "Dockerfile").read_text()
    installs = [ln for ln in dockerfile.splitlines() if "pip install" in ln]
    from repogym.bootstrap.installer import INSTALLER_STEP

    assert installs[0] == "RUN " + " ".join(INSTALLER_STEP)
    assert installs[1:] and all("-c /usr/lib/repogym/constraints.txt" in ln for ln in installs[1:])
    assert dockerfile.rstrip().splitlines()[-1].startswith("RUN python3 /usr/lib/repogym/record.py")

    # pr_runtime over the same (squash-merged) clone into the same dataset: pull request 7 is
    # the commit commit_runtime already made into a task, so it is not emitted again (adding to
    # a dataset that holds tasks is a resume).
    again = generate(
        GenerationInput(
            repo=str(repo.path),
            pipeline="pr_runtime",
            out=out,
            resume=True,
            options={"reruns": 0, "verify_reruns": 0, "adversarial": False, "mutants": 0},
        )
    )
    assert dict(again.stats.drops) == {"duplicate change": 1} and again.stats.kept == 0
    assert sorted(p.name for p in (out / "tasks").iterdir()) == [task_dir.name]

    # verify --mutants measures the kill rate again; the table shows it with the mode.
    res = CliRunner().invoke(
        app, ["verify", str(task_dir), "--reruns", "0", "--mutants", "2"], env={"COLUMNS": "200"}
    )
    assert res.exit_code == 0, res.output
    assert "clean room" in res.output and "1.00 (2)" in res.output
    ev = toml(task_dir)["metadata"]["repo2env"]["evaluation"]
    assert ev["mutants"] == 2 and ev["mutant_kill_rate"] == 1.0
    res = CliRunner().invoke(app, ["verify", str(task_dir), "--reruns", "0", "--json"])
    assert json.loads(res.output)["tasks"][0]["status"] == "verified"
    assert toml(task_dir)["metadata"]["repo2env"]["evaluation"]["mutants"] == 2  # kept


def test_targeted_scope_selects_tests_by_imports(make_repo, tmp_path) -> None:
    repo = make_repo("geo")
    shas = build(repo)
    result = generate(
        GenerationInput(
            repo=str(repo.path),
            pipeline="commit_runtime",
            out=tmp_path / "out",
            rev=shas["again"],
            limit=1,
            options={
                "reruns": 0,
                "verify_reruns": 0,
                "adversarial": False,
                "mutants": 0,
                "suite_budget": 0,
            },
        )
    )
    [kept] = [o for o in result.outcomes if o.kept]
    sub = toml(kept.task_dir)["metadata"]["repo2env"]["commit_runtime"]
    assert sub["p2p_scope"] == "targeted"
    assert sub["selected_test_files"] == ["tests/test_shapes.py"]
    assert all(t.startswith("tests/test_shapes.py::") for t in sub["pass_to_pass"])
    assert "mutant_kill_rate" not in toml(kept.task_dir)["metadata"]["repo2env"]["evaluation"]


LOOP_V1 = """\
def countdown(n):
    out = []
    return out
"""
LOOP_V2 = """\
def countdown(n):
    out = []
    while n > 0:
        out.append(n)
        n -= 1
    return out
"""
LOOP_TEST = """\
from geo.loop import countdown


def test_countdown():
    assert countdown(3) == [3, 2, 1]
"""


def test_a_mutant_that_never_ends_is_stopped_and_killed(make_repo, tmp_path, monkeypatch) -> None:
    from repogym.run import gate

    monkeypatch.setattr(gate, "MUTANT_TIMEOUT_FLOOR", 5.0)
    monkeypatch.setattr(gate, "MUTANT_TIMEOUT_FACTOR", 2.0)
    repo = make_repo("geo")
    repo.write("pyproject.toml", PYPROJECT)
    repo.write("geo/__init__.py", "")
    repo.write("geo/loop.py", LOOP_V1)
    repo.write("tests/test_loop.py", LOOP_TEST.replace("[3, 2, 1]", "[]").replace("(3)", "(0)"))
    repo.commit("Countdown")
    repo.write("geo/loop.py", LOOP_V2)
    repo.write("tests/test_loop.py", LOOP_TEST)
    repo.commit("Count down from n to 1 in countdown\n\nIt returned an empty list for any n.\n")
    result = generate(
        GenerationInput(
            repo=str(repo.path),
            pipeline="commit_runtime",
            out=tmp_path / "out",
            options={
                "reruns": 0,
                "verify_reruns": 0,
                "adversarial": False,
                "mutants": 4,
                "min_kill_rate": 0,
            },
        )
    )
    [kept] = [o for o in result.outcomes if o.kept]
    ev = toml(kept.task_dir)["metadata"]["repo2env"]["evaluation"]
    hung = [m for m in ev["mutant_results"] if "did not finish" in m.get("error", "")]
    assert hung, ev["mutant_results"]  # dropping `n -= 1` loops forever
    assert all(m["killed"] and m["reward"] == "none" for m in hung)
