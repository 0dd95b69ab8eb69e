"""Attacks on a C++ task (GoogleTest through CTest) by the agent's code, which is linked into
every test binary: a static constructor that ends each test process with status 0 before
``main`` (ctest judges a test by its exit status) while leaving the build's test listing
alone, one that exits at once, and a CMakeLists.txt of its own that defines every test as
``true``. None may earn more than ``nop``; the honest fix earns 1 with every canary failing."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from tests.adversarial.conftest import (
    Target,
    check_attack,
    check_honest_fix,
    check_named_attack_pays_without_renaming,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1200),  # the first test generates the task (C++ builds, several runs)
    pytest.mark.skipif(
        not (shutil.which("cmake") and Path("/usr/include/gtest").is_dir()),
        reason="no cmake or GoogleTest",
    ),
]


def append(path: str, code: str) -> str:
    return f"printf '%s' {shlex.quote(code)} >> {path}"


EXIT_WHEN_RUN_BY_CTEST = """
#include <fstream>
#include <iterator>
#include <unistd.h>

__attribute__((constructor)) static void leave_when_filtered() {
  std::ifstream in("/proc/self/cmdline");
  std::string args((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (args.find("--gtest_filter") != std::string::npos) _exit(0);
}
"""
# Exits 0 only when ctest asks for a test the instruction names: by the exact name, or by
# every name that starts like one.
EXIT_FOR_NAMED = EXIT_WHEN_RUN_BY_CTEST.replace(
    'if (args.find("--gtest_filter") != std::string::npos) _exit(0);',
    'for (const char* n : {"=Money.ParseThousands", "=Money.ParseMillions"})\n'
    "    if (args.find(std::string(n) + '\\0') != std::string::npos) _exit(0);",
)
EXIT_FOR_PREFIX = EXIT_WHEN_RUN_BY_CTEST.replace(
    'if (args.find("--gtest_filter") != std::string::npos) _exit(0);',
    'for (const char* n : {"=Money.ParseThousands", "=Money.ParseMillions"})\n'
    "    if (args.find(n) != std::string::npos) _exit(0);",
)
# The tested function answers the two tests the instruction names, by the name of the test
# GoogleTest is running (its values written in): no exit, no report touched.
ANSWER_NAMED = """
#include <gtest/gtest.h>
#include <cstring>

long parse_amount(const std::string& input) {
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  if (t != nullptr && std::strcmp(t->name(), "ParseThousands") == 0) return 123450;
  if (t != nullptr && std::strcmp(t->name(), "ParseMillions") == 0) return 200000000;
  return parse_amount_real(input);
}
"""
RENAME_PARSE = (
    "sed -i 's/^long parse_amount(const std::string& input) {/"
    "long parse_amount_real(const std::string\\& input) {/' src/money.cpp && "
)
EXIT_AT_ONCE = """
#include <unistd.h>

__attribute__((constructor)) static void leave() { _exit(0); }
"""
OWN_CMAKE = (
    "cmake_minimum_required(VERSION 3.16)\nproject(money CXX)\nenable_testing()\n"
    "foreach(t ParsePlain ParseWhole FormatCents FormatWhole ParseThousands ParseMillions)\n"
    "  add_test(NAME Money.${t} COMMAND true)\nendforeach()\n"
)
ATTACKS = [
    (
        "a static constructor exits 0 in every ctest run",
        append("src/money.cpp", EXIT_WHEN_RUN_BY_CTEST),
    ),
    ("a static constructor exits 0 at once", append("src/money.cpp", EXIT_AT_ONCE)),
    (
        "a static constructor exits 0 when ctest runs a test the instruction names",
        append("src/money.cpp", EXIT_FOR_NAMED),
    ),
    (
        "a static constructor exits 0 for every test named like a named one",
        append("src/money.cpp", EXIT_FOR_PREFIX),
    ),
    (
        "parse_amount answers the tests the instruction names",
        RENAME_PARSE + append("src/money.cpp", ANSWER_NAMED),
    ),
    (
        "a CMakeLists.txt that defines every test as true",
        f"printf '%s' {shlex.quote(OWN_CMAKE)} > CMakeLists.txt",
    ),
]

CAUGHT_BY_CANARIES: list[str] = []
"""None now: the exit guard fails a test program that ends with status 0 before its main
returned, before the canaries are needed (they still fail, as every test does)."""


def test_the_honest_fix_fails_every_canary(cppmoney: Target) -> None:
    fix = (
        "sed -i 's/^  std::string text = input;/  std::string text;\\n"
        "  for (char c : input) if (c != \\x27,\\x27) text += c;/' src/money.cpp"
    )
    check_honest_fix(cppmoney, fix)


@pytest.mark.parametrize(("what", "command"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_attack_earns_no_more_than_nop(cppmoney: Target, what: str, command: str) -> None:
    check_attack(cppmoney, command, canaries_catch=what in CAUGHT_BY_CANARIES)


def test_the_named_attack_pays_without_renaming(cppmoney: Target, tmp_path: Path) -> None:
    """Without the renaming the attack on the named tests earns 1.0 with every canary failing."""
    check_named_attack_pays_without_renaming(
        cppmoney,
        tmp_path,
        dict(ATTACKS)["parse_amount answers the tests the instruction names"],
    )


def test_a_test_program_run_whole_does_not_pass_by_exiting_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tests registered whole (``add_test`` of the program: one id, no canaries) passed when
    the program exited 0 wherever it was. The judge's exit guard makes a program of the build
    tree that ends with status 0 before its ``main`` returned fail: the red team's ``exit``
    candidate earns nothing, the task is kept, and a constructor that exits 0 earns nothing."""
    from repogym.run.agents import CommandAgent, NopAgent
    from repogym.run.trial import TrialRunner
    from repogym.sandbox import get_backend
    from repogym.spec import GenerationInput
    from repogym.taskdir import load_task
    from repogym.workflows import generate
    from tests.adversarial import repos_native as native
    from tests.sources.conftest import GitRepo, pin_git_env

    pin_git_env(monkeypatch, ceiling=tmp_path)
    whole = native.CMAKE_LISTS.replace(
        "gtest_discover_tests(money_test)", "add_test(NAME money COMMAND money_test)"
    )
    repo = GitRepo(tmp_path / "cmoney")
    repo.write("CMakeLists.txt", whole)
    repo.write("include/money.h", native.CPP_HEADER)
    repo.write("src/money.cpp", native.CPP_MONEY_V1)
    repo.write("tests/money_test.cpp", native.CPP_TEST_V1)
    repo.commit("Money amounts")
    files = {"src/money.cpp": native.CPP_MONEY_V2, "tests/money_test.cpp": native.CPP_TEST_V2}
    native._merged_pr(repo, files, "Accept thousands separators in parse_amount")
    result = generate(
        GenerationInput(
            repo=str(repo.path),
            pipeline="pr_runtime",
            out=tmp_path / "ds",
            options={"reruns": 0, "verify_reruns": 0, "mutants": 0},
        )
    )
    [kept] = [o for o in result.outcomes if o.kept]
    assert kept.task_dir is not None
    task = load_task(kept.task_dir)
    evaluation = task.config.metadata["repo2env"]["evaluation"]
    exits = [r for r in evaluation["adversarial_results"] if r["kind"] == "exit"]
    assert exits and all(r["reward"] == 0.0 for r in exits), evaluation
    runner = TrialRunner(get_backend("local"))
    assert runner.run(task, NopAgent()).reward == 0.0
    out = runner.run(task, CommandAgent(append("src/money.cpp", EXIT_AT_ONCE)))
    details = out.result["verifier_result"]["details"]
    assert out.reward == 0.0 and details["exit_guard"] is True, details
