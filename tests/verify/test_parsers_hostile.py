"""Hostile input: ANSI codes, CRLF, truncation, duplicates, interleaved output, huge logs."""

from __future__ import annotations

import random
import re

import pytest

from repogym.shipped.parsers import (
    ERROR,
    FAILED,
    PASSED,
    SKIPPED,
    TRUNCATED,
    clean_text,
    parse_log,
)
from tests.verify.logutil import LOGS, parse, read

FIXTURES = sorted(p.name for p in LOGS.iterdir() if p.suffix in (".log", ".json"))
STATUSES = {PASSED, FAILED, SKIPPED, ERROR}


def test_fixture_set_is_complete() -> None:
    runners = {parse(name).runner for name in FIXTURES}
    assert runners == {
        "pytest",
        "unittest",
        "jest",
        "vitest",
        "mocha",
        "go",
        "cargo",
        "nextest",
        "ctest",
        "maven",
    }


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_parses_cleanly(name: str) -> None:
    result = parse(name)
    assert result.status in ("ok", "empty")
    assert set(result.tests.values()) <= STATUSES
    assert not [w for w in result.warnings if "internal error" in w]


def _colourise(text: str, seed: int) -> str:
    """Wrap words in SGR colour codes, as a forced-colour runner would."""
    rng = random.Random(seed)
    codes = ["\x1b[1m", "\x1b[32m", "\x1b[0m", "\x1b[2;31m", "\x1b[39;49m", "\x1b[38;5;208m"]

    def wrap(m: re.Match) -> str:
        return rng.choice(codes) + m.group(0) + rng.choice(codes)

    return re.sub(r"[^\s]+", wrap, text)


# Colour codes inside a JSON report's strings would change the titles themselves.
TEXT_FIXTURES = [name for name in FIXTURES if "json" not in name]


@pytest.mark.parametrize("name", TEXT_FIXTURES)
def test_ansi_colour_everywhere_changes_nothing(name: str) -> None:
    text = read(name)
    assert parse_log(_colourise(text, 1)).tests == parse_log(text).tests


def test_cursor_codes_redraw_lines() -> None:
    """A TTY runner redraws its status line; only what stays on screen counts."""
    base = read("jest_verbose.log")
    status = "\x1b[2K\x1b[1G\x1b[1mRUNS\x1b[22m __tests__/math.test.js\x1b[2K\x1b[1G"
    hostile = base.replace("FAIL __tests__/", status + "FAIL __tests__/")
    hostile = hostile.replace("\n  ✓", "\n\x1b[0m\x1b[2K\x1b[1G  ✓")
    hostile = hostile.replace("Tests:", "\x1b[1A\x1b[2KTests:")
    assert parse_log(hostile).tests == parse_log(base).tests


def test_clean_text() -> None:
    raw = "a\x1b[31mb\x1b[0m\r\nc\x1b[2K\x1b[1Gd\x1b[K\r\n\x1b]0;title\x07e\rf\x00g\x1b"
    assert clean_text(raw) == "ab\nc\nd\ne\nfg"


@pytest.mark.parametrize("name", FIXTURES)
def test_windows_line_endings(name: str) -> None:
    text = read(name).replace("\r\n", "\n")
    assert parse_log(text.replace("\n", "\r\n")).tests == parse_log(text).tests


def test_stored_crlf_fixture() -> None:
    """A byte-exact CRLF log (git must not convert it: see logs/.gitattributes)."""
    raw = (LOGS / "pytest_windows_crlf.log").read_bytes()
    assert b"\r\n" in raw
    assert parse("pytest_windows_crlf.log").tests == parse("pytest_v_rA.log").tests


@pytest.mark.parametrize("name", FIXTURES)
def test_truncation_anywhere_never_raises(name: str) -> None:
    text = read(name)
    rng = random.Random(name)
    for cut in sorted(rng.sample(range(len(text)), min(25, len(text)))):
        result = parse_log(text[:cut])
        assert set(result.tests.values()) <= STATUSES
        assert not [w for w in result.warnings if "internal error" in w]


@pytest.mark.parametrize(
    ("name", "marker"),
    [
        ("pytest_v.log", "tests/test_alpha.py::TestGroup::test_method_param[2]"),
        ("unittest_py311.log", "test_subtests ("),
        ("jest_verbose.log", "FAIL __tests__/other.test.js"),
        ("vitest4_verbose.log", "src/other.test.js > Other suite > throws"),
        ("mocha_spec.log", "Other suite"),
        ("go_v.log", "=== RUN   TestParallel/b"),
        ("cargo_workspace.log", "test it_works ... ok"),
        ("nextest.log", "        PASS [   0.002s] ( 13/13)"),
        ("maven_junit5.log", '<testcase name="unicodeNames"'),
    ],
)
def test_truncated_mid_line_keeps_results_and_warns(name: str, marker: str) -> None:
    text = read(name)
    cut = text.index(marker) + len(marker) // 2
    full = parse_log(text)
    result = parse_log(text[:cut])
    assert result.runner == full.runner
    assert result.status == "ok"
    assert TRUNCATED in result.warnings
    assert result.tests
    # Whatever was reported before the cut is reported the same way.  (pytest's short summary
    # would have overridden -v lines, and go's package line resolves hung tests, so compare only
    # ids the complete log reports identically.)
    for tid, status in result.tests.items():
        if tid in full.tests:
            assert status == full.tests[tid], tid


def test_missing_final_newline() -> None:
    text = read("cargo_single.log").rstrip("\n")
    assert parse_log(text).tests == parse("cargo_single.log").tests


def test_jest_rerun_last_result_wins() -> None:
    first = read("jest_verbose.log")
    second = first.replace("✕ throws", "✓ throws").replace("● Other suite › throws", "")
    assert parse_log(first + second).tests["__tests__/other.test.js > Other suite > throws"] == (
        PASSED
    )
    assert parse_log(second + first).tests["__tests__/other.test.js > Other suite > throws"] == (
        FAILED
    )


def test_cargo_log_repeated_is_a_rerun_not_a_collision() -> None:
    text = read("cargo_single.log")
    again = text.replace("test tests::it_fails ... FAILED", "test tests::it_fails ... ok")
    result = parse_log(text + again)
    assert "tests::it_works" in result.tests  # same binary twice: no qualification
    assert result.tests["tests::it_fails"] == PASSED


def test_output_interleaved_with_results() -> None:
    """Prints inside tests, with and without newlines, around each runner's result lines."""
    pytest_log = (
        "tests/t.py::test_a hello\nworld\nPASSED                                   [ 50%]\n"
        "tests/t.py::test_b no newline hereFAILED                                 [100%]\n"
        "=================== 1 failed, 1 passed in 0.01s ===================\n"
    )
    assert parse_log(pytest_log).tests == {
        "tests/t.py::test_a": PASSED,
        "tests/t.py::test_b": FAILED,
    }
    go_log = (
        "=== RUN   TestA\nsome output--- PASS: TestA (0.00s)\n=== RUN   TestB\n"
        "    b_test.go:3: log\n--- FAIL: TestB (0.01s)\nFAIL\nFAIL\texample.com/x\t0.010s\n"
    )
    assert parse_log(go_log).tests == {"TestA": PASSED, "TestB": FAILED}
    cargo_log = (
        "running 2 tests\ntest a ... printing\nstill printingok\ntest b ... ignored\n\n"
        "test result: ok. 1 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out\n"
    )
    assert parse_log(cargo_log).tests == {"a": PASSED, "b": SKIPPED}


# -- huge logs ---------------------------------------------------------------------------------

SIZE = 10_000_000


def _fill(make: object, size: int = SIZE) -> str:
    parts: list[str] = []
    total = i = 0
    while total < size:
        chunk = make(i)  # type: ignore[operator]
        parts.append(chunk)
        total += len(chunk)
        i += 1
    return "".join(parts)


def _pytest_line(i: int) -> str:
    status = ("PASSED", "FAILED", "SKIPPED")[i % 3]
    return (
        f"tests/test_m{i // 100}.py::TestK::test_case[p {i}-x] {status}   [ 50%]\n"
        f"captured output {i} mentioning PASSED and tests/x.py::y\n"
    )


HUGE = {
    "pytest": (_pytest_line, "==== 1 passed in 9.00s ====\n"),
    "unittest": (lambda i: f"test_{i} (pkg.mod.TestCase.test_{i}) ... ok\n", "Ran 1 test in 1s\n"),
    "jest": (
        lambda i: (
            (f"PASS src/f{i}.test.js\n  suite\n" if i % 20 == 0 else "")
            + f"    ✓ does thing {i} (1 ms)\n"
            + ("\n" if i % 20 == 19 else "")
        ),
        "\nTests:       1 passed, 1 total\n",
    ),
    "vitest": (lambda i: f" ✓ src/f{i // 100}.test.ts > suite > test {i} 1ms\n", ""),
    "mocha": (lambda i: (f"  suite {i}\n" if i % 20 == 0 else "") + f"    ✔ test {i}\n", ""),
    "go": (
        lambda i: (
            f"=== RUN   TestThing{i}\n    x_test.go:{i}: log\n--- PASS: TestThing{i} (0.00s)\n"
            + (f"ok  \texample.com/p{i}\t0.01s\n" if i % 50 == 49 else "")
        ),
        "",
    ),
    "cargo": (
        lambda i: (
            ("running 50 tests\n" if i % 50 == 0 else "")
            + f"test m{i}::tests::case_{i} ... ok\n"
            + ("\ntest result: ok. 50 passed; 0 failed; 0 ignored\n\n" if i % 50 == 49 else "")
        ),
        "",
    ),
    "nextest": (lambda i: f"        PASS [   0.004s] (  {i}/9) crate::bin m{i}::test\n", ""),
    "maven": (
        lambda i: (
            (
                f"REPOGYM-SUREFIRE-REPORT ./t/TEST-p.C{i}.xml\n<testsuite name='p.C{i}'>\n"
                if i % 100 == 0
                else ""
            )
            + f'  <testcase name="m{i}" classname="p.C{i // 100}" time="0.01"/>\n'
            + ("</testsuite>\nREPOGYM-SUREFIRE-END\n" if i % 100 == 99 else "")
        ),
        "",
    ),
}


@pytest.mark.parametrize("runner", sorted(HUGE))
def test_huge_log_parses(runner: str) -> None:
    # Speed is measured by benchmarks/parsers.py; here only the result of a 10 MB log.
    make, tail = HUGE[runner]
    result = parse_log(_fill(make) + tail)
    assert result.runner == runner
    assert len(result.tests) > 50_000


def test_huge_garbage_is_fast_and_unparsed() -> None:
    rng = random.Random(0)
    alphabet = "abc ::[]().-=>✓ \t{}\"'\n"
    text = "".join(rng.choice(alphabet) for _ in range(200_000)) * 50
    assert parse_log(text).status == "unparsed"


def test_pathological_lines_stay_linear() -> None:
    """Long lines full of near-matches must not trigger regex backtracking blow-ups."""
    nasty = [
        "tests/x.py::" + "[" * 50_000 + " PASSED " * 2_000,
        "test " + " ... " * 20_000,
        "=== RUN   " + "--- PASS: " * 20_000,
        "  " + "✓ " * 50_000,
        '{"stats": ' * 20_000,
        '{"numFailedTestSuites": [' * 5_000,
        " " * 100_000 + "FAILED",
        "test_x (" + "a." * 40_000 + ")",
    ]
    for line in nasty:  # a backtracking blow-up would hang here (pytest-timeout ends it)
        assert parse_log(line + "\n" + line).status in ("ok", "empty", "unparsed")


def test_detection_when_results_are_buried_in_noise() -> None:
    """Megabytes of set-up and tear-down output around the test run."""
    noise = "".join(f"installing package-{i} ... done\n" for i in range(40_000))
    text = noise + read("go_v.log") + noise
    assert len(noise) > 1_000_000
    assert parse_log(text).tests == parse("go_v.log").tests
