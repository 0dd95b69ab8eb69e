"""go test logs: -v, -json (old and new build events), plain, -count, timeouts, collisions."""

from __future__ import annotations

import pytest

from repogym.shipped.parsers import ERROR, FAILED, PASSED, SKIPPED, TRUNCATED, parse_log
from tests.verify.logutil import parse, read

CALC = {
    "TestAdd": PASSED,
    "TestAddFail": FAILED,
    "TestSkipped": SKIPPED,
    "TestTable": FAILED,
    "TestTable/one_plus_one": PASSED,
    "TestTable/neg/numbers": PASSED,
    "TestTable/wrong": FAILED,
    "TestTable/ünï": PASSED,
    "TestNested": PASSED,
    "TestNested/outer": PASSED,
    "TestNested/outer/inner": PASSED,
    "TestNested/outer/skip_me": SKIPPED,
    "TestParallel": PASSED,
    "TestParallel/a": PASSED,
    "TestParallel/b": PASSED,
    # Printed "raw output without newline--- PASS: TestPrintNoNewline (0.00s)".
    "TestPrintNoNewline": PASSED,
}
ALL = {
    **CALC,
    "TestBeforePanic": PASSED,
    "TestPanics": FAILED,
    "TestUtilOK": PASSED,
    "example.com/demo/broken": ERROR,  # build failed
}


@pytest.mark.parametrize("name", ["go_v.log", "go_json.log"])
def test_go_verbose_and_json(name: str) -> None:
    result = parse(name)
    assert result.runner == "go"
    assert result.status == "ok"
    assert result.warnings == []
    assert result.tests == ALL


def test_go_plain_lists_failures() -> None:
    assert parse("go_plain.log").tests == {k: v for k, v in ALL.items() if v in (FAILED, ERROR)}


def test_go_count2_last_run_wins() -> None:
    text = read("go_count2.log")
    assert "--- FAIL: TestFlaky" in text
    assert parse_log(text).tests == {"TestFlaky": PASSED, "TestStable": PASSED}


@pytest.mark.parametrize("name", ["go_timeout.log", "go_timeout_json.log"])
def test_go_timeout_marks_running_tests_failed(name: str) -> None:
    """A panic (here: the -timeout alarm) leaves started tests without a result."""
    assert parse(name).tests == {
        "TestQuick": PASSED,
        "TestHangs": FAILED,
        "TestHangs/inner": FAILED,
    }


def test_go_same_name_in_two_packages_is_qualified() -> None:
    result = parse("go_collide.log")
    expected = {k: v for k, v in CALC.items() if k != "TestAdd"}
    expected["example.com/demo/calc::TestAdd"] = PASSED
    expected["example.com/demo/util::TestAdd"] = PASSED
    expected["TestUtilOK"] = PASSED
    assert result.tests == expected


def test_go_json_build_fail_events() -> None:
    """go >= 1.24 reports build failures as build-output/build-fail events."""
    assert parse("go_json_build_fail.log").tests == {
        "TestUtilOK": PASSED,
        "TestAdd": PASSED,
        "example.com/demo/broken": ERROR,
        "example.com/demo/initpanic": ERROR,  # failed before any test ran
    }


def test_go_truncated_verbose() -> None:
    text = read("go_v.log")
    cut = text.index("--- PASS: TestTable/ünï")
    result = parse_log(text[: cut + 10])
    assert TRUNCATED in result.warnings
    assert result.tests["TestTable/neg/numbers"] == PASSED
    assert "TestTable/ünï" not in result.tests
    assert result.tests["TestTable"] == FAILED  # go prints the parent before its subtests
    assert "TestNested" not in result.tests


def test_go_truncated_json_line() -> None:
    text = read("go_json.log")
    cut = text.index('"Test":"TestNested"}') + 5
    result = parse_log(text[:cut])
    assert result.runner == "go"
    assert any("malformed" in w for w in result.warnings)
    assert TRUNCATED in result.warnings
    assert result.tests["TestTable/wrong"] == FAILED


def test_go_no_test_files_is_empty() -> None:
    result = parse_log("?   \texample.com/demo/cmd\t[no test files]\n")
    assert (result.runner, result.status, result.tests) == ("go", "empty", {})


# Failure messages: the first "file_test.go:N: ..." line a failing test logged, a panic right
# after its "--- FAIL", a build failure's first compiler error.
GO_FAILURES = {
    "TestAddFail": "calc_test.go:15: about to fail",  # the first line it logged
    "TestTable/wrong": "calc_test.go:40: got 2 want 3",
    "TestPanics": "panic: assignment to entry in nil map [recovered]",
    "example.com/demo/broken": "broken/broken_test.go:5:33: undefined: undefinedFunc",
}


@pytest.mark.parametrize("name", ["go_v.log", "go_json.log", "go_plain.log"])
def test_go_failure_messages(name: str) -> None:
    """-v prints a test's lines before its "--- FAIL", without -v they follow it, indented;
    a skipped test's log line (TestSkipped: "not implemented") is no failure message."""
    assert parse(name).failures == GO_FAILURES


def test_go_failure_messages_with_qualified_ids_and_reruns() -> None:
    result = parse("go_collide.log")
    assert result.failures == {
        "TestAddFail": "calc_test.go:15: about to fail",
        "TestTable/wrong": "calc_test.go:40: got 2 want 3",
    }
    assert parse("go_count2.log").failures == {}  # failed, then passed on the rerun
    log = (
        "=== RUN   TestX\n"
        "    x_test.go:3: \x1b[31mfirst\x1b[0m " + "w" * 400 + "\n"
        "--- FAIL: TestX (0.00s)\n"
        "FAIL\n"
        "FAIL\texample.com/a\t0.01s\n"
        "=== RUN   TestX\n"
        "    x_test.go:9: from b\n"
        "--- FAIL: TestX (0.00s)\n"
        "FAIL\n"
        "FAIL\texample.com/b\t0.01s\n"
    )
    assert parse_log(log).failures == {
        "example.com/a::TestX": ("x_test.go:3: first " + "w" * 400)[:297] + "...",
        "example.com/b::TestX": "x_test.go:9: from b",
    }


def test_go_json_build_output_message() -> None:
    assert parse("go_json_build_fail.log").failures == {
        "example.com/demo/broken": "broken/broken_test.go:5:33: undefined: undefinedFunc",
    }
