"""Machine-readable test reports: the pytest plugin, the unittest wrapper and the reader.

Every runner test is a real run in a subprocess on a small project built in tmp_path; the
report must name exactly the ids and outcomes that ``parsers.parse_log`` reads from the same
run's output.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import repogym.shipped
from repogym.shipped import parsers
from repogym.shipped.reports import (
    ERROR,
    FAILED,
    PASSED,
    SKIPPED,
    parse_report,
    read_report,
)

TEMPLATES = Path(repogym.shipped.__file__).resolve().parent / "scripts"
WRAPPER = TEMPLATES / "repogym_unittest.py"
READER = Path(parsers.__file__).resolve().parent.parent / "reports.py"
PYENV = Path("/root/.pyenv/versions")
OLD_PYTHONS = {"3.6": PYENV / "3.6.15/bin/python", "3.13": PYENV / "3.13.0/bin/python"}
PYTEST_BASE = ["-m", "pytest", "-rA", "--tb=short", "-p", "no:cacheprovider"]
PLUGIN = ["-p", "repogym_pytest_report"]


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def run_env(report: Path | str | None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("REPOGYM_REPORT", "PYTEST_ADDOPTS", "PYTHONPATH", "PYTHONSAFEPATH")
    }
    env.update(
        PYTHONPATH=str(TEMPLATES),
        PYTHONDONTWRITEBYTECODE="1",  # nothing written beside the templates
        PYTHONIOENCODING="utf-8",
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
        PY_COLORS="0",
        COLUMNS="100",
    )
    if report is not None:
        env["REPOGYM_REPORT"] = str(report)
    return env


def run(
    cmd: list[str], cwd: Path, report: Path | str | None, timeout: int = 120
) -> subprocess.CompletedProcess:
    return subprocess.run(
        cmd,
        cwd=str(cwd),
        env=run_env(report),
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
        timeout=timeout,
    )


def run_pytest(
    project: Path,
    *args: str,
    report: Path | None = None,
    plugin: bool = True,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess:
    cmd = [sys.executable, *PYTEST_BASE, *(PLUGIN if plugin else []), *args]
    return run(cmd, cwd or project, report)


# --------------------------------------------------------------------------------------------
# pytest

PYTEST_PROJECT = {
    "pytest.ini": "[pytest]\n",
    "conftest.py": (
        "import os\n"
        "SEEN_AT_CONFTEST_IMPORT = os.environ.get('REPOGYM_REPORT')\n"
        "\n"
        "def pytest_configure(config):\n"
        "    config.repogym_seen = os.environ.get('REPOGYM_REPORT')\n"
    ),
    "tests/__init__.py": "",
    "tests/sub/__init__.py": "",
    "tests/sub/test_deep.py": "def test_deep():\n    pass\n",
    "tests/test_broken.py": "import nonexistent_module_for_repogym_tests  # noqa\n",
    "tests/test_main.py": """\
import os
import sys
import unittest

import pytest

import conftest


def test_pass():
    assert True


def test_fail():
    assert 1 == 2


@pytest.fixture
def broken():
    raise RuntimeError("setup boom")


def test_setup_error(broken):
    pass


@pytest.fixture
def bad_teardown():
    yield
    raise RuntimeError("teardown boom")


def test_teardown_error(bad_teardown):
    pass


def test_fail_and_teardown_error(bad_teardown):
    assert False


def test_skip():
    pytest.skip("not today")


@pytest.mark.skip(reason="marked skip")
def test_skip_mark():
    pass


@pytest.mark.skipif(sys.version_info > (2,), reason="skipif reason")
def test_skipif():
    pass


@pytest.mark.xfail(reason="known bug")
def test_xfail():
    assert False


@pytest.mark.xfail(reason="maybe")
def test_xpass():
    pass


@pytest.mark.xfail(strict=True, reason="strict")
def test_xpass_strict():
    pass


@pytest.mark.parametrize("v", ["a b", "x[1]", "\\u00fcn\\u00ef", "[ ]", "a - b", "q::r"])
def test_param(v):
    assert v != "x[1]"


class TestClass:
    def test_method(self):
        pass

    def test_method_fail(self):
        assert 0


class TestCaseStyle(unittest.TestCase):
    def test_ok(self):
        pass

    def test_fail(self):
        self.assertEqual(1, 2)

    @unittest.skip("unittest skip")
    def test_skip(self):
        pass

    @unittest.expectedFailure
    def test_xfail(self):
        self.assertEqual(1, 2)

    @unittest.expectedFailure
    def test_xpass(self):
        pass


def test_env(request):
    assert "REPOGYM_REPORT" not in os.environ
    assert conftest.SEEN_AT_CONFTEST_IMPORT is None
    assert request.config.repogym_seen is None


def test_prints_fake_results():
    print("tests/test_main.py::test_fail PASSED")
    print("PASSED tests/test_main.py::test_fail")
""",
}

M = "tests/test_main.py::"
PYTEST_EXPECTED = {
    "tests/test_broken.py": ERROR,
    "tests/sub/test_deep.py::test_deep": PASSED,
    M + "test_pass": PASSED,
    M + "test_fail": FAILED,
    M + "test_setup_error": ERROR,
    M + "test_teardown_error": ERROR,
    M + "test_fail_and_teardown_error": FAILED,
    M + "test_skip": SKIPPED,
    M + "test_skip_mark": SKIPPED,
    M + "test_skipif": SKIPPED,
    M + "test_xfail": PASSED,
    M + "test_xpass": PASSED,
    M + "test_xpass_strict": FAILED,
    M + "test_param[a b]": PASSED,
    M + "test_param[x[1]]": FAILED,
    M + "test_param[\\xfcn\\xef]": PASSED,
    M + "test_param[[ ]]": PASSED,
    M + "test_param[a - b]": PASSED,
    M + "test_param[q::r]": PASSED,
    M + "TestClass::test_method": PASSED,
    M + "TestClass::test_method_fail": FAILED,
    M + "TestCaseStyle::test_ok": PASSED,
    M + "TestCaseStyle::test_fail": FAILED,
    M + "TestCaseStyle::test_skip": SKIPPED,
    M + "TestCaseStyle::test_xfail": PASSED,
    M + "TestCaseStyle::test_xpass": FAILED,
    M + "test_env": PASSED,
    M + "test_prints_fake_results": PASSED,
}
PYTEST_SKIPS = {
    M + "test_skip": "not today",
    M + "test_skip_mark": "marked skip",
    M + "test_skipif": "skipif reason",
    M + "TestCaseStyle::test_skip": "unittest skip",
}
PYTEST_ITEMS = len(PYTEST_EXPECTED) - 1  # every test but the module that fails to import


@pytest.fixture
def pytest_project(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "proj", PYTEST_PROJECT)


def test_pytest_report_matches_the_parsed_log(pytest_project: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.jsonl"
    proc = run_pytest(pytest_project, "-v", "--continue-on-collection-errors", report=report)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = read_report(report)
    assert result["tests"] == parsers.parse_log(proc.stdout, "pytest").tests
    assert result["tests"] == PYTEST_EXPECTED
    assert result["skips"] == PYTEST_SKIPS
    assert result["runner"] == "pytest"
    assert result["collected"] == PYTEST_ITEMS
    assert f"collected {PYTEST_ITEMS} items / 1 error" in proc.stdout
    assert result["finished"] is True and result["exitstatus"] == 1
    assert result["problems"] == []

    records = [json.loads(line) for line in report.read_text().splitlines()]
    assert records[0] == {
        "runner": "pytest",
        "version": pytest.__version__,
        "pid": records[0]["pid"],
        "parallel": False,
        "reruns": False,
    }
    assert records[-1] == {"finished": True, "exitstatus": 1}
    ids = [r["id"] for r in records if "id" in r]
    assert len(ids) == len(set(ids)) == len(PYTEST_EXPECTED)  # once per test
    # The collection names every test the run will report, in the order it runs them.
    [collected] = [r for r in records if "collected" in r]
    assert collected["collected"] == len(collected["ids"]) == PYTEST_ITEMS
    ran = [i for i in ids if i in collected["ids"]]
    assert ran == [i for i in collected["ids"] if i in ran]
    for r in records:
        if "id" in r:
            assert ("reason" in r) == (r["status"] == SKIPPED)


def test_pytest_report_without_verbose_also_names_skips(
    pytest_project: Path, tmp_path: Path
) -> None:
    """``-rA`` alone names no skipped test; the report does."""
    report = tmp_path / "report.jsonl"
    proc = run_pytest(pytest_project, "--continue-on-collection-errors", report=report)
    parsed = parsers.parse_log(proc.stdout, "pytest").tests
    result = read_report(report)
    assert SKIPPED not in parsed.values()
    assert {k: v for k, v in result["tests"].items() if v != SKIPPED} == parsed
    assert result["tests"] == PYTEST_EXPECTED


def test_pytest_collection_error_stops_the_run(pytest_project: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.jsonl"
    proc = run_pytest(pytest_project, "-v", report=report)
    assert proc.returncode == 2, proc.stdout
    result = read_report(report)
    assert result["tests"] == parsers.parse_log(proc.stdout, "pytest").tests
    assert result["tests"] == {"tests/test_broken.py": ERROR}
    assert result["finished"] is True and result["exitstatus"] == 2
    assert result["collected"] == PYTEST_ITEMS


def test_pytest_selected_tests_and_ids_relative_to_cwd(
    pytest_project: Path, tmp_path: Path
) -> None:
    """Run from a subfolder: pytest prints node ids relative to it, and so does the report."""
    report = tmp_path / "report.jsonl"
    proc = run_pytest(
        pytest_project,
        "-v",
        "test_main.py::TestClass",
        "test_main.py::test_param",
        "sub",
        report=report,
        cwd=pytest_project / "tests",
    )
    assert proc.returncode == 1, proc.stdout
    result = read_report(report)
    parsed = parsers.parse_log(proc.stdout, "pytest").tests
    assert result["tests"] == parsed
    assert "test_main.py::TestClass::test_method" in parsed
    assert "sub/test_deep.py::test_deep" in parsed
    assert result["collected"] == len(parsed) == 9


def test_pytest_os_exit_leaves_an_unfinished_report(tmp_path: Path) -> None:
    project = write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\n",
            "test_exit.py": (
                "import os\n\n"
                "def test_a():\n    pass\n\n"
                "def test_b():\n    assert 0\n\n"
                "def test_c():\n    os._exit(0)\n\n"
                "def test_d():\n    pass\n"
            ),
        },
    )
    report = tmp_path / "report.jsonl"
    proc = run_pytest(project, "-v", report=report)
    assert proc.returncode == 0  # what os._exit said: exit codes alone cannot be trusted
    result = read_report(report)
    assert result["finished"] is False and result["exitstatus"] is None
    assert result["tests"] == {"test_exit.py::test_a": PASSED, "test_exit.py::test_b": FAILED}
    assert result["collected"] == 4
    assert result["problems"] == []


def test_pytest_forged_output_does_not_change_the_report(tmp_path: Path) -> None:
    """Fake result lines on stdout (during the run and after it) are not report records."""
    project = write_tree(
        tmp_path / "proj",
        {
            "pytest.ini": "[pytest]\n",
            "test_x.py": (
                "import atexit, sys\n\n"
                "FAKE = '\\n'.join([\n"
                "    'test_x.py::test_fail PASSED',\n"
                "    '=' * 20 + ' short test summary info ' + '=' * 20,\n"
                "    'PASSED test_x.py::test_fail',\n"
                "    'PASSED test_x.py::test_pass',\n"
                "    '=' * 20 + ' 2 passed in 0.01s ' + '=' * 20,\n"
                "])\n"
                "atexit.register(lambda: sys.__stdout__.write(FAKE + '\\n'))\n\n"
                "def test_pass():\n    print(FAKE)\n\n"
                "def test_fail():\n    print(FAKE)\n    assert 0\n"
            ),
        },
    )
    report = tmp_path / "report.jsonl"
    proc = run_pytest(project, "-v", "-s", report=report)
    assert proc.returncode == 1
    assert proc.stdout.rstrip().endswith("=" * 20 + " 2 passed in 0.01s " + "=" * 20)
    result = read_report(report)
    assert result["tests"] == {"test_x.py::test_pass": PASSED, "test_x.py::test_fail": FAILED}
    assert result["finished"] is True and result["exitstatus"] == 1


def test_pytest_without_the_variable_writes_nothing(pytest_project: Path, tmp_path: Path) -> None:
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    proc = run_pytest(pytest_project, "-v", "--continue-on-collection-errors", report=None)
    assert proc.returncode == 1
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert parsers.parse_log(proc.stdout, "pytest").tests == PYTEST_EXPECTED  # test_env passed
    proc = run_pytest(pytest_project, "-v", "--continue-on-collection-errors", report="")
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_pytest_unwritable_report_does_not_break_the_run(tmp_path: Path) -> None:
    project = write_tree(tmp_path / "proj", {"test_ok.py": "def test_ok():\n    pass\n"})
    proc = run_pytest(project, report=tmp_path / "missing" / "report.jsonl")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cannot open the report" in proc.stderr
    assert read_report(tmp_path / "missing" / "report.jsonl")["problems"] == ["no report"]


def test_pytest_subtests_mark_the_parent_failed(tmp_path: Path) -> None:
    """A failing subtest fails the run, so its parent is FAILED (pytest >= 9 reports subtests).

    Unlike ``parse_log``: pytest 9 prints a unittest test with failing subtests as ``PASSED`` plus
    ``SUBFAILED(i=1) <id>`` summary lines, which the log parser does not read.
    """
    if int(pytest.__version__.split(".")[0]) < 9:
        pytest.skip("subtests are built into pytest 9")
    project = write_tree(
        tmp_path / "proj",
        {
            "test_sub.py": (
                "import unittest\n\n"
                "class T(unittest.TestCase):\n"
                "    def test_sub(self):\n"
                "        for i in range(3):\n"
                "            with self.subTest(i=i):\n"
                "                self.assertNotEqual(i, 1)\n\n"
                "    def test_sub_ok(self):\n"
                "        for i in range(2):\n"
                "            with self.subTest(i=i):\n"
                "                pass\n\n"
                "def test_fixture(subtests):\n"
                "    for i in range(3):\n"
                "        with subtests.test(i=i):\n"
                "            assert i != 2\n"
            )
        },
    )
    report = tmp_path / "report.jsonl"
    proc = run_pytest(project, "-v", report=report)
    assert proc.returncode == 1
    assert read_report(report)["tests"] == {
        "test_sub.py::T::test_sub": FAILED,
        "test_sub.py::T::test_sub_ok": PASSED,
        "test_sub.py::test_fixture": FAILED,
    }


def test_pytest_xdist_controller_writes_the_report(pytest_project: Path, tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    report = tmp_path / "report.jsonl"
    proc = run(
        [sys.executable, *PYTEST_BASE, "-p", "xdist", *PLUGIN, "-n", "2", "-v"]
        + ["--continue-on-collection-errors"],
        pytest_project,
        report,
    )
    result = read_report(report)
    assert result["tests"] == parsers.parse_log(proc.stdout, "pytest").tests == PYTEST_EXPECTED
    assert result["collected"] == PYTEST_ITEMS and result["finished"] is True
    pids = {json.loads(line).get("pid") for line in report.read_text().splitlines()} - {None}
    assert len(pids) == 1


# --------------------------------------------------------------------------------------------
# failure messages (pytest)

CODE = {
    "pkg/__init__.py": "",
    "pkg/calc.py": (
        "def add(a, b):\n    return a + b\n\n\ndef humanize(days):\n    return '%d days' % days\n"
    ),
    "pkg/util.py": "def other():\n    pass\n",
}
NOISY = "\x1b[31mred\x1b[0m\x07 tab\there " + "x" * 500
FAILURES_PROJECT = {
    **CODE,
    "pytest.ini": "[pytest]\n",
    "tests/__init__.py": "",
    "tests/test_import.py": "from pkg.util import parse\n\n\ndef test_parse():\n    parse('x')\n",
    "tests/test_calc.py": f"""\
import pytest

from pkg import calc
from pkg.calc import humanize


def test_ok():
    assert calc.add(1, 2) == 3


def test_keyword():
    assert humanize(3, tz="UTC") == "3 days ago"


def test_module_attribute():
    assert calc.multiply(2, 3) == 6


def test_compare():
    assert humanize(3) == "3 days ago"


def test_value():
    raise ValueError("bad input\\nsecond line")


def test_noisy():
    raise RuntimeError({NOISY!r})


@pytest.fixture
def broken():
    raise RuntimeError("setup boom")


def test_setup_error(broken):
    pass


@pytest.fixture
def bad_teardown():
    yield
    raise RuntimeError("teardown boom")


def test_fail_and_teardown_error(bad_teardown):
    raise KeyError("call first")
""",
}
C = "tests/test_calc.py::"
PYTEST_FAILURES = {
    "tests/test_import.py": "ImportError: cannot import name 'parse'",  # + " from ..." (3.7+)
    C + "test_keyword": "TypeError: humanize() got an unexpected keyword argument 'tz'",
    C + "test_module_attribute": "AttributeError: module 'pkg.calc' has no attribute 'multiply'",
    C + "test_compare": "AssertionError: assert '3 days' == '3 days ago'",
    C + "test_value": "ValueError: bad input",
    C + "test_noisy": ("RuntimeError: red tab here " + "x" * 500)[:297] + "...",
    C + "test_setup_error": "RuntimeError: setup boom",
    C + "test_fail_and_teardown_error": "KeyError: 'call first'",  # the call, not the teardown
}


def pytest_interpreters() -> list[str]:
    """The venv's pytest, pyenv's 3.11 (another pytest release, when installed), and any
    interpreter named in REPOGYM_TEST_PYTEST_PYTHONS (os.pathsep-separated; e.g. venvs with
    pytest 4.6 / 6.2 / 7.0, to check old releases)."""
    extra = [p for p in os.environ.get("REPOGYM_TEST_PYTEST_PYTHONS", "").split(os.pathsep) if p]
    pythons = [str(PYENV / "3.11.7/bin/python"), *extra]
    return [pytest.param("venv", id="venv")] + [
        pytest.param(p, id=Path(p).parent.parent.name) for p in pythons
    ]


def check_messages(failures: dict[str, str]) -> None:
    """Messages are one clean line of at most 300 characters, with no test source in them."""
    for message in failures.values():
        assert len(message) <= 300 and "\n" not in message
        assert not re.search(r"[\x00-\x1f\x7f]", message), message
        for source in ("where", "humanize(3", "calc.multiply(", "assertEqual", "raise "):
            assert source not in message, message


@pytest.mark.parametrize("python", pytest_interpreters())
def test_pytest_failure_messages(tmp_path: Path, python: str) -> None:
    exe = sys.executable
    if python != "venv":
        exe = python
        probe = subprocess.run([exe, "-c", "import pytest"], capture_output=True)
        if probe.returncode != 0:
            pytest.skip(f"no pytest for {python}")
    project = write_tree(tmp_path / "proj", FAILURES_PROJECT)
    report = tmp_path / "report.jsonl"
    cmd = [exe, *PYTEST_BASE, *PLUGIN, "--continue-on-collection-errors", "-vv"]
    proc = run(cmd, project, report)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = read_report(report)
    assert result["problems"] == []
    failures = result["failures"]
    assert set(failures) == set(PYTEST_FAILURES)
    assert {t for t, s in result["tests"].items() if s in (FAILED, ERROR)} == set(failures)
    for tid, want in PYTEST_FAILURES.items():
        assert failures[tid].startswith(want), (tid, failures[tid])
    assert failures[C + "test_compare"] == PYTEST_FAILURES[C + "test_compare"]
    check_messages(failures)
    if python == "venv":
        # The -rA summary (untrimmed with -vv) and the collection error's traceback in the log
        # give the same messages.
        assert parsers.parse_log(proc.stdout, "pytest").failures == failures


def load_plugin_module(monkeypatch: pytest.MonkeyPatch):
    """The plugin module itself (without REPOGYM_REPORT it opens nothing)."""
    import importlib.util

    monkeypatch.delenv("REPOGYM_REPORT", raising=False)
    monkeypatch.syspath_prepend(str(TEMPLATES))
    spec = importlib.util.spec_from_file_location(
        "repogym_pytest_report_under_test", TEMPLATES / "repogym_pytest_report.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pytest_failure_message_never_reads_rendered_source(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Representations without a crash message (xdist sends them as text) give a message only
    from exception lines or a plain one-line reason, never from quoted source."""
    plugin = load_plugin_module(monkeypatch)

    class Report:
        def __init__(self, longrepr: object) -> None:
            self.longrepr = longrepr

    class Crash:
        def __init__(self, message: str) -> None:
            self.message = message

    class Repr:
        def __init__(self, **attrs: object) -> None:
            self.__dict__.update(attrs)

    def message(longrepr: object) -> str | None:
        return plugin.failure_message(Report(longrepr))

    crash = "assert '3 days' == '3 days ago'\n +  where '3 days' = humanize(3)"
    assert (
        message(Repr(reprcrash=Crash(crash))) == "AssertionError: assert '3 days' == '3 days ago'"
    )
    assert message(Repr(reprcrash=Crash("\x1b[1mKeyError\x1b[0m: 'k'\nmore"))) == "KeyError: 'k'"
    doctest = (
        "002 \n003     >>> f(secret)\nExpected:\n    2\nGot:\n    1\n\n/w/m.py:3: DocTestFailure"
    )
    assert message(doctest) is None
    fixture = (
        "file /w/test_x.py, line 1\n  def test_x(missing):\nE       fixture 'missing' not found\n"
        ">       available fixtures: cache, capsys\n"
    )
    assert message(fixture) == "fixture 'missing' not found"
    traceback = 'Traceback (most recent call last):\n  File "/w/t.py", line 3\n    secret()\n'
    assert message(traceback) is None
    assert message("[XPASS(strict)] flaky") == "[XPASS(strict)] flaky"
    chained = (
        "ImportError while importing test module '/w/t.py'.\nTraceback:\nt.py:1: in <module>\n"
        "    import a\nE   KeyError: 'first'\n\nDuring handling of the above exception, another "
        "exception occurred:\nt.py:1: in <module>\n    import a\n"
        "E   ImportError: cannot import name 'b'\nE   second line\n"
    )
    assert message(chained) == "ImportError: cannot import name 'b'"
    assert message(Repr(longrepr=chained)) == "ImportError: cannot import name 'b'"  # pytest >= 7
    assert (
        message(Repr(errorstring="fixture 'x' not found\n available fixtures: a", tblines=["src"]))
        == "FixtureLookupError: fixture 'x' not found"
    )
    assert message(Repr(reprtraceback="def test_x():\n    secret()")) is None
    assert message(None) is None


def test_pytest_failure_message_of_a_failed_subtest(tmp_path: Path) -> None:
    if int(pytest.__version__.split(".")[0]) < 9:
        pytest.skip("subtests are built into pytest 9")
    project = write_tree(
        tmp_path / "proj",
        {
            "test_sub.py": (
                "def test_fixture(subtests):\n"
                "    for i in range(3):\n"
                "        with subtests.test(i=i):\n"
                "            assert i != 2\n"
            )
        },
    )
    report = tmp_path / "report.jsonl"
    run_pytest(project, report=report)
    assert read_report(report)["failures"] == {
        "test_sub.py::test_fixture": "AssertionError: assert 2 != 2"
    }


# --------------------------------------------------------------------------------------------
# unittest

UNITTEST_PROJECT = {
    "tests/__init__.py": "",
    "tests/sub/__init__.py": "",
    "tests/sub/test_deep.py": (
        "import unittest\n\n"
        "class TestDeep(unittest.TestCase):\n"
        "    def test_deep(self):\n        pass\n"
    ),
    "tests/test_broken_import.py": "import nonexistent_module_for_repogym_tests  # noqa\n",
    "tests/test_modfix.py": (
        "import unittest\n\n"
        "def setUpModule():\n    raise RuntimeError('setUpModule boom')\n\n"
        "class TestM(unittest.TestCase):\n"
        "    def test_m(self):\n        pass\n"
    ),
    "tests/test_things.py": '''\
import io
import os
import unittest


class TestThings(unittest.TestCase):
    def test_ok(self):
        pass

    def test_doc(self):
        """A docstring, shown by -v."""

    def test_fail(self):
        self.assertEqual(1, 2)

    def test_error(self):
        raise RuntimeError("boom")

    @unittest.skip("not today")
    def test_skip(self):
        pass

    @unittest.skipIf(True, "skipif reason \\u00fcn\\u00ef")
    def test_skipif(self):
        pass

    @unittest.expectedFailure
    def test_xfail(self):
        self.assertEqual(1, 2)

    @unittest.expectedFailure
    def test_xpass(self):
        pass

    def test_subtests(self):
        for i in range(3):
            with self.subTest(i=i):
                self.assertNotEqual(i, 1)

    def test_subtest_error(self):
        for i in range(2):
            with self.subTest(i=i):
                if i:
                    raise ValueError(i)

    def test_prints_fake_results(self):
        print("test_fail (tests.test_things.TestThings) ... ok")
        print("test_fail (tests.test_things.TestThings.test_fail) ... ok")

    def test_env(self):
        self.assertNotIn("REPOGYM_REPORT", os.environ)

    def test_nested_run_is_not_recorded(self):
        class Inner(unittest.TestCase):
            def test_inner_fails(self):
                self.fail("inner")

        suite = unittest.defaultTestLoader.loadTestsFromTestCase(Inner)
        inner = unittest.TextTestRunner(stream=io.StringIO()).run(suite)
        self.assertEqual(len(inner.failures), 1)


class TestSetupClassFails(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        raise RuntimeError("setUpClass boom")

    def test_never(self):
        pass


class TestTearDownClassFails(unittest.TestCase):
    @classmethod
    def tearDownClass(cls):
        raise RuntimeError("tearDownClass boom")

    def test_fine(self):
        pass
''',
}

T = "tests.test_things.TestThings."
UNITTEST_EXPECTED = {
    "tests.sub.test_deep.TestDeep.test_deep": PASSED,
    "tests.test_broken_import": ERROR,
    "tests.test_modfix": ERROR,
    "tests.test_things.TestSetupClassFails": ERROR,
    "tests.test_things.TestTearDownClassFails": ERROR,
    "tests.test_things.TestTearDownClassFails.test_fine": PASSED,
    T + "test_ok": PASSED,
    T + "test_doc": PASSED,
    T + "test_fail": FAILED,
    T + "test_error": ERROR,
    T + "test_skip": SKIPPED,
    T + "test_skipif": SKIPPED,
    T + "test_xfail": PASSED,
    T + "test_xpass": FAILED,
    T + "test_subtests": FAILED,
    T + "test_subtest_error": ERROR,
    T + "test_prints_fake_results": PASSED,
    T + "test_env": PASSED,
    T + "test_nested_run_is_not_recorded": PASSED,
}
UNITTEST_SKIPS = {T + "test_skip": "not today", T + "test_skipif": "skipif reason ünï"}
UNITTEST_FAILURES = {
    "tests.test_broken_import": (
        "ModuleNotFoundError: No module named 'nonexistent_module_for_repogym_tests'"
    ),
    "tests.test_modfix": "RuntimeError: setUpModule boom",
    "tests.test_things.TestSetupClassFails": "RuntimeError: setUpClass boom",
    "tests.test_things.TestTearDownClassFails": "RuntimeError: tearDownClass boom",
    T + "test_fail": "AssertionError: 1 != 2",
    T + "test_error": "RuntimeError: boom",
    T + "test_subtests": "AssertionError: 1 == 1",
    T + "test_subtest_error": "ValueError: 1",
    # test_xpass (an unexpected success) is FAILED with no exception: no message
}
UNITTEST_MODES = {
    "discover": ["discover", "-v", "-s", "tests", "-t", ".", "-p", "test_*.py"],
    "names": [
        "-v",
        "tests.test_things",
        "tests.sub.test_deep",
        "tests.test_broken_import",
        "tests.test_modfix",
    ],
}
# setUpClass/setUpModule failures skip their tests; an import failure counts as one test
UNITTEST_COLLECTED = len(UNITTEST_EXPECTED) - 3 + 2


def interpreter(name: str) -> str:
    if name == "venv":
        return sys.executable
    path = OLD_PYTHONS[name]
    if not path.exists():
        pytest.skip(f"no Python {name} at {path}")
    return str(path)


def normalise(stderr: str) -> str:
    return re.sub(r"^(Ran \d+ tests? in )\d+(?:\.\d+)?s$", r"\1Xs", stderr, flags=re.M)


@pytest.fixture
def unittest_project(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "proj", UNITTEST_PROJECT)


@pytest.mark.parametrize("mode", sorted(UNITTEST_MODES))
@pytest.mark.parametrize("python", ["venv", "3.6", "3.13"])
def test_unittest_report_matches_the_parsed_log(
    unittest_project: Path, tmp_path: Path, python: str, mode: str
) -> None:
    exe = interpreter(python)
    args = UNITTEST_MODES[mode]
    report = tmp_path / "report.jsonl"
    wrapped = run([exe, str(WRAPPER), *args], unittest_project, report)
    plain = run([exe, "-m", "unittest", *args], unittest_project, None)
    assert wrapped.returncode == plain.returncode == 1
    assert wrapped.stdout == plain.stdout
    assert normalise(wrapped.stderr) == normalise(plain.stderr)

    result = read_report(report)
    assert result["tests"] == parsers.parse_log(wrapped.stdout + wrapped.stderr, "unittest").tests
    expected = dict(UNITTEST_EXPECTED)
    failures = dict(UNITTEST_FAILURES)
    if mode == "names":  # unittest names the part of the dotted name it failed to import
        expected["test_broken_import"] = expected.pop("tests.test_broken_import")
        failures["test_broken_import"] = failures.pop("tests.test_broken_import")
    assert result["tests"] == expected
    assert result["skips"] == UNITTEST_SKIPS
    assert result["failures"] == failures
    assert result["runner"] == "unittest"
    assert result["collected"] == UNITTEST_COLLECTED
    assert result["finished"] is True and result["exitstatus"] == 1
    assert result["problems"] == []
    header = json.loads(report.read_text().splitlines()[0])
    version = subprocess.run(
        [exe, "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert header["version"] == version


@pytest.mark.parametrize(
    "args",
    [
        ["--no-such-option"],
        ["-h"],
        ["discover", "-s", "tests/sub", "-p", "nomatch_*.py"],
        ["tests.sub.test_deep"],
    ],
    ids=["usage-error", "help", "no-tests", "quiet"],
)
def test_unittest_exit_codes_and_output_are_unchanged(
    unittest_project: Path, tmp_path: Path, args: list[str]
) -> None:
    report = tmp_path / "report.jsonl"
    wrapped = run([sys.executable, str(WRAPPER), *args], unittest_project, report)
    plain = run([sys.executable, "-m", "unittest", *args], unittest_project, None)
    assert wrapped.returncode == plain.returncode
    assert wrapped.stdout == plain.stdout
    assert normalise(wrapped.stderr) == normalise(plain.stderr)
    result = read_report(report)
    assert result["finished"] is True and result["exitstatus"] == plain.returncode
    assert result["problems"] == []


def test_unittest_os_exit_leaves_an_unfinished_report(tmp_path: Path) -> None:
    project = write_tree(
        tmp_path / "proj",
        {
            "test_exit.py": (
                "import os, unittest\n\n"
                "class T(unittest.TestCase):\n"
                "    def test_a(self):\n        pass\n\n"
                "    def test_b(self):\n        self.fail('no')\n\n"
                "    def test_c(self):\n        os._exit(0)\n\n"
                "    def test_d(self):\n        pass\n"
            )
        },
    )
    report = tmp_path / "report.jsonl"
    proc = run([sys.executable, str(WRAPPER), "-v", "test_exit"], project, report)
    assert proc.returncode == 0
    result = read_report(report)
    assert result["finished"] is False and result["exitstatus"] is None
    assert result["tests"] == {"test_exit.T.test_a": PASSED, "test_exit.T.test_b": FAILED}
    assert result["collected"] == 4


def test_unittest_without_the_variable_writes_nothing(
    unittest_project: Path, tmp_path: Path
) -> None:
    before = sorted(
        p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "__pycache__" not in str(p)
    )
    args = UNITTEST_MODES["discover"]
    wrapped = run([sys.executable, str(WRAPPER), *args], unittest_project, None)
    plain = run([sys.executable, "-m", "unittest", *args], unittest_project, None)
    assert wrapped.returncode == plain.returncode == 1
    assert wrapped.stdout == plain.stdout
    assert normalise(wrapped.stderr) == normalise(plain.stderr)
    after = sorted(
        p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "__pycache__" not in str(p)
    )
    assert after == before


UNITTEST_FAILURES_PROJECT = {
    **CODE,
    "tests/__init__.py": "",
    "tests/test_import.py": "import unittest\n\nfrom pkg.util import parse\n",
    "tests/test_calc.py": f"""\
import unittest

from pkg import calc
from pkg.calc import humanize


class Error(Exception):
    pass


class TestCalc(unittest.TestCase):
    def test_ok(self):
        self.assertEqual(calc.add(1, 2), 3)

    def test_keyword(self):
        self.assertEqual(humanize(3, tz="UTC"), "3 days ago")

    def test_module_attribute(self):
        self.assertEqual(calc.multiply(2, 3), 6)

    def test_equal(self):
        self.assertEqual(humanize(3), "3 days ago")

    def test_value(self):
        raise ValueError("bad input\\nsecond line")

    def test_noisy(self):
        raise Error({NOISY!r})
""",
}
U = "tests.test_calc.TestCalc."
UNITTEST_MESSAGES = {
    "tests.test_import": "ImportError: cannot import name 'parse'",  # + " from ..." (3.7+)
    U + "test_keyword": "TypeError: humanize() got an unexpected keyword argument 'tz'",
    U + "test_module_attribute": "AttributeError: module 'pkg.calc' has no attribute 'multiply'",
    U + "test_equal": "AssertionError: '3 days' != '3 days ago'",
    U + "test_value": "ValueError: bad input",
    # a user-defined exception is named with its module, as tracebacks print it
    U + "test_noisy": ("tests.test_calc.Error: red tab here " + "x" * 500)[:297] + "...",
}


@pytest.mark.parametrize("python", ["venv", "3.6", "3.13"])
def test_unittest_failure_messages(tmp_path: Path, python: str) -> None:
    exe = interpreter(python)
    project = write_tree(tmp_path / "proj", UNITTEST_FAILURES_PROJECT)
    report = tmp_path / "report.jsonl"
    proc = run([exe, str(WRAPPER), "discover", "-s", "tests", "-t", "."], project, report)
    assert proc.returncode == 1, proc.stderr
    result = read_report(report)
    assert result["problems"] == []
    failures = result["failures"]
    assert set(failures) == set(UNITTEST_MESSAGES)
    for tid, want in UNITTEST_MESSAGES.items():
        assert failures[tid].startswith(want), (tid, failures[tid])
    assert failures[U + "test_equal"] == UNITTEST_MESSAGES[U + "test_equal"]
    check_messages(failures)


# --------------------------------------------------------------------------------------------
# reader


def lines(*records: object) -> bytes:
    return b"".join(
        (r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in records
    )


HEADER = {"runner": "pytest", "version": "9.0", "pid": 1}
FINISHED = {"finished": True, "exitstatus": 0}


def test_reader_missing_file(tmp_path: Path) -> None:
    assert read_report(tmp_path / "nope.jsonl") == {
        "tests": {},
        "skips": {},
        "failures": {},
        "collected": None,
        "finished": False,
        "exitstatus": None,
        "runner": None,
        "problems": ["no report"],
    }


def test_reader_complete_report(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(
        lines(
            HEADER,
            {"collected": 3},
            {"id": "t.py::a", "status": "PASSED"},
            {"id": "t.py::b[ü]", "status": "SKIPPED", "reason": "why ü"},
            {"id": "t.py::c", "status": "FAILED", "message": "ValueError: bad ü"},
            {"finished": True, "exitstatus": 1},
        )
    )
    assert read_report(str(path)) == {
        "tests": {"t.py::a": PASSED, "t.py::b[ü]": SKIPPED, "t.py::c": FAILED},
        "skips": {"t.py::b[ü]": "why ü"},
        "failures": {"t.py::c": "ValueError: bad ü"},
        "collected": 3,
        "finished": True,
        "exitstatus": 1,
        "runner": "pytest",
        "problems": [],
    }


def test_reader_malformed_lines_are_skipped_and_noted() -> None:
    result = parse_report(
        lines(
            HEADER,
            b"{not json",
            b"[1, 2]",
            b"\xff\xfe",
            {"id": "a", "status": "GREAT"},
            {"id": 3, "status": "PASSED"},
            {"what": "ever"},
            {"collected": -1},
            {"finished": "yes"},
            {"id": "b", "status": "PASSED"},
            FINISHED,
        )
    )
    assert result["tests"] == {"b": PASSED}
    assert result["finished"] is True and result["exitstatus"] == 0
    assert result["collected"] is None
    assert [p.split(":")[0] for p in result["problems"]] == [f"line {n}" for n in range(2, 10)]


def test_reader_partial_last_line_is_ignored() -> None:
    data = lines(HEADER, {"id": "a", "status": "PASSED"}) + b'{"id": "b", "sta'
    result = parse_report(data)
    assert result["tests"] == {"a": PASSED}
    assert result["finished"] is False
    assert result["problems"] == ["line 3: partial last line (no newline), ignored"]
    # a complete record without its newline is still cut short: the writer always ends lines
    result = parse_report(lines(HEADER) + json.dumps(FINISHED).encode())
    assert result["finished"] is False and len(result["problems"]) == 1


def test_reader_ignores_records_after_finished() -> None:
    result = parse_report(
        lines(
            HEADER,
            {"id": "a", "status": "FAILED"},
            FINISHED,
            {"id": "a", "status": "PASSED"},
            {"id": "z", "status": "PASSED"},
            HEADER,
        )
        + b"tail"
    )
    assert result["tests"] == {"a": FAILED}
    assert result["exitstatus"] == 0
    assert result["problems"] == ["4 line(s) after the finished record ignored"]


def test_reader_merges_an_id_to_the_worst() -> None:
    result = parse_report(
        lines(
            HEADER,
            {"id": "a", "status": "FAILED"},
            {"id": "a", "status": "PASSED"},
            {"id": "b", "status": "SKIPPED", "reason": "r"},
            {"id": "b", "status": "ERROR"},
            {"id": "c", "status": "SKIPPED"},
            {"id": "d", "status": "PASSED"},
            {"id": "d", "status": "SKIPPED", "reason": "late"},
            FINISHED,
        )
    )
    assert result["tests"] == {"a": FAILED, "b": ERROR, "c": SKIPPED, "d": PASSED}
    assert result["skips"] == {"c": ""}
    assert result["problems"] == []


def test_reader_failure_messages_follow_the_worst_record() -> None:
    result = parse_report(
        lines(
            HEADER,
            {"id": "a", "status": "FAILED", "message": "AssertionError: assert 1 == 2"},
            {"id": "a", "status": "ERROR", "message": "RuntimeError: teardown"},
            {"id": "b", "status": "ERROR", "message": "RuntimeError: setup"},
            {"id": "b", "status": "FAILED"},  # worse, without a message: b has none
            {"id": "c", "status": "FAILED"},
            {"id": "c", "status": "FAILED", "message": "KeyError: 'k'"},
            {"id": "c", "status": "FAILED", "message": "KeyError: 'later'"},
            {"id": "d", "status": "PASSED", "message": "not a failure"},
            {"id": "e", "status": "ERROR", "message": "TypeError: f() missing 1 required"},
            {"id": "e", "status": "PASSED", "message": "ignored"},
            FINISHED,
        )
    )
    assert result["tests"] == {"a": FAILED, "b": FAILED, "c": FAILED, "d": PASSED, "e": ERROR}
    assert result["failures"] == {
        "a": "AssertionError: assert 1 == 2",
        "c": "KeyError: 'k'",
        "e": "TypeError: f() missing 1 required",
    }
    assert result["problems"] == []


def test_reader_failure_messages_are_bounded_and_clean() -> None:
    """A message written by code under test is cut to one clean line of 300 characters, and
    only 2000 of them are kept."""
    many = [{"id": f"t{i}", "status": "FAILED", "message": f"E{i}"} for i in range(2100)]
    result = parse_report(
        lines(
            HEADER,
            {"id": "ansi", "status": "FAILED", "message": "\x1b[31mValueError\x1b[0m: \x07bad\tin"},
            {"id": "long", "status": "FAILED", "message": "\n\nX: " + "y" * 5000 + "\nsecond"},
            {"id": "blank", "status": "FAILED", "message": " \x1b[0m\n"},
            {"id": "typed", "status": "ERROR", "message": ["not", "a", "string"]},
            *many,
            FINISHED,
        )
    )
    failures = result["failures"]
    assert failures["ansi"] == "ValueError: bad in"
    assert failures["long"] == "X: " + "y" * 294 + "..." and len(failures["long"]) == 300
    assert "blank" not in failures and "typed" not in failures
    assert result["tests"]["blank"] == FAILED and result["tests"]["typed"] == ERROR
    assert len(failures) == 2000
    assert list(failures)[:3] == ["ansi", "long", "t0"]
    assert result["problems"] == [
        "line 4: malformed failure message, ignored",
        "line 5: malformed failure message, ignored",
    ]


def test_reader_header_problems() -> None:
    result = parse_report(lines({"id": "a", "status": "PASSED"}, FINISHED))
    assert result["runner"] is None and result["problems"] == ["no header record"]
    result = parse_report(lines(HEADER, {"runner": "unittest"}, {"collected": 1}, {"collected": 2}))
    assert result["runner"] == "pytest" and result["collected"] == 1
    assert result["problems"] == [
        "line 2: a second header record, ignored",
        "line 4: a second collected record, ignored",
    ]
    result = parse_report(lines({"runner": "jest"}))
    assert result["runner"] is None and result["problems"] == ["line 1: unknown runner 'jest'"]
    assert parse_report(b"")["problems"] == ["empty report"]
    assert parse_report(b"\n\n")["problems"] == ["empty report"]


# --------------------------------------------------------------------------------------------
# old interpreters


@pytest.mark.parametrize("python", ["3.6", "3.13"])
def test_files_compile_and_reader_runs_on_old_pythons(tmp_path: Path, python: str) -> None:
    exe = interpreter(python)
    files = [
        TEMPLATES / "repogym_pytest_report.py",
        TEMPLATES / "repogym_report_file.py",
        WRAPPER,
        READER,
    ]
    code = "import sys\nfor f in sys.argv[1:]:\n    compile(open(f, encoding='utf-8').read(), f, 'exec')\n"
    proc = subprocess.run([exe, "-c", code, *map(str, files)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    path = tmp_path / "r.jsonl"
    path.write_bytes(lines(HEADER, {"id": "a", "status": "PASSED"}, b"junk", FINISHED))
    proc = subprocess.run([exe, str(READER), str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == read_report(path)
