"""unittest logs: 3.8 and 3.11+ description forms, docstrings, subtests, fixtures, reruns."""

from __future__ import annotations

import pytest

from repogym.shipped.parsers import ERROR, FAILED, PASSED, SKIPPED, TRUNCATED, parse_log
from tests.verify.logutil import parse, read

T = "pkg.test_things.TestThings."

# Genuine `python -m unittest -v` output.  expected failure -> PASSED, unexpected success ->
# FAILED; a failing setUpClass marks its class; failing subtests mark their parent test.
THINGS = {
    "pkg.test_things.TestOther": ERROR,
    T + "test_doc": PASSED,
    T + "test_error": ERROR,
    T + "test_fail": FAILED,
    T + "test_ok": PASSED,
    T + "test_print": PASSED,
    T + "test_skip": SKIPPED,
    T + "test_stderr": PASSED,
    T + "test_subtests": FAILED,
    T + "test_xfail": PASSED,
    T + "test_xpass": FAILED,
}


@pytest.mark.parametrize("name", ["unittest_py311.log", "unittest_py38.log"])
def test_unittest_verbose(name: str) -> None:
    result = parse(name)
    assert result.runner == "unittest"
    assert result.status == "ok"
    assert result.warnings == []
    assert result.tests == THINGS


def test_unittest_discover_import_failure() -> None:
    result = parse("unittest_py312_discover.log")
    assert result.tests == {"pkg.test_broken_import": ERROR, **THINGS}


def test_unittest_quiet_run_reports_only_problems() -> None:
    """Without -v only the FAIL:/ERROR: sections name tests."""
    result = parse("unittest_quiet.log")
    assert result.tests == {k: v for k, v in THINGS.items() if v in (FAILED, ERROR)}


def test_unittest_old_form_docstring_and_output() -> None:
    log = "\n".join(
        [
            "test_a (tests.test_mod.TestX) ... ok",
            "test_b (tests.test_mod.TestX)",
            "Frobnicates (issue 12) ... look at this",
            "FAIL",
            "test_c (tests.test_mod.TestX) ... partial outputERROR",
            'test_d (tests.test_mod.TestX) ... skipped "can\'t run"',
            "test_e (tests.test_mod.TestX) ... ",
            "ok",
            "setUpModule (tests.test_other) ... ERROR",
            "",
            "----------------------------------------------------------------------",
            "Ran 5 tests in 0.010s",
            "",
            "FAILED (failures=1, errors=2, skipped=1)",
        ]
    )
    assert parse_log(log).tests == {
        "tests.test_mod.TestX.test_a": PASSED,
        "tests.test_mod.TestX.test_b": FAILED,
        "tests.test_mod.TestX.test_c": ERROR,
        "tests.test_mod.TestX.test_d": SKIPPED,
        "tests.test_mod.TestX.test_e": PASSED,
        "tests.test_other": ERROR,
    }


def test_unittest_output_lines_ending_like_statuses() -> None:
    """The last status-like text before the next test is the status."""
    log = "\n".join(
        [
            "test_a (m.T.test_a) ... I will look",
            "ERROR in the log, but then",
            "all ok",
            "test_b (m.T.test_b) ... ok",
            "Ran 2 tests in 0.001s",
        ]
    )
    assert parse_log(log).tests == {"m.T.test_a": PASSED, "m.T.test_b": PASSED}


def test_unittest_two_runs_last_wins() -> None:
    """The same suite run twice (a retry): the second run's outcome wins."""
    first = read("unittest_py311.log")
    second = first.replace(
        "test_fail (pkg.test_things.TestThings.test_fail) ... FAIL",
        "test_fail (pkg.test_things.TestThings.test_fail) ... ok",
    ).replace("FAIL: test_fail (pkg.test_things.TestThings.test_fail)", "")
    result = parse_log(first + second)
    assert result.tests == {**THINGS, T + "test_fail": PASSED}


def test_unittest_truncated_run() -> None:
    text = read("unittest_py311.log")
    cut = text.index("test_skip (")
    result = parse_log(text[:cut] + "test_skip (pkg.test_things.Test")
    assert result.runner == "unittest"
    assert TRUNCATED in result.warnings
    assert result.tests == {
        k: THINGS[k]
        for k in [
            "pkg.test_things.TestOther",
            T + "test_doc",
            T + "test_error",
            T + "test_fail",
            T + "test_ok",
            T + "test_print",
        ]
    }


def test_unittest_no_tests_is_empty() -> None:
    log = "\n----------------------------------------------------------------------\n"
    log += "Ran 0 tests in 0.000s\n\nNO TESTS RAN\n"
    result = parse_log(log)
    assert (result.runner, result.status, result.tests) == ("unittest", "empty", {})
