"""``bug_synth`` in Go, Rust, C++ and Java, on the real sandbox with the host toolchains: a
small project of each language built in code becomes verified tasks (oracle 1, nop 0,
canaries, the adversarial floor); every mutant first passes the language's own compiler; a
Rust crate's unit tests inside ``src/lib.rs`` are spliced back by the verifier, so weakening
them earns nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from repogym.run.agents import CommandAgent, NopAgent, OracleAgent
from repogym.run.trial import TrialRunner
from repogym.sandbox import get_backend
from repogym.spec import GenerationInput
from repogym.taskdir import load_task
from repogym.workflows import generate
from tests.adversarial import repos_native as native
from tests.pipelines.test_contract_tasks import check_harbor_loads, check_validate_deep
from tests.sources.conftest import GitRepo, pin_git_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

# Pad comes first: its swap_args mutant (strings.Repeat(n, "0")) is the first candidate and
# does not compile.
GO_PAD = """
// Pad puts n zeros before s.
func Pad(s string, n int) string {
\treturn strings.Repeat("0", n) + s
}
"""
GO_PAD_TEST = """
func TestPad(t *testing.T) {
\tif got := Pad("7", 2); got != "007" {
\t\tt.Fatalf("got %q", got)
\t}
}
"""
RUST_INLINE = """
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_small() {
        assert_eq!(format_amount(5), "0.05");
    }

    #[test]
    fn parses_whole_inline() {
        assert_eq!(parse_amount("3"), Some(300));
    }
}
"""


def _go(repo: GitRepo) -> None:
    money = native.GO_MONEY_V2.replace(
        "// ParseAmount reads", GO_PAD.lstrip("\n") + "\n// ParseAmount reads", 1
    )
    repo.write("go.mod", native.GO_MOD)
    repo.write("money.go", money)
    repo.write("money_test.go", native.GO_TEST_V2 + GO_PAD_TEST)


def _rust(repo: GitRepo) -> None:
    repo.write("Cargo.toml", native.CARGO_TOML)
    repo.write("src/lib.rs", native.RUST_MONEY_V2 + RUST_INLINE)
    repo.write("tests/money.rs", native.RUST_TEST_V2)


def _cpp(repo: GitRepo) -> None:
    repo.write("CMakeLists.txt", native.CMAKE_LISTS)
    repo.write("include/money.h", native.CPP_HEADER)
    repo.write("src/money.cpp", native.CPP_MONEY_V2)
    repo.write("tests/money_test.cpp", native.CPP_TEST_V2)


def _java(repo: GitRepo) -> None:
    repo.write("pom.xml", native.JAVA_POM)
    repo.write("src/main/java/demo/Money.java", native.JAVA_MONEY_V2)
    repo.write("src/test/java/demo/MoneyTest.java", native.JAVA_TEST_V2)


PROJECTS = {
    "go": (_go, "go", {"operators": "swap_args,negate_condition"}),
    "rust": (_rust, "cargo", {}),
    "cpp": (_cpp, "cmake", {}),
    "java": (_java, "mvn", {"adversarial": False}),
}


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """``{language: (dataset, GenerationResult)}``, generated on first use."""
    cache: dict[str, tuple[Path, object]] = {}

    def get(language: str):  # type: ignore[no-untyped-def]
        build, tool, options = PROJECTS[language]
        if shutil.which(tool) is None:
            pytest.skip(f"no {tool} on this machine")
        if language not in cache:
            with pytest.MonkeyPatch.context() as mp:
                pin_git_env(mp)
                repo = GitRepo(tmp_path_factory.mktemp("repo") / "money")
                build(repo)
                repo.commit("Money amounts")
                out = tmp_path_factory.mktemp("out") / language
                result = generate(
                    GenerationInput(
                        repo=str(repo.path), pipeline="bug_synth", out=out, limit=1, options=options
                    )
                )
            cache[language] = (out, result)
        return cache[language]

    return get


@pytest.mark.parametrize("language", sorted(PROJECTS))
def test_a_verified_task_in_each_language(generated, language: str) -> None:  # type: ignore[no-untyped-def]
    out, result = generated(language)
    kept = [o for o in result.outcomes if o.kept]
    assert len(kept) == 1, [(o.reason, o.detail) for o in result.outcomes]
    task = load_task(kept[0].task_dir)
    evaluation = task.repo2env["evaluation"]
    assert evaluation["status"] == "verified" and evaluation["nop_reward"] == 0.0
    assert evaluation["canaries"] >= 1
    if "adversarial_floor" in evaluation:
        assert evaluation["adversarial_floor"] <= evaluation["nop_reward"]
    assert task.repo2env["bug_synth"]["fail_to_pass"]
    instruction = (task.path / "instruction.md").read_text()
    edit = json.loads((task.path / "solution" / "edit.json").read_text())
    assert edit["kind"] not in instruction and "mutat" not in instruction.lower()
    runner = TrialRunner(get_backend("local"))
    assert runner.run(task, OracleAgent()).reward == 1.0
    assert runner.run(task, NopAgent()).reward == 0.0
    check_harbor_loads(task.path)
    check_validate_deep(out)


def test_a_mutant_the_compiler_rejects_is_dropped_with_its_error(generated) -> None:  # type: ignore[no-untyped-def]
    _, result = generated("go")
    first = result.outcomes[0]
    assert (first.reason, first.kept) == ("does not compile", False)
    assert "money.go:" in first.detail and "strings.Repeat" in first.detail, first.detail


def test_rust_inline_tests_are_spliced_back(generated) -> None:  # type: ignore[no-untyped-def]
    _, result = generated("rust")
    task = load_task(next(o for o in result.outcomes if o.kept).task_dir)
    config = json.loads((task.path / "tests" / "config.json").read_text())
    assert config["splice"] == ["src/lib.rs"]
    hidden = (task.path / "tests" / "files" / "src" / "lib.rs").read_text()
    assert hidden.startswith("#[cfg(test)]") and "parses_whole_inline" in hidden
    assert "pub fn" not in hidden  # the test items only, never the code
    runner = TrialRunner(get_backend("local"))
    # Weakening or deleting the unit tests (and the integration tests) without a fix: the
    # hidden tests come back, the bug still fails them.
    for hack in (
        "sed -i 's/assert_eq!(.*);/assert!(true);/' src/lib.rs tests/money.rs",
        "sed -i '/#\\[cfg(test)\\]/,$d' src/lib.rs && rm -f tests/money.rs",
    ):
        assert runner.run(task, CommandAgent(hack)).reward == 0.0, hack
