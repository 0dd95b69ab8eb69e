"""jest, vitest and mocha logs: text reporters, JSON reporters, several versions."""

from __future__ import annotations

import json

import pytest

from repogym.shipped.parsers import ERROR, FAILED, PASSED, SKIPPED, TRUNCATED, parse_log
from tests.verify.logutil import parse, read

M = "__tests__/math.test.js > "
# Genuine jest 30 output.  The describe title "nested > group" contains the separator: ids are
# the titles joined by " > " as documented, so it reads as two levels.
JEST = {
    M + "top level test": PASSED,
    M + "each 1 + 2": PASSED,
    M + "each 3 + 4": PASSED,
    M + "math > adds numbers": PASSED,
    M + "math > fails on purpose": FAILED,
    M + "math > nested > group > works with ünïcode ✓": PASSED,
    M + "math > nested > group > is skipped": SKIPPED,
    M + "math > nested > group > is todo": SKIPPED,
    "__tests__/other.test.js > Other suite > passes": PASSED,
    "__tests__/other.test.js > Other suite > throws": FAILED,
    "__tests__/broken.test.js": ERROR,
}


@pytest.mark.parametrize("name", ["jest_verbose.log", "jest_color.log", "jest_json.log"])
def test_jest(name: str) -> None:
    result = parse(name)
    assert result.runner == "jest"
    assert result.status == "ok"
    assert result.warnings == []
    assert result.tests == JEST


def test_jest_json_report_alone_keeps_absolute_paths() -> None:
    """A bare --json report has absolute paths and nothing to make them relative with."""
    result = parse("jest_report.json")
    assert result.runner == "jest"
    assert result.tests == {"/app/" + k: v for k, v in JEST.items()}


def test_jest_json_preferred_over_text() -> None:
    """When the JSON report and text lines disagree, the JSON report wins."""
    text = read("jest_json.log")
    assert "FAIL __tests__/math.test.js" in text  # the text reporter's lines are there too
    verbose = read("jest_verbose.log").replace("✕ fails on purpose", "✓ fails on purpose")
    result = parse_log(verbose + text)
    assert result.tests[M + "math > fails on purpose"] == FAILED


def test_jest_default_reporter_names_failures_only() -> None:
    result = parse("jest_default.log")
    assert result.tests == {k: v for k, v in JEST.items() if v in (FAILED, ERROR)}


V = "src/math.test.js > "
VITEST = {
    V + "math > adds numbers": PASSED,
    V + "math > fails on purpose": FAILED,
    V + "math > nested group > works with ünïcode": PASSED,
    V + "math > nested group > is skipped": SKIPPED,
    V + "math > nested group > is todo": SKIPPED,
    V + "top level test": PASSED,
    "src/other.test.js > Other suite > passes": PASSED,
    "src/other.test.js > Other suite > throws": FAILED,
    "src/broken.test.js": ERROR,
}


@pytest.mark.parametrize(
    "name",
    [
        "vitest4_verbose.log",
        "vitest4_verbose_color.log",
        "vitest3_verbose.log",
        "vitest3_default.log",
    ],
)
def test_vitest_full_names(name: str) -> None:
    result = parse(name)
    assert result.runner == "vitest"
    assert result.warnings == []
    assert result.tests == VITEST


def test_vitest1_verbose_omits_skipped() -> None:
    result = parse("vitest1_verbose.log")
    assert result.tests == {
        k: v for k, v in VITEST.items() if v != SKIPPED and not k.endswith("is todo")
    }


def test_vitest1_default_lists_failures() -> None:
    assert parse("vitest1_default.log").tests == {
        V + "math > fails on purpose": FAILED,
        "src/other.test.js > Other suite > throws": FAILED,
        "src/broken.test.js": ERROR,
    }


@pytest.mark.parametrize("name", ["vitest4_default.log", "vitest4_default_color.log"])
def test_vitest4_default_reporter_without_suite_names(name: str) -> None:
    """vitest 4's default tree omits describe titles: only what can be named is reported."""
    result = parse(name)
    assert result.tests == {
        V + "top level test": PASSED,
        V + "math > fails on purpose": FAILED,
        "src/other.test.js > Other suite > throws": FAILED,
        "src/broken.test.js": ERROR,
    }
    assert len(result.warnings) == 1
    assert "without suite names" in result.warnings[0]


def test_vitest_json_report() -> None:
    result = parse("vitest4_json.log")
    assert result.runner == "vitest"
    assert result.tests == {"/app/" + k: v for k, v in VITEST.items()}


def test_vitest_json_relative_to_banner_root() -> None:
    """With the RUN banner in the same log, JSON paths become relative to the root."""
    banner = "\n RUN  v4.1.12 /app\n\n"
    result = parse_log(banner + read("vitest4_json.log"))
    assert result.tests == VITEST


MOCHA_SPEC = {
    "top level test": PASSED,
    "math > adds numbers": PASSED,
    "math > fails on purpose": FAILED,
    "math > nested group > works with ünïcode": PASSED,
    "math > nested group > is skipped": SKIPPED,
    "math > nested group > is pending": SKIPPED,
    "math > nested group > is slow": PASSED,
    "math > hooks": ERROR,  # its "before all" hook failed
    "Other suite > passes": PASSED,
    "Other suite > throws": FAILED,
}


def test_mocha_spec() -> None:
    result = parse("mocha_spec.log")
    assert result.runner == "mocha"
    assert result.warnings == []
    assert result.tests == MOCHA_SPEC


def test_mocha_json() -> None:
    """mocha's JSON has the file but joins nested describe titles with spaces."""
    f = "/app/test/math.spec.js > "
    result = parse("mocha_json.log")
    assert result.runner == "mocha"
    assert result.tests == {
        f + "top level test": PASSED,
        f + "math > adds numbers": PASSED,
        f + "math > fails on purpose": FAILED,
        f + "math nested group > works with ünïcode": PASSED,
        f + "math nested group > is skipped": SKIPPED,
        f + "math nested group > is pending": SKIPPED,
        f + "math nested group > is slow": PASSED,
        f + "math hooks": ERROR,
        "/app/test/other.spec.js > Other suite > passes": PASSED,
        "/app/test/other.spec.js > Other suite > throws": FAILED,
    }


def test_mocha_each_hook_marks_the_test() -> None:
    log = "\n".join(
        [
            "",
            "  api",
            '    1) "before each" hook for "gets a user"',
            "    ✓ lists users",
            "",
            "  1 passing (4ms)",
            "  1 failing",
        ]
    )
    assert parse_log(log).tests == {"api > gets a user": ERROR, "api > lists users": PASSED}


def test_mocha_truncated_tree() -> None:
    text = read("mocha_spec.log")
    result = parse_log(text[: text.index("Other suite")], "mocha")
    assert TRUNCATED in result.warnings
    assert result.tests == {k: v for k, v in MOCHA_SPEC.items() if not k.startswith("Other")}


def test_truncated_json_report_falls_back_to_text() -> None:
    text = read("jest_json.log")
    cut = text.index('"testResults"') + 200
    result = parse_log(text[:cut])
    assert result.runner == "jest"
    assert any("JSON" in w for w in result.warnings)
    # The text reporter (stderr) printed only failures before the JSON.
    assert result.tests == {k: v for k, v in JEST.items() if v in (FAILED, ERROR)}


def test_jest_json_statuses() -> None:
    report = {
        "numFailedTestSuites": 0,
        "numRuntimeErrorTestSuites": 0,
        "testResults": [
            {
                "name": "/r/a.test.ts",
                "status": "passed",
                "assertionResults": [
                    {"ancestorTitles": ["A", "B"], "title": "t1", "status": "passed"},
                    {"ancestorTitles": [], "title": "t2", "status": "pending"},
                    {"ancestorTitles": [], "title": "t3", "status": "todo"},
                    {"ancestorTitles": [], "title": "t4", "status": "disabled"},
                    {"ancestorTitles": [], "title": "t5", "status": "failed"},
                    {"ancestorTitles": [], "title": "t6", "status": "weird"},
                ],
            }
        ],
    }
    result = parse_log("junk before " + json.dumps(report) + "\njunk after")
    assert result.runner == "jest"
    assert result.tests == {
        "/r/a.test.ts > A > B > t1": PASSED,
        "/r/a.test.ts > t2": SKIPPED,
        "/r/a.test.ts > t3": SKIPPED,
        "/r/a.test.ts > t4": SKIPPED,
        "/r/a.test.ts > t5": FAILED,
    }


def test_jest_text_paths_with_spaces_and_slow_files() -> None:
    log = "\n".join(
        [
            "PASS src/my dir/a.test.ts (5.123 s)",
            "  group",
            "    ✓ works (3 ms)",
            "    ○ skipped later",
            "",
            "Test Suites: 1 passed, 1 total",
            "Tests:       1 passed, 1 skipped, 2 total",
        ]
    )
    result = parse_log(log)
    assert result.runner == "jest"
    assert result.tests == {
        "src/my dir/a.test.ts > group > works": PASSED,
        "src/my dir/a.test.ts > group > later": SKIPPED,
    }


def test_jest_retried_test_that_passed() -> None:
    """jest.retryTimes(n, {logErrorsBeforeRetry: true}) prints the failed attempt's error."""
    log = "\n".join(
        [
            "PASS src/net.test.js",
            "  net",
            "    ✓ flaky call (120 ms)",
            "",
            "  ● net › flaky call",
            "",
            "    RETRY 1",
            "",
            "    Error: ECONNRESET",
            "",
            "Test Suites: 1 passed, 1 total",
            "Tests:       1 passed, 1 total",
        ]
    )
    assert parse_log(log).tests == {"src/net.test.js > net > flaky call": PASSED}


# Failure messages: the first line of a JSON report's failureMessages / err.stack.


def test_jest_json_failure_messages() -> None:
    assert parse("jest_json.log").failures == {
        M + "math > fails on purpose": (
            "Error: expect(received).toBe(expected) // Object.is equality"
        ),
        "__tests__/other.test.js > Other suite > throws": "Error: kaboom",
        # the suite's "● Test suite failed to run" heading is skipped; its code frame is not read
        "__tests__/broken.test.js": (
            "Cannot find module './does-not-exist' from '__tests__/broken.test.js'"
        ),
    }


def test_jest_json_failure_messages_are_clean_and_short() -> None:
    """Colours (jest's matcher hints), control characters and long lines are cleaned up."""
    report = {
        "numFailedTestSuites": 1,
        "numRuntimeErrorTestSuites": 0,
        "testResults": [
            {
                "name": "/r/a.test.js",
                "status": "failed",
                "assertionResults": [
                    {
                        "ancestorTitles": ["calc"],
                        "title": "adds",
                        "status": "failed",
                        "failureMessages": [
                            "Error: \u001b[2mexpect(\u001b[22m\u001b[31mreceived\u001b[39m"
                            "\u001b[2m).\u001b[22mtoBe\u001b[2m(\u001b[22m\u001b[32mexpected"
                            "\u001b[39m\u001b[2m)\u001b[22m\u0007\n\nExpected: \u001b[32m3"
                            "\u001b[39m\n    at Object.toBe (/r/a.test.js:3:19)",
                            "Error: a second failure",
                        ],
                    },
                    {
                        "ancestorTitles": ["calc"],
                        "title": "long",
                        "status": "failed",
                        "failureMessages": ["\n\nTypeError: " + "z" * 1000],
                    },
                    {"ancestorTitles": ["calc"], "title": "none", "status": "failed"},
                    {
                        "ancestorTitles": ["calc"],
                        "title": "ok",
                        "status": "passed",
                        "failureMessages": ["Error: stale"],
                    },
                ],
            },
            {
                "name": "/r/b.test.js",
                "status": "failed",
                "assertionResults": [],
                "testExecError": {"message": "SyntaxError: Unexpected token (3:5)\n> 3 | x("},
            },
        ],
    }
    result = parse_log(json.dumps(report))
    assert result.tests == {
        "/r/a.test.js > calc > adds": FAILED,
        "/r/a.test.js > calc > long": FAILED,
        "/r/a.test.js > calc > none": FAILED,
        "/r/a.test.js > calc > ok": PASSED,
        "/r/b.test.js": ERROR,
    }
    assert result.failures == {
        "/r/a.test.js > calc > adds": "Error: expect(received).toBe(expected)",
        "/r/a.test.js > calc > long": ("TypeError: " + "z" * 1000)[:297] + "...",
        "/r/b.test.js": "SyntaxError: Unexpected token (3:5)",
    }


def test_vitest_json_failure_messages() -> None:
    result = parse_log("\n RUN  v4.1.12 /app\n\n" + read("vitest4_json.log"))
    assert result.failures == {
        "src/math.test.js > math > fails on purpose": (
            "AssertionError: expected 2 to be 3 // Object.is equality"
        ),
        "src/other.test.js > Other suite > throws": "Error: kaboom",
        "src/broken.test.js": (
            "Cannot find module './does-not-exist.js' imported from /app/src/broken.test.js"
        ),
    }


def test_mocha_json_failure_messages() -> None:
    f = "/app/test/math.spec.js > "
    assert parse("mocha_json.log").failures == {
        f + "math > fails on purpose": (
            "AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:"
        ),
        f + "math hooks": "Error: hook failed",
        "/app/test/other.spec.js > Other suite > throws": "Error: kaboom",
    }


def test_text_reporters_give_no_failure_messages() -> None:
    assert parse("jest_verbose.log").failures == {}
    assert parse("vitest4_verbose.log").failures == {}
    assert parse("mocha_spec.log").failures == {}
