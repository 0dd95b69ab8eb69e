"""pytest logs: -v, -rA, both, xdist, reruns, capture off, collection errors, -q, colour."""

from __future__ import annotations

import pytest

from repogym.shipped.parsers import ERROR, FAILED, PASSED, SKIPPED, parse_log
from tests.verify.logutil import parse, read

A = "tests/test_alpha.py::"

# Genuine pytest 9 output for tests/test_alpha.py + tests/test_teardown.py + a module that fails
# to import.  Outcomes: XFAIL and (non-strict) XPASS count as PASSED; strict XPASS is FAILED.
ALPHA = {
    A + "test_pass": PASSED,
    A + "test_fail": FAILED,
    A + "test_skip": SKIPPED,
    A + "test_xfail": PASSED,
    A + "test_xpass": PASSED,
    A + "test_xpass_strict": FAILED,
    A + "test_error": ERROR,
    A + "test_prints": PASSED,
    A + "test_param[a b-1]": PASSED,
    A + "test_param[x::y]": FAILED,
    A + "test_param[\\xfcn\\xef]": PASSED,
    A + "test_param[dash-ed]": PASSED,
    A + "test_param[[nested]]": PASSED,
    A + "test_param[]": PASSED,
    A + "TestGroup::test_method": PASSED,
    A + "TestGroup::test_method_param[1]": PASSED,
    A + "TestGroup::test_method_param[2]": FAILED,
    A + "TestGroup::test_skip_inside": SKIPPED,
}
# Call failed, then teardown errored: worst of the two; passed then teardown error: ERROR.
TEARDOWN = {
    "tests/test_teardown.py::test_td_fail": FAILED,
    "tests/test_teardown.py::test_td_pass": ERROR,
}
BROKEN = {"tests/test_broken.py": ERROR}
FULL = {**ALPHA, **TEARDOWN, **BROKEN}
# "SKIPPED [1] file:line: reason" summary lines name no test: -rA alone has no skipped ids.
SUMMARY_ONLY = {k: v for k, v in FULL.items() if v != SKIPPED}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("pytest_v_rA.log", FULL),
        ("pytest_v.log", FULL),
        ("pytest_rA.log", SUMMARY_ONLY),
        ("pytest_color.log", {**ALPHA, **TEARDOWN}),
    ],
)
def test_pytest_variants(name: str, expected: dict[str, str]) -> None:
    result = parse(name)
    assert result.runner == "pytest"
    assert result.status == "ok"
    assert result.warnings == []
    assert result.tests == expected


def test_pytest_q_summary() -> None:
    result = parse("pytest_q.log")
    assert result.runner == "pytest"
    assert result.tests == {k: v for k, v in ALPHA.items() if v != SKIPPED}
    assert result.warnings == []


FLAKY = {
    "tests/test_flaky.py::test_flaky_then_pass": PASSED,
    "tests/test_flaky.py::test_always_fails": FAILED,
}


@pytest.mark.parametrize("name", ["pytest_xdist_v.log", "pytest_xdist_rA.log"])
def test_pytest_xdist(name: str) -> None:
    expected = {**FULL, **FLAKY}
    if name == "pytest_xdist_rA.log":
        expected = {k: v for k, v in expected.items() if v != SKIPPED}
    result = parse(name)
    assert result.runner == "pytest"
    assert result.tests == expected
    assert result.warnings == []


def test_pytest_xdist_worker_lines_alone() -> None:
    """Without the summary the [gwN] lines (with and without a percentage) still give ids."""
    log = "\n".join(
        [
            "tests/a.py::test_x ",
            "[gw0] [ 50%] PASSED tests/a.py::test_x ",
            "[gw1] FAILED tests/a.py::test_y[1 2] ",
            "[gw1] [100%] RERUN tests/a.py::test_z ",
            "[gw1] [100%] XFAIL tests/a.py::test_z ",
        ]
    )
    assert parse_log(log).tests == {
        "tests/a.py::test_x": PASSED,
        "tests/a.py::test_y[1 2]": FAILED,
        "tests/a.py::test_z": PASSED,
    }


def test_pytest_rerunfailures_last_attempt_wins() -> None:
    result = parse("pytest_rerunfailures.log")
    assert result.tests == {**FLAKY, **ALPHA}
    assert result.warnings == []


def test_pytest_two_sessions_last_wins() -> None:
    """Two pytest invocations in one log: the second session's outcome wins."""
    text = read("pytest_two_sessions.log")
    assert text.count("test session starts") == 2
    assert "FAILED tests/test_retry.py::test_eventually" in text
    assert parse_log(text).tests == {
        "tests/test_retry.py::test_eventually": PASSED,
        "tests/test_retry.py::test_always": PASSED,
    }


def test_pytest_capture_off_output_before_status() -> None:
    """With -s, test output sits between the node id and its status."""
    result = parse("pytest_capture_off.log")
    assert result.tests == {
        "tests/test_output.py::test_print_nl": PASSED,
        "tests/test_output.py::test_print_no_nl": PASSED,
        "tests/test_output.py::test_print_fail": FAILED,
    }


def test_pytest_subtests_roll_up_to_the_test() -> None:
    """pytest 9 SUBPASSED/SUBFAILED lines are not results of their own."""
    assert parse("pytest_subtests.log").tests == {
        "tests/test_sub.py::test_with_subtests": FAILED,
        "tests/test_sub.py::test_sub_all_pass": PASSED,
    }


def test_pytest_collection_error_interrupts() -> None:
    result = parse("pytest_collect_error.log")
    assert result.status == "ok"
    assert result.tests == {"tests/test_broken.py": ERROR}


def test_pytest_collection_error_header_only() -> None:
    """An 'ERROR collecting' section header alone marks the module."""
    log = (
        "============================= test session starts ==============================\n"
        "collected 0 items / 1 error\n\n"
        "==================================== ERRORS ====================================\n"
        "__________________ ERROR collecting tests/sub dir/test_y.py ___________________\n"
        "E   ImportError: nope\n"
        "=============================== 1 error in 0.05s ===============================\n"
    )
    assert parse_log(log).tests == {"tests/sub dir/test_y.py": ERROR}


def test_pytest_summary_wins_over_verbose_line() -> None:
    log = (
        "============================= test session starts ==============================\n"
        "tests/t.py::test_a PASSED                                                [100%]\n"
        "=========================== short test summary info ============================\n"
        "FAILED tests/t.py::test_a - AssertionError: flaky report\n"
        "============================== 1 failed in 0.01s ===============================\n"
    )
    assert parse_log(log).tests == {"tests/t.py::test_a": FAILED}


@pytest.mark.parametrize(
    ("line", "tid"),
    [
        ("PASSED tests/t.py::test_f[a b-1]", "tests/t.py::test_f[a b-1]"),
        ("FAILED tests/t.py::test_f[a - b] - assert 0", "tests/t.py::test_f[a - b]"),
        ("FAILED tests/t.py::test_f[x::y] - assert 'x::y'", "tests/t.py::test_f[x::y]"),
        ("FAILED tests/t.py::T::test_g[ünï-ü] - boom", "tests/t.py::T::test_g[ünï-ü]"),
        ("ERROR tests/t.py::test_h[[1, 2]] - E", "tests/t.py::test_h[[1, 2]]"),
        ("FAILED tests/my dir/t.py::test_i - msg - more", "tests/my dir/t.py::test_i"),
        ("XFAIL tests/t.py::test_j - reason", "tests/t.py::test_j"),
        ("XPASS tests/t.py::test_k", "tests/t.py::test_k"),
    ],
)
def test_pytest_summary_id_forms(line: str, tid: str) -> None:
    log = (
        "=========================== short test summary info ============================\n"
        + line
        + "\n========================= 1 passed in 0.01s =========================\n"
    )
    result = parse_log(log, "pytest")
    assert list(result.tests) == [tid]


def test_pytest_verbose_ids_with_spaces_and_reasons() -> None:
    log = (
        "tests/t.py::test_f[a b-1] PASSED                                        [ 33%]\n"
        "tests/t.py::test_f[c d] SKIPPED (needs network)                         [ 66%]\n"
        "tests/t.py::TestK::test_x[ünï] XFAIL (bug 12)                           [100%]\n"
        "========================= 1 passed in 0.01s =========================\n"
    )
    assert parse_log(log).tests == {
        "tests/t.py::test_f[a b-1]": PASSED,
        "tests/t.py::test_f[c d]": SKIPPED,
        "tests/t.py::TestK::test_x[ünï]": PASSED,
    }


def test_pytest_no_tests_is_empty() -> None:
    log = (
        "============================= test session starts ==============================\n"
        "platform linux -- Python 3.11.7, pytest-9.2.0, pluggy-1.7.0\n"
        "collected 0 items\n\n"
        "============================ no tests ran in 0.01s =============================\n"
    )
    result = parse_log(log)
    assert (result.runner, result.status, result.tests, result.warnings) == (
        "pytest",
        "empty",
        {},
        [],
    )


def test_pytest_captured_output_quoting_other_runs_is_ignored() -> None:
    """A plugin's own tests (pytester) print inner pytest runs in their captured output."""
    log = (
        "============================= test session starts ==============================\n"
        "tests/test_plugin.py::test_inner_run FAILED                             [100%]\n"
        "\n"
        "=================================== FAILURES ===================================\n"
        "________________________________ test_inner_run ________________________________\n"
        "----------------------------- Captured stdout call -----------------------------\n"
        "test_inner_run.py::test_a PASSED                                         [ 50%]\n"
        "test_inner_run.py::test_b FAILED                                         [100%]\n"
        "=========================== short test summary info ============================\n"
        "FAILED tests/test_plugin.py::test_inner_run - assert 1 == 0\n"
        "============================== 1 failed in 0.20s ===============================\n"
    )
    assert parse_log(log).tests == {"tests/test_plugin.py::test_inner_run": FAILED}


def test_pytest_old_fail_word_in_summary() -> None:
    log = (
        "=========================== short test summary info ============================\n"
        "FAIL tests/test_old.py::test_a\n"
        "===================== 1 failed, 1 passed in 0.05 seconds ======================\n"
    )
    result = parse_log(log, "pytest")
    assert result.tests == {"tests/test_old.py::test_a": FAILED}
    assert result.warnings == []


# Failure messages: the -rA summary line after " - ", the collection error's exception line.
RA_FAILURES = {
    "tests/test_broken.py": "ModuleNotFoundError: No module named 'nonexistent_module_xyz'",
    A + "test_error": "RuntimeError: fixture boom",
    A + "test_fail": "AssertionError: numbers differ",
    A + "test_xpass_strict": "[XPASS(strict)] strict",
    A + "test_param[x::y]": "AssertionError: assert 'x::y' ...",  # as pytest trimmed it
    A + "TestGroup::test_method_param[2]": "AssertionError: assert 2 == 1",
    "tests/test_teardown.py::test_td_fail": "AssertionError: assert False",  # the call's
    "tests/test_teardown.py::test_td_pass": "RuntimeError: teardown boom",
}


@pytest.mark.parametrize(
    "name", ["pytest_rA.log", "pytest_v.log", "pytest_v_rA.log", "pytest_xdist_rA.log"]
)
def test_pytest_failure_messages_from_the_summary(name: str) -> None:
    result = parse(name)
    expected = {k: v for k, v in RA_FAILURES.items() if result.tests.get(k) in (FAILED, ERROR)}
    assert {k: v for k, v in result.failures.items() if k in RA_FAILURES} == expected
    assert set(result.failures) == {k for k, v in result.tests.items() if v in (FAILED, ERROR)}


def test_pytest_failure_message_of_a_collection_error() -> None:
    """pytest 9 prints no message on the summary line of a module that does not import: the
    exception line of its traceback is used (not the source lines above it)."""
    assert parse("pytest_collect_error.log").failures == {
        "tests/test_broken.py": "ModuleNotFoundError: No module named 'nonexistent_module_xyz'"
    }
    log = (
        "============================= test session starts ==============================\n"
        "collected 0 items / 1 error\n\n"
        "==================================== ERRORS ====================================\n"
        "__________________________ ERROR collecting t_syn.py ___________________________\n"
        'E     File "/w/t_syn.py", line 1\n'
        "E       def f(:\n"
        "E             ^\n"
        "E   SyntaxError: invalid syntax\n"
        "=========================== short test summary info ============================\n"
        "ERROR t_syn.py\n"
        "=============================== 1 error in 0.05s ===============================\n"
    )
    assert parse_log(log).failures == {"t_syn.py": "SyntaxError: invalid syntax"}


def test_pytest_failure_messages_follow_the_last_session_and_worst_line() -> None:
    # test_eventually failed in the first session and passed in the second: no message.
    assert parse("pytest_two_sessions.log").failures == {}
    log = (
        "============================= test session starts ==============================\n"
        "collected 2 items\n\n"
        "=========================== short test summary info ============================\n"
        "ERROR t.py::a - RuntimeError: teardown\n"
        "FAILED t.py::a - \x1b[31massert 1 == 2\x1b[0m\n"
        "FAILED t.py::b[x - y] - ValueError: " + "v" * 400 + "\n"
        "FAILED t.py::c\n"
        "FAILED m.py::m.f - 001 >>> f(secret)\n"
        "========================= 3 failed, 1 error in 0.05s ===========================\n"
    )
    result = parse_log(log)
    assert result.tests == {
        "t.py::a": FAILED,
        "t.py::b[x - y]": FAILED,
        "t.py::c": FAILED,
        "m.py::m.f": FAILED,  # a doctest's quoted source is no message
    }
    assert result.failures == {
        "t.py::a": "AssertionError: assert 1 == 2",
        "t.py::b[x - y]": ("ValueError: " + "v" * 400)[:297] + "...",
    }
