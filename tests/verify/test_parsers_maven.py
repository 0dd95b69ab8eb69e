"""Maven logs: Surefire XML reports printed after ``mvn test`` (repogym's Maven test command).

The fixtures are genuine: repogym's recipe built in the local sandbox (JDK 17, Maven 3.9.11) and
its test command run there.  ``maven_junit5.log``: JUnit 5.10 with Surefire 3.2.5 (a failing, an
erroring, a skipped, a parameterised and a nested test, and a test printing marker-like lines);
``maven_surefire2.log``: the same project with Surefire 2.22.2; ``maven_junit5_select.log``: the
selection ``demo.ErrorsTest#printsAndPasses demo.CalcTest#identity(int)[2]``;
``maven_multimodule.log``: a JUnit 4 reactor whose module ``mm-util`` does not compile.
"""

from __future__ import annotations

from repogym.shipped.parsers import ERROR, FAILED, PASSED, SKIPPED, TRUNCATED, parse_log
from tests.verify.logutil import parse, read

JUNIT5 = {
    "demo.CalcTest#failsOnPurpose": FAILED,
    "demo.CalcTest#identity(int)[1]": PASSED,
    "demo.CalcTest#identity(int)[2]": PASSED,
    "demo.CalcTest#adds": PASSED,
    "demo.CalcTest#skipped": SKIPPED,
    "demo.CalcTest$Inner#zero": PASSED,
    "demo.ErrorsTest#throwsUnexpected": ERROR,
    "demo.ErrorsTest#printsAndPasses": PASSED,
    "demo.ErrorsTest#unicodeNames": PASSED,
}


def test_junit5_report_ids_statuses_and_messages() -> None:
    result = parse("maven_junit5.log")
    assert result.runner == "maven"
    assert result.status == "ok"
    assert result.warnings == []
    assert result.tests == JUNIT5
    assert result.failures == {
        "demo.CalcTest#failsOnPurpose": "one plus two ==> expected: <4> but was: <3>",
        "demo.ErrorsTest#throwsUnexpected": "java.lang.IllegalStateException: boom",
    }


def test_output_printed_by_a_test_forges_nothing() -> None:
    """The test's stdout (a marker line and a fake <testcase>) is CDATA inside its report."""
    text = read("maven_junit5.log")
    assert "demo.Forged" in text and "REPOGYM-SUREFIRE-END\n<testcase" in text
    assert not [tid for tid in parse_log(text).tests if "Forged" in tid]


def test_surefire2_names_parameters_in_braces() -> None:
    expected = {
        k.replace("(int)", "{int}"): v for k, v in JUNIT5.items()
    }  # Surefire 2.22 writes identity{int}[1]
    assert parse("maven_surefire2.log").tests == expected


def test_selection_log() -> None:
    assert parse("maven_junit5_select.log").tests == {
        "demo.CalcTest#identity(int)[1]": PASSED,
        "demo.CalcTest#identity(int)[2]": PASSED,
        "demo.ErrorsTest#printsAndPasses": PASSED,
    }


def test_module_that_fails_to_compile_is_an_error_with_the_compiler_line() -> None:
    result = parse("maven_multimodule.log")
    assert result.tests == {
        "mm.AppTest#usesCore": PASSED,
        "mm.CoreTest#twice": PASSED,
        "mm.CoreTest#wrong": FAILED,
        "mm.CoreTest#ignored": SKIPPED,
        "mm-util": ERROR,
    }
    assert result.failures == {
        "mm.CoreTest#wrong": "twice three expected:<5> but was:<6>",
        "mm-util": "util/src/test/java/mm/UtilTest.java:[7,28] cannot find symbol"
        " (class NoSuchType)",
    }


def test_console_only_log_is_recognised_but_empty() -> None:
    """Without the printed reports (a plain ``mvn test``) passing tests are not named."""
    text = read("maven_junit5.log")
    console = text[: text.index("REPOGYM-SUREFIRE-REPORT")]
    result = parse_log(console)
    assert result.runner == "maven"
    assert result.status == "empty"


def test_cut_inside_a_report_keeps_what_is_complete() -> None:
    text = read("maven_junit5.log")
    cut = text.index('<testcase name="printsAndPasses"') + 10
    result = parse_log(text[:cut])
    assert TRUNCATED in result.warnings
    assert result.tests["demo.ErrorsTest#throwsUnexpected"] == ERROR
    assert "demo.ErrorsTest#printsAndPasses" not in result.tests
    assert result.tests["demo.CalcTest$Inner#zero"] == PASSED


def test_mvn_cut_before_its_end_is_truncated() -> None:
    text = read("maven_multimodule.log")
    result = parse_log(text[: text.index("[INFO] Reactor Summary")])
    assert result.runner == "maven"
    assert TRUNCATED in result.warnings


def test_two_runs_in_one_log_last_wins() -> None:
    first = read("maven_junit5.log")
    second = first.replace(
        '<testcase name="failsOnPurpose" classname="demo.CalcTest" time="0.232">',
        '<testcase name="failsOnPurpose" classname="demo.CalcTest" time="0.232"/><x>',
        1,
    ).replace("</failure>\n  </testcase>", "</failure>\n  </x>", 1)
    result = parse_log(first + second)
    assert result.tests["demo.CalcTest#failsOnPurpose"] == PASSED
    assert parse_log(second + first).tests["demo.CalcTest#failsOnPurpose"] == FAILED


REPORT = (
    "REPOGYM-SUREFIRE-REPORT ./target/surefire-reports/TEST-a.BTest.xml\n"
    "{xml}\nREPOGYM-SUREFIRE-END\n"
)


def _report(xml: str) -> str:
    return REPORT.format(xml=xml)


def test_doctype_reports_are_never_parsed() -> None:
    xml = (
        '<?xml version="1.0"?><!DOCTYPE t [<!ENTITY a "x"><!ENTITY b "&a;&a;&a;&a;">]>\n'
        '<testsuite name="a.BTest"><testcase name="m" classname="a.BTest"/></testsuite>'
    )
    result = parse_log(_report(xml), "maven")
    assert result.tests == {}
    assert any("DOCTYPE" in w for w in result.warnings)


def test_malformed_report_is_read_tag_by_tag() -> None:
    xml = (
        '<testsuite name="a.BTest">\n<testcase name="ok" classname="a.BTest"/>\n'
        '<testcase name="bad" classname="a.BTest"><failure message="x &lt; y &amp; &#233;"'
        ' type="AssertionError"><![CDATA[<testcase name="fake" classname="a.BTest"/>]]>'
        '</failure></testcase>\n<testcase name="broken" classname=\'a.BTest\'><error type="E"/>'
        "</testcase><unclosed</testsuite>"
    )
    result = parse_log(_report(xml), "maven")
    assert result.tests == {"a.BTest#ok": PASSED, "a.BTest#bad": FAILED, "a.BTest#broken": ERROR}
    assert result.failures == {"a.BTest#bad": "x < y & é", "a.BTest#broken": "E"}
    assert any("not well-formed" in w for w in result.warnings)


def test_class_level_result_and_flaky_rerun() -> None:
    xml = (
        '<testsuite name="a.BTest">'
        '<testcase name="" classname="a.BTest"><error message="setup" type="E"/></testcase>'
        '<testcase name="flaky" classname="a.BTest"><flakyFailure message="once"/></testcase>'
        '<testcase name="always" classname="a.BTest"><failure message="1"/>'
        '<rerunFailure message="2"/></testcase></testsuite>'
    )
    assert parse_log(_report(xml)).tests == {
        "a.BTest": ERROR,
        "a.BTest#flaky": PASSED,
        "a.BTest#always": FAILED,
    }


def test_an_empty_report_does_not_swallow_the_next() -> None:
    empty = "REPOGYM-SUREFIRE-REPORT ./target/surefire-reports/TEST-a.ATest.xml\n\n"
    empty += "REPOGYM-SUREFIRE-END\n"
    xml = '<testsuite name="a.BTest"><testcase name="m" classname="a.BTest"/></testsuite>'
    result = parse_log(empty + _report(xml), "maven")
    assert result.tests == {"a.BTest#m": PASSED}
    assert result.warnings == []
