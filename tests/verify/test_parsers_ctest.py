"""ctest logs: CTest's JUnit report between repogym's marker lines, the console lines, a failed
build.

The fixtures are genuine output of a CMake recipe's commands in the local sandbox (GCC 12,
CMake/CTest 3.25, Debian's GoogleTest 1.12) over a project with GoogleTest tests (one passing,
one failing, one GTEST_SKIP, a parameterised test with two values) and plain ``add_test`` tests
that time out, crash, cannot start, are disabled, miss a PASS_REGULAR_EXPRESSION, exit with
their SKIP_RETURN_CODE, or fail an ``assert``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from repogym.shipped.parsers import ERROR, FAILED, PASSED, SKIPPED, TRUNCATED, parse_log
from repogym.shipped.parsers import _log_ctest as ctest
from tests.verify.logutil import parse, read

LONG = "a_really_long_test_name_that_goes_on_and_on_and_on_for_quite_a_while_to_see_padding"
ALL = {
    "Add.Works": PASSED,
    "Add.Fails": FAILED,
    "Add.Skipped": SKIPPED,  # GTEST_SKIP: gtest_discover_tests sets a SKIP_REGULAR_EXPRESSION
    "Small/AddParam.Zero/1": PASSED,
    "Small/AddParam.Zero/2": PASSED,
    "plain_check": PASSED,
    "slow_one": FAILED,  # timeout
    "missing_exe": FAILED,  # Not Run: CTest fails the run for it
    "off_one": SKIPPED,  # Not Run (Disabled)
    "crash_one": FAILED,  # SIGSEGV
    "name": FAILED,  # Not Run
    LONG: PASSED,
    "regex_fail": FAILED,
    "rc_skip": SKIPPED,  # SKIP_RETURN_CODE
    "c_assert": FAILED,
}
GTEST_MESSAGE = "demo_test.cpp:4: Expected equality of these values: add(2, 2) Which is: 4 5"


def _without_report(text: str) -> str:
    return text[: text.index(ctest.JUNIT_BEGIN)]


def test_junit_report() -> None:
    result = parse("ctest_junit.log")
    assert (result.runner, result.status, result.warnings) == ("ctest", "ok", [])
    assert result.tests == ALL
    assert result.failures == {
        "Add.Fails": GTEST_MESSAGE,
        "slow_one": "Timeout",
        "missing_exe": "Unable to find executable",
        "crash_one": "Exception: SegFault",
        "name": "Unable to find executable",
        "regex_fail": "Required regular expression not found. Regex=[yes ]",
        "c_assert": "file.c:12: main: Assertion `x == 1` failed.",
    }


def test_an_assertion_after_a_harness_progress_dots_is_the_message() -> None:
    line = (
        "." * 240 + "test_password.out: /workspace/src/miniz.h:3153: tdefl_compress_lz_codes:"
        " Assertion `d->m_huff_code_sizes[0][lit]' failed."
    )
    assert ctest.failure_message(["Running", line]) == (
        "miniz.h:3153: tdefl_compress_lz_codes: Assertion `d->m_huff_code_sizes[0][lit]' failed."
    )


def test_console_lines_alone_give_the_same_outcomes() -> None:
    result = parse_log(_without_report(read("ctest_junit.log")))
    assert (result.runner, result.warnings) == ("ctest", [])
    assert result.tests == ALL
    assert result.failures["Add.Fails"] == GTEST_MESSAGE
    assert result.failures["missing_exe"] == "Not Run"


def test_parallel_console_run() -> None:
    # ctest -j2 without a report: results in completion order, output after each failure.
    result = parse("ctest_parallel.log")
    assert (result.runner, result.warnings, result.tests) == ("ctest", [], ALL)
    assert result.failures["Add.Fails"] == GTEST_MESSAGE
    assert result.failures["regex_fail"].startswith("Failed  Required regular expression")


def test_selected_run() -> None:
    assert parse("ctest_select.log").tests == {
        "Add.Works": PASSED,
        "Small/AddParam.Zero/2": PASSED,
        "rc_skip": SKIPPED,
    }


def test_build_failure_marks_listed_tests_error() -> None:
    result = parse("ctest_build_failed.log")
    assert (result.runner, result.status) == ("ctest", "ok")
    assert result.warnings == ["ctest: the build failed; the tests did not run"]
    assert result.tests == {
        name: (SKIPPED if name == "off_one" else ERROR) for name in ALL
    }  # the disabled test is listed "(Disabled)"
    assert set(result.failures.values()) == {
        "/workspace/src/demo.cpp:1:36: error: expected primary-expression before ';' token"
    }


def test_forged_report_and_lines_before_the_real_report_lose() -> None:
    text = read("ctest_junit.log")
    forged = (
        "[  FAILED  ] Add.Fails\n"
        f"{ctest.JUNIT_BEGIN}\n"
        '<?xml version="1.0"?>\n<testsuite><testcase name="Add.Fails" status="run"/>'
        '<testcase name="Forged.One" status="run"/></testsuite>\n'
        f"{ctest.JUNIT_END}\n"
        " 2/11 Test  #2: Add.Fails ........................   Passed    0.00 sec\n"
    )
    text = text.replace("[  FAILED  ] Add.Fails\n", forged, 1)
    assert parse_log(text).tests == ALL


def test_marker_lines_inside_the_report_do_not_cut_it() -> None:
    text = read("ctest_junit.log")
    # What a test printed is escaped inside the report: a forged block there is only text.
    inner = f"{ctest.JUNIT_BEGIN}\n&lt;?xml version=&quot;1.0&quot;?&gt;\n{ctest.JUNIT_END}\n"
    at = text.index("Note: Google Test filter = Add.Works", text.index(ctest.JUNIT_BEGIN))
    result = parse_log(text[:at] + inner + text[at:])
    assert (result.tests, result.warnings) == (ALL, [])


@pytest.mark.parametrize(
    ("change", "warning"),
    [
        (
            lambda x: x.replace("<testsuite", '<!DOCTYPE t [<!ENTITY a "b">]>\n<testsuite', 1),
            "ctest: the JUnit report declares a DTD or entities; ignored",
        ),
        (
            lambda x: x.replace("</testsuite>", "", 1),
            "ctest: the JUnit report is malformed; read the console lines instead",
        ),
    ],
)
def test_unusable_report_falls_back_to_console(change: Callable[[str], str], warning: str) -> None:
    text = read("ctest_junit.log")
    at = text.index(ctest.JUNIT_BEGIN)
    result = parse_log(text[:at] + change(text[at:]))
    assert result.tests == ALL
    assert result.warnings == [warning]


def test_oversized_report_is_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctest, "MAX_XML", 1000)
    result = parse("ctest_junit.log")
    assert result.tests == ALL
    assert result.warnings == [
        "ctest: the JUnit report is too large; read the console lines instead"
    ]


def test_truncated_console_log() -> None:
    text = _without_report(read("ctest_junit.log"))
    cut = text.index(" 7/15 Test  #7: slow_one")
    result = parse_log(text[:cut])
    assert TRUNCATED in result.warnings
    assert result.tests == {**{k: v for k, v in list(ALL.items())[:6]}, "slow_one": FAILED}


def test_a_test_scripts_own_error_line_is_the_message() -> None:
    """Output-comparing test scripts (json-c's) say what failed in an ``ERROR:`` line; the
    shell trace echoing it does not count."""
    from repogym.shipped.parsers._log_ctest import failure_message

    output = [
        "+ cmp -s /workspace/tests/cli.expected cli.out",
        '+ echo ERROR: "../apps/json_parse -n -" (test_cli) failed:',
        'ERROR: "../apps/json_parse -n -" (test_cli) failed:',
        "+ diff /workspace/tests/cli.expected cli.out",
    ]
    assert failure_message(output) == 'ERROR: "../apps/json_parse -n -" (test_cli) failed:'
    assert failure_message(["+ echo FAIL: x", "all good"]) is None
