"""cargo test (libtest) and cargo nextest logs."""

from __future__ import annotations

import pytest

from repogym.shipped.parsers import FAILED, PASSED, SKIPPED, TRUNCATED, parse_log
from tests.verify.logutil import parse, read

# Genuine `cargo test --workspace` output: crates demo (lib, bin, integration test, doctests)
# and other (lib).  tests::it_works exists in three binaries, so it is qualified by
# <binary>:<source>; every other name is unique and stays as libtest prints it.
WORKSPACE = {
    "demo:src/lib.rs::tests::it_works": PASSED,
    "tests::nested::deep": PASSED,
    "tests::panics_ok": PASSED,  # "- should panic" is not part of the name
    "tests::it_fails": FAILED,
    "tests::slow_one": SKIPPED,
    "tests::prints_no_newline": PASSED,
    "demo:src/main.rs::tests::it_works": PASSED,
    "it_works": PASSED,
    "integration_fails": FAILED,
    "other:src/lib.rs::tests::it_works": PASSED,
    "demo/src/lib.rs - add (line 3)": PASSED,
    "demo/src/lib.rs - add (line 7)": FAILED,
}


@pytest.mark.parametrize("name", ["cargo_workspace.log", "cargo_nocapture.log", "cargo_color.log"])
def test_cargo_workspace(name: str) -> None:
    result = parse(name)
    assert result.runner == "cargo"
    assert result.status == "ok"
    assert result.warnings == []
    assert result.tests == WORKSPACE


def test_cargo_single_binary_is_unqualified() -> None:
    assert parse("cargo_single.log").tests == {
        "tests::it_works": PASSED,
        "tests::nested::deep": PASSED,
        "tests::it_fails": FAILED,
        "tests::prints_no_newline": PASSED,
        "tests::panics_ok": PASSED,
        "tests::slow_one": SKIPPED,
    }


def test_cargo_old_running_lines_qualify_by_binary() -> None:
    assert parse("cargo_old_format.log").tests == {
        "demo::tests::it_works": PASSED,
        "tests::it_fails": FAILED,
        "tests::slow_one": SKIPPED,  # "ignored, needs network"
        "integration::tests::it_works": PASSED,
        "bench_add": PASSED,
    }


def test_cargo_crashed_binary_fails_the_running_test() -> None:
    result = parse("cargo_crash.log")
    assert result.tests == {
        "tests::a_ok": PASSED,
        "tests::b_segfaults": FAILED,
        "it_works": PASSED,
    }
    assert result.warnings == []


def test_cargo_compile_error_is_empty_with_warning() -> None:
    result = parse("cargo_compile_error.log")
    assert (result.runner, result.status, result.tests) == ("cargo", "empty", {})
    assert result.warnings == ["cargo: compilation failed"]


def test_cargo_truncated() -> None:
    text = read("cargo_single.log")
    cut = text.index("test tests::prints_no_newline")
    result = parse_log(text[: cut + 25])
    assert TRUNCATED in result.warnings
    assert result.tests == {
        "tests::it_works": PASSED,
        "tests::nested::deep": PASSED,
        "tests::it_fails": FAILED,
    }


NEXTEST = {
    "demo tests::it_works": PASSED,
    "demo tests::nested::deep": PASSED,
    "demo tests::it_fails": FAILED,
    "demo tests::slow_one": SKIPPED,
    "demo::bin/demo tests::it_works": PASSED,
    "demo::integration flaky_network": PASSED,  # TRY 1 FAIL, TRY 2 PASS, FLAKY 2/2
    "demo::integration crashes_hard": FAILED,  # SIGSEGV
    "demo::integration slow_but_ok": PASSED,  # SLOW [> 60s] while running is not a result
    "demo::integration hangs_forever": FAILED,  # TIMEOUT
    "demo::integration leaks_handle": PASSED,  # LEAK: passed but leaked handles
    "demo::integration cannot_exec": FAILED,  # XFAIL is nextest's exec failure
    "demo::integration fails_and_leaks": FAILED,
    "other tests::it_works": PASSED,
}


def test_nextest() -> None:
    result = parse("nextest.log")
    assert result.runner == "nextest"
    assert result.warnings == []
    assert result.tests == NEXTEST


def test_nextest_old_layout_with_colour() -> None:
    result = parse("nextest_old_color.log")
    assert result.runner == "nextest"
    assert result.warnings == []
    assert result.tests == {
        "demo tests::it_works": PASSED,
        "demo tests::it_fails": FAILED,
        "demo tests::slow_one": SKIPPED,
        "demo::integration it_works": PASSED,
    }


def test_nextest_truncated() -> None:
    text = read("nextest.log")
    result = parse_log(text[: text.index("        LEAK [")])
    assert TRUNCATED in result.warnings
    assert result.tests["demo::integration hangs_forever"] == FAILED
    assert "demo::integration leaks_handle" not in result.tests
