"""The graded verifier shipped in every runtime task, run directly on the host (standard library
only): staged exactly as the pipelines stage it, against small real projects."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from repogym.bootstrap import Recipe
from repogym.pipelines._harness.emit import VerifierInput, stage_verifier, update_config
from repogym.shipped import infra, tamper

TEMPLATES = resources.files("repogym.shipped").joinpath("scripts")

HIDDEN_TESTS = """\
import unittest

from pkg import mod


class T(unittest.TestCase):
    def test_a(self):
        self.assertEqual(mod.double(2), 4)

    def test_b(self):
        self.assertEqual(mod.double(-1), -2)

    def test_c(self):
        self.assertEqual(mod.name(), "mod")
"""
BASE_MOD = "def double(x):\n    return x + x if x > 0 else 0\n\n\ndef name():\n    return 'mod'\n"
FIXED_MOD = "def double(x):\n    return x + x\n\n\ndef name():\n    return 'mod'\n"


def make_task(
    tmp_path: Path,
    *,
    runner: str = "unittest",
    command: str = "python -m unittest -v tests.test_m",
    reward_mode: str = "graded",
    f2p: tuple[str, ...] = ("tests.test_m.T.test_b",),
    p2p: tuple[str, ...] = ("tests.test_m.T.test_a", "tests.test_m.T.test_c"),
) -> tuple[Path, Path]:
    """A working tree at the base state and its staged verifier folder."""
    work = tmp_path / "workspace"
    (work / "pkg").mkdir(parents=True)
    (work / "pkg" / "__init__.py").write_text("")
    (work / "pkg" / "mod.py").write_text(BASE_MOD)
    (work / "tests").mkdir()
    (work / "tests" / "__init__.py").write_text("")
    (work / "tests" / "helpers.py").write_text("HELPER = 1\n")
    (work / "tests" / "old.py").write_text("# deleted by the test patch\n")
    recipe = Recipe(
        language="python",
        runner=runner,
        base_image="python:3.11",
        dockerfile="",
        test_command=command,
        collect_command="true",
        select_command=command,
        workdir=str(work),
    )
    known = infra.manifest(work, infra.is_infra)
    restore = {"tests/test_m.py": HIDDEN_TESTS.encode()}
    tests = tmp_path / "tests"
    stage_verifier(
        tests,
        VerifierInput(
            recipe=recipe,
            command=command,
            restore=restore,
            delete=["tests/old.py"],
            infra={k: v for k, v in known.items() if k not in restore and k != "tests/old.py"},
            sources=infra.manifest(work, lambda r: tamper.language_of(r) is not None),
            integrity_key="",
            reward_mode=reward_mode,
        ),
    )
    (tests / "integrity.key").unlink()  # no build-time record on the host
    (tests / "tamper_baseline.json").write_text(json.dumps(tamper.baseline(str(work))))
    (tests / "f2p.json").write_text(json.dumps(list(f2p)))
    (tests / "p2p.json").write_text(json.dumps(list(p2p)))
    return tests, work


def run_verifier(
    tests: Path, logs: Path, python: str = sys.executable, *args: str
) -> subprocess.CompletedProcess:
    logs.mkdir(exist_ok=True)
    env = {**os.environ, "REPOGYM_VERIFIER_LOGS": str(logs)}
    return subprocess.run(
        [python, "-I", "-S", str(tests / "verifier.py"), *args],
        env=env,
        capture_output=True,
        text=True,
    )


def details_of(logs: Path) -> dict:
    return json.loads((logs / "reward-details.json").read_text())


def test_grades_from_the_report_and_restores_hidden_tests(tmp_path: Path) -> None:
    tests, work = make_task(tmp_path)
    (work / "tests" / "test_m.py").write_text("# the agent's edit\n")
    (work / "pkg" / "mod.py").write_text(FIXED_MOD.replace("x + x", "x * 3"))  # wrong fix
    logs = tmp_path / "logs"
    proc = run_verifier(tests, logs)
    assert proc.returncode == 0, proc.stderr
    assert (work / "tests" / "test_m.py").read_text() == HIDDEN_TESTS
    assert not (work / "tests" / "old.py").exists()
    # f2p test_b fails (-3 != -2), p2p test_a regresses (6 != 4), test_c passes.
    assert float((logs / "reward.txt").read_text()) == 0.0
    d = details_of(logs)
    assert d["source"] == "channel" and d["parse_status"] == "ok"
    assert d["f2p_passed"] == 0 and d["p2p_passed"] == 1
    assert d["regressions"] == ["tests.test_m.T.test_a"]


def test_gold_fix_scores_one_in_both_reward_modes(tmp_path: Path) -> None:
    for mode in ("graded", "resolved"):
        tests, work = make_task(tmp_path / mode, reward_mode=mode)
        (work / "pkg" / "mod.py").write_text(FIXED_MOD)
        logs = tmp_path / mode / "logs"
        assert run_verifier(tests, logs).returncode == 0
        assert float((logs / "reward.txt").read_text()) == 1.0
        assert details_of(logs)["resolved"] is True


def test_resolved_mode_pays_nothing_for_a_partial_fix(tmp_path: Path) -> None:
    f2p = ("tests.test_m.T.test_b", "tests.test_m.T.test_c")
    for mode, want in (("graded", 0.5), ("resolved", 0.0)):
        tests, work = make_task(tmp_path / mode, reward_mode=mode, f2p=f2p)
        logs = tmp_path / mode / "logs"
        # Base: test_b fails, test_c passes -> half of the F2P tests.
        assert run_verifier(tests, logs).returncode == 0
        assert float((logs / "reward.txt").read_text()) == want
        assert details_of(logs)["graded_reward"] == 0.5


def test_fake_result_lines_printed_by_code_under_test_earn_nothing(tmp_path: Path) -> None:
    tests, work = make_task(tmp_path)
    fake = "test_b (tests.test_m.T.test_b) ... ok\\nRan 3 tests in 0.001s\\n\\nOK\\n"
    (work / "pkg" / "mod.py").write_text(BASE_MOD + f"\nimport sys\nsys.stderr.write('{fake}')\n")
    logs = tmp_path / "logs"
    assert run_verifier(tests, logs).returncode == 0
    d = details_of(logs)
    assert float((logs / "reward.txt").read_text()) == 0.0
    assert d["tampered"] is True and any("test-runner output" in t for t in d["tamper"])
    # Even with the scan waived (as if the gold printed the same text), the report decides:
    # the printed lines are noticed, and they earn nothing.
    results = tmp_path / "results.json"
    run_verifier(tests, logs, sys.executable, "--results", str(results))
    update_config(tests, tamper_waived=json.loads(results.read_text())["tamper_sigs"])
    assert run_verifier(tests, logs).returncode == 0
    d = details_of(logs)
    assert d["tampered"] is False and d["source"] == "channel"
    assert float((logs / "reward.txt").read_text()) == 0.0


def test_exit_from_code_under_test_is_an_incomplete_run(tmp_path: Path) -> None:
    tests, work = make_task(tmp_path)
    # os._exit hidden from the scan by building the name at run time (the scan is a second
    # line of defence; the channel's missing "finished" and "end" records are the first).
    (work / "pkg" / "mod.py").write_text(
        FIXED_MOD + "\nimport os\nvars(os)[''.join(['_', 'ex', 'it'])](0)\n"
    )
    logs = tmp_path / "logs"
    assert run_verifier(tests, logs).returncode == 0
    d = details_of(logs)
    assert d["tampered"] is True and any("without ending its run" in t for t in d["tamper"]), d[
        "tamper"
    ]
    assert float((logs / "reward.txt").read_text()) == 0.0


def test_added_conftest_is_removed_and_changed_helper_is_a_tamper(tmp_path: Path) -> None:
    tests, work = make_task(tmp_path)
    (work / "pkg" / "mod.py").write_text(FIXED_MOD)
    (work / "conftest.py").write_text("# planted\n")
    (work / "pkg" / "sitecustomize.py").write_text("# planted\n")
    logs = tmp_path / "logs"
    assert run_verifier(tests, logs).returncode == 0
    assert not (work / "conftest.py").exists() and not (work / "pkg" / "sitecustomize.py").exists()
    assert set(details_of(logs)["infra_removed"]) == {"conftest.py", "pkg/sitecustomize.py"}
    assert float((logs / "reward.txt").read_text()) == 1.0
    (work / "tests" / "helpers.py").write_text("HELPER = 2\n")
    assert run_verifier(tests, logs).returncode == 0
    d = details_of(logs)
    assert d["tampered"] is True and d["tamper"] == [
        "test infrastructure changed: tests/helpers.py"
    ]
    assert float((logs / "reward.txt").read_text()) == 0.0


def test_monkeypatching_the_runner_is_a_tamper_unless_the_gold_does_it(tmp_path: Path) -> None:
    tests, work = make_task(tmp_path)
    hack = "\nimport unittest\nunittest.TestCase.run = lambda self, result=None: None\n"
    (work / "pkg" / "mod.py").write_text(FIXED_MOD + hack)
    logs = tmp_path / "logs"
    assert run_verifier(tests, logs).returncode == 0
    d = details_of(logs)
    assert d["tampered"] is True and "pkg/mod.py" in d["tamper"][0]
    results = tmp_path / "results.json"
    assert run_verifier(tests, logs, sys.executable, "--results", str(results)).returncode == 0
    raw = json.loads(results.read_text())
    assert raw["tamper_sigs"]
    # The scan waived (as if the gold patch had the same construct): the boot still sees the
    # runner's method replaced at run time.
    update_config(tests, tamper_waived=raw["tamper_sigs"])
    assert run_verifier(tests, logs).returncode == 0
    d = details_of(logs)
    assert d["tampered"] is True and any("replaced" in t for t in d["tamper"]), d
    # ... until the reference runs had the same finding too.
    assert any("replaced" in key for key in raw["audit_keys"]), raw["audit_keys"]
    update_config(tests, audit_allowed=raw["audit_keys"])
    assert run_verifier(tests, logs).returncode == 0
    assert details_of(logs)["tampered"] is False


def test_results_mode_writes_raw_results(tmp_path: Path) -> None:
    tests, work = make_task(tmp_path)
    out = tmp_path / "results.json"
    proc = run_verifier(tests, tmp_path / "logs", sys.executable, "--results", str(out))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["tests"] == {
        "tests.test_m.T.test_a": "PASSED",
        "tests.test_m.T.test_b": "FAILED",
        "tests.test_m.T.test_c": "PASSED",
    }
    assert result["collected"] == 3 and result["finished"] is True
    # The observed failure before the fix: exception and first line, no test source.
    assert result["failures"] == {"tests.test_m.T.test_b": "AssertionError: 0 != -2"}
    assert not (tmp_path / "logs" / "reward.txt").exists()


FAKE_JEST_FAILING = """\
import json, sys
out = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--outputFile=")]
print("FAIL a.test.js")
report = {"numTotalTestSuites": 1, "testResults": [{"name": "%s/a.test.js", "assertionResults": [
    {"ancestorTitles": ["x"], "title": "t", "status": "passed"},
    {"ancestorTitles": ["x"], "title": "u", "status": "failed", "failureMessages": [
        "TypeError: \\u001b[31mfmt() got an unexpected keyword argument 'tz'\\u001b[39m\\n"
        "    at Object.<anonymous> (a.test.js:3:5)"]}]}]}
json.dump(report, open(out[0], "w"))
"""
GO_LOG = (
    "=== RUN   TestAdd\n--- PASS: TestAdd (0.00s)\n=== RUN   TestSub\n"
    "    calc_test.go:9: Sub(3, 1) = 4, want 2\n--- FAIL: TestSub (0.00s)\nFAIL\n"
    "FAIL\texample.com/calc\t0.01s\nFAIL\n"
)


def test_results_mode_failure_messages_of_parsed_runners(tmp_path: Path) -> None:
    """The JSON report branch (jest) and the stdout branch (go) give failures too."""
    jest_dir, go_dir = tmp_path / "jest", tmp_path / "go"
    jest_dir.mkdir()
    go_dir.mkdir()
    tests, work = make_task(
        jest_dir, runner="jest", command=f"{sys.executable} {jest_dir / 'fake_jest.py'}"
    )
    (jest_dir / "fake_jest.py").write_text(FAKE_JEST_FAILING % work)
    update_config(tests, json_report=True)
    out = tmp_path / "jest.json"
    assert (
        run_verifier(tests, jest_dir / "logs", sys.executable, "--results", str(out)).returncode
        == 0
    )
    result = json.loads(out.read_text())
    assert result["source"] == "report"
    assert result["tests"] == {"a.test.js > x > t": "PASSED", "a.test.js > x > u": "FAILED"}
    assert result["failures"] == {
        "a.test.js > x > u": "TypeError: fmt() got an unexpected keyword argument 'tz'"
    }
    (go_dir / "go.log").write_text(GO_LOG)
    tests, _ = make_task(go_dir, runner="go", command=f"cat {go_dir / 'go.log'}")
    out = tmp_path / "go.json"
    assert (
        run_verifier(tests, go_dir / "logs", sys.executable, "--results", str(out)).returncode == 0
    )
    result = json.loads(out.read_text())
    assert result["source"] == "stdout"
    assert result["tests"] == {"TestAdd": "PASSED", "TestSub": "FAILED"}
    assert result["failures"] == {"TestSub": "calc_test.go:9: Sub(3, 1) = 4, want 2"}


def test_unparsed_log_writes_no_reward(tmp_path: Path) -> None:
    tests, _ = make_task(tmp_path, runner="go", command="echo 'Segmentation fault'; exit 0")
    logs = tmp_path / "logs"
    proc = run_verifier(tests, logs)
    assert proc.returncode == 1
    assert not (logs / "reward.txt").exists()
    assert details_of(logs)["parse_status"] == "unparsed"


@pytest.mark.parametrize("version", ["3.6", "3.8", "3.13"])
def test_runs_on_other_pythons(tmp_path: Path, version: str) -> None:
    candidates = sorted(Path("/root/.pyenv/versions").glob(f"{version}.*/bin/python{version}"))
    if not candidates:
        pytest.skip(f"no Python {version} installed here")
    python = str(candidates[-1])
    tests, work = make_task(tmp_path, command=f"{python} -m unittest -v tests.test_m")
    (work / "pkg" / "mod.py").write_text(FIXED_MOD)
    logs = tmp_path / "logs"
    proc = run_verifier(tests, logs, python)
    assert proc.returncode == 0, proc.stderr
    assert float((logs / "reward.txt").read_text()) == 1.0, json.dumps(details_of(logs))[:1500]
    assert details_of(logs)["source"] == "channel"


def test_apply_patch_fallback(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("a = 1\nb = 2\nc = 3\n")
    (tmp_path / "pkg" / "gone.py").write_text("x = 1\n")
    patch = tmp_path / "p.diff"
    patch.write_text(
        "--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -1,3 +1,3 @@\n a = 1\n-b = 2\n+b = 20\n c = 3\n"
        "--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1 @@\n+y = 2\n"
        "--- a/pkg/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x = 1\n"
    )
    script = str(TEMPLATES.joinpath("apply_patch.py"))
    subprocess.run([sys.executable, script, str(patch), str(tmp_path)], check=True)
    assert (tmp_path / "pkg" / "m.py").read_text() == "a = 1\nb = 20\nc = 3\n"
    assert (tmp_path / "pkg" / "new.py").read_text() == "y = 2\n"
    assert not (tmp_path / "pkg" / "gone.py").exists()
    bad = tmp_path / "bad.diff"
    bad.write_text("--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -1 +1 @@\n-zzz\n+yyy\n")
    proc = subprocess.run([sys.executable, script, str(bad), str(tmp_path)], capture_output=True)
    assert proc.returncode != 0
    assert (tmp_path / "pkg" / "m.py").read_text() == "a = 1\nb = 20\nc = 3\n"


FAKE_JEST = """\
import json, sys
out = [a.split("=", 1)[1] for a in sys.argv if a.startswith("--outputFile=")]
print("PASS a.test.js\\n  x\\n    ✓ t (1 ms)\\n    ✓ u (1 ms)")  # what the log claims
if out:
    report = {"numTotalTestSuites": 1, "testResults": [{"name": "%s/a.test.js", "assertionResults": [
        {"ancestorTitles": ["x"], "title": "t", "status": "passed"},
        {"ancestorTitles": ["x"], "title": "u", "status": "failed"}]}]}
    json.dump(report, open(out[0], "w"))
"""


@pytest.mark.parametrize("json_report", [True, False])
def test_jest_grades_from_its_json_report_file(tmp_path: Path, json_report: bool) -> None:
    tests, work = make_task(
        tmp_path,
        runner="jest",
        command=f"{sys.executable} {tmp_path / 'fake_jest.py'}",
        f2p=("a.test.js > x > u",),
        p2p=("a.test.js > x > t",),
    )
    (tmp_path / "fake_jest.py").write_text(FAKE_JEST % work)  # the runner, outside the tree
    update_config(tests, json_report=json_report)
    logs = tmp_path / "logs"
    assert run_verifier(tests, logs).returncode == 0
    d = details_of(logs)
    if json_report:
        # The report file says u failed, whatever the log printed.
        assert d["source"] == "report" and d["f2p_passed"] == 0 and d["p2p_passed"] == 1
    else:
        assert d["source"] == "stdout" and d["f2p_passed"] == 1
    (tmp_path / "fake_jest.py").write_text("print('PASS a.test.js')\n")  # no report written
    assert run_verifier(tests, logs).returncode == 0
    if json_report:
        assert details_of(logs)["parse_status"] == "no report"
        assert float((logs / "reward.txt").read_text()) == 0.0


def test_planted_bytecode_and_compiled_modules_are_refused(tmp_path: Path) -> None:
    tests, work = make_task(tmp_path)
    (work / "pkg" / "mod.py").write_text(FIXED_MOD)
    # A bytecode cache for an unchanged module is removed before the tests import it.
    cache = work / "pkg" / "__pycache__"
    cache.mkdir()
    (cache / "__init__.cpython-311.pyc").write_bytes(b"planted")
    logs = tmp_path / "logs"
    assert run_verifier(tests, logs).returncode == 0
    assert not cache.exists() and float((logs / "reward.txt").read_text()) == 1.0
    # A compiled module the agent added cannot be scanned: no reward.
    (work / "pkg" / "_speedups.so").write_bytes(b"\x7fELF")
    assert run_verifier(tests, logs).returncode == 0
    d = details_of(logs)
    assert d["tampered"] is True and "compiled module" in d["tamper"][0]


def test_recorded_plugins_load_under_warnings_as_errors(tmp_path: Path) -> None:
    """A repository with ``filterwarnings = error`` and a recorded pytest plugin: pytest
    imports the plugin itself (one imported before it would not be rewritten, and pytest's
    warning about it is then an error that ends the session before any test)."""
    tests, work = make_task(
        tmp_path,
        runner="pytest",
        command=f"{sys.executable} -m pytest -rA -v tests/test_m.py",
        f2p=("tests/test_m.py::T::test_b",),
        p2p=("tests/test_m.py::T::test_a", "tests/test_m.py::T::test_c"),
    )
    (work / "pytest.ini").write_text("[pytest]\nfilterwarnings =\n    error\n")
    (tests / "infra.json").write_text(json.dumps(infra.manifest(work, infra.is_infra)))
    update_config(tests, pytest_plugins=[["timeout", "pytest_timeout"]])
    (work / "pkg" / "mod.py").write_text(FIXED_MOD)
    logs = tmp_path / "logs"
    proc = run_verifier(tests, logs)
    assert proc.returncode == 0, proc.stderr
    d = details_of(logs)
    assert d["parse_status"] == "ok" and not d["tampered"], json.dumps(d)[:1500]
    assert float((logs / "reward.txt").read_text()) == 1.0
