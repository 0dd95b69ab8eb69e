"""The graded verifier shipped in every runtime task, run directly (standard library only)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

TEMPLATES = resources.files("repogym.pipelines").joinpath("_templates")
PARSERS = resources.files("repogym.verify").joinpath("parsers.py")

UNITTEST_LOG = """\
test_a (tests.test_m.T.test_a) ... ok
test_b (tests.test_m.T.test_b) ... FAIL
test_c (tests.test_m.T.test_c) ... ok

----------------------------------------------------------------------
Ran 3 tests in 0.001s

FAILED (failures=1)
"""


def make_tests_dir(
    tmp_path: Path, command: str, f2p: list[str], p2p: list[str]
) -> tuple[Path, Path]:
    tests = tmp_path / "tests"
    work = tmp_path / "workspace"
    (tests / "files" / "tests").mkdir(parents=True)
    work.mkdir()
    shutil.copyfile(str(TEMPLATES.joinpath("verifier.py")), tests / "verifier.py")
    shutil.copyfile(str(PARSERS), tests / "parsers.py")
    (tests / "files" / "tests" / "test_m.py").write_text("# hidden test file\n")
    (tests / "config.json").write_text(
        json.dumps(
            {
                "workdir": str(work),
                "runner": "unittest",
                "command": command,
                "restore": ["tests/test_m.py"],
                "delete": ["tests/old.py"],
            }
        )
    )
    (tests / "f2p.json").write_text(json.dumps(f2p))
    (tests / "p2p.json").write_text(json.dumps(p2p))
    return tests, work


def run_verifier(
    tests: Path, logs: Path, python: str = sys.executable
) -> subprocess.CompletedProcess:
    logs.mkdir(exist_ok=True)
    env = {**os.environ, "REPOGYM_VERIFIER_LOGS": str(logs)}
    return subprocess.run(
        [python, str(tests / "verifier.py")], env=env, capture_output=True, text=True
    )


def test_grades_and_restores(tmp_path: Path) -> None:
    log_file = tmp_path / "log.txt"
    log_file.write_text(UNITTEST_LOG)
    tests, work = make_tests_dir(
        tmp_path,
        f"cat {log_file}",
        ["tests.test_m.T.test_a", "tests.test_m.T.test_b"],
        ["tests.test_m.T.test_c"],
    )
    (work / "tests").mkdir()
    (work / "tests" / "test_m.py").write_text("# the agent's edit\n")
    (work / "tests" / "old.py").write_text("# deleted by the test patch\n")
    logs = tmp_path / "logs"
    proc = run_verifier(tests, logs)
    assert proc.returncode == 0, proc.stderr
    assert (work / "tests" / "test_m.py").read_text() == "# hidden test file\n"
    assert not (work / "tests" / "old.py").exists()
    assert float((logs / "reward.txt").read_text()) == 0.5
    details = json.loads((logs / "reward-details.json").read_text())
    assert details["f2p_passed"] == 1 and details["p2p_passed"] == 1
    assert details["resolved"] is False and details["f2p_failing"] == ["tests.test_m.T.test_b"]
    assert details["parse_status"] == "ok" and details["runner"] == "unittest"


def test_unparsed_log_writes_no_reward(tmp_path: Path) -> None:
    tests, _ = make_tests_dir(tmp_path, "echo 'Segmentation fault'; exit 0", ["x.y.T.t"], [])
    logs = tmp_path / "logs"
    proc = run_verifier(tests, logs)
    assert proc.returncode == 1
    assert not (logs / "reward.txt").exists()
    assert json.loads((logs / "reward-details.json").read_text())["parse_status"] == "unparsed"


@pytest.mark.parametrize("version", ["3.6", "3.8"])
def test_runs_on_old_pythons(tmp_path: Path, version: str) -> None:
    candidates = sorted(Path("/root/.pyenv/versions").glob(f"{version}.*/bin/python{version}"))
    if not candidates:
        pytest.skip(f"no Python {version} installed here")
    log_file = tmp_path / "log.txt"
    log_file.write_text(UNITTEST_LOG)
    tests, _ = make_tests_dir(tmp_path, f"cat {log_file}", ["tests.test_m.T.test_a"], [])
    logs = tmp_path / "logs"
    proc = run_verifier(tests, logs, python=str(candidates[-1]))
    assert proc.returncode == 0, proc.stderr
    assert float((logs / "reward.txt").read_text()) == 1.0


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
