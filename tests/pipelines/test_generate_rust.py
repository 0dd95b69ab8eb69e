"""commit_runtime on a Rust crate whose unit tests live inside ``src/lib.rs`` (``#[cfg(test)]
mod tests``), in the real sandbox with the host's cargo: the new test is hidden like a test
file, the verifier splices it back into whatever file the agent leaves, and agents that delete
or weaken the test module earn nothing."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from repogym.run.agents import CommandAgent, NopAgent, OracleAgent
from repogym.run.trial import TrialRunner
from repogym.sandbox import get_backend
from repogym.spec import GenerationInput
from repogym.taskdir import load_task
from repogym.workflows import generate
from tests.sources.conftest import BASE_EPOCH, GitRepo

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1200),  # toolchain builds on a loaded machine
    pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo"),
]

CARGO = """\
[package]
name = "demo"
version = "0.1.0"
edition = "2021"

[dependencies]
"""

LIB_V1 = """\
//! Small text helpers.

/// Splits `s` on commas and returns the trimmed fields.
pub fn fields(s: &str) -> Vec<&str> {
    s.split(',').map(|f| f.trim()).collect()
}

/// Counts the words of `s`.
pub fn words(s: &str) -> usize {
    s.split_whitespace().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_fields() {
        assert_eq!(fields("a, b"), vec!["a", "b"]);
    }

    #[test]
    fn counts_words() {
        assert_eq!(words("one two  three"), 3);
    }
}
"""

NEW_TEST = """
    #[test]
    fn skips_empty_fields() {
        assert_eq!(fields("a,, b,"), vec!["a", "b"]);
    }
"""

PAIR = """
/// A pair of numbers read from text.
#[derive(Debug, PartialEq)]
pub struct Pair {
    pub left: u32,
    pub right: u32,
}

impl Pair {
    /// The sum of both numbers.
    pub fn sum(&self) -> u32 {
        self.left + self.right
    }
}

/// Reads `"3:4"` as a pair; `None` when it is not two numbers around a colon.
pub fn parse_pair(s: &str) -> Option<Pair> {
    let (a, b) = s.split_once(':')?;
    Some(Pair { left: a.trim().parse().ok()?, right: b.trim().parse().ok()? })
}
"""

PAIR_TEST = """
    #[test]
    fn parses_pairs() {
        let p = crate::parse_pair("3: 4").unwrap();
        assert_eq!(p.sum(), 7);
        assert_eq!(parse_pair("x"), None);
    }
"""


def _add_test(lib: str, test: str) -> str:
    """``lib`` with ``test`` added at the end of its (last) test module."""
    return lib[: lib.rfind("}")] + test.lstrip("\n") + "}\n"


@pytest.fixture(scope="module")
def crate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    mp = pytest.MonkeyPatch()
    mp.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for who in ("AUTHOR", "COMMITTER"):
        mp.setenv(f"GIT_{who}_NAME", "Ada Tester")
        mp.setenv(f"GIT_{who}_EMAIL", "ada@example.com")
        mp.setenv(f"GIT_{who}_DATE", f"{BASE_EPOCH} +0000")
    repo = GitRepo(tmp_path_factory.mktemp("repos") / "demo")
    shas: dict[str, str] = {}
    repo.write("Cargo.toml", CARGO)
    repo.write("src/lib.rs", LIB_V1)
    shas["init"] = repo.commit("Initial text helpers")

    fixed = LIB_V1.replace(
        "s.split(',').map(|f| f.trim()).collect()",
        "s.split(',').map(|f| f.trim()).filter(|f| !f.is_empty()).collect()",
    ).replace("returns the trimmed fields", "returns the trimmed, non-empty fields")
    lib2 = _add_test(fixed, NEW_TEST)
    repo.write("src/lib.rs", lib2)
    shas["fix"] = repo.commit(
        "Skip empty fields in fields()\n\n"
        'fields("a,,b") returned an empty string between the commas; empty fields are now left out.'
    )

    code, _, tests = lib2.partition("#[cfg(test)]")
    repo.write("src/lib.rs", _add_test(code + PAIR + "\n#[cfg(test)]" + tests, PAIR_TEST))
    shas["pair"] = repo.commit(
        "Read pairs of numbers\n\nAdd parse_pair, which reads text such as 3:4 into a Pair whose "
        "sum adds both numbers."
    )
    yield repo.path, shas
    mp.undo()


@pytest.fixture(scope="module")
def generated(crate, tmp_path_factory) -> tuple[Path, dict, dict[str, str]]:
    repo, shas = crate
    out = tmp_path_factory.mktemp("out")
    result = generate(GenerationInput(repo=str(repo), pipeline="commit_runtime", out=out))
    return out, json.loads(result.report.read_text()), shas


def _task(generated, name: str):  # type: ignore[no-untyped-def]
    out, _, shas = generated
    return load_task(out / "tasks" / f"local__demo-{shas[name][:12]}")


def test_both_commits_become_verified_tasks(generated) -> None:
    _, report, shas = generated
    by_key = {o["key"]: o for o in report["outcomes"]}
    assert by_key[shas["fix"]]["kept"], by_key[shas["fix"]]
    assert by_key[shas["pair"]]["kept"], by_key[shas["pair"]]
    task = _task(generated, "fix")
    sub = task.config.metadata["repo2env"]["commit_runtime"]
    assert sub["fail_to_pass"] == ["tests::skips_empty_fields"]
    assert sub["pass_to_pass"] == ["tests::counts_words", "tests::splits_fields"]
    assert task.config.metadata["repo2env"]["evaluation"]["status"] == "verified"
    # canaries inside the spliced test module (the crate has no other tests)
    assert task.config.metadata["repo2env"]["evaluation"]["canaries"] >= 1


def test_the_new_test_is_hidden_and_the_gold_patch_is_code_only(generated) -> None:
    task = _task(generated, "fix")
    visible = (task.path / "environment/repo/src/lib.rs").read_text()
    assert visible == LIB_V1  # the base, with its old test module
    instruction = (task.path / "instruction.md").read_text()
    gold = (task.path / "solution/patch.diff").read_text()
    for text in (visible, instruction, gold):
        assert "skips_empty_fields" not in text.replace("skips empty fields", "")
        assert '"a,, b,"' not in text
    assert "filter(|f| !f.is_empty())" in gold
    config = json.loads((task.path / "tests/config.json").read_text())
    assert config["splice"] == ["src/lib.rs"] and config["restore"] == ["src/lib.rs"]
    hidden = (task.path / "tests/files/src/lib.rs").read_text()
    assert hidden.startswith("#[cfg(test)]") and "skips_empty_fields" in hidden
    assert "is_empty" not in hidden  # only the test module, never the fix
    protected = task.config.metadata["repo2env"]["verification"]["protected"]
    assert "src/lib.rs" not in protected


SHADOW_ASSERT = "sed -i '1i macro_rules! assert_eq { ($($t:tt)*) => {}; }' src/lib.rs"
FIX = "sed -i 's/f.trim()).collect()/f.trim()).filter(|f| !f.is_empty()).collect()/' src/lib.rs"


@pytest.mark.parametrize(
    ("agent", "reward"),
    [
        ("oracle", 1.0),
        ("nop", 0.0),
        (FIX, 1.0),
        # the fix, with the test module weakened or deleted: the hidden one is spliced back
        (FIX + " && sed -i 's/assert_eq!(.*);/assert!(true);/' src/lib.rs", 1.0),
        (FIX + " && sed -i '/#\\[cfg(test)\\]/,$d' src/lib.rs", 1.0),
        # no fix: deleting or weakening the tests earns nothing
        ("sed -i '/#\\[cfg(test)\\]/,$d' src/lib.rs", 0.0),
        ("sed -i 's/assert_eq!(.*);/assert!(true);/' src/lib.rs", 0.0),
        ("printf '#[cfg(test)]\\nmod tests {}\\n' >> src/lib.rs", 0.0),
        # no fix: an assert_eq! of the agent's that passes everything, seen by the hidden
        # module through textual macro scope; the canaries among the hidden items pass too
        (SHADOW_ASSERT, 0.0),
    ],
)
def test_agents(generated, agent: str, reward: float) -> None:
    task = _task(generated, "fix")
    runner = TrialRunner(get_backend("local"))
    who = {"oracle": OracleAgent(), "nop": NopAgent()}.get(agent) or CommandAgent(agent)
    result = runner.run(task, who)
    assert result.reward == reward, result.reading.details if result.reading else result


def test_a_shadowed_assert_is_caught_by_the_canaries(generated) -> None:
    task = _task(generated, "fix")
    result = TrialRunner(get_backend("local")).run(task, CommandAgent(SHADOW_ASSERT))
    details = result.result["verifier_result"]["details"]
    assert result.reward == 0.0
    assert any("canary" in reason for reason in details.get("tamper", [])), details


def test_new_items_are_named_with_their_signatures(generated) -> None:
    task = _task(generated, "pair")
    instruction = (task.path / "instruction.md").read_text()
    assert "`pub fn parse_pair(s: &str) -> Option<Pair>`" in instruction
    assert "`Pair::sum`: `pub fn sum(&self) -> u32`" in instruction
    assert "self.left + self.right" not in instruction and "split_once" not in instruction
    record = task.config.metadata["repogym"]["instruction"]
    assert {"parse_pair", "Pair::sum"} <= set(record["required"])
    # The crate's tests do not build before the fix: all fail there; the new one leads.
    sub = task.config.metadata["repo2env"]["commit_runtime"]
    assert len(sub["fail_to_pass"]) == 4
    behaviour = instruction.split("## Expected behaviour", 1)[1]
    assert behaviour.index("parses pairs") < behaviour.index("counts words")


def test_an_unreadable_file_is_a_tamper(generated) -> None:
    """An unclosed raw string at the end of the file would swallow appended tests."""
    task = _task(generated, "fix")
    hack = f"{FIX} && sed -i '/#\\[cfg(test)\\]/,$d' src/lib.rs"
    hack += " && echo 'const _S: &str = r##\"' >> src/lib.rs"
    result = TrialRunner(get_backend("local")).run(task, CommandAgent(hack))
    assert result.reward == 0.0
    assert "cannot be read as Rust" in json.dumps(result.reading.details)
