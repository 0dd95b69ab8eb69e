"""Attack: a task's shipped judge modules load their siblings (``testfiles.py``, ``_log_*.py``)
from their own read-only folder. A module of the same name in a folder earlier on ``sys.path``
(the working tree, an agent-made site folder) must not be taken instead, nor one that code
running before the judge (a ``.pth`` file, ``sitecustomize``, ``usercustomize``) put in
``sys.modules`` under that name."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import repogym.shipped.infra as infra
import repogym.shipped.parsers as parsers
import repogym.shipped.testfiles as testfiles
from repogym import shipped

HOSTILE = "def is_test_path(path):\n    return False\n"


def _run(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_infra_takes_its_own_testfiles_over_one_earlier_on_the_path(tmp_path: Path) -> None:
    judge, hostile = tmp_path / "tests", tmp_path / "workspace"
    judge.mkdir()
    hostile.mkdir()
    shutil.copy(infra.__file__, judge / "infra.py")
    shutil.copy(testfiles.__file__, judge / "testfiles.py")
    (hostile / "testfiles.py").write_text(HOSTILE)
    code = (
        f"import sys; sys.path[:0] = [{str(hostile)!r}, {str(judge)!r}]\n"
        "import infra; print(infra.is_test_path('tests/test_a.py'))"
    )
    assert _run(code) == "True"


def test_parsers_take_their_own_modules_over_ones_earlier_on_the_path(tmp_path: Path) -> None:
    judge, hostile = tmp_path / "tests", tmp_path / "workspace"
    judge.mkdir()
    hostile.mkdir()
    here = Path(parsers.__file__).parent
    shutil.copy(here / "__init__.py", judge / "parsers.py")
    for part in here.glob("_log_*.py"):
        shutil.copy(part, judge / part.name)
    (hostile / "_log_pytest.py").write_text("def parse_pytest(*a, **k):\n    raise SystemExit(7)\n")
    code = (
        f"import sys; sys.path[:0] = [{str(hostile)!r}, {str(judge)!r}]\n"
        "import parsers, _log_pytest; print(_log_pytest.__file__)"
    )
    assert _run(code) == str(judge / "_log_pytest.py")


# --------------------------------------------------------------- planted in sys.modules first

PLANT = (
    "import sys, types\n"
    "for _name in {names!r}:\n"
    "    _fake = types.ModuleType(_name)\n"
    "    _fake.__file__ = 'planted'\n"
    "    sys.modules[_name] = _fake\n"
)
"""What a start-up hook of the agent's would run before the judge: stand-ins for its siblings."""


@pytest.fixture
def task_tests(tmp_path: Path) -> Path:
    """A graded task's tests/ folder (and a pr_diff task's verifier and scorer) as shipped."""
    tests = tmp_path / "tests"
    for rel in (*shipped.GRADED, "verifier.py"):
        (tests / rel).parent.mkdir(parents=True, exist_ok=True)
        (tests / rel).write_bytes(shipped.read(rel))
    (tests / "pr_diff").mkdir()
    for name in ("infra.py", "testfiles.py", "diff_reward.py"):
        (tests / "pr_diff" / name).write_bytes(shipped.read(name))
    (tests / "pr_diff" / "verifier.py").write_bytes(shipped.read("pr_diff_verifier.py"))
    return tests


def _planted_run(tests: Path, names: list[str], code: str) -> str:
    code = PLANT.format(names=names) + f"sys.path.insert(0, {str(tests)!r})\n" + code
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr  # a stand-in taken: its names are missing
    return done.stdout.strip()


def test_the_verifier_takes_its_own_modules_over_ones_already_in_sys_modules(
    task_tests: Path,
) -> None:
    """Every module of the graded task's folder planted first: the verifier's own siblings and
    the ones they load by name (``_log_*``, ``_tamper_*``, ``js_lex``, ``testfiles``)."""
    names = sorted(p.stem for p in task_tests.glob("*.py") if p.name != "verifier.py")
    assert {"testfiles", "_log_pytest", "_tamper_python", "js_lex"} <= set(names)
    code = (
        "import runpy\n"
        f"v = runpy.run_path({str(task_tests / 'verifier.py')!r}, run_name='judge')\n"
        f"print(sorted(set(sys.modules[n].__file__ for n in {names!r})))\n"
        "print(v['infra'].is_test_path('tests/test_a.py'))\n"
        "print([h['sig'] for h in v['tamper'].scan('m.py', 'import _pytest.runner\\n')])\n"
        "print(v['parsers'].parse_log('a.py::t PASSED\\n= 1 passed in 0.01s =\\n').tests)"
    )
    files, rule, scan, parsed = _planted_run(task_tests, names, code).splitlines()
    assert files == str(sorted(str(task_tests / f"{n}.py") for n in names))
    assert rule == "True"
    assert scan == "['runner-import:_pytest.runner']"
    assert parsed == "{'a.py::t': 'PASSED'}"


def test_the_pr_diff_verifier_takes_its_own_scorer_over_one_already_in_sys_modules(
    task_tests: Path,
) -> None:
    folder = task_tests / "pr_diff"
    code = (
        "import runpy\n"
        f"v = runpy.run_path({str(folder / 'verifier.py')!r}, run_name='judge')\n"
        "print(v['_load_scorer']().__file__)\n"
        "print(v['is_test_path'].__code__.co_filename)"
    )
    scorer, rule = _planted_run(folder, ["diff_reward", "infra", "testfiles"], code).splitlines()
    assert scorer == str(folder / "diff_reward.py")
    assert rule == str(folder / "testfiles.py")
