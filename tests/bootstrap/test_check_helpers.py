"""How check results name a failure: the step, a one-line reason, test ids from reports."""

from __future__ import annotations

import json

from repogym.bootstrap.check import _build_failure, _js_report_ids, _reason_from

PIP_TAIL = """\
Collecting nothing-here==9
ERROR: Could not find a version that satisfies the requirement nothing-here==9
ERROR: No matching distribution found for nothing-here==9
"""


def test_build_failure_of_a_run_step() -> None:
    message = (
        "Dockerfile line 7: RUN failed with exit code 1 (RUN python -m pip install -r r.txt)"
        f"\n--- output (tail) ---\n{PIP_TAIL}"
    )
    step, reason, tail = _build_failure(message, "")
    assert step == "build: RUN python -m pip install -r r.txt (exit 1; Dockerfile line 7)"
    assert reason == "ERROR: No matching distribution found for nothing-here==9"
    assert "Collecting nothing-here==9" in tail


def test_build_failure_without_output() -> None:
    step, reason, tail = _build_failure(
        "Dockerfile line 1: cannot map base image 'x:1' onto this host (FROM x:1)", "#1 FROM x:1"
    )
    assert step.startswith("build: Dockerfile line 1: cannot map base image")
    assert reason.startswith("Dockerfile line 1: cannot map")
    assert tail == "#1 FROM x:1"


def test_reason_prefers_collection_errors_and_exceptions() -> None:
    pytest_out = (
        "t.py::test_a\n\n=== ERRORS ===\n____ ERROR collecting tests/test_b.py ____\n"
        "Traceback:\nE   ModuleNotFoundError: No module named 'yaml'\n"
        "=== short test summary info ===\nERROR tests/test_b.py\n"
    )
    assert _reason_from(pytest_out, "x") == (
        "error collecting tests/test_b.py: ModuleNotFoundError: No module named 'yaml'"
    )
    assert _reason_from("a\nImportError: cannot import name 'x'\nb\n", "x") == (
        "ImportError: cannot import name 'x'"
    )
    assert _reason_from("npm ERR! code E404\nnpm ERR! 404 Not Found\n", "x") == (
        "npm ERR! 404 Not Found"
    )
    assert _reason_from("", "fallback") == "fallback"


def test_reason_of_a_cmake_configure_error() -> None:
    configure = (
        "-- Could NOT find Doxygen (missing: DOXYGEN_EXECUTABLE)\n"
        "CMake Error at tests/CMakeLists.txt:118 (message):\n"
        "  Could not download\n"
        "  https://github.com/a/b/catch.hpp,\n"
        "  and Catch2 not found on your system.\n"
        "\n\n"
        "-- Configuring incomplete, errors occurred!\n"
    )
    assert _reason_from(configure, "x") == (
        "CMake Error at tests/CMakeLists.txt:118 (message): Could not download "
        "https://github.com/a/b/catch.hpp, and Catch2 not found on your system."
    )
    assert _reason_from("CMake Error: The source directory does not exist.\n", "x") == (
        "CMake Error: The source directory does not exist."
    )


def test_js_report_ids_follow_the_parser_format() -> None:
    report = {
        "numTotalTests": 2,
        "testResults": [
            {
                "name": "/workspace/src/a.test.ts",
                "assertionResults": [
                    {"ancestorTitles": ["", "math"], "title": "adds"},
                    {"ancestorTitles": [], "title": "top"},
                ],
            }
        ],
    }
    stdout = "console noise\n" + json.dumps(report) + "\n"
    assert _js_report_ids(stdout, "/workspace") == [
        "src/a.test.ts > math > adds",
        "src/a.test.ts > top",
    ]
    assert _js_report_ids("no json here", "/workspace") == []
