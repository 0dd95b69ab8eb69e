"""The gate's red-team candidates on generated tasks: a sound task pays none of them (the spoof
is caught by the judge, not by luck), a task whose tests a constant passes is dropped, and
``repogym verify --adversarial`` measures any task and records its floor."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repogym.cli import app
from repogym.pipelines._harness.frame import GAMEABLE
from repogym.run.agents import PatchAgent
from repogym.run.gate import _base_reader
from repogym.spec import GenerationInput
from repogym.taskdir import load_task
from repogym.verify.redteam import build_candidates
from repogym.workflows import generate
from tests.adversarial.conftest import Target
from tests.sources.conftest import GitRepo, pin_git_env


def test_a_generated_task_records_a_floor_no_higher_than_nop(ledger: Target) -> None:
    block = load_task(ledger.task.path).repo2env["evaluation"]
    assert block["adversarial_candidates"] >= 6, block
    assert block["adversarial_floor"] == ledger.nop and block["gameability_gap"] == 0
    kinds = {r["kind"]: r for r in block["adversarial_results"]}
    assert {"hollow", "raise", "const_true", "identity", "spoof"} <= set(kinds)
    assert all(r["killed"] for r in kinds.values()), kinds


def test_the_spoof_is_caught_by_the_judge(ledger: Target) -> None:
    """The spoof would pass every ``==`` of the hidden tests; the judge names it."""
    task = ledger.task
    gold = (task.solution_dir / "patch.diff").read_text()
    read_base, close = _base_reader(task, ledger.runner)
    try:
        candidates = build_candidates(gold, read_base)
    finally:
        close()
    spoof = next(c for c in candidates if c.kind == "spoof")
    outcome = ledger.runner.run(task, PatchAgent(spoof.patch, "spoof"))
    details = outcome.result["verifier_result"]["details"]
    assert outcome.reward == 0.0, details
    assert details.get("tampered") and any("spoof" in t for t in details["tamper"]), details


WEAK_V1 = "def is_palindrome(text):\n    return text == text[::-1]\n"
WEAK_V2 = (
    "def is_palindrome(text):\n"
    "    folded = ''.join(c.lower() for c in text if c.isalnum())\n"
    "    return folded == folded[::-1]\n"
)
WEAK_TEST_V1 = "from words.check import is_palindrome\n\n\ndef test_plain():\n    assert is_palindrome('abba')\n"
WEAK_TEST_V2 = WEAK_TEST_V1 + "\n\ndef test_mixed_case():\n    assert is_palindrome('Race car')\n"


def test_a_task_a_constant_passes_is_dropped_as_gameable(tmp_path: Path) -> None:
    """Its tests only ask for a truthy answer: ``return True`` earns the reward."""
    with pytest.MonkeyPatch.context() as mp:
        pin_git_env(mp, ceiling=tmp_path)
        repo = GitRepo(tmp_path / "words")
        repo.write(
            "pyproject.toml",
            '[project]\nname = "words"\nversion = "0.1"\n[tool.pytest.ini_options]\n'
            'testpaths = ["tests"]\n',
        )
        repo.write("words/__init__.py", "")
        repo.write("words/check.py", WEAK_V1)
        repo.write("tests/test_check.py", WEAK_TEST_V1)
        repo.commit("Palindromes")
        repo.write("words/check.py", WEAK_V2)
        repo.write("tests/test_check.py", WEAK_TEST_V2)
        repo.commit("Ignore case, spaces and punctuation in is_palindrome\n\nMixed case failed.\n")
        result = generate(
            GenerationInput(
                repo=str(repo.path),
                pipeline="commit_runtime",
                out=tmp_path / "ds",
                options={"reruns": 0, "verify_reruns": 0, "mutants": 0},
            )
        )
    [outcome] = result.outcomes
    assert not outcome.kept and outcome.reason == GAMEABLE, (outcome.reason, outcome.detail)
    assert "const_true" in (outcome.detail or ""), outcome.detail
    assert not list((tmp_path / "ds").glob("tasks/*/task.toml"))


def test_verify_adversarial_measures_a_task(ledger: Target, tmp_path: Path) -> None:
    copy = tmp_path / "ds" / "tasks" / ledger.task.path.name
    shutil.copytree(ledger.task.path, copy)
    cli = CliRunner()
    got = cli.invoke(app, ["verify", str(copy), "-k", "0", "--adversarial", "--json"])
    assert got.exit_code == 0, got.output
    [verdict] = json.loads(got.stdout)["tasks"]
    assert verdict["status"] == "verified"
    assert verdict["adversarial"]["adversarial_floor"] == 0.0
    assert verdict["adversarial"]["adversarial_candidates"] >= 6
    table = cli.invoke(
        app, ["verify", str(copy), "-k", "0", "--adversarial"], env={"COLUMNS": "250"}
    )
    candidates = verdict["adversarial"]["adversarial_candidates"]
    assert table.exit_code == 0 and "adv. floor" in table.output, table.output
    assert f"0 ({candidates})" in table.output, table.output


def test_the_floor_is_shown_by_validate_and_the_explorer(ledger: Target, tmp_path: Path) -> None:
    from repogym.explorer.adapters.harbor import HarborAdapter

    copy = tmp_path / "ds" / "tasks" / ledger.task.path.name
    shutil.copytree(ledger.task.path, copy)
    got = CliRunner().invoke(app, ["validate", str(copy), "--deep", "--json"])
    assert got.exit_code == 0, got.output
    [report] = json.loads(got.stdout)["tasks"]
    assert report["adversarial"]["adversarial_floor"] == 0.0
    assert report["adversarial"]["gameability_gap"] == 0
    doc = HarborAdapter().open(str(tmp_path / "ds")).task(copy.name)
    grading = next(s for s in doc.sections if s.id == "grading")
    assert "Adversarial floor: 0 over" in grading.body and "gameable" not in grading.body

    # A recorded gap alone (partial credit, as a graded task may pay) is a warning; a
    # candidate that earned the full reward makes the task invalid and gameable on the page.
    toml = copy / "task.toml"
    text = re.sub(r"gameability_gap = [0-9.]+", "gameability_gap = 0.4", toml.read_text())
    toml.write_text(text)
    got = CliRunner().invoke(app, ["validate", str(copy), "--deep"])
    assert got.exit_code == 0 and "partial credit" in got.output, got.output
    doc = HarborAdapter().open(str(tmp_path / "ds")).task(copy.name)
    assert "partial credit" in next(s for s in doc.sections if s.id == "grading").body
    head, mark, tail = text.partition("adversarial_results")
    toml.write_text(head + mark + tail.replace("killed = true", "killed = false", 1))
    got = CliRunner().invoke(app, ["validate", str(copy), "--deep"])
    assert got.exit_code == 1 and "gameable" in got.output, got.output
    doc = HarborAdapter().open(str(tmp_path / "ds")).task(copy.name)
    assert "**gameable**" in next(s for s in doc.sections if s.id == "grading").body


def test_a_generated_javascript_task_records_its_floor(slugs: Target) -> None:
    block = load_task(slugs.task.path).repo2env["evaluation"]
    kinds = {r["kind"]: r for r in block["adversarial_results"]}
    assert {"hollow", "raise", "const_true", "const_empty", "identity"} <= set(kinds), block
    assert "spoof" not in kinds  # no value fools === in JavaScript
    assert block["adversarial_floor"] == slugs.nop and block["gameability_gap"] == 0
