"""API, detection, property tests, the CLI, and the file's self-containment."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repogym.shipped import parsers
from repogym.shipped.parsers import (
    PASSED,
    RUNNERS,
    ParseResult,
    detect_runner,
    parse_log,
)
from tests.verify.logutil import LOGS, PARSER_PARTS, PARSERS_PY, parse, read, ship_parsers

EXPECTED_RUNNER = {
    "pytest": "pytest",
    "unittest": "unittest",
    "jest": "jest",
    "vitest1": "vitest",
    "vitest3": "vitest",
    "vitest4": "vitest",
    "mocha": "mocha",
    "go": "go",
    "cargo": "cargo",
    "nextest": "nextest",
    "ctest": "ctest",
    "maven": "maven",
}
FIXTURES = sorted(p.name for p in LOGS.iterdir() if p.suffix in (".log", ".json"))


@pytest.mark.parametrize("name", FIXTURES)
def test_detect_runner(name: str) -> None:
    assert detect_runner(read(name)) == EXPECTED_RUNNER[name.replace(".", "_").split("_")[0]]


def test_explicit_runner_matches_detection() -> None:
    for name in FIXTURES:
        detected = parse(name)
        assert parse(name, detected.runner) == detected


def test_wrong_runner_is_unparsed() -> None:
    result = parse("pytest_v_rA.log", "go")
    assert (result.runner, result.status, result.tests) == ("go", "unparsed", {})


def test_unknown_runner_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown runner"):
        parse_log("x", "gradle")


def test_bytes_input_with_invalid_utf8() -> None:
    raw = (LOGS / "go_v.log").read_bytes() + b"\xff\xfe garbage\n"
    assert parse_log(raw).tests == parse("go_v.log").tests


def test_empty_and_blank_logs() -> None:
    for text in ("", "\n\n", "   ", "\x1b[0m"):
        assert parse_log(text) == ParseResult(None, {}, "unparsed", [])


def test_result_to_dict() -> None:
    result = parse_log("test a ... ok\n\ntest result: ok. 1 passed; 0 failed\n")
    assert result.to_dict() == {
        "runner": "cargo",
        "status": "ok",
        "tests": {"a": PASSED},
        "warnings": [],
        "failures": {},
    }
    assert "cargo" in repr(result)


def test_parser_crash_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(text: str, lines: list[str]) -> parsers.Out:
        raise RuntimeError("bug")

    monkeypatch.setitem(parsers._PARSERS, "go", boom)
    result = parse("go_v.log")
    assert result.tests == {} or result.runner != "go"
    assert any("internal error in the go parser" in w for w in result.warnings)


# -- properties --------------------------------------------------------------------------------


@settings(max_examples=300)
@given(st.text())
def test_random_text_is_unparsed(text: str) -> None:
    result = parse_log(text)
    assert result.status == "unparsed"
    assert result.runner is None
    assert result.tests == {}


@settings(max_examples=100)
@given(st.binary(max_size=2000))
def test_random_bytes_never_raise(data: bytes) -> None:
    assert parse_log(data).status in ("ok", "empty", "unparsed")


FRAGMENTS = sorted({line for name in FIXTURES for line in read(name).splitlines() if line.strip()})


@settings(max_examples=300)
@given(
    st.lists(
        st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=30)),
        max_size=60,
    ),
    st.sampled_from([None, *RUNNERS]),
    st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_shuffled_log_fragments_never_raise(
    lines: list[str], runner: str | None, newline: str
) -> None:
    """Lines of real logs in random order and mixed with noise: no crash, valid output."""
    result = parse_log(newline.join(lines), runner)
    assert result.status in ("ok", "empty", "unparsed")
    assert (result.status == "ok") == bool(result.tests)
    assert set(result.tests.values()) <= {"PASSED", "FAILED", "SKIPPED", "ERROR"}
    assert not [w for w in result.warnings if "internal error" in w]
    if runner is not None:
        assert result.runner == runner


# -- CLI and standalone use --------------------------------------------------------------------


def _run(python: str, *args: str, stdin: bytes | None = None) -> dict:
    proc = subprocess.run(
        [python, str(PARSERS_PY), *args],
        input=stdin,
        capture_output=True,
        check=True,
        timeout=60,
        cwd="/",
    )
    return json.loads(proc.stdout.decode("utf-8"))


def test_cli_prints_json() -> None:
    out = _run(sys.executable, str(LOGS / "unittest_py311.log"))
    assert out == parse("unittest_py311.log").to_dict()


def test_cli_runner_option_and_stdin() -> None:
    data = (LOGS / "cargo_single.log").read_bytes()
    out = _run(sys.executable, "--runner", "cargo", "-", stdin=data)
    assert out["runner"] == "cargo"
    assert out["tests"] == parse("cargo_single.log").tests


OLD_PYTHONS = [
    f"/root/.pyenv/versions/{v}/bin/python" for v in ("3.6.15", "3.7.16", "3.8.18", "3.9.18")
]


@pytest.mark.parametrize("python", OLD_PYTHONS)
def test_runs_standalone_under_old_interpreters(python: str, tmp_path: Path) -> None:
    """The copied file must work on its own (no repogym) under the repository's Python."""
    if not Path(python).exists() and not shutil.which(python):
        pytest.skip(f"{python} is not installed")
    copy = ship_parsers(tmp_path)
    for name in ("pytest_v_rA.log", "jest_json.log", "go_json.log", "mocha_spec.log"):
        proc = subprocess.run(
            [python, "-I", str(copy), str(LOGS / name)],
            capture_output=True,
            check=True,
            timeout=60,
            cwd=str(tmp_path),
        )
        assert json.loads(proc.stdout.decode("utf-8")) == parse(name).to_dict()


@pytest.mark.parametrize("path", [PARSERS_PY, *PARSER_PARTS], ids=lambda p: p.stem)
def test_file_is_self_contained(path: Path) -> None:
    """Standard-library imports only (but for each other: the _log_*.py modules shipped beside
    parsers.py, or in the package), and Python 3.8 syntax."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, feature_version=(3, 8))
    imported = set()
    shipped = {part.stem for part in PARSER_PARTS}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0
            module = node.module or ""
            sibling = module.removeprefix("repogym.shipped.parsers.")
            if sibling in shipped and module in (sibling, f"repogym.shipped.parsers.{sibling}"):
                continue
            imported.add(module.split(".")[0])
    # os: parsers.py puts its own folder on sys.path to load the modules beside it
    # xml: the Surefire reports (ElementTree, never on a document with a DOCTYPE)
    assert imported <= {"argparse", "json", "os", "re", "sys", "typing", "xml"}
    assert "from __future__" not in source


def test_cli_missing_file(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(PARSERS_PY), str(tmp_path / "nope.log")],
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert b"cannot read" in proc.stderr


def test_every_module_of_the_package_is_shipped() -> None:
    """Tasks get parsers.py and the modules PARSER_PARTS names: that must be all of them."""
    assert {f"_log_{part}" for part in parsers.PARSER_PARTS} == {p.stem for p in PARSER_PARTS}
