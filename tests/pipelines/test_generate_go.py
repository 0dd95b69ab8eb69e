"""commit_runtime on a Go module in the real sandbox with the host's Go: a commit that adds a
function its new test calls breaks the package's build before the fix (every test of it is
fail-to-pass); the instruction names the new function with its signature, and lists the test
the change adds first."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from repogym.spec import GenerationInput
from repogym.taskdir import load_task
from repogym.workflows import generate
from tests.sources.conftest import BASE_EPOCH, GitRepo

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1200),  # toolchain builds on a loaded machine
    pytest.mark.skipif(shutil.which("go") is None, reason="needs go"),
]

CALC = """\
package calc

// Add returns a plus b.
func Add(a, b int) int {
	return a + b
}

// Offset moves x by d.
func Offset(x, d int) int {
	return Add(x, d)
}
"""

CALC_TEST = """\
package calc

import "testing"

func TestAdd(t *testing.T) {
	if Add(1, 2) != 3 {
		t.Fatal("Add")
	}
}

func TestOffset(t *testing.T) {
	if Offset(1, -1) != 0 {
		t.Fatal("Offset")
	}
}

func FuzzAdd(f *testing.F) {
	f.Add(1, 2)
	f.Add(3, 4)
	f.Fuzz(func(t *testing.T, a, b int) {
		if Add(a, b) != Add(b, a) {
			t.Fatal("not commutative")
		}
	})
}
"""

CLAMP = """
// Clamp limits x to the range [lo, hi].
func Clamp(x, lo, hi int) (int, error) {
	if lo > hi {
		return 0, errRange
	}
	return min(max(x, lo), hi), nil
}

var errRange = errors.New("lo above hi")
"""

CLAMP_TEST = """
func TestClamp(t *testing.T) {
	if got, _ := Clamp(12, 0, 10); got != 10 {
		t.Fatalf("Clamp(12, 0, 10) = %d", got)
	}
	if _, err := Clamp(1, 5, 0); err == nil {
		t.Fatal("want an error")
	}
}
"""


@pytest.fixture(scope="module")
def module(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    mp = pytest.MonkeyPatch()
    mp.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for who in ("AUTHOR", "COMMITTER"):
        mp.setenv(f"GIT_{who}_NAME", "Ada Tester")
        mp.setenv(f"GIT_{who}_EMAIL", "ada@example.com")
        mp.setenv(f"GIT_{who}_DATE", f"{BASE_EPOCH} +0000")
    repo = GitRepo(tmp_path_factory.mktemp("repos") / "calc")
    shas: dict[str, str] = {}
    repo.write("go.mod", "module example.com/calc\n\ngo 1.21\n")
    repo.write("calc.go", CALC)
    repo.write("calc_test.go", CALC_TEST)
    shas["init"] = repo.commit("Initial calc package")
    repo.write(
        "calc.go", CALC.replace("package calc\n", 'package calc\n\nimport "errors"\n') + CLAMP
    )
    repo.write("calc_test.go", CALC_TEST + CLAMP_TEST)
    shas["clamp"] = repo.commit(
        "Add Clamp\n\nClamp limits a number to a range and reports an error when the range is "
        "empty (its low end above its high end)."
    )
    yield repo.path, shas
    mp.undo()


def test_new_function_named_and_changed_test_first(module, tmp_path: Path) -> None:
    repo, shas = module
    result = generate(GenerationInput(repo=str(repo), pipeline="commit_runtime", out=tmp_path))
    report = json.loads(result.report.read_text())
    outcome = next(o for o in report["outcomes"] if o["key"] == shas["clamp"])
    assert outcome["kept"], outcome
    task = load_task(tmp_path / "tasks" / f"local__calc-{shas['clamp'][:12]}")
    sub = task.config.metadata["repo2env"]["commit_runtime"]
    # The package does not build before the fix: all of its tests fail there.
    assert {"TestAdd", "TestOffset", "TestClamp"} <= set(sub["fail_to_pass"])
    instruction = (task.path / "instruction.md").read_text()
    assert "`calc.go`: new function `func Clamp(x, lo, hi int) (int, error)`" in instruction
    assert "errRange" not in instruction and "min(max(" not in instruction
    behaviour = instruction.split("## Expected behaviour", 1)[1].split("##", 1)[0]
    listed = [line for line in behaviour.splitlines() if line.startswith("- ")]
    assert "Clamp" in listed[0], listed
    assert task.config.metadata["repogym"]["instruction"]["required"] == ["Clamp"]
